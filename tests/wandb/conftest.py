"""Real W&B run folders for the tests, written once per session by the real SDK in offline mode.

Each mode of ``train_numpy.py`` (a numpy MLP really trained) runs in its own subprocess, all in
parallel; the SDK starts its ``wandb-core`` process for each. No network is used
(``WANDB_MODE=offline``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from wandb_support import HERE, read_truth

from trackerhealth.adapters.wandb import find_run_folders

# mode -> steps; `kill` crashes itself after logging its steps.
MODES = {"sgd": 200, "watch": 120, "diverge": 200, "wide": 12, "kill": 200}
TIMEOUT_S = 240


@dataclass
class SdkRun:
    mode: str
    folder: Path  # the run folder (wandb/offline-run-…)
    log: Path  # its run-<id>.wandb
    header: dict  # run id, project, name as the SDK reported them
    rows: list[dict]  # {step, time, row} for every logged step
    returncode: int


@pytest.fixture(scope="session")
def sdk_runs(tmp_path_factory) -> dict[str, SdkRun]:
    pytest.importorskip("wandb.proto.wandb_internal_pb2", reason="the wandb extra is not installed")
    root = tmp_path_factory.mktemp("wandb-sdk-runs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DISABLE_GIT="true",
               WANDB_DISABLE_CODE="true", WANDB_ERROR_REPORTING="false", PYTHONUNBUFFERED="1")
    procs = {}
    for mode, steps in MODES.items():
        out = root / mode
        out.mkdir()
        with open(out / "train.log", "wb") as log:
            procs[mode] = subprocess.Popen(
                [sys.executable, str(HERE / "train_numpy.py"), str(out), "--mode", mode, "--steps", str(steps)],
                stdout=log, stderr=subprocess.STDOUT, cwd=out, env=env, start_new_session=True)
    runs = {}
    for mode, proc in procs.items():
        out = root / mode
        try:
            rc = proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        expected = -9 if mode == "kill" else 0
        assert rc == expected, f"{mode}: exit {rc}\n{(out / 'train.log').read_text()[-3000:]}"
        folders = find_run_folders(out)
        assert len(folders) == 1, folders
        header, rows = read_truth(out)
        runs[mode] = SdkRun(mode, folders[0], next(folders[0].glob("*.wandb")), header, rows, rc)
    return runs


# -- the W&B API: the strict contract server -------------------------------------------------------
@pytest.fixture(scope="session")
def contract_server():
    """One contract server per session (tests keep apart by project); see tests/wandb/contract."""
    pytest.importorskip("graphql", reason="the test extra (graphql-core) is not installed")
    pytest.importorskip("wandb.apis.public", reason="the wandb extra is not installed")
    from contract.server import ContractServer

    with ContractServer() as server:
        yield server


@pytest.fixture
def wandb_env(contract_server, monkeypatch, tmp_path):
    """The environment a user would have: WANDB_BASE_URL and WANDB_API_KEY pointing at the contract
    server. Any request outside the contract fails the test."""
    for key, value in {**contract_server.env(), "WANDB_SILENT": "true", "WANDB_CACHE_DIR": str(tmp_path / "sdk-cache"),
                       "WANDB_DIR": str(tmp_path)}.items():
        monkeypatch.setenv(key, value)
    before = len(contract_server.violations)
    yield contract_server
    contract_server.hooks.clear()
    contract_server._faults.clear()
    new = contract_server.violations[before:]
    assert not new, "requests outside the W&B contract:\n" + "\n\n".join(new)
