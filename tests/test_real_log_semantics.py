"""The semantics real logs demanded (issue #12, item 5), each on a history shaped like the real case.

- a finite blow-up (the loss jumps back to its start after a gradient-norm spike, no NaN) is
  ``nonfinite``, critical, with the spike as onset; a calm jump or a loss that keeps bouncing is not;
- a loss that never learns is ``loss-oscillation`` (``no_learning``); a run that converged and idles is not;
- a loss that fell and then froze (it stops moving from batch to batch) is ``loss-oscillation`` (``frozen_level``);
- a loss on a plateau beside a quality metric (accuracy, mAP) that is exactly 0 at every evaluation is
  ``loss-oscillation`` (``metric_at_zero``), and not ``slow-convergence``; the same loss beside an accuracy that
  rose, or beside a per-class score at 0, is not;
- a fall that crawls at a constant rate and is still falling is ``slow-convergence`` (``back_loaded_fall``);
  a loss that bends early is not;
- a NaN gradient norm under a finite loss (HF filters NaN losses from its log) is a ``nonfinite`` warning;
- a val loss that climbs a few percent in order while the training set is memorised, or climbs after it
  was memorised while the train loss stays near zero, is ``overfitting``;
- a task that never moved beside a term that began orders of magnitude above it is ``task-imbalance``.
"""

import dataclasses
import warnings
import json
from pathlib import Path

import numpy as np
import pytest

from trackerhealth import RunHistory, RunRef
from trackerhealth.adapters.files import read_histories
from trackerhealth.engine import analyze

REF = RunRef("files", "p", "r")
N = 1000
T = np.arange(N, dtype=float)


def _noise(seed, scale):
    return scale * np.random.default_rng(seed).standard_normal(N)


def _report(**series):
    return analyze(RunHistory.from_series(REF, {k: (T, v) for k, v in series.items()}))


def _healthy_loss(seed=0):
    return 2.5 * np.exp(-T / 100) + 0.5 + _noise(seed, 0.03)


def _grad(seed=1):
    return np.abs(1 + _noise(seed, 0.1))


def test_a_finite_blow_up_after_a_gradient_spike_is_critical_nonfinite_with_the_spike_as_onset():
    loss, grad = _healthy_loss(), _grad()
    loss[600:] = 2.4 + _noise(2, 0.05)[600:]
    grad[598] = 400.0
    report = _report(loss=loss, grad_norm=grad)
    finding = report.finding("nonfinite")
    assert finding.level == "critical" and report.status == "critical"
    codes = {e.code: e for e in finding.evidence}
    assert "loss_divergence" in codes and codes["grad_norm_spike_before_divergence"].step_start == 598
    assert "598" in finding.message and "nonfinite" in {f.id for f in report.problems}


def test_an_fp16_style_collapse_that_recovers_is_found_without_a_gradient_norm():
    # An LLM-log shape: 2.8 -> 8.7 within 20 iterations, then back down over the next hundred.
    loss = 8 * np.exp(-T / 60) + 2.8 + _noise(3, 0.02)  # starts near ln(50257) = 10.8, a GPT-2 vocabulary
    loss[700:720] = np.linspace(2.9, 8.7, 20)
    loss[720:820] = np.linspace(8.7, 3.0, 100)
    finding = _report(loss=loss).finding("nonfinite")
    assert finding.level == "critical" and finding.evidence[0].code == "loss_divergence"


def test_a_jump_with_a_calm_gradient_norm_and_a_loss_that_keeps_bouncing_are_not_blow_ups():
    loss = _healthy_loss()
    loss[600:] = 2.4 + _noise(2, 0.05)[600:]
    assert _report(loss=loss, grad_norm=_grad()).finding("nonfinite").level == "ok"
    bouncing = _healthy_loss() + 2.0 * (np.sin(T / 25) > 0.5) * (T > 300)
    assert not any(e.code == "loss_divergence" for e in _report(loss=bouncing).finding("nonfinite").evidence)


def test_a_loss_that_never_learns_is_loss_oscillation_with_its_own_evidence():
    flat = 2.3026 + _noise(4, 0.002)
    finding = _report(loss=flat).finding("loss-oscillation")
    assert finding.level == "warning" and [e.code for e in finding.evidence] == ["no_learning"]
    assert "never learned" in finding.message


def test_a_flat_loss_whose_second_half_starts_on_a_bump_and_ends_above_its_start_never_learned():
    # Public log P354 (blind batch 31, missed): a heavily imbalanced classifier flat at ~0.0065 for 726 logs
    # (val ROC-AUC 0.5); its second half began on a high stretch, so that half "fell" 20 % and read as a
    # crawl, though the run ended 7 % above where it began. No crawl ends above its start.
    rng = np.random.default_rng(8)
    flat = 0.0065 * (1 + 0.15 * rng.standard_normal(N))
    flat[N // 2:N // 2 + 60] *= 1.4  # the bump the second half starts on
    flat[-100:] *= 1.05
    finding = _report(loss=flat).finding("loss-oscillation")
    assert finding.is_problem and [e.code for e in finding.evidence] == ["no_learning"], finding.message
    # Public log P367 (blind batch 32, missed): a classifier at ln 2 for 200 epochs, 0.6 % below its start at
    # the end, its second half's noisy head 2 % above its tail; its val loss fell 0.742 -> 0.691 = ln 2 only
    # to where the train loss already was. Never learned.
    pinned = 0.684 * (1 + 0.02 * np.random.default_rng(12).standard_normal(N))
    pinned[N // 2:N // 2 + 20] *= 1.03
    evals = T[::5]
    val = 0.691 + 0.05 * np.exp(-evals / 50)
    finding = analyze(RunHistory.from_series(REF, {"train_loss": (T, pinned), "val_loss": (evals, val)})).finding("loss-oscillation")
    assert finding.is_problem and [e.code for e in finding.evidence] == ["no_learning"], finding.message
    # A run still training has not ended anywhere: the monitor does not call it never-learned on this shape.
    live = RunRef("files", "p", "live", state="running")
    running = analyze(RunHistory.from_series(live, {"loss": (T, flat)})).finding("loss-oscillation")
    assert not running.is_problem, running.message
    # The same bump in a loss that ends below its start by a steady second-half fall is not this rule's.
    crawl = flat * np.r_[np.ones(N // 2), np.linspace(1.0, 0.8, N - N // 2)]
    assert "no_learning" not in [e.code for e in _report(loss=crawl).finding("loss-oscillation").evidence]


def test_a_run_that_converges_early_and_idles_is_healthy():
    idle = 2.0 * np.exp(-T / 20) + 0.1 + _noise(5, 0.002)
    report = _report(loss=idle)
    assert report.finding("loss-oscillation").level == "ok" and report.finding("slow-convergence").level == "ok"


def _detector_that_never_scores(metric_values, key="metrics/mAP50(B)"):
    # Public log P214 (a YOLO model trained from scratch at a peak LR of 3e-5): the summed loss drifts
    # down a few percent with batch noise while mAP, precision and recall are 0 at all 100 evaluations.
    loss = 13.6 - 0.9 * T / N + _noise(12, 0.25)
    evals = T[::10]
    return analyze(RunHistory.from_series(REF, {"train/loss": (T, loss), key: (evals, metric_values(evals))}))


def test_a_plateau_beside_a_quality_metric_at_zero_is_loss_oscillation_not_slow():
    report = _detector_that_never_scores(np.zeros_like)
    finding = report.finding("loss-oscillation")
    assert finding.level == "warning" and [e.code for e in finding.evidence] == ["metric_at_zero", "second_half_fall"], finding.message
    assert "metrics/mAP50(B) is 0 at 100 of its 100 evaluations" in finding.message
    assert report.finding("slow-convergence").level == "ok" and "never learned" in report.finding("slow-convergence").message


def test_the_same_plateau_beside_a_metric_that_scored_or_a_per_class_zero_is_not_never_learned():
    rising = _detector_that_never_scores(lambda e: 0.6 * e / N)
    assert "metric_at_zero" not in [e.code for e in rising.finding("loss-oscillation").evidence]
    one_class = _detector_that_never_scores(np.zeros_like, key="eval_T184_f1")  # a class never predicted (P07)
    assert "metric_at_zero" not in [e.code for e in one_class.finding("loss-oscillation").evidence]


def test_a_plateau_beside_an_accuracy_that_never_changes_is_loss_oscillation_not_slow():
    # Public log P429: val_acc is exactly 0.72414 at all 31 epochs (a 72/28 split: the majority class, every
    # time) while the loss sits on a plateau; a model whose predictions change at all moves its accuracy.
    report = _detector_that_never_scores(lambda e: np.full(len(e), 0.72414), key="val_acc")
    finding = report.finding("loss-oscillation")
    assert finding.level == "warning" and [e.code for e in finding.evidence] == ["metric_constant", "second_half_fall"], finding.message
    assert "val_acc is 0.724 at every one of its 100 evaluations" in finding.message, finding.message
    assert report.finding("slow-convergence").level == "ok" and "never learned" in report.finding("slow-convergence").message
    # Not when it moved once (its answers changed), nor at a perfect score from the first evaluation (solved).
    once = _detector_that_never_scores(lambda e: np.where(e == e[-1], 0.75, 0.72414), key="val_acc")
    perfect = _detector_that_never_scores(lambda e: np.ones(len(e)), key="val_acc")
    for report in (once, perfect):
        assert "metric_constant" not in [e.code for e in report.finding("loss-oscillation").evidence]
    # Nor in a run still training: its first epochs at the majority class may end when it starts to learn.
    loss = 13.6 - 0.9 * T / N + _noise(12, 0.25)
    live = RunRef("files", "p", "live", state="running")
    running = analyze(RunHistory.from_series(live, {"train/loss": (T, loss), "val_acc": (T[::10], np.full(len(T[::10]), 0.72414))}))
    assert "metric_constant" not in [e.code for e in running.finding("loss-oscillation").evidence]


def test_an_error_rate_that_never_changes_never_learned_even_on_a_short_log():
    # Public log P669 (batch 57, scored once: missed): an ASR fine-tune whose loss sits at 4.97-5.01 for 26 logs after an
    # early drop, its word error rate exactly 1.0 at all six evaluations. An error rate (WER, CER) at one value at every
    # evaluation is a model whose output never changed: the mirror of an accuracy that never moved. Short logs too.
    steps = np.arange(26, dtype=float) * 25
    loss = np.r_[8.0, 6.1, 5.3, 5.0 + 0.02 * np.random.default_rng(3).standard_normal(23)]
    evals = steps[4::4]
    report = analyze(RunHistory.from_series(REF, {"loss": (steps, loss), "eval_wer": (evals, np.ones(len(evals)))}))
    finding = report.finding("loss-oscillation")
    assert finding.level == "warning" and [e.code for e in finding.evidence] == ["metric_constant", "second_half_fall"], finding.message
    assert "eval_wer is 1 at every one of its 6 evaluations" in finding.message
    # Not at a perfect 0, nor once it moved; and an error rate is no quality metric, nor a loss.
    for wer in (np.zeros(len(evals)), np.r_[np.ones(len(evals) - 1), 0.93]):
        other = analyze(RunHistory.from_series(REF, {"loss": (steps, loss), "eval_wer": (evals, wer)}))
        assert "metric_constant" not in [e.code for e in other.finding("loss-oscillation").evidence]
    from trackerhealth.roles import resolve

    roles = resolve(RunHistory.from_series(REF, {"loss": (steps, loss), "eval_wer": (evals, wer), "val/cer": (evals, wer),
                                                 "error_rate": (evals, wer), "eval_T3_wer_loss": (evals, wer)})).roles
    assert [k for _, k in roles.group("error_metrics")] == ["eval_wer", "val/cer", "error_rate"]
    assert not roles.group("quality_metrics") and roles.key("train_loss") == "loss"


def test_a_loss_that_falls_then_freezes_at_a_constant_prediction_is_loss_oscillation():
    # Public log P09-v5 (an LSTM regressing 0/1 targets): the MSE falls 0.63 -> 0.25 with batch noise,
    # then sits at 0.2500-0.2505 for the rest of the run -- predicting 0.5 for every sample, whatever the batch.
    falling = 0.25 + 0.38 * np.exp(-T / 60)
    frozen = np.where(T < 300, falling + np.abs(_noise(11, 0.02)), 0.25 + np.abs(_noise(10, 1e-4)))
    finding = _report(loss=frozen).finding("loss-oscillation")
    assert finding.level == "warning" and [e.code for e in finding.evidence] == ["frozen_level"], finding.message
    assert "stopped moving" in finding.message and "learning rate" in finding.recommendation
    # The same fall to a level where minibatch noise still moves the loss (a converged run) is healthy.
    converged = np.where(T < 300, falling, 0.25) + _noise(10, 0.01)
    assert _report(loss=converged).finding("loss-oscillation").level == "ok"
    # So is a loss averaged over many batches per logged point: smooth from its first point to its last,
    # it did not go still.
    averaged = 0.25 + 0.38 * np.exp(-T / 60) + _noise(12, 1e-4)
    assert _report(loss=averaged).finding("loss-oscillation").level == "ok"


def test_a_loss_that_relapses_two_orders_of_magnitude_at_any_scale_is_critical_loss_oscillation():
    # Public log P30-v0 (a regression net on raw targets): the MSE falls from 1e8 to ~1e-6 and then blows
    # up again and again, its last tenth at ~1e-3 -- thousands of times where it had got to, and still
    # far below its start, so no rule measured against the start sees it.
    converged = 1e8 * np.exp(-T / 10) + 1e-6 * np.exp(np.abs(_noise(13, 0.3)))
    relapsed = converged.copy()
    relapsed[700:] = 1e-6 * 10 ** np.linspace(0, 3.5, N - 700) * np.exp(np.abs(_noise(14, 0.5)))[700:]
    finding = _report(loss=relapsed).finding("loss-oscillation")
    assert finding.level == "critical" and [e.code for e in finding.evidence] == ["relapse"], finding.message
    assert "relapsed" in finding.message
    # The same fall to a noisy floor that drifts up a little (2x its best: batch noise at ~0) is healthy.
    drifting = converged * np.where(T > 700, 2.0, 1.0)
    assert _report(loss=drifting).finding("loss-oscillation").level == "ok"


def test_a_constant_rate_crawl_is_noted_a_tiny_one_is_slow_and_a_loss_that_bends_early_is_neither():
    # A line that never bends and fell a quarter: plain SGD with a tiny LR, or a healthy run stopped mid-descent
    # (held out, the healthy runs of five blind torch families read so). Noted with its shape, not tagged.
    crawl = 2.3 - 0.6 * T / N + _noise(6, 0.01)
    finding = _report(loss=crawl).finding("slow-convergence")
    assert finding.level == "ok" and finding.evidence[0].code == "back_loaded_fall" and "--group-by" in finding.message
    # A crawl of a few percent that would need many runs to halve is slow, from one curve.
    tiny = 2.3 - 0.1 * T / N + _noise(6, 0.005)
    assert _report(loss=tiny).finding("slow-convergence").evidence[0].code == "small_improvement"
    healthy = _report(loss=_healthy_loss()).finding("slow-convergence")
    # (a loss still falling at the end keeps that as evidence, never a note: tests/test_config_facts.py)
    assert healthy.level == "ok" and {e.code for e in healthy.evidence} <= {"still_falling"}


def test_a_finished_twenty_epoch_crawl_is_slow_and_a_live_one_is_too_early_to_call():
    # Public log P483 (a Keras CSVLogger file, one row per epoch): 1.39 -> 1.18 over 20 epochs in a line that
    # never bends. Epoch means are not batch noise: a finished run of 10-29 of them is judged.
    epochs = np.arange(20, dtype=float)
    crawl = np.array([1.3924, 1.2827, 1.2651, 1.2541, 1.2467, 1.2404, 1.2348, 1.2295, 1.2245, 1.2199, 1.2159, 1.2114,
                      1.2074, 1.2036, 1.1978, 1.1955, 1.1922, 1.1883, 1.1852, 1.1804])  # P483's loss, epoch by epoch
    done = analyze(RunHistory.from_series(REF, {"loss": (epochs, crawl)})).finding("slow-convergence")
    assert done.level in ("warning", "critical"), done.message
    # The same epochs of a run still training: too early to call it slow.
    live = RunRef("files", "p", "live", state="running")
    early = analyze(RunHistory.from_series(live, {"loss": (epochs, crawl)})).finding("slow-convergence")
    assert early.level == "skipped" and "need 30" in early.message, early.message
    # A finished 20-epoch run that bends early is not slow.
    bends = 1.2 * np.exp(-epochs / 3) + 0.2 + 0.002 * np.random.default_rng(4).standard_normal(20)
    assert analyze(RunHistory.from_series(REF, {"loss": (epochs, bends)})).finding("slow-convergence").level == "ok"


def test_a_plateau_before_a_late_drop_is_noted():
    late = 2.3 - 1.2 / (1 + np.exp(-(T - 750) / 60)) + _noise(7, 0.01)  # init far too small: chance level, then a late fall
    finding = _report(loss=late).finding("slow-convergence")
    assert finding.level == "ok" and "back_loaded_fall" in {e.code for e in finding.evidence}


def _epochs(values, state=None):
    steps = np.arange(len(values), dtype=float)
    ref = dataclasses.replace(REF, state=state)
    return analyze(RunHistory.from_series(ref, {"train_loss": (steps, np.asarray(values, dtype=float))}))


def test_a_twenty_epoch_log_is_judged_on_its_overall_change():
    # Public logs P45 (a GAN's generator loss, 0.73 -> 2.3 over 20 epochs) and P36 (a probe that never
    # gets below its first loss in 28 points): too short for swings, long enough to see it is not learning.
    rng = np.random.default_rng(3)
    rising = _epochs(np.linspace(0.73, 2.3, 20) * (1 + 0.1 * rng.standard_normal(20)))
    assert rising.status == "critical" and rising.finding("loss-oscillation").level == "critical"
    flat = _epochs(2.35 + 0.03 * rng.standard_normal(20))
    assert flat.finding("loss-oscillation").level == "warning" and "never learned" in flat.finding("loss-oscillation").message
    learning = _epochs(1.9 * np.exp(-np.arange(20) / 5) + 0.3 + 0.01 * rng.standard_normal(20))
    assert learning.status == "ok" and "only that overall change is judged" in learning.finding("loss-oscillation").message
    # Below short_min_points nothing is judged: unknown, never ok.
    assert _epochs(np.linspace(2.0, 1.0, 8)).status == "unknown"
    # A run still training (a monitor's check, a scan of a live W&B run) is not a short run: its first
    # epochs are too early to call either way.
    live = _epochs(2.35 + 0.03 * rng.standard_normal(20), state="running")
    assert live.status == "unknown" and "still in progress" in live.status_reason


def test_a_fine_tune_that_fell_most_of_the_way_in_its_warm_up_is_not_slow():
    # Public log P43 (HF Trainer, 3 epochs): 0.99 -> 0.35 during the LR warm-up, then an epoch-by-epoch
    # staircase to 0.18. After warm-up alone the fall looks back-loaded; the whole run made its progress early.
    lr = np.where(T < 100, 2e-5 * (T + 1) / 100, 2e-5 * (1 - (T - 100) / (N - 100)))
    warm = 0.99 - 0.64 * np.minimum(T, 100) / 100
    stairs = 0.35 - 0.06 * (T >= 400) - 0.06 * (T >= 700) - 0.05 * (T >= 950) - 0.01 * np.clip((T - 100) / 300, 0, 1)
    loss = np.where(T < 100, warm, stairs) + _noise(11, 0.01)
    assert _report(loss=loss, learning_rate=lr).finding("slow-convergence").level == "ok"
    assert "back_loaded_fall" not in {e.code for e in _report(loss=loss, learning_rate=lr).finding("slow-convergence").evidence}
    # The same staircase without the fall in warm-up is the crawl the back-loaded note is for.
    crawl = _report(loss=np.where(T < 100, 0.35, stairs) + _noise(11, 0.01), learning_rate=lr).finding("slow-convergence")
    assert crawl.level == "ok" and crawl.evidence[0].code == "back_loaded_fall"


def test_a_nan_gradient_norm_under_a_finite_hf_loss_is_a_nonfinite_warning(tmp_path):
    log = []
    for step in range(5, 505, 5):
        log.append({"loss": 3.0 * np.exp(-step / 200) + 0.5, "grad_norm": float("nan") if step in (15, 40) else 0.8,
                    "learning_rate": 1e-4, "epoch": step / 500, "step": step})
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": log, "global_step": 500}).replace("NaN", "NaN"))
    report = analyze(read_histories(path)[0])
    finding = report.finding("nonfinite")
    assert finding.level == "warning" and finding.evidence[0].code == "nonfinite_grad_norm"
    assert "logging_nan_inf_filter" in finding.message and report.status != "ok"


@pytest.mark.parametrize("persisting", [True])
def test_a_nan_gradient_norm_to_the_end_stays_critical(persisting):
    grad = _grad()
    grad[900:] = np.nan
    assert _report(loss=_healthy_loss(), grad_norm=grad).finding("nonfinite").level == "critical"


def test_a_term_that_fell_early_then_stopped_under_a_dominating_term_is_task_imbalance():
    # A PINN/VAE shape (public logs P02-v20, P10): both terms drop in the first epochs; then the big
    # term goes on falling while the small one sits still for the rest of the run.
    big = 20000 * np.exp(-T / 150) + 300 + _noise(4, 2.0)
    small = 10 * np.exp(-T / 10) + 1.0 + _noise(5, 0.01)
    report = _report(loss=big + small, loss_field=big, loss_port=small)
    finding = report.finding("task-imbalance")
    assert finding.level in ("warning", "critical"), finding.message
    assert "loss_port" in finding.message and "not being trained" in finding.message
    # The same terms with the small one still falling over the second half are balanced enough.
    falling = 10 * np.exp(-T / 10) + 1.0 * np.exp(-T / 400) + _noise(5, 0.01)
    assert _report(loss=big + falling, loss_field=big, loss_port=falling).finding("task-imbalance").level == "ok"


def test_a_loss_term_that_is_zero_at_every_step_is_no_task():
    # Public log P132 (batch 11): a YOLO run whose training images carry no boxes logs train/box_loss and
    # train/dfl_loss as exactly 0 at every epoch beside a falling cls loss. A term with no value carries no
    # gradient: there is nothing to balance, so it is not a stalled task.
    cls = 100 * np.exp(-T / 80) + 0.03 + _noise(6, 0.002)
    zero = np.zeros(N)
    assert _report(loss=cls, loss_cls=cls, loss_box=zero, loss_dfl=zero).finding("task-imbalance").level in ("ok", "skipped")
    # A term that sits still at a level above zero beside the same dominating term is still a task not trained.
    flat = np.full(N, 0.002) + _noise(7, 0.00001)
    finding = _report(loss=cls + flat, loss_cls=cls, loss_box=flat).finding("task-imbalance")
    assert finding.level in ("warning", "critical") and "loss_box" in finding.message, finding.message


def test_a_loss_named_metric_far_above_the_logged_total_is_no_task():
    # Public log P172 (batch 14, written after it was scored): a Lightning forecaster logs train_loss ~0.017
    # (the normalised loss it minimised) beside RMSE ~410 in the target's units and a reg_loss that is 0
    # until 70 % of the run. RMSE cannot be a term of a total 25,000x smaller: it is a metric, and the
    # pair read as "RMSE is 100 % of the sum while reg_loss rose" on a healthy run.
    total = np.exp(-T / 30) + 0.016 + _noise(10, 0.0002)
    rmse = 7000 * np.exp(-T / 30) + 410 + _noise(11, 2.0)
    reg = np.where(T > 0.7 * N, 0.0007, 0.0)
    assert _report(train_loss=total, RMSE=rmse, reg_loss=reg).finding("task-imbalance").level in ("ok", "skipped")
    # Terms on the total's own scale are still tasks: one stalled beside a falling one is found.
    cls = 0.9 * np.exp(-T / 30) + 0.01 + _noise(12, 0.0005)
    box = np.full(N, 0.004) + _noise(13, 0.00001)
    finding = _report(train_loss=cls + box, cls_loss=cls, box_loss=box).finding("task-imbalance")
    assert finding.level in ("warning", "critical") and "box" in finding.message, finding.message


def test_a_kl_term_that_grows_beside_the_reconstruction_is_no_neglected_task():
    # The torch family vae (scored blind: 18 of 25 runs tagged task-imbalance, 12 of 16 healthy ones): the
    # ELBO's reconstruction is ~97 % of the sum while its KL to the prior grows from ~0.1 to ~2 as the code
    # starts to carry information. That growth is the model learning, not a task left behind.
    recon = 12 * np.exp(-T / 60) + 26 + _noise(14, 0.3)
    kl = 2.5 * (1 - np.exp(-T / 80)) + 0.05 + _noise(15, 0.02)
    assert _report(loss=recon + kl, loss_recon=recon, loss_kl=kl).finding("task-imbalance").level == "ok"
    # The same growth in a term that is a task (a classifier head's cross-entropy) is still found ...
    finding = _report(loss=recon + kl, loss_recon=recon, loss_cls=kl).finding("task-imbalance")
    assert finding.level in ("warning", "critical") and "loss_cls" in finding.message, finding.message
    # ... and so is a KL that sits flat, never moving, beside the dominant term.
    flat_kl = np.full(N, 0.8) + _noise(16, 0.001)
    finding = _report(loss=recon + flat_kl, loss_recon=recon, loss_kl=flat_kl).finding("task-imbalance")
    assert finding.level in ("warning", "critical") and "loss_kl" in finding.message, finding.message


def test_a_task_swamped_by_a_term_orders_of_magnitude_larger_is_task_imbalance():
    # The torch corpus's cnn_imbalance_raw_ink shape: ink regressed in raw pixels (~1e5 at the start)
    # summed with a digit cross-entropy (~2.3). The ink term falls a thousandfold; the digit term, 78x
    # smaller, crawls from 2.3 to ~1.8 -- still falling more than the 5 % that makes a term flat.
    ink = 95000 * np.exp(-T / 40) + 70 + _noise(8, 5.0)
    digit = 2.3 - 0.5 * T / N + _noise(9, 0.05)
    finding = _report(loss=ink + digit, loss_ink=ink, loss_digit=digit).finding("task-imbalance")
    assert finding.level in ("warning", "critical"), finding.message
    lag = next(e for e in finding.evidence if e.code == "lagging_task_loss")
    assert lag.metric == "loss_digit" and lag.observed < 0.25 and "swamped" in finding.message
    # The same scales with the small task keeping pace (both fall about as far, as log-ratios) are fine.
    keeping_pace = 2.3 * np.exp(-T / 150) + 0.02 + _noise(9, 0.005)
    assert _report(loss=ink + keeping_pace, loss_ink=ink, loss_digit=keeping_pace).finding("task-imbalance").level == "ok"


def test_a_mean_over_the_terms_is_the_training_loss_not_the_largest_term():
    # Public log P02-v20 logs mean_loss beside four terms and no plain `loss`.
    from trackerhealth.roles import resolve

    terms = {"Dielectric_Air_loss": 2.5 * np.exp(-T / 100) + 0.5, "port1_loss": np.full(N, 0.8),
             "port2_loss": np.full(N, 1.0)}
    history = RunHistory.from_series(REF, {k: (T, v) for k, v in {**terms, "mean_loss": sum(terms.values()) / 3}.items()})
    view = resolve(history, {}, {})
    assert view.key("train_loss") == "mean_loss"
    assert {k for _, k, _ in view.group("task_losses")} == set(terms)


@pytest.mark.parametrize("keys, train, val", [
    # Scripts that log no key called a loss: cross-entropy or MSE by its own name.
    (("train/ce", "val/ce"), "train/ce", "val/ce"),
    (("train_mse", "val_mse"), "train_mse", "val_mse"),
    (("train/cross_entropy", "valid/cross_entropy"), "train/cross_entropy", "valid/cross_entropy"),
    (("losses/train", "losses/test"), "losses/train", "losses/test"),
    # `trn` is training: the train loss is not the other loss in the run.
    (("vl_loss", "trn_loss"), "trn_loss", None),
    # Keras logs `mse`/`mae` *metrics* beside `loss`: they are neither the loss nor its task terms.
    (("loss", "mse", "mae", "val_loss", "val_mse", "val_mae"), "loss", "val_loss"),
    # A duration is not a loss term (public log P41 logs `loss_computation_time` beside its terms).
    (("train_loss", "loss_uic", "loss_computation_time"), "train_loss", None),
    # CamelCase, as Keras-style and custom logs write it (public log P254: `Loss`, `ValLoss`).
    (("Loss", "ValLoss", "ReconstructRate", "ValReconstructRate"), "Loss", "ValLoss"),
    (("trainLoss", "valLoss"), "trainLoss", "valLoss"),
    # Lightning with on_step and on_epoch: the per-step train loss is the curve; validation is judged on its
    # per-epoch aggregate, not its per-batch values (public log P316's val_loss_step spans 6.6e-05 to 1.7).
    (("train_loss_step", "train_loss_epoch", "val_loss_step", "val_loss_epoch"), "train_loss_step", "val_loss_epoch"),
])
def test_the_loss_is_found_under_the_names_scripts_give_it(keys, train, val):
    from trackerhealth.roles import resolve

    history = RunHistory.from_series(REF, {k: (T, _healthy_loss()) for k in keys})
    view = resolve(history, {}, {})
    assert (view.key("train_loss"), view.key("val_loss")) == (train, val)
    assert view.group("task_losses") == []


def test_a_gradient_norm_that_grows_while_the_loss_falls_faster_is_learning_not_an_explosion():
    # multitask_digits_twin_sgd (torch corpus, healthy): SGD's gradient norm climbs from ~1 to ~5-10 as
    # the classifier's logits sharpen, while the loss falls faster than ever.
    grad = np.where(T < 150, 1.0, 10.0 + 2 * np.sin(T / 7)) * np.abs(1 + _noise(6, 0.05))
    learning = _report(loss=_healthy_loss(), grad_norm=grad).finding("nonfinite")
    assert learning.level == "ok" and "kept falling" in learning.message, learning.message
    # The same climb with a loss that jumps a third up and stays there is the explosion the seed describes.
    stalled = _healthy_loss()
    stalled[150:] = 1.3 * stalled[149] + _noise(7, 0.03)[150:]
    exploding = _report(loss=stalled, grad_norm=grad).finding("nonfinite")
    assert exploding.level == "warning" and exploding.evidence[0].code == "grad_norm_explosion", exploding.message


def test_layer_names_a_store_sorted_are_put_back_in_model_order():
    # An MLflow file store keeps no log order: the torch corpus's 20-layer sigmoid stack read back from
    # mlruns/ lists head.weight first and hidden.10 before hidden.2. Judged in that order, the early layers were
    # the head and the late ones the input layer, and the finding said the whole network had stopped.
    from evidence.lofo import TORCH
    from evidence.torch import manifest
    from trackerhealth.roles import resolve

    entry = next(e for e in manifest.load() if e["name"] == "mlp_vanishing_sigmoid20")
    logged = read_histories(TORCH / entry["file"])[0]
    stored = RunHistory.from_series(REF, {k: (logged[k].steps, logged[k].values) for k in sorted(logged.keys())})
    order = [key for _, key, _ in resolve(stored).group("layer_grad_norms")]
    assert order[0] == "inp.weight.grad_norm" and order[-1] == "head.weight.grad_norm"
    assert order.index("hidden.2.weight.grad_norm") < order.index("hidden.10.weight.grad_norm")
    finding = analyze(stored).finding("vanishing-gradients")
    assert finding.level == "critical" and "first 5 of 20 layers" in finding.message and "inp.weight" in finding.message
    # An order that is not the sorted one is the order the run logged: kept as it is.
    shuffled = ["c.grad_norm", "a.grad_norm", "b.grad_norm"]
    history = RunHistory.from_series(REF, {k: (T, np.full(N, 0.1)) for k in [*shuffled, "loss"]})
    assert [key for _, key, _ in resolve(history).group("layer_grad_norms")] == shuffled


# Ultralytics YOLO's results.csv (space-padded header, one row per epoch) of a real run: repository
# 0012223/ADOS_2024, commit 433ce2a8dbcd3a91218059a20c3678d8fb8a804d, runs/detect/train/results.csv.
# Its box, cls and dfl losses fall, its val losses fall, mAP50 reaches 0.995: healthy, as we read it.
YOLO = Path(__file__).resolve().parent / "data" / "ultralytics" / "results.csv"


def test_one_term_of_a_summed_val_loss_that_overfits_is_overfitting(tmp_path):
    # Public logs P804 (YOLO11-seg: val seg loss up 25 %, the summed val loss 2.3 %) and P272 (YOLOv8: val cls loss up
    # 22 %). Here the real run above with its val box loss made to climb 60 % from epoch 50 while every train loss
    # keeps falling; the sum of the val terms rises far less.
    import pandas as pd

    raw = pd.read_csv(YOLO, skipinitialspace=True)
    raw.columns = [c.strip() for c in raw.columns]
    assert "overfitting" not in {f.id for f in analyze(read_histories(YOLO)[0]).problems}  # as logged: healthy
    climb = np.clip((raw["epoch"].to_numpy() - 50) / 50, 0, None)
    raw["val/box_loss"] = raw["val/box_loss"].iloc[49] * (1 + 0.6 * climb) * (raw["epoch"] >= 50) + raw["val/box_loss"] * (raw["epoch"] < 50)
    edited = tmp_path / "results.csv"
    raw.to_csv(edited, index=False)
    finding = analyze(read_histories(edited)[0]).finding("overfitting")
    assert finding.is_problem and finding.evidence[0].metric == "val/box_loss", finding.message
    assert "one term of the summed val loss" in finding.message


def test_yolo_logs_three_loss_terms_and_no_total_so_the_training_loss_is_their_sum():
    import pandas as pd

    from trackerhealth.roles import resolve

    (history,) = read_histories(YOLO)
    view = resolve(history, {}, {})
    assert view.key("train_loss") == "train/box_loss+train/cls_loss+train/dfl_loss"
    assert view.key("val_loss") == "val/box_loss+val/cls_loss+val/dfl_loss"
    raw = pd.read_csv(YOLO, skipinitialspace=True)
    raw.columns = [c.strip() for c in raw.columns]
    expected = (raw["train/box_loss"] + raw["train/cls_loss"] + raw["train/dfl_loss"]).to_numpy()
    assert np.allclose(view.series("train_loss").values, expected)
    assert [label for label, _, _ in view.group("task_losses")] == ["box", "cls", "dfl"]
    assert any("is the sum of its 3 logged terms" in n for n in view.history.notes)
    report = analyze(history)
    assert report.status == "ok", [(f.id, f.message) for f in report.problems]
    assert report.loss_key == view.key("train_loss") and any("sum of its 3 logged terms" in n for n in report.notes)


def _terms_view(series):
    from trackerhealth.roles import resolve

    return resolve(RunHistory.from_series(REF, {k: (T, v) for k, v in series.items()}), {}, {})


def test_a_logged_total_or_a_term_that_sums_the_others_is_the_loss_not_a_new_sum():
    recon, kl = 2.5 * np.exp(-T / 100) + 0.5, 0.1 + 0.05 * np.exp(-T / 300)
    # A VAE logs its ELBO beside the two terms it sums: the ELBO is the loss.
    assert _terms_view({"train_recon_loss": recon, "train_kl_loss": kl, "train_elbo_loss": recon + kl}).key(
        "train_loss") == "train_elbo_loss"
    # Words every key shares are a namespace: `it_train_loss` is that namespace's plain training loss.
    assert _terms_view({"forget_train/it_train_loss": recon - kl, "forget_train/it_coarse_loss": recon,
                        "forget_train/it_fine_loss": kl}).key("train_loss") == "forget_train/it_train_loss"


def test_a_gans_two_losses_are_never_summed():
    view = _terms_view({"Generator loss": 0.7 + _noise(3, 0.1), "Discriminator loss": 1.3 + _noise(4, 0.1)})
    assert "+" not in view.key("train_loss")


def test_a_loss_that_learned_during_its_warm_up_and_is_flat_after_it_did_learn():
    # detectron2 warms its LR up over 1,000 iterations (public log P70: total_loss 2.13 -> 0.28 in them, flat after).
    steps = np.arange(19, 1500, 20, dtype=float)
    loss = np.where(steps < 1000, 0.28 + 1.85 * np.exp(-steps / 120), 0.28) + 0.01 * np.sin(steps)
    lr = np.minimum(1.0, (steps + 1) / 1000) * 2.5e-4
    report = analyze(RunHistory.from_series(REF, {"total_loss": (steps, loss), "lr": (steps, lr)}))
    assert report.finding("loss-oscillation").level == "ok", report.finding("loss-oscillation").message
    # The same flat loss with no fall in its warm-up never learned.
    flat = np.full_like(steps, 0.28) + 0.01 * np.sin(steps)
    still = analyze(RunHistory.from_series(REF, {"total_loss": (steps, flat), "lr": (steps, lr)}))
    assert still.finding("loss-oscillation").level == "warning"


def test_a_fine_tune_that_fell_a_fifth_in_its_first_tenth_and_then_creeps_is_on_its_plateau_not_slow():
    # Public logs P49 and P77 (LLM fine-tunes): a fast first fall, then a loss creeping towards the text's
    # entropy, still falling a little. What makes a run slow slows its first descent too.
    fine_tune = 1.25 + 0.8 * np.exp(-T / 40) - 0.05 * T / N + _noise(7, 0.01)
    assert analyze(RunHistory.from_series(REF, {"loss": (T, fine_tune)})).finding("slow-convergence").level == "ok"
    # The same creep from the first step, with no fast first fall, is slow.
    crawl = 2.05 - 0.25 * T / N + _noise(7, 0.01)
    assert analyze(RunHistory.from_series(REF, {"loss": (T, crawl)})).finding("slow-convergence").is_problem


def _torch_run(name: str):
    from evidence.lofo import TORCH
    from evidence.torch import manifest

    entry = next(e for e in manifest.load() if e["name"] == name)
    return analyze(read_histories(TORCH / entry["file"])[0])


@pytest.mark.parametrize("name", ["rnn_batch_too_small", "transformer_batch_too_small"])
def test_a_loss_that_fell_early_and_stuck_with_a_val_loss_that_never_improved_is_loss_oscillation(name):
    # Batch 2 with a high Adam LR: the char LM drops to about its unigram loss in the first tenth and
    # bounces there; its val loss ends within 1 % of its first evaluations. The transformer's twin (batch 32) ends 1.57x
    # lower; the GRU's 1.44x since the ground truth's end level is its last points' median (under the 1.5 its check
    # asks: kept, not scored), so for the GRU this is what the finding says, not a scored verdict.
    finding = _torch_run(name).finding("loss-oscillation")
    assert finding.is_problem and [e.code for e in finding.evidence][0] == "val_stalled", finding.message


@pytest.mark.parametrize("name", ["transformer_converged_idle", "multitask_wine_twin_regularised", "mlp_twin_shallow"])
def test_a_run_that_converged_early_and_idles_is_not_stuck(name):
    # Their val losses are flat from the first evaluation too; the first fell 20 % and is calm (swings 1.3 %
    # of its level), the other two fell 95-98 %, swinging about a level near zero.
    assert not _torch_run(name).finding("loss-oscillation").is_problem


@pytest.mark.parametrize("name", ["conv_warmup_cosine", "conv_sgdr_restarts", "conv_onecycle_adamw", "conv_rare_val"])
def test_a_steady_fall_after_a_fast_first_tenth_is_not_back_loaded(name):
    # The conv family's healthy runs (scored once, held out: 5 of 7 flagged slow-convergence) drop 6-18 %
    # in their first tenth, then fall steadily: half their fall takes 34-38 % of the run.
    assert not _torch_run(name).finding("slow-convergence").is_problem


@pytest.mark.parametrize("name", ["transformer_lr_too_low", "rnn_lr_too_low", "conv_lr_too_low"])
def test_a_steady_fall_that_was_slow_from_its_first_steps_is_noted_back_loaded(name):
    # LR 20-30x too low (Adam 1e-4 or 1.5e-4, an LR many healthy runs use): under 4 % of the fall happens in the first
    # tenth. One curve notes the shape; its group's baseline tags it (tests/test_torch_corpus.py: the slow runs the group finds).
    finding = _torch_run(name).finding("slow-convergence")
    assert not finding.is_problem and finding.evidence[0].code == "back_loaded_fall", finding.message


@pytest.mark.parametrize("name", ["regression_adam_eps_1", "vae_adam_eps_large", "simclr_adam_eps_large", "gnn_adam_eps_large"])
def test_a_back_loaded_fall_under_a_logged_adam_epsilon_of_one_is_slow(name):
    # The same shape with Adam eps 1.0 in the logged config (MLflow params, W&B config): the setting explains the shape.
    finding = _torch_run(name).finding("slow-convergence")
    assert finding.level == "warning" and "back_loaded_fall" in {e.code for e in finding.evidence}, finding.message
    assert "config_adam_epsilon" in {e.code for e in finding.evidence}


@pytest.mark.parametrize("name", ["unet_adam_eps_large", "vit_adam_eps_large", "forecast_adam_eps_large"])
def test_an_unfinished_fall_under_a_logged_adam_epsilon_of_one_is_slow(name):
    # Adam eps 1.0 in the W&B config, a fall that bends like a healthy one (half of it in 25-42 % of the run) and is still
    # falling at the end (second-half trend t -4.4 to -21): each reaches its twin's final loss 4x later or never.
    finding = _torch_run(name).finding("slow-convergence")
    assert finding.level == "warning" and {"still_falling", "config_adam_epsilon"} <= {e.code for e in finding.evidence}, finding.message


@pytest.mark.parametrize("name", ["seqcls_lr_too_high_adam", "seqcls_lr_too_high_sgd"])
def test_a_layer_saturated_by_a_blow_up_is_not_vanishing(name):
    # An LR far too high blows up the GRU classifier's tanh input layer: its gradient is 0.1-1 for the
    # first fifth of the run and ~1e-8 after. The layer was knocked out by the blow-up (the twin confirms
    # loss-oscillation, and its first layer's gradient is not smaller than the twin's): the loss's rise is
    # the finding, not vanishing gradients (scored once before this rule: both were tagged vanishing).
    report = _torch_run(name)
    assert not report.finding("vanishing-gradients").is_problem
    assert "loss-oscillation" in {f.id for f in report.problems}


@pytest.mark.parametrize("name", ["mlp_lr_too_low", "cnn_adam_eps_large"])
def test_a_creep_that_needs_hundreds_of_runs_to_halve_never_learned(name):
    # An LR 100x too low / Adam eps 1: the loss creeps 0.05-0.14 % after the first tenth, 363-1018 runs
    # of this length to halve. A trend test calls that falling steadily; it did not learn (the twin
    # confirms it flat): loss-oscillation's never-learned finding, not slow-convergence.
    report = _torch_run(name)
    slow = report.finding("slow-convergence")
    assert not slow.is_problem and "not converging at all" in slow.message
    assert [e.code for e in report.finding("loss-oscillation").evidence] == ["no_learning"]


def test_a_small_steady_climb_in_a_memorised_run_is_overfitting_and_a_noisy_one_is_not():
    # seqcls_overfit_small_subset: 100 digits, a 256-unit GRU; train loss -> 1e-4, val climbs 7 % in
    # order over 20 evaluations (tau 0.94). Its regularised twin also memorises but its val wanders
    # 4 % (tau 0.24); mlp_onecycle ends 6 % above its best with the val/train ratio under 2.
    finding = _torch_run("seqcls_overfit_small_subset").finding("overfitting")
    assert finding.is_problem and "val_loss_steady_climb" in [e.code for e in finding.evidence], finding.message
    for name in ("seqcls_twin_overfit_reg", "mlp_onecycle"):
        assert not _torch_run(name).finding("overfitting").is_problem, name


def test_a_task_that_never_moved_beside_a_term_that_began_orders_of_magnitude_larger_is_task_imbalance():
    # multitask_digits_imbalance_ink_div10: ink in units of 10 pixels (MSE ~1,000 at the start, 430x the
    # digit cross-entropy) summed with it. The ink term falls to ~8 (80 % of the total, under the 90 %
    # dominance share); the cross-entropy stays at ln 10 from first step to last. The twin with a
    # standardised target learns the digits (its cross-entropy falls 84 %).
    finding = _torch_run("multitask_digits_imbalance_ink_div10").finding("task-imbalance")
    assert finding.is_problem and "swamped_from_start" in [e.code for e in finding.evidence], finding.message
    assert not _torch_run("multitask_digits_twin_sgd_clip").finding("task-imbalance").is_problem


def test_a_val_loss_that_climbs_after_the_training_set_was_memorised_is_overfitting():
    # resnet_overfit_small_subset (scored once, held out, and missed: this rule came after it): 100
    # digits, no augmentation or weight decay; at the val minimum the train loss is already 0.02, 1/19 of
    # the val loss, and stays there while the val loss climbs 52 % (noisily, with BatchNorm). Its twin
    # (augmentation, weight decay, dropout) ends 28 % lower and is not flagged.
    finding = _torch_run("resnet_overfit_small_subset").finding("overfitting")
    assert finding.is_problem, finding.message
    assert not _torch_run("resnet_twin_overfit_reg").finding("overfitting").is_problem


def test_a_fall_inside_the_first_few_logs_is_a_fast_start_not_a_slow_run():
    # Public log P178 (batch 15, written after it was scored): Mask R-CNN's loss goes 47 -> 2 within its first
    # five logs of 3,000 (its mask loss starts at 44), then creeps 1.0 -> 0.9 under step decay. The first of
    # 30 bins (100 logs) has a median of 1.2, so the fast start was invisible and the creep read as slow.
    n = 3000
    t = np.arange(n, dtype=float)
    rng = np.random.default_rng(17)
    creep = 1.0 - 0.11 * t / n + 0.03 * rng.standard_normal(n)
    fast = np.concatenate([[47.4, 5.5, 2.9, 2.3, 2.0], creep[5:]])
    finding = analyze(RunHistory.from_series(REF, {"loss": (t, fast)})).finding("slow-convergence")
    assert finding.level in ("ok", "skipped"), finding.message
    # The same creep from its first log on, never faster, is slow.
    slow = analyze(RunHistory.from_series(REF, {"loss": (t, creep)})).finding("slow-convergence")
    assert slow.is_problem, slow.message


def test_an_inf_in_a_logged_term_of_the_loss_is_nonfinite_even_when_the_total_is_just_missing():
    # The torch family vae's SGD run at lr 2.0: its KL became +Inf at step 4 and its total train/loss was
    # written by pandas as an empty CSV cell from there on (read as not logged): 3 finite points, nothing
    # judged, the run `unknown`. The term's Inf is the total's.
    steps = np.arange(400, dtype=float)
    recon = np.full(400, np.nan)
    recon[:3] = [44.1, 42.9, 7896.0]
    kl = np.full(400, np.nan)
    kl[:4] = [0.1, 4.7, 92.5, np.inf]
    total = recon + kl
    lr = np.full(400, 2.0)
    history = RunHistory.from_series(REF, {"train/loss": (steps[:3], total[:3]), "train/loss_recon": (steps[:3], recon[:3]),
                                           "train/loss_kl": (steps[:4], kl[:4]), "train/lr": (steps, lr)})
    finding = analyze(history).finding("nonfinite")
    assert finding.level == "critical" and "train/loss_kl" in finding.message, finding.message
    assert next(e for e in finding.evidence if e.code == "nonfinite_value").step_start == 3


def test_quality_metrics_are_run_level_higher_is_better_keys():
    from trackerhealth.roles import resolve

    keys = ["train/loss", "val/accuracy", "metrics/mAP50-95(B)", "eval_f1", "train_acc_step", "eval_T184_f1",
            "val_loss", "train_error", "best_acc", "lr-Adam", "valAccuracy"]
    history = RunHistory.from_series(REF, {k: (T[:20], np.linspace(1.0, 0.5, 20)) for k in keys})
    found = [key for _, key, _ in resolve(history).group("quality_metrics")]
    # CamelCase splits into words (`valAccuracy`), an upper-case run does not (`mAP50` stays one word).
    assert found == ["val/accuracy", "metrics/mAP50-95(B)", "eval_f1", "train_acc_step", "valAccuracy"]


def test_a_val_rise_beside_a_negative_train_loss_is_not_judged_and_warns_nothing():
    # Public log P18 (machine unlearning: gradient ascent on the forget set drives the train loss below
    # zero): the val/train ratio is undefined, so overfitting is skipped with that reason, not `ok`.
    import warnings

    evals = T[::50]
    val = np.where(evals < 300, 1.0 - evals / 600, 0.5 + (evals - 300) / 400)
    train = 1.0 - 3.0 * T / N
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        finding = analyze(RunHistory.from_series(REF, {"train_loss": (T, train), "val_loss": (evals, val)})).finding("overfitting")
    assert finding.level == "skipped" and "not positive" in finding.message, finding.message


def test_a_val_rise_beside_a_train_loss_memorised_to_exactly_zero_is_overfitting():
    # Public log P349 (blind batch 31, missed): an HF Trainer log printed to a .out file, whose train loss,
    # rounded to four places, reads 0.0 from a third of the run on while the eval loss climbs 0.138 -> 0.49.
    # The val/train ratio is unbounded there, not undefined as beside a negative loss: it was `skipped`.
    import warnings

    evals = T[::50]
    val = np.where(evals < 300, 0.16 - evals / 10000, 0.13 + (evals - 300) / 2000)
    train = np.where(T < 350, 0.15 * (1 - T / 400), 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        finding = analyze(RunHistory.from_series(REF, {"train_loss": (T, train), "val_loss": (evals, val)})).finding("overfitting")
    assert finding.level == "critical" and "reached 0" in finding.message, finding.message


def test_the_gpu_w_and_b_marks_as_the_runs_own_is_the_one_judged_for_an_input_bottleneck():
    # Public log P261 (batch 23, scored blind and flagged): an 8-GPU machine where gpu.0 sat at 0 % for the
    # whole fine-tune; W&B's system.gpu.process.2.* says the run's own process held gpu.2, 96 % busy.
    idle, busy = np.zeros(N), 96 + _noise(2, 1)
    own = _report(**{"train/loss": _healthy_loss(), "system/gpu.0.gpu": idle, "system/gpu.2.gpu": busy,
                     "system/gpu.process.2.gpu": busy}).finding("input-bottleneck")
    assert not own.is_problem and own.evidence[0].metric == "system/gpu.process.2.gpu", own.message
    # Without W&B's mark there is no telling which GPU is the run's: the first one is read, and found idle.
    unmarked = _report(**{"train/loss": _healthy_loss(), "system/gpu.0.gpu": np.clip(20 + _noise(4, 5), 0, 100),
                          "system/gpu.2.gpu": busy})
    assert unmarked.finding("input-bottleneck").is_problem


def test_an_eval_logged_before_the_first_train_point_is_compared_with_the_first_train_level():
    # Public log P267 (batch 24): HF Trainer evaluated every 132 steps but logged the train loss every 500,
    # and the val loss was lowest at its first evaluation (step 132), before any train point: the train
    # level there is the first one logged after it, not an all-NaN median (which raised a RuntimeWarning).
    val_steps, train_steps = np.arange(132, 2641, 132, dtype=float), np.arange(500, 2501, 500, dtype=float)
    history = RunHistory.from_series(REF, {
        "loss": (train_steps, np.array([2.0, 1.2, 0.7, 0.4, 0.2])),
        "eval_loss": (val_steps, 1.0 + 0.05 * np.arange(len(val_steps))),
    })
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        finding = analyze(history).finding("overfitting")
    assert finding.level != "error", finding.message
    assert finding.is_problem, finding.message  # the train loss fell 90 % from 2.0 while the val loss rose 95 %


def _opposite_trends(val_noise_seed=None):
    """20 evaluations: the val loss bottoms at the 6th and then climbs 6 % in order while the train loss
    falls 25 % in order (public logs P206, P255: a 6-7 % climb beside a train loss still falling); with
    ``val_noise_seed`` the same points after the minimum come in a random order, a rise noise could make."""
    evals = np.arange(1, 21, dtype=float) * 50
    val = np.concatenate([np.linspace(1.2, 1.0, 6), 1.0 + 0.06 * np.linspace(0.1, 1, 14) ** 1.5])
    if val_noise_seed is not None:
        tail = val[6:].copy()
        np.random.default_rng(val_noise_seed).shuffle(tail)
        val[6:] = tail
    train_steps = np.arange(10, 1001, 10, dtype=float)
    train = 1.1 * np.exp(-train_steps / 2500) + 0.01 * np.sin(train_steps)
    return analyze(RunHistory.from_series(REF, {"train_loss": (train_steps, train), "val_loss": (evals, val)}))


def test_a_val_loss_climbing_in_order_while_the_train_loss_falls_in_order_is_overfitting_and_a_shuffled_one_is_not():
    finding = _opposite_trends().finding("overfitting")
    assert finding.is_problem and finding.level == "warning", finding.message
    assert "val_rises_train_falls" in [e.code for e in finding.evidence], finding.message
    for seed in range(3):
        assert not _opposite_trends(val_noise_seed=seed).finding("overfitting").is_problem, seed


def test_gpu_utilisation_alone_blames_the_input_pipeline_only_when_the_gpu_is_idle_most_of_the_time():
    # Public W&B logs with GPU utilisation and no data time: P16 (an SSD detector, GPUs 29 % busy, swinging
    # 0-75 %) is input-bound; P265, P282, P284 (45-55 % busy: a deep-prior fit, two YOLOv7 runs) are not.
    half_busy = _report(**{"train/loss": _healthy_loss(), "system/gpu.process.0.gpu": 50 + _noise(3, 5)})
    finding = half_busy.finding("input-bottleneck")
    assert not finding.is_problem and "log data_time" in finding.message, finding.message
    mostly_idle = _report(**{"train/loss": _healthy_loss(), "system/gpu.process.0.gpu": np.clip(25 + _noise(3, 20), 0, 100)})
    finding = mostly_idle.finding("input-bottleneck")
    assert finding.is_problem and finding.level == "warning" and "data_time" in finding.message, finding.message


def test_a_gpu_utilisation_that_never_moves_is_no_measurement_and_is_not_judged():
    # Public log P342 (batch 30, scored blind): a TinyLlama LoRA run whose W&B gpu.0 read exactly 0 % in all
    # 3589 samples, at a constant power draw, while its loss and gradient norm moved — the sensor reported
    # nothing. It was tagged input-bottleneck; a starved GPU still computes in bursts.
    frozen = _report(**{"train/loss": _healthy_loss(), "system/gpu.0.gpu": np.zeros(N)}).finding("input-bottleneck")
    assert frozen.level == "skipped" and "never changed" in frozen.message and "all 0%" in frozen.message, frozen.message
    # The same idle GPU with the slightest movement is measured, and flagged.
    moving = _report(**{"train/loss": _healthy_loss(), "system/gpu.0.gpu": np.where(T % 50 == 0, 3.0, 0.0)})
    assert moving.finding("input-bottleneck").is_problem


def test_a_gpu_the_run_never_used_is_read_in_percent_and_not_blamed_on_the_input_pipeline():
    # Public log P398 (batch 35, scored blind): a W&B GNN run whose process GPU read 0-0.2 % for 2000 steps at 5 % of
    # its memory. W&B writes that key in percent; read as a fraction it became 7 % busy and input-bound.
    from trackerhealth.roles import resolve

    idle = np.clip(0.07 + _noise(5, 0.05), 0, 0.2)
    history = RunHistory.from_series(REF, {"train/loss": (T, _healthy_loss()), "system/gpu.process.0.gpu": (T, idle)})
    assert float(resolve(history).series("gpu_util").values.max()) <= 0.2
    finding = analyze(history).finding("input-bottleneck")
    assert finding.level == "skipped" and "did no work" in finding.message, finding.message
    # A plain gpu_util logged as a fraction is still read as one: 0.2 is 20 % busy, and idle enough to flag.
    fraction = analyze(RunHistory.from_series(REF, {"train/loss": (T, _healthy_loss()), "gpu_util": (T, 0.2 + idle)}))
    assert fraction.finding("input-bottleneck").is_problem, fraction.finding("input-bottleneck").message


def _per_epoch(val_jumps: bool, seed: int = 0):
    """Public log P387's shape (batch 34, scored blind): a captioning model's per-epoch train loss falling
    smoothly 43 -> 0.46 over 50 epochs while its val loss leaps between ~1 and hundreds."""
    rng = np.random.default_rng(seed)
    epochs = np.arange(1, 51, dtype=float)
    train = 0.45 + 43 * np.exp(-epochs / 4)
    level = 1.0 + 10 * np.exp(-epochs / 10)
    val = level * (np.exp(rng.normal(0, 1.6, 50)) if val_jumps else 1 + rng.normal(0, 0.08, 50))
    return analyze(RunHistory.from_series(REF, {"train_loss": (epochs, train), "validation_loss": (epochs, val)}))


def test_a_val_loss_leaping_between_evaluations_while_the_train_loss_falls_smoothly_is_unstable():
    finding = _per_epoch(val_jumps=True).finding("loss-oscillation")
    assert finding.level == "warning" and [e.code for e in finding.evidence] == ["val_loss_swings"], finding.message
    for seed in range(3):  # an ordinary noisy val loss beside the same train loss is not
        assert _per_epoch(val_jumps=False, seed=seed).finding("loss-oscillation").level == "ok"
    # Nor is a val loss falling 3x or more from one evaluation to the next as it converges, each its lowest yet
    # (torch run pinn_rare_val, built blind: 9e-3, 5.5e-4, 1.5e-4, 6.5e-5, 3.9e-5, 4.9e-5, 2.2e-5, 1.7e-5).
    steps = np.arange(250.0, 2001.0, 250.0)
    val = np.array([9.0e-3, 5.5e-4, 1.5e-4, 6.5e-5, 3.9e-5, 4.9e-5, 2.2e-5, 1.7e-5])
    train_steps = np.arange(1.0, 2001.0)
    train = 2e-4 + 0.2 * np.exp(-train_steps / 150)
    report = analyze(RunHistory.from_series(REF, {"train/loss": (train_steps, train), "val/loss": (steps, val)}))
    assert not report.finding("loss-oscillation").is_problem, report.finding("loss-oscillation").message


def test_a_train_loss_on_a_floor_beside_a_val_loss_still_moving_has_not_stopped_moving():
    # Public log P314 (blind batch 27, flagged, then this rule): a ResNet with label smoothing, one point per
    # epoch; the train loss floors at 0.447 (within 0.5 %) while the val loss keeps falling 0.175 -> 0.164.
    # A model whose output stopped changing would score its val set the same at every evaluation.
    falling = 0.25 + 0.38 * np.exp(-T / 60)
    floored = np.where(T < 300, falling + np.abs(_noise(11, 0.02)), 0.25 + np.abs(_noise(10, 1e-4)))
    val_steps = T[::50]
    still_learning = 0.20 + 0.05 * np.exp(-val_steps / 300)
    report = analyze(RunHistory.from_series(REF, {"loss": (T, floored), "val_loss": (val_steps, still_learning)}))
    assert report.finding("loss-oscillation").level == "ok", report.finding("loss-oscillation").message
    # With the val loss as still as the train loss, the output did stop changing.
    pinned = np.full(len(val_steps), 0.26) + np.abs(_noise(13, 1e-5)[: len(val_steps)])
    report = analyze(RunHistory.from_series(REF, {"loss": (T, floored), "val_loss": (val_steps, pinned)}))
    assert [e.code for e in report.finding("loss-oscillation").evidence] == ["frozen_level"]


def _wandering_fine_tune(final: float, seed: int) -> np.ndarray:
    """Public log P303's shape: from 10.3 down to 6.5, then bouts at a high level (30 falling to 14) every
    120 steps, then a climb from 7 to ``final``: the second half falls (from its bouts) but not below the start."""
    level = np.where(T < 100, 10.3 - 3.5 * T / 100, 6.5)
    bout = ((T - 500) // 60).astype(int) % 2 == 0
    level = np.where((T >= 500) & (T < 850) & bout, 30 - 16 * (T - 500) / 350, level)
    level = np.where(T >= 850, 7 + (final - 7) * (T - 850) / 150, level)
    return level * (1 + _noise(seed, 0.05))


def test_a_long_runs_wander_is_measured_on_block_medians_with_the_same_verdict():
    # Past wander_max_points the moving medians run over block medians (a cost bound: bench/bench_analyze.py's
    # million-step run spent half its analysis there). The same shapes 100x longer read as the 1,000-step ones do.
    from trackerhealth.diagnoses import loss_oscillation

    long_steps = np.arange(100 * N, dtype=float)
    rng = np.random.default_rng(24)

    def stretched(final):
        level = np.repeat(_wandering_fine_tune(final, 22) / (1 + _noise(22, 0.05)), 100)
        return level * (1 + 0.05 * rng.standard_normal(100 * N))

    def finding(loss):
        return analyze(RunHistory.from_series(REF, {"loss": (long_steps, loss)})).finding("loss-oscillation")

    bounced = finding(stretched(17.0))
    assert bounced.is_problem and "level_wander" in [e.code for e in bounced.evidence], bounced.message
    assert not finding(stretched(3.0)).is_problem
    second_half = stretched(17.0)[50 * N:]
    blocks = loss_oscillation._wander(second_half, 100 * N, loss_oscillation.Thresholds())
    exact = loss_oscillation._wander(second_half, 100 * N, loss_oscillation.Thresholds(wander_max_points=10**9))
    assert blocks[0] == pytest.approx(exact[0], rel=0.1)  # the stray relative to the level: what the rule compares


@pytest.mark.parametrize("seed", [22, 23])
def test_a_loss_that_wanders_far_and_ends_where_it_began_bounces_even_if_its_second_half_falls(seed):
    # Public log P303 (blind batch 27, missed, then this rule): an LM fine-tune from 10 settles near 6-7,
    # jumps to ~23 for 800 steps, drops back to ~7 and climbs to ~19: 3 % below its start at the end. Its
    # second half "falls" significantly (from the high bouts), which used to excuse the wander.
    finding = _report(loss=_wandering_fine_tune(17.0, seed)).finding("loss-oscillation")
    assert finding.is_problem and "level_wander" in [e.code for e in finding.evidence], finding.message
    # The same bouts in a run that ends at a third of its start made progress: not flagged.
    assert not _report(loss=_wandering_fine_tune(3.0, seed)).finding("loss-oscillation").is_problem


def test_a_val_loss_that_blows_up_orders_of_magnitude_and_recovers_is_a_nonfinite_warning():
    # Public log P283 (blind batch 25, missed, then this rule): YOLOv7 in LR warm-up; the val objectness loss
    # goes 0.04 -> 9.9 -> 90 -> 30 at epochs 5-7 and then back to 0.04, while the train losses stay smooth.
    epochs = np.arange(50, dtype=float)
    train = 0.12 * np.exp(-epochs / 20) + 0.05
    val = 0.13 * np.exp(-epochs / 25) + 0.045
    val[5:8] = [9.9, 90.4, 29.7]
    report = analyze(RunHistory.from_series(REF, {"train/loss": (epochs, train), "val/loss": (epochs, val)}))
    finding = report.finding("nonfinite")
    assert finding.level == "warning" and [e.code for e in finding.evidence] == ["val_loss_blowup"], finding.message
    assert finding.evidence[0].step_start == 6  # the first evaluation 100x the ones before it (9.9 at epoch 5 is ~60x)
    # A val loss that falls by orders of magnitude (public log P29: 1.57 -> 0.0007) starts far above its
    # overall median, and above nothing before it: healthy.
    falling = 1.57 * np.exp(-epochs / 4) + 0.0007
    report = analyze(RunHistory.from_series(REF, {"train/loss": (epochs, train), "val/loss": (epochs, falling)}))
    assert not report.finding("nonfinite").is_problem, report.finding("nonfinite").message


def test_a_loss_that_climbs_an_order_of_magnitude_above_its_start_blew_up_even_without_a_fall_before():
    # Public log P321 (batch 28, missed): a Lightning run whose first logged loss, 0.017, is already its lowest;
    # it climbs to 10.3 within four logs and bounces between ~0.3 and ~10 to the end. With no fall to measure,
    # the learned-first path saw nothing and the run read only as an oscillating loss.
    steps = np.arange(300, dtype=float)
    rng = np.random.default_rng(5)
    loss = np.where(rng.random(300) < 0.5, 0.3 + rng.random(300), 4.5 + 5 * rng.random(300))
    loss[:4] = [0.0173, 0.051, 0.115, 1.60]
    report = analyze(RunHistory.from_series(REF, {"train/loss": (steps, loss)}))
    finding = report.finding("nonfinite")
    assert finding.level == "critical" and finding.evidence[0].code == "loss_above_start", finding.message
    assert "x its start" in finding.message and "nonfinite" in {f.id for f in report.problems}
    # Three times its start is a bad run, not a blow-up; nor is anything said of a loss that crosses zero.
    assert not any(e.code == "loss_above_start" for e in _report(loss=np.r_[np.full(100, 1.0), np.full(900, 3.0)]
                                                                 + _noise(6, 0.05)).finding("nonfinite").evidence)
    crossing = np.r_[np.full(100, 0.1), np.full(900, 5.0)] - np.where(T % 7 == 0, 6.0, 0.0)
    assert not any(e.code == "loss_above_start" for e in _report(loss=crossing).finding("nonfinite").evidence)


def test_a_noisy_per_sample_loss_whose_first_point_is_a_low_draw_did_not_blow_up():
    # Public logs P551, P552 (batch 51, scored once: nonfinite): batch 1, one sample's loss per logged step, from 1e-10 to
    # 26 about a flat median of 0.006; the first logged point, 8e-4, is a low draw. Its level is not 10x a start that
    # noise set: the first point stands for the start only where it is its block's lowest (a blow-up lifts the rest).
    rng = np.random.default_rng(9)
    loss = 0.006 * np.exp(2.0 * rng.standard_normal(N))
    loss[0] = 8e-4
    loss[1:10] = np.maximum(loss[1:10], 1e-3)
    loss[3] = 2e-4  # a lower draw in the first block
    assert not _report(loss=loss).finding("nonfinite").is_problem, _report(loss=loss).finding("nonfinite").message
    # The same level after a first point that everything after it exceeds (P154's blow-up in its second log) blew up.
    blown = np.r_[8e-4, 0.02 * np.exp(0.3 * rng.standard_normal(N - 1))]
    finding = _report(loss=blown).finding("nonfinite")
    assert finding.level == "critical" and finding.evidence[0].code == "loss_above_start", finding.message


def test_a_blow_up_in_the_first_logs_is_measured_against_the_gradient_norms_after_it():
    # Torch run seq2seq_gradient_explosion_noclip (built blind; scored once: loss-oscillation): SGD at lr 30 without
    # clipping, the loss 3.4 -> 1329 by step 87 and ~400-900 after, the gradient norm 4.1e4 at step 11 against ~4
    # after it. The blow-up came before any gradient norm could set a baseline, so the spike is measured against
    # the norms logged after it, at the critical factor (100x) instead of the spike factor (10x).
    finding = _torch_run("seq2seq_gradient_explosion_noclip").finding("nonfinite")
    assert finding.level == "critical", finding.message
    assert [e.code for e in finding.evidence][:2] == ["loss_above_start", "grad_norm_spike_before_divergence"], finding.message
    assert "x its median after the blow-up" in finding.message
    # The same shape in numbers: the loss level held at 200x its start from the third log, the gradient norm at
    # its peak 1000x what it settled to; a peak only 50x what follows is no explosion seen by the norm.
    steps = np.arange(300, dtype=float)
    loss = np.r_[3.4, 3.5, np.full(298, 700.0)] + _noise(8, 1.0)[:300]
    grad = np.r_[0.3, 4000.0, np.full(298, 4.0)] * (1 + 0.05 * np.abs(_noise(9, 1.0)[:300]))
    exploded = analyze(RunHistory.from_series(REF, {"train/loss": (steps, loss), "grad_norm": (steps, grad)}))
    assert exploded.finding("nonfinite").level == "critical", exploded.finding("nonfinite").message
    grad[1] = 200.0
    calm = analyze(RunHistory.from_series(REF, {"train/loss": (steps, loss), "grad_norm": (steps, grad)}))
    assert not any(e.code == "loss_above_start" for e in calm.finding("nonfinite").evidence)
    # A blow-up that did not hold: the torch LR sweep's run at lr 0.3 shot up 227x in its second step and then sat at
    # ln 10 to the end. That loss never learned (loss-oscillation's reading); the norms after it set no baseline for it.
    from evidence.lofo import TORCH

    (sweep,) = read_histories(TORCH / "sweep" / next(e["file"] for e in json.loads((TORCH / "sweep" / "manifest.json").read_text())
                                                  if e["name"] == "sweep_lr0.3_bs128"))
    report = analyze(sweep)
    assert not report.finding("nonfinite").is_problem and report.finding("loss-oscillation").is_problem, report.finding("nonfinite").message


@pytest.mark.parametrize("name, onset", [("distill_gradient_explosion_high_lr", 6.0), ("textcls_gradient_explosion_noclip", 3.0)])
def test_a_blow_up_too_brief_for_a_block_level_that_the_loss_never_recovered_from_is_nonfinite(name, onset):
    # Torch runs labelled nonfinite by their twins (gradient peak 1.5e5x and 3e3x the sane twin's median), read as
    # loss-oscillation before: SGD at lr 6 (distill: loss 14 -> 1.2e7 at step 6, then ~17 to the end) and at lr 10
    # without clipping (textcls: 1.8 -> 69 at step 3, then 4-8). The blow-up lasts a step or two, so no block's
    # median shows it; the gradient norm's peak dwarfs both its first value and what it settled to.
    report = _torch_run(name)
    finding = report.finding("nonfinite")
    assert finding.level == "critical", finding.message
    assert [e.code for e in finding.evidence][:2] == ["loss_spike_early", "grad_norm_spike_before_divergence"]
    assert finding.evidence[1].step_start == onset
    assert report.finding("loss-oscillation").explained_by == "nonfinite"  # one cause, one finding


def test_an_early_loss_spike_is_no_blow_up_when_the_loss_recovers_or_no_norm_shows_the_update():
    steps = np.arange(300, dtype=float)
    settled = 3.0 + 0.05 * _noise(10, 1.0)[:300]
    spiked = np.r_[2.5, 2.6, 500.0, settled[3:]]  # 200x at step 2, then 3.0 (1.2x its start) to the end
    grad = np.r_[1.0, 1.1, 5e4, np.full(297, 1.0)]
    blown = analyze(RunHistory.from_series(REF, {"train/loss": (steps, spiked), "grad_norm": (steps, grad)}))
    assert [e.code for e in blown.finding("nonfinite").evidence][0] == "loss_spike_early"
    # The same spike without a gradient norm: one bad batch as easily (public log P24).
    alone = analyze(RunHistory.from_series(REF, {"train/loss": (steps, spiked)}))
    assert not any(e.code == "loss_spike_early" for e in alone.finding("nonfinite").evidence)
    # A loss that comes back and learns (a bad shard's first spike) was not blown away.
    learned = np.r_[2.5, 2.6, 500.0, 2.4 * np.exp(-steps[3:] / 100) + 0.1]
    recovered = analyze(RunHistory.from_series(REF, {"train/loss": (steps, learned), "grad_norm": (steps, grad)}))
    assert not any(e.code == "loss_spike_early" for e in recovered.finding("nonfinite").evidence)
    # A model that collapsed: the norms after it are tiny, but the peak is only 36x the first norm (ftt_lr_too_high_adam).
    collapsed = np.r_[1.0, 36.0, 5.0, np.full(297, 0.09)]
    dead = analyze(RunHistory.from_series(REF, {"train/loss": (steps, spiked), "grad_norm": (steps, collapsed)}))
    assert not dead.finding("nonfinite").is_problem, dead.finding("nonfinite").message


def test_a_short_log_that_blows_up_and_stays_up_is_nonfinite_point_by_point():
    # Public log P824 (a QLoRA at LR 5e-3 on 6 rows, loss logged 10 times): 0.997, then 4.35, 8.81, 13.5 ... 29.6,
    # too few points for blocks of three. Each point is a level; three in a row at 10x the start is a blow-up.
    steps = np.arange(10, 110, 10, dtype=float)
    loss = np.array([0.9974, 4.346, 8.806, 13.54, 15.66, 15.0, 18.78, 20.83, 25.59, 29.56])
    finding = analyze(RunHistory.from_series(REF, {"train/loss": (steps, loss)})).finding("nonfinite")
    assert finding.level == "critical" and finding.evidence[0].code == "loss_above_start", finding.message
    # A step loss logged 15 times that sits high twice (public log P157's scatter) has not blown up.
    steps = np.arange(15, dtype=float) * 50
    noisy = np.array([499.0, 300, 250, 180, 150, 120, 100, 90, 380, 381, 85, 80, 78, 75, 72])
    assert not analyze(RunHistory.from_series(REF, {"train/loss": (steps, noisy)})).finding("nonfinite").is_problem


def test_a_loss_that_fell_an_order_of_magnitude_within_its_head_is_measured_from_its_first_point():
    # Public log P908 (batch 69's healthy false alarm, scored blind): a DDPM's noise-prediction MSE logged at every
    # one of 106,260 iterations, 1.11 at the first, under 0.05 within a few hundred, then a noisy plateau near 0.019
    # (swings of a third of its level: one t per sample). The first 2 % (2,125 points) has a median of 0.033, so
    # measured from there the loss "improved" 42 % and its batch noise read as instability.
    n = 50_000
    steps = np.arange(1, n + 1, dtype=float)
    rng = np.random.default_rng(11)
    loss = 0.019 + 1.09 * np.exp(-steps / 60) + 0.019 * 0.35 * np.abs(rng.standard_normal(n)) * rng.choice([-1, 1], n)
    report = analyze(RunHistory.from_series(REF, {"loss": (steps, np.maximum(loss, 1e-4))}))
    assert not report.finding("loss-oscillation").is_problem, report.finding("loss-oscillation").message
    # A loss that fell four-fold within its first steps and then sat at chance still never learned.
    flat = np.r_[np.linspace(9.2, 2.31, 20), 2.3026 + 0.01 * rng.standard_normal(n - 20)]
    stuck = analyze(RunHistory.from_series(REF, {"loss": (steps, flat)}))
    assert stuck.finding("loss-oscillation").is_problem, stuck.finding("loss-oscillation").message


def test_a_val_loss_climbing_beside_a_train_loss_that_never_learned_is_not_overfitting():
    # Torch run pointnet_vanishing_sigmoid12 (built blind; scored once: overfitting beside its vanishing gradients):
    # a 12-layer sigmoid stack whose train loss sits at ln 10 throughout, its BatchNorm'd val loss 2.3 -> 12. The
    # train loss fell by a hair in order, so the opposite-trends test passed; it fitted nothing, so nothing overfits.
    report = _torch_run("pointnet_vanishing_sigmoid12")
    assert not report.finding("overfitting").is_problem, report.finding("overfitting").message
    assert "never learned" in report.finding("overfitting").message
    assert report.finding("vanishing-gradients").is_problem
    # The same climb beside a train loss that learned is overfitting.
    val_steps = T[::20]
    val = 0.5 + 0.002 * np.maximum(val_steps - 300, 0)
    learned = analyze(RunHistory.from_series(REF, {"train/loss": (T, 2.3 * np.exp(-T / 150) + 0.01),
                                                   "val/loss": (val_steps, val)}))
    assert learned.finding("overfitting").is_problem


def test_a_loss_that_stops_while_the_training_loop_goes_on_is_not_health(tmp_path):
    # Torch run kan_corrupt_record (built blind; scored once: missed): a NaN feature at step 300, and pandas' to_csv
    # writes the NaN loss and gradient norm as empty cells from there to step 600 while the LR and the step timings go on.
    finding = _torch_run("kan_corrupt_record").finding("nonfinite")
    assert finding.level == "warning" and finding.evidence[0].code == "loss_stopped", finding.message
    assert finding.evidence[0].step_start == 299.0
    # The same as a user's pandas log: a real to_csv of a frame whose loss went NaN.
    import pandas as pd

    steps = np.arange(1, 601)
    loss = np.where(steps < 300, 0.7 * np.exp(-steps / 100) + 0.05, np.nan)
    frame = pd.DataFrame({"step": steps, "loss": loss, "lr": 1e-3, "step_time": 0.01})
    frame.to_csv(tmp_path / "log.csv", index=False)
    assert analyze(read_histories(tmp_path / "log.csv")[0]).finding("nonfinite").is_problem
    # A loss logged to the end, or one beside which only system metrics go on, is not.
    frame.assign(loss=0.7 * np.exp(-steps / 100) + 0.05).to_csv(tmp_path / "whole.csv", index=False)
    assert not analyze(read_histories(tmp_path / "whole.csv")[0]).finding("nonfinite").is_problem
    frame.drop(columns=["lr", "step_time"]).assign(gpu_util=50.0).to_csv(tmp_path / "system.csv", index=False)
    assert not analyze(read_histories(tmp_path / "system.csv")[0]).finding("nonfinite").is_problem


@pytest.mark.parametrize("name", ["moe_twin_fast_loader", "moe_label_noise", "moe_sgdr_restarts", "moe_twin_residual_experts12"])
def test_a_load_balancing_term_at_its_floor_is_no_task_left_behind(name):
    # Torch family moe (built blind; scored once: 0.47, 5 of 20 healthy flagged, task-imbalance on 15 of 35 runs):
    # a Switch router's balance term, 0.01 x a loss whose floor is 1 for an even split, sits at its floor from the
    # first step and rises a little as experts specialise, beside a cross-entropy holding 96-99 % of the sum.
    assert not _torch_run(name).finding("task-imbalance").is_problem


def test_a_load_balancing_term_that_dominates_while_the_task_stalls_is_still_imbalance():
    # moe_balance_coef_too_large: coefficient 100 instead of 0.01; the CE fell 1 % (97 % in the twin).
    finding = _torch_run("moe_balance_coef_too_large").finding("task-imbalance")
    assert finding.is_problem and "loss_ce fell by only" in finding.message, finding.message
    # By name only: a flat term called an auxiliary loss is still a task that is not being trained.
    ce = 2.3 * np.exp(-T / 150) + 0.05 + _noise(3, 0.01)
    flat = 0.0101 + _noise(4, 0.0001)
    assert not _report(loss=ce + flat, loss_ce=ce, loss_balance=flat).finding("task-imbalance").is_problem
    assert _report(loss=ce + flat, loss_ce=ce, loss_aux=flat).finding("task-imbalance").is_problem


def test_a_run_whose_val_and_train_losses_both_lost_their_progress_is_unstable():
    # Torch run moe_batch_too_small (built blind; batch 2 at Adam 0.05): the loss fell 89 % and then swings 137 % of its
    # level; its val loss ended 2.4x its best, its train loss 17 % above its level then. Overfitting rightly refused it
    # (the train loss did not keep falling), and nothing else spoke.
    finding = _torch_run("moe_batch_too_small").finding("loss-oscillation")
    assert finding.is_problem and finding.evidence[0].code == "lost_progress", finding.message
    # In numbers: val 1.0 at its best, 1.8 at the end; the train loss 0.5 then and 0.8 at the end.
    epochs = np.arange(1.0, 41.0)
    train = np.r_[np.linspace(2.0, 0.5, 15), np.full(5, 0.5), np.linspace(0.5, 0.8, 20)] * (1 + 0.01 * np.sin(epochs))
    val = np.r_[np.linspace(2.0, 1.0, 20), np.linspace(1.0, 1.8, 20)]
    lost = analyze(RunHistory.from_series(REF, {"train/loss": (epochs, train), "val/loss": (epochs, val)}))
    assert any(e.code == "lost_progress" for e in lost.finding("loss-oscillation").evidence), lost.finding("loss-oscillation").message
    # The same val rise with the train loss still falling is overfitting's to judge, and with the train loss merely
    # flat (public log P130, healthy) it is not lost progress.
    for after in (np.linspace(0.5, 0.2, 20), np.full(20, 0.5)):
        train = np.r_[np.linspace(2.0, 0.5, 15), np.full(5, 0.5), after] * (1 + 0.01 * np.sin(epochs))
        report = analyze(RunHistory.from_series(REF, {"train/loss": (epochs, train), "val/loss": (epochs, val)}))
        assert not any(e.code == "lost_progress" for e in report.finding("loss-oscillation").evidence)


def _gan(gen, dis, extra=None):
    steps = np.arange(1, len(gen) + 1, dtype=float)
    series = {"loss_gen": (steps, gen), "loss_dis": (steps, dis), **(extra or {})}
    return analyze(RunHistory.from_series(REF, series))


def test_a_healthy_gan_is_not_judged_as_a_descent_but_a_won_discriminator_is_found():
    # Public log P501 (a BEGAN, healthy): the generator's loss rose from 0.009 at its first log to ~0.05 while the
    # discriminator's fell by half; it was called "loss rose: training is not decreasing the loss".
    n = 100
    t = np.arange(n, dtype=float)
    wiggle = 1 + 0.03 * np.resize([1.0, -1.0, 0.5, -0.5], n)
    gen = (0.009 + 0.06 * (1 - np.exp(-t / 5)) - 0.01 * t / n) * wiggle
    dis = (0.1 + 0.2 * np.exp(-t / 20)) * wiggle
    report = _gan(gen, dis)
    for diag_id in ("loss-oscillation", "slow-convergence"):
        finding = report.finding(diag_id)
        assert finding.level == "skipped" and "adversarial pair with loss_dis" in finding.message, finding.message
    assert not report.finding("nonfinite").is_problem
    assert report.status == "unknown"  # nothing judged the loss' course: not `ok`
    # Nor does the scorecard score how fast or how steadily a game's loss fell.
    dims = {d.name: d.score for d in report.dimensions}
    assert dims["convergence_speed"] is None and dims["stability"] is None, dims
    # Public logs P45 and P462: the discriminator's loss falls 1.3 -> 0.1 while the generator's climbs 1.3 -> 6.
    won = _gan((1.3 + 5.0 * t / n) * wiggle, (0.1 + 1.2 * np.exp(-t / 15)) * wiggle).finding("loss-oscillation")
    assert won.level == "warning" and [e.code for e in won.evidence] == ["discriminator_won", "generator_loss_rise"], won.message
    # A NaN in a GAN's loss is still nonfinite.
    broken = gen.copy()
    broken[60:] = np.nan
    assert _gan(broken, dis).finding("nonfinite").level == "critical"


def test_a_loss_that_fell_most_of_the_way_in_a_long_warm_up_is_not_stuck_by_its_noise_after_it():
    # Torch run forecast_onecycle (built blind): one-cycle's LR rises over the first 30 % of the run, in which the
    # normalised MSE falls 0.4 -> 0.008; after it, per-batch noise of +-35 % about ~0.005 read as "stuck near 0.0046,
    # only 44 % below its start, swinging": loss-oscillation on a healthy run. Public log P126 (an ORPO fine-tune) too.
    n = 400
    t = np.arange(n, dtype=float)
    warm = int(0.3 * n)
    lr = np.where(t < warm, 1e-4 + (1e-2 - 1e-4) * t / warm, 1e-2 * (1 - (t - warm) / (n - warm)) + 1e-5)
    noise = 1 + 0.5 * np.resize([1.0, -0.6, 0.2, -1.0, 0.7, -0.3, 0.9, -0.8], n)
    loss = np.where(t < warm, 0.4 * np.exp(-t / 15) + 0.008, 0.008 - 0.003 * (t - warm) / (n - warm)) * noise
    report = analyze(RunHistory.from_series(REF, {"train/loss": (t, loss), "train/lr": (t, lr)}))
    assert report.finding("loss-oscillation").level == "ok", report.finding("loss-oscillation").message
    # The same noisy stretch on its own, without the fall before it, is still stuck.
    tail = loss[warm:]
    alone = analyze(RunHistory.from_series(REF, {"train/loss": (t[warm:], tail), "train/lr": (t[warm:], lr[warm:])}))
    assert alone.finding("loss-oscillation").is_problem, alone.finding("loss-oscillation").message
