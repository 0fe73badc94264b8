"""Where a corpus run's metrics go: the real logging integrations users have.

Every :class:`RunLog` also keeps what was logged in memory (:attr:`RunLog.logged`), so the ground
truth (:mod:`.truth`) reads the values the run produced, whatever the sink wrote and however its
reader would parse it. HF Trainer and Lightning runs do not use these sinks: they log through their
own trainers (:mod:`.integrations`).
"""

from __future__ import annotations

import os
import shutil
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

STYLES = ("wandb", "mlflow", "csv", "parquet")


class Logged:
    """Per key: the steps and values logged, in order (the in-memory tap every sink keeps)."""

    def __init__(self) -> None:
        self._steps: dict[str, list[float]] = defaultdict(list)
        self._values: dict[str, list[float]] = defaultdict(list)

    def add(self, key: str, step: float, value: float) -> None:
        self._steps[key].append(float(step))
        self._values[key].append(float(value))

    def keys(self) -> list[str]:
        return list(self._steps)

    def get(self, key: str) -> tuple[np.ndarray, np.ndarray] | None:
        if key not in self._steps:
            return None
        return np.asarray(self._steps[key]), np.asarray(self._values[key])

    def __contains__(self, key: str) -> bool:
        return key in self._steps


class RunLog(ABC):
    """One run's logging. ``close()`` returns the path (relative to the corpus root) a reader opens."""

    def __init__(self, root: Path, name: str, config: Mapping[str, Any]):
        self.root, self.name, self.config = root, name, dict(config)
        self.logged = Logged()
        self._rows: list[tuple[int, str, float, float]] = []

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        now = time.time()
        for key, value in metrics.items():
            value = float(value)
            self.logged.add(key, step, value)
            self._rows.append((int(step), key, value, now))
        self._emit(metrics, step, now)

    def _emit(self, metrics: Mapping[str, float], step: int, now: float) -> None:
        """Sinks that stream (W&B) send each call; the others write everything at close."""

    @abstractmethod
    def close(self) -> str: ...


class WandbRunLog(RunLog):
    """The real wandb SDK, offline: a run folder with its ``.wandb`` transaction log."""

    def __init__(self, root: Path, name: str, config: Mapping[str, Any]):
        super().__init__(root, name, config)
        import wandb

        self._dir = root / "runs" / name
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir.mkdir(parents=True)
        # No system-metrics sampler (its values would describe this machine's load, not the run's)
        # and no code/git capture: the folder must be small and reproducible in content.
        settings = wandb.Settings(mode="offline", x_disable_stats=True, x_disable_meta=True, console="off",
                                  disable_git=True, disable_code=True, silent=True)
        self._run = wandb.init(project="torch-corpus", name=name, dir=str(self._dir), config=self.config,
                               settings=settings, reinit="create_new")

    def _emit(self, metrics, step, now):
        self._run.log({k: float(v) for k, v in metrics.items()}, step=int(step))

    def close(self) -> str:
        self._run.finish()
        folders = sorted((self._dir / "wandb").glob("offline-run-*"))
        if len(folders) != 1:
            raise RuntimeError(f"{self.name}: expected one offline run folder, found {folders}")
        folder = folders[0]
        shutil.rmtree(folder / "logs", ignore_errors=True)  # debug logs: machine-specific, not data
        shutil.rmtree(folder / "tmp", ignore_errors=True)
        (folder / "files" / "requirements.txt").unlink(missing_ok=True)  # this machine's packages, not the run's
        for extra in (self._dir / "wandb").iterdir():  # latest-run and debug-log links point into what was removed
            if extra.is_symlink():
                extra.unlink()
        return str(folder.relative_to(self.root))


class MlflowRunLog(RunLog):
    """The real MLflow client into a file store (``mlruns/``), metrics sent in batches with their real timestamps."""

    def close(self) -> str:
        # MLflow 3.x keeps the file store in maintenance mode behind this switch; many teams' stores
        # (and the public ones we read) are still file stores, so the corpus keeps some of them.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow import MlflowClient
        from mlflow.entities import Metric, Param

        store = self.root / "runs" / self.name / "mlruns"
        shutil.rmtree(store.parent, ignore_errors=True)
        store.mkdir(parents=True)
        client = MlflowClient(tracking_uri=store.resolve().as_uri())
        exp = client.create_experiment("torch-corpus")
        run = client.create_run(exp, run_name=self.name)
        params = [Param(str(k), str(v)) for k, v in self.config.items()]
        metrics = [Metric(key, value, int(now * 1000), step) for step, key, value, now in self._rows]
        for i in range(0, max(len(params), 1), 100):
            client.log_batch(run.info.run_id, params=params[i:i + 100])
        for i in range(0, len(metrics), 1000):  # the file store takes any batch; the server's limit is 1,000
            client.log_batch(run.info.run_id, metrics=metrics[i:i + 1000])
        client.set_terminated(run.info.run_id)
        return str((store / exp / run.info.run_id).relative_to(self.root))


class CsvRunLog(RunLog):
    """A wide CSV as ``pandas.DataFrame.to_csv`` writes it by default: one row per step, blanks where not logged."""

    def close(self) -> str:
        import pandas as pd

        frame = pd.DataFrame(self._rows, columns=["step", "key", "value", "wall_time"])
        wide = frame.pivot_table(index="step", columns="key", values="value", aggfunc="last", dropna=False, sort=True)
        wide = wide[list(dict.fromkeys(frame["key"]))]  # keys in the order first logged
        path = self.root / "runs" / f"{self.name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        wide.reset_index().to_csv(path, index=False)
        return str(path.relative_to(self.root))


class ParquetRunLog(RunLog):
    """Long rows (step, key, value, wall_time) as ``pandas.DataFrame.to_parquet`` writes them by default.

    With pandas >= 3 and pyarrow >= 25 a NaN value arrives in the file as null: exactly what a user's
    exported history looks like, so the reader must read that null as a non-finite value.
    """

    def close(self) -> str:
        import pandas as pd

        frame = pd.DataFrame(self._rows, columns=["step", "key", "value", "wall_time"])
        path = self.root / "runs" / f"{self.name}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(path)
        return str(path.relative_to(self.root))


_SINKS: dict[str, type[RunLog]] = {"wandb": WandbRunLog, "mlflow": MlflowRunLog, "csv": CsvRunLog, "parquet": ParquetRunLog}


def open_run(style: str, root: Path, name: str, config: Mapping[str, Any]) -> RunLog:
    """A new run logging through ``style`` (one of :data:`STYLES`)."""
    if style not in _SINKS:
        raise ValueError(f"unknown logging style {style!r}; use one of {', '.join(STYLES)}")
    return _SINKS[style](root, name, config)
