"""The projects of a W&B entity, for ``trackerhealth scan --entity ENTITY``.

    names = list_projects("my-team")  # ["llm-pretrain", "vision", ...], sorted

A scan of a whole entity starts from this list and scans each project as ``ENTITY/PROJECT`` with
:class:`~._api.WandbApiAdapter`. The list comes from the ``wandb`` SDK's public API,
``wandb.Api().projects(entity)`` (its ``GetProjects`` query, W&B's ``models`` connection, paged by
the SDK), so W&B Server and dedicated cloud work as they do for a project scan
(``WANDB_BASE_URL``, ``WANDB_API_KEY``).

The connection is a :class:`~._api.WandbApiAdapter`'s (its ``api`` and ``retrying``), so failures
are told apart exactly as for a project scan: nothing answering at the base URL (checked with a
plain connection first, since the SDK would retry a refused connection for minutes), or answers
that stay 429/5xx within the retry budget, raise :class:`~trackerhealth.adapters.base.TrackerUnreachable` naming
``WANDB_BASE_URL``; a missing or rejected API key, a malformed entity or one W&B refuses raise
``WandbSelectionError`` (a usage error). An entity with no projects, like one W&B does not know,
is an empty connection in W&B's API and gives ``[]``: the caller says "nothing to scan".

This module imports nothing from ``._api`` (or ``wandb``) at import time, so the package's lazy
``__init__`` and the adapter can import it without a cycle.
"""

from __future__ import annotations

__all__ = ["list_projects"]

# The adapter needs a project in its path; the entity's listing never reads this one.
_NO_PROJECT = "-"


def list_projects(entity: str, *, base_url: str | None = None, timeout: float | None = None) -> list[str]:
    """The names of ``entity``'s W&B projects, sorted; ``[]`` when it has none."""
    from ..base import TrackerUnreachable
    from ._api import WandbApiAdapter, WandbSelectionError, _sdk_failure, _short, _status_of, _transient, import_wandb

    name = (entity or "").strip()
    if not name or "/" in name:
        raise WandbSelectionError(f"W&B entity {entity!r}: expected a user or team name (e.g. my-team), "
                                  "not ENTITY/PROJECT")
    wandb = import_wandb()
    adapter = WandbApiAdapter(f"{name}/{_NO_PROJECT}", cache_dir=None, timeout=timeout, base_url=base_url)
    api, url, what = adapter.api, adapter.base_url, f"the project listing for {name}"
    try:
        projects = adapter.retrying(lambda: [p.name for p in api.projects(name)], what)
    except (wandb.errors.CommError, _sdk_failure()) as exc:  # what retrying re-raises: the SDK's own errors
        status = _status_of(exc)
        if _transient(exc):
            raise TrackerUnreachable(f"W&B at {url} answered HTTP {status} to {what} "
                                     f"{adapter.policy.elapsed_note()}; try again later") from None
        if status == 401:
            raise adapter.rejected_key(exc) from None
        if status in (403, 404):
            raise WandbSelectionError(f"W&B entity {name} at {url}: HTTP {status} ({_short(exc)}); check the "
                                      "entity's name and that WANDB_API_KEY can see it") from None
        raise WandbSelectionError(f"W&B rejected the project listing for {name}: {_short(exc)}") from None
    except ValueError as exc:  # the SDK could not read the answer: no connection for this entity
        raise WandbSelectionError(f"W&B entity {name} not found at {url} ({_short(exc)}); check the entity's "
                                  "name and that WANDB_API_KEY can see it") from None
    return sorted(projects)
