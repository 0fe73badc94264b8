"""A corpus training inside a real tracker run, monitored; run in a subprocess by the alert tests.

    python tracked_run.py mlflow OUT_DIR WEBHOOK_URL SCENARIO
    python tracked_run.py wandb OUT_DIR "" SCENARIO [SCENARIO ...]

Each scenario trains for real; every logging call goes to the tracker (``mlflow.log_metrics`` /
``wandb.log``) and to a HealthMonitor checked every 50 steps, which alerts through the tracker.
Prints one JSON line per run. A subprocess keeps the SDKs' global state (tracking URI, the W&B
service) out of the test session.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

from monitor_support import MonitoredRunLog

from tests.corpus import scenarios, scenarios_healthy, scenarios_more
from tests.corpus.loop import SCENARIOS
from trackerhealth.monitor import HealthMonitor


class TrackedRunLog(MonitoredRunLog):
    def __init__(self, name, monitor, every, send):
        super().__init__(name, monitor, every)
        self.send = send

    def log(self, step, values, wall_time=None):
        self.send(values, step)
        super().log(step, values, wall_time)


def train(name: str, monitor: HealthMonitor, send) -> TrackedRunLog:
    made = []

    def factory(run_name):
        made.append(TrackedRunLog(run_name, monitor, 50, send))
        return made[-1]

    for module in (scenarios, scenarios_more, scenarios_healthy):
        module.RunLog = factory
    sc = SCENARIOS[name]
    sc.fn(name, sc.seed)
    return made[-1]


def with_mlflow(out: Path, url: str, name: str) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri((out / "mlruns").as_uri())
    mlflow.set_experiment("monitor")
    run = mlflow.start_run(run_name=name)
    monitor = HealthMonitor(alert=["mlflow", url], name=name)
    log = train(name, monitor, lambda values, step: mlflow.log_metrics(values, step=int(step)))
    mid = dict(MlflowClient().get_run(run.info.run_id).data.tags)  # while training is still on
    final = monitor.close()
    info = MlflowClient().get_run(run.info.run_id)
    log.write(out / f"{name}.csv.gz", "long-csv")
    print(json.dumps({"name": name, "final": final.ids, "tags": dict(info.data.tags), "tags_before_close": mid,
                      "status": info.info.status, "csv": str(out / f"{name}.csv.gz")}))
    mlflow.end_run()


def with_wandb(out: Path, names: list[str]) -> None:
    import wandb

    for name in names:
        run = wandb.init(project="monitor", name=name, dir=str(out))
        monitor = HealthMonitor(alert=["wandb"], name=name, wait_duration=120)
        train(name, monitor, lambda values, step, run=run: run.log(values, step=int(step)))
        final = monitor.close()
        run.finish()
        folder = Path(run.dir).parent
        print(json.dumps({"name": name, "final": final.ids, "log": str(next(folder.glob("*.wandb")))}))


if __name__ == "__main__":
    mode, out, url, *names = sys.argv[1:]
    out = Path(out)
    if mode == "mlflow":
        with_mlflow(out, url, names[0])
    else:
        os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true")
        with_wandb(out, names)
