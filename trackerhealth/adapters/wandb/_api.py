"""The W&B API adapter: list a project's runs with server-side filters, fetch each history.

    adapter = WandbApiAdapter("my-team/llm-pretrain", states=["running", "finished"])
    result = scan(adapter, trackers.writer_for(adapter))

Everything goes through the ``wandb`` SDK's public API (``wandb.Api``; ``WANDB_API_KEY`` and
``WANDB_BASE_URL`` from the environment, so W&B Server and dedicated cloud work too):

* listing: ``api.runs(path, filters=…)`` — W&B's MongoDB-style filters, built from ``--state``,
  ``--tag``, ``--run``, ``--since`` / the last scan's start (``updatedAt``) and the user's own
  ``--filter`` JSON, all applied by the server;
* history: ``run.scan_history(min_step=…, use_cache=False)`` — the SDK reads the run's parquet
  export and then the live tail. Its own parquet cache is not used: it is keyed by run, not by
  export, so a run whose export grew was read stale (measured with wandb 0.31); the project's cache
  (:mod:`._api_cache`) keeps converted points and asks only for steps after the cached ones;
* system metrics: ``run.history(stream="system", samples=…)``.

wandb-core retries 429 and 5xx answers itself (honouring ``Retry-After``); a request that still
fails, or that the SDK gives up waiting for, is retried here under the shared policy
(:mod:`trackerhealth.retry`: "transient" by exception type and HTTP status, within ``--timeout``)
before the run is reported as failed. The key and the server are checked first, with the viewer
query the SDK itself sends (``GetDefaultEntity``). Runs are fetched in parallel by the scan loop (``parallel_runs`` at a time).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit

from ...config_facts import unwrap
from ...redaction import redact_secrets
from ...retry import RETRY_STATUS, RetryPolicy
from ...schema import RunHistory, RunRef
from .._shared import default_cache_dir
from ..base import Adapter, AdapterSpec, Fetched, RunSkipped, SelectionError, TrackerUnreachable
from ._api_cache import ApiHistoryCache
from ._api_rows import LongRows, history_rows, system_rows
from ._records import INSTALL_HINT, WandbMissing

DEFAULT = object()
BASELINE_TAG = "trackerhealth:baseline"  # the tag a user puts on the run its group is compared with
# W&B's run-filter field for each group key a sibling listing can ask for.
_SIBLING_FILTERS = {"group": "group", "job_type": "jobType", "sweep": "sweep"}
DEFAULT_BASE_URL = "https://api.wandb.ai"
STATES = ("running", "finished", "crashed", "failed", "killed", "preempted", "preempting", "pending")
PAGE_SIZE = 10_000  # history rows per HistoryPage request (the SDK's default is 1,000)
SYSTEM_SAMPLES = 20_000  # system-metric rows asked for; W&B samples longer runs down to this
RESCAN_OVERLAP = timedelta(minutes=10)  # clock skew between this machine and the server


class WandbSelectionError(SelectionError):
    """The selection cannot be used (bad path, filter JSON, unknown project, rejected key)."""


def import_wandb():
    try:
        import wandb
    except ImportError as exc:
        raise WandbMissing(f"scanning W&B projects needs the wandb package ({exc}); install it with: "
                           f"{INSTALL_HINT}") from None
    return wandb


def split_path(path: str) -> tuple[str | None, str]:
    """``entity/project`` (or a bare ``project`` in the key's default entity)."""
    parts = [p for p in (path or "").strip().strip("/").split("/") if p]
    if len(parts) == 1:
        return None, parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise WandbSelectionError(f"W&B project {path!r}: expected ENTITY/PROJECT (e.g. my-team/llm-pretrain)")


def parse_filter(text: str | dict | None) -> dict:
    if not text:
        return {}
    if isinstance(text, dict):
        return text
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise WandbSelectionError(
            f"--filter for W&B takes W&B's filter JSON (MongoDB style), e.g. "
            f"'{{\"config.optimizer\": \"adam\", \"summary_metrics.loss\": {{\"$lt\": 1}}}}'; "
            f"{text!r} is not JSON ({exc.msg})") from None
    if not isinstance(spec, dict):
        raise WandbSelectionError(f"--filter for W&B must be a JSON object, got {type(spec).__name__}")
    return spec


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


@dataclass
class WandbApiRun:
    """One listed run: its :class:`RunRef`, the SDK's run object, and what the listing says of its
    history (line count, heartbeat): with ``ref.state``, what the cache compares."""

    ref: RunRef
    sdk: Any  # None while the run travels to another process (see WandbApiAdapter.portable)
    lines: int | None
    heartbeat: str | None
    attrs: dict | None = None  # the listing's attributes, kept while ``sdk`` is None


class WandbApiAdapter(Adapter):
    """One W&B project and one selection of its runs.

    Its writer (:class:`~trackerhealth.writers.wandb_writer.WandbWriter`, built by
    :func:`trackerhealth.trackers.writer_for`) writes through the public ``api``, ``entity``,
    ``project``, ``path``, ``app_url`` and :meth:`retrying`.
    """

    tracker = "wandb"

    def __init__(self, path: str, *, filters: str | dict | None = None, states: Iterable[str] = (),
                 tags: Iterable[str] = (), run_ids: Iterable[str] = (), since_ms: int | None = None,
                 incremental: bool = True, cache_dir=DEFAULT, workers: int = 4, timeout: float | None = None,
                 retries: int | None = None, base_url: str | None = None):
        self.entity, self.project = split_path(path)
        self.user_filter = parse_filter(filters)
        self.states = [s.lower() for s in states]
        bad = [s for s in self.states if s not in STATES]
        if bad:
            raise WandbSelectionError(f"--state {bad[0]!r} is not a W&B run state; use one of {', '.join(STATES)}")
        self.tags = list(tags)
        self.run_ids = list(run_ids)
        self.since_ms = since_ms
        self.incremental = incremental
        self.workers = max(1, int(workers))
        self.parallel_runs = self.workers  # runs fetched at once by the scan loop
        policy = RetryPolicy.from_env(timeout)
        # The SDK already retries inside each call, so ours are few: the budget is what bounds the wait.
        self.policy = policy.with_(retries=min(policy.retries, 3) if retries is None else retries, backoff=2.0)
        self.timeout = self.policy.timeout
        self.base_url = (base_url or os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._cache_root = default_cache_dir() if cache_dir is DEFAULT else cache_dir
        self.cache: ApiHistoryCache | None = None
        self._api = None
        self._lock = threading.Lock()
        self._scan_started = datetime.now(timezone.utc)
        self.listed_since: str | None = None  # the updatedAt bound this listing used, if any

    # -- connection --------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return f"{self.entity}/{self.project}"

    @property
    def api(self):
        if self._api is None:
            with self._lock:
                if self._api is None:
                    self._api = self._connect()
        return self._api

    def _connect(self):
        wandb = import_wandb()
        self.check()
        try:
            api = wandb.Api(timeout=max(1, int(self.timeout)), overrides={"base_url": self.base_url})
        except wandb.errors.AuthenticationError as exc:
            raise self.rejected_key(exc) from None
        except wandb.errors.UsageError as exc:
            raise WandbSelectionError(f"{exc}; set WANDB_API_KEY (a key from {self.app_url}/authorize)") from None
        entity = self._identify(api)
        if self.entity is None:
            self.entity = entity
            if not self.entity:
                raise WandbSelectionError(f"no default entity for this API key: pass ENTITY/{self.project}")
        return api

    def rejected_key(self, exc: BaseException) -> Exception:
        status = _status_of(exc)
        if status in RETRY_STATUS or status is None and _no_answer(exc):
            return TrackerUnreachable(f"W&B at {self.base_url} is not answering ({_short(exc)}); it was not asked "
                                      "about the API key yet — try again later, or check WANDB_BASE_URL")
        if status is not None and status not in (401, 403):
            return TrackerUnreachable(f"this is not a W&B server: {self.base_url} answered HTTP {status} "
                                      f"({_short(exc)}); check WANDB_BASE_URL")
        return WandbSelectionError(
            f"W&B at {self.base_url} did not accept the API key ({_short(exc)}); set WANDB_API_KEY to a key from "
            f"{self.app_url}/authorize (and WANDB_BASE_URL for W&B Server)")

    def _identify(self, api) -> str | None:
        """The viewer query first (the SDK's own ``GetDefaultEntity``): it tells a W&B server that
        rejects the key from one that is down, and from something that is not W&B at all."""
        try:
            entity = self.retrying(lambda: api.default_entity, "the viewer query (who this API key is)")
        except TrackerUnreachable:
            raise
        except Exception as exc:  # noqa: BLE001 - classified below by type and status
            status = _status_of(exc)
            if status in (401, 403):
                raise self.rejected_key(exc) from None
            if status in RETRY_STATUS:
                raise TrackerUnreachable(f"W&B at {self.base_url} answered HTTP {status} to the viewer query "
                                         f"{self.policy.elapsed_note()}; try again later") from None
            raise TrackerUnreachable(f"this is not a W&B server: {self.base_url} answered the viewer query with "
                                     f"{_short(exc)}; check WANDB_BASE_URL (host, port and path)") from None
        return entity

    @property
    def app_url(self) -> str:
        return "https://wandb.ai" if self.base_url == DEFAULT_BASE_URL else self.base_url

    def check(self) -> None:
        """Raise TrackerUnreachable when nothing answers at the base URL (before the SDK, which
        would retry a refused connection for minutes)."""
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise WandbSelectionError(f"WANDB_BASE_URL {self.base_url!r} is not an http(s) URL "
                                      "(e.g. https://api.wandb.ai or https://wandb.example.com)")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname, port), timeout=10).close()
        except OSError as exc:
            raise TrackerUnreachable(
                f"W&B at {self.base_url} did not answer ({exc.strerror or exc}); check WANDB_BASE_URL, the "
                "network and proxy settings") from None

    def _ensure_cache(self) -> ApiHistoryCache:
        if self.cache is None:
            host = urlsplit(self.base_url).netloc
            self.cache = ApiHistoryCache(self._cache_root, host, self.entity or "_", self.project)
        return self.cache

    # -- listing -----------------------------------------------------------------------------
    def filters(self, updated_since: str | None = None) -> dict:
        """The server-side filter for this selection (the user's ``--filter`` and ours, ANDed),
        with ``updatedAt > updated_since`` when given."""
        clauses: list[dict] = []
        if self.user_filter:
            clauses.append(self.user_filter)
        if self.states:
            clauses.append({"state": {"$in": self.states}})
        if self.tags:
            clauses.append({"tags": {"$in": self.tags}})
        if self.run_ids:
            clauses.append({"name": {"$in": self.run_ids}})
        if updated_since is not None:
            clauses.append({"updatedAt": {"$gt": updated_since}})
        if not clauses:
            return {}
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def _updated_since(self) -> str | None:
        bounds = []
        if self.since_ms is not None:
            bounds.append(datetime.fromtimestamp(self.since_ms / 1000, timezone.utc))
        cache = self._ensure_cache()
        if self.incremental and cache.last_scan and not self.run_ids:
            last = datetime.fromisoformat(cache.last_scan)
            bounds.append((last if last.tzinfo else last.replace(tzinfo=timezone.utc)) - RESCAN_OVERLAP)
        return _iso(max(bounds)) if bounds else None

    def list_runs(self) -> list[WandbApiRun]:
        wandb = import_wandb()
        api = self.api
        self._scan_started = datetime.now(timezone.utc)
        self.listed_since = self._updated_since()
        spec = self.filters(self.listed_since)
        try:
            listed = list(self.retrying(lambda: list(api.runs(self.path, filters=spec, per_page=100)), "listing runs"))
        except ValueError as exc:
            if "Could not find project" in str(exc):
                raise WandbSelectionError(
                    f"W&B project {self.path} not found at {self.base_url}; check ENTITY/PROJECT and that "
                    "WANDB_API_KEY can see it") from None
            raise
        except wandb.errors.CommError as exc:
            raise WandbSelectionError(f"W&B rejected the run listing for {self.path}: {exc}") from None
        return [self._listed(r) for r in listed]

    def _listed(self, sdk) -> WandbApiRun:
        attrs = getattr(sdk, "_attrs", {})
        heartbeat = attrs.get("heartbeatAt")
        ref = RunRef(tracker=self.tracker, project=self.path, id=sdk.id, name=sdk.name or sdk.id,
                     state=sdk.state, updated_at=_epoch(heartbeat), url=self._run_url(sdk.id),
                     tags=tuple(sdk.tags or ()))
        return WandbApiRun(ref, sdk, attrs.get("historyLineCount"), heartbeat)

    def _run_url(self, run_id: str) -> str:
        return f"{self.app_url}/{self.entity}/{self.project}/runs/{run_id}"

    # -- groups ---------------------------------------------------------------------------------
    # Not job_type, though issue #15 named it: "train" is on nearly every run of a project, whatever
    # its model, and comparing different models' runs would call the smaller ones slow.
    default_group_by = ("group", "sweep")

    def group_values(self, run: WandbApiRun, with_config: bool = False) -> dict[str, str]:
        """``group``, ``sweep`` (its name) and ``job_type`` from the listing; with ``with_config``
        the run's config as ``config.NAME`` (the listing leaves it out: one request per run)."""
        sdk = run.sdk
        out = {k: str(v) for k, v in (("group", sdk.group), ("sweep", sdk.sweep_name), ("job_type", sdk.job_type)) if v}
        if with_config:
            config = self.retrying(lambda: dict(sdk.config or {}), f"reading {run.ref.id}'s config")
            for name, value in config.items():
                if not name.startswith("_"):  # W&B's own bookkeeping (_wandb)
                    out[f"config.{name}"] = str(unwrap(value))
        return out

    def marked_baseline(self, run: WandbApiRun) -> bool:
        return BASELINE_TAG in run.ref.tags

    def with_siblings(self, runs: Sequence[WandbApiRun], group_by: Sequence[str] | None) -> list[WandbApiRun]:
        """After an incremental listing, the unchanged runs of the listed runs' groups: one listing
        per group value (W&B filters on group, job type and sweep), or, for a config key, the whole
        selection again."""
        runs = list(runs)
        if self.listed_since is None or not runs:
            return runs  # a complete listing already
        keys = list(group_by or self.default_group_by)
        if any(k not in _SIBLING_FILTERS for k in keys):
            wanted = [self.filters(None)]
        else:
            values = {(k, v) for run in runs for k, v in self.group_values(run).items() if k in keys}
            base = self.filters(None)
            wanted = [{"$and": [base, {_SIBLING_FILTERS[k]: v}]} if base else {_SIBLING_FILTERS[k]: v}
                      for k, v in sorted(values)]
        seen = {r.ref.id for r in runs}
        api = self.api
        for spec in wanted:
            found = self.retrying(lambda spec=spec: list(api.runs(self.path, filters=spec, per_page=100)), "listing a group's runs")
            for sdk in found:
                if sdk.id not in seen:
                    seen.add(sdk.id)
                    runs.append(self._listed(sdk))
        return runs

    # -- re-scans and Ray workers ------------------------------------------------------------
    @property
    def scope(self) -> str:
        return f"wandb/{urlsplit(self.base_url).netloc}/{self.path}"

    def signature(self, run: WandbApiRun) -> str:
        """History lines, heartbeat, state, config and the user's tags. trackerhealth's writes
        (``health:*`` tags, ``trackerhealth/*`` summary keys, the dashboard file) touch none of them."""
        config = getattr(run.sdk, "_attrs", {}).get("config") if run.sdk is not None else (run.attrs or {}).get("config")
        user_tags = sorted(t for t in run.ref.tags if not t.startswith("health:"))
        doc = [run.lines, run.heartbeat, run.ref.state, run.ref.name, user_tags, config]
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()

    def spec(self) -> AdapterSpec:
        self.api  # resolves the entity of a bare PROJECT from the key  # noqa: B018
        # Workers keep no history cache: they share no disk; a run reaches one only when it changed.
        return AdapterSpec("wandb", (("path", self.path), ("cache_dir", None), ("workers", self.workers),
                                     ("timeout", self.timeout), ("base_url", self.base_url)))

    def portable(self, run: WandbApiRun) -> WandbApiRun:
        if run.sdk is None:
            return run
        return dataclasses.replace(run, sdk=None, attrs=dict(getattr(run.sdk, "_attrs", {})))

    def adopt(self, run: WandbApiRun) -> WandbApiRun:
        if run.sdk is not None:
            return run
        from . import _sdk

        sdk = _sdk.listed_run(self.api, self.entity, self.project, run.ref.id, run.attrs or {"name": run.ref.id})
        return dataclasses.replace(run, sdk=sdk, attrs=None)

    # -- fetching ----------------------------------------------------------------------------
    def fetch_history(self, run: WandbApiRun) -> Fetched:
        cache = self._ensure_cache()
        signature = cache.signature(run.lines, run.heartbeat, run.ref.state)
        entry, cached, cached_system = cache.lookup(run.ref.id)
        # The config (what corroborates a finding and splits a group by its loss setting): the
        # listing is lazy and leaves it out, so one request per run that is analysed.
        run = dataclasses.replace(run, ref=dataclasses.replace(run.ref, config=self._config(run)))
        if entry is not None and all(entry.get(k) == v for k, v in signature.items()):
            cache.touch(run.ref.id)
            return Fetched(self._history(run, cached, cached_system, []), cached_points=len(cached) + len(cached_system),
                           requests=1)
        history = cached if entry is not None else LongRows()
        min_step = int(entry["last_step"]) + 1 if entry is not None else 0
        rows = self._read(run, lambda: list(run.sdk.scan_history(page_size=PAGE_SIZE, min_step=min_step,
                                                                  use_cache=False)), "history")
        n_cached = len(history)
        history_rows(rows, history)
        if not rows and not len(history):
            self._raise_if_gone(run)
        events = self._read(run, lambda: run.sdk.history(stream="system", samples=SYSTEM_SAMPLES, pandas=False),
                            "system metrics")
        system, note = system_rows(events or [], history)
        last_step = max((int(r["_step"]) for r in rows if isinstance(r.get("_step"), (int, float))),
                        default=int(entry["last_step"]) if entry is not None else -1)
        cache.store(run.ref.id, history, system, signature, last_step)
        fetched = len(history) - n_cached + len(system)
        return Fetched(self._history(run, history, system, [note] if note else []), fetched_points=fetched,
                       cached_points=n_cached, requests=3)

    def _config(self, run: WandbApiRun) -> dict:
        """The run's config as ``wandb.init`` got it (W&B's ``{"value": …}`` wrappers taken off)."""
        config = self._read(run, lambda: dict(run.sdk.config or {}), "config") or {}
        return {k: unwrap(v) for k, v in config.items() if not str(k).startswith("_wandb")}

    def _history(self, run: WandbApiRun, history: LongRows, system: LongRows, notes: list[str]) -> RunHistory:
        import numpy as np

        from . import _stable_order

        h, s = history.arrays(), system.arrays()
        built = RunHistory.from_long(run.ref, *(np.concatenate((a, b)) for a, b in zip(h, s)))
        # The API hands keys back sorted by name (parquet columns), not in the order they were
        # logged: order them as the local reader orders wandb-core logs, so per-layer metrics
        # come in model order (layers.2 before layers.10) for the vanishing-gradient diagnosis.
        keys = _stable_order(built, set(system.keys) - set(history.keys))
        return RunHistory(built.ref, {k: built[k] for k in keys}, [*built.notes, *notes])

    def _read(self, run: WandbApiRun, call, what: str):
        """One read of a run, retried; when it fails, a run deleted since the listing is skipped,
        not failed."""
        try:
            return self.retrying(call, f"reading {run.ref.id}'s {what}")
        except TrackerUnreachable:
            raise
        except Exception:
            self._raise_if_gone(run)
            raise

    def _raise_if_gone(self, run: WandbApiRun) -> None:
        from . import _sdk

        try:
            _sdk.fresh_run(self.api, self.entity, self.project, run.ref.id)
        except ValueError as exc:  # the SDK's RunNotFoundError
            if "Could not find run" in str(exc):
                raise RunSkipped("deleted during the scan") from None
            raise

    def retrying(self, call: Callable[[], Any], what: str) -> Any:
        """``call()`` under the shared retry policy: retried while the failure is transient (by
        exception type and HTTP status), within ``--timeout``. The W&B writer uses it too.

        A failure that stays transient ends in TrackerUnreachable when the server is down or gave
        no answer in time (naming it), else in the SDK's own error (one run's problem)."""
        wandb = import_wandb()
        failures = (wandb.errors.CommError, _sdk_failure())
        try:
            return self.policy.call(lambda left: call(), lambda exc: isinstance(exc, failures) and _transient(exc))
        except failures as exc:
            if _transient(exc):
                self.check()  # unreachable now -> TrackerUnreachable, else the error below
                if _no_answer(exc):
                    raise TrackerUnreachable(f"W&B at {self.base_url} did not answer {what} "
                                             f"{self.policy.elapsed_note()}; check the server, or raise --timeout") from None
            raise


    # -- the scan's end ---------------------------------------------------------------------
    def scan_complete(self) -> None:
        """Called after a scan with no unreachable/failed runs: the next scan lists only runs
        updated since this one started."""
        self._ensure_cache().mark_scan(_iso(self._scan_started))

    def close(self) -> None:
        if self.cache is not None:
            self.cache.flush()


def _sdk_failure():
    try:
        from wandb.sdk.lib.service.service_connection import WandbApiFailedError
    except ImportError:  # another SDK layout: only CommError is retried
        return RuntimeError
    return WandbApiFailedError


def _status_of(exc: BaseException) -> int | None:
    """The HTTP status behind an SDK error: wandb-core's ApiErrorResponse, or the requests
    response a CommError wraps."""
    response = getattr(exc, "response", None)
    status = getattr(response, "http_status", None)
    if isinstance(status, int) and status:
        return status
    inner = getattr(exc, "exc", None)
    status = getattr(getattr(inner, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def _no_answer(exc: BaseException) -> bool:
    """No HTTP answer at all: wandb-core gave up waiting (no error response), or the transport
    failed (a requests connection error or timeout inside a CommError)."""
    if isinstance(exc, _sdk_failure()):
        response = getattr(exc, "response", None)
        return response is None or not getattr(response, "http_status", 0)
    inner = getattr(exc, "exc", None)
    try:
        import requests
    except ImportError:
        return False
    return isinstance(inner, (requests.ConnectionError, requests.Timeout))


def _transient(exc: BaseException) -> bool:
    """Worth another try: no answer, or an answer whose status says "later" (429, 5xx)."""
    return _no_answer(exc) or _status_of(exc) in RETRY_STATUS


def _short(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(redact_secrets(str(exc)).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


