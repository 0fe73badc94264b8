"""``trackerhealth demo``: a first look at trackerhealth with no tracker and no network.

Trains six tiny numpy models on the CPU (one healthy; the others overfit, diverge to NaN, wait for a
slow data loader, hit a mislabeled shard every epoch, or lose their early-layer gradients), logs
them into a local MLflow store, scans that store with the same adapter, scan loop and writer as
``trackerhealth scan``, and writes the overview and a dashboard per run.

    from pathlib import Path
    from trackerhealth.demo import run_demo
    result = run_demo(Path("trackerhealth-demo"), quick=True)

Needs the ``mlflow`` extra; the dashboards also need the ``dashboard`` extra.
"""

from ._cli import demo
from ._run import DemoResult, run_demo
from ._store import EXPERIMENT, DemoDirError

__all__ = ["EXPERIMENT", "DemoDirError", "DemoResult", "demo", "run_demo"]
