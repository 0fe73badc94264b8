"""Faults: an unreachable server, a flaky one (429/503/dropped connections through a proxy), a run
deleted mid-scan, a run with no metrics, keys with '/', a run still RUNNING, one run failing while
the others are written."""

from __future__ import annotations

from mlflow_support import (
    FaultProxy,
    as_logged,
    corpus_history,
    free_port,
    json_out,
    log_history,
    scan_cli,
)

from trackerhealth.adapters.mlflow import MlflowAdapter, RetryPolicy
from trackerhealth.engine import analyze
from trackerhealth.scan import scan
from trackerhealth.trackers import writer_for
from trackerhealth.schema import RunHistory, RunRef
from trackerhealth.writers import mlflow_writer as mw

FAST = {"TRACKERHEALTH_HTTP_RETRIES": "8", "TRACKERHEALTH_HTTP_BACKOFF": "0.02"}


def test_unreachable_server_exits_3_and_says_how_to_check(cache_dir):
    uri = f"http://127.0.0.1:{free_port()}"
    result = scan_cli(["--mlflow-uri", uri, "-e", "x", "--cache-dir", str(cache_dir)])
    assert result.exit_code == 3
    assert uri in result.stderr and f"curl {uri}/health" in result.stderr


def test_flaky_server_gives_the_same_results(mlflow_server, client, experiment, cache_dir, monkeypatch):
    exp_id, exp_name = experiment
    names = ["nan_log0_custom_bce", "healthy_sgdr_wandb", "vanish_sigmoid20_gradients", "overfit_regression_keras"]
    ids = {n: log_history(client, exp_id, corpus_history(n), n) for n in names}
    # MlflowClient (the writes) retries on its own; make its backoff test-sized too.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0.05")
    # And as many retries as the reads get (FAST): by default the writes get at most 2, which bounds a scan
    # on a dead server; against 30 % faults a write then fails after three in a row (~3 % of requests),
    # and the scan rightly reports it (it failed this test once in the six full runs of 2026-12-05).
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", FAST["TRACKERHEALTH_HTTP_RETRIES"])
    with FaultProxy(mlflow_server.url, share=0.3) as proxy:
        result = scan_cli(["--mlflow-uri", proxy.url, "-e", exp_name, "--format", "json", "--cache-dir",
                           str(cache_dir), "--fail-on", "never", "--workers", "4"], env=FAST)
    assert result.exit_code == 0, result.output
    assert proxy.counts["429"] and proxy.counts["503"] and proxy.counts["dropped"]  # faults really happened
    doc = json_out(result)
    assert doc["errors"] == [] and doc["summary"]["scanned"] == len(names)
    for name, rid in ids.items():
        expected = analyze(as_logged(corpus_history(name), RunRef("mlflow", exp_name, rid, name)))
        got = next(r for r in doc["runs"] if r["run"]["id"] == rid)
        assert got["status"] == expected.status and got["score"] == expected.score
        tags = client.get_run(rid).data.tags
        assert tags[mw.STATUS] == expected.status
        assert tags[mw.FINDINGS] == ",".join(f.id for f in expected.problems)


def test_one_run_failing_does_not_stop_the_others(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    good = log_history(client, exp_id, corpus_history("healthy_sgdr_wandb"), "good")
    bad = log_history(client, exp_id, corpus_history("healthy_autoencoder_adam"), "bad")
    with FaultProxy(mlflow_server.url, share=0.0, always_fail=f"run_id={bad}") as proxy:
        result = scan_cli(["--mlflow-uri", proxy.url, "-e", exp_name, "--format", "json",
                           "--cache-dir", str(cache_dir)], env={"TRACKERHEALTH_HTTP_RETRIES": "2",
                                                               "TRACKERHEALTH_HTTP_BACKOFF": "0.01"})
    assert result.exit_code == 2, result.output  # the scan says it is incomplete
    doc = json_out(result)
    assert [e["run_id"] for e in doc["errors"]] == [bad]
    assert "HTTP 500 after 3 tries" in doc["errors"][0]["message"]
    assert doc["summary"]["failed"] == 1 and doc["summary"]["scanned"] == 1
    assert client.get_run(good).data.tags[mw.STATUS] == "ok"
    assert mw.STATUS not in client.get_run(bad).data.tags


class DeletingAdapter(MlflowAdapter):
    """Deletes one run right after listing it: the run vanishes between listing and writing."""

    def __init__(self, *a, victim: str, client, **kw):
        super().__init__(*a, **kw)
        self.victim, self._mlflow = victim, client

    def list_runs(self):
        runs = super().list_runs()
        self._mlflow.delete_run(self.victim)
        return runs


def test_run_deleted_mid_scan_is_skipped_and_others_written(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    keep = log_history(client, exp_id, corpus_history("healthy_step_decay_keras"), "keep")
    victim = log_history(client, exp_id, corpus_history("slow_unnormalized_features"), "victim")
    adapter = DeletingAdapter(mlflow_server.url, experiments=[exp_name], cache_dir=cache_dir, victim=victim,
                              client=client)
    try:
        result = scan(adapter, writer_for(adapter))
    finally:
        adapter.close()
    assert not result.errors, result.errors
    assert [(s["run_id"], s["reason"]) for s in result.skipped] == [(victim, "deleted during the scan")]
    assert [r.run.id for r in result.reports] == [keep]
    assert mw.STATUS in client.get_run(keep).data.tags


def test_no_metrics_slash_keys_and_running_run(mlflow_server, client, experiment, cache_dir):
    from mlflow.entities import Metric

    exp_id, exp_name = experiment
    empty = client.create_run(exp_id, run_name="empty").info.run_id
    client.set_terminated(empty, "FAILED")
    running = client.create_run(exp_id, run_name="still-running").info.run_id
    steps = range(200)
    metrics = [Metric(k, v, 1_750_000_000_000 + s * 10, s) for s in steps for k, v in
               (("train/loss", 2.0 / (1 + s)), ("grad_norm/layers.0.weight", 0.5), ("grad_norm/layers.1.weight", 0.4),
                ("opt/lr/group 0", 1e-3))]
    for i in range(0, len(metrics), 1000):
        client.log_batch(running, metrics=metrics[i:i + 1000])
    before = client.get_run(running)

    result = scan_cli(["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--format", "json",
                       "--cache-dir", str(cache_dir), "--full"])
    assert result.exit_code == 0, result.output
    doc = json_out(result)
    assert [(s["run_id"], s["reason"]) for s in doc["summary"]["skipped"]] == [(empty, "no metrics logged")]
    assert "skipped mlflow:" in result.stderr and "no metrics logged" in result.stderr
    (report,) = doc["runs"]
    assert report["run"]["id"] == running and report["points"] == 800
    expected = analyze(RunHistory.from_long(
        RunRef("mlflow", exp_name, running), [m.step for m in metrics], [m.key for m in metrics],
        [m.value for m in metrics], [m.timestamp / 1000 for m in metrics]))
    assert report["status"] == expected.status
    assert {f["id"]: f["level"] for f in report["findings"]} == {f.id: f.level for f in expected.findings}
    after = client.get_run(running)
    assert after.info.status == "RUNNING" and after.info.end_time == before.info.end_time  # still running
    assert after.data.tags[mw.STATUS] == expected.status
    assert mw.STATUS not in client.get_run(empty).data.tags


def test_retry_policy_from_env(monkeypatch):
    monkeypatch.setenv("TRACKERHEALTH_HTTP_RETRIES", "3")
    monkeypatch.setenv("TRACKERHEALTH_HTTP_BACKOFF", "0.25")
    policy = RetryPolicy.from_env(timeout=12)
    assert (policy.retries, policy.backoff, policy.timeout) == (3, 0.25, 12)
