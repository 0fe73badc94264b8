"""Shared pieces for the monitor tests: corpus trainings with a live monitor, a webhook receiver.

The corpus scenarios (``tests/corpus``) train small numpy models for real and log through a
``RunLog``. :func:`train_monitored` swaps that ``RunLog`` for one that also feeds a
:class:`HealthMonitor` at every logging call and checks it every ``every`` steps (an "epoch"), so
the monitor watches the very training the corpus records, while it happens.
"""

from __future__ import annotations

import json
import math
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tests.corpus import loop, runlog, scenarios, scenarios_healthy, scenarios_more
from tests.corpus.loop import SCENARIOS
from trackerhealth.adapters.files import read_histories
from trackerhealth.engine import analyze
from trackerhealth.monitor import CheckResult, HealthMonitor

if TYPE_CHECKING:
    from typing_extensions import Self

_MODULES = (scenarios, scenarios_more, scenarios_healthy)  # importing them registers the scenarios


class MonitoredRunLog(runlog.RunLog):
    """The corpus' RunLog, plus a monitor fed at every logging call and checked every ``every`` steps."""

    def __init__(self, name: str, monitor: HealthMonitor, every: int):
        super().__init__(name)
        self.monitor = monitor
        self.every = every
        self.checks: list[CheckResult] = []
        self._next = None

    def log(self, step, values, wall_time=None):
        super().log(step, values, wall_time)
        if self._next is None:
            self._next = step + self.every
        self.monitor.log(values, step=step)
        if step >= self._next:
            self.checks.append(self.monitor.check())
            self._next += self.every


def train_monitored(name: str, monitor: HealthMonitor, every: int, monkeypatch) -> MonitoredRunLog:
    """Train corpus scenario ``name`` for real with ``monitor`` watching; returns its log.

    An exception the monitor raises into the loop (``stop_on_nonfinite``) propagates; the log
    trained so far is then ``exc.log``.
    """
    made: list[MonitoredRunLog] = []

    def factory(run_name):
        made.append(MonitoredRunLog(run_name, monitor, every))
        return made[-1]

    for module in _MODULES:
        monkeypatch.setattr(module, "RunLog", factory)
    sc = SCENARIOS[name]
    try:
        sc.fn(name, sc.seed)
    except Exception as exc:
        exc.log = made[-1] if made else None
        raise
    finally:
        for module in _MODULES:
            monkeypatch.setattr(module, "RunLog", runlog.RunLog)
    return made[-1]


def scan_ids(log: runlog.RunLog, folder: Path) -> set[str]:
    """What a later scan of the run says: write it as the corpus does (long CSV), read it back, analyse."""
    path = folder / f"{log.name}.csv.gz"
    log.write(path, "long-csv")
    (history,) = read_histories(path)
    return {f.id for f in analyze(history).problems}


def first_nonfinite_step(log: runlog.RunLog, keys=None) -> float | None:
    """The first logged step with a NaN/Inf among ``keys`` (every key when None)."""
    for step, values, _ in log.records:
        if any(not math.isfinite(v) for k, v in values.items() if keys is None or k in keys):
            return step
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebhookReceiver:
    """A real HTTP server on 127.0.0.1 that records the JSON bodies POSTed to it.

    ``status`` is the HTTP status it answers with (500 makes every delivery fail); with ``hold``,
    each request waits until ``release()`` before it is recorded and answered.
    """

    def __init__(self, status: int = 200, hold: bool = False):
        self.received: list[dict] = []
        self.status = status
        self.released = threading.Event()
        if not hold:
            self.released.set()
        self.got = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.released.wait(60)
                receiver.received.append({"path": self.path, "content_type": self.headers.get("Content-Type"),
                                          "json": json.loads(body)})
                self.send_response(receiver.status)
                self.end_headers()
                self.wfile.write(b"ok")
                receiver.got.set()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T000/B000/secret"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def release(self) -> None:
        self.released.set()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def numpy_rows(n_steps: int, seed: int = 0):
    """Deterministic rows of a real softmax-regression training (for the cost/memory tests)."""
    from tests.corpus import datasets as D
    from tests.corpus import models as M

    rng = np.random.default_rng([seed, 1])
    X, y = D.blobs(2000, d=10, k=4, sep=1.0, seed=seed)
    model = M.MLP([10, 4], init="xavier", rng=np.random.default_rng(seed))
    opt = M.SGD(model.params)
    it = loop.batches(len(X), 32, rng)
    for step in range(n_steps):
        _, _, idx = next(it)
        out = model.forward(X[idx])
        loss, dout = M.softmax_ce(out, y[idx])
        grads, _ = model.backward(dout)
        opt.step(grads, 0.1)
        yield step, {"train/loss": loss, "grad_norm": M.global_norm(grads), "lr": 0.1}, idx
