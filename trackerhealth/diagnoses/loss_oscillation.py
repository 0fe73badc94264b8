"""Loss does not decrease, or oscillates around a plateau it never leaves.

**What it looks for.** After warm-up and before any NaN, the training loss is compared with itself.
Learning: its overall improvement, median of the last ``tail_share`` of points against the first
``head_share`` (or the first point, when that median is ``early_rise`` × above it: a loss that blew up
in its first steps started there).
Instability, the signature of a learning rate too high or a batch too small: the loss overshot —
in the first ``early_share`` of the run it rose to ``blowup`` × its starting level — or, over the second
half, the raw loss swings about its short moving level (median within-window MAD over the moving
level, the seed's "raw loss fluctuation far above its short moving average") by more than
``fluctuation_ratio``. A run that is unstable and improved by less than ``max_improvement`` is
flagged — unless its only instability was an early overshoot, below ``wreck`` × its start (two orders of
magnitude: past that, the fall is recovery from the blow-up), and its second half still falls
significantly (binned trend t ≤ −``stalled_t``), or it fell ``bounce_max_improvement`` or more from its first logged
level, warm-up included (a long warm-up's fall is learning; the noise after it is about a low level) — and so is a
run whose loss ends ``rise`` above where it started, and one that swings and ends
its second half more than ``late_rise`` above where that half began, by at least ``late_rise_floor``
of the starting level (evidence ``second_half_rise``: it learned, then threw it away). More shapes are this
fault: a loss that bounces without falling — over the second half a short moving median
(``wander_window_share`` of the run) strays from a long one by more than ``wander_ratio`` of the level
while the trend is not falling (t > −``stalled_t``; a fall that only returns towards the start, the run
improving less than ``no_learning`` overall, does not count as falling) and the run improved less than
``bounce_max_improvement`` (evidence ``level_wander``); and a loss that never learned — less than
``no_learning`` below its start at the end (or above it, short of ``rise``; measured from its very first point too
when it fell less than ``first_point_max_improvement`` from its early median: a loss that rose over its first
steps and came back to where it began never learned), its second half falling by less than ``no_learning_tail``
(or by any share when the run has finished and that half moved along no line — a fitted line through
``half_bins`` bin medians with |t| below ``steady_t``: one noisy head's "fall" is no crawl),
no val loss that fell, and no fall of more than ``no_learning`` during warm-up either (a loss that learned
in its warm-up and is flat after it did learn) (evidence ``no_learning``, a warning); and a loss that fell and then froze —
over the second half its 5-95 % range is under ``frozen_range`` of its level, its step-to-step changes
(relative to its level) shrank to ``frozen_noise_drop`` of the first half's or less, and that level is
still ``frozen_min_level`` of its start or more (evidence ``frozen_level``, a warning): minibatch training
always moves the loss from batch to batch, so a loss that stops moving means the model's output stopped
changing (a constant prediction such as the target's mean or the class prior, dead units, an LR at
zero) — unless a val loss evaluated ``min_val_points`` times or more over those steps still moves by
``frozen_range`` of its level (the model is changing; the train loss sits on a floor such as label
smoothing's); and a loss that fell early and then stuck — its val loss ends within ``stuck_val_change`` of its
first evaluations (medians of the first and last fifth, at least ``stuck_val_points``), its second half
is stalled and swings by more than ``stuck_swing`` of its level, and it fell at least
``stuck_min_improvement`` but less than ``bounce_max_improvement`` (evidence ``val_stalled``, a warning):
a batch of 2 or an LR far too high keeps a character LM bouncing near its unigram loss, where a run that
converged early fell most of the way. A quality metric that never scored says the same where the loss cannot: an accuracy, F1 or mAP logged
beside it (role ``quality_metrics``) that is exactly 0 at ``metric_zero_share`` of its ``metric_min_points``-plus
evaluations, the last included, or at one and the same value at every one of them (short of a perfect 1 or 100:
evidence ``metric_constant``, in a finished run: a model whose predictions change moves its accuracy) — or an error
rate (role ``error_metrics``: WER, CER) at one and the same value at every evaluation (short of a perfect 0), while the loss fell less than
``metric_max_half_fall`` over its second half (evidence ``metric_at_zero``, a warning): a loss that fell early and then sat on a plateau reads like one
that converged, but a model that learned anything gets some answers right. A loss whose last ``relapse_parts``-th sits ``relapse`` × (two orders of magnitude) or more above
the lowest median of any later part relapsed, at any scale (evidence ``relapse``, critical): it learned
and then threw it away. A steady slow fall
(``slow-convergence``) and a smooth, flat loss (for example a network whose early layers get no
gradient) are stable and not this fault; a loss that fell far and then flattens is a finished
plateau.

A GAN's generator or discriminator loss (one side of an adversarial pair, :mod:`trackerhealth.adversarial`) is not
judged by any of the above (``skipped``: a generator's loss may rise and a discriminator's sit flat in healthy
training) — except that a discriminator loss ending at ``gan_dis_end`` of its first tenth's level or less beside a
generator loss ending ``gan_gen_rise`` × its first tenth's or more is flagged (evidence ``discriminator_won``, a
warning): the discriminator tells every fake apart and the generator gets no useful gradient.

A training loss judged ``ok`` by all of the above is still flagged when its val loss swings from one
evaluation to the next while the train loss does not: ``val_swing_share`` or more of the consecutive
changes of ``val_swing_min_points``-plus finite evaluations are ``val_swing_factor`` × or more either way (a fall to a new
low excepted: a converging loss may fall that fast), where the train loss's own consecutive changes are not (evidence ``val_loss_swings``, a warning) — the
model as evaluated is unstable, whatever its training curve says. So is one whose val loss ends (the median of its
last ``lost_end_points`` evaluations) ``lost_val_rise`` or more above its best evaluation while the train loss ends
``lost_train_rise`` or more above its level at that evaluation (medians of ``lost_level_points`` points; at least
``lost_min_points`` evaluations; evidence ``lost_progress``, a warning): the run lost what it had learned on its
training data too — not overfitting, which a train loss still falling would show, but updates that undo the
progress (an LR too high, a batch too small) or a blow-up it never recovered from.

A finished run with fewer than ``min_points`` points but at least ``short_min_points`` (a 10–29 epoch
log) is judged on its overall change only: rising or never learned as above, else ``ok`` with a note
that its swings were not judged (its val loss's swings are). A run still in progress (tracker state running) is not: its first
epochs are too early to call.

**Why it matters.** The optimizer overshoots (learning rate too high) or the gradient direction is
mostly noise (batch too small); more steps will not help.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..roles import RoleView
from ..schema import Evidence, Finding
from . import _common as c
from ._real_cases import PUBLIC, TORCH, RealCase
from ._thresholds import knob

ID = "loss-oscillation"
TITLE = "Loss oscillates or does not decrease"
NEEDS = ("train_loss",)
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Lower the learning rate (try 3-10x smaller) or add warm-up and a decay schedule; increase the batch "
    "size or accumulate gradients to reduce gradient noise; if single updates cause the swings, clip gradients."
)

FROZEN_RECOMMENDATION = (
    "Check that the learning rate has not decayed to zero and that gradients reach the weights (log the gradient "
    "norm); a loss pinned at a constant is often a collapsed prediction (the target's mean, the class prior): "
    "normalise inputs and targets, check the initialisation and activations for dead units, and lower the LR if an "
    "early blow-up killed them."
)

VAL_SWINGS_RECOMMENDATION = (
    "Lower the learning rate (or add warm-up) and evaluate on more batches; with BatchNorm, use larger batches or "
    "recompute its running statistics before evaluating (or switch to GroupNorm/LayerNorm); keep the checkpoint "
    "with the best val loss rather than the last."
)

GAN_RECOMMENDATION = (
    "Rebalance the game: lower the discriminator's learning rate or update it less often than the generator (TTUR), "
    "add label smoothing or instance noise, use a spectral-normalised discriminator or a hinge/Wasserstein loss with "
    "a gradient penalty, and check the generator's architecture can reach the data at all."
)

NEVER_SCORED_RECOMMENDATION = (
    "Overfit one small batch first: a model that cannot is broken, not mistuned. A metric at exactly 0 is often a "
    "label or format bug (class ids, box coordinates, padding in the targets), so check that the targets reach the "
    "loss and the metric; then check the learning rate is neither tiny nor huge (a short LR range test)."
)


REAL_CASES = (
    RealCase("transformer_lr_too_high", TORCH, "a character-level transformer trained with AdamW at lr 0.6",
             "rose from 7.76 to 10.1 … The config sets the learning rate to 0.6, high for adamw"),
    RealCase("transformer_batch_too_small", TORCH, "a character-level transformer trained with batch 2 at AdamW lr 0.15",
             "fell early and then stuck: val/loss never improved after its first evaluations … the updates are too noisy"),
    RealCase("P24", PUBLIC, "JohnBBB42/Hidden_Markov_Miracles, a Lightning CSVLogger metrics.csv",
             "train_nll_step is stuck near 0.666, only 1.63% below its start 0.677, and it shot up to 28.8x its starting level early on"),
    RealCase("P214", PUBLIC, "127158017-hue/YOLO_MINIPROJ, an Ultralytics results.csv of a YOLO model trained from scratch at a peak LR of 3e-5",
             "metrics/precision(B) is 0 at 100 of its 100 evaluations, the last included"),
    RealCase("P09-v5", PUBLIC, "DiogoFerreira7/LSTM-Implementation, a Lightning CSVLogger metrics.csv of an LSTM regressing 0/1 targets",
             "train_loss stopped moving: from step 3,049 to 5,999 it stays within 0.0662% of 0.25 (41.9% of its start 0.597)"),
)


@dataclass(frozen=True)
class Thresholds:
    max_improvement: float = knob(0.45, "an unstable loss that improved less than this share is flagged (one that fell by nearly half is learning)")
    blowup: float = knob(3.0, "in the first early_share of the run, a loss this many times its start overshot")
    wreck: float = knob(100.0, "an early overshoot this many times the start threw the weights away: a second half still falling after it is recovery, not progress")
    fluctuation_ratio: float = knob(0.3, "over the second half, swings about the moving level above this share of it are unstable")
    critical_ratio: float = knob(0.6, "critical when the swings exceed this share of the level")
    rise: float = knob(0.1, "a loss that ends this share above its start is rising (critical)")
    late_rise_floor: float = knob(0.05, "and that climb is at least this share of the run's starting level (a converged near-zero loss that doubles is still near zero)")
    early_rise: float = knob(1.5, "a starting median this many times the first point is an early blow-up: the first point is the start")
    early_fall: float = knob(10.0, "a first logged loss this many times the median of the run's first head_share fell within it (a log of every one of 100k iterations): the start is that first point")
    late_rise: float = knob(1.0, "a swinging loss whose second half ends this share above where that half began (1.0: doubled) is not settling")
    window: int = knob(5, "points of the short moving level the swings are measured about")
    min_points: int = knob(30, "finite train-loss points after warm-up needed to judge")
    short_min_points: int = knob(10, "with fewer than min_points but at least this many (a 10-29 epoch log), only the overall change is judged: rose or never learned")
    head_share: float = knob(0.02, "share of the run at the start whose median is the starting level (at least 3 points)")
    tail_share: float = knob(0.2, "share of the run at the end whose median is the end level")
    early_share: float = knob(0.1, "share of the run at the start searched for an overshoot")
    early_min_points: int = knob(5, "points searched for an overshoot at least")
    min_val_points: int = knob(4, "finite val-loss points needed to report the val instability evidence")
    no_learning: float = knob(0.05, "a loss whose end level is less than this share below its start (or above it) never learned (flat from the first step)")
    no_learning_tail: float = knob(0.01, "and whose second half fell by less than this share of its level (a steady crawl is slow-convergence)")
    half_bins: int = knob(15, "bins of the second half whose medians a line is fitted through, to tell a steady crawl from a bump")
    steady_t: float = knob(2.5, "that line moves steadily when the absolute value of its trend t statistic is at least this")
    no_learning_val: float = knob(0.05, "unless its val loss fell by more than this share")
    wander_ratio: float = knob(0.08, "over the second half, a smoothed level wandering about its slow trend by more than this share of it is bouncing")
    wander_window_share: float = knob(0.03, "share of the run a smoothed level is taken over (batch noise averages out, bounces do not)")
    trend_window_share: float = knob(0.25, "share of the run the slow trend is taken over")
    wander_max_points: int = knob(20_000, "cost bound: a longer second half is judged on the medians of at most this many equal blocks")
    wander_over_noise: float = knob(3.0, "and by more than this many times what batch noise alone moves a short median (white noise averages out, bounces do not)")
    bounce_max_improvement: float = knob(0.6, "a bouncing loss that improved more than this share has learned: its swings are about a low level")
    stalled_bins: int = knob(30, "bins of the second half whose medians its trend line is fitted through")
    stalled_t: float = knob(2.0, "the second half is stalled unless its binned trend t statistic is at most -stalled_t")
    frozen_range: float = knob(0.01, "over the second half, a loss whose 5-95 % range is below this share of its level has stopped moving")
    frozen_quantile: float = knob(0.05, "the frozen range runs from this quantile of the second half to its complement (a logged blip does not hide a pinned loss)")
    frozen_noise_drop: float = knob(0.1, "and its step-to-step changes shrank to at most this share of the first half's (it went still; a smooth average stays as smooth)")
    frozen_min_level: float = knob(0.02, "a frozen loss counts while its level is at least this share of its start (one that converged to ~0 is done)")
    relapse: float = knob(100.0, "a loss whose last part's median is this many times its lowest part median (after the first) relapsed")
    relapse_parts: int = knob(10, "parts the run is cut into for the relapse check (the first is left out: it is the fall)")
    stuck_val_change: float = knob(0.02, "a val loss whose last fifth is within this share of its first fifth (either way) never improved after its first evaluations")
    stuck_val_points: int = knob(6, "finite val-loss points needed for that check")
    stuck_val_parts: int = knob(5, "the val loss's first and last 1/this of its evaluations are compared (medians)")
    stuck_swing: float = knob(0.06, "and a train loss whose second half swings about its moving level by more than this share of it is bouncing, not settled")
    stuck_min_improvement: float = knob(0.15, "a stuck loss did fall at first by at least this share (one that never fell is no_learning)")
    metric_min_points: int = knob(5, "finite evaluations a quality metric (accuracy, F1, mAP) needs before its zeros say the model never learned")
    metric_zero_share: float = knob(0.9, "a quality metric exactly 0 at this share of its evaluations (the last included) never scored")
    metric_max_half_fall: float = knob(0.05, "and the loss fell less than this share over its second half: it is not learning (a loss still falling may be slow)")
    val_swing_factor: float = knob(3.0, "a change between consecutive evaluations of the val loss this many times (either way) is a swing")
    val_swing_share: float = knob(0.25, "a val loss swinging at this share of its consecutive evaluations (the train loss not) is unstable")
    val_swing_min_points: int = knob(8, "finite val-loss evaluations needed to judge its swings")
    lost_val_rise: float = knob(0.5, "a val loss ending this share or more above its best evaluation (and ...)")
    lost_train_rise: float = knob(0.15, "(and) a train loss ending this share or more above its level at that evaluation lost its progress")
    lost_end_points: int = knob(2, "evaluations at the end whose median is the val loss's end level")
    lost_level_points: int = knob(5, "train points whose median is the train level at the val loss's best and at the end")
    lost_min_points: int = knob(5, "finite val-loss evaluations needed to judge lost progress")
    gan_parts: int = knob(10, "a GAN's losses are compared over their first and last 1/this (medians)")
    gan_dis_end: float = knob(0.25, "a GAN whose discriminator loss ends at this share of its start or less (and ...)")
    gan_gen_rise: float = knob(2.0, "(and) whose generator loss ends this many times its start or more: the discriminator won")
    first_point_max_improvement: float = knob(0.15, "a loss that fell less than this share from its early median is also measured from its very first point: ending no lower than that first point, it never learned (it rose in its first steps and came back)")


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    adversarial = c.adversarial_skip(_SELF, history)
    if adversarial is not None:
        return _discriminator_won(history, thresholds) or adversarial
    finding = _judge_train_loss(history, thresholds)
    if finding.level != "ok":
        return finding
    return _val_swings(history, thresholds) or _lost_progress(history, thresholds) or finding


def _discriminator_won(history: RoleView, thresholds: Thresholds) -> Finding | None:
    """A GAN whose discriminator won the game: its loss fell to ``gan_dis_end`` of its first tenth's level or less
    while the generator's climbed to ``gan_gen_rise`` times its first tenth's or more (public logs P45 and P462, the
    discriminator's loss 1.3 -> 0.1 while the generator's doubled and more). A discriminator that tells every fake
    apart gives the generator no useful gradient: the pair stopped learning. A healthy pair stays near its balance
    (P463's hinge losses flat; P501's BEGAN discriminator at half its start, its generator easing)."""
    gen_key, dis_key = c.adversarial_pair(history)
    gen, dis = history.history.get(gen_key), history.history.get(dis_key)
    levels = []
    for s in (gen, dis):
        v = c.until_first_nonfinite(s).finite().values if s is not None else np.array([])
        if len(v) < thresholds.short_min_points or (v <= 0).any():
            return None
        part = max(1, len(v) // thresholds.gan_parts)
        levels.append((stats.median(v[:part]), stats.median(v[-part:])))
    (g0, g1), (d0, d1) = levels
    if not (d1 <= thresholds.gan_dis_end * d0 and g1 >= thresholds.gan_gen_rise * g0):
        return None
    evidence = [Evidence(dis_key, d1 / d0, thresholds.gan_dis_end, float(dis.steps[0]), float(dis.steps[-1]), "discriminator_won",
                         f"discriminator loss {c.fmt(d0)} over its first {c.fmt(100 / thresholds.gan_parts)}%, {c.fmt(d1)} over its last"),
                Evidence(gen_key, g1 / g0, thresholds.gan_gen_rise, float(gen.steps[0]), float(gen.steps[-1]), "generator_loss_rise",
                         f"generator loss {c.fmt(g0)} over its first {c.fmt(100 / thresholds.gan_parts)}%, {c.fmt(g1)} over its last")]
    message = (f"the discriminator won: {dis_key} fell from {c.fmt(d0)} to {c.fmt(d1)} while {gen_key} climbed from {c.fmt(g0)} "
               f"to {c.fmt(g1)}. A discriminator that tells every fake apart leaves the generator no useful gradient.")
    return c.problem(_SELF, False, message, GAN_RECOMMENDATION, evidence)


def _val_swings(history: RoleView, thresholds: Thresholds) -> Finding | None:
    """A val loss that jumps ``val_swing_factor`` x or more (either way) at ``val_swing_share`` of its consecutive
    evaluations while the train loss does not: public logs P387 (a captioning model, val 0.84 to 529 while the
    train loss fell smoothly 43 -> 0.46) and P404 (a temporal fusion transformer, val 2.9 to 520). On the other
    labelled public logs no healthy run reaches 6 % of such jumps; a run whose train loss swings as much (P53)
    is the train loss's business. Written after those two runs' blind scores: not held out for them."""
    val, train = history.series("val_loss"), history.series("train_loss")
    if val is None or train is None:
        return None
    val, tv = val.finite(), train.finite().values
    vv = val.values
    if len(vv) < thresholds.val_swing_min_points or (vv <= 0).any() or len(tv) < 2 or (tv <= 0).any():
        return None
    jumps = int(np.count_nonzero(_swings(vv, thresholds.val_swing_factor)))
    val_share = jumps / (len(vv) - 1)
    train_share = float(np.mean(_swings(tv, thresholds.val_swing_factor)))
    if val_share < thresholds.val_swing_share or train_share >= thresholds.val_swing_share:
        return None
    vkey, key = history.key("val_loss"), history.key("train_loss")
    evidence = [Evidence(vkey, val_share, thresholds.val_swing_share, float(val.steps[0]), float(val.steps[-1]),
                         "val_loss_swings", f"{jumps} of {len(vv) - 1} changes between consecutive evaluations are "
                         f"{c.fmt(thresholds.val_swing_factor)}x or more; between {c.fmt(float(vv.min()))} and {c.fmt(float(vv.max()))}")]
    message = (f"{vkey} swings between {c.fmt(float(vv.min()))} and {c.fmt(float(vv.max()))}: {jumps} of its {len(vv) - 1} changes "
               f"from one evaluation to the next are {c.fmt(thresholds.val_swing_factor)}x or more, while {key} does not swing "
               "like that. The model as evaluated is unstable: a learning rate too high for it, BatchNorm statistics "
               "from batches too small, or an evaluation on too few batches.")
    return c.problem(_SELF, False, message, VAL_SWINGS_RECOMMENDATION, evidence)


def _swings(values: np.ndarray, factor: float) -> np.ndarray:
    """Per change between consecutive points: a jump of ``factor`` x or more either way that is not a fall to a new
    low. A loss that falls ``factor`` x from one evaluation to the next while converging is no swing (torch run
    pinn_rare_val, built blind: a PINN's val MSE 9e-3, 5.5e-4, 1.5e-4, ... 1.7e-5, every evaluation its lowest yet)."""
    big = np.abs(np.diff(np.log(values))) >= np.log(factor)
    new_low = values[1:] < np.minimum.accumulate(values)[:-1]
    return big & ~new_low


def _lost_progress(history: RoleView, thresholds: Thresholds) -> Finding | None:
    """A val loss that ends ``lost_val_rise`` above its best while the train loss ends ``lost_train_rise`` above its
    level at that best: both sets lost what the model had learned. Torch run moe_batch_too_small (built blind: batch
    2 at Adam 0.05) swings 137 % of its level after falling 89 %, its val loss ending 2.4x its best and its train
    loss 17 % above its level then, and overfitting rightly refused it (the train loss did not keep falling) — so
    nothing was said. Over the torch corpus and the labelled public logs, every run with a val rise of 50 % and a
    train rise of 15 % after the val best is faulty (LR too high, batch too small, a blow-up, a task swamped; the
    healthy ones with such val rises end with the train loss at or below its level then: P130, P51). Written after
    that run, in-sample for it."""
    val, train = history.series("val_loss"), history.series("train_loss")
    if val is None or train is None:
        return None
    val, train = c.until_first_nonfinite(val).finite(), c.until_first_nonfinite(train).finite()
    if len(val) < thresholds.lost_min_points or (val.values <= 0).any():
        return None
    best = int(np.argmin(val.values))
    best_step, best_value = float(val.steps[best]), float(val.values[best])
    end_value = stats.median(val.values[-thresholds.lost_end_points:])
    before = train.values[train.steps <= best_step]
    after = train.values[train.steps > best_step]
    if len(before) < thresholds.lost_level_points or len(after) < thresholds.lost_level_points:
        return None
    train_then = stats.median(before[-thresholds.lost_level_points:])
    train_end = stats.median(train.values[-thresholds.lost_level_points:])
    if not train_then > 0:
        return None
    val_rise, train_rise = end_value / best_value - 1, train_end / train_then - 1
    if val_rise < thresholds.lost_val_rise or train_rise < thresholds.lost_train_rise:
        return None
    vkey, key = history.key("val_loss"), history.key("train_loss")
    evidence = [Evidence(vkey, val_rise, thresholds.lost_val_rise, best_step, float(val.steps[-1]), "lost_progress",
                         f"val loss {c.fmt(best_value)} at its best, {c.fmt(end_value)} at the end"),
                Evidence(key, train_rise, thresholds.lost_train_rise, best_step, float(train.steps[-1]), "train_loss_rose_after_val_best",
                         f"train loss {c.fmt(train_then)} at the val best, {c.fmt(train_end)} at the end")]
    message = (f"{vkey} ended {c.fmt(100 * val_rise)}% above its best ({c.fmt(best_value)} at step {c.fmt_step(best_step)}), and {key} "
               f"ended {c.fmt(100 * train_rise)}% above its level then: the run lost what it had learned, on its training data "
               "too. Not overfitting (the train loss would have kept falling): the updates undo the progress.")
    return c.problem(_SELF, False, message, RECOMMENDATION, evidence)


def _judge_train_loss(history: RoleView, thresholds: Thresholds) -> Finding:
    loss, reason = c.judged_loss(history, thresholds.min_points)
    if loss is None:
        short, too_short = c.judged_loss(history, thresholds.short_min_points)
        if short is None:
            return c.skipped(_SELF, f"{too_short} ({thresholds.min_points} to judge its swings)")
        return _short_run(history, short, thresholds)
    key = history.key("train_loss")
    v, s = loss.values, loss.steps
    head, tail = c.start_and_end(v, thresholds.head_share, thresholds.tail_share, thresholds.early_rise, thresholds.early_fall)
    if head <= 0:
        return _not_positive(key, head)
    improvement = (head - tail) / head
    tenth = max(thresholds.early_min_points, int(len(v) * thresholds.early_share))
    overshoot = float(np.max(v[:tenth])) / head
    half = len(v) // 2
    noise, moving = stats.local_noise(v[half:], thresholds.window)
    ratio = noise / moving if moving and np.isfinite(noise) else 0.0

    rising = improvement < -thresholds.rise
    unstable = overshoot >= thresholds.blowup or ratio > thresholds.fluctuation_ratio
    wander, wander_z = _wander(v[half:], len(v), thresholds)
    stalled = _stalled(s[half:], v[half:], thresholds)
    # A second half that "falls" only back towards where the run began (improvement under no_learning) is no
    # progress, so it does not excuse the wander (public log P303: an LM fine-tune bouncing 6 -> 23 -> 7 -> 19
    # after its start at 10, 3 % below it at the end).
    bouncing = (wander > thresholds.wander_ratio and wander_z > thresholds.wander_over_noise
                and (stalled or improvement < thresholds.no_learning) and improvement < thresholds.bounce_max_improvement)
    # Flat from the first step and not falling steadily either (a steady crawl is slow-convergence).
    # The second half's fall is measured as a share, not by a t statistic: a nearly noise-free loss
    # creeping towards a constant (a collapsed prediction) is "significant" to any test and still flat.
    # (Its head is a few points, so batch noise moves it by a percent or more: a noisy flat loss may
    # read as crawling. Tried: asking the medians of the half's fifths to agree; that called a slow
    # numpy run never-learned mid-run, which the finished run then called slow: the monitor's alert and
    # the final scan disagreed, so it was dropped.)
    half_fall = _relative_fall(v[half:], thresholds)
    # Signed: a loss that ended a little above its start (short of ``rise``) did not learn either.
    fell = _fall_from_first(v, head, tail, thresholds)
    # A second half that "falls" by more than no_learning_tail from its first few points (a noisy head) but
    # moves along no line is no crawl, in a finished run that fell less than no_learning overall (public logs
    # P354: flat at ~0.0065 for 726 logs, its second half starting on a high stretch; P367: a classifier at
    # ln 2 for 200 epochs). A second half moving along a line is a crawl (slow-convergence's) or a rise, and
    # a run still training has not ended: the monitor's unnormalised-features run is a noisy flat loss for its
    # first 160 logs before it starts its slow fall.
    second_half_flat = half_fall < thresholds.no_learning_tail or (
        not c.still_training(history) and fell < thresholds.no_learning and not _moves_steadily(s[half:], v[half:], thresholds))
    flat = (fell < thresholds.no_learning and second_half_flat
            and not _val_fell(history, thresholds, head) and not _learned_in_warmup(history, thresholds))
    if flat and not (rising or unstable or bouncing):
        start = head if fell == improvement else float(v[0])
        evidence = [Evidence(key, fell, thresholds.no_learning, float(s[0]), float(s[-1]), "no_learning",
                             f"loss {c.fmt(start)} at the start, {c.fmt(tail)} at the end")]
        return c.problem(_SELF, False, _never_learned(key, s, tail, fell), RECOMMENDATION, evidence)
    # A quality metric (accuracy, F1, mAP) at exactly 0 at every evaluation: the model never got one answer
    # right, whatever the loss did early on (a detector at mAP 0 for 100 epochs, public log P214; a reversal
    # task at accuracy 0 on a plateau after its first tenth, P01-s65r1ine); or at one and the same value at
    # every evaluation: its answers never changed (P429, val accuracy 0.72414 for 31 epochs, the majority
    # class). A criterion the loss alone cannot give: a loss that fell and then plateaued reads the same as
    # one that converged.
    if not (rising or unstable or bouncing):
        found = _never_scored(history, key, float(s[half]), float(s[-1]), half_fall, tail, thresholds)
        if found is not None:
            return found
    frozen = _frozen(v[:half], v[half:], head, thresholds)
    if frozen is not None and _val_moved(history, float(s[half]), thresholds):
        # A model whose output stopped changing scores its val set the same at every evaluation. A val loss
        # still moving over the same steps says the model is changing: the train loss sits on a floor (label
        # smoothing, an epoch mean near convergence; public log P314: train 0.447 within 0.5 %, val still
        # falling 0.175 -> 0.164, 6 % over the half).
        frozen = None
    if frozen is not None and not (rising or unstable or bouncing):
        level, spread = frozen
        evidence = [Evidence(key, spread, thresholds.frozen_range, float(s[half]), float(s[-1]), "frozen_level",
                             f"5-95 % range of the loss over the second half relative to its level {c.fmt(level)}; "
                             f"it started at {c.fmt(head)}")]
        message = (f"{key} stopped moving: from step {c.fmt_step(s[half])} to {c.fmt_step(s[-1])} it stays within "
                   f"{c.fmt(100 * spread)}% of {c.fmt(level)} ({c.fmt(100 * level / head)}% of its start {c.fmt(head)}). "
                   "Minibatch training moves the loss from batch to batch; one that does not means the model's output "
                   "stopped changing.")
        return c.problem(_SELF, False, message, FROZEN_RECOMMENDATION, evidence)
    # A loss that learned and then, swinging, ends its second half more than ``late_rise`` above where
    # that half began (1.0: doubled) is not settling: the optimizer is throwing away what it learned.
    # The climb must matter on the run's own scale: a converged loss of 1e-5 that doubles is still ~0.
    h_head, h_tail = stats.head_tail(v[half:], thresholds.head_share, thresholds.tail_share)
    late_rise = (half_fall < -thresholds.late_rise and ratio > thresholds.fluctuation_ratio
                 and h_tail - h_head >= thresholds.late_rise_floor * head)
    # Fell early, then stuck: the val loss never improved after its first evaluations while the train
    # loss, its second half not falling, bounces about a level only part of the way down (batch 2 or an
    # LR far too high: a char-level LM stuck near its unigram loss). A run that converged early and idles
    # fell most of the way (bounce_max_improvement) or is smooth; one whose val rose is overfitting.
    stuck = _stuck(history, thresholds) if (stalled and ratio > thresholds.stuck_swing and
                                            thresholds.stuck_min_improvement <= improvement < thresholds.bounce_max_improvement) else None
    # An unstable loss that improved little is stuck — unless its only instability was an early overshoot
    # and its second half is still falling significantly: public log P124 (a Whisper fine-tune whose
    # first logged average, 0.27, sits below the 0.57 that follows) and P62 fall steadily after a mild
    # overshoot, their val loss with them. A loss that swings is not spared by a trend through its swings,
    # and one that shot up ``wreck`` x its start has had its weights thrown away: its later fall is
    # recovery from the blow-up (torch run mlp_lr_too_high_adam, 1,139x), and it is stuck all the same.
    progressing = not stalled and ratio <= thresholds.fluctuation_ratio and overshoot < thresholds.wreck
    # Measured after warm-up, a loss that fell most of the way during a long warm-up (one-cycle's 30 %: torch run
    # forecast_onecycle, built blind, 0.4 -> 0.008 in it) "improved" little from there, and its batch noise about
    # that low level reads as swings: it learned. Its fall counts from its first logged level.
    learned_early = c.fall_with_warmup(history, thresholds.head_share, thresholds.tail_share,
                                       thresholds.early_rise, thresholds.early_fall) >= thresholds.bounce_max_improvement
    flagged = rising or bouncing or late_rise or (unstable and improvement < thresholds.max_improvement and not progressing
                                                  and not learned_early)
    relapse = _relapse(s, v, thresholds)
    if relapse is not None and not flagged:
        best, best_step, last, times = relapse
        evidence = [Evidence(key, times, thresholds.relapse, best_step, float(s[-1]), "relapse",
                             f"median of the last {c.fmt(100 / thresholds.relapse_parts)}% of the run over the lowest such "
                             f"median after the first ({c.fmt(best)} around step {c.fmt_step(best_step)})")]
        message = (f"{key} relapsed: it had got down to {c.fmt(best)} around step {c.fmt_step(best_step)}, and over the last "
                   f"{c.fmt(100 / thresholds.relapse_parts)}% of the run it sits at {c.fmt(last)}, {c.fmt(times)}x higher: "
                   "the optimizer threw away what it learned.")
        return c.problem(_SELF, True, message, RECOMMENDATION, evidence)
    if stuck is not None and not flagged:
        first, last, change, val_key, v0, v1 = stuck
        evidence = [Evidence(val_key, change, thresholds.stuck_val_change, v0, v1, "val_stalled",
                             f"val loss {c.fmt(first)} over its first fifth of evaluations, {c.fmt(last)} over its last"),
                    Evidence(key, ratio, thresholds.stuck_swing, float(s[half]), float(s[-1]), "fluctuation_over_level",
                             f"swings of {c.fmt(noise)} about a moving level of {c.fmt(moving)}; the second half does not fall")]
        message = (f"{key} fell early and then stuck: {val_key} never improved after its first evaluations "
                   f"({c.fmt(first)} then, {c.fmt(last)} at the end), while {key} bounces by {c.fmt(100 * ratio)}% of its level "
                   f"near {c.fmt(tail)}, only {c.fmt(100 * improvement)}% below its start {c.fmt(head)}: the updates are too noisy "
                   "to make progress (a batch too small or a learning rate too high).")
        return c.problem(_SELF, False, message, RECOMMENDATION, evidence)
    if not flagged:
        return c.ok(_SELF, f"{key} improved {c.fmt(100 * improvement)}%; swings {c.fmt(100 * ratio)}% of its level; "
                           f"early peak {c.fmt(overshoot)}x its start")

    evidence = [
        Evidence(key, improvement, thresholds.max_improvement, float(s[0]), float(s[-1]), "low_improvement",
                 f"loss {c.fmt(head)} at the start, {c.fmt(tail)} at the end"),
        Evidence(key, ratio, thresholds.fluctuation_ratio, float(s[half]), float(s[-1]), "fluctuation_over_level",
                 f"swings of {c.fmt(noise)} about a moving level of {c.fmt(moving)}"),
        Evidence(key, overshoot, thresholds.blowup, float(s[0]), float(s[tenth - 1]), "early_overshoot",
                 "highest loss in the first tenth of the run over its starting level"),
        Evidence(key, wander, thresholds.wander_ratio, float(s[half]), float(s[-1]), "level_wander",
                 f"smoothed loss level wandering about its slow trend, relative to it ({c.fmt(wander_z)}x what batch noise explains)"
                 + ("; the second half does not fall" if stalled else "")),
    ]
    if late_rise:
        evidence.append(Evidence(key, -half_fall, thresholds.late_rise, float(s[half]), float(s[-1]), "second_half_rise",
                                 "rise of the loss over the second half of the run, relative to where that half began"))
    val = history.series("val_loss")
    if val is not None and len(val.finite()) >= thresholds.min_val_points:
        vv = val.finite().values
        vnoise = stats.mad(np.diff(vv)) / (abs(stats.median(vv)) or 1e-12)  # 1e-12: a numeric guard against a zero level
        evidence.append(Evidence(history.key("val_loss"), float(vnoise), None, float(val.steps[0]), float(val.steps[-1]),
                                 "val_instability", "point-to-point change of val loss relative to its level"))
    if rising:
        message = _rose(key, s, head, tail)
    else:
        how = []
        if overshoot >= thresholds.blowup:
            how.append(f"shot up to {c.fmt(overshoot)}x its starting level early on")
        if ratio > thresholds.fluctuation_ratio:
            how.append(f"swings by {c.fmt(100 * ratio)}% of its level")
        if late_rise:
            how.append(f"climbed {c.fmt(-100 * half_fall)}% over the second half of the run")
        if bouncing:
            how.append(f"its smoothed level bounces by {c.fmt(100 * wander)}% without falling over the second half")
        message = (f"{key} is stuck near {c.fmt(tail)}, only {c.fmt(100 * improvement)}% below its start {c.fmt(head)}, and it "
                   f"{' and '.join(how)}: the optimizer is overshooting instead of descending.")
    critical = rising or ratio > thresholds.critical_ratio
    return c.problem(_SELF, critical, message, RECOMMENDATION, evidence)


def _wander(v: np.ndarray, run_points: int, thresholds: Thresholds) -> tuple[float, float]:
    """How far a short moving median of the loss strays from a long one: relative to the level, and
    relative to what white batch noise alone would move a median of that many points.

    Batch noise is averaged out by the short median; a loss bouncing under too high a learning rate
    keeps its excursions, which last many steps. Scale-free: median |short - long| over median |long|;
    the noise is the point-to-point MAD over sqrt(2), shrunk by sqrt(window) for the median.
    """
    short = max(thresholds.window, int(run_points * thresholds.wander_window_share))
    long = max(2 * short + 1, int(run_points * thresholds.trend_window_share))
    if len(v) < long:
        return 0.0, 0.0
    noise = stats.mad(np.diff(v)) / np.sqrt(2 * short)
    smooth, short_window, long_window = v, short, long
    if len(v) > thresholds.wander_max_points and np.isfinite(v).all():
        # Cost bound: two moving medians 3 % and 25 % of a million-step run wide took ~0.4 s (half of the whole
        # analysis of bench/bench_analyze.py's run). Over the medians of equal blocks, with windows of as many blocks as
        # the windows span, the two levels follow the same course; the noise yardstick stays the points' own.
        per_block = -(-len(v) // thresholds.wander_max_points)
        smooth = stats.row_medians(v[: len(v) // per_block * per_block].reshape(-1, per_block))
        short_window = max(1, short // per_block)
        long_window = max(2 * short_window + 1, long // per_block)
    level = stats.rolling_median(smooth, short_window)
    trend = stats.rolling_median(smooth, long_window)
    scale = stats.median(np.abs(trend))
    stray = stats.median(np.abs(level - trend))
    return (stray / scale if scale > 0 else 0.0), (stray / noise if noise > 0 else float("inf"))


def _stalled(s: np.ndarray, v: np.ndarray, thresholds: Thresholds) -> bool:
    """The second half makes no significant progress: its binned trend is not clearly negative."""
    b = stats.binned(s, v, min(thresholds.stalled_bins, len(v)))
    if len(b.median) < thresholds.early_min_points:
        return False
    return bool(stats.trend(b.steps, b.median).t > -thresholds.stalled_t)


def _stuck(history: RoleView, thresholds: Thresholds) -> tuple[float, float, float, str, float, float] | None:
    """(first-fifth median, last-fifth median, relative change, key, first step, last step) of the val loss
    when it ended within ``stuck_val_change`` of where its first evaluations put it, else None. Medians of
    fifths, so one lucky evaluation does not decide; either way, since a val loss that rose is
    overfitting's to judge and one that fell has learned."""
    val = history.series("val_loss")
    if val is None:
        return None
    finite = val.finite()
    if len(finite) < thresholds.stuck_val_points:
        return None
    vv, vs = finite.values, finite.steps
    fifth = max(1, len(vv) // thresholds.stuck_val_parts)
    first, last = stats.median(vv[:fifth]), stats.median(vv[-fifth:])
    if first <= 0:
        return None
    change = (first - last) / first
    if abs(change) >= thresholds.stuck_val_change:
        return None
    return first, last, change, history.key("val_loss"), float(vs[0]), float(vs[-1])


def _relapse(s: np.ndarray, v: np.ndarray, thresholds: Thresholds) -> tuple[float, float, float, float] | None:
    """(lowest part median after the first, its middle step, the last part's median, their ratio) when the
    last part sits ``relapse`` x above that lowest median, else None. Medians of parts, so neither one lucky
    batch nor one bad one decides; a ratio, so it holds for a loss at 1e-6 as for one at 1e3."""
    if len(v) < thresholds.relapse_parts:  # fewer points than parts (judged_loss asks for min_points)
        return None
    parts = stats.binned(s, v, thresholds.relapse_parts)
    low = 1 + int(np.argmin(parts.median[1:]))
    best, last = float(parts.median[low]), float(parts.median[-1])
    if best <= 0 or low == len(parts.median) - 1 or last < thresholds.relapse * best:
        return None
    return best, float(parts.steps[low]), last, last / best


def _frozen(first: np.ndarray, second: np.ndarray, start: float, thresholds: Thresholds) -> tuple[float, float] | None:
    """(level, 5-95 % range over level) of the second half when it has stopped moving, else None.

    A quantile range (``frozen_quantile``), not max - min, so one logged blip does not hide a loss that is
    otherwise pinned. And the loss must have gone still, not been still all along: a loss averaged over
    many batches per logged point (HF's ``logging_steps``, an epoch mean) is smooth in both halves, so its
    step-to-step changes relative to its level must have shrunk ``frozen_noise_drop``-fold or more."""
    level, spread = _level_and_spread(second, thresholds)
    if level <= 0 or level < thresholds.frozen_min_level * start or spread >= thresholds.frozen_range:
        return None
    early_level = abs(stats.median(first))  # each half holds at least min_points / 2 points (judged_loss)
    if early_level == 0:
        return None
    early_noise = stats.mad(np.diff(first)) / early_level
    late_noise = stats.mad(np.diff(second)) / level
    return (level, spread) if late_noise <= thresholds.frozen_noise_drop * early_noise else None


def _level_and_spread(values: np.ndarray, thresholds: Thresholds) -> tuple[float, float]:
    """The median of ``values`` and their ``frozen_quantile`` .. 1 - ``frozen_quantile`` range over it (inf
    when the level is not positive): how far a loss still moves, one logged blip aside."""
    level = stats.median(values)
    low, high = np.quantile(values, [thresholds.frozen_quantile, 1 - thresholds.frozen_quantile])
    return level, (float(high - low) / level if level > 0 else float("inf"))


def _not_positive(key: str, head: float) -> Finding:
    return c.skipped(_SELF, f"{key} is not positive (starts at {c.fmt(head)}); relative change is undefined")


def _rose(key: str, s: np.ndarray, head: float, tail: float) -> str:
    return (f"{key} rose from {c.fmt(head)} to {c.fmt(tail)} between steps {c.fmt_step(s[0])} and {c.fmt_step(s[-1])}: "
            "training is not decreasing the loss.")


def _never_learned(key: str, s: np.ndarray, tail: float, improvement: float) -> str:
    return (f"{key} never learned: it sits at {c.fmt(tail)} from step {c.fmt_step(s[0])} to {c.fmt_step(s[-1])}, within "
            f"{c.fmt(100 * abs(improvement))}% of where it started.")


def _never_scored(history: RoleView, key: str, half_start: float, last_step: float, half_fall: float, tail: float,
                  thresholds: Thresholds) -> Finding | None:
    """The never-learned finding a quality metric (or an error rate) that never scored gives, beside a loss that fell
    less than ``metric_max_half_fall`` over its second half (from ``half_start``); None without one."""
    never_scored = c.never_scored_metric(history, thresholds.metric_min_points, thresholds.metric_zero_share)
    if never_scored is None or half_fall >= thresholds.metric_max_half_fall:
        return None
    if never_scored.constant and c.still_training(history):
        # A run in progress may still break out: an imbalanced classifier often predicts the majority class
        # for its first epochs before it learns. Only a finished run has never changed its answers.
        return None
    m = never_scored
    if m.constant:
        metric_evidence = Evidence(m.key, 1.0, 1.0, m.first_step, m.last_step, "metric_constant",
                                   f"{c.fmt(m.value)} at all {m.points} evaluations, the first and the last included")
        what = (f"{m.key} is {c.fmt(m.value)} at every one of its {m.points} evaluations: its predictions never changed "
                "(a constant answer, such as the majority class or an empty transcript)")
    else:
        metric_evidence = Evidence(m.key, m.zeros / m.points, thresholds.metric_zero_share, m.first_step, m.last_step,
                                   "metric_at_zero", f"{m.zeros} of {m.points} evaluations exactly 0, the last included")
        what = f"{m.key} is 0 at {m.zeros} of its {m.points} evaluations, the last included"
    evidence = [metric_evidence,
                Evidence(key, half_fall, thresholds.metric_max_half_fall, half_start, last_step, "second_half_fall",
                         "fall of the loss over the second half of the run, relative to where that half began")]
    message = (f"{key} never learned: {what}, "
               f"and {key} fell only {c.fmt(100 * half_fall)}% over the second half of the run (to {c.fmt(tail)}). "
               "A model that learned anything gets some answers right.")
    return c.problem(_SELF, False, message, NEVER_SCORED_RECOMMENDATION, evidence)


def _short_run(history: RoleView, loss, thresholds: Thresholds) -> Finding:
    """A run of ``short_min_points`` to ``min_points`` points (a 20-epoch log): too few for swings,
    overshoots or a bending trend, enough for medians of its start and end. A loss that ends above
    where it started, or never got below it, is judged as the full rules judge it; any other is
    ``ok`` with what was not judged said."""
    key, v, s = history.key("train_loss"), loss.values, loss.steps
    if c.still_training(history):
        return c.skipped(_SELF, f"only {len(v)} finite train-loss points of a run still in progress: too early to judge "
                                f"(a finished run is judged from {thresholds.short_min_points}, a live one from {thresholds.min_points})")
    head, tail = c.start_and_end(v, thresholds.head_share, thresholds.tail_share, thresholds.early_rise, thresholds.early_fall)
    if head <= 0:
        return _not_positive(key, head)
    improvement = (head - tail) / head
    evidence = [Evidence(key, improvement, thresholds.no_learning, float(s[0]), float(s[-1]),
                         "low_improvement" if improvement < -thresholds.rise else "no_learning",
                         f"loss {c.fmt(head)} at the start, {c.fmt(tail)} at the end ({len(v)} points)")]
    if improvement < -thresholds.rise:
        return c.problem(_SELF, True, _rose(key, s, head, tail), RECOMMENDATION, evidence)
    if improvement < thresholds.no_learning and not _val_fell(history, thresholds, head) and not _learned_in_warmup(history, thresholds):
        return c.problem(_SELF, False, _never_learned(key, s, tail, improvement), RECOMMENDATION, evidence)
    # A quality metric (or an error rate) that never scored says the model never learned on a short log too (public log
    # P669: 26 loss points of an ASR fine-tune, its WER exactly 1.0 at all six evaluations; slow-convergence leaves it here).
    half = len(v) // 2
    found = _never_scored(history, key, float(s[half]), float(s[-1]), _relative_fall(v[half:], thresholds), tail, thresholds)
    if found is not None:
        return found
    return c.ok(_SELF, f"{key} improved {c.fmt(100 * improvement)}% over its {len(v)} points; with fewer than "
                       f"{thresholds.min_points} only that overall change is judged, not its swings")


def _moves_steadily(s: np.ndarray, v: np.ndarray, thresholds: Thresholds) -> bool:
    """A line through the medians of ``half_bins`` bins rises or falls with |t| ≥ ``steady_t``."""
    if len(v) < thresholds.half_bins:
        return True  # too few points to tell a bump from a trend: the rule that needs it does not apply
    b = stats.binned(s, v, thresholds.half_bins)
    return abs(stats.trend(b.steps, b.median).t) >= thresholds.steady_t


def _relative_fall(v: np.ndarray, thresholds: Thresholds) -> float:
    head, tail = stats.head_tail(v, thresholds.head_share, thresholds.tail_share)
    return float((head - tail) / head) if head > 0 else 0.0


def _fall_from_first(v: np.ndarray, head: float, tail: float, thresholds: Thresholds) -> float:
    """The never-learned rule's measure of the fall: from the starting level, or — when the loss fell less
    than ``first_point_max_improvement`` from it — from the lower of it and the very first point.

    A loss that rose over its first few steps (batch 2 with BatchNorm, SGD at an LR far too high) and
    came back to where it began has a starting median above its first point, yet not ``early_rise``
    above it: measured from that median it "fell" 10 %, measured from its first step it did not move
    (held-out torch family ``resnet``: 2.28 at step 1, 2.33 at the end, ln 10 for ten classes). The
    bound keeps one lucky first minibatch from hiding a run that fell well below its early median."""
    improvement = (head - tail) / head
    first = float(v[0])
    if improvement >= thresholds.first_point_max_improvement or not (0 < first < head):
        return improvement
    return min(improvement, (first - tail) / first)


def _learned_in_warmup(history: RoleView, thresholds: Thresholds) -> bool:
    """The loss fell more than ``no_learning`` from its first logged level, warm-up included: flat
    after warm-up, it had learned already (detectron2's 1,000 warm-up iterations, public log P70)."""
    whole = c.loss_with_warmup(history).values
    head, tail = c.start_and_end(whole, thresholds.head_share, thresholds.tail_share, thresholds.early_rise, thresholds.early_fall)
    return head > 0 and _fall_from_first(whole, head, tail, thresholds) > thresholds.no_learning


def _val_moved(history: RoleView, since: float, thresholds: Thresholds) -> bool:
    """The val loss, evaluated at least ``min_val_points`` times from step ``since`` on, has a 5-95 % range of
    ``frozen_range`` of its level or more there (it did not stop moving with the train loss)."""
    val = history.series("val_loss")
    if val is None:
        return False
    values = val.finite().between(since, np.inf).values
    if len(values) < thresholds.min_val_points:
        return False
    level, spread = _level_and_spread(values, thresholds)
    return bool(level > 0 and spread >= thresholds.frozen_range)


def _val_fell(history: RoleView, thresholds: Thresholds, train_start: float) -> bool:
    """The val loss fell by more than ``no_learning_val`` — to below where the train loss started. A val
    loss that only came down to the train loss's starting level evaluated an untrained model first and then
    the same stuck one (public log P367: train flat at ~0.684 for 200 epochs, val 0.742 -> 0.691 = ln 2)."""
    val = history.series("val_loss")
    if val is None or len(val.finite()) < thresholds.min_val_points:
        return False
    values = val.finite().values
    _, end = stats.head_tail(values, thresholds.head_share, thresholds.tail_share)
    return _relative_fall(values, thresholds) > thresholds.no_learning_val and end < train_start
