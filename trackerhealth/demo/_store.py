"""The demo's own MLflow store: a sqlite database and an artifact folder inside the demo folder.

Runs are logged the way a training job's logger would have logged them — ``MlflowClient.log_batch``
with each metric's real step and wall-clock timestamp — so the scan reads them exactly as it reads a
team's runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ._trainings import Training

EXPERIMENT = "trackerhealth-demo"
MARKER = ".trackerhealth-demo"  # says a folder was made by the demo, so a re-run may replace it
OWNED = ("mlflow.db", "artifacts", "report", MARKER)
BATCH = 1000  # log_batch takes at most 1,000 metrics per call


# MLflow caches its store (and the store its database engine) per URI for the life of the process:
# after prepare() deleted a database that this process had open, the cached store would go on
# writing to the deleted file. A second demo into the same folder therefore needs a new process.
_OPENED: set[str] = set()


class DemoDirError(ValueError):
    """The demo folder cannot be used; the message says which --dir to give instead."""


def prepare(directory: Path) -> None:
    """Make ``directory`` ready for a fresh demo: create it, or clear what an earlier demo left there.

    Only the demo's own entries are removed, and only from a folder the demo made (it holds the
    marker); a folder with other content is refused rather than touched.
    """
    if tracking_uri(directory) in _OPENED:
        raise DemoDirError(f"this process already ran a demo in {directory} and MLflow keeps its database open; "
                           "run the demo again in a new process, or choose another --dir")
    if directory.exists() and not directory.is_dir():
        raise DemoDirError(f"{directory} is a file; give the demo a folder with --dir")
    if directory.exists() and any(directory.iterdir()):
        if not (directory / MARKER).exists():
            raise DemoDirError(f"{directory} already holds files that the demo did not make; "
                               f"choose an empty or new folder with --dir")
        for name in OWNED:
            path = directory / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("made by `trackerhealth demo`; running it again replaces this folder's "
                                    "mlflow.db, artifacts/ and report/\n", encoding="utf-8")


def tracking_uri(directory: Path) -> str:
    return f"sqlite:///{(directory / 'mlflow.db').resolve()}"


class DemoStore:
    """Creates the demo experiment and logs trainings into it."""

    def __init__(self, directory: Path):
        from mlflow.tracking import MlflowClient

        self.directory = directory
        self.uri = tracking_uri(directory)
        _OPENED.add(self.uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        artifacts = (directory / "artifacts").resolve()
        artifacts.mkdir(parents=True, exist_ok=True)
        # An explicit artifact location: the default would be ./mlruns under the current directory.
        self.experiment_id = self.client.create_experiment(EXPERIMENT, artifact_location=artifacts.as_uri())

    def log(self, run: Training) -> str:
        from mlflow.entities import Metric, Param

        start = min((t for *_, t in run.rows), default=0)
        end = max((t for *_, t in run.rows), default=start)
        created = self.client.create_run(
            self.experiment_id, start_time=start, run_name=run.name,
            tags={"demo.fault": ",".join(run.expected) or "none", "mlflow.note.content": run.description})
        run_id = created.info.run_id
        self.client.log_batch(run_id, params=[Param(k, v) for k, v in run.params.items()])
        metrics = [Metric(key, value, timestamp, step) for step, key, value, timestamp in run.rows]
        for i in range(0, len(metrics), BATCH):
            self.client.log_batch(run_id, metrics=metrics[i:i + BATCH])
        self.client.set_terminated(run_id, "FINISHED", end_time=end + 1)
        return run_id
