"""A failed or unread analysis is never tagged healthy on W&B: ``health:error`` / ``health:unknown``
and ``trackerhealth/status`` say so (the project's strict W&B contract server)."""

from __future__ import annotations

from contract.corpus import CORPUS, load_into
from test_api_faults import entries, health_of
from test_api_scan import ENTITY, run_scan

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


def test_a_run_whose_diagnoses_fail_is_tagged_error_never_ok(every_diagnosis_raises, wandb_env, tmp_path):
    server = wandb_env
    project = "diagnoses-fail"
    (run,) = load_into(server.store, ENTITY, project, entries(("healthy_autoencoder_adam",))).values()
    run_scan(project, tmp_path / "cache")
    assert health_of(run) == ["health:error"]
    assert run.summary["trackerhealth/status"] == "error"
