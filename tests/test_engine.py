"""No silent health: a failed stage makes a run `error`, an unread loss makes it `unknown`.

The failures are injected (a diagnosis, role resolution or the scorecard made to raise) into the
real engine, on real training logs from the corpus; nothing under test is replaced.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from tests.corpus import evaluate
from trackerhealth import diagnoses, engine, exit_codes, scorecard
from trackerhealth.adapters.files import read_histories
from trackerhealth.config import Config
from trackerhealth.schema import DIMENSIONS, ERROR, OK, UNKNOWN, HealthReport, RunHistory, RunRef
from trackerhealth.writers import formats, mlflow_writer, wandb_writer

MANIFEST = {e["name"]: evaluate.HERE / e["file"] for e in evaluate.load_manifest()}


def _history(name: str):
    [history] = read_histories(MANIFEST[name])
    return history


def _boom(*_args, **_kwargs):
    raise RuntimeError("injected failure")


def test_every_diagnosis_raising_gives_error_never_ok(every_diagnosis_raises):
    report = engine.analyze(_history("healthy_long_20k_wandb"))
    assert report.status == ERROR
    assert {f.stage for f in report.failures} == {f"diagnosis:{d}" for d in diagnoses.REGISTRY}
    assert all(f.level == ERROR for f in report.findings)
    assert "ZeroDivisionError: injected" in report.status_reason
    # It is reported as an error everywhere a status is written.
    doc = json.loads(formats.to_json([report]))
    assert [r["status"] for r in doc["runs"]] == [ERROR] and doc["runs"][0]["failures"]
    assert mlflow_writer.health_tags(report)[mlflow_writer.STATUS] == ERROR
    tags = wandb_writer.health_tags(report)
    assert "health:error" in tags and "health:ok" not in tags
    assert wandb_writer.health_summary(report)[wandb_writer.STATUS] == ERROR
    assert exit_codes.for_reports([report], "never") == exit_codes.USAGE


def test_a_roles_failure_is_an_error_naming_the_stage(monkeypatch):
    monkeypatch.setattr(engine, "resolve", _boom)
    report = engine.analyze(_history("nan_log0_custom_bce"))
    assert report.status == ERROR
    assert [f.stage for f in report.failures] == ["roles"]
    assert report.status_reason.startswith("roles failed: RuntimeError: injected failure")
    # The diagnoses still ran (on no roles: each skipped with its reason), and all are reported.
    assert {f.id for f in report.findings} == set(diagnoses.REGISTRY)


def test_a_scorecard_failure_is_an_error_and_keeps_the_findings(monkeypatch):
    monkeypatch.setattr(scorecard, "score_run", _boom)
    report = engine.analyze(_history("nan_log0_custom_bce"))
    assert report.status == ERROR
    assert [f.stage for f in report.failures] == ["scorecard"]
    assert report.score is None and set(report.scores) == set(DIMENSIONS)
    assert all("scorecard failed" in d.reason for d in report.dimensions)
    assert "nonfinite" in {f.id for f in report.problems}  # the diagnoses' findings survive
    table = formats.to_table([report])
    row = next(line for line in table.splitlines() if line.startswith("nan_log0_custom_bce"))
    assert " error " in row and "scorecard failed" in row and "nonfinite" in row


def test_one_failing_run_leaves_the_others_alone(monkeypatch):
    real = scorecard.score_run
    target = _history("nan_log0_custom_bce")

    def fail_for_one(view, findings, thresholds):
        if view.history is target:
            raise ValueError("only this run")
        return real(view, findings, thresholds)

    monkeypatch.setattr(scorecard, "score_run", fail_for_one)
    reports = [engine.analyze(h) for h in (_history("healthy_long_20k_wandb"), target, _history("overfit_spirals_wandb"))]
    assert [r.status for r in reports] == [OK, ERROR, "critical"]


def _cost_csv(tmp_path):
    """A real run that goes NaN (the corpus' custom BCE with log(0)), its loss logged as `cost`."""
    with gzip.open(MANIFEST["nan_log0_custom_bce"], "rt") as fh:
        long = pd.read_csv(fh)
    loss = long[long["key"] == "train_loss"]
    path = tmp_path / "run.csv"
    # Written as `nan`, as a logger prints it (an empty cell in a wide CSV means "not logged").
    pd.DataFrame({"step": loss["step"], "cost": loss["value"]}).to_csv(path, index=False, na_rep="nan")
    assert not np.isfinite(loss["value"].to_numpy(dtype=float)).all()  # the NaN is in the data
    return path


def test_an_unrecognised_loss_is_unknown_with_the_keys_and_the_fix(tmp_path):
    [history] = read_histories(_cost_csv(tmp_path))
    report = engine.analyze(history)
    assert report.status == UNKNOWN and report.loss_key is None
    assert "cost" in report.status_reason and "--loss-key KEY" in report.status_reason
    assert 'train_loss = "KEY"' in report.status_reason
    assert exit_codes.reaches(report.status, "warning") and not exit_codes.reaches(report.status, "critical")
    tags = wandb_writer.health_tags(report)
    assert tags[0] == "health:unknown" and "health:ok" not in tags
    assert mlflow_writer.health_tags(report)[mlflow_writer.STATUS] == UNKNOWN


def test_the_loss_key_maps_it_and_the_nan_becomes_critical(tmp_path):
    [history] = read_histories(_cost_csv(tmp_path))
    report = engine.analyze(history, Config().with_loss_key("cost"))
    assert report.loss_key == "cost"
    assert report.status == "critical" and report.finding("nonfinite").level == "critical"
    assert report.status_reason == ""


def test_a_mapped_loss_key_the_run_lacks_says_so(tmp_path):
    [history] = read_histories(_cost_csv(tmp_path))
    report = engine.analyze(history, Config().with_loss_key("train/loss"))
    assert report.status == UNKNOWN
    assert "'train/loss'" in report.status_reason and "cost" in report.status_reason


def _epoch_log(tmp_path, epochs: int, start: float = 0.28):
    """A Lightning-style epoch log of a real-looking fall: 0.28 → 0.20 over ``epochs`` epochs, with
    the 0.3 % epoch-to-epoch noise of a mean over an epoch's batches."""
    noise = 1 + 0.003 * np.random.default_rng(0).standard_normal(epochs)
    loss = start * (0.72 + 0.28 * np.exp(-np.arange(epochs) / 2.0)) * noise
    path = tmp_path / "metrics.csv"
    pd.DataFrame({"epoch": np.arange(epochs), "train_loss_epoch": loss}).to_csv(path, index=False)
    return path


def test_a_loss_too_short_to_judge_is_unknown_never_ok(tmp_path):
    # Public log P17: nine logged epochs of an LSTM's loss. Every trend diagnosis skips: nothing found
    # is not health.
    [history] = read_histories(_epoch_log(tmp_path, 9))
    report = engine.analyze(history)
    assert report.loss_key == "train_loss_epoch" and not report.problems
    assert report.status == UNKNOWN
    assert "'train_loss_epoch' was read but could not be judged" in report.status_reason
    assert "9 finite train-loss points after warm-up; need 10 (30 to judge its swings)" in report.status_reason
    tags = wandb_writer.health_tags(report)
    assert tags[0] == "health:unknown" and "health:ok" not in tags
    assert mlflow_writer.health_tags(report)[mlflow_writer.STATUS] == UNKNOWN
    again = HealthReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.status == UNKNOWN and again.status_reason == report.status_reason


def test_a_loss_long_enough_to_judge_is_ok(tmp_path):
    [history] = read_histories(_epoch_log(tmp_path, 60))
    report = engine.analyze(history)
    assert report.status == OK and report.status_reason == ""
    assert HealthReport.from_dict(report.to_dict()).status == OK


def test_a_short_run_that_went_nan_is_still_critical(tmp_path):
    path = _epoch_log(tmp_path, 9)
    frame = pd.read_csv(path)
    frame.loc[6:, "train_loss_epoch"] = np.nan
    frame.to_csv(path, index=False, na_rep="nan")
    [history] = read_histories(path)
    report = engine.analyze(history)
    assert report.status == "critical" and report.problems[0].id == "nonfinite"


def test_a_header_only_csv_is_unknown(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("step,loss,val_loss\n")
    [history] = read_histories(path)
    report = engine.analyze(history)
    assert report.status == UNKNOWN
    assert "no metric values" in report.status_reason
    assert exit_codes.reaches(report.status, "warning")
    md = formats.to_markdown([report])
    assert "1 unknown" in md and "0 healthy" in md
    row = next(line for line in md.splitlines() if line.startswith("| empty"))
    assert "**unknown**" in row and "no metric values" in row


def test_many_keys_are_listed_up_to_a_limit():
    keys = {f"metric_{i:02d}": ([0, 1, 2], [1.0, 2.0, 3.0]) for i in range(25)}
    report = engine.analyze(RunHistory.from_series(RunRef("file", "p", "r"), keys))
    assert report.status == UNKNOWN
    assert "metric_09" in report.status_reason and "metric_10" not in report.status_reason
    assert "15 more" in report.status_reason and "25 metric key(s)" in report.status_reason


def test_the_table_is_sorted_by_score_like_markdown():
    reports = [engine.analyze(_history(n)) for n in ("healthy_long_20k_wandb", "overfit_spirals_wandb", "nan_log0_custom_bce")]
    names = [r.run.name for r in formats.by_score(reports)]
    table = formats.to_table(reports, verbose=False).splitlines()[2:5]
    assert [line.split()[0] for line in table] == names
    scored = [r.score for r in formats.by_score(reports) if r.score is not None]
    assert scored == sorted(scored)


def test_fail_on_rejects_an_unknown_level():
    report = HealthReport(engine.analyze(_history("healthy_long_20k_wandb")).run, 90.0, (), (), loss_key="loss")
    assert report.status == OK and not exit_codes.reaches(report.status, "warning")
    with pytest.raises(ValueError, match="critical, warning, never"):
        exit_codes.reaches(report.status, "ok")


def test_no_ranking_puts_a_failure_below_ok():
    from trackerhealth.schema import LEVEL_RANK, STATUS_RANK

    assert LEVEL_RANK[ERROR] > LEVEL_RANK["critical"] > LEVEL_RANK[OK]
    assert STATUS_RANK[ERROR] > STATUS_RANK["critical"] and STATUS_RANK[UNKNOWN] == STATUS_RANK["warning"] > STATUS_RANK[OK]


def test_analyze_json_prints_no_ok_run_when_every_diagnosis_raises(every_diagnosis_raises):
    from click.testing import CliRunner

    from trackerhealth.cli import main

    files = [str(MANIFEST[n]) for n in ("healthy_long_20k_wandb", "overfit_spirals_wandb")]
    res = CliRunner().invoke(main, ["analyze", *files, "--format", "json"])
    doc = json.loads(res.stdout)
    assert [r["status"] for r in doc["runs"]] == [ERROR, ERROR]
    assert all(r["status_reason"].startswith("diagnosis:") for r in doc["runs"])
