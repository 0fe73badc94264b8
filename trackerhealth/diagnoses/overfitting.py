"""Training loss keeps falling while validation loss rises.

**What it looks for.** The validation loss (lightly smoothed; sparse logging is fine) reached its
best value and then rose by at least ``min_rise`` over at least ``min_rise_points`` evaluations
spanning ``min_rise_steps`` steps (or ``min_rise_share`` of the run, whichever is smaller), while
the training loss kept falling — by at least ``min_train_drop`` since the val minimum — and the
val/train ratio grew to at least ``min_ratio`` (val worse than train, the gap widening). The train
level at the val minimum and at the end is the median of at least ``level_points`` train points
logged there, so one or two lucky batches do not stand for it. Only the
living run is judged: up to the first NaN/Inf loss (or the gradient norm's NaN/Inf that lasts to the
end), without a final val blow-up (divergence: final points above ``val_blowup`` × the earlier
median). At each evaluation the val/train ratio is
computed against the training loss logged since the previous evaluation; the finding is critical
when that ratio ends above ``ratio_critical`` (2.0 in the seed) and is still rising. A smaller rise
(at least ``climb_min_rise``) also counts when it is a steady climb — the val points after the minimum
rank-correlate with time at Kendall's tau ≥ ``climb_min_tau`` over ``climb_min_points`` evaluations —
in a run that has memorised its training set (val/train ratio ≥ ``climb_min_ratio``): noise does not
climb in order for that long. So does one (at least ``climb_min_rise``, over ``climb_min_points``
evaluations, the gap widening) where the two losses move apart in order: after the val minimum the
val loss rises and the train loss falls, each by a one-sided Kendall trend test at p < ``trend_max_p``
(evidence ``val_rises_train_falls``), however little the train loss fell — read from the raw val minimum when it comes
before the smoothed one (a short series' smoothing moves its minimum later). A rise below ``min_rise``
is a warning, never critical. A run whose val loss was already ``climb_min_ratio`` × its train loss at
the val minimum had memorised its training set: its train loss has nowhere left to fall, so there it
need only not rise by more than ``min_train_drop``. Per-layer
weight norms, when logged, are reported: late layers' norms swelling after the val minimum is the
seed's strongest overfitting signal. A run that stops a few evaluations after its best (early
stopping) does not reach these thresholds. A run whose val loss rose ``min_rise`` over enough
evaluations while its train loss sat above its val loss at the minimum (a regularised objective such
as mixup or label smoothing, or an unstable run) is judged by the trends alone: overfitting when the two
moved apart in order (the Kendall tests above, the rise at least ``min_rise``), since the gap between
the two levels says nothing there; otherwise it is not judged (``skipped``, with the rise): `ok` beside a
rising val loss would read as health. So is one
whose train loss goes below zero (gradient ascent in machine unlearning): the val/train ratio is undefined
there. A train loss that never went negative and reached exactly 0 (a memorised training set, as a printed
log rounds it) makes the ratio unbounded, and is judged.

A run whose train loss never fell ``learned_min_fall`` below its start (medians of its first ``learned_head_share``
and last ``learned_tail_share``) fitted nothing and is not overfitting, whatever its val loss does.

Where no total loss was logged and the roles summed the train and the val loss from their terms (Ultralytics YOLO's
box, cls and dfl losses), each val term is also judged so against its train term, when the sum is not: one term can
overfit while the sum barely moves.

**Why it matters.** After the val minimum every step makes the model worse on unseen data.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..roles import RoleView, resolve, tokens
from ..schema import Evidence, Finding, Series
from . import _common as c
from ._real_cases import PUBLIC, TORCH, RealCase
from ._thresholds import knob

ID = "overfitting"
TITLE = "Overfitting: val loss rises while train loss falls"
NEEDS = ("train_loss", "val_loss")
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Keep the checkpoint from the val-loss minimum and add early stopping; add regularization (dropout, "
    "weight decay), data augmentation or more data; or reduce the model size."
)


# The words that name a loss's split, not its term: ``train/cls_loss`` and ``val/cls_loss`` are one term's two sides.
_SPLIT_WORDS = frozenset({"train", "training", "val", "valid", "validation", "eval", "evaluation", "test"})


REAL_CASES = (
    RealCase("mlp_overfit_small_subset", TORCH, "a 4×256 MLP on 60 rows of breast-cancer data, no regularisation",
             "val_loss rose 83% from its best 0.0882 (step 24) to 0.161 while train_loss went 0.0345 → 1.67e-05"),
    RealCase("seqcls_overfit_small_subset", TORCH, "a 256-unit GRU reading 100 digits row by row, no regularisation",
             "val/loss rose 7.44% from its best 0.571 (step 200) to 0.614 … a steady climb (Kendall's tau 0.943 over 20 evaluations) in a run that has memorised its training set."),
    RealCase("P05", PUBLIC, "Merlinmy/Whisper_small_hi, an HF Trainer trainer_state.json (Whisper fine-tuning)",
             "eval_loss rose 47% from its best 0.307 (step 1,000) to 0.452 while loss went 0.035 → 4.00e-04"),
)


@dataclass(frozen=True)
class Thresholds:
    min_rise: float = knob(0.1, "the val loss must end at least this share above its best")
    min_rise_points: int = knob(3, "evaluations after the val minimum needed")
    min_rise_steps: float = knob(500.0, "steps after the val minimum needed (from the seed), unless min_rise_share of the run is fewer")
    min_rise_share: float = knob(0.15, "share of the run after the val minimum that is always enough")
    ratio_critical: float = knob(2.0, "critical when the val/train ratio ends above this and is still rising")
    min_val_points: int = knob(4, "finite val-loss points needed to judge")
    learned_min_fall: float = knob(0.1, "a train loss that fell less than this share from its start over the run never learned: nothing to overfit")
    learned_head_share: float = knob(0.02, "share of the run at the start whose median is the train loss's start (at least 3 points)")
    learned_tail_share: float = knob(0.2, "share of the run at the end whose median is the train loss's end")
    min_train_drop: float = knob(0.3, "the train loss must fall at least this share after the val minimum")
    min_ratio: float = knob(1.2, "the val/train ratio must end at least this high (val worse than train)")
    min_train_points: int = knob(3, "finite train-loss points needed to judge")
    level_points: int = knob(5, "train points whose median is the train level at the val minimum and at the end")
    val_blowup: float = knob(10.0, "final val points above this multiple of the earlier median are divergence, not overfitting, and dropped")
    val_max_points: int = knob(2000, "cost bound: a longer val series is judged on val_bins bin medians")
    val_bins: int = knob(1000, "bins a val series longer than val_max_points is reduced to")
    smooth_window: int = knob(3, "points of the rolling median that lightly smooths the val loss")
    min_smooth_points: int = knob(5, "val points needed before the val loss is smoothed")
    end_points: int = knob(3, "last evaluations whose median is the end level (val, train and ratio)")
    climb_min_rise: float = knob(0.05, "a smaller rise than min_rise counts when it is a steady climb in a memorised run")
    climb_min_tau: float = knob(0.8, "Kendall's tau of the val points after the minimum against time that makes a climb steady")
    climb_min_points: int = knob(8, "evaluations after the val minimum a steady climb needs")
    climb_min_ratio: float = knob(10.0, "val/train ratio at the end that says the training set is memorised")
    trend_max_p: float = knob(0.01, "one-sided Kendall trend test: a val loss rising and a train loss falling after the val minimum, each at p below this, are opposite trends")


def _train_at(train_steps, train_values, val_steps):
    """Training loss level at each evaluation: median of train points since the previous one."""
    idx = np.searchsorted(train_steps, val_steps, side="right")
    out = np.full(len(val_steps), np.nan)
    lo = 0
    for i, hi in enumerate(idx):
        seg = train_values[max(0, min(lo, hi - 1)): hi]
        if len(seg):
            out[i] = stats.median(seg)
        lo = hi
    return out


def _raw_level(train: Series, lo: float, hi: float, centre: float, min_points: int) -> float:
    """Median of the train points logged between steps ``lo`` and ``hi``; where fewer than ``min_points``
    were, of the ``min_points`` logged nearest ``centre``."""
    inside = (train.steps >= lo) & (train.steps <= hi)
    if inside.sum() >= min_points:
        return stats.median(train.values[inside])
    nearest = np.argsort(np.abs(train.steps - centre), kind="stable")[:min_points]
    return stats.median(train.values[nearest])


def _train_level_near(train_at: np.ndarray, best: int) -> float:
    """Training loss around evaluation ``best``; where none was logged yet (an eval every 132 steps
    before the first train log at step 500: public log P267), the first train level after it."""
    around = train_at[max(0, best - 1): best + 2]
    if np.isfinite(around).any():
        return float(np.nanmedian(around))
    later = train_at[best:][np.isfinite(train_at[best:])]
    return float(later[0]) if len(later) else float("nan")


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    missing = c.missing_roles(_SELF, history)
    if missing:
        return missing
    whole = _judge(history, thresholds)
    if whole.is_problem:
        return whole
    # Where no total was logged and both losses are the sums of their terms (Ultralytics YOLO's results.csv: box, cls
    # and dfl, val and train alike), one term can overfit while the sum barely moves: public logs P804 (val seg loss up
    # 25 %, the summed val loss 2.3 %) and P272 (val cls loss up 22 %). Each term is judged against its train term.
    for train_key, val_key in _summed_term_pairs(history):
        term = _judge(resolve(history.history, overrides={"train_loss": train_key, "val_loss": val_key}), thresholds)
        if term.is_problem:
            message = f"{term.message} {val_key} is one term of the summed val loss ({history.key('val_loss')}), whose rise hides it."
            return Finding(term.id, term.level, term.title, message, term.recommendation, term.evidence, term.explained_by)
    return whole


def _summed_term_pairs(history: RoleView) -> list[tuple[str, str]]:
    """(train term, val term) of a train and a val loss that the roles summed from their logged terms (``a+b+c``
    keys), paired by name without their split words (``train/cls_loss`` with ``val/cls_loss``)."""
    train_key, val_key = history.key("train_loss") or "", history.key("val_loss") or ""
    if "+" not in train_key or "+" not in val_key:
        return []

    def bare(key: str) -> tuple[str, ...]:
        return tuple(t for t in tokens(key) if t not in _SPLIT_WORDS)

    train_terms = {bare(k): k for k in train_key.split("+")}
    return [(train_terms[bare(v)], v) for v in val_key.split("+") if bare(v) in train_terms]


def _judge(history: RoleView, thresholds: Thresholds) -> Finding:
    # Judge only the living run: up to the first NaN/Inf loss (or a NaN/Inf gradient norm that lasts to the
    # end), and without a final blow-up (a val loss val_blowup x its earlier level is divergence, the
    # nonfinite diagnosis' business).
    death = _first_nonfinite_step(history)
    train = history.series("train_loss").finite().between(-np.inf, death)
    val = history.series("val_loss").finite().between(-np.inf, death)
    while len(val) > thresholds.min_val_points and val.values[-1] > thresholds.val_blowup * stats.median(val.values[:-1]):
        val = Series(val.steps[:-1], val.values[:-1], val.wall_times[:-1])
    vkey, tkey = history.key("val_loss"), history.key("train_loss")
    if len(val) < thresholds.min_val_points or len(train) < thresholds.min_train_points:
        return c.skipped(_SELF, f"only {len(val)} val-loss points; need {thresholds.min_val_points}")
    if len(val) > thresholds.val_max_points:
        # A val loss logged every step is judged on 1,000 bin medians: same trend, bounded cost.
        b = stats.binned(val.steps, val.values, thresholds.val_bins)
        val = Series(b.steps, b.median, np.full(len(b.steps), np.nan))
    vs = val.values if len(val) < thresholds.min_smooth_points else stats.rolling_median(val.values, thresholds.smooth_window)
    best = int(np.argmin(vs))
    best_val = float(vs[best])
    if best_val <= 0:
        return c.skipped(_SELF, f"{vkey} is not positive; a relative rise is undefined")
    end_val = stats.median(vs[-min(thresholds.end_points, len(vs) - best):]) if best < len(vs) - 1 else best_val
    rise = (end_val - best_val) / best_val
    points_after = len(vs) - 1 - best
    steps_after = float(val.steps[-1] - val.steps[best])
    span = float(max(val.steps[-1], train.steps[-1]) - min(val.steps[0], train.steps[0]))
    need_steps = min(thresholds.min_rise_steps, thresholds.min_rise_share * span)

    train_at = _train_at(train.steps, train.values, val.steps)
    ratio = val.values / np.where(train_at > 0, train_at, np.nan)
    if len(train) and float(np.min(train.values)) >= 0:
        # A train loss that reached exactly 0 (printed logs round a memorised loss to 0.0: public log P349)
        # fits its training set perfectly: the val/train gap is unbounded, not undefined. Only a loss that
        # goes below zero (gradient ascent) leaves the ratio undefined.
        ratio = np.where(train_at == 0, np.inf, ratio)
    # With enough train points, the levels are medians of the raw points logged there (a noisy, sparse train loss is
    # not stood for by one or two of them: public log P382); else the train level at each evaluation stands for it.
    levels_from_points = len(train) >= 2 * thresholds.level_points
    if levels_from_points:
        train_best = _raw_level(train, val.steps[max(0, best - 1)], val.steps[min(len(val) - 1, best + 1)],
                                float(val.steps[best]), thresholds.level_points)
        train_end = _raw_level(train, val.steps[-min(thresholds.end_points, len(val))], np.inf,
                               float(train.steps[-1]), thresholds.level_points)
    else:
        train_best = _train_level_near(train_at, best)
        train_end = float(np.nanmedian(train_at[-min(thresholds.end_points, len(train_at)):]))
    train_drop = (train_best - train_end) / train_best if train_best > 0 else 0.0
    if levels_from_points and train_best > 0 and train_end > 0:
        ratio_best, ratio_end = float(val.values[best]) / train_best, end_val / train_end
    else:
        end_ratios = ratio[-min(thresholds.end_points, len(ratio)):]
        # NaN when the train loss is not positive there (gradient ascent in machine unlearning drives it below
        # zero, public log P18): the ratio is undefined, which the verdict below says rather than `ok`.
        ratio_end = float(np.nanmedian(end_ratios)) if (~np.isnan(end_ratios)).any() else float("nan")
        ratio_best = float(ratio[best]) if np.isfinite(ratio[best]) else float("nan")
    gap_growing = ratio_end >= thresholds.min_ratio and not (ratio_end <= ratio_best)

    long_enough = points_after >= thresholds.min_rise_points and steps_after >= need_steps
    # A run whose val loss was already climb_min_ratio x its train loss at the val minimum had memorised
    # its training set: its train loss has nowhere left to fall, so it need not keep falling.
    memorised = np.isfinite(ratio_best) and ratio_best >= thresholds.climb_min_ratio and train_end <= train_best * (1 + thresholds.min_train_drop)
    trained_on = (train_drop >= thresholds.min_train_drop or memorised) and gap_growing
    # A Kendall test of the val points after the minimum: its tau makes a steady climb.
    climb = _trend(val.values[best:]) if points_after >= thresholds.climb_min_points else None
    climb_tau = float(climb.statistic) if climb is not None else float("nan")
    # The opposite trends below are read from the raw minimum when it comes first: smoothing a short val series
    # can move its minimum a few evaluations later (public log P512: 0.521 at epoch 5, the smoothed minimum at
    # epoch 8), and a climb read from there is too short to test though the raw points rise in order from epoch 5.
    trend_from = min(best, int(np.argmin(val.values)))
    trend_points = len(val.values) - 1 - trend_from
    val_trend = (climb if trend_from == best else _trend(val.values[trend_from:])) if trend_points >= thresholds.climb_min_points else None
    steady_climb = (rise >= thresholds.climb_min_rise and climb_tau >= thresholds.climb_min_tau
                    and ratio_end >= thresholds.climb_min_ratio)
    # Opposite trends: after the val minimum the val loss climbs in order while the train loss falls in
    # order, each a one-sided Kendall trend test at p < trend_max_p over climb_min_points evaluations.
    # Noise does not climb in order for that long; a rise of a few percent that does, beside a train loss
    # still falling, is the textbook pattern even when neither moved far (public logs P206, P255: 6-7 %).
    train_trend = _trend(train_at[trend_from:]) if val_trend is not None else None
    trends_apart = (val_trend is not None and train_trend is not None and rise >= thresholds.climb_min_rise
                    and val_trend.statistic > 0 and val_trend.pvalue / 2 < thresholds.trend_max_p
                    and train_trend.statistic < 0 and train_trend.pvalue / 2 < thresholds.trend_max_p)
    opposite = trends_apart and gap_growing
    # A train loss above the val loss at the minimum (a regularised objective: mixup, label smoothing, dropout) makes the
    # val/train gap meaningless, but not the trends: a val loss that rose by min_rise, in order, while the train loss
    # fell in order is overfitting whatever the two levels (public logs P20, P301, P521: a diffusion model's val loss
    # up 85 % while its train loss, above it throughout, kept falling).
    incomparable = bool(np.isfinite(ratio_best) and 0 < ratio_best < 1)
    apart_above = incomparable and trends_apart and rise >= thresholds.min_rise
    by_pattern = trained_on and (rise >= thresholds.min_rise or steady_climb)
    overfit = long_enough and (by_pattern or opposite or apart_above)
    start, end = stats.head_tail(train.values, thresholds.learned_head_share, thresholds.learned_tail_share) if overfit else (0.0, 0.0)
    if start > 0 and (start - end) / start < thresholds.learned_min_fall:
        # A train loss that never fell from where it began fitted nothing, so there is nothing to overfit: a val loss
        # climbing beside it is the evaluated model coming apart (torch run pointnet_vanishing_sigmoid12, built blind:
        # a 12-layer sigmoid stack at ln 10 throughout, its BatchNorm'd val loss 2.3 -> 12). loss-oscillation judges a
        # run that never learned.
        return c.ok(_SELF, f"{vkey} rose {c.fmt(100 * rise)}% from its best, but {tkey} never learned ({c.fmt(start)} at the "
                           f"start, {c.fmt(end)} at the end): there is nothing to overfit")
    if not overfit:
        message = f"{vkey} ends {c.fmt(100 * rise)}% above its best ({c.fmt(best_val)} at step {c.fmt_step(val.steps[best])})"
        if rise >= thresholds.min_rise and long_enough and incomparable:
            # The train loss sat above the val loss at the val minimum: a regularised objective (mixup,
            # label smoothing, heavy dropout) or an unstable run, whose level says nothing of how well the
            # training set is fitted. The pattern cannot be judged, and a confident `ok` beside a rising
            # val loss would read as health (torch family mixup: its overfitting run on 50 digits; public
            # log P198). Which of the two it is, the other diagnoses say.
            return c.skipped(_SELF, f"{message}, but {tkey} sat above {vkey} at that minimum (val/train "
                                    f"{c.fmt(ratio_best)}): a training loss above the val loss (a regularised "
                                    "objective such as mixup or label smoothing, or an unstable run) cannot be "
                                    "compared with it, so overfitting is not judged; keep the checkpoint from the "
                                    "val minimum.")
        if rise >= thresholds.min_rise and long_enough and np.isnan(ratio_end):
            return c.skipped(_SELF, f"{message}, but {tkey} is not positive over the last evaluations, so the val/train "
                                    "ratio the check compares is undefined: overfitting is not judged; keep the checkpoint "
                                    "from the val minimum.")
        if rise >= thresholds.min_rise:
            # A rise this large that is still `ok` must say which part of the pattern is missing, or the
            # verdict reads as a contradiction (public log P20: val 75% above its best, train flat).
            message += "; not overfitting: " + _missing_part(
                thresholds, tkey, long_enough=long_enough, points_after=points_after, steps_after=steps_after,
                need_steps=need_steps, train_drop=train_drop, memorised=memorised, ratio_end=ratio_end, ratio_best=ratio_best)
        return c.ok(_SELF, message)

    ratio_rising = np.isfinite(ratio_best) and ratio_end > ratio_best
    evidence = [
        Evidence(vkey, rise, thresholds.min_rise, float(val.steps[best]), float(val.steps[-1]), "val_loss_rise",
                 f"best {c.fmt(best_val)} at step {c.fmt_step(val.steps[best])}, {c.fmt(end_val)} at the end ({points_after} evaluations later)"),
    ]
    by_trend = (opposite or apart_above) and not by_pattern
    if by_trend:
        evidence.append(Evidence(vkey, val_trend.pvalue / 2, thresholds.trend_max_p, float(val.steps[trend_from]), float(val.steps[-1]),
                                 "val_rises_train_falls",
                                 f"after the val minimum, over {trend_points} evaluations, the val loss rose in order (Kendall's tau "
                                 f"{c.fmt(val_trend.statistic)}, one-sided p {c.fmt(val_trend.pvalue / 2)}) while the train loss fell "
                                 f"in order (tau {c.fmt(train_trend.statistic)}, p {c.fmt(train_trend.pvalue / 2)})"))
    elif rise < thresholds.min_rise:
        evidence.append(Evidence(vkey, climb_tau, thresholds.climb_min_tau, float(val.steps[best]), float(val.steps[-1]), "val_loss_steady_climb",
                                 f"a small rise, but steady: Kendall's tau {c.fmt(climb_tau)} over the {points_after} evaluations after the minimum, "
                                 f"with the val loss {c.fmt(ratio_end)}x the train loss (the training set is memorised)"))
    evidence += [
        Evidence(tkey, train_end, train_best, float(val.steps[best]), float(val.steps[-1]), "train_loss_keeps_falling",
                 f"train loss {c.fmt(train_best)} at the val minimum, {c.fmt(train_end)} at the end"),
        Evidence(f"{vkey} / {tkey}", ratio_end, thresholds.ratio_critical, float(val.steps[best]), float(val.steps[-1]),
                 "val_train_ratio", f"ratio {c.fmt(ratio_best)} at the val minimum, {c.fmt(ratio_end)} at the end"),
    ]
    layers = history.group("layer_weight_norms")
    if layers:
        label, wkey, w = layers[-1]
        at_best = w.values[np.searchsorted(w.steps, val.steps[best], side="right") - 1] if w.steps[0] <= val.steps[best] else w.values[0]
        growth = float(w.values[-1] / at_best) if at_best else float("nan")
        evidence.append(Evidence(wkey, growth, None, float(val.steps[best]), float(w.steps[-1]), "late_layer_weight_growth",
                                 f"last layer's weight norm grew {c.fmt(growth)}x after the val minimum"))
    # A rise of a few percent, however orderly, is a warning: the checkpoint at the minimum is barely better.
    critical = ratio_rising and ratio_end > thresholds.ratio_critical and rise >= thresholds.min_rise
    message = (f"{vkey} rose {c.fmt(100 * rise)}% from its best {c.fmt(best_val)} (step {c.fmt_step(val.steps[best])}) to {c.fmt(end_val)} "
               f"while {tkey} went {c.fmt(train_best)} → {c.fmt(train_end)}; "
               + (f"val/train ratio now {c.fmt(ratio_end)}." if np.isfinite(ratio_end) else "the train loss reached 0, the training set memorised."))
    if by_trend:
        message += (f" The val loss rose in order while the train loss fell in order over the {points_after} evaluations "
                    "since the minimum (opposite trends, each significant).")
        if apart_above and not opposite:
            message += (" The train loss sits above the val loss (a regularised objective such as mixup or label smoothing), "
                        "so the gap between them says nothing; the trends do.")
    elif rise < thresholds.min_rise:
        message += (f" A small rise, but a steady climb (Kendall's tau {c.fmt(climb_tau)} over {points_after} evaluations) "
                    "in a run that has memorised its training set.")
    return c.problem(_SELF, critical, message, RECOMMENDATION, evidence)


def _missing_part(thresholds: Thresholds, tkey: str, *, long_enough: bool, points_after: int, steps_after: float,
                  need_steps: float, train_drop: float, memorised: bool, ratio_end: float, ratio_best: float) -> str:
    """Why a val loss that rose by ``min_rise`` or more is not called overfitting: the first part of
    the pattern (enough evaluations after the minimum, a train loss still falling, a widening gap)
    that the run lacks, in the words a user can check against the curves."""
    if not long_enough:
        return (f"only {points_after} evaluations and {c.fmt_step(steps_after)} steps after the minimum "
                f"(needs {thresholds.min_rise_points} and {c.fmt_step(need_steps)}: it may be early stopping's patience)")
    if train_drop < thresholds.min_train_drop and not memorised:
        moved = f"rose {c.fmt(-100 * train_drop)}%" if train_drop < 0 else f"fell {c.fmt(100 * train_drop)}%"
        return (f"{tkey} {moved} after the val minimum, and the check asks a fall of {c.fmt(100 * thresholds.min_train_drop)}% "
                "before it calls a val rise overfitting (a val loss that rises while the train loss does not keep "
                "falling may be a shift between the train and val data, or an unstable run)")
    return (f"the val/train ratio ends at {c.fmt(ratio_end)} (needs {c.fmt(thresholds.min_ratio)} and a rise from "
            f"{c.fmt(ratio_best)} at the val minimum): val is not pulling away from train")


def _trend(values: np.ndarray):
    """Kendall's tau of ``values`` (NaN dropped) against their order (1.0: a climb with no step back), with its
    two-sided p-value; None when fewer than two values or a constant series leave no order to test (kendalltau
    would warn and give NaN)."""
    from scipy.stats import kendalltau  # imported here: scipy.stats costs most of a second to load

    values = values[np.isfinite(values)]
    if len(values) < 2 or np.ptp(values) == 0:
        return None
    return kendalltau(np.arange(len(values)), values)


def _first_nonfinite_step(history: RoleView) -> float:
    """The step at which the run died, else +inf.

    A loss's first NaN/Inf ends the run. A gradient norm's NaN/Inf ends it only where the non-finite
    norms run to the end: a mixed-precision loss scaler that overflows once (at epoch 0, say) and
    goes on with finite norms and a finite loss has not died, and cutting there would leave nothing
    to judge.
    """
    steps = [np.inf]
    for role in ("train_loss", "val_loss"):
        s = history.series(role)
        if s is not None:
            bad = np.flatnonzero(~np.isfinite(s.values))
            if len(bad):
                steps.append(float(s.steps[bad[0]]) - 1e-9)  # a numeric tolerance: just before the bad step
    grad = history.series("grad_norm")
    if grad is not None and len(grad) and not np.isfinite(grad.values[-1]):
        finite = np.flatnonzero(np.isfinite(grad.values))
        first_of_tail = finite[-1] + 1 if len(finite) else 0  # the trailing run of NaN/Inf norms begins here
        steps.append(float(grad.steps[first_of_tail]) - 1e-9)  # a numeric tolerance: just before the bad step
    return min(steps)
