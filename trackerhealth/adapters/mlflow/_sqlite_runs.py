"""Listing a sqlite tracking store with read-only SQL, for scans without ``--filter``.

``MlflowClient`` on a sqlite URI imports mlflow and SQLAlchemy and checks the schema's migrations
before its first answer: about 1.5 s, which is most of a re-scan in which every run keeps its
report. The five tables a listing needs (experiments, runs, tags, params, latest_metrics) are
read here directly, read-only, into the REST JSON shape the other listers yield, so
:func:`._runs.parse_run` reads all three the same. MLflow's filter language is MLflow's to parse:
a scan with ``--filter`` or ``--since`` lists through ``MlflowClient`` (:class:`._runs.ClientLister`).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SqliteLister"]


class SqliteLister:
    """The lister interface of :mod:`._runs` on a sqlite file, read-only."""

    def __init__(self, path: Path):
        uri = Path(path).resolve().as_uri() + "?mode=ro"
        # timeout: the server may hold a write lock for a moment; wait rather than fail.
        self.con = sqlite3.connect(uri, uri=True, timeout=30.0)

    def close(self) -> None:
        self.con.close()

    def experiment(self, ident: str) -> tuple[str, str] | None:
        rows = []
        if ident.isdigit():
            rows = self.con.execute("SELECT experiment_id, name FROM experiments WHERE experiment_id = ? "
                                    "AND lifecycle_stage = 'active'", (int(ident),)).fetchall()
        if not rows:
            rows = self.con.execute("SELECT experiment_id, name FROM experiments WHERE name = ? "
                                    "AND lifecycle_stage = 'active'", (ident,)).fetchall()
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def experiment_names(self, limit: int = 50) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT name FROM experiments WHERE lifecycle_stage = 'active' "
                                               "ORDER BY experiment_id LIMIT ?", (limit,))]

    def experiment_ids(self) -> list[str]:
        return [str(r[0]) for r in self.con.execute("SELECT experiment_id FROM experiments "
                                                    "WHERE lifecycle_stage = 'active' ORDER BY experiment_id")]

    def search(self, experiment_ids: list[str], filter_string: str) -> Iterator[dict]:
        if filter_string:
            raise ValueError("SqliteLister does not parse MLflow filters; list through MlflowClient")
        marks = ",".join("?" * len(experiment_ids))
        runs = self.con.execute(
            f"SELECT run_uuid, experiment_id, name, status, start_time, end_time, lifecycle_stage FROM runs "
            f"WHERE experiment_id IN ({marks}) AND lifecycle_stage = 'active' ORDER BY start_time DESC",
            [int(e) for e in experiment_ids]).fetchall()
        yield from self._docs(runs)

    def get_run(self, run_id: str) -> dict | None:
        runs = self.con.execute("SELECT run_uuid, experiment_id, name, status, start_time, end_time, lifecycle_stage "
                                "FROM runs WHERE run_uuid = ?", (run_id,)).fetchall()
        docs = list(self._docs(runs))
        return docs[0] if docs else None

    def _docs(self, runs: list[tuple]) -> Iterator[dict]:
        ids = [r[0] for r in runs]
        tags, params, metrics = self._by_run("tags", ids), self._by_run("params", ids), self._metrics(ids)
        for run_id, exp_id, name, status, start, end, stage in runs:
            info = {"run_id": run_id, "experiment_id": str(exp_id), "run_name": name or "", "status": status,
                    "start_time": start, "end_time": end, "lifecycle_stage": stage}
            yield {"info": info, "data": {"tags": tags[run_id], "params": params[run_id], "metrics": metrics[run_id]}}

    def _by_run(self, table: str, ids: list[str]) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = defaultdict(list)
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for key, value, run_id in self.con.execute(
                    f"SELECT key, value, run_uuid FROM {table} WHERE run_uuid IN ({marks}) ORDER BY rowid", chunk):
                out[run_id].append({"key": key, "value": value})
        return out

    def _metrics(self, ids: list[str]) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = defaultdict(list)
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for key, step, timestamp, run_id in self.con.execute(
                    f"SELECT key, step, timestamp, run_uuid FROM latest_metrics WHERE run_uuid IN ({marks}) "
                    "ORDER BY rowid", chunk):
                out[run_id].append({"key": key, "step": step, "timestamp": timestamp})
        return out


def _chunks(ids: list[str], size: int = 500):
    """sqlite allows at most 999 bound parameters in one statement (older builds)."""
    for i in range(0, len(ids), size):
        yield ids[i:i + size]
