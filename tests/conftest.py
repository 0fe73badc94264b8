"""Shared test fixtures: one real MLflow tracking server for the whole session.

Start-up takes 15-40 s here, so the MLflow scan tests, the Action tests and the demo tests all use
this one server (sqlite backend, proxied artifacts in a temporary folder, 127.0.0.1, a free port,
waited for by polling /health). mlflow and requests are imported only when a test asks for it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


START_TIMEOUT_S = 180


@dataclass
class Server:
    url: str
    db_path: Path
    artifacts: Path
    log: Path
    process: subprocess.Popen

    @property
    def db_uri(self) -> str:
        return f"sqlite:///{self.db_path}"


def _wait_healthy(url: str, proc: subprocess.Popen, log: Path) -> None:
    import requests

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"mlflow server not healthy after {START_TIMEOUT_S}s:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory) -> Server:
    pytest.importorskip("mlflow")
    root = tmp_path_factory.mktemp("mlflow-server")
    db, artifacts, log = root / "mlflow.db", root / "artifacts", root / "server.log"
    artifacts.mkdir()
    port = free_port()
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
           "--backend-store-uri", f"sqlite:///{db}", "--artifacts-destination", str(artifacts),
           "--serve-artifacts", "--workers", "2"]
    # No background job runner: it starts a handful of worker processes the tests never use.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=root, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield Server(url, db, artifacts, log, proc)
    finally:
        # The server and its workers share the session started above: stop them together.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=3)  # uvicorn waits for idle keep-alive clients; do not wait long
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="session")
def client(mlflow_server):
    from mlflow.tracking import MlflowClient

    return MlflowClient(mlflow_server.url)




class _RaisingDiagnosis:
    """A diagnosis that raises, with the real one's id and title: a failure injected into the
    engine (the thing under test is what a failed analysis is reported and tagged as)."""

    def __init__(self, real):
        self.title = real.title
        self._real = real

    def default_thresholds(self):
        return self._real.default_thresholds()

    def run(self, view, thresholds):
        raise ZeroDivisionError("injected")


@pytest.fixture
def every_diagnosis_raises(monkeypatch):
    """Every registered diagnosis raises ZeroDivisionError("injected") for this test."""
    from trackerhealth import diagnoses

    monkeypatch.setattr(diagnoses, "REGISTRY", {k: _RaisingDiagnosis(v) for k, v in diagnoses.REGISTRY.items()})


@pytest.fixture(scope="session")
def ray_cluster():
    """One real two-node Ray cluster on 127.0.0.1 for the session (tests/ray_cluster.py)."""
    pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[test]'")
    from ray_cluster import start_cluster

    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    cluster = start_cluster(free_port())
    os.environ.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    try:
        yield cluster
    finally:
        cluster.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

# -- running in parallel (opt-in: pytest -n 2 --dist loadgroup) ---------------------------------------
# Tests that share a session's real servers run in one worker, so the run still starts one MLflow
# server and one Ray cluster; the W&B SDK's runs, the dashboard's browser and the monitor's framework
# imports are started once too, in whichever worker takes their group. Every other file is a group
# of its own, so a module-scoped fixture (the demo's training, the torch corpus' folds) runs once.
# A test's fixturenames hold every fixture it needs, directly or through others.
_SERVER_FIXTURES = {"mlflow_server", "ray_cluster"}
_SHARED_FOLDERS = ("mlflow", "action", "wandb", "dashboard", "monitor", "demo")


def _group(item) -> str:
    path = Path(str(item.fspath)).resolve().relative_to(Path(__file__).resolve().parent)
    if _SERVER_FIXTURES & set(item.fixturenames) or path.parts[0] in ("mlflow", "action") or path.name == "test_lake.py":
        return "servers"
    if path.parts[0] in _SHARED_FOLDERS:
        return path.parts[0]
    return str(path)


# Two workers share two cores with the session's servers and Ray's processes. A BLAS or OpenMP pool
# in each of them spins for cores the others hold, and a 2 ms matmul can then take tens of ms: the
# monitor's starved-loader run (data 30 ms a step against ~3 ms of compute) stopped being starved.
# One thread each, set before the workers start (they, and every process they start, inherit it).
_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    if _groups_would_split(config):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with xdist's --dist loadgroup forms no test groups "
            "(pytest-dev/pytest-xdist#1386): pip install -e '.[test]' installs a pytest that works, "
            "or run in one process: python -m pytest -n 0")
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None):
        for name in _ONE_THREAD:
            os.environ.setdefault(name, "1")


# Marked as each test is collected, so the marks are there before any pytest_collection_modifyitems
# runs (xdist reads them in its own, and hook order between it and a conftest is not ours to choose).
def pytest_itemcollected(item):
    if item.config.pluginmanager.hasplugin("xdist"):
        item.add_marker(pytest.mark.xdist_group(_group(item)))


# xdist forms a group by appending "@group" to a worker's node ids; under pytest 9.2 that write no
# longer changes the id (pytest-dev/pytest-xdist#1386, open), so every group silently split across
# the workers: two MLflow servers, two Ray clusters, the torch corpus' folds computed twice, the
# suite past its 10 minutes. Checked in the controller, where an error reads as one (a worker's
# error reaches the controller as an INTERNALERROR about something else).
_XDIST_GROUPS_BROKEN_FROM = (9, 2)


def _groups_would_split(config) -> bool:
    from packaging.version import Version

    return (config.getoption("dist", None) == "loadgroup" and not hasattr(config, "workerinput")
            and Version(pytest.__version__).release[:2] >= _XDIST_GROUPS_BROKEN_FROM)
