"""The torch corpus through a real MLflow store and ``trackerhealth scan --group-by``, end to end:
``python -m evidence.cohort_mlflow [--out DIR]``.

Every run of the corpus is logged into a fresh sqlite MLflow store with its model and data set as
params (as a team's runs carry them), then scanned exactly as a user would:
``trackerhealth scan --mlflow-uri sqlite:///… -e torch-corpus --group-by params.model --group-by
params.dataset --dry-run --format json``, and once without ``--group-by``. The scored runs are scored
as ``evidence/cohort.py`` scores them; the two must agree (one code path in the core), and this says
so through the tracker, the listing, the two passes and the JSON a user reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from trackerhealth.adapters.files import read_histories
from trackerhealth.schema import HealthReport

from . import cohort, lofo
from .score import healthy_flagged, macro_f1, render, table
from .torch import manifest

EXPERIMENT = "torch-corpus"


def log_corpus(uri: str) -> dict[str, str]:
    """Each corpus run into the store at ``uri``; {run id: corpus name}."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.create_experiment(EXPERIMENT)
    names = {}
    for entry in manifest.load():
        (history,) = read_histories(lofo.TORCH / entry["file"])
        run = client.create_run(exp, run_name=entry["name"])
        params = {"model": entry["model"], "dataset": entry["dataset"],
                  **{k: v for k, v in entry["config"].items() if k not in ("model", "dataset")}}
        client.log_batch(run.info.run_id, params=[Param(k, str(v)[:500]) for k, v in params.items()])
        metrics = []
        for key in history.keys():
            s = history[key]
            for step, value, wall in zip(s.steps, s.values, s.wall_times):
                ts = int(wall * 1000) if wall == wall else int(1.7e12 + step * 1000)
                metrics.append(Metric(key, float(value), ts, int(step)))
        for i in range(0, len(metrics), 1000):
            client.log_batch(run.info.run_id, metrics=metrics[i:i + 1000])
        client.set_terminated(run.info.run_id)
        names[run.info.run_id] = entry["name"]
    return names


def scan(uri: str, cache: Path, *extra: str) -> list[HealthReport]:
    # The installed command, as a user runs it.
    out = subprocess.run([str(Path(sys.executable).with_name("trackerhealth")), "scan", "--mlflow-uri", uri, "-e", EXPERIMENT,
                          "--dry-run", "--format", "json", "--full", "--fail-on", "never", "--cache-dir", str(cache), *extra],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"scan failed ({out.returncode}): {out.stderr[-2000:]}")
    return [HealthReport.from_dict(r) for r in json.loads(out.stdout)["runs"]]


def main(argv: list[str]) -> int:
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path(tempfile.mkdtemp(prefix="th-cohort-"))
    uri = f"sqlite:///{out / 'mlflow.db'}"
    names = log_corpus(uri)
    entries = {e["name"]: e for e in manifest.load()}
    results = {}
    for label, extra in (("alone", ()), ("grouped", ("--group-by", "params.model", "--group-by", "params.dataset"))):
        reports = {names[r.run.id]: r for r in scan(uri, out / f"cache-{label}", *extra)}
        cases = [cohort._case(entries[n], reports[n]) for n in entries if lofo.scored(entries[n])]
        print(render(cases, f"scan {' '.join(extra) or '(no --group-by)'} on {uri}"))
        results[label] = {"table": table(cases), "macro_f1": macro_f1(cases), "healthy_flagged": healthy_flagged(cases)}
    recorded = json.loads(cohort.RESULT.read_text())
    same = results["grouped"]["table"] == recorded["grouped"] and results["alone"]["table"] == recorded["alone"]
    print("the same figures as evidence/cohort.py (the core called directly):", same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
