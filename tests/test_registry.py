"""The registry is the contract: ids, docs, thresholds, CLI listing and scenario coverage."""

import dataclasses
import json
from pathlib import Path

from click.testing import CliRunner

from trackerhealth import diagnoses
from trackerhealth.cli import main
from trackerhealth.roles import ROLES

CONTRACT_IDS = {
    "loss-oscillation", "overfitting", "nonfinite", "slow-convergence",
    "periodic-spikes", "vanishing-gradients", "input-bottleneck", "task-imbalance",
}
MANIFEST = Path(__file__).parent / "corpus" / "manifest.json"


def test_registry_holds_exactly_the_contract_ids():
    assert set(diagnoses.REGISTRY) == CONTRACT_IDS


def test_every_diagnosis_documents_itself_and_its_thresholds():
    for d in diagnoses.REGISTRY.values():
        doc = d.doc
        assert len(doc) > 300, d.id
        for heading in ("What it looks for", "Why it matters", "Thresholds", "Fix"):
            assert heading in doc, (d.id, heading)
        assert dataclasses.is_dataclass(d.thresholds) and d.thresholds.__dataclass_params__.frozen
        for f in dataclasses.fields(d.thresholds):
            assert f.default is not dataclasses.MISSING, (d.id, f.name)
            assert f"``{f.name}``" in doc, f"{d.id}: threshold {f.name} is not documented"
        assert d.needs and set(d.needs) <= set(ROLES)
        assert d.module.RECOMMENDATION


def test_every_diagnosis_is_listed_by_the_cli():
    out = CliRunner().invoke(main, ["diagnoses"]).output
    for diag_id in CONTRACT_IDS:
        assert diag_id in out
    page = CliRunner().invoke(main, ["diagnoses", "overfitting"]).output
    assert "Why it matters" in page and "min_rise" in page
    bad = CliRunner().invoke(main, ["diagnoses", "overfit"])
    assert bad.exit_code == 2 and "known:" in bad.output


def test_every_diagnosis_has_at_least_three_trained_scenarios():
    manifest = json.loads(MANIFEST.read_text())
    for diag_id in CONTRACT_IDS:
        runs = [r for r in manifest if diag_id in r["faults"]]
        assert len(runs) >= 3, f"{diag_id}: only {len(runs)} trained scenario runs in the corpus"
    assert sum(1 for r in manifest if not r["faults"]) >= 10
