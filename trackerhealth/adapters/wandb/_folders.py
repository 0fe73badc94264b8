"""Scan local W&B run folders (``trackerhealth scan --wandb-dir ./wandb``): no network, nothing written.

The same scan loop as the trackers: each folder holding a ``run-<id>.wandb`` log is one run,
read by :func:`~trackerhealth.adapters.wandb.read_run` (a run still writing is read up to its last
complete record). There is no writer: a training machine's folders are only reported on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...schema import RunRef
from ..base import Adapter, Fetched, RunSkipped


@dataclass
class FolderRun:
    ref: RunRef
    folder: Path


class WandbFolderAdapter(Adapter):
    """Local W&B run folders (``scan --wandb-dir``): read only, so it has no writer."""

    tracker = "wandb"

    def __init__(self, roots: Iterable[str | Path]):
        self.roots = [Path(r) for r in roots]

    def list_runs(self) -> list[FolderRun]:
        from . import WandbFolderError, find_run_folders

        runs = []
        for root in self.roots:
            folders = find_run_folders(root)  # WandbFolderError names a missing path
            if not folders:  # "scanned 0 of 0 runs" would read as a clean bill of health
                raise WandbFolderError(root, "no W&B runs here: looked for run-<id>.wandb logs (in run-*/offline-run-* "
                                             "folders, at any depth); pass the wandb/ folder your training wrote")
            for folder in folders:
                run_id = folder.name.rsplit("-", 1)[-1] if folder.is_dir() else folder.stem.removeprefix("run-")
                runs.append(FolderRun(RunRef(tracker=self.tracker, project=str(root), id=run_id, name=run_id,
                                             url=folder.resolve().as_uri()), folder))
        return runs

    def fetch_history(self, run: FolderRun) -> Fetched:
        from . import WandbFolderError, read_run

        try:
            local = read_run(run.folder)
        except WandbFolderError as exc:
            if "has not started writing" in exc.problem:
                raise RunSkipped(exc.problem) from None
            raise
        return Fetched(local.history, fetched_points=local.history.n_points)


__all__ = ["FolderRun", "WandbFolderAdapter"]
