"""The local history cache of the W&B API scan: what makes a scheduled re-scan fetch nothing.

Layout (one folder per server and project, so two never mix)::

    <cache-dir>/wandb/<host>/<entity>/<project>/index.json
        {"format": 1, "last_scan": "<ISO time the last complete scan started>",
         "runs": {<run id>: {"lines", "heartbeat", "state", "last_step", "points", "seen"}}}
    <cache-dir>/wandb/<host>/<entity>/<project>/runs/<run id>.parquet
        step, key, value, wall, system (the run's points after conversion, see :mod:`._api_rows`)

A run is served from the cache, with no request at all, when the listing reports the same
history line count, heartbeat and state as when it was cached; otherwise only the steps after the
cached last step are fetched (``scan_history(min_step=…)``) and the system metrics are re-read.
``last_scan`` lets the next scan ask the server only for runs updated since (``updatedAt``).

Plain files written atomically (temp file + rename), so the folder can live in a CI cache
(``actions/cache`` on ``~/.cache/trackerhealth``); an entry that does not match its file (point
count, format) is ignored and refetched, never trusted.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .._shared import atomic_parquet, atomic_write
from ._api_rows import LongRows

FORMAT = 1
PRUNE_AFTER_S = 90 * 86400


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", part) or "_"


class ApiHistoryCache:
    """``root=None`` disables it (``--no-cache``)."""

    def __init__(self, root: str | Path | None, host: str, entity: str, project: str):
        self.enabled = root is not None
        self.dir = Path(root) / "wandb" / _safe(host) / _safe(entity) / _safe(project) if self.enabled else None
        self._lock = threading.Lock()
        self._runs: dict[str, dict] = {}
        self.last_scan: str | None = None
        self._dirty = False
        if self.enabled:
            self._read_index()

    def _read_index(self) -> None:
        try:
            doc = json.loads((self.dir / "index.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("runs"), dict):
            self._runs = doc["runs"]
            self.last_scan = doc.get("last_scan")

    def _parquet(self, run_id: str) -> Path:
        return self.dir / "runs" / f"{_safe(run_id)}.parquet"

    @staticmethod
    def signature(lines: int | None, heartbeat: str | None, state: str | None) -> dict:
        return {"lines": lines, "heartbeat": heartbeat, "state": state}

    def lookup(self, run_id: str) -> tuple[dict | None, LongRows | None, LongRows | None]:
        """``(entry, history rows, system rows)``; Nones when the run is not (validly) cached."""
        if not self.enabled:
            return None, None, None
        with self._lock:
            entry = self._runs.get(run_id)
        if not entry:
            return None, None, None
        try:
            frame = pd.read_parquet(self._parquet(run_id))
        except (OSError, ValueError, ImportError):
            return None, None, None
        if len(frame) != entry.get("points") or list(frame.columns) != ["step", "key", "value", "wall", "system"]:
            return None, None, None
        history, system = LongRows(), LongRows()
        for target, mask in ((history, ~frame["system"].to_numpy()), (system, frame["system"].to_numpy())):
            part = frame[mask]
            target.steps = part["step"].tolist()
            target.keys = part["key"].astype(str).tolist()
            target.values = part["value"].tolist()
            target.walls = part["wall"].tolist()
        return entry, history, system

    def store(self, run_id: str, history: LongRows, system: LongRows, signature: dict, last_step: int) -> None:
        if not self.enabled:
            return
        frame = pd.DataFrame({
            "step": np.concatenate((history.arrays()[0], system.arrays()[0])),
            "key": pd.Categorical(history.keys + system.keys),
            "value": np.concatenate((history.arrays()[2], system.arrays()[2])),
            "wall": np.concatenate((history.arrays()[3], system.arrays()[3])),
            "system": np.concatenate((np.zeros(len(history), bool), np.ones(len(system), bool))),
        })
        atomic_parquet(frame, self._parquet(run_id))
        with self._lock:
            self._runs[run_id] = {**signature, "last_step": int(last_step), "points": len(frame),
                                  "seen": int(time.time())}
            self._dirty = True

    def touch(self, run_id: str) -> None:
        with self._lock:
            if run_id in self._runs:
                self._runs[run_id]["seen"] = int(time.time())
                self._dirty = True

    def mark_scan(self, started_iso: str) -> None:
        """Remember when the last complete scan started (the next scan lists runs updated since)."""
        with self._lock:
            self.last_scan = started_iso
            self._dirty = True

    def flush(self) -> None:
        if not self.enabled or not self._dirty:
            return
        with self._lock:
            cutoff = time.time() - PRUNE_AFTER_S
            for run_id in [r for r, e in self._runs.items() if e.get("seen", 0) < cutoff]:
                del self._runs[run_id]
                self._parquet(run_id).unlink(missing_ok=True)
            doc = {"format": FORMAT, "last_scan": self.last_scan, "runs": self._runs}
            atomic_write(self.dir / "index.json", json.dumps(doc, sort_keys=True).encode())
            self._dirty = False


__all__ = ["ApiHistoryCache"]
