"""Fetch metric histories: REST in parallel, direct SQL for databases, MlflowClient for file stores.

MLflow has no call that returns all metrics of a run, and a server answers each history call
slowly (≈ 13k points/s per thread on sqlite). So:

* :class:`RestFetcher` issues one request per key, all of a run's keys at once on a bounded pool
  shared by the whole scan; with the server's ``--workers`` that is 2-4x one thread. A whole key
  comes from the UI's ``get-history-bulk`` (plain JSON: cheaper for the server than the protobuf
  ``metrics/get-history``, which stays the paginated fallback past 25,000 points or where a
  gateway exposes only ``/api/``). Only new steps of a cached key use ``get-history-bulk-interval``
  (``start_step``/``end_step``): it returns every point when fewer than its 2,500-per-run cap
  fall in the range, and we fall back to the whole key when the cap is reached (the answer may
  be sampled then).
* :class:`SqliteFetcher` reads the ``metrics`` table of a sqlite store read-only (``mode=ro``),
  one indexed query per key in ``rowid`` (= log) order: ≈ 20-30x the REST API.
* :class:`SqlAlchemyFetcher` does the same for postgresql/mysql URIs through SQLAlchemy (an
  mlflow dependency) inside a read-only transaction where the database supports one.
* :class:`ClientFetcher` asks MlflowClient, for file stores (which read whole files anyway).

Every fetcher returns ``[(key, after_step, rows)]`` with rows ``key, step, value, timestamp``;
NaN comes back as NaN and the ±1.797e308 MLflow stores for ±Inf comes back as ±Inf.
"""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np
import pandas as pd

from ._cache import empty_rows
from ._errors import ApiError, RunSkipped

HISTORY_PAGE = 25_000  # bounded responses for long histories; one page for 10k-step metrics
BULK_HISTORY_CAP = 25_000  # get-history-bulk's most points per answer (MAX_HISTORY_RESULTS)
BULK_CAP = 2_500  # get-history-bulk-interval's per-run maximum (MAX_RESULTS_PER_RUN)
_FLOAT_MAX = np.finfo(np.float64).max

Wanted = list[tuple[str, "int | None"]]


def to_rows(key: str, steps, values, timestamps, is_nan=None) -> pd.DataFrame:
    """Columns for one key; restores the NaN and ±Inf that MLflow's store cannot hold as such."""
    v = np.asarray(values, dtype=np.float64)  # "NaN"/"Infinity" strings from proto-JSON parse too
    if is_nan is not None:
        v = np.where(np.asarray(is_nan, dtype=bool), np.nan, v)
    big = np.abs(v) == _FLOAT_MAX
    if big.any():
        v = np.where(big, np.copysign(np.inf, v), v)
    n = len(v)
    return pd.DataFrame({
        "key": np.full(n, key, dtype=object),
        "step": np.asarray(steps, dtype=np.int64),
        "value": v,
        "timestamp": np.asarray(timestamps, dtype=np.int64),
    })


def _json_rows(key: str, metrics: list[dict]) -> pd.DataFrame:
    if not metrics:
        return empty_rows()
    return to_rows(key, [int(m.get("step", 0)) for m in metrics], [m.get("value", 0.0) for m in metrics],
                   [int(m.get("timestamp", 0)) for m in metrics])


class _Pooled:
    """Runs a run's per-key jobs on the scan's shared, bounded pool; the first failure wins."""

    def __init__(self, workers: int):
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="trackerhealth-fetch")

    def _all(self, jobs):
        futures = [self.pool.submit(*job) for job in jobs]
        _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for fut in pending:
            fut.cancel()
        for fut in futures:
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                wait(pending)
                raise fut.exception()
        return [f.result() for f in futures]

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class RestFetcher(_Pooled):
    def __init__(self, rest, workers: int):
        super().__init__(workers)
        self.rest = rest
        # The UI's endpoints (/ajax-api/): get-history-bulk answers from plain dicts, not protobuf,
        # ≈ 1.3x the points per server-second of get-history; cleared when a gateway hides them.
        self.bulk_history = True
        self.bulk_interval = True
        self.history_cap = BULK_HISTORY_CAP
        self.page_size = HISTORY_PAGE

    def fetch(self, run, wanted: Wanted) -> list[tuple[str, int | None, pd.DataFrame]]:
        results = self._all([(self._one, run, key, after) for key, after in wanted])
        if results and all(len(rows) == 0 for _, _, rows in results):
            self._check_exists(run.id)  # a run deleted between listing and fetching reads as empty
        return results

    def _one(self, run, key: str, after: int | None):
        if after is not None and self.bulk_interval:
            last = run.latest[key][0]
            try:
                body = self.rest.get(
                    "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval",
                    {"run_ids": [run.id], "metric_key": key, "start_step": after + 1, "end_step": last,
                     "max_results": BULK_CAP},
                    what=f"fetching new steps of {key!r} of run {run.id}")
            except ApiError as exc:
                if exc.status not in (401, 403, 404, 405):
                    raise
                # Some gateways expose only /api/ (the UI's /ajax-api/ is theirs): whole keys then.
                self.bulk_interval = False
            else:
                metrics = body.get("metrics", [])
                if len(metrics) < BULK_CAP:
                    return key, after, _json_rows(key, metrics)
                # At the cap the answer may be a sample: take the whole key instead.
        return key, None, self._history(run.id, key)

    def _history(self, run_id: str, key: str) -> pd.DataFrame:
        if self.bulk_history:
            try:
                body = self.rest.get("/ajax-api/2.0/mlflow/metrics/get-history-bulk",
                                     {"run_id": [run_id], "metric_key": key, "max_results": self.history_cap},
                                     what=f"fetching {key!r} of run {run_id}")
            except ApiError as exc:
                if exc.status not in (401, 403, 404, 405):
                    raise
                self.bulk_history = False
            else:
                metrics = body.get("metrics", [])
                if len(metrics) < self.history_cap:
                    return _json_rows(key, metrics)
                # At the cap the answer was cut: page through get-history instead.
        pages, token = [], None
        while True:
            params = {"run_id": run_id, "metric_key": key, "max_results": self.page_size}
            if token:
                params["page_token"] = token
            body = self.rest.get("/api/2.0/mlflow/metrics/get-history", params,
                                 what=f"fetching {key!r} of run {run_id}")
            pages.extend(body.get("metrics", []))
            token = body.get("next_page_token")
            if not token:
                return _json_rows(key, pages)

    def _check_exists(self, run_id: str) -> None:
        try:
            doc = self.rest.get("/api/2.0/mlflow/runs/get", {"run_id": run_id}, what=f"getting run {run_id}")
        except ApiError as exc:
            if exc.not_found:
                raise RunSkipped("deleted during the scan") from None
            raise
        if doc.get("run", {}).get("info", {}).get("lifecycle_stage") == "deleted":
            raise RunSkipped("deleted during the scan")


# Per key, numbers only: a key column of strings costs more to convert than the query itself.
_COLS = "step, value, timestamp, is_nan"


def _numeric_rows(key: str, rows: list[tuple]) -> pd.DataFrame:
    if not rows:
        return empty_rows()
    cols = np.array(rows, dtype=np.float64)  # one C-level pass; steps and ms timestamps are exact < 2**53
    return to_rows(key, cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3])


def _sql(hint: str, after: int | None, named: bool = False) -> str:
    """One key's points (after a step); ``named`` uses :run/:key/:after placeholders (SQLAlchemy)."""
    run, key, step = (":run", ":key", ":after") if named else ("?", "?", "?")
    where = f"run_uuid = {run} AND key = {key}" + (f" AND step > {step}" if after is not None else "")
    return f"SELECT {_COLS} FROM metrics {hint}WHERE {where}"


class SqliteFetcher(_Pooled):
    """Read-only SQL on a sqlite tracking store; each thread keeps its own connection.

    One query per key on MLflow's ``(run_uuid, key, step)`` index, in ``rowid`` order: the order
    MLflow stored the points, so a restarted step counter reads as the restart it was.
    """

    HINT = "INDEXED BY index_metrics_run_uuid_key_step "  # else sqlite picks the run_uuid index and filters

    def __init__(self, path: Path, workers: int):
        super().__init__(workers)
        self.uri = Path(path).resolve().as_uri() + "?mode=ro"
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._hint = self.HINT

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            # timeout: the server may hold a write lock for a moment; wait rather than fail.
            con = sqlite3.connect(self.uri, uri=True, timeout=30.0, check_same_thread=False)
            self._local.con = con
            self._opened.append(con)
        return con

    def close(self) -> None:
        super().close()
        for con in self._opened:
            con.close()
        self._opened.clear()

    def _query(self, con, after: int | None, args: tuple) -> list[tuple]:
        try:
            return con.execute(_sql(self._hint, after) + " ORDER BY rowid", args).fetchall()
        except sqlite3.OperationalError as exc:
            if not self._hint or "no such index" not in str(exc):
                raise
            self._hint = ""  # an older MLflow schema without the index: let sqlite choose
            return con.execute(_sql("", after) + " ORDER BY rowid", args).fetchall()

    def fetch(self, run, wanted: Wanted) -> list[tuple[str, int | None, pd.DataFrame]]:
        con = self._con()
        out = []
        for key, after in wanted:
            args = (run.id, key) if after is None else (run.id, key, after)
            out.append((key, after, _numeric_rows(key, self._query(con, after, args))))
        if out and all(len(rows) == 0 for _, _, rows in out):
            self._check_exists(con, run.id)
        return out

    @staticmethod
    def _check_exists(con, run_id: str) -> None:
        found = con.execute("SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
        if found is None or found[0] == "deleted":
            raise RunSkipped("deleted during the scan")


class SqlAlchemyFetcher(_Pooled):
    """Read-only SQL on a postgresql/mysql (or any SQLAlchemy) tracking store."""

    def __init__(self, uri: str, workers: int):
        super().__init__(workers)
        from sqlalchemy import create_engine

        self.engine = create_engine(uri, pool_size=max(1, workers), pool_pre_ping=True)

    def fetch(self, run, wanted: Wanted) -> list[tuple[str, int | None, pd.DataFrame]]:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            if self.engine.dialect.name == "postgresql":
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")  # nothing here may write
            try:
                out = []
                for key, after in wanted:
                    args = {"run": run.id, "key": key, **({"after": after} if after is not None else {})}
                    # No rowid outside sqlite: log order is time order, as MLflow's own get-history.
                    result = conn.execute(text(_sql("", after, named=True) + " ORDER BY timestamp, step"), args)
                    out.append((key, after, _numeric_rows(key, [tuple(r) for r in result])))
                if out and all(len(rows) == 0 for _, _, rows in out):
                    found = conn.execute(text("SELECT lifecycle_stage FROM runs WHERE run_uuid = :run"),
                                         {"run": run.id}).fetchone()
                    if found is None or found[0] == "deleted":
                        raise RunSkipped("deleted during the scan")
                return out
            finally:
                conn.rollback()

    def close(self) -> None:
        super().close()
        self.engine.dispose()


class ClientFetcher(_Pooled):
    """MlflowClient.get_metric_history per key (file stores)."""

    def __init__(self, client, workers: int):
        super().__init__(workers)
        self.client = client

    def fetch(self, run, wanted: Wanted) -> list[tuple[str, int | None, pd.DataFrame]]:
        return self._all([(self._one, run.id, key, after) for key, after in wanted])

    def _one(self, run_id: str, key: str, after: int | None):
        metrics = self.client.get_metric_history(run_id, key)
        if after is not None:
            metrics = [m for m in metrics if m.step > after]
        rows = to_rows(key, [m.step for m in metrics], [m.value for m in metrics], [m.timestamp for m in metrics])
        return key, after, rows
