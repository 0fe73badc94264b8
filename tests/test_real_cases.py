"""Each diagnosis' documented real cases still hold: the run's cached log, analysed again, gets the
finding the page quotes, and the run's fault was confirmed without the detector (its label)."""

import json
import re
from pathlib import Path

import pytest

from evidence import cohort, public_logs
from evidence.torch import manifest
from trackerhealth import diagnoses
from trackerhealth.adapters.files import read_histories
from trackerhealth.diagnoses._real_cases import TORCH
from trackerhealth.engine import analyze

ROOT = Path(__file__).resolve().parents[1]
TORCH_RUNS = {e["name"]: e for e in manifest.load()}
PUBLIC_LABELS = json.loads((ROOT / "evidence" / "public" / "labels.json").read_text())["runs"]
CASES = [(d.id, c) for d in diagnoses.REGISTRY.values() for c in d.real_cases]


def _says_in_order(pieces: list[str], message: str) -> bool:
    at = 0
    for piece in pieces:
        at = message.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return True


def test_every_diagnosis_documents_a_real_torch_case():
    for d in diagnoses.REGISTRY.values():
        assert any(c.corpus == TORCH for c in d.real_cases), d.id


def _finding(diag_id, case):
    if case.corpus == TORCH:
        entry = TORCH_RUNS[case.run]
        assert diag_id in entry["faults"] or case.explained_by in entry["faults"], f"{case.run} is not a confirmed {diag_id}"
        if case.grouped:
            report = cohort.grouped_reports(entry["family"])[case.run]
        else:
            (history,) = read_histories(cohort.lofo.TORCH / entry["file"])
            report = analyze(history)
    else:
        label = PUBLIC_LABELS[case.run]
        assert diag_id in label["labels"] and not label.get("ambiguous"), f"{case.run} is not labelled {diag_id}"
        assert case.setting.startswith(label["repo"]), f"{case.run}: name its repository, {label['repo']}"
        path = public_logs.SETS["public"][1] / label["path"]
        if not path.exists():
            pytest.skip(f"{path} (restored public logs) not present")
        (history,) = read_histories(path)
        report = analyze(history)
    return next(f for f in report.findings if f.id == diag_id)


@pytest.mark.parametrize(("diag_id", "case"), CASES, ids=[f"{d}:{c.run}" for d, c in CASES])
def test_the_documented_case_still_gets_the_quoted_finding(diag_id, case):
    finding = _finding(diag_id, case)
    assert finding.explained_by == case.explained_by
    assert finding.level in ("warning", "critical")
    assert _says_in_order(case.pieces, finding.message), f"{case.run}: {finding.message!r} no longer says {case.says!r}"


def test_the_readme_table_quotes_each_diagnosis_first_case():
    readme = (ROOT / "README.md").read_text()
    for d in diagnoses.REGISTRY.values():
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{d.id}` |"))
        first = d.real_cases[0]
        assert f"`{first.run}`" in row, d.id
        assert _says_in_order(first.pieces, re.sub(r"\s+", " ", row)), f"{d.id}: README row does not quote {first.says!r}"
        # Every case the row quotes in the table's form (`name`: what it is, “the finding's words”) is one the module
        # documents, so the tests above re-check it: a case dropped from the module cannot linger in the README with a
        # finding it no longer gets (regression_adam_eps_1 did, once its shape became a note). An aside in plain
        # quotes about another diagnosis's finding is not such a quote.
        documented = {case.run: case for case in d.real_cases}
        for name in re.findall(r"`([A-Za-z0-9_-]+)`: [^“\"|]*“", row):
            assert name in documented, f"{d.id}: README quotes {name}, which {d.id}'s REAL_CASES no longer holds"
            assert _says_in_order(documented[name].pieces, re.sub(r"\s+", " ", row)), f"{d.id}: README misquotes {name}"
