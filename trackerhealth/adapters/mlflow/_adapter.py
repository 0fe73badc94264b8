"""The MLflow adapter: list the selected runs, fetch each one's history (cached, incremental).

Reads go where they are fastest for the URI (REST pool, direct SQL, or MlflowClient for file
stores); writes always go through ``MlflowClient`` (see :mod:`trackerhealth.writers.mlflow_writer`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ...redaction import install_log_filter
from ...schema import RunHistory
from .._shared import default_cache_dir, parse_since
from ..base import Adapter, AdapterSpec, Fetched, NotPortable, RunSkipped
from . import _uri
from ._cache import HistoryCache, merge
from ._errors import ApiError, SelectionError, TrackerUnreachable, import_mlflow
from ._fetch import ClientFetcher, RestFetcher, SqlAlchemyFetcher, SqliteFetcher
from ._http import RestClient, RetryPolicy
from ._runs import ClientLister, MlflowRun, RestLister, select_runs
from ._sqlite_runs import SqliteLister

DEFAULT = object()


# The tag a user sets on the run its group is compared against (``mlflow.set_tag(BASELINE_TAG, "true")``).
BASELINE_TAG = "trackerhealth.baseline"


class MlflowAdapter(Adapter):
    """One tracking store and one selection of runs.

    ``cache_dir``: where histories are cached (default: the user cache dir; ``None`` disables the
    cache). ``workers`` bounds the requests in flight. ``ui_url`` is the MLflow UI to link to, when
    the URI is not the server itself (a database URI, say). Its writer
    (:class:`~trackerhealth.writers.mlflow_writer.MlflowWriter`, built by
    :func:`trackerhealth.trackers.writer_for`) writes through the public :attr:`client` and
    :meth:`current_tags`.
    """

    tracker = "mlflow"

    def __init__(self, uri: str | None, *, experiments: Iterable[str] = (), filter_string: str | None = None,
                 run_ids: Iterable[str] = (), since: str | None = None, cache_dir=DEFAULT, workers: int = 4,
                 ui_url: str | None = None, retry: RetryPolicy | None = None, timeout: float | None = None):
        self.uri = _uri.parse(uri)
        self.experiments = list(experiments)
        self.filter_string = filter_string
        self.run_ids = list(run_ids)
        self.since_ms = parse_since(since)
        self.workers = max(1, int(workers))
        self.ui_base = _uri.check_ui_url(ui_url) or self.uri.ui_base
        root = default_cache_dir() if cache_dir is DEFAULT else cache_dir
        self.cache = HistoryCache(Path(root) if root is not None else None, self.uri.cache_key())
        self._retry = retry or RetryPolicy.from_env(timeout)
        self._timeout = timeout
        self._rest: RestClient | None = None
        self._client = None
        self._fetcher = None
        self._runs: dict[str, MlflowRun] = {}
        self._lock = threading.Lock()
        if self.uri.kind == _uri.FILE:
            _uri.allow_file_store()

    # -- connections (lazy: a usage error never waits on the network) -----------------------
    @property
    def rest(self) -> RestClient:
        if self._rest is None:
            self._rest = RestClient(self.uri.raw, pool_size=self.workers + 2, retry=self._retry)
        return self._rest

    @property
    def client(self):
        """MlflowClient for this store (writes; listing for databases and file stores)."""
        if self._client is None:
            import_mlflow()
            from mlflow.tracking import MlflowClient

            self._bound_client_retries()
            install_log_filter()  # MlflowClient logs the URL it was given, credentials and all

            self._client = MlflowClient(tracking_uri=self.uri.mlflow_uri)
        return self._client

    def _bound_client_retries(self) -> None:
        """MlflowClient (the writes) retries with urllib3 on its own: 7 retries, factor 2, 120 s
        timeouts by default, which kept a scan 250-500 s on a dead server. It has no per-client
        setting, only MLflow's environment variables; a value the user set stays."""
        policy = self._retry
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(min(policy.retries, 2)))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, int(policy.timeout))))

    def _make_fetcher(self):
        if self.uri.kind == _uri.HTTP:
            return RestFetcher(self.rest, self.workers)
        if self.uri.dialect == "sqlite":
            return SqliteFetcher(self.uri.sqlite_path, self.workers)
        if self.uri.kind == _uri.DATABASE:
            return SqlAlchemyFetcher(self.uri.raw, self.workers)
        return ClientFetcher(self.client, self.workers)

    def check(self) -> None:
        """Raise TrackerUnreachable (with how to check it) when the store does not answer."""
        if self.uri.kind == _uri.HTTP:
            self.server_version = self.rest.check_reachable()

    # -- the adapter interface --------------------------------------------------------------
    def list_runs(self) -> list[MlflowRun]:
        self.check()
        sql = self._sqlite_lister() if not self.filter_string and self.since_ms is None else None
        if self.uri.kind == _uri.HTTP:
            lister = RestLister(self.rest)
        else:
            lister = sql or ClientLister(self._store_client())
        try:
            runs = select_runs(lister, self.experiments, self.filter_string, self.run_ids, self.since_ms, self.ui_base)
        finally:
            if sql is not None:
                sql.close()
        with self._lock:
            self._runs = {r.id: r for r in runs}
        return runs

    def _sqlite_lister(self) -> SqliteLister | None:
        """Read-only SQL for a sqlite store that exists and has MLflow's tables, else None."""
        path = self.uri.sqlite_path if self.uri.dialect == "sqlite" else None
        if path is None or not path.is_file():
            return None
        try:
            lister = SqliteLister(path)
            lister.con.execute("SELECT 1 FROM latest_metrics LIMIT 1").fetchall()
        except sqlite3.Error:
            return None  # not (yet) an MLflow database: MlflowClient says what it is
        return lister

    def experiment_ids(self) -> list[str]:
        """Every active experiment of the store (``--all-experiments``)."""
        self.check()
        lister = RestLister(self.rest) if self.uri.kind == _uri.HTTP else ClientLister(self._store_client())
        return lister.experiment_ids()

    def _store_client(self):
        try:
            return self.client
        except ImportError:
            raise
        except Exception as exc:  # noqa: BLE001 - opening a store raises many kinds; all mean "cannot open"
            if self.uri.kind == _uri.DATABASE and self.uri.dialect != "sqlite":
                raise TrackerUnreachable(f"cannot open the MLflow database {self.uri.redacted}: {exc}; check the URI, "
                                         "that the database is up, and the credentials") from None
            raise SelectionError(f"cannot open the MLflow store {self.uri.redacted}: {exc}") from None

    def run(self, run_id: str) -> MlflowRun:
        with self._lock:
            return self._runs[run_id]

    # -- groups ---------------------------------------------------------------------------------
    default_group_by = ("parent",)

    def group_values(self, run: MlflowRun, with_config: bool = False) -> dict[str, str]:
        """``params.X`` and ``tags.X`` for every param and user tag (the listing has them all, so
        ``with_config`` changes nothing), and ``parent`` (the parent run's id, as MLflow's nested
        runs and its sweeps record it)."""
        values = {f"params.{k}": v for k, v in run.ref.config.items()}
        values.update({f"tags.{k}": v for k, v in run.tags.items() if not k.startswith(("mlflow.", "trackerhealth."))})
        parent = run.tags.get("mlflow.parentRunId")
        if parent:
            values["parent"] = parent
        return values

    def marked_baseline(self, run: MlflowRun) -> bool:
        return run.tags.get(BASELINE_TAG, "").strip().lower() in ("true", "1", "yes")

    # -- re-scans and Ray workers ------------------------------------------------------------
    @property
    def scope(self) -> str:
        return f"mlflow/{self.uri.cache_key()}"

    def signature(self, run: MlflowRun) -> str:
        """Status, end, the latest point of every metric, params and the user's tags: what changes
        when the run's data does. trackerhealth's own ``trackerhealth.*`` tags (and MLflow's
        ``mlflow.*`` bookkeeping) are not in ``ref.tags``, so writing the health back changes nothing."""
        doc = [run.status, run.end_time, run.lifecycle_stage, run.ref.name,
               sorted((k, list(v)) for k, v in run.latest.items()), sorted(run.ref.config.items()),
               sorted(run.ref.tags)]
        return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()

    def spec(self) -> AdapterSpec:
        if self.uri.raw != self.uri.redacted:
            raise NotPortable(
                f"{self.uri.redacted} has credentials inside the URI, which would travel to every Ray worker in the "
                "task's arguments; remove them from the URI and set MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD "
                "(or MLFLOW_TRACKING_TOKEN) instead")
        raw = self.uri.raw
        if self.uri.kind == _uri.FILE:
            raw = self.uri.mlflow_uri  # absolute: a worker's working folder is not ours
        elif self.uri.dialect == "sqlite" and self.uri.sqlite_path is not None:
            raw = f"sqlite:///{self.uri.sqlite_path.resolve()}"
        # Workers keep no history cache: they share no disk with each other or with this process,
        # and a run reaches a worker only when it changed since the last scan.
        return AdapterSpec("mlflow", (("uri", raw), ("cache_dir", None), ("workers", self.workers),
                                      ("ui_url", self.ui_base), ("timeout", self._timeout)))

    def adopt(self, run: MlflowRun) -> MlflowRun:
        with self._lock:
            self._runs[run.id] = run
        return run

    def current_tags(self, run_id: str) -> dict[str, str]:
        return self.run(run_id).tags

    def fetch_history(self, run: MlflowRun) -> Fetched:
        if run.lifecycle_stage == "deleted":
            raise RunSkipped("deleted")
        if not run.latest:
            raise RunSkipped("no metrics logged")
        if self._fetcher is None:
            with self._lock:
                if self._fetcher is None:
                    self._fetcher = self._make_fetcher()
        plan = self.cache.plan(run.id, run.latest)
        fetched = self._fetcher.fetch(run, plan.fetch) if plan.fetch else []
        rows = merge(plan.cached, fetched, list(run.latest))
        n_fetched = sum(len(r) for _, _, r in fetched)
        if plan.fetch:
            self.cache.store(run.id, rows, run.status, run.end_time, changed=True)
        else:
            self.cache.touch(run.id)
        history = RunHistory.from_long(
            run.ref, rows["step"].to_numpy(), rows["key"].to_numpy(), rows["value"].to_numpy(),
            rows["timestamp"].to_numpy(dtype=np.float64) / 1000.0)
        return Fetched(history, fetched_points=n_fetched, cached_points=len(rows) - n_fetched,
                       requests=len(plan.fetch))

    def close(self) -> None:
        self.cache.flush()
        if self._fetcher is not None:
            self._fetcher.close()
            self._fetcher = None
        if self._rest is not None:
            self._rest.close()


__all__ = ["ApiError", "MlflowAdapter", "MlflowRun", "SelectionError", "TrackerUnreachable"]
