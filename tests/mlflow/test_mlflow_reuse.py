"""Re-scans that cost nothing, and several experiments in one scan, on the session's real MLflow
server (and a sqlite store of the test's own for --all-experiments)."""

from __future__ import annotations

import pytest
from mlflow_support import corpus_history, json_out, log_history, logged_rows, scan_cli

from trackerhealth.writers import mlflow_writer as mw

RUNS = ("healthy_fast_loader_plain", "overfit_spirals_wandb", "nan_corrupted_batch_hf")


def _scan(uri, cache_dir, *extra, code=None):
    result = scan_cli(["--mlflow-uri", uri, "--format", "json", "--cache-dir", str(cache_dir), "--fail-on",
                       "never", *extra])
    if code is not None:
        assert result.exit_code == code, result.output
    return result, json_out(result)


def _health(doc) -> dict:
    return {r["run"]["id"]: (r["status"], sorted(f["id"] for f in r["findings"])) for r in doc["runs"]}


@pytest.fixture()
def three_runs(client, experiment):
    exp_id, exp_name = experiment
    ids = {name: log_history(client, exp_id, corpus_history(name), name) for name in RUNS}
    return exp_id, exp_name, ids


def test_an_unchanged_run_keeps_its_report_and_is_not_fetched_analysed_or_written(mlflow_server, client, three_runs,
                                                                                 cache_dir):
    exp_id, exp_name, ids = three_runs
    _, first = _scan(mlflow_server.url, cache_dir, "-e", exp_name, code=0)
    assert (first["summary"]["analyzed"], first["summary"]["reused"]) == (3, 0)
    stamps = {rid: client.get_run(rid).data.tags[mw.SCANNED_AT] for rid in ids.values()}

    _, second = _scan(mlflow_server.url, cache_dir, "-e", exp_name, code=0)
    s = second["summary"]
    assert (s["analyzed"], s["reused"], s["fetched_points"], s["written"], s["alerts_sent"]) == (0, 3, 0, 0, 0)
    assert _health(second) == _health(first)
    # Nothing was written: not even the scan stamp moved.
    assert {rid: client.get_run(rid).data.tags[mw.SCANNED_AT] for rid in ids.values()} == stamps

    # One run logs a new point: only it is fetched and analysed again.
    grown = ids["healthy_fast_loader_plain"]
    rows = logged_rows(corpus_history("healthy_fast_loader_plain"))
    last = rows.iloc[-1]
    client.log_metric(grown, str(last["key"]), float(last["value"]), step=int(last["step"]) + 1,
                      timestamp=int(last["timestamp"]) + 1000)
    _, third = _scan(mlflow_server.url, cache_dir, "-e", exp_name, code=0)
    assert (third["summary"]["analyzed"], third["summary"]["reused"]) == (1, 2)
    assert 0 < third["summary"]["fetched_points"] <= 5  # the new point, not the history

    # Another configuration is another analysis: nothing is reused.
    _, fourth = _scan(mlflow_server.url, cache_dir, "-e", exp_name, "--loss-key", "train/loss", code=0)
    assert (fourth["summary"]["analyzed"], fourth["summary"]["reused"]) == (3, 0)
    # --reanalyze and --no-cache analyse everything again too.
    _, fifth = _scan(mlflow_server.url, cache_dir, "-e", exp_name, "--loss-key", "train/loss", "--reanalyze", code=0)
    assert fifth["summary"]["reused"] == 0


def test_a_dry_run_report_is_never_taken_as_written(mlflow_server, client, three_runs, cache_dir):
    exp_id, exp_name, ids = three_runs
    _, dry = _scan(mlflow_server.url, cache_dir, "-e", exp_name, "--dry-run", code=0)
    assert dry["summary"]["analyzed"] == 3
    assert all(mw.STATUS not in client.get_run(rid).data.tags for rid in ids.values())
    _, dry_again = _scan(mlflow_server.url, cache_dir, "-e", exp_name, "--dry-run", code=0)
    assert dry_again["summary"]["reused"] == 3  # a dry run may reuse what a dry run found
    _, real = _scan(mlflow_server.url, cache_dir, "-e", exp_name, code=0)
    assert (real["summary"]["analyzed"], real["summary"]["reused"]) == (3, 0)
    assert all(mw.STATUS in client.get_run(rid).data.tags for rid in ids.values())


def test_a_failed_run_is_analysed_again_next_time(mlflow_server, client, experiment, cache_dir, monkeypatch):
    exp_id, exp_name = experiment
    log_history(client, exp_id, corpus_history("healthy_fast_loader_plain"), "flaky")
    from trackerhealth.writers.mlflow_writer import MlflowWriter

    real_write = MlflowWriter.write
    monkeypatch.setattr(MlflowWriter, "write", lambda self, *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    result, doc = _scan(mlflow_server.url, cache_dir, "-e", exp_name, code=2)
    assert doc["errors"][0]["kind"] == "write"
    monkeypatch.setattr(MlflowWriter, "write", real_write)
    _, again = _scan(mlflow_server.url, cache_dir, "-e", exp_name, code=0)
    assert (again["summary"]["analyzed"], again["summary"]["reused"]) == (1, 0)


def test_several_experiments_are_one_scan_and_a_missing_one_fails_alone(mlflow_server, client, cache_dir):
    import uuid

    names = [f"multi-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for i, name in enumerate(names):
        exp_id = client.create_experiment(name)
        log_history(client, exp_id, corpus_history(RUNS[i]), RUNS[i])
    result, doc = _scan(mlflow_server.url, cache_dir, "-e", names[0], "-e", "no-such-experiment", "-e", names[1],
                        code=2)
    assert sorted(r["run"]["project"] for r in doc["runs"]) == sorted(names)
    (error,) = doc["errors"]
    assert error["kind"] == "list" and error["source"] == "mlflow:no-such-experiment" and error["run_id"] == ""
    assert "no experiment named or numbered 'no-such-experiment'" in error["message"]
    projects = doc["summary"]["projects"]
    assert [p["project"] for p in projects] == [f"mlflow:{names[0]}", "mlflow:no-such-experiment", f"mlflow:{names[1]}"]
    assert [p["analyzed"] for p in projects] == [1, 0, 1] and projects[1]["error"]
    assert doc["summary"]["analyzed"] == 2


def test_all_experiments_scans_every_active_experiment(tmp_path, cache_dir):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    for i, name in enumerate(("team-a", "team-b")):
        log_history(client, client.create_experiment(name), corpus_history(RUNS[i]), RUNS[i])
    gone = client.create_experiment("archived")
    log_history(client, gone, corpus_history(RUNS[2]), RUNS[2])
    client.delete_experiment(gone)
    result, doc = _scan(uri, cache_dir, "--all-experiments", code=0)
    assert sorted(r["run"]["project"] for r in doc["runs"]) == ["team-a", "team-b"]
    assert {p["project"] for p in doc["summary"]["projects"]} == {"mlflow:0", "mlflow:1", "mlflow:2"} - {
        f"mlflow:{gone}"}
    bad = scan_cli(["--mlflow-uri", uri, "--all-experiments", "-e", "team-a"])
    assert bad.exit_code == 2 and "--all-experiments already selects every experiment" in bad.output


def test_a_failed_analysis_is_never_kept_as_the_last_report(mlflow_server, client, experiment, cache_dir,
                                                            every_diagnosis_raises):
    exp_id, exp_name = experiment
    log_history(client, exp_id, corpus_history("healthy_fast_loader_plain"), "broken-analysis")
    _, first = _scan(mlflow_server.url, cache_dir, "-e", exp_name)
    assert [r["status"] for r in first["runs"]] == ["error"]
    _, again = _scan(mlflow_server.url, cache_dir, "-e", exp_name)
    assert (again["summary"]["analyzed"], again["summary"]["reused"]) == (1, 0)
    assert [r["status"] for r in again["runs"]] == ["error"]  # still a failure, never a kept "ok"
