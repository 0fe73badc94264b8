"""action.yml with ``tracker: wandb``, run step by step as GitHub runs it, against the W&B contract
server holding real training runs (the path a scheduled W&B workflow takes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from action_support import INSTALL

pytestmark = pytest.mark.slow
pytest.importorskip("graphql")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "wandb"))  # the contract server

from contract.corpus import CORPUS, load_into
from contract.server import ContractServer

NAMES = ("nan_corrupted_batch_hf", "healthy_autoencoder_adam", "overfit_spirals_wandb")


@pytest.fixture(scope="module")
def wandb_project():
    with ContractServer() as server:
        entries = [e for e in json.loads((CORPUS / "manifest.json").read_text()) if e["name"] in NAMES]
        runs = load_into(server.store, "action-team", "pretrain", entries)
        yield server, runs
        assert not server.violations, server.violations


def test_a_scheduled_wandb_scan_tags_the_runs_and_fails_on_critical(runner, wandb_project):
    server, runs = wandb_project
    result = runner.run({"tracker": "wandb", "project": "action-team/pretrain"}, skip=(INSTALL,),
                        env={**server.env(), "WANDB_SILENT": "true"})
    assert result.failed and result.exit_code == 1, result.step("Scan").log
    assert result.outputs["runs-scanned"] == "3" and result.outputs["critical"] == "2"
    assert "3 run(s): 2 critical" in result.summary and "`nonfinite`" in result.summary
    health = {name: [t for t in run.tags if t.startswith("health:")] for name, run in runs.items()}
    assert health == {"nan_corrupted_batch_hf": ["health:nonfinite"], "healthy_autoencoder_adam": ["health:ok"],
                      "overfit_spirals_wandb": ["health:overfitting"]}
    assert runs["overfit_spirals_wandb"].summary["trackerhealth/status"] == "critical"
    assert server.API_KEY not in result.step("Scan").log
    save = result.step("Save the history cache")
    assert save.ran and any(Path(save.with_["path"]).rglob("*.parquet")), "the scan cached no history"
