"""End to end on the real server: the corpus's real trainings logged into MLflow, scanned through
the CLI, health read back with MlflowClient and checked against ``analyze`` on the same histories;
nothing but trackerhealth's own tags and artifacts changes; a second scan changes nothing but the
scan stamp and sends no second alert."""

from __future__ import annotations

import json
import sqlite3

import pytest
from mlflow_support import (
    WebhookReceiver,
    as_logged,
    corpus_history,
    json_out,
    log_history,
    scan_cli,
)

from trackerhealth.engine import analyze
from trackerhealth.schema import RunRef
from trackerhealth.writers import mlflow_writer as mw
from trackerhealth.writers._common import Dashboard

OWNED = (mw.STATUS, mw.FINDINGS, mw.SCORE, mw.SCANNED_AT, mw.ALERTED, mw.DIGEST)


def snapshot(client, db_path, run_id: str) -> dict:
    """Everything about a run that is not trackerhealth's: it must survive a scan unchanged."""
    run = client.get_run(run_id)
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as con:
        metrics = con.execute("SELECT key, step, timestamp, value, is_nan FROM metrics WHERE run_uuid = ? "
                              "ORDER BY rowid", (run_id,)).fetchall()
    return {
        "status": run.info.status,
        "start_time": run.info.start_time,
        "end_time": run.info.end_time,
        "lifecycle": run.info.lifecycle_stage,
        "name": run.info.run_name,
        "params": dict(run.data.params),
        "latest": {k: repr(v) for k, v in run.data.metrics.items()},  # repr: NaN == NaN
        "tags": {k: v for k, v in run.data.tags.items() if not k.startswith("trackerhealth.")},
        "metrics": metrics,
    }


def owned_tags(client, run_id: str) -> dict:
    return {k: v for k, v in client.get_run(run_id).data.tags.items() if k.startswith("trackerhealth.")}


@pytest.mark.slow
def test_corpus_scan_writes_health_and_is_idempotent(mlflow_server, client, corpus_experiment, cache_dir):
    exp_id, exp_name, run_ids = corpus_experiment
    names = list(run_ids)
    before = {name: snapshot(client, mlflow_server.db_path, rid) for name, rid in run_ids.items()}

    with WebhookReceiver() as hook:
        args = ["--mlflow-uri", mlflow_server.url, "--experiment", exp_name, "--format", "json",
                "--cache-dir", str(cache_dir), "--alert-webhook", hook.url, "--fail-on", "never"]
        first = scan_cli(args)
        assert first.exit_code == 0, first.output
        doc = json_out(first)
        assert doc["errors"] == []
        assert doc["summary"]["scanned"] == len(names) and doc["summary"]["failed"] == 0
        assert doc["summary"]["fetched_points"] == sum(corpus_history(n).n_points for n in names)
        after_first = {name: owned_tags(client, rid) for name, rid in run_ids.items()}

        expected_alerts = 0
        for name, rid in run_ids.items():
            ref = RunRef("mlflow", exp_name, rid, name)
            expected = analyze(as_logged(corpus_history(name), ref))
            tags = after_first[name]
            assert tags[mw.STATUS] == expected.status, name
            assert tags[mw.FINDINGS] == ",".join(f.id for f in expected.problems), name
            assert tags[mw.SCORE] == ("" if expected.score is None else f"{expected.score:.0f}"), name
            assert tags[mw.SCANNED_AT].endswith("Z")
            critical = sorted(f.id for f in expected.problems if f.level == "critical")
            assert tags[mw.ALERTED] == ",".join(critical), name
            expected_alerts += len(critical)
            # The logged corpus is the corpus: same verdict as on the original files.
            assert expected.status == analyze(corpus_history(name)).status, name
            # report.json is the full report, and the JSON output's run matches it.
            report = json.loads(_artifact(mlflow_server, exp_id, rid, mw.REPORT_ARTIFACT).read_text())
            assert report["run"]["id"] == rid and report["status"] == expected.status
            assert {f["id"] for f in report["findings"]} == {f.id for f in expected.findings}
            # Nothing that is not trackerhealth's changed.
            assert snapshot(client, mlflow_server.db_path, rid) == before[name], name

        uploaded = [a.path for a in client.list_artifacts(rid, "trackerhealth")]
        assert mw.REPORT_ARTIFACT in uploaded
        if Dashboard().available:  # the dashboard writer is there: its page is uploaded
            assert mw.DASHBOARD_ARTIFACT in uploaded
            assert _artifact(mlflow_server, exp_id, rid, mw.DASHBOARD_ARTIFACT).read_text().startswith("<!")

        # Every faulty corpus run is flagged with at least one finding, and alerts went out once each.
        assert expected_alerts > 0
        assert len(hook.payloads) == expected_alerts
        alerted = {(p["trackerhealth"]["run"]["id"], p["trackerhealth"]["finding"]["id"]) for p in hook.payloads}
        assert len(alerted) == expected_alerts
        sample = hook.payloads[0]
        assert sample["text"] and sample["blocks"][0]["type"] == "header"
        assert sample["trackerhealth"]["run"]["url"].startswith(f"{mlflow_server.url}/#/experiments/{exp_id}/runs/")
        assert sample["trackerhealth"]["finding"]["evidence"]

        artifacts_before = {rid: _artifact_state(mlflow_server, exp_id, rid) for rid in run_ids.values()}
        second = scan_cli(args)
        assert second.exit_code == 0, second.output
        summary = json_out(second)["summary"]
        assert summary["fetched_points"] == 0 and summary["written"] == 0 and summary["alerts_sent"] == 0
        assert len(hook.payloads) == expected_alerts  # one alert in total per finding
        for name, rid in run_ids.items():
            tags = owned_tags(client, rid)
            changed = {k for k in tags if tags[k] != after_first[name].get(k)}
            assert changed == {mw.SCANNED_AT} or changed == set(), (name, changed)
            assert snapshot(client, mlflow_server.db_path, rid) == before[name], name
            assert _artifact_state(mlflow_server, exp_id, rid) == artifacts_before[rid]


def _artifact(server, exp_id: str, run_id: str, path: str):
    return server.artifacts / exp_id / run_id / "artifacts" / path


def _artifact_state(server, exp_id: str, run_id: str) -> dict:
    folder = server.artifacts / exp_id / run_id / "artifacts" / "trackerhealth"
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_dry_run_writes_nothing_and_sends_nothing(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    rid = log_history(client, exp_id, corpus_history("nan_log0_custom_bce"), "nan")
    with WebhookReceiver() as hook:
        result = scan_cli(["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--dry-run", "--format", "json",
                           "--cache-dir", str(cache_dir), "--alert-webhook", hook.url])
    assert result.exit_code == 1, result.output  # critical finding, --fail-on critical
    doc = json_out(result)
    assert doc["runs"][0]["status"] == "critical"
    assert doc["summary"]["dry_run"] and doc["summary"]["alerts_sent"] == 1  # would be sent
    assert "dry run: nothing written" in result.stderr
    assert hook.payloads == []
    assert owned_tags(client, rid) == {}
    assert client.list_artifacts(rid) == []


def test_table_and_markdown_formats_and_summary_line(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    log_history(client, exp_id, corpus_history("healthy_sgdr_wandb"), "good")
    log_history(client, exp_id, corpus_history("overfit_regression_keras"), "overfit")
    base = ["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--cache-dir", str(cache_dir), "--fail-on", "never"]
    table = scan_cli(base + ["--dry-run"])
    assert table.exit_code == 0, table.output
    assert "good" in table.stdout and "overfit" in table.stdout
    assert table.stderr.strip().splitlines()[-1].startswith("scanned 2 of 2 runs (0 skipped, 0 failed)")
    markdown = scan_cli(base + ["--format", "markdown"])
    assert markdown.stdout.startswith("## Training health")
    assert f"{mlflow_server.url}/#/experiments/{exp_id}/runs/" in markdown.stdout  # runs link to the UI
    assert "[#" not in markdown.stderr  # no progress bar when stderr is not a terminal
    progress = scan_cli(base + ["--format", "json", "--progress"])
    assert "2/2 runs" in progress.stderr
    json.loads(progress.stdout)  # stdout stays pure JSON with the bar on
