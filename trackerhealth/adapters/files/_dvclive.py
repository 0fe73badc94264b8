"""DVCLive's output folder (``Live(dir="dvclive")``, DVCLive 2 and 3): one run.

``live.log_metric("train/loss", x)`` appends to ``<dir>/plots/metrics/train/loss.tsv`` (a ``step`` column and
the metric's; DVCLive 2 adds ``timestamp``): each metric is a file of its own, and a ``/`` in its name is a
sub-folder. Read one file at a time, ``train/loss.tsv`` and ``eval/loss.tsv`` are two runs, both named
``loss``, whose curves never meet (public logs P884 and P886: an overfit whose val loss rose beside a falling
train loss went unseen). Read here as the folder's one run, each key named by its path under
``plots/metrics`` (``train/loss``, ``eval/loss``). ``params.yaml`` beside them holds what ``log_params``
logged: the run's config. The folder's other files (``metrics.json``'s last values, images, reports) are
not histories and are not read.
"""

from __future__ import annotations

from pathlib import Path

from ...schema import RunHistory
from ._common import Origin, mtime, stable_id
from ._errors import InputError
from ._hparams import yaml_params
from ._tables import table_histories
from ._tabular import read_csv, sniff

METRICS = Path("plots") / "metrics"
PARAMS = "params.yaml"


def is_dvclive_folder(folder: Path) -> bool:
    """Whether ``folder`` is a DVCLive output folder: it holds ``plots/metrics/`` with a ``.tsv`` history."""
    metrics = folder / METRICS
    return metrics.is_dir() and any(metrics.rglob("*.tsv"))


def read_dvclive(folder: Path) -> RunHistory:
    metrics = folder / METRICS
    files = sorted(metrics.rglob("*.tsv"))
    config, notes = yaml_params(folder / PARAMS, "DVCLive's logged params")
    notes = list(notes)
    series = {}
    for path in files:
        relative = path.relative_to(metrics)
        prefix = "" if relative.parent == Path() else relative.parent.as_posix() + "/"
        try:
            table, read_notes = read_csv(path, sniff(path))
            read = table_histories(table, Origin.for_file(path), require_step=True, notes=tuple(read_notes))
        except InputError as exc:  # one damaged metric costs that metric, not the run's others
            notes.append(f"{relative.as_posix()}: not read ({exc.problem})")
            continue
        for history in read:
            notes.extend(f"{relative.as_posix()}: {n}" for n in history.notes)
            # DVCLive 3 names the column by the metric's last part (``loss`` in train/loss.tsv); some releases wrote
            # the whole name (``train/loss``, public log P927), which already holds its folder.
            series.update((key if key.startswith(prefix) else prefix + key, history[key]) for key in history.keys())
    if not series:
        raise InputError(folder, "a DVCLive folder whose plots/metrics/*.tsv files hold no metric history: "
                                 + ("; ".join(notes) or "each is empty"))
    origin = Origin(path=folder, project=folder.resolve().parent.name, id=stable_id(folder), name=folder.resolve().name,
                    updated_at=max((mtime(p) or 0.0) for p in files) or None, config=config)
    return RunHistory(origin.ref(), series, tuple(notes))
