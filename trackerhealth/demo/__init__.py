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

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use (PEP 562): the CLI loads ._cli for `trackerhealth --help` without numpy.
_LAZY = {"demo": "._cli", "DemoResult": "._run", "run_demo": "._run", "EXPERIMENT": "._store",
         "DemoDirError": "._store"}

__all__ = ["EXPERIMENT", "DemoDirError", "DemoResult", "demo", "run_demo"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'trackerhealth.demo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
