"""Shared pieces for the MLflow tests: corpus runs logged into the real server, a webhook
receiver and a fault-injecting proxy (both real HTTP servers on 127.0.0.1, in threads)."""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
from click.testing import CliRunner

from trackerhealth.schema import RunHistory, RunRef

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
T0_MS = 1_750_000_000_000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- corpus -------------------------------------------------------------------------------------
@cache
def manifest() -> tuple[dict, ...]:
    return tuple(json.loads((CORPUS / "manifest.json").read_text()))


@cache
def corpus_history(name: str) -> RunHistory:
    from trackerhealth.adapters.files import read_histories

    entry = next(e for e in manifest() if e["name"] == name)
    histories = read_histories(CORPUS / entry["file"])
    assert len(histories) == 1, entry
    return histories[0]


def logged_rows(history: RunHistory) -> pd.DataFrame:
    """What a training loop would have sent to MLflow: integer steps, millisecond timestamps
    (the run's own wall times; runs logged without them get one step per 100 ms), in step order
    with the keys of one step in first-logged order, as ``mlflow.log_metrics`` per step does."""
    frame = history.to_frame()
    frame["order"] = pd.Categorical(frame["key"], categories=history.keys()).codes
    frame = frame.sort_values(["step", "order"], kind="stable").reset_index(drop=True)
    wall = frame["wall_time"].to_numpy()
    synthetic = T0_MS + frame["step"].to_numpy() * 100.0
    ms = np.where(np.isfinite(wall), np.round(wall * 1000.0), synthetic)
    return pd.DataFrame({"key": frame["key"].astype(object), "step": frame["step"].astype(np.int64),
                         "value": frame["value"].astype(np.float64), "timestamp": ms.astype(np.int64)})


def as_logged(history: RunHistory, ref: RunRef | None = None) -> RunHistory:
    """The history exactly as MLflow holds it after :func:`log_history` (what the scan must analyze)."""
    rows = logged_rows(history)
    return RunHistory.from_long(ref or history.ref, rows["step"].to_numpy(), rows["key"].to_numpy(),
                                rows["value"].to_numpy(), rows["timestamp"].to_numpy() / 1000.0)


def log_rows(client, run_id: str, rows: pd.DataFrame) -> None:
    from mlflow.entities import Metric

    metrics = [Metric(k, float(v), int(t), int(s))
               for k, s, v, t in zip(rows["key"], rows["step"], rows["value"], rows["timestamp"])]
    for i in range(0, len(metrics), 1000):  # log_batch takes at most 1,000 metrics
        client.log_batch(run_id, metrics=metrics[i:i + 1000])


def log_history(client, experiment_id: str, history: RunHistory, name: str, *, finish: str | None = "FINISHED",
                tags: dict | None = None, params: dict | None = None) -> str:
    """Log a real training history into MLflow with log_batch, keeping steps and timestamps."""
    from mlflow.entities import Param

    rows = logged_rows(history)
    start = int(rows["timestamp"].min()) if len(rows) else T0_MS
    run = client.create_run(experiment_id, start_time=start, run_name=name,
                            tags={"team": "corpus", "source": "tests/corpus", **(tags or {})})
    run_id = run.info.run_id
    client.log_batch(run_id, params=[Param(k, str(v)) for k, v in (params or {"corpus_run": name}).items()])
    log_rows(client, run_id, rows)
    if finish:
        client.set_terminated(run_id, finish, end_time=int(rows["timestamp"].max()) + 1000 if len(rows) else None)
    return run_id


def scan_cli(args: list[str], env: dict | None = None):
    from trackerhealth.scan_cli import scan

    return CliRunner().invoke(scan, args, env=env or {}, catch_exceptions=False)


def json_out(result) -> dict:
    return json.loads(result.stdout)


# -- a webhook receiver ---------------------------------------------------------------------------
class _LocalServer:
    """A ThreadingHTTPServer on 127.0.0.1 served from a daemon thread while the ``with`` lasts."""

    def _serve(self, handler) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class WebhookReceiver(_LocalServer):
    """Collects JSON POSTs; ``fail_next`` answers that many with 500 first."""

    def __init__(self):
        self.payloads: list[dict] = []
        self.fail_next = 0
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.attempts += 1
                if receiver.fail_next > 0:
                    receiver.fail_next -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.payloads.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self._serve(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/services/T000/B000/secret"



# -- a proxy that misbehaves ----------------------------------------------------------------------
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class FaultProxy(_LocalServer):
    """Forwards to ``upstream``; a ``share`` of requests instead get 429, 503 or a dropped connection.

    ``always_fail`` (a substring of the request line or body) makes matching requests fail with 500
    every time: a run the server cannot serve. Faults are drawn from a seeded generator.
    """

    def __init__(self, upstream: str, share: float = 0.3, seed: int = 7, always_fail: str | None = None):
        host_port = upstream.split("://", 1)[1].rstrip("/")
        self.upstream_host, port = host_port.split(":")
        self.upstream_port = int(port)
        self.share = share
        self.always_fail = always_fail
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.counts = {"forwarded": 0, "429": 0, "503": 0, "dropped": 0, "500": 0}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self):
                length = int(self.headers.get("Content-Length", 0) or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._draw(self.requestline, body)
                if fault == "dropped":
                    self.close_connection = True
                    return  # no response at all: the client sees the connection die
                if fault in ("429", "503", "500"):
                    payload = b'{"error_code": "TEMPORARILY_UNAVAILABLE", "message": "injected"}'
                    self.send_response(int(fault))
                    if fault == "429":
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in HOP and k.lower() != "content-length":
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

            def log_message(self, *args):
                pass

        self._serve(Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def _draw(self, requestline: str, body: bytes) -> str | None:
        with self._lock:
            if self.always_fail and (self.always_fail in requestline or self.always_fail.encode() in body):
                self.counts["500"] += 1
                return "500"
            if "/health" not in requestline and self._rng.random() < self.share:
                fault = self._rng.choice(["429", "503", "dropped"])
                self.counts[fault] += 1
                return fault
            self.counts["forwarded"] += 1
            return None

