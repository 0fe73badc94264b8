"""Loss does not decrease, or oscillates around a plateau it never leaves.

**What it looks for.** After warm-up and before any NaN, the training loss is compared with itself:
its overall improvement (median of the last 20 % of points vs the first 2 %), whether it is still falling
(the last quarter's median at least ``max_tail_drop`` below the third quarter's, with a consistent
downward trend over the second half), and how far the raw loss swings about its short moving level
(median within-window MAD divided by the moving level, as the seed suggests: "raw loss fluctuation
far above its short moving average"). A run is flagged when the loss barely improved overall, is
not falling any more, and swings by more than ``fluctuation_ratio`` of its level; when its best level
was never ``min_progress`` below the start, it shows no steady fall, and in some tenth of the run it swung by
more than ``fluctuation_ratio`` (it never learned, and it was unstable); or when it ends clearly higher than
it started. A loss that fell a long way and then flattens is a finished
plateau, not this fault; a smoothly flat loss is ``slow-convergence``'s business.

**Why it matters.** The optimizer overshoots (learning rate too high) or the gradient direction is
mostly noise (batch too small); more steps will not help.

**Thresholds.** ``max_improvement`` (0.3: a loss that fell by more than 30 % is learning),
``fluctuation_ratio`` (0.15), ``critical_ratio`` (0.5), ``max_tail_drop`` (0.05: the last quarter
sits less than 5 % below the third), ``min_progress`` (0.15), ``rise`` (0.1: ending 10 % above the start is non-decreasing),
``window`` (5 points of moving level), ``min_points`` (30).

**Fix.** Lower the learning rate (try ÷3 to ÷10) or add warm-up and decay; increase the batch size
or accumulate gradients; with Adam, check beta2 and epsilon; clip gradients if the swings come
from rare large updates.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..roles import RoleView
from ..schema import Evidence, Finding
from . import _common as c

ID = "loss-oscillation"
TITLE = "Loss oscillates or does not decrease"
NEEDS = ("train_loss",)
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Lower the learning rate (try 3-10x smaller) or add warm-up and a decay schedule; increase the batch "
    "size or accumulate gradients to reduce gradient noise; if single updates cause the swings, clip gradients."
)


@dataclass(frozen=True)
class Thresholds:
    max_improvement: float = 0.3
    fluctuation_ratio: float = 0.15
    critical_ratio: float = 0.5
    max_tail_drop: float = 0.05
    min_progress: float = 0.15
    rise: float = 0.1
    window: int = 5
    min_points: int = 30


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    loss, reason = c.judged_loss(history, thresholds.min_points)
    if loss is None:
        return c.skipped(_SELF, reason)
    key = history.key("train_loss")
    v, s = loss.values, loss.steps
    head, tail = stats.head_tail(v)
    if head <= 0:
        return c.skipped(_SELF, f"{key} is not positive (starts at {c.fmt(head)}); relative change is undefined")
    improvement = (head - tail) / head
    b = stats.binned(s, v, 50)
    best_improvement = (head - float(np.min(b.median))) / head  # the best level it ever held
    half = len(v) // 2
    tail_drop = stats.quarter_drop(v)
    # Falling means a consistent downward trend, not one lucky quarter of a wildly noisy loss.
    b2 = stats.binned(s[half:], v[half:], 20)
    _, tail_rho = stats.trend(b2.steps, b2.median)
    noise, moving = stats.local_noise(v[half:], thresholds.window)
    ratio = noise / moving if moving and np.isfinite(noise) else 0.0
    peak_ratio = max([ratio] + [_swing(part, thresholds.window) for part in np.array_split(v, 10)])
    _, run_rho = stats.trend(*_twenty_bins(s, v))

    rising = improvement < -thresholds.rise
    not_falling = tail_drop < thresholds.max_tail_drop or tail_rho > -0.5
    # Never learned: its best level stayed near the start, without a steady fall (slow-convergence's
    # business, however small) and with real swings somewhere (a smooth flat loss is not oscillating).
    never_improved = (best_improvement < thresholds.min_progress and run_rho > -0.6
                      and peak_ratio > thresholds.fluctuation_ratio)
    stuck = improvement < thresholds.max_improvement and not_falling and ratio > thresholds.fluctuation_ratio
    if not (rising or never_improved or stuck):
        return c.ok(_SELF, f"{key} improved {c.fmt(100 * improvement)}% with swings of {c.fmt(100 * ratio)}% of its level")

    evidence = [
        Evidence(key, improvement, thresholds.max_improvement, float(s[0]), float(s[-1]), "low_improvement",
                 f"loss {c.fmt(head)} at the start, {c.fmt(tail)} at the end"),
        Evidence(key, ratio, thresholds.fluctuation_ratio, float(s[half]), float(s[-1]), "fluctuation_over_level",
                 f"swings of {c.fmt(noise)} about a moving level of {c.fmt(moving)}"),
    ]
    val = history.series("val_loss")
    if val is not None and len(val.finite()) >= 4:
        vv = val.finite().values
        vnoise = stats.mad(np.diff(vv)) / (abs(np.median(vv)) or 1e-12)
        evidence.append(Evidence(history.key("val_loss"), float(vnoise), None, float(val.steps[0]), float(val.steps[-1]),
                                 "val_instability", "point-to-point change of val loss relative to its level"))
    if rising or never_improved:
        verb = "rose" if rising else "never fell meaningfully:"
        message = (f"{key} {verb} from {c.fmt(head)} to {c.fmt(tail)} (best level only {c.fmt(100 * best_improvement)}% below the start) "
                   f"between steps {c.fmt_step(s[0])} and {c.fmt_step(s[-1])}: training is not decreasing the loss.")
    else:
        message = (f"{key} is stuck near {c.fmt(tail)} (only {c.fmt(100 * improvement)}% below its start {c.fmt(head)}) and swings by "
                   f"{c.fmt(100 * ratio)}% of its level around that plateau (threshold {c.fmt(100 * thresholds.fluctuation_ratio)}%).")
    critical = rising or ratio > thresholds.critical_ratio
    return c.problem(_SELF, critical, message, RECOMMENDATION, evidence)


def _swing(values, window: int) -> float:
    noise, moving = stats.local_noise(values, window)
    return noise / moving if moving and np.isfinite(noise) else 0.0


def _twenty_bins(s, v):
    b = stats.binned(s, v, 20)
    return b.steps, b.median
