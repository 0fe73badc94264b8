"""One cause, one finding, and the config's evidence, through a real MLflow server and ``scan``:
a symptom another finding explains is not in ``trackerhealth.findings``; the run's logged params
(strings, as MLflow keeps them) reach the finding's evidence."""

from __future__ import annotations

import numpy as np
from mlflow_support import json_out, log_history, scan_cli

from trackerhealth.schema import RunHistory, RunRef
from trackerhealth.writers import mlflow_writer as mw

N = 600
STEPS = np.arange(N, dtype=float)


def _slow_fall(rng):
    return 2.3 - 0.1 * STEPS / N + 0.003 * rng.standard_normal(N)


def _vanishing() -> RunHistory:
    rng = np.random.default_rng(2)
    data = {"train_loss": (STEPS, _slow_fall(rng))}
    for i in range(10):
        data[f"grad_norm/layer{i}"] = (STEPS, 10.0 ** (-8 + i * 0.8) * (1 + 0.05 * rng.standard_normal(N)))
    return RunHistory.from_series(RunRef("mlflow", "p", "vanishing"), data)


def _slow() -> RunHistory:
    return RunHistory.from_series(RunRef("mlflow", "p", "slow"), {"train_loss": (STEPS, _slow_fall(np.random.default_rng(2)))})


def test_scan_tags_only_the_cause_and_the_params_sharpen_the_finding(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    vanishing = log_history(client, exp_id, _vanishing(), "vanishing")
    slow = log_history(client, exp_id, _slow(), "slow", params={"optimizer_name": "Adam", "lr": "0.001", "eps": "1.0"})
    result = scan_cli(["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--cache-dir", str(cache_dir),
                       "--fail-on", "never", "--format", "json"])
    assert client.get_run(vanishing).data.tags[mw.FINDINGS] == "vanishing-gradients"
    assert client.get_run(vanishing).data.tags[mw.STATUS] == "critical"
    assert client.get_run(slow).data.tags[mw.FINDINGS] == "slow-convergence"
    runs = {r["run"]["name"]: r for r in json_out(result)["runs"]}
    assert [f["id"] for f in runs["vanishing"]["findings"]] == ["vanishing-gradients"]
    [finding] = runs["slow"]["findings"]
    eps = [e for e in finding["evidence"] if e["code"] == "config_adam_epsilon"]
    assert len(eps) == 1 and eps[0]["metric"] == "config:eps" and eps[0]["observed"] == 1.0
    assert "Adam epsilon to 1, 10^8 × the usual 1e-08" in finding["message"]
