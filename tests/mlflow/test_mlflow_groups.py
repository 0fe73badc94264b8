"""Runs compared with their group on the session's real MLflow server: ``--group-by params.X``,
MLflow's parent runs by default, the ``trackerhealth.baseline`` tag and ``--baseline``, what is
written, and re-scans that reuse a group whole or analyse it whole.

The runs are real torch trainings from evidence/torch (cached files): a GRU language model with a
learning rate 100x too small among sane siblings of the same model and data; and a transformer group
beside it."""

from __future__ import annotations

import pytest
from mlflow_support import json_out, log_history, scan_cli

from evidence import lofo
from evidence.torch import manifest
from trackerhealth.adapters.files import read_histories
from trackerhealth.writers import mlflow_writer as mw

SLOW = "rnn_lr_too_low"
RNN = (SLOW, "rnn_twin_adam", "rnn_warmup_cosine", "rnn_sgdr_restarts")
TRANSFORMER = ("transformer_init_too_small", "transformer_twin_adamw", "transformer_step_decay")
LONER = "mlp_twin_adam"


def _entry(name: str) -> dict:
    return next(e for e in manifest.load() if e["name"] == name)


def _log(client, exp_id: str, name: str, **kw) -> str:
    entry = _entry(name)
    (history,) = read_histories(lofo.TORCH / entry["file"])
    params = {"model": entry["model"], "dataset": entry["dataset"], "lr": entry["config"].get("lr")}
    if name == LONER:
        params = {"lr": entry["config"].get("lr")}  # no model/dataset params: compared alone
    return log_history(client, exp_id, history, name, params=params, **kw)


@pytest.fixture()
def direct(mlflow_server):
    """The server's own store, for logging: 3x faster than through its REST API, the same rows."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(mlflow_server.db_uri)


@pytest.fixture()
def team(direct, experiment):
    exp_id, exp_name = experiment
    ids = {name: _log(direct, exp_id, name) for name in (*RNN, *TRANSFORMER, LONER)}
    return exp_id, exp_name, ids


def _scan(uri, cache_dir, exp_name, *extra, code=0):
    result = scan_cli(["--mlflow-uri", uri, "-e", exp_name, "--format", "json", "--full", "--cache-dir",
                       str(cache_dir), "--fail-on", "never", *extra])
    assert result.exit_code == code, result.output
    return json_out(result) if code == 0 else result.output


def _runs(doc) -> dict[str, dict]:
    return {r["run"]["name"]: r for r in doc["runs"]}


def _finding(run: dict, diag_id: str) -> dict:
    return next(f for f in run["findings"] if f["id"] == diag_id)


GROUP = ("--group-by", "params.model", "--group-by", "params.dataset")


def test_grouped_by_model_and_data_the_slow_run_is_found_and_its_siblings_are_not(mlflow_server, team, cache_dir):
    _, exp_name, _ = team
    alone = _runs(_scan(mlflow_server.url, cache_dir / "a", exp_name, "--dry-run"))
    # Alone, only the shape of its fall hints at it (half of it after 28 % of the run, almost none in the first
    # tenth), a shape healthy runs of other models share: noted, not tagged. The group says it by steps.
    noted = _finding(alone[SLOW], "slow-convergence")
    assert noted["level"] == "ok" and [e["code"] for e in noted["evidence"]][0] == "back_loaded_fall"
    assert "group" not in alone[SLOW]

    runs = _runs(_scan(mlflow_server.url, cache_dir / "g", exp_name, "--dry-run", *GROUP))
    slow = _finding(runs[SLOW], "slow-convergence")
    assert slow["level"] == "warning", slow["message"]
    evidence = {e["code"]: e for e in slow["evidence"]}
    assert evidence["slower_than_baseline"]["observed"] >= 4 and "back_loaded_fall" not in evidence
    group = runs[SLOW]["group"]
    assert group["size"] == len(RNN) and group["group"] == {"params.model": _entry(SLOW)["model"],
                                                            "params.dataset": _entry(SLOW)["dataset"]}
    assert group["baseline_name"] in RNN and group["baseline_name"] != SLOW and group["rule"].startswith("healthiest")
    for name in (*RNN[1:], *TRANSFORMER[1:]):
        assert runs[name]["status"] == "ok", (name, [f["id"] for f in runs[name]["findings"] if f["level"] != "ok"])
    assert runs[TRANSFORMER[0]]["group"]["size"] == len(TRANSFORMER)
    # The run without the keys is analysed as without groups.
    assert "group" not in runs[LONER] and _finding(runs[LONER], "baseline-regression")["level"] == "skipped"


def test_the_baseline_tag_and_the_option_choose_the_baseline(mlflow_server, client, team, cache_dir):
    _, exp_name, ids = team
    client.set_tag(ids["rnn_sgdr_restarts"], "trackerhealth.baseline", "true")
    runs = _runs(_scan(mlflow_server.url, cache_dir, exp_name, "--dry-run", *GROUP))
    assert runs[SLOW]["group"]["baseline"] == ids["rnn_sgdr_restarts"] and runs[SLOW]["group"]["rule"] == "marked"
    runs = _runs(_scan(mlflow_server.url, cache_dir, exp_name, "--dry-run", *GROUP, "--baseline", "transformer_step_decay"))
    assert runs[TRANSFORMER[0]]["group"]["baseline_name"] == "transformer_step_decay"
    out = _scan(mlflow_server.url, cache_dir, exp_name, "--dry-run", *GROUP, "--baseline", "no-such-run", code=2)
    assert "no-such-run" in out and "no such run" in out
    out = _scan(mlflow_server.url, cache_dir, exp_name, "--dry-run", "--group-by", "config.model", code=2)
    assert "params.NAME, tags.NAME or parent" in out


def test_a_grouped_scan_writes_the_verdict_and_a_rescan_reuses_or_reanalyses_whole_groups(mlflow_server, client, team,
                                                                                        cache_dir):
    _, exp_name, ids = team
    first = _scan(mlflow_server.url, cache_dir, exp_name, *GROUP)
    assert first["summary"]["analyzed"] == len(ids)
    tags = client.get_run(ids[SLOW]).data.tags
    assert tags[mw.STATUS] == "warning" and "slow-convergence" in tags[mw.FINDINGS].split(",")
    # The user's own tags and params are untouched; the baseline tag is the user's, never written.
    assert "trackerhealth.baseline" not in tags and client.get_run(ids[SLOW]).data.params["model"] == _entry(SLOW)["model"]

    second = _scan(mlflow_server.url, cache_dir, exp_name, *GROUP)
    assert (second["summary"]["analyzed"], second["summary"]["reused"]) == (0, len(ids))

    # One sibling logs a new point: its whole group is analysed again, the other group is kept.
    grown = ids["rnn_twin_adam"]
    metric = client.get_run(grown).data.metrics
    key = next(iter(metric))
    last = client.get_metric_history(grown, key)[-1]
    client.log_metric(grown, key, last.value, step=last.step + 1, timestamp=last.timestamp + 1000)
    third = _scan(mlflow_server.url, cache_dir, exp_name, *GROUP)
    assert (third["summary"]["analyzed"], third["summary"]["reused"]) == (len(RNN), len(ids) - len(RNN))
    assert _finding(_runs(third)[SLOW], "slow-convergence")["level"] == "warning"


def test_child_runs_of_one_parent_are_a_group_by_default(mlflow_server, direct, experiment, cache_dir):
    exp_id, exp_name = experiment
    parent = direct.create_run(exp_id, run_name="sweep").info.run_id
    direct.set_terminated(parent)
    for name in RNN:
        _log(direct, exp_id, name, tags={"mlflow.parentRunId": parent})
    runs = _runs(_scan(mlflow_server.url, cache_dir, exp_name, "--dry-run"))
    assert runs[SLOW]["group"]["group"] == {"parent": parent} and runs[SLOW]["group"]["size"] == len(RNN)
    assert _finding(runs[SLOW], "slow-convergence")["level"] == "warning"
    # The parent logged nothing: skipped, not a member.
    assert "sweep" not in runs


# -- one model and data set, two loss definitions (evidence/torch's SimCLR family) ---------------------
T01 = ("simclr_temperature_01", "simclr_twin_adam_t01")
T05 = ("simclr_twin_adam", "simclr_warmup_cosine", "simclr_rare_val", "simclr_lr_too_low")


def test_a_group_compares_loss_levels_only_between_runs_whose_logged_loss_setting_agrees(mlflow_server, direct,
                                                                                        experiment, cache_dir):
    # NT-Xent at temperature 0.1 ends far below anything a run at 0.5 can reach. Grouped by model and
    # data alone, the 0.1 run was the baseline and every healthy 0.5 run was "slow" (14 false alarms
    # on the corpus); the logged temperature param splits the group in two, each with its own baseline.
    exp_id, exp_name = experiment
    for name in (*T01, *T05):
        entry = _entry(name)
        (history,) = read_histories(lofo.TORCH / entry["file"])
        log_history(direct, exp_id, history, name, params={"model": entry["model"], "dataset": entry["dataset"],
                                                           "temperature": str(entry["config"]["temperature"])})
    runs = _runs(_scan(mlflow_server.url, cache_dir, exp_name, "--dry-run", *GROUP))
    for name in T05:
        group = runs[name]["group"]
        assert group["group"]["temperature"] == "0.5" and group["size"] == len(T05), (name, group)
        assert group["baseline_name"] in T05
    for name in T01:
        assert runs[name]["group"]["group"]["temperature"] == "0.1" and runs[name]["group"]["size"] == len(T01)
    for name in T05[:3]:
        assert _finding(runs[name], "slow-convergence")["level"] == "ok", (name, _finding(runs[name], "slow-convergence"))
    slow = _finding(runs["simclr_lr_too_low"], "slow-convergence")
    assert slow["level"] == "warning" and "slower_than_baseline" in {e["code"] for e in slow["evidence"]}, slow


# -- a real sweep: 12 torch trainings over LR x batch size (evidence/torch/sweep.py) ---------------------
SWEEP = lofo.TORCH / "sweep"


def test_a_sweeps_summary_names_the_learning_rates_that_oscillate(mlflow_server, direct, experiment, cache_dir, tmp_path):
    import json

    client = direct
    exp_id, exp_name = experiment
    entries = json.loads((SWEEP / "manifest.json").read_text())
    assert len(entries) >= 12 and len({e["config"]["lr"] for e in entries}) >= 3
    assert len({e["config"]["batch_size"] for e in entries}) >= 3
    parent = client.create_run(exp_id, run_name="lr-batch-sweep").info.run_id
    client.set_terminated(parent)
    for e in entries:
        (history,) = read_histories(SWEEP / e["file"])
        log_history(client, exp_id, history, e["name"], tags={"mlflow.parentRunId": parent},
                    params={"lr": e["config"]["lr"], "batch_size": e["config"]["batch_size"]})
    doc = _scan(mlflow_server.url, cache_dir, exp_name, "--dry-run")
    (sweep,) = doc["sweeps"]
    assert sweep["runs"] == len(entries) and sweep["group"] == f"parent={parent}"
    oscillating = [a for a in sweep["associations"] if a["finding"] == "loss-oscillation" and a["key"] == "params.lr"]
    assert oscillating, sweep
    lr = oscillating[0]
    # The ground truth (each run against the sweep's reference run, evidence/torch/truth.py): every run
    # at the highest LR oscillates. The summary's range holds exactly those runs, and names them all.
    truth_high = {e["name"] for e in entries if e["config"]["lr"] == max(x["config"]["lr"] for x in entries)}
    assert all(e["oscillates"] for e in entries if e["name"] in truth_high)
    assert lr["relation"] == ">=" and float(lr["value"]) == max(e["config"]["lr"] for e in entries)
    assert lr["inside_with"] == lr["inside"] == len(truth_high)
    assert "every run with params.lr ≥ 0.3 has loss-oscillation" in lr["text"]
    # The MLflow overview (--report-dir): the same sentence, every run grouped and linked to the MLflow UI —
    # also from a re-scan where every run is reused and nothing is analysed again.
    health = tmp_path / "health"
    for _ in range(2):
        table = scan_cli(["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--cache-dir", str(cache_dir), "--dry-run",
                          "--fail-on", "never", "--report-dir", str(health)])
        assert table.exit_code == 0, table.output
        assert f"sweep parent={parent} ({len(entries)} runs):" in table.output, table.output[-3000:]
        page = (health / "index.html").read_text(encoding="utf-8")
        assert 'id="sweeps"' in page and "every run with params.lr ≥ 0.3 has loss-oscillation" in page
        assert page.count('data-tracker="1"') == len(entries) and f"{mlflow_server.url}/#/experiments/{exp_id}/runs/" in page
        assert "Group</button>" in page
        summary = (health / "summary.md").read_text(encoding="utf-8")
        assert "every run with params.lr ≥ 0.3 has loss-oscillation" in summary
        assert f"overview: {health / 'index.html'}" in table.output
    assert f"{len(entries)} unchanged since the last scan" in table.output, table.output[-1500:]


def test_a_fleet_scans_baseline_is_looked_for_in_every_project(mlflow_server, client, direct, team, cache_dir):
    _, exp_name, ids = team
    other = client.create_experiment(f"{exp_name}-other")
    _log(direct, other, "rnn_twin_adam")
    result = scan_cli(["--mlflow-uri", mlflow_server.url, "-e", exp_name, "-e", f"{exp_name}-other", "--format", "json",
                       "--cache-dir", str(cache_dir), "--fail-on", "never", "--dry-run", *GROUP,
                       "--baseline", "transformer_step_decay", "--baseline", "nowhere"])
    assert result.exit_code == 0, result.output
    runs = _runs(json_out(result))
    assert runs[TRANSFORMER[0]]["group"]["baseline_name"] == "transformer_step_decay"
    assert "--baseline nowhere matched no run in any of the projects scanned" in result.output


def test_a_report_dir_that_cannot_be_a_folder_is_refused_before_the_scan(tmp_path):
    taken = tmp_path / "health"
    taken.write_text("someone's file")
    result = scan_cli(["--mlflow-uri", f"sqlite:///{tmp_path / 'nowhere.db'}", "-e", "x", "--report-dir", str(taken)])
    assert result.exit_code == 2 and "is a file" in result.output, result.output
    result = scan_cli(["--mlflow-uri", f"sqlite:///{tmp_path / 'nowhere.db'}", "-e", "x", "--report-dir",
                       str(taken / "inside")])
    assert result.exit_code == 2, result.output
    assert f"--report-dir {taken / 'inside'}: cannot create it" in result.output, result.output
    assert "pass a folder you can write to" in result.output
    assert taken.read_text() == "someone's file" and not (tmp_path / "nowhere.db").exists()
