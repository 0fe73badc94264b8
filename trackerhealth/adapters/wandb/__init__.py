"""W&B runs into the common schema: local run folders (no network) and the W&B API.

The API adapter, :class:`WandbApiAdapter` (``trackerhealth scan --project ENTITY/PROJECT``), lists
a project's runs and fetches their histories through the ``wandb`` SDK; see :mod:`._api`. The rest
of this module reads local run folders (``trackerhealth scan --wandb-dir``, ``analyze``):

    from trackerhealth.adapters.wandb import find_run_folders, read_run_folder

    for folder in find_run_folders("wandb/"):
        history = read_run_folder(folder)

A run folder (``run-<date>-<id>`` or ``offline-run-<date>-<id>``) holds the run's transaction log
``run-<id>.wandb``; it is read directly (:mod:`._log` walks it, :mod:`._records` decodes it) — the
SDK's own Python reader is gone since wandb 0.30. Only the protobuf classes of the ``wandb``
package are used; without it the error says ``pip install 'trackerhealth[wandb]'``.

A run that is still writing, or was killed, is read up to its last complete record; the
history's notes say so. History keys are kept as logged (nested keys joined with ``/``); system
metrics are ``system/<key>`` (``system/gpu.0.gpu``), placed on the step axis by wall time;
``wandb.watch`` gradient histograms become ``grad_norm/<layer>`` L2 estimates. See
:mod:`._records` for the mapping.

The :class:`RunRef`: ``tracker="wandb"``, the run's project, id, display name (else its id), tags
and config; ``state`` is ``finished`` / ``failed`` from the exit record's code, and without one
``running`` when the log changed in the last 10 minutes, else ``crashed``. Logs written by
wandb-core (SDK >= 0.18) store each step's keys in random order, so their keys are ordered
logged-before-system, then by first step, then by name in natural order — the same on every read.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...schema import RunHistory, RunRef
from ._log import LogFormatError, LogScan, describe_stop, scan
from ._records import Decoded, WandbMissing, decode
from ._sdk import SdkChanged, fresh_run, graphql, summary_of


def __getattr__(name: str):
    # The API adapter is imported on first use: reading local folders never loads its code.
    if name in ("WandbApiAdapter", "WandbApiRun", "WandbSelectionError"):
        from . import _api

        return getattr(_api, name)
    if name == "WandbFolderAdapter":
        from ._folders import WandbFolderAdapter

        return WandbFolderAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "LocalRun",
    "SdkChanged",
    "WandbApiAdapter",
    "WandbApiRun",
    "WandbFolderAdapter",
    "WandbFolderError",
    "WandbMissing",
    "WandbSelectionError",
    "find_run_folders",
    "fresh_run",
    "graphql",
    "read_run",
    "read_run_folder",
    "summary_of",
]

TRACKER = "wandb"
# A log untouched for this long, with no exit record, is from a process that died (W&B's server
# likewise marks a run crashed once its heartbeats stop for minutes).
RUNNING_WINDOW_S = 600.0


class WandbFolderError(ValueError):
    """A path that cannot be read as a W&B run; the message names the path and the fix."""

    def __init__(self, path: str | Path, problem: str):
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


@dataclass
class LocalRun:
    """One W&B run read from its local transaction log."""

    history: RunHistory
    log_path: Path
    records: int  # complete records read
    end: int  # byte offset where reading stopped
    size: int  # bytes in the log
    complete: bool  # read to the last byte (False: still writing, killed or damaged)
    exit_code: int | None
    sdk_version: str
    estimated: frozenset[str]  # keys estimated from histograms (grad_norm/<layer>, weight_norm/<layer>)
    _decoded: Decoded = field(repr=False)

    @property
    def ref(self) -> RunRef:
        return self.history.ref

    @property
    def summary(self) -> dict[str, Any]:
        """The run's summary (last logged values and ``run.summary`` writes), decoded on demand."""
        return self._decoded.summary()


def find_run_folders(root: str | Path) -> list[Path]:
    """The W&B runs under ``root``: a ``.wandb`` file, a run folder, or any folder holding them
    (a project's ``wandb/`` folder with ``run-*`` / ``offline-run-*`` folders), searched to any
    depth. ``latest-run`` links are not followed, so no run is listed twice."""
    root = Path(root).expanduser()
    if not root.exists():
        raise WandbFolderError(root, "no such file or folder")
    if root.is_file():
        if root.suffix != ".wandb":
            raise WandbFolderError(root, "not a W&B transaction log (expected a run-<id>.wandb file)")
        return [root]
    if _log_files(root):
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        folder = Path(dirpath)
        if any(name.endswith(".wandb") for name in filenames):
            found.append(folder)
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in {"__pycache__", "node_modules"})
    return sorted(found)


def read_run_folder(path: str | Path) -> RunHistory:
    """The history of the W&B run at ``path`` (a run folder or its ``.wandb`` file)."""
    return read_run(path).history


def read_run(path: str | Path) -> LocalRun:
    """Like :func:`read_run_folder`, with the summary and how far the log was read."""
    path = Path(path).expanduser()
    log_path = _log_path(path)
    try:
        data = log_path.read_bytes()
    except OSError as exc:
        raise WandbFolderError(log_path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        walked = scan(data)
    except LogFormatError as exc:
        raise WandbFolderError(log_path, str(exc)) from None
    del data
    decoded = decode(walked.records)
    if decoded.run is None:
        raise WandbFolderError(
            log_path,
            f"no run record in its first {len(walked.records)} records: the run has not started writing yet"
            + (f" ({walked.problem})" if walked.problem else ""),
        )
    history, estimated = _history(log_path, walked, decoded)
    return LocalRun(history, log_path, len(walked.records), walked.end, walked.size, walked.complete,
                    decoded.exit_code, decoded.sdk_version, frozenset(estimated), decoded)


# -- internals ------------------------------------------------------------------------------------
def _log_files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".wandb" and p.is_file())
    except OSError:
        return []


def _log_path(path: Path) -> Path:
    if not path.exists():
        raise WandbFolderError(path, "no such file or folder")
    if path.is_file():
        return path
    logs = _log_files(path)
    if not logs:
        raise WandbFolderError(
            path,
            "no run-<id>.wandb file here: pass a run folder (wandb/run-… or wandb/offline-run-…) or use "
            "find_run_folders() on a wandb/ folder",
        )
    if len(logs) > 1:
        named = [p for p in logs if p.name == f"run-{path.name.rsplit('-', 1)[-1]}.wandb"]
        logs = named or sorted(logs, key=lambda p: p.stat().st_size, reverse=True)
    return logs[0]


def _history(log_path: Path, walked: LogScan, decoded: Decoded) -> tuple[RunHistory, list[str]]:
    notes: list[str] = []
    if walked.problem:
        notes.append(describe_stop(walked))
    h_steps, h_keys, h_vals, h_walls = decoded.history_rows()
    s_steps, s_keys, s_vals, s_walls, s_note = decoded.stats_rows()
    if s_note:
        notes.append(s_note)
    if decoded.undecodable:
        notes.append(f"{decoded.undecodable} record(s) could not be decoded (written by a newer or other "
                     "writer?) and were skipped")
    d_steps, d_keys, d_vals, d_walls = _derived_rows(decoded, set(h_keys.categories), notes)
    extra = d_keys + s_keys
    names = list(h_keys.categories)
    index = {k: i for i, k in enumerate(names)}
    for k in extra:
        if k not in index:
            index[k] = len(names)
            names.append(k)
    codes = np.concatenate((h_keys.codes.astype(np.int64),
                            np.fromiter((index[k] for k in extra), dtype=np.int64, count=len(extra))))
    history = RunHistory.from_long(
        _ref(log_path, decoded, h_walls, s_walls),
        np.concatenate((h_steps, d_steps, s_steps)),
        pd.Categorical.from_codes(codes, categories=names) if names else pd.Categorical([]),
        np.concatenate((h_vals, d_vals, s_vals)),
        np.concatenate((h_walls, d_walls, s_walls)),
    )
    if decoded.exit_code is None:
        notes.append("no exit record: the run was still running when read, or its process was killed")
    notes.extend(history.notes)
    keys = history.keys()
    if decoded.unordered:
        keys = _stable_order(history, set(s_keys) - set(h_keys.categories) - set(d_keys))
    return RunHistory(history.ref, {k: history[k] for k in keys}, notes), d_keys


def _natural(text: str) -> list:
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text)]


def _stable_order(history: RunHistory, system: set[str]) -> list[str]:
    """Key order for logs written by wandb-core, which stores each step's keys in random order:
    logged metrics before system metrics, then by first step, then by name in natural order
    (``layers.2`` before ``layers.10``), so the order is the same on every read. (Older SDKs keep
    the order the keys were logged in, which for per-layer metrics is the model's; that order is
    lost in wandb-core logs.)"""
    def rank(key: str):
        series = history[key]
        first = float(series.steps[0]) if len(series) else float("inf")
        return (key in system, first, _natural(key))

    return sorted(history.keys(), key=rank)


def _derived_rows(decoded: Decoded, logged: set[str], notes: list[str]):
    rows = [(i, k, v) for i, k, v in decoded.derived if k not in logged]
    if len(rows) < len(decoded.derived):
        notes.append("per-layer norms estimated from gradient histograms were dropped where the run "
                     "logged the same grad_norm/<layer> key itself")
    if rows:
        derived_keys = {k for _, k, _ in rows}
        notes.append(f"{len(derived_keys)} per-layer grad_norm/weight_norm series are L2 estimates from "
                     "logged histograms (bin centres; see trackerhealth.adapters.wandb._histogram)")
    idx = np.array([i for i, _, _ in rows], dtype=np.int64)
    return (decoded.steps[idx], [k for _, k, _ in rows], np.array([v for _, _, v in rows], dtype=np.float64),
            decoded.times[idx])


def _ref(log_path: Path, decoded: Decoded, h_walls: np.ndarray, s_walls: np.ndarray) -> RunRef:
    run = decoded.run
    try:
        mtime = log_path.stat().st_mtime
    except OSError:
        mtime = None
    if decoded.exit_code is not None:
        state = "finished" if decoded.exit_code == 0 else "failed"
    elif mtime is not None and time.time() - mtime < RUNNING_WINDOW_S:
        state = "running"
    else:
        state = "crashed"
    walls = np.concatenate((h_walls, s_walls))
    walls = walls[np.isfinite(walls)]
    updated = float(walls.max()) if len(walls) else mtime
    folder = log_path.parent
    return RunRef(
        tracker=TRACKER,
        project=run.project or "uncategorized",
        id=run.run_id or log_path.stem.removeprefix("run-"),
        name=run.display_name or run.run_id,
        state=state,
        updated_at=updated,
        url=folder.resolve().as_uri(),
        config=decoded.config,
        tags=tuple(run.tags),
    )
