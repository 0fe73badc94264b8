"""The local history cache that makes a scheduled scan cheap.

Layout (one folder per tracking store, so two servers never mix)::

    <cache-dir>/mlflow/<store>/index.json            # per run: status, end_time, points, per key (last step, its timestamp)
    <cache-dir>/mlflow/<store>/runs/<run_id>.parquet # the raw rows as MLflow returned them: key, step, value, timestamp

The listing already carries, per metric key, the step and timestamp of the run's latest point
(MLflow's ``latest_metrics``). A key whose latest point equals the cached one is not fetched; a key
that moved on is fetched from the step after the cached one; a new key, or a point re-logged at an
old step, is fetched whole. A finished, unchanged run therefore costs no request at all.

Raw rows are kept (not the normalised history) so re-based step counters and duplicate steps are
resolved the same way on cached and fresh data. Everything is plain files written atomically
(temp file + rename), so the folder can be saved and restored by a CI cache (e.g.
``actions/cache`` on ``~/.cache/trackerhealth``); a cache that does not match what it claims
(row count, format) is ignored and refetched, never trusted.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .._shared import atomic_parquet, atomic_write

FORMAT = 1
COLUMNS = ("key", "step", "value", "timestamp")
PRUNE_AFTER_S = 90 * 86400  # runs not listed for this long leave the cache


def empty_rows() -> pd.DataFrame:
    return pd.DataFrame({
        "key": pd.Series([], dtype=object),
        "step": pd.Series([], dtype=np.int64),
        "value": pd.Series([], dtype=np.float64),
        "timestamp": pd.Series([], dtype=np.int64),
    })


def last_points(rows: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Per key, (step, timestamp) of the point MLflow calls latest: the largest (step, timestamp)."""
    if rows.empty:
        return {}
    ordered = rows.sort_values(["step", "timestamp"], kind="stable")
    tail = ordered.drop_duplicates("key", keep="last")
    return {str(k): (int(s), int(t)) for k, s, t in zip(tail["key"], tail["step"], tail["timestamp"])}


@dataclass
class Plan:
    """What to fetch for one run: ``(key, after_step)``; ``after_step`` None means the whole key."""

    cached: pd.DataFrame
    fetch: list[tuple[str, int | None]] = field(default_factory=list)

    @property
    def cached_points(self) -> int:
        return len(self.cached)


class HistoryCache:
    """Cached raw rows per run. ``root=None`` disables it (``--no-cache``): everything is fetched."""

    def __init__(self, root: str | Path | None, store_key: str):
        self.enabled = root is not None
        self.dir = Path(root) / "mlflow" / store_key if root is not None else None
        self._lock = threading.Lock()
        self._index: dict[str, dict] = {}
        self._dirty = False
        if self.enabled:
            self._index = self._read_index()

    # -- index ------------------------------------------------------------------------------
    def _read_index(self) -> dict[str, dict]:
        path = self.dir / "index.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("runs"), dict):
            return {}  # another format version: start over rather than misread it
        return doc["runs"]

    def flush(self) -> None:
        """Write the index (atomically); forget runs not listed for a long time."""
        if not self.enabled or not self._dirty:
            return
        with self._lock:
            cutoff = time.time() - PRUNE_AFTER_S
            for run_id in [r for r, e in self._index.items() if e.get("seen", 0) < cutoff]:
                del self._index[run_id]
                self._parquet(run_id).unlink(missing_ok=True)
            doc = {"format": FORMAT, "runs": self._index}
            atomic_write(self.dir / "index.json", json.dumps(doc, sort_keys=True).encode())
            self._dirty = False

    def _parquet(self, run_id: str) -> Path:
        return self.dir / "runs" / f"{run_id}.parquet"

    # -- per run ----------------------------------------------------------------------------
    def plan(self, run_id: str, latest: dict[str, tuple[int, int]]) -> Plan:
        """Compare the listing's latest point per key with the cache; say what to fetch."""
        whole = Plan(empty_rows(), [(k, None) for k in latest])
        if not self.enabled:
            return whole
        with self._lock:
            entry = self._index.get(run_id)
        if not entry:
            return whole
        cached = self._load(run_id, entry.get("points", -1))
        if cached is None:
            return whole
        known = {k: tuple(v) for k, v in entry.get("keys", {}).items()}
        plan = Plan(cached)
        for key, point in latest.items():
            have = known.get(key)
            if have == tuple(point):
                continue
            if have is not None and point[0] > have[0]:
                plan.fetch.append((key, have[0]))
            else:
                plan.fetch.append((key, None))  # new key, or a point re-logged at an old step
        return plan

    def _load(self, run_id: str, points: int) -> pd.DataFrame | None:
        try:
            rows = pd.read_parquet(self._parquet(run_id))
        except (OSError, ValueError, ImportError):
            return None
        except Exception:  # noqa: BLE001 - a corrupt file is a cache miss, whatever pyarrow raises
            return None
        if list(rows.columns) != list(COLUMNS) or len(rows) != points:
            return None  # written by a concurrent scan or cut short: refetch
        rows["key"] = rows["key"].astype(object)
        return rows

    def store(self, run_id: str, rows: pd.DataFrame, status: str, end_time: int | None, changed: bool) -> None:
        """Remember ``rows`` as the run's whole raw history (rewritten only when it changed)."""
        if not self.enabled:
            return
        if changed or not self._parquet(run_id).exists():
            table_rows = rows.reset_index(drop=True)
            table_rows["key"] = table_rows["key"].astype("category")  # dictionary-encoded on disk
            atomic_parquet(table_rows, self._parquet(run_id))
        entry = {
            "status": status,
            "end_time": end_time,
            "points": len(rows),
            "keys": {k: list(v) for k, v in last_points(rows).items()},
            "seen": int(time.time()),
        }
        with self._lock:
            self._index[run_id] = entry
            self._dirty = True

    def touch(self, run_id: str) -> None:
        with self._lock:
            if run_id in self._index:
                self._index[run_id]["seen"] = int(time.time())
                self._dirty = True


def merge(cached: pd.DataFrame, fetched: list[tuple[str, int | None, pd.DataFrame]],
          order: list[str]) -> pd.DataFrame:
    """Cached rows plus fetched ones, a key fetched whole replacing its cached rows.

    Rows are grouped by key in ``order`` (MLflow's first-logged key order, which is the model's
    parameter order for per-layer metrics), each key's rows in log order, so a history built
    from them keeps that order.
    """
    replaced = {key for key, after, _ in fetched if after is None}
    parts = [cached[~cached["key"].isin(replaced)] if replaced and not cached.empty else cached]
    parts += [rows for _, _, rows in fetched]
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_rows()
    rows = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    known = set(order)
    categories = list(order) + [k for k in pd.unique(rows["key"]) if k not in known]
    codes = pd.Categorical(rows["key"], categories=categories).codes
    if len(codes) and (np.diff(codes) < 0).any():
        rows = rows.iloc[np.argsort(codes, kind="stable")]
    return rows.reset_index(drop=True)
