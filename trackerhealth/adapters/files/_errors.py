"""The one exception the file reader raises for input it cannot use."""

from __future__ import annotations

from pathlib import Path

SUPPORTED = (
    "long or wide CSV/TSV (.csv, .tsv, optionally gzip'd), JSON lines (.jsonl, .ndjson, detectron2 "
    "metrics.json) and Parquet (.parquet) tables; a JSON list of numbers (one metric, named after the file); "
    "HF Trainer trainer_state.json; Lightning metrics.csv; "
    "MLflow run folders (meta.yaml + metrics/), experiment folders and mlruns roots; "
    "TensorBoard event files (events.out.tfevents.*); "
    "DVCLive folders (dvclive/ with plots/metrics/*.tsv); "
    "W&B run folders (wandb/run-* or wandb/offline-run-* with a run-<id>.wandb log); "
    "printed training logs (.log, .txt, .out: lines such as 'iter 100: loss 4.23' or 'step 5 | lm loss: 3.1', "
    "named one by one)"
)


class InputError(ValueError):
    """A file or folder that cannot be read as training metrics; the message says how to fix it."""

    def __init__(self, path: str | Path | None, problem: str):
        self.path = None if path is None else Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path is not None else problem)


class NotMetrics(InputError):
    """A readable file that simply is not a metrics log (a dataset CSV, a config JSON).

    Reading one file, this is an error like any other; walking a folder, such files are skipped.
    """


# A repository whose logs are tracked by Git LFS holds, until ``git lfs pull``, a small text stub in
# place of each file (public logs such as Observer-18/nlp's trainer_state.json): name it, not "no columns".
LFS_POINTER_HEADER = b"version https://git-lfs.github.com/spec/"


def reject_lfs_pointer(path: Path) -> None:
    """Raise :class:`InputError` when ``path`` is a Git LFS pointer rather than the file it stands for.

    Not :class:`NotMetrics`: a folder walk skips those silently, and a pointer may stand for a log — the
    user must hear that this one file was not read, and how to get it, even when its neighbours were.
    """
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(LFS_POINTER_HEADER))
    except OSError:
        return  # the reader that opens it next reports why it cannot
    if head == LFS_POINTER_HEADER:
        raise InputError(path, "is a Git LFS pointer, not the log itself: run `git lfs pull` in its repository "
                               "(or download the file) and read it again")
