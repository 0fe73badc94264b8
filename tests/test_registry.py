"""The registry is the contract: ids, docs, thresholds, CLI listing and scenario coverage."""

import ast
import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from trackerhealth import RunHistory, RunRef, analyze, config_facts, diagnoses, explain, scorecard
from trackerhealth.cli import main
from trackerhealth.config import ConfigError, from_dict
from trackerhealth.diagnoses import _docs
from trackerhealth.diagnoses._thresholds import described
from trackerhealth.roles import ROLES

CONTRACT_IDS = {
    "loss-oscillation", "overfitting", "nonfinite", "slow-convergence",
    "periodic-spikes", "vanishing-gradients", "input-bottleneck", "task-imbalance", "baseline-regression",
}
MANIFEST = Path(__file__).parent / "corpus" / "manifest.json"


def test_registry_holds_exactly_the_contract_ids():
    assert set(diagnoses.REGISTRY) == CONTRACT_IDS


def test_every_diagnosis_documents_itself_and_its_thresholds():
    for d in diagnoses.REGISTRY.values():
        doc = d.doc
        assert len(doc) > 300, d.id
        for heading in ("What it looks for", "Why it matters"):
            assert heading in doc, (d.id, heading)
        # The fix and the thresholds are rendered from the code, so the docstring never repeats them.
        for rendered in ("**Fix.**", "**Thresholds.**"):
            assert rendered not in doc, f"{d.id}: {rendered} is rendered from the code; drop it from the docstring"
        assert d.recommendation and d.recommendation == d.module.RECOMMENDATION
        assert f"**Fix.** {d.recommendation}\n\n**Real cases.**\n\n- `{d.real_cases[0].run}`" in _docs.page(d)
        assert dataclasses.is_dataclass(d.thresholds) and d.thresholds.__dataclass_params__.frozen
        for name, default, meaning in d.threshold_meanings():
            assert default is not dataclasses.MISSING, (d.id, name)
            assert meaning.strip() and "\n" not in meaning, (d.id, name)
        assert d.needs and set(d.needs) <= set(ROLES)


def test_numbers_the_prose_quotes_for_a_threshold_are_its_default():
    # "``min_rise`` (0.1)" in a docstring must say the field's default: the prose cannot drift.
    for d in diagnoses.REGISTRY.values():
        fields = d.threshold_fields()
        for name, number, percent in re.findall(r"``(\w+)`` \((-?[\d.]+(?:e-?\d+)?)( ?%)?", d.doc):
            if name in fields:
                said = float(number) / (100 if percent and "util" not in name else 1)  # "(90 %)" of a share is 0.9
                assert said == pytest.approx(fields[name]), f"{d.id}: the docstring says {name} is {number}{percent}, the default is {fields[name]}"


def test_the_scorecard_has_frozen_declared_thresholds_that_the_config_changes():
    assert scorecard.Thresholds.__dataclass_params__.frozen
    rows = described(scorecard.Thresholds)
    assert {"penalty_critical", "penalty_warning"} <= {name for name, _, _ in rows}
    steps = np.arange(300.0)
    # A loss that goes NaN is one critical finding, which costs exactly penalty_critical points.
    loss = np.exp(-steps / 60) + 0.1
    loss[-10:] = np.nan
    history = RunHistory.from_series(RunRef("file", "p", "r"), {"loss": (steps, loss)})
    default = analyze(history)
    assert [f.level for f in default.findings if f.is_problem] == ["critical"]
    lenient = analyze(history, from_dict({"thresholds": {"scorecard": {"penalty_critical": 5}}}))
    assert lenient.scores == default.scores
    assert lenient.score - default.score == pytest.approx(30 - 5, abs=0.11)  # both rounded to 0.1
    with pytest.raises(ConfigError, match="penalty_warning"):
        from_dict({"thresholds": {"scorecard": {"penalty_warnings": 1}}})


# Numbers a diagnosis or the scorecard may write outside its Thresholds, and why:
# 0, 1, 2 — signs, "at least one", halves and pairs (a difference needs two points);
# 100 — the percent scale of scores and messages; 0.5 — "halve" in slow-convergence's runs-to-halve.
ALLOWED_NUMBERS = {0, 1, 2, 100, 0.5}
# Pure numeric guards (no division by zero, a float just below a step); each says so on its line.
GUARDS = {1e-9, 1e-12, 1e-300}


def _loose_numbers(path: Path):
    tree = ast.parse(path.read_text())
    inside_thresholds, positions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Thresholds":
            inside_thresholds |= {id(n) for n in ast.walk(node)}
        if isinstance(node, ast.Subscript):  # a tuple position or the first few steps shown in a message
            positions |= {id(n) for n in ast.walk(node.slice) if isinstance(n, ast.Constant)}
    lines = path.read_text().splitlines()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and type(node.value) in (int, float)):
            continue
        if id(node) in inside_thresholds or id(node) in positions or node.value in ALLOWED_NUMBERS:
            continue
        line = lines[node.lineno - 1]
        if node.value in GUARDS and ("guard" in line or "tolerance" in line):
            continue
        yield node.value, f"{path.name}:{node.lineno}: {node.value!r} in: {line.strip()}"


def test_no_decision_number_sits_outside_a_thresholds_class():
    modules = [Path(d.module.__file__) for d in diagnoses.REGISTRY.values()] + [Path(m.__file__) for m in (scorecard, explain, config_facts)]
    loose = [where for path in modules for _, where in _loose_numbers(path)]
    assert not loose, "make these Thresholds fields (knob(default, meaning)):\n" + "\n".join(loose)


def test_the_number_check_catches_a_literal_in_a_comparison(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass Thresholds:\n    z: float = 6.0\n\n"
                   "def run(v, t):\n    return v > 3.5 * t.z or len(v) < 7\n")
    assert sorted(value for value, _ in _loose_numbers(bad)) == [3.5, 7]


def test_every_diagnosis_is_listed_by_the_cli():
    out = CliRunner().invoke(main, ["diagnoses"]).output
    for diag_id in CONTRACT_IDS:
        assert diag_id in out
    # Every threshold, the scorecard's too, is listed with its default and its meaning.
    rows = [row for d in diagnoses.REGISTRY.values() for row in d.threshold_meanings()] + described(scorecard.Thresholds)
    for name, default, meaning in rows:
        assert re.search(rf"^ +{name} = {re.escape(str(default))} +{re.escape(meaning)}$", out, re.M), name
    assert "scorecard" in CliRunner().invoke(main, ["diagnoses", "scorecard"]).output
    page = CliRunner().invoke(main, ["diagnoses", "overfitting"]).output
    assert "Why it matters" in page and "min_rise" in page
    assert diagnoses.get("overfitting").recommendation in page
    bad = CliRunner().invoke(main, ["diagnoses", "overfit"])
    assert bad.exit_code == 2 and "known:" in bad.output


def test_every_diagnosis_has_at_least_three_trained_scenarios():
    manifest = json.loads(MANIFEST.read_text())
    # baseline-regression judges a run against its group, never a run alone: its evidence is the torch
    # corpus analysed with its groups (evidence/cohort.py, tests/test_torch_corpus.py) and tests/test_cohort.py.
    for diag_id in diagnoses.SINGLE_RUN:
        runs = [r for r in manifest if diag_id in r["faults"]]
        assert len(runs) >= 3, f"{diag_id}: only {len(runs)} trained scenario runs in the corpus"
    assert sum(1 for r in manifest if not r["faults"]) >= 10
