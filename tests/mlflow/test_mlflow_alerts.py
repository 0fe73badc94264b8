"""Alerts: the Slack-compatible payload, once per finding, again when a cleared finding returns,
and retried on the next scan when the webhook was down."""

from __future__ import annotations

import dataclasses
import json

import pytest
from mlflow_support import (
    WebhookReceiver,
    corpus_history,
    json_out,
    log_history,
    scan_cli,
)

from trackerhealth.engine import analyze
from trackerhealth.schema import RunRef
from trackerhealth.writers import alerts
from trackerhealth.writers import mlflow_writer as mw

NAN_RUN = "nan_log0_custom_bce"


def test_payload_is_slack_shaped_and_carries_the_facts():
    history = corpus_history(NAN_RUN).with_ref(RunRef("mlflow", "team <a&b>", "abc123", "run *1*",
                                                      url="http://mlflow:5000/#/experiments/1/runs/abc123"))
    report = analyze(history)
    finding = next(f for f in report.problems if f.level == "critical")
    payload = alerts.build_payload(report, finding)
    json.dumps(payload, allow_nan=False)  # valid JSON, no NaN tokens
    assert finding.id in payload["text"] and payload["blocks"][0]["type"] == "header"
    section = payload["blocks"][1]["text"]["text"]
    assert "<http://mlflow:5000/#/experiments/1/runs/abc123|run *1*>" in section
    assert "team &lt;a&amp;b&gt;" in section  # mrkdwn-escaped
    assert "*Evidence*" in payload["blocks"][2]["text"]["text"]
    assert all(len(b.get("text", {}).get("text", "")) <= 3000 for b in payload["blocks"])
    raw = corpus_history(NAN_RUN).with_ref(RunRef("mlflow", "p", "abc123", "<!channel> a&b"))
    text = alerts.build_payload(dataclasses.replace(report, run=raw.ref), finding)["text"]
    assert "&lt;!channel&gt; a&amp;b" in text and "<!channel>" not in text  # no @channel ping from a run name
    assert payload["dedup_key"] == payload["trackerhealth"]["dedup_key"] == alerts.build_payload(report, finding)["dedup_key"]
    assert alerts.build_payload(report, finding, episode="other")["dedup_key"] != payload["dedup_key"]
    facts = payload["trackerhealth"]
    assert facts["run"]["id"] == "abc123" and facts["finding"]["id"] == finding.id
    assert facts["finding"]["evidence"] and facts["status"] == "critical"


def test_dedup_plan_drops_cleared_findings():
    report = analyze(corpus_history(NAN_RUN))
    critical = {f.id for f in report.problems if f.level == "critical"}
    new, still = alerts.plan(report, set())
    assert {f.id for f in new} == critical and still == set()
    new, still = alerts.plan(report, critical | {"overfitting"})
    assert new == [] and still == critical  # "overfitting" cleared: it leaves the set
    assert alerts.parse_ids(" a, b ,,") == {"a", "b"} and alerts.format_ids({"b", "a"}) == "a,b"


def test_webhook_url_secret_never_shown():
    with pytest.raises(ValueError, match="must be an http"):
        alerts.WebhookSender("ftp://hooks.example/T/B/secret")
    sender = alerts.WebhookSender("http://127.0.0.1:9/T000/B000/very-secret", timeout=0.5, retries=1, backoff=0.01)
    with pytest.raises(alerts.AlertError) as err:
        sender.send({"text": "x"})
    assert "very-secret" not in str(err.value) and "127.0.0.1" in str(err.value)


@pytest.mark.slow
def test_a_finding_that_clears_and_returns_alerts_again(mlflow_server, client, experiment, cache_dir, tmp_path):
    exp_id, exp_name = experiment
    rid = log_history(client, exp_id, corpus_history(NAN_RUN), "nan-run")
    critical = sorted(f.id for f in analyze(corpus_history(NAN_RUN)).problems if f.level == "critical")
    assert critical
    silenced = tmp_path / "trackerhealth.toml"
    silenced.write_text("disable = [" + ", ".join(f'"{c}"' for c in critical) + "]\n")
    base = ["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--cache-dir", str(cache_dir), "--fail-on", "never"]
    with WebhookReceiver() as hook:
        hook.fail_next = 100  # the webhook is down: nothing is recorded as alerted
        down = scan_cli(base + ["--alert-webhook", hook.url], env={"TRACKERHEALTH_HTTP_BACKOFF": "0.01"})
        assert down.exit_code == 2 and "will be retried on the next scan" in down.output
        assert hook.attempts == len(critical)  # a 500 may have been taken: one POST each, not repeated
        assert "secret" not in down.output
        assert client.get_run(rid).data.tags[mw.ALERTED] == ""
        hook.fail_next = 0
        assert scan_cli(base + ["--alert-webhook", hook.url]).exit_code == 0
        assert len(hook.payloads) == len(critical)
        assert scan_cli(base + ["--alert-webhook", hook.url]).exit_code == 0
        assert len(hook.payloads) == len(critical)  # not again
        # The findings clear (here: disabled by config), then come back.
        cleared = scan_cli(base + ["--alert-webhook", hook.url, "--config", str(silenced), "--format", "json"])
        assert all(f["id"] not in critical for f in json_out(cleared)["runs"][0]["findings"])
        assert client.get_run(rid).data.tags[mw.ALERTED] == ""
        assert scan_cli(base + ["--alert-webhook", hook.url]).exit_code == 0
        assert len(hook.payloads) == 2 * len(critical)
        assert client.get_run(rid).data.tags[mw.ALERTED] == ",".join(critical)
    # Without a webhook the alerted tag is left alone.
    scan_cli(base + ["--config", str(silenced)])
    assert client.get_run(rid).data.tags[mw.ALERTED] == ",".join(critical)


def test_alert_webhook_from_environment(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    log_history(client, exp_id, corpus_history("nan_exploding_lr_linreg"), "boom")
    with WebhookReceiver() as hook:
        result = scan_cli(["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--cache-dir", str(cache_dir)],
                          env={"TRACKERHEALTH_ALERT_WEBHOOK": hook.url})
    assert result.exit_code == 1  # critical, --fail-on critical
    assert hook.payloads and hook.payloads[0]["trackerhealth"]["run"]["name"] == "boom"
