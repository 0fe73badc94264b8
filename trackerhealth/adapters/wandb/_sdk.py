"""The two things trackerhealth needs from the ``wandb`` SDK beyond its public objects.

``wandb.Api`` has no public "run this GraphQL document" call since the SDK moved its transport
into ``wandb-core`` (0.30): ``wandb-workspaces`` reaches the same private ``_service_api`` for its
report mutations, and so does this module — in this one place, checked, with a clear error if an
SDK release moves it. The documents sent are the SDK's own (see ``writers/wandb_writer.py``).
"""

from __future__ import annotations

import json
from typing import Any

from ._records import INSTALL_HINT


class SdkChanged(RuntimeError):
    """The installed wandb SDK no longer offers what trackerhealth uses; the message says which."""


def graphql(api, query: str, variables: dict[str, Any] | None = None) -> dict:
    service = getattr(api, "__dict__", {}).get("_service_api")
    if service is None or not hasattr(service, "execute_graphql"):
        raise SdkChanged("this wandb SDK has no GraphQL transport trackerhealth knows (wandb.Api()._service_api); "
                         f"install a supported one with: {INSTALL_HINT}")
    return service.execute_graphql(query, variables=dict(variables or {}))


def fresh_run(api, entity: str, project: str, run_id: str):
    """The run as the server has it now (``wandb.Api.run`` caches its answer per path)."""
    from wandb.apis.public import Run

    service = getattr(api, "__dict__", {}).get("_service_api")
    if service is None:
        raise SdkChanged(f"wandb.Api has no _service_api; install a supported SDK with: {INSTALL_HINT}")
    return Run(service, entity, project, run_id, lazy=False)


def listed_run(api, entity: str, project: str, run_id: str, attrs: dict):
    """The run object the listing gave, rebuilt from its attributes in another process (no request)."""
    from wandb.apis.public import Run

    service = getattr(api, "__dict__", {}).get("_service_api")
    if service is None:
        raise SdkChanged(f"wandb.Api has no _service_api; install a supported SDK with: {INSTALL_HINT}")
    return Run(service, entity, project, run_id, attrs=attrs)


def summary_of(run) -> dict:
    raw = run._attrs.get("summaryMetrics") or {}
    return json.loads(raw) if isinstance(raw, (str, bytes)) else dict(raw)
