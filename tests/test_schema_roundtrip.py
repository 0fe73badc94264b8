"""Every result type survives its JSON: ``T.from_dict(json(x.to_dict())) == x`` (property-tested).

The round trip goes through real JSON text (``json.dumps(allow_nan=False)``), as the CLI writes it
and the Action / ``summary`` command read it back, so NaN and ±Inf observations are covered too.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.corpus import evaluate
from trackerhealth import engine
from trackerhealth.adapters.files import read_histories
from trackerhealth.schema import (
    DIMENSIONS,
    LEVEL_RANK,
    STATUSES,
    DimensionScore,
    Evidence,
    Finding,
    HealthReport,
    RunRef,
    StageFailure,
)

text = st.text(max_size=20)
numbers = st.floats(allow_nan=True, allow_infinity=True) | st.none()
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9) | st.none()

refs = st.builds(
    RunRef,
    tracker=st.sampled_from(["mlflow", "wandb", "file"]),
    project=text,
    id=st.text(min_size=1, max_size=12),
    name=text,
    url=st.none() | st.just("http://mlflow.internal:5000/#/runs/1"),
    source=st.none() | text,
)
evidence = st.builds(Evidence, metric=text, observed=numbers, threshold=numbers, step_start=numbers,
                     step_end=numbers, code=text, detail=text)
findings = st.builds(Finding, id=st.sampled_from(["nonfinite", "overfitting", "task-imbalance"]),
                     level=st.sampled_from(list(LEVEL_RANK)), title=text, message=text, recommendation=text,
                     evidence=st.lists(evidence, max_size=3).map(tuple),
                     explained_by=st.none() | st.sampled_from(["nonfinite", "vanishing-gradients"]))
failures = st.builds(StageFailure, stage=st.sampled_from(["roles", "scorecard", "diagnosis:nonfinite"]), message=text)


@st.composite
def dimension_sets(draw):
    names = draw(st.lists(st.sampled_from(DIMENSIONS), unique=True))
    return tuple(DimensionScore(n, draw(finite), draw(st.dictionaries(text, numbers, max_size=3)), draw(text))
                 for n in names)


reports = st.builds(
    HealthReport,
    run=refs,
    score=finite,
    dimensions=dimension_sets(),
    findings=st.lists(findings, max_size=4).map(tuple),
    notes=st.lists(text, max_size=2).map(tuple),
    n_points=st.integers(0, 10**9),
    last_step=finite,
    loss_key=st.none() | text,
    failures=st.lists(failures, max_size=2).map(tuple),
    status_reason=text,
)


def _through_json(doc):
    return json.loads(json.dumps(doc, allow_nan=False))


@settings(max_examples=200, deadline=None)
@given(refs)
def test_run_ref_round_trips(ref):
    assert RunRef.from_dict(_through_json(ref.to_dict())) == ref


@settings(max_examples=200, deadline=None)
@given(evidence)
def test_evidence_round_trips_with_nan_and_infinity(ev):
    back = Evidence.from_dict(_through_json(ev.to_dict()))
    assert back == ev
    assert back.to_dict() == ev.to_dict()


@settings(max_examples=200, deadline=None)
@given(findings)
def test_finding_round_trips(finding):
    assert Finding.from_dict(_through_json(finding.to_dict())) == finding


@settings(max_examples=200, deadline=None)
@given(dimension_sets())
def test_dimension_score_round_trips_with_its_basis(dims):
    for d in dims:
        back = DimensionScore.from_dict(d.name, _through_json(d.to_dict()))
        assert back == d
        assert back.to_dict() == d.to_dict()  # basis is not part of equality; check it too


@settings(max_examples=200, deadline=None)
@given(failures)
def test_stage_failure_round_trips(failure):
    assert StageFailure.from_dict(_through_json(failure.to_dict())) == failure


@settings(max_examples=150, deadline=None)
@given(reports)
def test_health_report_round_trips_on_full_output(report):
    back = HealthReport.from_dict(_through_json(report.to_dict(full=True)))
    assert back == report
    assert back.status == report.status and back.status in STATUSES
    assert back.to_dict(full=True) == report.to_dict(full=True)


@settings(max_examples=100, deadline=None)
@given(reports)
def test_the_short_output_keeps_status_and_problems(report):
    back = HealthReport.from_dict(_through_json(report.to_dict()))
    assert back.status == report.status
    assert back.problems == report.problems and back.failures == report.failures
    # An explained finding is never a problem, so the short output never carries one.
    assert not any(f.explained_by for f in back.findings)


@settings(max_examples=100, deadline=None)
@given(reports)
def test_explained_findings_never_raise_the_status(report):
    unexplained = max((LEVEL_RANK[f.level] for f in report.findings if f.level in ("warning", "critical")
                       and f.explained_by is None), default=0)
    if report.status not in ("error", "unknown"):
        assert report.status == {0: "ok", 1: "warning", 2: "critical"}[unexplained]
    assert all(f.explained_by is None for f in report.problems)


MANIFEST = {e["name"]: evaluate.HERE / e["file"] for e in evaluate.load_manifest()}


@pytest.mark.parametrize("name", ["nan_log0_custom_bce", "overfit_spirals_wandb", "healthy_long_20k_wandb"])
def test_real_reports_round_trip(name):
    [history] = read_histories(MANIFEST[name])
    report = engine.analyze(history)
    assert HealthReport.from_dict(_through_json(report.to_dict(full=True))) == report


def test_from_dict_tolerates_missing_optional_and_extra_keys():
    doc = {"run": {"tracker": "file", "project": "p", "id": "r", "extra": 1}, "score": 50,
           "findings": [{"id": "nonfinite", "level": "critical", "evidence": [{"metric": "loss", "observed": "NaN"}]}],
           "loss_key": "loss", "added_later": {"x": 1}}
    report = HealthReport.from_dict(doc)
    assert report.status == "critical" and report.run.name == "r" and report.dimensions == ()
    assert math.isnan(report.findings[0].evidence[0].observed)
    # Written without loss_key (an older report, or one built by hand): nothing says the loss was read.
    assert HealthReport.from_dict({**doc, "loss_key": None}).status == "unknown"


@pytest.mark.parametrize("doc, match", [
    ({"score": 1}, "run: expected a JSON object"),
    ({"run": {"tracker": "file", "project": "p"}}, "'id' is missing"),
    ({"run": {"tracker": "f", "project": "p", "id": "r"}, "findings": [{"id": "x", "level": "fine"}]}, "unknown level 'fine'"),
    ({"run": {"tracker": "f", "project": "p", "id": "r"}, "score": "high"}, "'high' is not a number"),
])
def test_from_dict_names_what_is_wrong(doc, match):
    with pytest.raises(ValueError, match=match):
        HealthReport.from_dict(doc)
