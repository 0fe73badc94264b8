"""Hostile and wrong servers: not MLflow at all, hung, malformed answers; credentials in the URI
while writes fail; two scans of one experiment at once; URIs that cannot be parsed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from mlflow_support import FaultProxy, WebhookReceiver, corpus_history, log_history, scan_cli

from trackerhealth.engine import analyze
from trackerhealth.writers import alerts
from trackerhealth.writers import mlflow_writer as mw

ROOT = Path(__file__).resolve().parents[2]
NAN_RUN = "nan_log0_custom_bce"
FAST = {"TRACKERHEALTH_HTTP_RETRIES": "2", "TRACKERHEALTH_HTTP_BACKOFF": "0.01"}


class FakeServer:
    """A real HTTP server on 127.0.0.1 answering every request with ``answer(path) -> (status, type, body)``."""

    def __init__(self, answer):
        class Handler(BaseHTTPRequestHandler):
            def _reply(self):
                length = int(self.headers.get("Content-Length", 0) or 0)
                if length:
                    self.rfile.read(length)
                status, kind, body = answer(self.path.split("?")[0])
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


LOGIN = "<!doctype html><html><head><title>Sign in - Corp SSO</title></head><body>login</body></html>"


@pytest.mark.parametrize("answer, said", [
    (lambda path: (200, "text/html", LOGIN), "Sign in - Corp SSO"),  # a login page answering 200
    (lambda path: (200, "application/json", "{}"), "{}"),  # a server answering {} to everything
    (lambda path: (404, "text/plain", "nothing here"), "no 'experiments' list"),  # another service
])
def test_a_server_that_is_not_mlflow_is_named_and_exits_3(answer, said, cache_dir):
    with FakeServer(answer) as fake:
        result = scan_cli(["--mlflow-uri", fake.url, "-e", "x", "--cache-dir", str(cache_dir)], env=FAST)
    assert result.exit_code == 3, result.output
    assert "this is not an MLflow server" in result.stderr and fake.url in result.stderr
    assert said in result.stderr
    assert "overloaded" not in result.stderr and "no experiment named" not in result.stderr


def test_malformed_documents_from_an_mlflow_looking_server_are_a_message_not_a_traceback(cache_dir):
    docs = {"/version": (200, "text/plain", "3.17.2"),
            "/api/2.0/mlflow/experiments/get-by-name": (200, "application/json", "{}")}

    def answer(path):
        return docs.get(path, (200, "application/json", json.dumps({"runs": [{"info": {}, "data": {"tags": [{}]}}]})))

    with FakeServer(answer) as fake:
        result = scan_cli(["--mlflow-uri", fake.url, "-e", "x", "--cache-dir", str(cache_dir)], env=FAST)
        assert result.exit_code == 3, result.output
        assert "malformed" in result.stderr and "experiment" in result.stderr
        docs["/api/2.0/mlflow/experiments/get-by-name"] = (
            200, "application/json", json.dumps({"experiment": {"experiment_id": "1", "name": "x"}}))
        result = scan_cli(["--mlflow-uri", fake.url, "-e", "x", "--cache-dir", str(cache_dir)], env=FAST)
    assert result.exit_code == 3, result.output
    assert "malformed" in result.stderr and "run id" in result.stderr


def test_a_server_that_accepts_and_never_answers_is_named_within_the_timeout(cache_dir):
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # the kernel accepts connections; nobody ever reads or answers
    url = f"http://127.0.0.1:{hung.getsockname()[1]}"
    try:
        result = scan_cli(["--mlflow-uri", url, "-e", "x", "--cache-dir", str(cache_dir), "--timeout", "2"])
    finally:
        hung.close()
    assert result.exit_code == 3, result.output
    assert f"MLflow server {url} did not answer" in result.stderr
    assert "a 2 s budget; --timeout" in result.stderr


@pytest.mark.parametrize("uri, said", [
    ("http://[::1", "not a valid URL"),
    ("http://user:hunter2@127.0.0.1:99999", "Port out of range"),
])
def test_unparsable_uris_exit_2_with_a_message(uri, said):
    result = scan_cli(["--mlflow-uri", uri, "-e", "x"])
    assert result.exit_code == 2 and said in result.stderr and "Traceback" not in result.output
    assert "hunter2" not in result.output


def test_a_file_that_is_not_a_database_exits_2(tmp_path):
    fake = tmp_path / "mlflow.db"
    fake.write_text("not a database at all\n")
    result = scan_cli(["--mlflow-uri", f"sqlite:///{fake}", "-e", "x"])
    assert result.exit_code == 2 and "is not a SQLite database" in result.stderr


def _cli(args: list[str], env: dict) -> subprocess.Popen:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true", **env}
    full.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen([sys.executable, "-c", "from trackerhealth.cli import main; main()", "scan", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full, cwd=ROOT)


def test_the_password_in_the_uri_is_printed_nowhere_when_writes_fail(mlflow_server, client, experiment, tmp_path):
    password = "S3cr3t-Pa55word"
    exp_id, exp_name = experiment
    ids = [log_history(client, exp_id, corpus_history(n), n) for n in (NAN_RUN, "healthy_sgdr_wandb")]
    cache = tmp_path / "cache"
    # The artifact store fails every upload: the write path (MlflowClient) reports the URL it was given.
    with FaultProxy(mlflow_server.url, share=0.0, always_fail="mlflow-artifacts") as proxy:
        uri = proxy.url.replace("http://", f"http://trackerhealth:{password}@")
        proc = _cli(["--mlflow-uri", uri, "-e", exp_name, "--format", "json", "--cache-dir", str(cache)],
                    {**FAST, "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1"})
        stdout, stderr = proc.communicate(timeout=300)
    assert proxy.counts["500"] > 0  # the writes really failed
    assert proc.returncode == 2, stderr
    doc = json.loads(stdout)
    assert sorted(e["run_id"] for e in doc["errors"]) == sorted(ids)  # those runs are errors
    assert all("writing the health back failed" in e["message"] for e in doc["errors"])
    assert "trackerhealth:***@" in stdout + stderr  # redacted, not dropped: the user can tell which URL
    written = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    for text in (stdout, stderr, *(b.decode("utf-8", "replace") for b in written)):
        assert password not in text
    for rid in ids:
        assert all(password not in v for v in client.get_run(rid).data.tags.values())


def test_two_scans_at_once_send_one_alert_per_finding(mlflow_server, client, experiment, tmp_path):
    exp_id, exp_name = experiment
    names = (NAN_RUN, "vanish_sigmoid20_gradients", "overfit_regression_keras")
    ids = {n: log_history(client, exp_id, corpus_history(n), n) for n in names}
    critical = {(ids[n], f.id) for n in names for f in analyze(corpus_history(n)).problems if f.level == "critical"}
    assert len(critical) >= 2
    with WebhookReceiver() as hook:
        scans = [_cli(["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--cache-dir", str(tmp_path / f"c{i}"),
                       "--alert-webhook", hook.url, "--fail-on", "never"], {}) for i in range(2)]
        results = [p.communicate(timeout=300) for p in scans]
        # On failure, each scan's stderr tail (pytest would cut the whole outputs short of the reason).
        assert [p.returncode for p in scans] == [0, 0], [err[-3000:] for _, err in results]
        sent = [(p["trackerhealth"]["run"]["id"], p["trackerhealth"]["finding"]["id"]) for p in hook.payloads]
    assert sorted(sent) == sorted(critical)  # each exactly once, across both scans
    assert len({p["dedup_key"] for p in hook.payloads}) == len(sent)
    for rid in ids.values():
        alerted = client.get_run(rid).data.tags[mw.ALERTED]
        assert alerts.parse_ids(alerted) == {f for r, f in critical if r == rid}


def test_a_javascript_ui_url_is_rejected_at_option_parsing():
    result = scan_cli(["--mlflow-uri", "http://127.0.0.1:1", "-e", "x", "--mlflow-ui-url", "javascript:alert(1)"])
    assert result.exit_code == 2
    assert "--mlflow-ui-url" in result.stderr and "must be an http(s):// URL" in result.stderr
    assert "did not answer" not in result.stderr  # rejected before anything was asked of the server


class WritesDropped(FaultProxy):
    """Reads pass; every write (artifact upload, tag batch) loses its connection: a server that died
    between the reads and the writes."""

    def __init__(self, upstream: str):
        super().__init__(upstream, share=0.0)
        self.writes = 0

    def _draw(self, requestline: str, body: bytes) -> str | None:
        if "mlflow-artifacts" in requestline or "runs/log-batch" in requestline or "set-tag" in requestline:
            with self._lock:
                self.writes += 1
            return "dropped"
        return super()._draw(requestline, body)


def test_a_server_dying_before_the_writes_ends_the_scan_as_unreachable(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    names = ["healthy_sgdr_wandb", "healthy_autoencoder_adam", "slow_unnormalized_features", NAN_RUN,
             "healthy_step_decay_keras", "vanish_sigmoid20_gradients"]
    for n in names:
        log_history(client, exp_id, corpus_history(n), n)
    with WritesDropped(mlflow_server.url) as proxy:
        result = scan_cli(["--mlflow-uri", proxy.url, "-e", exp_name, "--format", "json", "--cache-dir",
                           str(cache_dir), "--workers", "2"],
                          env={**FAST, "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0"})
    assert result.exit_code == 3, result.output
    assert "stopped answering writes" in result.stdout
    doc = json.loads(result.stdout)
    assert any("not scanned: the tracker stopped answering" in e["message"] for e in doc["errors"])
    # Bounded: the runs in flight try their first write a few times; the rest are not attempted.
    assert proxy.writes <= 2 * 3
