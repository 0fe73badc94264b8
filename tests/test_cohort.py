"""Runs compared with their group: the profile's reach arithmetic, the baseline rule, and what the
comparison decides (``slow-convergence`` against the baseline, ``baseline-regression``), through
``cohort.analyze_groups`` and ``trackerhealth analyze --group-by``."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner

from trackerhealth.baseline import MARKED, Cohort, RunProfile, curve, reaches
from trackerhealth.cli import main
from trackerhealth.cohort import GroupingError, analyze_groups, choose_baseline, group_key
from trackerhealth.engine import analyze
from trackerhealth.loss_setting import is_loss_setting, loss_setting, split_by_setting
from trackerhealth.schema import CRITICAL, OK, SKIPPED, WARNING, HealthReport, RunHistory, RunRef, Series

STEPS = np.arange(1, 1001, dtype=float)


def _series(values: np.ndarray, seconds_per_step: float = 0.1) -> Series:
    return Series(STEPS[: len(values)], np.asarray(values, dtype=float), STEPS[: len(values)] * seconds_per_step)


def _decay(tau: float, floor: float = 0.05, start: float = 2.3, noise: float = 0.01, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    clean = floor + (start - floor) * np.exp(-STEPS / tau)
    return clean * (1 + noise * rng.standard_normal(len(STEPS)))


def _history(name: str, loss: np.ndarray, *, val: np.ndarray | None = None, state: str | None = None,
             **config) -> RunHistory:
    series = {"train/loss": Series(STEPS, np.asarray(loss, dtype=float), 1.7e9 + STEPS * 0.1)}
    if val is not None:
        every = STEPS[::50]
        series["val/loss"] = Series(every, val[::50], 1.7e9 + every * 0.1)
    return RunHistory.from_series(RunRef("files", "team", name, state=state,
                                         config={"model": "cnn", "data": "digits", **config}), series)


def _profile(name: str, status: str = OK, final: float = 0.1, val_final: float | None = None, **kw) -> RunProfile:
    c = curve(_series(np.linspace(1.0, final, 200)))
    return RunProfile(name, name, "loss", c, val_final=val_final, status=status, **kw)


# -- the arithmetic -------------------------------------------------------------------------------
def test_a_run_four_and_a_half_times_slower_reaches_the_baselines_level_four_and_a_half_times_later():
    base, slow = curve(_series(_decay(40, noise=0))), curve(_series(_decay(180, noise=0)))
    (r,) = reaches(slow, base, (0.5,))
    assert r.reached and r.ratio == pytest.approx(4.5, rel=0.15)
    assert r.seconds / r.baseline_seconds == pytest.approx(r.ratio, rel=0.05)


def test_a_run_that_never_gets_there_has_a_lower_bound_its_length_over_the_baselines_steps():
    base, stuck = curve(_series(_decay(40, noise=0))), curve(_series(np.full(1000, 2.0)))
    (r,) = reaches(stuck, base, (0.5,))
    assert not r.reached and r.steps is None
    assert r.ratio == pytest.approx(stuck.length / r.baseline_steps)


def test_a_curve_stops_at_the_first_non_finite_value():
    values = _decay(40, noise=0)
    values[500:] = np.nan
    c = curve(_series(values))
    assert c.steps[-1] == 500 and all(np.isfinite(c.level))


# -- the baseline rule ------------------------------------------------------------------------------
def test_a_marked_run_is_the_baseline_whatever_its_health():
    base, rule, _ = choose_baseline([_profile("good"), _profile("marked", status=CRITICAL, final=0.9, marked=True)])
    assert base.run_id == "marked" and rule == MARKED


def test_the_healthiest_is_the_lowest_val_loss_among_the_ok_finished_runs():
    members = [_profile("warn", status=WARNING, final=0.01, val_final=0.01),
               _profile("ok-high", val_final=0.5), _profile("ok-low", val_final=0.2),
               _profile("running", val_final=0.001, finished=False)]
    base, rule, _ = choose_baseline(members)
    assert base.run_id == "ok-low" and "val loss" in rule and "status ok" in rule


def test_without_an_ok_run_the_least_flagged_one_is_the_baseline_and_never_an_error():
    members = [_profile("crit", status=CRITICAL, final=0.01), _profile("warn", status=WARNING, final=0.3),
               _profile("broken", status="error", final=0.001)]
    assert choose_baseline(members)[0].run_id == "warn"
    none, _, reason = choose_baseline([_profile("broken", status="error"), _profile("unknown", status="unknown")])
    assert none is None and "nothing to compare with" in reason


def test_a_run_without_the_group_keys_has_no_group():
    assert group_key({"config.model": "cnn"}, ["config.model", "config.data"]) == (("config.model", "cnn"),
                                                                                    ("config.data", "(none)"))
    assert group_key({"folder": "x"}, ["config.model"]) is None


# -- what the comparison decides --------------------------------------------------------------------
def _team() -> list[RunHistory]:
    """Three sane runs of one model and data, and one with a 5x smaller effective learning rate
    whose loss, alone, bends like a healthy one (a smooth exponential, just slower)."""
    return [_history("sane-a", _decay(40, seed=1)), _history("sane-b", _decay(45, seed=2)),
            _history("sane-c", _decay(38, seed=3)), _history("lr-too-low", _decay(200, seed=4))]


def _by_name(reports: list[HealthReport]) -> dict[str, HealthReport]:
    return {r.run.name: r for r in reports}


def test_the_slow_run_is_found_against_its_group_and_not_alone():
    team = _team()
    alone = analyze(team[-1]).finding("slow-convergence")
    assert alone.level == OK  # one curve cannot say it: it bends early like a healthy loss
    reports = _by_name(analyze_groups(team, None, lambda h: group_key(dict(h.ref.config), ["model", "data"])))
    slow = reports["lr-too-low"].finding("slow-convergence")
    assert slow.level == WARNING
    evidence = {e.code: e for e in slow.evidence}
    assert evidence["slower_than_baseline"].observed == pytest.approx(200 / 40, rel=0.2)
    assert "wall_time_vs_baseline" in evidence
    # The siblings are not slow against the baseline, and the baseline says it is one.
    for name in ("sane-a", "sane-b", "sane-c"):
        assert reports[name].finding("slow-convergence").level == OK, name
    base = reports["lr-too-low"].group["baseline_name"]
    assert reports[base].finding("baseline-regression").level == OK
    assert "is the baseline" in reports[base].finding("baseline-regression").message
    assert reports["lr-too-low"].group["size"] == 4


def test_a_run_that_rose_at_once_and_bounces_at_its_first_level_never_learned_rather_than_slow():
    # The held-out resnet family's SGD run at an LR far too high: 2.37 at step 1, up to ~4 over its
    # first steps, then bouncing about 2.3 with dips below it. Its first bin's median (the rise) is no
    # start, and the lowest it dipped is not where it ended: against its group it never learned.
    rng = np.random.default_rng(5)
    loss = 2.33 * (1 + 0.04 * rng.standard_normal(len(STEPS)))
    loss[:20] = [2.37, 3.8, 4.9, 3.5, 2.8, 4.4, 4.0, 4.6, 3.9, 4.2, 4.8, 3.6, 4.1, 4.4, 3.7, 4.5, 4.3, 3.9, 4.6, 4.0]
    loss[300:340] *= 0.9  # a dip below its first level, then back
    team = _team()[:3] + [_history("lr-too-high", loss)]
    reports = _by_name(analyze_groups(team, None, lambda h: group_key(dict(h.ref.config), ["model", "data"])))
    report = reports["lr-too-high"]
    assert report.finding("slow-convergence").level == OK
    never = report.finding("loss-oscillation")
    assert never.is_problem and never.evidence[0].code == "no_learning", never


def test_a_run_an_order_of_magnitude_worse_at_the_end_is_a_baseline_regression_when_nothing_else_explains_it():
    # Falls as fast as its siblings, then sits on a plateau ten times higher (a broken data pipeline).
    team = _team()[:3] + [_history("plateau", _decay(40, floor=0.6, seed=5))]
    reports = _by_name(analyze_groups(team, None, lambda h: (("config.model", "cnn"),)))
    finding = reports["plateau"].finding("baseline-regression")
    assert finding.level == WARNING and finding.explained_by is None, finding.message
    assert {f.id for f in reports["plateau"].problems} == {"baseline-regression"}
    assert finding.evidence[0].code == "final_vs_baseline" and finding.evidence[0].observed >= 10


def test_a_loss_on_a_larger_scale_from_its_first_step_is_no_regression_but_the_same_plateau_on_it_is():
    # Loss weights that put the total 8x above the baseline's (multitask_digits_weighted_tasks): it ends
    # 11x higher, having learned nearly as much (1.4x the baseline's final in units of its start): not worse.
    weighted = _history("weighted", 8 * _decay(40, floor=0.07, seed=5))
    reports = _by_name(analyze_groups(_team()[:3] + [weighted], None, lambda h: (("config.model", "cnn"),)))
    finding = reports["weighted"].finding("baseline-regression")
    assert finding.level == OK, finding.message
    evidence = {e.code: e.observed for e in finding.evidence}
    assert evidence["final_vs_baseline"] >= 10 and evidence["final_vs_baseline_from_start"] < 2
    # On that scale, a plateau ten times higher is still a regression.
    worse = _history("worse", 7 * _decay(40, floor=0.6, seed=5))
    reports = _by_name(analyze_groups(_team()[:3] + [worse], None, lambda h: (("config.model", "cnn"),)))
    assert reports["worse"].finding("baseline-regression").level == WARNING


def test_a_worse_run_with_a_cause_is_tagged_with_the_cause_not_the_regression():
    # Ten times slower still: it ends 28x above the baseline, and slowness is why.
    team = _team()[:3] + [_history("crawling", _decay(2000, seed=6))]
    reports = _by_name(analyze_groups(team, None, lambda h: (("config.model", "cnn"),)))
    regression = reports["crawling"].finding("baseline-regression")
    assert regression.level == WARNING and regression.explained_by == "slow-convergence"
    assert [f.id for f in reports["crawling"].problems] == ["slow-convergence"]


def test_a_group_of_one_says_so_and_a_run_alone_says_why():
    reports = _by_name(analyze_groups(_team()[:1] + [_history("other", _decay(40), state="finished")], None,
                                      lambda h: (("name", h.ref.name),)))
    skipped = reports["sane-a"].finding("baseline-regression")
    assert skipped.level == SKIPPED and "a group of one" in skipped.message
    alone = analyze(_team()[0]).finding("baseline-regression")
    assert alone.level == SKIPPED and "--group-by" in alone.message


def test_an_unknown_baseline_is_refused_with_the_fix():
    with pytest.raises(GroupingError, match="no such run"):
        analyze_groups(_team(), None, lambda h: (("config.model", "cnn"),), baseline_ids=["nope"])


def test_a_report_with_its_group_round_trips_through_json():
    reports = analyze_groups(_team(), None, lambda h: (("config.model", "cnn"),), baseline_ids=["sane-b"])
    doc = reports[0].to_dict(full=True)
    assert doc["group"]["baseline"] == "sane-b" and doc["group"]["rule"] == MARKED
    assert HealthReport.from_dict(json.loads(json.dumps(doc))) == reports[0]


def test_a_cohort_pickles_for_a_ray_worker():
    import pickle

    reports = analyze_groups(_team(), None, lambda h: (("config.model", "cnn"),))
    cohort = Cohort((("config.model", "cnn"),), 4, _profile("x"), "rule", batch_size=32)
    assert pickle.loads(pickle.dumps(cohort)) == cohort and reports


# -- the command line --------------------------------------------------------------------------------
def _write_team(folder) -> None:
    for h in _team():
        loss = h["train/loss"]
        rows = ["step,loss"] + [f"{s:.0f},{v:.6f}" for s, v in zip(loss.steps, loss.values)]
        (folder / f"{h.ref.id}.csv").write_text("\n".join(rows) + "\n")


def test_analyze_group_by_folder_finds_the_slow_run(tmp_path):
    _write_team(tmp_path)
    alone = CliRunner().invoke(main, ["analyze", str(tmp_path), "--format", "json", "--fail-on", "warning"])
    grouped = CliRunner().invoke(main, ["analyze", str(tmp_path), "--group-by", "folder", "--format", "json",
                                        "--fail-on", "warning"])
    assert alone.exit_code == 0, alone.output  # alone, every curve looks healthy
    assert grouped.exit_code == 1, grouped.output
    runs = {r["run"]["name"]: r for r in json.loads(grouped.output)["runs"]}
    assert [f["id"] for f in runs["lr-too-low"]["findings"]] == ["slow-convergence"]
    assert runs["sane-a"]["findings"] == [] and runs["sane-a"]["group"]["size"] == 4


def test_analyze_refuses_a_key_it_cannot_group_by_and_a_baseline_without_groups(tmp_path):
    _write_team(tmp_path)
    bad = CliRunner().invoke(main, ["analyze", str(tmp_path), "--group-by", "job_type"])
    assert bad.exit_code == 2 and "--group-by job_type: no run has it" in bad.output, bad.output
    assert "grouped by" in bad.output and "folder" in bad.output
    empty = CliRunner().invoke(main, ["analyze", str(tmp_path), "--group-by", "config."])
    assert empty.exit_code == 2 and "folder, config.NAME, params.NAME, COLUMN" in empty.output, empty.output
    lonely = CliRunner().invoke(main, ["analyze", str(tmp_path), "--baseline", "sane-a"])
    assert lonely.exit_code == 2 and "--group-by" in lonely.output


def test_analyze_group_by_a_column_of_one_table_that_holds_every_run(tmp_path):
    # One pandas CSV, as a training script's logger writes it: a run column, the metrics, and text
    # columns for the model and data set that hold one value per run.
    import pandas as pd

    frames = []
    for h, model in zip(_team(), ("cnn", "cnn", "cnn", "cnn"), strict=True):
        loss = h["train/loss"]
        frames.append(pd.DataFrame({"run": h.ref.name, "step": loss.steps, "loss": loss.values, "model": model,
                                    "dataset": "digits", "batch_size": 32}))
    other = _history("mlp-alone", _decay(200, seed=9))["train/loss"]
    frames.append(pd.DataFrame({"run": "mlp-alone", "step": other.steps, "loss": other.values, "model": "mlp",
                                "dataset": "digits", "batch_size": 64}))
    path = tmp_path / "runs.csv"
    pd.concat(frames).to_csv(path, index=False)
    result = CliRunner().invoke(main, ["analyze", str(path), "--group-by", "model", "--group-by", "dataset",
                                       "--format", "json", "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    runs = {r["run"]["name"]: r for r in json.loads(result.stdout)["runs"]}
    assert [f["id"] for f in runs["lr-too-low"]["findings"]] == ["slow-convergence"]
    assert runs["lr-too-low"]["group"]["size"] == 4 and "model=cnn" in runs["lr-too-low"]["group"]["label"]
    assert runs["sane-a"]["findings"] == []
    assert runs["mlp-alone"]["group"]["size"] == 1  # the only mlp: compared with nothing, and says so
    # A numeric column that holds one value per run groups too.
    by_batch = CliRunner().invoke(main, ["analyze", str(path), "--group-by", "batch_size", "--format", "json",
                                         "--fail-on", "never"])
    runs = {r["run"]["name"]: r for r in json.loads(by_batch.stdout)["runs"]}
    assert runs["lr-too-low"]["group"]["size"] == 4 and runs["mlp-alone"]["group"]["size"] == 1


def test_a_small_batch_run_is_compared_in_samples_not_steps():
    # Batch 4 against a batch-32 baseline: 8x the steps for the same data is the same speed.
    def with_batch(h: RunHistory, batch: int) -> RunHistory:
        import dataclasses

        return RunHistory(dataclasses.replace(h.ref, config={"model": "cnn", "batch_size": batch}),
                          {k: h[k] for k in h.keys()}, h.notes)

    team = [with_batch(_history("sane-a", _decay(40, seed=1)), 32), with_batch(_history("sane-b", _decay(45, seed=2)), 32),
            with_batch(_history("batch-4", _decay(320, seed=3)), 4)]
    reports = _by_name(analyze_groups(team, None, lambda h: (("config.model", "cnn"),)))
    finding = reports["batch-4"].finding("slow-convergence")
    assert finding.level == OK and "not slow for this group" in finding.message
    # The same run without batch sizes in the configs is compared in steps: 8x is slow.
    plain = _by_name(analyze_groups([_history("sane-a", _decay(40, seed=1)), _history("sane-b", _decay(45, seed=2)),
                                     _history("batch-4", _decay(320, seed=3))], None, lambda h: (("config.model", "cnn"),)))
    assert plain["batch-4"].finding("slow-convergence").level == WARNING


def test_a_run_that_saw_less_data_is_compared_with_the_baseline_after_as_much_data():
    # The torch corpus' healthy batch-4 runs (resnet_tiny_batch_sane_lr, multitask_digits_tiny_batch,
    # finetune_small_batch_sane_lr) ended 12-43x their batch-32 baselines' final val loss: as many steps,
    # an eighth of the data. Measured at equal data they are no regression; a plateau that stays ten
    # times above the baseline's level at that point still is.
    def with_batch(h: RunHistory, batch: int) -> RunHistory:
        import dataclasses

        return RunHistory(dataclasses.replace(h.ref, config={"model": "cnn", "batch_size": batch}),
                          {k: h[k] for k in h.keys()}, h.notes)

    sane = [with_batch(_history("sane-a", _decay(150, floor=0.01, seed=1)), 32),
            with_batch(_history("sane-b", _decay(160, floor=0.01, seed=2)), 32)]
    short = with_batch(_history("batch-4", _decay(1200, floor=0.01, seed=3)), 4)
    reports = _by_name(analyze_groups(sane + [short], None, lambda h: (("config.model", "cnn"),)))
    finding = reports["batch-4"].finding("baseline-regression")
    assert finding.level == OK and "after as much data (12.5% of the baseline's)" in finding.message, finding.message
    # Without batch sizes the same run is compared at its end, in steps: an order of magnitude worse.
    plain = _by_name(analyze_groups([_history("sane-a", _decay(150, floor=0.01, seed=1)), _history("sane-b", _decay(160, floor=0.01, seed=2)),
                                     _history("batch-4", _decay(1200, floor=0.01, seed=3))], None, lambda h: (("config.model", "cnn"),)))
    assert plain["batch-4"].finding("baseline-regression").level == WARNING, plain["batch-4"].finding("baseline-regression").message
    # Against a baseline that was already at its floor after that much data, a plateau 60x above it regressed.
    fast = [with_batch(_history("fast-a", _decay(10, floor=0.01, seed=1)), 32),
            with_batch(_history("fast-b", _decay(12, floor=0.01, seed=2)), 32)]
    stuck = with_batch(_history("stuck", np.maximum(_decay(80, floor=0.01, seed=3), 0.6)), 4)
    reports = _by_name(analyze_groups(fast + [stuck], None, lambda h: (("config.model", "cnn"),)))
    finding = reports["stuck"].finding("baseline-regression")
    assert finding.level == WARNING and "after as much data" in finding.message, finding.message


def test_report_group_by_draws_each_runs_baseline_and_groups_the_overview(tmp_path):
    pytest.importorskip("plotly")
    (tmp_path / "logs").mkdir()
    _write_team(tmp_path / "logs")
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["report", str(tmp_path / "logs"), "--group-by", "folder", "--html", f"{out}/"])
    assert result.exit_code == 0, result.output
    index = (out / "index.html").read_text()
    assert ">Group</button>" in index and index.count('title="the group') == 1
    pages = {p.name: p.read_text() for p in (out / "runs").glob("*.html")}
    slow = next(text for name, text in pages.items() if "lr-too-low" in name)
    assert 'id="run-group"' in slow and '"baseline":' in slow  # the baseline's curves are in its figures


def test_keeping_up_with_a_baseline_that_is_itself_slow_vouches_for_nothing():
    # Every run of the group crawls down at an almost constant rate, 8 % over the run (an LR too low for all of
    # them): alone, each is slow; the baseline is then one of them, and matching its pace is no alibi.
    rng = np.random.default_rng(0)
    team = [_history(f"crawl-{i}", (2.3 - rate * STEPS) * (1 + 0.005 * rng.standard_normal(len(STEPS))))
            for i, rate in enumerate((0.000180, 0.000187, 0.000194))]
    assert all(analyze(h).finding("slow-convergence").level == WARNING for h in team)
    reports = _by_name(analyze_groups(team, None, lambda h: (("config.model", "cnn"),)))
    assert reports["crawl-0"].group["baseline_name"] == "crawl-2" and "status warning" in reports["crawl-0"].group["rule"]
    for name in ("crawl-0", "crawl-1"):
        finding = reports[name].finding("slow-convergence")
        assert finding.level == WARNING and "not slow for this group" not in finding.message, finding.message


# -- runs whose loss is defined differently ---------------------------------------------------------
def _contrastive_team() -> list[RunHistory]:
    """One model and data set, two NT-Xent temperatures: at 0.1 the loss ends far lower than any run
    at 0.5 can (another function, not better training). The temperatures are logged as MLflow
    (a string) and W&B (a number) would log them. One run at 0.5 has a 5x too small LR."""
    return [_history("t01", _decay(40, floor=0.05, seed=1), temperature=0.1),
            _history("t05-a", _decay(40, floor=1.5, seed=2), temperature="0.50"),
            _history("t05-b", _decay(45, floor=1.5, seed=3), temperature=0.5),
            _history("t05-slow", _decay(200, floor=1.5, seed=4), temperature="0.5")]


def test_runs_are_compared_only_with_the_runs_of_their_group_that_define_the_loss_alike():
    team = _contrastive_team()
    # Without the temperature the group's baseline is the 0.1 run, whose level no 0.5 run reaches.
    blind = [RunHistory(dataclasses.replace(h.ref, config={"model": "cnn"}), {k: h[k] for k in h.keys()}) for h in team]
    blind_reports = _by_name(analyze_groups(blind, None, lambda h: (("config.model", "cnn"),)))
    assert blind_reports["t05-a"].group["baseline_name"] == "t01"
    assert blind_reports["t05-a"].finding("slow-convergence").level == WARNING  # the false alarm this prevents
    reports = _by_name(analyze_groups(team, None, lambda h: (("config.model", "cnn"),)))
    for name in ("t05-a", "t05-b"):
        group = reports[name].group
        assert group["group"] == {"config.model": "cnn", "temperature": "0.5"} and group["size"] == 3
        assert reports[name].finding("slow-convergence").level == OK, name
    assert reports["t05-slow"].group["baseline_name"] in ("t05-a", "t05-b")
    assert reports["t05-slow"].finding("slow-convergence").level == WARNING
    # The 0.1 run has no run of its own setting to compare with, and says why.
    lone = reports["t01"]
    assert lone.group["size"] == 1 and lone.group["baseline"] is None
    assert "temperature=0.1" in lone.group["reason"] and "defined otherwise" in lone.group["reason"]
    assert lone.finding("baseline-regression").level == SKIPPED


def test_a_loss_setting_is_named_by_its_key_and_optimisation_settings_are_not():
    for key in ("temperature", "model.loss.temperature", "Label-Smoothing", "w_dice", "aux_loss_weight",
                "lambda_kl", "kl_coef", "pos_weight", "beta", "criterion", "loss", "mixup_alpha", "args.mixup",
                "cutmix", "smoothing", "freeze_backbone", "model.train_backbone", "use_lora", "freeze"):
        assert is_loss_setting(key), key
    for key in ("lr", "learning_rate", "weight_decay", "adam_beta1", "betas", "eps", "batch_size", "loss_scale",
                "fp16", "optimizer", "warmup_steps", "dropout"):
        assert not is_loss_setting(key), key
    # Numbers in a loss function's key are a logged value, not a definition; W&B's wrappers are read.
    assert loss_setting({"loss": 0.31, "criterion": "CrossEntropy", "opt": {"temperature": {"value": 0.07}}}) == (
        ("criterion", "crossentropy"), ("opt.temperature", "0.07"))


def test_a_group_is_split_only_by_the_loss_entries_that_differ_and_a_missing_one_is_its_own_value():
    parts = split_by_setting({"a": (("beta", "1"), ("loss", "bce+kl")), "b": (("beta", "4"), ("loss", "bce+kl")),
                              "c": (("beta", "1"), ("loss", "bce+kl")), "d": (("loss", "bce+kl"),)})
    assert parts == {(("beta", "1"),): ["a", "c"], (("beta", "4"),): ["b"], (("beta", "(none)"),): ["d"]}
    assert split_by_setting({"a": (("loss", "mse"),), "b": (("loss", "mse"),)}) == {(): ["a", "b"]}
