"""One cause, one finding: a symptom a stronger finding explains is marked ``explained_by`` and
kept out of the problems (tags, status, alerts, score), while ``--full`` output keeps it.

Each history below is built so that the diagnoses themselves produce both findings (nothing here
hand-writes a finding the engine would not), then the engine's explain pass is checked.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from trackerhealth import RunHistory, RunRef, engine, explain, scorecard
from trackerhealth.roles import RoleView, Roles, resolve
from trackerhealth.schema import CRITICAL, WARNING, Evidence, Finding, HealthReport
from trackerhealth.writers import alerts, formats, mlflow_writer, wandb_writer

N = 600
STEPS = np.arange(N, dtype=float)


def _report(name: str, data: dict, config: dict | None = None) -> HealthReport:
    return engine.analyze(RunHistory.from_series(RunRef("file", "p", name, config=config or {}), data))


def _lr_too_high_then_nan():
    """The loss bounces without trend (an LR far too high), blows up and turns NaN at step 560."""
    rng = np.random.default_rng(2)
    loss = 2.0 + 0.8 * np.abs(rng.standard_normal(N))
    loss[:20] = np.linspace(2.5, 2.0, 20)
    loss[500:560] *= np.exp((STEPS[500:560] - 500) / 10)
    loss[560:] = np.nan
    grad = 1 + 0.3 * np.abs(rng.standard_normal(N))
    grad[500:560] *= np.exp((STEPS[500:560] - 500) / 8)
    grad[560:] = np.nan
    return {"loss": (STEPS, loss), "grad_norm": (STEPS, grad)}


def _slow_then_nan():
    rng = np.random.default_rng(1)
    loss = 2.3 - 0.2 * STEPS / N + 0.005 * rng.standard_normal(N)
    loss[560:] = np.nan
    return {"loss": (STEPS, loss)}


def _periodic_spikes_then_nan():
    rng = np.random.default_rng(1)
    loss = 2 * np.exp(-STEPS / 150) + 0.3 + 0.005 * rng.standard_normal(N)
    for k in range(25, 570, 50):
        loss[k] *= 2.0
    loss[570:] = np.nan
    return {"loss": (STEPS, loss)}


def _overfits_long_before_nan():
    """Val turns up at step 160 while train keeps falling: real overfitting, long before the NaN at 590."""
    rng = np.random.default_rng(1)
    train = 2 * np.exp(-STEPS / 100) + 0.05 + 0.005 * rng.standard_normal(N)
    train[590:] = np.nan
    vs = np.arange(0, N, 20.0)
    val = np.interp(vs, STEPS, 2 * np.exp(-STEPS / 100) + 0.3) + np.where(vs > 150, (vs - 150) / 300, 0)
    return {"loss": (STEPS, train), "val_loss": (vs, val)}


def _slow_fall(rng):
    return 2.3 - 0.1 * STEPS / N + 0.003 * rng.standard_normal(N)


def _vanishing():
    rng = np.random.default_rng(2)
    data = {"loss": (STEPS, _slow_fall(rng))}
    for i in range(10):  # layer 0 gets 1e-8, the head 1e-1: nothing reaches the first layers
        data[f"grad_norm/layer{i}"] = (STEPS, 10.0 ** (-8 + i * 0.8) * (1 + 0.05 * rng.standard_normal(N)))
    return data


def _imbalanced_tasks():
    rng = np.random.default_rng(2)
    big = 5000 - 100 * STEPS / N + 5 * rng.standard_normal(N)  # a regression target in grams
    small = 0.7 + 0.005 * rng.standard_normal(N)  # a cross-entropy that never moves
    return {"loss": (STEPS, big + small), "loss/reg": (STEPS, big), "loss/cls": (STEPS, small)}


CASES = [
    ("lr_too_high_then_nan", _lr_too_high_then_nan, "loss-oscillation", "nonfinite"),
    ("slow_then_nan", _slow_then_nan, "slow-convergence", "nonfinite"),
    ("periodic_spikes_then_nan", _periodic_spikes_then_nan, "periodic-spikes", "nonfinite"),
    ("vanishing", _vanishing, "slow-convergence", "vanishing-gradients"),
    ("imbalanced_tasks", _imbalanced_tasks, "slow-convergence", "task-imbalance"),
]


@pytest.mark.parametrize("name, make, symptom, cause", CASES, ids=[c[0] for c in CASES])
def test_a_symptom_of_a_stronger_finding_is_explained_not_tagged(name, make, symptom, cause):
    report = _report(name, make())
    found = report.finding(symptom)
    assert found is not None and found.level in (WARNING, CRITICAL), [(f.id, f.level) for f in report.findings]
    assert found.explained_by == cause and found.is_explained and not found.is_problem
    assert [f.id for f in report.problems] == [cause]
    assert report.status == report.finding(cause).level
    # Tags, summaries and alerts name the cause only.
    assert mlflow_writer.health_tags(report)[mlflow_writer.FINDINGS] == cause
    assert wandb_writer.health_tags(report) == [wandb_writer.TAG_PREFIX + cause]
    assert wandb_writer.health_summary(report)[wandb_writer.FINDINGS] == cause
    assert symptom not in {f.id for f in alerts.plan(report, set())[0]}
    # The short JSON leaves it out; --full keeps it, with what explains it, and round-trips.
    assert symptom not in [f["id"] for f in report.to_dict()["findings"]]
    full = {f["id"]: f for f in json.loads(json.dumps(report.to_dict(full=True)))["findings"]}
    assert full[symptom]["explained_by"] == cause and "explained_by" not in full[cause]
    assert HealthReport.from_dict(report.to_dict(full=True)) == report
    table, markdown = formats.to_table([report]), formats.to_markdown([report])
    row = next(line for line in table.splitlines() if line.startswith(name))
    assert cause in row and symptom not in row
    assert f"{symptom}: explained by {cause}" in table
    assert f"`{symptom}` — explained by {cause}" in markdown


def test_an_explained_symptom_costs_no_score_points():
    """Explaining takes the symptom's penalty off the score and nothing else."""
    history = RunHistory.from_series(RunRef("file", "p", "v"), _vanishing())
    marked = engine.analyze(history)
    symptom = marked.finding("slow-convergence")
    assert symptom.explained_by == "vanishing-gradients"
    view = resolve(history, {}, {})
    unmarked = [f if f.id != "slow-convergence" else Finding(f.id, f.level, f.title, f.message, f.recommendation, f.evidence)
                for f in marked.findings]
    score_unmarked, _ = scorecard.score_run(view, unmarked)
    assert score_unmarked == pytest.approx(max(0.0, marked.score - scorecard.DEFAULTS.penalty_warning), abs=0.11)


def test_overfitting_that_began_long_before_the_nan_stays_a_problem():
    report = _report("overfit", _overfits_long_before_nan())
    assert report.finding("nonfinite").is_problem
    overfit = report.finding("overfitting")
    assert overfit.is_problem and overfit.explained_by is None
    assert {f.id for f in report.problems} == {"nonfinite", "overfitting"}


def _finding(diag_id, level, *ranges, metric="loss"):
    return Finding(diag_id, level, diag_id, "m", "", tuple(Evidence(metric, 1.0, None, a, b, "c") for a, b in ranges))


def _view(last_step=1000.0):
    steps = np.arange(0.0, last_step + 1)
    history = RunHistory.from_series(RunRef("file", "p", "r"), {"loss": (steps, np.ones(len(steps)))})
    return resolve(history, {}, {})


def test_a_symptom_whose_evidence_ends_well_before_the_blowup_is_independent():
    view = _view()
    nan = _finding("nonfinite", CRITICAL, (900, 1000))
    early = _finding("periodic-spikes", WARNING, (100, 500))
    late = _finding("periodic-spikes", WARNING, (100, 850))  # reaches the window: 900 - 0.1 * 900 = 810
    assert explain.explain([nan, early], view)[1].explained_by is None
    assert explain.explain([nan, late], view)[1].explained_by == "nonfinite"
    wider = explain.Thresholds(blowup_window_share=0.5)
    assert explain.explain([nan, early], view, wider)[1].explained_by == "nonfinite"


def test_a_loss_still_long_before_a_late_blowup_is_not_its_symptom():
    # Torch run textcls_batch_too_small (built blind): its loss never learned from step 29, and its gradient norm
    # rose 13x only from step 258 of 300; the late blow-up had explained the never-learned loss away.
    view = _view()

    def still(*ranges):
        return Finding("loss-oscillation", WARNING, "lo", "m", "",
                       tuple(Evidence("loss", 1.0, None, a, b, "no_learning") for a, b in ranges))

    late = Finding("nonfinite", WARNING, "nf", "m", "", (Evidence("loss", 1.0, None, 860, 1000, "grad_norm_explosion"),))
    early = Finding("nonfinite", WARNING, "nf", "m", "", (Evidence("loss", 1.0, None, 300, 1000, "grad_norm_explosion"),))
    assert explain.explain([late, still((0, 1000))], view)[1].explained_by is None
    assert explain.explain([early, still((0, 1000))], view)[1].explained_by == "nonfinite"
    # A loss that swings into the late blow-up is still its symptom.
    swinging = Finding("loss-oscillation", WARNING, "lo", "m", "", (Evidence("loss", 1.0, None, 0, 1000, "fluctuation_over_level"),))
    assert explain.explain([late, swinging], view)[1].explained_by == "nonfinite"


def test_a_weaker_finding_never_hides_a_stronger_one():
    """A warning explosion does not explain a critical oscillation: the run's status never drops."""
    view = _view()
    explosion = _finding("nonfinite", WARNING, (900, 1000))
    oscillation = _finding("loss-oscillation", CRITICAL, (0, 950))
    out = explain.explain([explosion, oscillation], view)
    assert out[1].explained_by is None
    report = HealthReport(RunRef("file", "p", "r"), None, (), out, loss_key="loss")
    assert report.status == CRITICAL


def test_the_rules_table_declares_every_explainer_and_symptom():
    explainers = {r.explainer for r in explain.RULES}
    symptoms = {s for r in explain.RULES for s in r.explained}
    assert explainers == {"nonfinite", "vanishing-gradients", "task-imbalance", "slow-convergence", "periodic-spikes",
                          "loss-oscillation", "overfitting"}
    assert symptoms == {"loss-oscillation", "slow-convergence", "periodic-spikes", "overfitting", "baseline-regression"}
    # The explainers that are also symptoms only explain when unexplained themselves.
    assert explainers & symptoms == {"slow-convergence", "periodic-spikes", "loss-oscillation", "overfitting"}
    # baseline-regression explains nothing: it says "worse", never why.
    assert "baseline-regression" not in explainers


def test_an_oscillation_explained_by_recurring_spikes_does_not_go_on_to_explain_overfitting():
    from trackerhealth.schema import Evidence, Finding

    span = (Evidence("loss", 0.0, None, 0.0, 100.0, "x", ""),)
    spikes = Finding("periodic-spikes", "critical", "", "", "", span)
    # A loss that ended above its start (low_improvement < 0) would explain overfitting on its own ...
    rising = Finding("loss-oscillation", "critical", "", "", "", (Evidence("loss", -0.2, 0.45, 0.0, 100.0, "low_improvement", ""),))
    overfit = Finding("overfitting", "critical", "", "", "", span)
    view = RoleView(RunHistory.from_series(RunRef("files", "p", "r"), {"loss": ([0, 1], [1.0, 1.0])}), Roles())
    alone = {f.id: f for f in explain.explain([rising, overfit], view)}
    assert alone["overfitting"].explained_by == "loss-oscillation"
    # ... and a loss that fell overall is the spikes' symptom, and then explains nothing.
    fell = Finding("loss-oscillation", "critical", "", "", "", (Evidence("loss", 0.2, 0.45, 0.0, 100.0, "low_improvement", ""),))
    out = {f.id: f for f in explain.explain([spikes, fell, overfit], view)}
    assert out["loss-oscillation"].explained_by == "periodic-spikes"
    assert out["overfitting"].explained_by is None
    assert explain._ordered(tuple(explain.RULES))  # the table has no cycle


def test_an_explained_finding_never_explains_another():
    from trackerhealth.schema import Evidence, Finding

    span = (Evidence("loss", 0.0, None, 0.0, 100.0, "x", ""),)
    vanish = Finding("vanishing-gradients", "critical", "", "", "", span)
    slow = Finding("slow-convergence", "warning", "", "", "", span)
    flat = Finding("loss-oscillation", "warning", "", "", "", (Evidence("loss", 0.0, 0.05, 0.0, 100.0, "no_learning", ""),))
    view = RoleView(RunHistory.from_series(RunRef("files", "p", "r"), {"loss": ([0, 1], [1.0, 1.0])}), Roles())
    out = {f.id: f for f in explain.explain([vanish, slow, flat], view)}
    assert out["slow-convergence"].explained_by == "vanishing-gradients"
    assert out["loss-oscillation"].explained_by == "vanishing-gradients"  # never by the explained slow-convergence
    alone = {f.id: f for f in explain.explain([slow, flat], view)}
    assert alone["loss-oscillation"].explained_by == "slow-convergence" and alone["slow-convergence"].explained_by is None
    assert all(r.when and r.why for r in explain.RULES)


def test_an_explain_failure_is_an_error_never_health(monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("explain broke")

    monkeypatch.setattr(explain, "explain", boom)
    report = _report("v", _vanishing())
    assert report.status == "error" and [f.stage for f in report.failures] == ["explain"]
    # The findings are still reported, unexplained.
    assert {f.id for f in report.problems} == {"vanishing-gradients", "slow-convergence"}


def test_the_dashboard_lists_an_explained_finding_under_its_cause_not_as_a_finding():
    pytest.importorskip("plotly")
    from trackerhealth.writers.dashboard import render_run_html

    history = RunHistory.from_series(RunRef("file", "p", "vanishing"), _vanishing())
    report = engine.analyze(history)
    html = render_run_html(history, report)
    assert 'id="finding-vanishing-gradients"' in html and 'id="finding-slow-convergence"' not in html
    assert "<h2>Findings (1)</h2>" in html
    assert 'data-explained-by="vanishing-gradients"' in html and "explained by vanishing-gradients" in html


def test_design_doc_shows_the_rules_tables_as_the_code_declares_them():
    from pathlib import Path

    from trackerhealth import config_facts

    design = (Path(__file__).resolve().parent.parent / "docs" / "design.md").read_text(encoding="utf-8")
    assert explain.rules_markdown() in design
    assert config_facts.rules_markdown() in design
    # The corroboration table names every diagnosis the code corroborates, and nothing else.
    assert {d for d, _, _ in config_facts.RULES_TEXT} == set(config_facts.CORROBORATORS)


def test_the_onset_is_the_spike_or_first_nan_not_a_baseline_from_the_start():
    spike_then_nan = Finding("nonfinite", CRITICAL, "t", "m", "", (
        Evidence("loss", float("nan"), None, 900, 1000, "nonfinite_value"),
        Evidence("grad_norm", 50.0, 10.0, 880, 900, "grad_norm_spike_before_nonfinite")))
    assert explain.blowup_onset(spike_then_nan) == 880
    # Evidence of a kind explain does not know: a context range from step 0 does not make the onset 0.
    unknown = Finding("nonfinite", CRITICAL, "t", "m", "", (
        Evidence("grad_norm", 1.0, None, 0, 700, "baseline"), Evidence("loss", 8.7, None, 720, 740, "loss_jump")))
    assert explain.blowup_onset(unknown) == 720
