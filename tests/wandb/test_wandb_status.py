"""A failed or unread analysis is never tagged healthy on W&B: ``health:error`` / ``health:unknown``
and ``trackerhealth/status`` say so (the project's strict W&B contract server)."""

from __future__ import annotations

from contract.corpus import CORPUS, load_into
from test_api_faults import entries, health_of
from test_api_scan import ENTITY, run_scan

from trackerhealth import diagnoses
from trackerhealth.adapters.files import read_histories
from trackerhealth.engine import analyze


def test_a_run_without_a_recognised_loss_is_tagged_unknown(wandb_env, tmp_path):
    server = wandb_env
    project = "no-loss"
    # A real training loss logged under a name no role matches: nothing says the training is healthy.
    (history,) = read_histories(CORPUS / entries(("healthy_autoencoder_adam",))[0]["file"])
    loss = history[analyze(history).loss_key]
    run = server.store.add_run(ENTITY, project, "costly", history=[{"_step": int(s), "cost": float(v)}
                                                                  for s, v in zip(loss.steps, loss.values)])
    result, _ = run_scan(project, tmp_path / "cache")
    assert [r.status for r in result.reports] == ["unknown"]
    assert health_of(run) == ["health:unknown"]
    assert run.summary["trackerhealth/status"] == "unknown"


class _Raising:
    def __init__(self, real):
        self.title, self._real = real.title, real

    def default_thresholds(self):
        return self._real.default_thresholds()

    def run(self, view, thresholds):
        raise RuntimeError("injected")


def test_a_run_whose_diagnoses_fail_is_tagged_error_never_ok(wandb_env, tmp_path, monkeypatch):
    server = wandb_env
    project = "diagnoses-fail"
    (run,) = load_into(server.store, ENTITY, project, entries(("healthy_autoencoder_adam",))).values()
    monkeypatch.setattr(diagnoses, "REGISTRY", {k: _Raising(v) for k, v in diagnoses.REGISTRY.items()})
    run_scan(project, tmp_path / "cache")
    assert health_of(run) == ["health:error"]
    assert run.summary["trackerhealth/status"] == "error"
