"""Where the monitor's findings go: a real webhook receiver, a real MLflow run, a real W&B run.

Trainings are the corpus' numpy scenarios, trained here; the trackers are the real SDKs (MLflow's
file store, W&B in offline mode, read back with the SDK's own ``wandb leet`` reader), each in a
subprocess so their global state stays out of the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from monitor_support import WebhookReceiver, free_port, scan_ids, train_monitored

from trackerhealth.adapters.files import read_histories
from trackerhealth.engine import analyze
from trackerhealth.monitor import HealthMonitor

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def test_webhook_gets_one_slack_message_per_critical_finding(monkeypatch):
    with WebhookReceiver() as hook:
        monitor = HealthMonitor(alert=["log", hook.url], name="bce-run")
        log = train_monitored("nan_log0_custom_bce", monitor, 50, monkeypatch)
        for _ in range(3):  # more checks of the same dead run: no more messages
            monitor.check(force=True)
        final = monitor.close()
    assert final.ids == ["nonfinite"] and len(log.checks) > 10
    assert len(hook.received) == 1
    post = hook.received[0]
    assert post["path"] == "/hooks/T000/B000/secret" and post["content_type"] == "application/json"
    body = post["json"]
    assert body["text"].startswith("trackerhealth: run bce-run is critical — nonfinite:")
    assert [b["type"] for b in body["blocks"]][:3] == ["header", "section", "section"]
    assert body["trackerhealth"]["finding"]["id"] == "nonfinite"
    assert body["trackerhealth"]["finding"]["evidence"][0]["code"] == "nonfinite_value"


def test_a_slow_or_failing_webhook_never_reaches_the_training_loop(monkeypatch, caplog):
    with WebhookReceiver(status=500, hold=True) as hook:
        monitor = HealthMonitor(alert=[hook.url], name="r")
        with caplog.at_level("WARNING", logger="trackerhealth"):
            log = train_monitored("nan_exploding_lr_linreg", monitor, 50, monkeypatch)
            # The receiver holds the POST: training went on and finished without waiting for it.
            assert not hook.received and log.records[-1][0] == 1500
            hook.release()
            monitor.close(timeout=30)
        assert len(hook.received) == 1  # a POST answered 500 may have been taken: not repeated
    said = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(said) == 1 and "HTTP 500" in said[0], said
    assert "secret" not in caplog.text, "the webhook's secret path is never logged"

    closed = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    monitor = HealthMonitor(alert=[closed], webhook_timeout=1)
    with caplog.at_level("WARNING", logger="trackerhealth"):
        train_monitored("nan_exploding_lr_linreg", monitor, 50, monkeypatch)
        monitor.close(timeout=30)
    assert any("not delivered" in r.getMessage() for r in caplog.records)


def test_a_webhook_that_cannot_deliver_says_so_once_and_counts_the_rest_at_close(caplog):
    """Two critical findings (overfitting, then a NaN loss) for a webhook where nothing listens.

    The losses are a formula (a stress case for the alert path, not evidence for the diagnoses).
    """
    closed = f"http://127.0.0.1:{free_port()}/hook"
    monitor = HealthMonitor(alert=[closed], webhook_timeout=1, confirm=1)
    with caplog.at_level("WARNING", logger="trackerhealth"):
        for step in range(3000):
            train = 1.0 / (1 + step / 100) + 0.002 * ((step * 7919) % 13)
            values = {"train/loss": train if step < 2500 else float("nan")}
            if step % 50 == 0:
                values["val/loss"] = 0.5 + ((step - 600) / 1000) ** 2 if step > 600 else 0.5 + (600 - step) / 600
            monitor.log(values, step=step)
            if step % 250 == 249:
                monitor.check(force=True)
        monitor.close(timeout=30)
    hook = monitor.channels[1]
    assert sorted(hook.undelivered) == ["nonfinite", "overfitting"], [f.id for _, f in monitor.raised]
    failed = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(failed) == 2, failed  # the first failure, and the count at close
    assert "further failures" in failed[0]
    assert "2 alert(s) not delivered (overfitting, nonfinite)" in failed[1]


def _run(args, tmp_path, timeout=180, **env):
    out = subprocess.run([sys.executable, str(HERE / "tracked_run.py"), *args], capture_output=True, text=True,
                         timeout=timeout, cwd=tmp_path, env={**os.environ, **env}, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def test_inside_an_mlflow_run_the_scan_tags_are_written(tmp_path):
    with WebhookReceiver() as hook:
        (result,) = _run(["mlflow", str(tmp_path), hook.url, "nan_exploding_lr_linreg"], tmp_path,
                         MLFLOW_ALLOW_FILE_STORE="true")
    from trackerhealth.writers.mlflow_writer import health_tags

    (history,) = read_histories(result["csv"])
    scan = analyze(history)
    tags = result["tags"]
    for key, value in health_tags(scan).items():  # status, findings, score: what a scan writes
        assert tags[key] == value, key
    assert tags["trackerhealth.status"] == "critical" and tags["trackerhealth.findings"] == "nonfinite"
    assert tags["trackerhealth.alerted"] == "nonfinite", "a later scan will not alert it again"
    assert tags["trackerhealth.scanned_at"].endswith("Z")
    assert result["tags_before_close"]["trackerhealth.findings"] == "nonfinite", "written during training"
    assert result["status"] == "RUNNING", "the monitor neither ends nor restarts the run"
    assert len(hook.received) == 1


def _alerts(log_path: str) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", log_path],
                         capture_output=True, text=True, timeout=120, check=True)
    records = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return [r["alert"] for r in records if r.get("type") == "alert"]


def test_inside_a_wandb_run_findings_become_wandb_alerts(tmp_path):
    dead, healthy = _run(["wandb", str(tmp_path), "", "nan_exploding_lr_linreg", "healthy_fast_plateau_wandb"],
                         tmp_path)
    assert dead["final"] == ["nonfinite"] and healthy["final"] == []
    (alert,) = _alerts(dead["log"])
    assert alert["title"] == "trackerhealth: nonfinite" and alert["level"] == "ERROR"
    assert int(alert["wait_duration"]) == 120_000  # ms: W&B holds back a repeat of this title
    # The loss jumps back to its start after the gradient spike: a finite blow-up, caught before any NaN.
    assert ("gradient norm exploded" in alert["text"] or "diverged at step" in alert["text"]) and "Fix: Clip gradients" in alert["text"]
    assert _alerts(healthy["log"]) == []


def test_asking_for_a_tracker_that_is_not_installed_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r"pip install 'trackerhealth\[wandb\]'"):
        HealthMonitor(alert=["wandb"])
    HealthMonitor(alert="auto")  # not asked for explicitly: no error
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ImportError, match=r"pip install 'trackerhealth\[mlflow\]'"):
        HealthMonitor(alert="mlflow")
    with pytest.raises(ValueError, match="unknown alert channel 'slack'"):
        HealthMonitor(alert=["slack"])
    with pytest.raises(ValueError, match="http"):
        HealthMonitor(alert=["ftp://example.invalid/hook"])


def test_without_a_live_run_tracker_alerts_are_skipped_with_one_warning(monkeypatch, tmp_path, caplog):
    pytest.importorskip("wandb")
    monitor = HealthMonitor(alert=["wandb", "log"], name="offline")
    with caplog.at_level("INFO", logger="trackerhealth"):
        log = train_monitored("nan_exploding_lr_linreg", monitor, 50, monkeypatch)
        monitor.close()
    said = [r for r in caplog.records if "no live W&B run" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING", "asked for by name: said once, as a warning"
    assert len(log.checks) > 10
    assert scan_ids(log, tmp_path) == {"nonfinite"}

    caplog.clear()
    monitor = HealthMonitor(alert="auto", name="offline")  # W&B only because it is imported: an info line
    with caplog.at_level("INFO", logger="trackerhealth"):
        train_monitored("nan_exploding_lr_linreg", monitor, 50, monkeypatch)
        monitor.close()
    said = [r for r in caplog.records if "no live W&B run" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "INFO"


def test_importing_the_monitor_imports_no_framework_and_a_missing_one_names_the_fix():
    code = """
import sys
import trackerhealth.monitor as m
heavy = {'torch', 'transformers', 'lightning', 'pytorch_lightning', 'keras', 'wandb', 'mlflow'}
print(sorted(heavy & {k.split('.')[0] for k in sys.modules}))
for name, blocked in [('HFHealthCallback', ['transformers']),
                      ('LightningHealthCallback', ['lightning', 'lightning.pytorch', 'pytorch_lightning']),
                      ('KerasHealthCallback', ['keras'])]:
    for b in blocked:
        sys.modules[b] = None
    try:
        getattr(m, name)
    except ImportError as exc:
        print(name, exc)
"""
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "[]", "no framework or tracker SDK is imported with the monitor"
    assert "HFHealthCallback" in lines[1] and "pip install 'trackerhealth[hf]'" in lines[1]
    assert "LightningHealthCallback" in lines[2] and "pip install 'trackerhealth[lightning]'" in lines[2]
    assert "KerasHealthCallback" in lines[3] and "pip install 'trackerhealth[keras]'" in lines[3]
    assert time.monotonic() - t0 < 120


def test_mlflow_tags_that_cannot_be_written_say_so_once(tmp_path, monkeypatch, caplog):
    """A real MLflow run (file store); the tracking server 'goes away' for a while (log_batch fails)."""
    mlflow = pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    real = MlflowClient.log_batch
    down = {"on": True}

    def log_batch(self, *args, **kwargs):
        if down["on"]:
            raise ConnectionError("tracking server unreachable")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", log_batch)
    try:
        with mlflow.start_run() as run, caplog.at_level("DEBUG", logger="trackerhealth"):
            monitor = HealthMonitor(alert=["mlflow"], name="flaky")
            for step in range(2000):
                monitor.log({"train/loss": 1.0 / (1 + step) if step < 1500 else float("nan")}, step=step)
                if step == 1600:
                    down["on"] = False
                if step % 100 == 99:
                    monitor.check(force=True)
            monitor.close()
            tags = MlflowClient().get_run(run.info.run_id).data.tags
    finally:
        mlflow.set_tracking_uri(None)
    failed = [r for r in caplog.records if "failed: ConnectionError" in r.getMessage()]
    assert len(failed) > 3, "it failed at many checks"
    assert [r.levelname for r in failed].count("WARNING") == 1, "said once"
    assert any("written again" in r.getMessage() for r in caplog.records)
    assert tags["trackerhealth.status"] == "critical", "written once the server was back"
