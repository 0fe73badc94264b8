"""What every reader shares: where a run came from (its RunRef) and how a history is assembled."""

from __future__ import annotations

import re

import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...schema import RunHistory, RunRef

TRACKER = "file"

_COMPRESSED = (".gz",)  # stripped before the format suffix when naming a run


def stable_id(path: Path) -> str:
    """A short id that stays the same for the same file on the same machine."""
    try:
        resolved = str(path.resolve())
    except OSError:
        resolved = os.path.abspath(path)
    return hashlib.sha1(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def file_stem(path: Path) -> str:
    """``metrics.csv.gz`` -> ``metrics``; ``trainer_state.json`` -> ``trainer_state``."""
    name = path.name
    for suffix in _COMPRESSED:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


_GENERIC_STEMS = {"metrics", "trainer_state", "history", "log", "logs", "train", "events", "scalars", "progress"}
# Folders a tool creates with the same name for every experiment (Lightning's lightning_logs,
# detectron2's and HF Trainer's default output dirs): the experiment's name is further up.
_TOOL_CONTAINERS = {"lightning_logs", "wandb", "files", "output", "trainer_output"}
_VERSIONED = re.compile(r"^(version_\d+|checkpoint-\d+|run[-_]?\d+)$", re.I)


def run_name(path: Path) -> str:
    """A name a person can tell apart: the file's stem unless it is generic (``metrics``,
    ``trainer_state``); then the folder that holds it — ``logs/trainer_state.json`` is ``logs`` —
    and for a versioned folder, the folder above with the version: ``out/checkpoint-500``, and
    ``my_exp/lightning_logs/version_0/metrics.csv`` is ``my_exp/version_0``."""
    stem = file_stem(path)
    if stem.lower() not in _GENERIC_STEMS:
        return stem
    version = None
    for parent in path.resolve().parents:
        name = parent.name
        if not name:
            break
        if _VERSIONED.match(name):
            version = version or name
        elif name.lower() not in _TOOL_CONTAINERS:
            return "/".join(p for p in (name, version) if p)
    return version or stem


def mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


@dataclass(frozen=True)
class Origin:
    """The RunRef fields a reader knows before it has parsed any metric."""

    path: Path
    project: str
    id: str
    name: str
    state: str | None = None
    updated_at: float | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()

    @classmethod
    def for_file(cls, path: Path, **overrides: Any) -> Origin:
        fields: dict[str, Any] = {
            "path": path,
            "project": path.parent.resolve().name or str(path.parent),
            "id": stable_id(path),
            "name": run_name(path),
            "updated_at": mtime(path),
        }
        fields.update(overrides)
        return cls(**fields)

    def part(self, index: int) -> Origin:
        """The ``index``-th run (1-based) of several held in one file: ``metrics#2``."""
        if index <= 1:
            return self
        return replace(self, id=f"{self.id}#{index}", name=f"{self.name}#{index}")

    def labelled(self, label: str) -> Origin:
        """One run of several split by a ``run`` column."""
        return replace(self, id=f"{self.id}:{label}", name=label)

    def ref(self) -> RunRef:
        return RunRef(
            tracker=TRACKER,
            project=self.project,
            id=self.id,
            name=self.name,
            state=self.state,
            updated_at=self.updated_at,
            url=self.path.resolve().as_uri(),
            source=str(self.path),
            config=dict(self.config),
            tags=tuple(self.tags),
        )


def build_history(
    origin: Origin,
    steps: np.ndarray,
    keys: pd.Categorical,
    values: np.ndarray,
    wall_times: np.ndarray | None,
    notes: Iterable[str] = (),
) -> RunHistory:
    """A RunHistory from long arrays, with the reader's notes ahead of the schema's own."""
    history = RunHistory.from_long(origin.ref(), steps, keys, values, wall_times)
    notes = tuple(notes) + history.notes
    if not notes:
        return history
    return RunHistory(history.ref, {k: history[k] for k in history.keys()}, notes)


def categorical(codes: np.ndarray, names: list[str]) -> pd.Categorical:
    """Key column for ``RunHistory.from_long`` without hashing a string per row."""
    return pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object))


def unique_names(names: Iterable[str]) -> list[str]:
    """Column names made unique the way pandas does (``loss``, ``loss.1``)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        name = str(name)
        if name in seen:
            seen[name] += 1
            candidate = f"{name}.{seen[name]}"
            while candidate in seen:
                seen[name] += 1
                candidate = f"{name}.{seen[name]}"
            name = candidate
        seen.setdefault(name, 0)
        out.append(name)
    return out


def seconds(wall: np.ndarray) -> np.ndarray:
    """Unix times in seconds: values that can only be milli/micro/nanoseconds are scaled down."""
    sample = wall[:: max(1, len(wall) // 10_000)]  # the unit is a property of the file: a sample tells it
    sample = sample[np.isfinite(sample)]
    if not len(sample):
        sample = wall[np.isfinite(wall)]
        if not len(sample):
            return wall
    typical = float(np.median(np.abs(sample)))
    if typical > 1e17:
        return wall / 1e9
    if typical > 1e14:
        return wall / 1e6
    if typical > 1e11:
        return wall / 1e3
    return wall
