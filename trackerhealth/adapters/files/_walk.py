"""Finding the runs inside a folder.

Every supported file is a candidate (by name; its content decides the format later). An MLflow
run folder is one run and is not searched further; the event files of one folder are one
TensorBoard run; a folder holding a ``*.wandb`` transaction log is one W&B run (read by the wandb
adapter) and is not searched further, and so is a DVCLive output folder (``plots/metrics/*.tsv``). Of an
HF output folder's ``checkpoint-N/trainer_state.json`` copies, which repeat each other, only the
newest is read (none when the folder has its own final ``trainer_state.json``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ._dvclive import is_dvclive_folder
from ._mlflow import is_run_folder
from ._tabular import looks_supported

_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages"}
# Keras writes <run>/train/events... and <run>/validation/events...: one run, keys prefixed.
_SPLIT_DIRS = {"train", "training", "validation", "valid", "val", "eval", "evaluation", "test"}
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


@dataclass
class Found:
    mlflow_runs: list[Path] = field(default_factory=list)
    event_runs: dict[Path, list[tuple[Path, str]]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    wandb_runs: list[Path] = field(default_factory=list)
    dvclive_runs: list[Path] = field(default_factory=list)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)  # folders that could not be listed

    def __bool__(self) -> bool:
        return bool(self.mlflow_runs or self.event_runs or self.files or self.wandb_runs or self.dvclive_runs)


def walk(root: Path) -> Found:
    found = Found()

    def unlisted(exc: OSError) -> None:  # os.walk skips such a folder silently unless told
        found.unreadable.append((Path(exc.filename or root), exc.strerror or str(exc)))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted):
        folder = Path(dirpath)
        if is_run_folder(folder):
            found.mlflow_runs.append(folder)
            dirnames[:] = []
            continue
        if any(name.endswith(".wandb") for name in filenames):
            found.wandb_runs.append(folder)
            dirnames[:] = []
            continue
        if is_dvclive_folder(folder):
            found.dvclive_runs.append(folder)
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(filenames):
            path = folder / name
            if "tfevents" in name.lower():
                run_dir, prefix = folder, ""
                if folder.name.lower() in _SPLIT_DIRS and folder != root:
                    run_dir, prefix = folder.parent, folder.name + "/"
                found.event_runs.setdefault(run_dir, []).append((path, prefix))
            elif looks_supported(path):
                found.files.append(path)
    found.files = _newest_checkpoints(found.files)
    return found


def _newest_checkpoints(files: list[Path]) -> list[Path]:
    states = {p for p in files if p.name == "trainer_state.json"}
    newest: dict[Path, tuple[int, Path]] = {}
    for p in states:
        m = _CHECKPOINT.match(p.parent.name)
        if m:
            base = p.parent.parent
            if (base / "trainer_state.json") in states:
                newest[base] = (1 << 62, base / "trainer_state.json")
            elif int(m.group(1)) > newest.get(base, (-1, p))[0]:
                newest[base] = (int(m.group(1)), p)
    keep = {p for _, p in newest.values()}
    return [p for p in files if not (p in states and _CHECKPOINT.match(p.parent.name) and p not in keep)]
