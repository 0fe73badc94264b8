"""Loss falls, but so slowly that the run will not get anywhere.

**What it looks for.** A loss that ends ``rose`` above where it began is not slow (it blew up:
``loss-oscillation``). After warm-up, before any NaN, and past the first ``settle_share`` of the run (where a
run settles), a straight line is fitted through the medians of ``bins`` bins of the training loss
(medians shrug off heavy-tailed batch noise). The loss is falling steadily when that line's slope
is significantly negative (t ≤ −``min_t``) and still negative over the second half
(t ≤ −``min_t_tail``: a finished plateau is not slow) — or when the validation loss, measured on a
fixed set and so nearly noise-free, falls with t ≤ −``min_val_t``. It is slow when the fitted fall
over the run (of the val loss too, when logged) is below ``max_improvement`` — unless the loss fell
``fast_start`` of its first level (the first bin's median, or the median of its first three logged points
when higher: a fall within the first few logs hides inside one bin) or more within the first tenth (warm-up included): a working descent,
now on its plateau (an LLM fine-tune creeping towards its floor). The evidence gives
the improvement and a projection: how many more runs of this length it would take to halve the
loss at the current rate (critical beyond ``critical_runs_to_halve``; beyond ``stalled_runs_to_halve`` the
loss is not converging at all — a classifier pinned at ln K creeps towards it — and ``loss-oscillation``'s
never-learned rule names it, so this is ``ok``; so is a loss beside a quality metric that is exactly 0 at every
evaluation (or one and the same value at every one) and that fell less than ``metric_max_half_fall`` over its second half: loss-oscillation's never-scored case). A second shape is noted
(evidence ``back_loaded_fall`` on an ``ok`` finding): a fall whose first half took at least ``back_loaded``
of the run (a steady crawl that never bends, or a long plateau before a late drop, as a too-small
init gives), still falling over the second half, calm (swings below ``max_swing`` of the level) and
smaller than ``back_loaded_max_improvement`` of the start, with no val loss that bent early (half of its
fall within the first ``val_bent_early`` of its evaluations: generalisation converged, the train loss is fitting
the training set) — after warm-up, and from the first logged
level too (a loss that fell most of the way during its warm-up made its progress early), and only when the first
tenth of the run (warm-up included) fell less than ``back_loaded_first_tenth`` of its first level: a too-low LR,
a huge Adam epsilon or a tiny init slows a run from its first steps, where a model with a long learning horizon
(a convolutional character LM learning longer contexts, held-out family ``conv``) drops at once and then falls
steadily. This second shape is a note (``ok`` with that evidence), never a tag: held out, it read the healthy runs of
five blind torch families as slow (stopped mid-descent, or a loss that can fall only a little above its floor), and
one curve cannot tell them from a slow run; against its group's baseline (below) the run is measured instead. Where the
run's logged config names a setting that slows every step (an Adam epsilon or an LR that ``config_facts`` calls a slow
run's likely cause), the note becomes a warning: the shape and the cause agree (``config_facts.promote``). The
first shape is not slow when the val loss has settled
(at least ``settled_val_points`` evaluations; over the second half its fitted line moves less than
``settled_val_change`` of its level either way, with a trend t above −``settled_val_t``): the model stopped
improving on held-out data, and a train loss creeping down beside it is fitting the training set.

A GAN's generator or discriminator loss is not judged (``skipped``: its course is a game, not a descent).
A finished run is judged from ``short_min_points`` finite train-loss points after warm-up (a 20-epoch Keras
or Lightning per-epoch log: each point an epoch's mean, so a line through them is not batch noise); a run
still training waits for ``min_points``, its first epochs being too early to call slow.

**Against its group.** A run analysed with its group (``--group-by``, a W&B group, an MLflow parent
run) is first measured against the group's baseline: the steps it took to reach the baseline's loss
at ``baseline_share`` of the baseline's fall. At least ``slower_than_baseline`` times the baseline's
steps — or that long without reaching it — is slow (counted in samples when both configs give a
batch size and they differ: a batch-4 step sees an eighth of a batch-32 step's data) (evidence ``slower_than_baseline``, and
``wall_time_vs_baseline`` when both runs log wall time); sooner is not slow, whatever the shape
rules above say, when the baseline is healthy on its own (keeping up with a baseline that has
problems of its own vouches for nothing). A run that stopped before that many steps, ended less than ``baseline_min_fall`` below
its start (its first point when it blew up at once; never learned: loss-oscillation's case), swings, or starts more than ``comparable_start``
times above or below the baseline's start (another scale) is judged by the rules above.

**Why it matters.** Typical causes are an initialization that is too small (activations saturate),
unnormalized input features, or an optimizer set up too timidly (a tiny learning rate, a huge Adam
epsilon). The run burns compute for a model that is barely better than its start.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..baseline import comparable, curve, per_step, reaches
from ..roles import RoleView
from ..schema import OK, WARNING, Evidence, Finding
from . import _common as c
from ._real_cases import TORCH, RealCase
from ._thresholds import knob

ID = "slow-convergence"
TITLE = "Extremely slow convergence"
NEEDS = ("train_loss",)
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Normalize input features; use a standard initialization (He for ReLU, Xavier for tanh) and add "
    "Batch/LayerNorm; raise the learning rate (run an LR range test); with Adam keep epsilon near 1e-8."
)


# The evidence code of the back-loaded note (an ``ok`` finding): the shape alone is no verdict.
BACK_LOADED = "back_loaded_fall"


# The evidence code of a loss still falling over its second half, on an ``ok`` finding or the back-loaded note.
STILL_FALLING = "still_falling"


def is_back_loaded_note(finding: Finding) -> bool:
    return finding.id == ID and finding.level == OK and any(e.code == BACK_LOADED for e in finding.evidence)


def is_still_falling_note(finding: Finding) -> bool:
    """An ``ok`` finding whose loss is still falling significantly at the end (the back-loaded note included)."""
    return finding.id == ID and finding.level == OK and any(e.code == STILL_FALLING for e in finding.evidence)


def slowed_by_epsilon(note: Finding) -> Finding:
    """The ``ok`` finding of a loss still falling at its end as a warning, for a run whose logged Adam epsilon is so
    large that every update is divided by it (``config_facts.promote`` decides when). The fall need not look slow:
    with such an epsilon Adam steps like plain SGD at a tiny LR, so whatever the run reached, a sane epsilon reaches
    sooner, and the loss still falling says the run has not got there. Corroboration adds the config's evidence."""
    falling = next(e for e in note.evidence if e.code == STILL_FALLING)
    message = (f"{falling.metric} is still falling at the end of the run (trend t={c.fmt(falling.observed)} over its second half) and "
               "the logged config sets an Adam epsilon that outweighs the gradients' scale, which slows every step.")
    return Finding(ID, WARNING, note.title, message, RECOMMENDATION, note.evidence, note.explained_by)


def confirmed_by_config(note: Finding) -> Finding:
    """The back-loaded note as a warning, for a run whose logged config names a setting that slows every step
    (``config_facts.promote`` decides when). The shape alone cannot tell a slow run from one stopped mid-descent;
    a shape and a cause that agree can. The config's own sentences and evidence are added by corroboration."""
    shape = next(e for e in note.evidence if e.code == BACK_LOADED)
    message = (f"{shape.metric} falls at an almost constant rate instead of bending — {shape.detail} — and is still "
               "falling at the end; the logged config names a setting that slows every step.")
    return Finding(ID, WARNING, note.title, message, RECOMMENDATION, note.evidence, note.explained_by)


REAL_CASES = (
    RealCase("multitask_digits_lr_too_low", TORCH, "a two-head net trained with Adam at lr 1e-5",
             "fell only 0.817% in 261 steps … The config sets the learning rate to 1e-05, very small for adam"),
    RealCase("transformer_adam_eps_one", TORCH, "a small transformer with Adam epsilon 1.0 (a typo for 1e-8)",
             "fell only 5.26% in 262 steps … is still falling steadily"),
)


@dataclass(frozen=True)
class Thresholds:
    max_improvement: float = knob(0.15, "a fitted fall below this share of the starting loss is small")
    min_t: float = knob(2.5, "the binned loss falls steadily when its trend t statistic is at most -min_t")
    min_t_tail: float = knob(1.0, "and its second half's t statistic is at most -min_t_tail (a finished plateau is not slow)")
    min_val_t: float = knob(10.0, "or the val loss falls with a trend t statistic of at most -min_val_t")
    bins: int = knob(30, "bins of the train loss whose medians the line is fitted through")
    critical_runs_to_halve: float = knob(20.0, "critical when halving the loss at the end-of-run slope takes more runs than this")
    min_runs_to_halve: float = knob(4.0, "ok when the loss would halve within this many more runs of this length")
    metric_min_points: int = knob(5, "loss-oscillation's never-scored case, with its defaults: a quality metric's finite evaluations needed")
    metric_zero_share: float = knob(0.9, "loss-oscillation's never-scored case: share of those evaluations exactly 0 (the last included)")
    metric_max_half_fall: float = knob(0.05, "loss-oscillation's never-scored case: the loss fell less than this share over its second half")
    stalled_runs_to_halve: float = knob(200.0, "beyond this many runs to halve, the loss is not converging at all, slowly or otherwise: loss-oscillation's never-learned case")
    min_points: int = knob(30, "finite train-loss points after warm-up needed to judge a run still training")
    short_min_points: int = knob(10, "a finished run is judged from this many (a 10-29 epoch per-epoch log)")
    head_share: float = knob(0.02, "share of the run at the start whose median is the starting level (at least 3 points)")
    tail_share: float = knob(0.2, "share of the run at the end whose median is the end level")
    rose: float = knob(0.1, "a loss whose end level is this share above its start rose (loss-oscillation's rise): not slow")
    early_rise: float = knob(1.5, "a starting median this many times the first point is an early blow-up: the first point is the start")
    early_fall: float = knob(10.0, "a first logged loss this many times the median of the run's first head_share fell within it (a log of every one of 100k iterations): the start is that first point")
    settle_share: float = knob(0.1, "share at the start where a run settles, left out of the fit")
    min_bins: int = knob(6, "bins left after the settling share needed to fit a line")
    min_val_points: int = knob(5, "finite val-loss points needed to fit the val line")
    settled_val_points: int = knob(10, "finite val-loss points needed to call the val loss settled over the second half")
    settled_val_change: float = knob(0.005, "a val loss whose fitted line moves less than this share over the second half (either way) and does not fall significantly has settled")
    settled_val_t: float = knob(2.0, "not significantly: that line's trend t statistic is above -settled_val_t")
    back_loaded: float = knob(0.25, "a fall whose first half took more than this share of the run is back-loaded (a note, never a tag): a healthy loss usually bends early")
    back_loaded_first_tenth: float = knob(0.05, "a back-loaded fall is noted only when the first tenth (warm-up included) fell less than this share of the first level: what makes a run slow slows it from the start")
    val_bent_early: float = knob(0.15, "a back-loaded train loss is not noted when the val loss covered half of its fall within this share of its evaluations (generalisation converged early; the train loss is fitting the training set)")
    back_loaded_max_improvement: float = knob(0.65, "a back-loaded fall larger than this share of the start (two thirds) is real progress, late or not: not noted")
    max_swing: float = knob(0.2, "a back-loaded fall counts only when the second half swings by less than this share of its level (a bouncing loss is loss-oscillation)")
    swing_window: int = knob(5, "points of the short moving level those swings are measured about")
    line_max_points: int = knob(4000, "cost bound: a longer series is fitted through line_bins bin medians instead")
    line_bins: int = knob(2000, "bins a series longer than line_max_points is reduced to before the fit")
    slower_than_baseline: float = knob(4.0, "with a group baseline: needing this many times the baseline's steps to reach its loss level is slow")
    baseline_share: float = knob(0.5, "that level: the baseline's starting loss minus this share of its fall")
    comparable_start: float = knob(10.0, "a run starting more than this many times above or below the baseline's start is on another scale: not compared")
    baseline_min_fall: float = knob(0.05, "a run whose loss fell less than this share of its start never learned (loss-oscillation's case), not slowly")
    fast_start: float = knob(0.2, "a loss that fell this share of its first level within the first tenth (warm-up included) descends at a working pace: a small later fall is its plateau, not slowness")


def _line(s: np.ndarray, v: np.ndarray, thresholds: Thresholds):
    """Least-squares line through the loss: slope, its t statistic, and the fitted start and end."""
    if len(v) > thresholds.line_max_points:  # a line through 2,000 bin medians is the same line, at bounded cost
        b = stats.binned(s, v, thresholds.line_bins)
        s, v = b.steps, b.median
    fit = stats.trend(s, v)
    return fit.slope, fit.t, fit.intercept + fit.slope * s[0], fit.intercept + fit.slope * s[-1]


def _val_line(history: RoleView, death: float, thresholds: Thresholds):
    """The val loss' fitted line (a fixed evaluation set: its fall is nearly noise-free), or None."""
    val = history.series("val_loss")
    if val is None:
        return None
    val = val.finite().between(-np.inf, death)
    if len(val) < thresholds.min_val_points:
        return None
    return _line(val.steps, val.values, thresholds)


def _val_settled(history: RoleView, death: float, thresholds: Thresholds) -> tuple[float, float, int] | None:
    """(relative fall of the fitted line, its t statistic, evaluations) of the val loss's second half when
    it has settled — moved less than ``settled_val_change`` either way and not fallen significantly (t above
    -``settled_val_t``) — else None."""
    val = history.series("val_loss")
    if val is None:
        return None
    val = val.finite().between(-np.inf, death)
    if len(val) < thresholds.settled_val_points:
        return None
    half = len(val) // 2
    _, t_val, start, end = _line(val.steps[half:], val.values[half:], thresholds)
    if start <= 0:
        return None
    change = (start - end) / start
    if abs(change) < thresholds.settled_val_change and t_val > -thresholds.settled_val_t:
        return change, t_val, len(val)
    return None


def _half_fall_share(loss, thresholds: Thresholds) -> tuple[float, float]:
    """Share of the run it took the loss (its lowest binned level so far) to cover half its total fall,
    and that fall as a share of the start. A healthy loss bends early (a small share); a loss crawling
    down at a constant rate, or sitting on a plateau before a late drop, takes half the run or more."""
    steps, level, start = _running_low(loss, thresholds)
    end = float(level[-1])
    fall = start - end
    if not (start > 0 and fall > 0) or len(level) < thresholds.min_bins:
        return 0.0, 0.0
    span = steps[-1] - steps[0]
    half_at = steps[int(np.argmax(start - level >= fall / 2))]
    return float((half_at - steps[0]) / span) if span > 0 else 0.0, fall / start


def _running_low(loss, thresholds: Thresholds) -> tuple[np.ndarray, np.ndarray, float]:
    """The bins' middle steps, the lowest bin median reached so far at each (a bounce back up does not
    undo progress, one lucky batch does not make it), and the first bin's median (the start)."""
    b = stats.binned(loss.steps, loss.values, thresholds.bins)
    return b.steps, np.minimum.accumulate(b.median), float(b.median[0])


def _first_tenth_fall(history: RoleView, thresholds: Thresholds) -> float:
    """How far the loss (its lowest binned level so far) fell within the first ``settle_share`` of the
    run, warm-up included, as a share of its first level. What makes a run slow — a learning rate too
    low, a tiny init, raw features, a huge Adam epsilon — slows the descent from the start; a loss that
    fell a fifth of the way in its first tenth and then creeps is on its plateau: language-model
    fine-tunes whose loss settles near the text's entropy (public logs P49 and P77, the torch corpus'
    warm-up + cosine transformer) were called slow for that creep."""
    whole = c.loss_with_warmup(history)
    if len(whole) < thresholds.min_bins:
        return 0.0
    _, level, start = _running_low(whole, thresholds)
    # A fall inside the first bin is invisible to its median: Mask R-CNN's loss goes 47 -> 2 in its first five
    # of 3,000 logs (public log P178, a bin of 100). The median of the first three logged points is the start
    # too when higher (three, so that one odd first point does not make it).
    start = max(start, stats.median(whole.values[:3]))
    cut = max(1, int(np.ceil(thresholds.settle_share * len(level))) - 1)
    return (start - float(level[cut])) / start if start > 0 else 0.0


def _val_bent_early(history: RoleView, death: float, thresholds: Thresholds) -> bool:
    """The val loss (a fixed set: nearly noise-free) covered half of its fall within the first
    ``val_bent_early`` of its evaluations: the model's generalisation converged early, and a training loss
    still falling steadily after it is fitting the training set, not crawling (public log P124, a
    Whisper fine-tune whose eval loss flattened at mid-run while its train loss kept falling)."""
    val = history.series("val_loss")
    if val is None:
        return False
    val = val.finite().between(-np.inf, death)
    if len(val) < thresholds.min_val_points:
        return False
    share, fall = _half_fall_share(val, thresholds)
    return fall > 0 and share < thresholds.val_bent_early


def _calm(loss, thresholds: Thresholds) -> bool:
    """The second half swings by less than ``max_swing`` of its moving level (a bouncing loss is loss-oscillation's)."""
    noise, moving = stats.local_noise(loss.values[len(loss) // 2:], thresholds.swing_window)
    return bool(moving and np.isfinite(noise) and noise / moving < thresholds.max_swing)


def _against_baseline(history: RoleView, loss, thresholds: Thresholds) -> Finding | None:
    """The verdict of the group's baseline, or None when there is none or it cannot decide: the
    run took at least ``slower_than_baseline`` times the baseline's steps to reach the baseline's
    level (or has run that long without reaching it) — slow; it reached it sooner — not slow. A run
    that never learned, or swings (loss-oscillation's cases), or stopped too early to tell, is left
    to the single-run rule."""
    cohort = history.cohort
    if cohort is None or cohort.baseline is None or cohort.baseline.loss is None or cohort.is_baseline(history.ref.id):
        return None
    mine = curve(history.series("train_loss"))
    if mine is None or not comparable(mine, cohort.baseline.loss, thresholds.comparable_start):
        return None  # too short, or another scale (loss weights, units): the baseline's levels mean nothing here
    scale = per_step(cohort.batch_size, cohort.baseline.batch_size)
    got = reaches(mine, cohort.baseline.loss, (thresholds.baseline_share,), scale)
    if not got:
        return None
    r, base, key = got[0], cohort.baseline, history.key("train_loss")
    than = f"the group's baseline {base.name} ({cohort.label}, {cohort.size} runs)"
    if r.reached and r.ratio < thresholds.slower_than_baseline:
        if base.status != OK:
            # Keeping up with a baseline that has problems of its own (no run of the group is healthy)
            # vouches for nothing: the run is judged on its own curve.
            return None
        return c.ok(_SELF, f"{key} reached {c.fmt(r.level)} (half of {than}'s fall) in {c.fmt(r.ratio)}x the baseline's steps: "
                           "not slow for this group")
    if r.ratio < thresholds.slower_than_baseline:
        return None  # not reached, but the run stopped before 4x the baseline's steps: too early to say
    # From where it started (its first point when it blew up within its first bin, as the single-run
    # rules take it) to where it ended, not the lowest it dipped: SGD at an LR far too high (held-out
    # torch family resnet) rises in its first steps, then bounces at its very first level, dipping below
    # it now and then, and never learned.
    start = c.start_level(history.series("train_loss").values, mine.start, thresholds.early_rise, thresholds.early_fall)
    fell = (start - mine.final) / start if start > 0 else 0.0
    if fell < thresholds.baseline_min_fall or not _calm(loss, thresholds):
        return None
    detail = (f"loss {c.fmt(r.level)}: the baseline {base.name} got there in {c.fmt_step(r.baseline_steps)} steps, this run "
              + (f"in {c.fmt_step(r.steps)}" if r.reached else f"not in {c.fmt_step(mine.length)}")
              + (f"; counted in samples (batch {cohort.batch_size} against {base.batch_size})" if scale != 1 else ""))
    evidence = [Evidence(key, r.ratio, thresholds.slower_than_baseline, mine.first_step, mine.steps[-1], "slower_than_baseline", detail)]
    if r.reached and np.isfinite(r.seconds) and np.isfinite(r.baseline_seconds) and r.baseline_seconds > 0:
        evidence.append(Evidence(key, r.seconds / r.baseline_seconds, None, mine.first_step, mine.first_step + r.steps,
                                 "wall_time_vs_baseline", f"{c.fmt(r.seconds)} s against the baseline's {c.fmt(r.baseline_seconds)} s"))
    unit = "steps" if scale == 1 else f"samples (batch {cohort.batch_size} against {base.batch_size})"
    if r.reached:
        message = (f"{key} took {c.fmt(r.ratio)}x the {unit} of {than} to reach {c.fmt(r.level)}, half of the baseline's fall "
                   f"({c.fmt_step(r.steps)} steps against {c.fmt_step(r.baseline_steps)}).")
    else:
        message = (f"{key} has not reached {c.fmt(r.level)}, half of the fall of {than}, in its {c.fmt_step(mine.length)} steps: "
                   f"more than {c.fmt(r.ratio)}x the {unit} the baseline needed ({c.fmt_step(r.baseline_steps)} steps).")
    return c.problem(_SELF, False, message, RECOMMENDATION, evidence)


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    adversarial = c.adversarial_skip(_SELF, history)
    if adversarial is not None:
        return adversarial
    # A finished 10-29 epoch log (Keras CSVLogger's one row per epoch: public log P483, a 20-epoch crawl 1.39 ->
    # 1.18 that never bends) is judged like a longer one; a live run's first epochs are too early to call.
    needed = thresholds.min_points if c.still_training(history) else thresholds.short_min_points
    loss, reason = c.judged_loss(history, needed)
    if loss is None:
        return c.skipped(_SELF, reason)
    key = history.key("train_loss")
    # A loss that ends clearly above where it began (its first point after an early blow-up) is not
    # converging, slowly or otherwise: it blew up, which loss-oscillation reports as rising.
    start, tail = c.start_and_end(loss.values, thresholds.head_share, thresholds.tail_share, thresholds.early_rise, thresholds.early_fall)
    if tail > start * (1 + thresholds.rose):
        return c.ok(_SELF, f"{key} rose overall ({c.fmt(start)} at the start, {c.fmt(tail)} at the end): "
                           "not a slow fall (see loss-oscillation)")
    # A quality metric at exactly 0 throughout beside a loss that barely moves over its second half: the
    # model never learned, which loss-oscillation names (its never-scored case, the same knobs and
    # defaults); a crawl it may show is not a slow descent towards anything (public log P214: mAP 0 for
    # 100 epochs while the summed loss crept 7% down).
    never_scored = c.never_scored_metric(history, thresholds.metric_min_points, thresholds.metric_zero_share)
    if never_scored is not None:
        values = loss.values[len(loss) // 2:]
        h_head, h_tail = stats.head_tail(values, thresholds.head_share, thresholds.tail_share)
        half_fall = (h_head - h_tail) / h_head if h_head > 0 else 0.0
        if half_fall < thresholds.metric_max_half_fall:
            at = c.fmt(never_scored.value) if never_scored.constant else "0"
            return c.ok(_SELF, f"{never_scored.key} is {at} at {never_scored.zeros} of its {never_scored.points} evaluations and {key} "
                               f"fell only {c.fmt(100 * half_fall)}% over its second half: not a slow descent, the model never "
                               "learned (loss-oscillation judges it)")
    # With its group's baseline at hand, the group says what "slow" means for this model on this data.
    against = _against_baseline(history, loss, thresholds)
    if against is not None:
        return against
    # The first tenth is where a run settles (a blow-up, a fast first drop); the question is how
    # the loss behaves after that. Medians of 30 bins shrug off heavy-tailed batch noise.
    skip = int(len(loss) * thresholds.settle_share)
    b = stats.binned(loss.steps[skip:], loss.values[skip:], thresholds.bins)
    s, v = b.steps, b.median
    if len(v) < thresholds.min_bins:
        return c.skipped(_SELF, f"only {len(v)} train-loss bins after the first tenth; need {thresholds.min_bins}")
    slope, t_all, start_fit, end_fit = _line(s, v, thresholds)
    half = len(v) // 2
    _, t_tail, _, _ = _line(s[half:], v[half:], thresholds)
    if start_fit <= 0:
        return c.skipped(_SELF, f"{key} is not positive; relative change is undefined")
    improvement = (start_fit - end_fit) / start_fit
    span = s[-1] - s[0]
    val_line = _val_line(history, float(loss.steps[-1]), thresholds)
    val_improvement = (val_line[2] - val_line[3]) / val_line[2] if val_line and val_line[2] > 0 else None

    half_share, total_fall = _half_fall_share(loss, thresholds)
    still_falling = t_tail <= -thresholds.min_t_tail
    back_shape = (half_share >= thresholds.back_loaded and still_falling and _calm(loss, thresholds)
                  and 0 < total_fall < thresholds.back_loaded_max_improvement
                  and c.fall_with_warmup(history, thresholds.head_share, thresholds.tail_share, thresholds.early_rise, thresholds.early_fall) < thresholds.back_loaded_max_improvement)
    small_fall = 0 < improvement < thresholds.max_improvement and (val_improvement is None or val_improvement < thresholds.max_improvement)
    # Both shapes are spared by a fast first tenth (each with its own bound); measured once, and only when asked.
    first_tenth = _first_tenth_fall(history, thresholds) if (back_shape or small_fall) else 0.0
    back_loaded = back_shape and first_tenth < thresholds.back_loaded_first_tenth and not _val_bent_early(history, float(loss.steps[-1]), thresholds)
    small = small_fall and first_tenth < thresholds.fast_start
    train_falls = t_all <= -thresholds.min_t and t_tail <= -thresholds.min_t_tail
    val_falls = val_line is not None and val_line[1] <= -thresholds.min_val_t
    # The val loss settled: over the second half its fitted line moves less than settled_val_change of its
    # level and does not fall significantly. The model has stopped improving on held-out data, so a train
    # loss creeping down beside it is fitting the training set, not converging slowly (public logs P218,
    # P224, P231: converged per-epoch plateaus; a too-low LR or a huge Adam epsilon lowers the val loss
    # with the train loss, by 0.5 % to 11 % over the second half in every torch family).
    if back_loaded or ((train_falls or val_falls) and small):
        settled = _val_settled(history, float(loss.steps[-1]), thresholds)
        if settled is not None:
            change, t_val, points = settled
            return c.ok(_SELF, f"{key} still creeps down, but {history.key('val_loss')} has settled: over the second half of its "
                               f"{points} evaluations its fitted line moved {c.fmt(100 * change)}% (t={c.fmt(t_val)}). "
                               "The model stopped improving on held-out data: converged, not slow.")
    if back_loaded and not ((train_falls or val_falls) and small):
        evidence = [
            Evidence(key, half_share, thresholds.back_loaded, float(loss.steps[0]), float(loss.steps[-1]), BACK_LOADED,
                     f"half of the loss' fall ({c.fmt(100 * total_fall)}% of its start) took {c.fmt(100 * half_share)}% of the run"),
            Evidence(key, t_tail, -thresholds.min_t_tail, float(s[half]), float(s[-1]), STILL_FALLING,
                     "trend t statistic of the binned loss over its second half"),
        ]
        # A note, not a finding: the shape alone does not tell a slow run from a healthy one stopped mid-descent or
        # one whose loss can fall only a little above its floor. Held out, the healthy runs of five blind torch families
        # read so (textcls 9 of 14, flow 3 of 17, simclr, vae, distill): 16 of 333 healthy runs tagged, the shape's
        # precision about a third. Against its group's baseline (above) the same run is measured, not guessed; a logged
        # config that names a slowing setting makes it a warning (config_facts.promote, after every diagnosis ran).
        message = (f"{key} falls at an almost constant rate instead of bending: half of its fall of {c.fmt(100 * total_fall)}% took "
                   f"{c.fmt(100 * half_share)}% of the run, and it is still falling at the end. That shape alone does not tell "
                   "a slow run (an LR too low, a huge Adam epsilon) from one stopped mid-descent: analyse it with its group "
                   "(--group-by) to measure it against a baseline, or compare a run at a higher learning rate.")
        return c.ok(_SELF, message, tuple(evidence))
    if not ((train_falls or val_falls) and small):
        # A loss still falling significantly over its second half keeps that fact as evidence: alone it is no verdict
        # (a healthy run stopped mid-descent), but beside a config whose Adam epsilon swamps every update it is one
        # (config_facts.promote).
        # Significantly so (min_t, not the weaker min_t_tail): pure noise about a settled level passes t <= -1 one time in six.
        unfinished = () if t_tail > -thresholds.min_t else (
            Evidence(key, t_tail, -thresholds.min_t, float(s[half]), float(s[-1]), STILL_FALLING,
                     "trend t statistic of the binned loss over its second half"),)
        return c.ok(_SELF, f"{key} fitted improvement {c.fmt(100 * improvement)}% after the first tenth (trend t={c.fmt(t_all)}); "
                           f"half of its fall took {c.fmt(100 * half_share)}% of the run", unfinished)

    # At the end-of-run slope, how many runs of this length to reach half the current loss? A
    # loss that would halve within a few more such runs (a language model's power law) is slow
    # but not extremely so.
    runs_to_halve = (0.5 * end_fit) / (-slope * span) if slope < 0 and span > 0 else float("inf")
    if runs_to_halve < thresholds.min_runs_to_halve:
        return c.ok(_SELF, f"{key} fell {c.fmt(100 * improvement)}% but would halve within {c.fmt(runs_to_halve)} more runs of this length")
    # A creep that would need hundreds of runs to halve the loss is not a slow descent: the loss has
    # stopped (a classifier pinned at ln K, predicting the uniform distribution, creeps towards it by a
    # few 1e-5 per step). A trend test calls that "falling steadily"; loss-oscillation's never-learned
    # rule is the one that names it (public logs P93-a and P94-a, torch runs with Adam eps 1 and an LR
    # 100x too low: 336-1018 runs to halve; the slow runs of every corpus need 140 or fewer).
    if runs_to_halve > thresholds.stalled_runs_to_halve:
        return c.ok(_SELF, f"{key} moved only {c.fmt(100 * improvement)}% after the first tenth: at that rate halving it takes "
                           f"{c.fmt(runs_to_halve)} more runs of this length, so it is not converging at all "
                           "(loss-oscillation judges a loss that never learned)")
    evidence = [
        Evidence(key, improvement, thresholds.max_improvement, float(s[0]), float(s[-1]), "small_improvement",
                 f"fitted loss {c.fmt(start_fit)} → {c.fmt(end_fit)} after the first tenth of the run"),
        Evidence(key, t_all, -thresholds.min_t, float(s[0]), float(s[-1]), "steady_fall",
                 f"trend t statistic of the binned loss; {c.fmt(t_tail)} over its second half"),
        Evidence(key, runs_to_halve, thresholds.critical_runs_to_halve, float(s[half]), float(s[-1]), "runs_to_halve",
                 f"slope {c.fmt(slope)} per step"),
    ]
    if val_line is not None:
        evidence.append(Evidence(history.key("val_loss"), val_line[1], -thresholds.min_val_t, None, None, "val_steady_fall",
                                 f"val loss {c.fmt(val_line[2])} → {c.fmt(val_line[3])} (fitted), trend t statistic"))
    message = (f"{key} fell only {c.fmt(100 * improvement)}% in {c.fmt_step(span)} steps ({c.fmt(start_fit)} → {c.fmt(end_fit)}) and is still "
               f"falling steadily: at this rate halving it takes about {c.fmt(runs_to_halve)} more runs of this length.")
    return c.problem(_SELF, runs_to_halve > thresholds.critical_runs_to_halve, message, RECOMMENDATION, evidence)
