"""The demo, end to end: train → log into a local MLflow store → scan it as ``scan`` does → report."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ._store import EXPERIMENT, DemoStore, prepare
from ._trainings import Training, train_all

MLFLOW_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves by default


@dataclass
class DemoResult:
    directory: Path
    uri: str
    experiment: str
    trainings: list[Training]
    run_ids: dict[str, str]  # run name -> MLflow run id
    scan: object  # trackerhealth.scan.ScanResult
    overview: Path
    notes: list[str] = field(default_factory=list)


def _quiet_mlflow() -> None:
    # Creating a sqlite store logs its schema migrations at INFO; the demo's output is the report.
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def run_demo(directory: Path, quick: bool = False, echo: Callable[[str], None] = print, workers: int = 4) -> DemoResult:
    """Train the demo runs, log them into ``directory/mlflow.db``, scan them and write the report.

    Raises :class:`trackerhealth.adapters.mlflow.MlflowMissing` when mlflow is not installed and
    :class:`._store.DemoDirError` when ``directory`` holds someone else's files.
    """
    from .. import trackers
    from ..adapters.mlflow import MlflowAdapter
    from ..adapters.mlflow._errors import import_mlflow
    from ..config import Config
    from ..scan import scan
    from ._report import ReportDirWriter

    import_mlflow()
    _quiet_mlflow()
    directory = Path(directory)
    prepare(directory)
    store = DemoStore(directory)
    run_ids: dict[str, str] = {}

    def log(run: Training) -> None:
        run_ids[run.name] = store.log(run)
        fault = ", ".join(run.expected) or "healthy"
        echo(f"  trained {run.name:<24} {run.seconds:4.1f}s  {len(run.rows):>6,} points  ({fault}) {run.description}")

    echo(f"Training {'quick ' if quick else ''}demo runs (numpy, on this CPU) into {store.uri} …")
    trainings = train_all(quick, on_done=log)

    echo(f"Scanning experiment '{EXPERIMENT}' as `trackerhealth scan` does …")
    config = Config()
    # Links in the overview point at the MLflow UI the closing message tells the user to start.
    adapter = MlflowAdapter(store.uri, experiments=[EXPERIMENT], cache_dir=None, workers=workers, ui_url=MLFLOW_UI)
    try:
        writer = ReportDirWriter(trackers.writer_for(adapter, config=config), directory / "report", config,
                                 title="trackerhealth demo: training health")
        result = scan(adapter, writer, config, workers=workers)  # its end writes the overview
    finally:
        adapter.close()
    return DemoResult(directory, store.uri, EXPERIMENT, trainings, run_ids, result, writer.index,
                      notes=list(result.notes))
