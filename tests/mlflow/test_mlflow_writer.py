"""The write-back: only trackerhealth's tags and artifacts change, on finished and running runs;
the dashboard hook uploads when the dashboard writer is there and is skipped when it is not."""

from __future__ import annotations

import sys
import types

from mlflow_support import corpus_history, log_history, scan_cli

from trackerhealth.writers import mlflow_writer as mw


def _args(server, exp_name, cache_dir, *extra):
    return ["--mlflow-uri", server.url, "-e", exp_name, "--cache-dir", str(cache_dir), "--fail-on", "never", *extra]


def test_only_owned_tags_change_on_a_running_run(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    rid = log_history(client, exp_id, corpus_history("spikes_mislabeled_batch_k50"), "live", finish=None,
                      tags={"trackerhealthy": "not ours", "team": "vision"}, params={"lr": "0.1", "batch": "32"})
    client.set_tag(rid, mw.STATUS, "stale")  # an old scan's tag: ours, replaced
    before = client.get_run(rid)
    histories = {k: [(m.step, m.timestamp, repr(m.value)) for m in client.get_metric_history(rid, k)]
                 for k in before.data.metrics}
    result = scan_cli(_args(mlflow_server, exp_name, cache_dir))
    assert result.exit_code == 0, result.output
    after = client.get_run(rid)
    assert after.info.status == "RUNNING" == before.info.status
    assert (after.info.start_time, after.info.end_time) == (before.info.start_time, before.info.end_time)
    assert after.data.params == before.data.params
    assert after.data.metrics == before.data.metrics
    for key, points in histories.items():
        assert [(m.step, m.timestamp, repr(m.value)) for m in client.get_metric_history(rid, key)] == points
    ours = {k for k in after.data.tags if k.startswith("trackerhealth.")}
    assert {k: v for k, v in after.data.tags.items() if k not in ours} == \
        {k: v for k, v in before.data.tags.items() if not k.startswith("trackerhealth.")}
    assert after.data.tags[mw.STATUS] in ("ok", "warning", "critical")
    assert ours == {mw.STATUS, mw.FINDINGS, mw.SCORE, mw.SCANNED_AT, mw.DIGEST}


def test_dashboard_hook(mlflow_server, client, experiment, cache_dir, monkeypatch):
    exp_id, exp_name = experiment
    rid = log_history(client, exp_id, corpus_history("healthy_fast_loader_mlflow"), "dash")
    folder = mlflow_server.artifacts / exp_id / rid / "artifacts" / "trackerhealth"

    # No dashboard writer: report.json only, and the scan says why.
    monkeypatch.setitem(sys.modules, "trackerhealth.writers.dashboard", None)
    result = scan_cli(_args(mlflow_server, exp_name, cache_dir))
    assert result.exit_code == 0 and "note: the dashboard writer is not installed" in result.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["report.json"]

    # A renderer that fails costs the dashboard, not the tags; the upload is retried next scan.
    broken = types.ModuleType("trackerhealth.writers.dashboard")
    broken.require_plotly = lambda: None
    broken.render_run_html = lambda history, report, config=None: 1 / 0
    monkeypatch.setitem(sys.modules, "trackerhealth.writers.dashboard", broken)
    result = scan_cli(_args(mlflow_server, exp_name, cache_dir))
    assert result.exit_code == 2 and "dashboard: ZeroDivisionError" in result.output
    assert client.get_run(rid).data.tags[mw.STATUS] == "ok"

    seen = {}

    def render_run_html(history, report, config=None):
        seen["config"] = config
        return f"<html><body>{report.run.id} {history.n_points}</body></html>"

    working = types.ModuleType("trackerhealth.writers.dashboard")
    working.require_plotly = lambda: None
    working.render_run_html = render_run_html
    monkeypatch.setitem(sys.modules, "trackerhealth.writers.dashboard", working)
    result = scan_cli(_args(mlflow_server, exp_name, cache_dir))
    assert result.exit_code == 0, result.output
    html = (folder / "dashboard.html").read_text()
    assert html == f"<html><body>{rid} {corpus_history('healthy_fast_loader_mlflow').n_points}</body></html>"
    assert seen["config"] is not None  # the scan's config reaches the panels
    assert mw.DASHBOARD_ARTIFACT in [a.path for a in client.list_artifacts(rid, "trackerhealth")]
