"""The projects of a W&B entity, for ``trackerhealth scan --entity ENTITY``.

    names = list_projects("my-team")  # ["llm-pretrain", "vision", ...], sorted

A scan of a whole entity starts from this list and scans each project as ``ENTITY/PROJECT`` with
:class:`~._api.WandbApiAdapter`. The list comes from the ``wandb`` SDK's public API,
``wandb.Api().projects(entity)`` (its ``GetProjects`` query, W&B's ``models`` connection, paged by
the SDK), so W&B Server and dedicated cloud work as they do for a project scan
(``WANDB_BASE_URL``, ``WANDB_API_KEY``).

Failures are told apart as the project adapter tells them (``WandbApiAdapter._connect`` and
``_identify``): nothing answering at the base URL (checked with a plain connection first, since
the SDK would retry a refused connection for minutes), or answers that stay 429/5xx within the
retry budget, raise :class:`~trackerhealth.adapters.base.TrackerUnreachable` naming
``WANDB_BASE_URL``; a missing or rejected API key, a malformed entity or one W&B refuses raise
``WandbSelectionError`` (a usage error). An entity with no projects, like one W&B does not know,
is an empty connection in W&B's API and gives ``[]``: the caller says "nothing to scan".

This module imports nothing from ``._api`` (or ``wandb``) at import time, so the package's lazy
``__init__`` and the adapter can import it without a cycle.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

from ...retry import RETRY_STATUS, RetryPolicy
from ..base import TrackerUnreachable

__all__ = ["list_projects"]


def list_projects(entity: str, *, base_url: str | None = None, timeout: float | None = None) -> list[str]:
    """The names of ``entity``'s W&B projects, sorted; ``[]`` when it has none."""
    from ._api import (
        DEFAULT_BASE_URL,
        WandbSelectionError,
        _no_answer,
        _sdk_failure,
        _short,
        _status_of,
        _transient,
        import_wandb,
    )

    name = (entity or "").strip()
    if not name or "/" in name:
        raise WandbSelectionError(f"W&B entity {entity!r}: expected a user or team name (e.g. my-team), "
                                  "not ENTITY/PROJECT")
    url = (base_url or os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    app_url = "https://wandb.ai" if url == DEFAULT_BASE_URL else url
    policy = RetryPolicy.from_env(timeout)
    policy = policy.with_(retries=min(policy.retries, 3), backoff=2.0)  # the SDK retries inside each call too

    wandb = import_wandb()
    _check(url, WandbSelectionError)

    def rejected_key(exc: BaseException) -> Exception:
        status = _status_of(exc)
        if status in RETRY_STATUS or status is None and _no_answer(exc):
            return TrackerUnreachable(f"W&B at {url} is not answering ({_short(exc)}); it was not asked about "
                                      "the API key yet — try again later, or check WANDB_BASE_URL")
        if status is not None and status not in (401, 403):
            return TrackerUnreachable(f"this is not a W&B server: {url} answered HTTP {status} ({_short(exc)}); "
                                      "check WANDB_BASE_URL")
        return WandbSelectionError(f"W&B at {url} did not accept the API key ({_short(exc)}); set WANDB_API_KEY "
                                   f"to a key from {app_url}/authorize (and WANDB_BASE_URL for W&B Server)")

    try:  # the SDK checks the key here, with its viewer query
        api = wandb.Api(timeout=max(1, int(policy.timeout)), overrides={"base_url": url})
    except wandb.errors.AuthenticationError as exc:
        raise rejected_key(exc) from None
    except wandb.errors.UsageError as exc:
        raise WandbSelectionError(f"{exc}; set WANDB_API_KEY (a key from {app_url}/authorize)") from None

    failures = (wandb.errors.CommError, _sdk_failure())
    try:
        projects = policy.call(lambda left: [p.name for p in api.projects(name)],
                               lambda exc: isinstance(exc, failures) and _transient(exc))
    except failures as exc:
        status = _status_of(exc)
        if _transient(exc):
            _check(url, WandbSelectionError)  # down now -> TrackerUnreachable
            if _no_answer(exc):
                raise TrackerUnreachable(f"W&B at {url} did not answer the project listing for {name} "
                                         f"{policy.elapsed_note()}; check the server, or raise --timeout") from None
            raise TrackerUnreachable(f"W&B at {url} answered HTTP {status} to the project listing for {name} "
                                     f"{policy.elapsed_note()}; try again later") from None
        if status == 401:
            raise rejected_key(exc) from None
        if status in (403, 404):
            raise WandbSelectionError(f"W&B entity {name} at {url}: HTTP {status} ({_short(exc)}); check the "
                                      "entity's name and that WANDB_API_KEY can see it") from None
        raise WandbSelectionError(f"W&B rejected the project listing for {name}: {_short(exc)}") from None
    except ValueError as exc:  # the SDK could not read the answer: no connection for this entity
        raise WandbSelectionError(f"W&B entity {name} not found at {url} ({_short(exc)}); check the entity's "
                                  "name and that WANDB_API_KEY can see it") from None
    return sorted(projects)


def _check(url: str, selection_error: type[Exception]) -> None:
    """Raise TrackerUnreachable when nothing answers at ``url`` (as ``WandbApiAdapter.check``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise selection_error(f"WANDB_BASE_URL {url!r} is not an http(s) URL "
                              "(e.g. https://api.wandb.ai or https://wandb.example.com)")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=10).close()
    except OSError as exc:
        raise TrackerUnreachable(f"W&B at {url} did not answer ({exc.strerror or exc}); check WANDB_BASE_URL, "
                                 "the network and proxy settings") from None
