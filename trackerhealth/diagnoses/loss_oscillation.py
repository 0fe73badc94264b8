"""Loss does not decrease, or oscillates around a plateau it never leaves.

**What it looks for.** After warm-up and before any NaN, the training loss is compared with itself:
its overall improvement (median of the last 20 % of points vs the first 10 %), its trend over the
second half (Theil-Sen slope), and how far the raw loss swings about its short moving level
(median within-window MAD divided by the moving level, as the seed suggests: "raw loss fluctuation
far above its short moving average"). A run is flagged when the loss barely improved overall, is
not falling any more, and swings by more than ``fluctuation_ratio`` of its level — or when it ends
clearly higher than it started. A loss that fell a long way and then flattens is a finished
plateau, not this fault; a smoothly flat loss is ``slow-convergence``'s business.

**Why it matters.** The optimizer overshoots (learning rate too high) or the gradient direction is
mostly noise (batch too small); more steps will not help.

**Thresholds.** ``max_improvement`` (0.3: a loss that fell by more than 30 % is learning),
``fluctuation_ratio`` (0.15), ``critical_ratio`` (0.5), ``max_tail_drop`` (0.05: the second half
fell by less than 5 % of its level), ``rise`` (0.1: ending 10 % above the start is non-decreasing),
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
    half = len(v) // 2
    slope, _ = stats.trend(s[half:], v[half:])
    tail_level = abs(stats.level(v[half:])) or 1e-12
    tail_drop = -slope * (s[-1] - s[half]) / tail_level
    noise, moving = stats.local_noise(v[half:], thresholds.window)
    ratio = noise / moving if moving and np.isfinite(noise) else 0.0

    rising = improvement < -thresholds.rise
    stuck = improvement < thresholds.max_improvement and tail_drop < thresholds.max_tail_drop
    if not rising and not (stuck and ratio > thresholds.fluctuation_ratio):
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
    if rising:
        message = (f"{key} rose from {c.fmt(head)} to {c.fmt(tail)} ({c.fmt(-100 * improvement)}% higher) between steps "
                   f"{c.fmt_step(s[0])} and {c.fmt_step(s[-1])}: training is not decreasing the loss.")
    else:
        message = (f"{key} is stuck near {c.fmt(tail)} (only {c.fmt(100 * improvement)}% below its start {c.fmt(head)}) and swings by "
                   f"{c.fmt(100 * ratio)}% of its level around that plateau (threshold {c.fmt(100 * thresholds.fluctuation_ratio)}%).")
    critical = rising or ratio > thresholds.critical_ratio
    return c.problem(_SELF, critical, message, RECOMMENDATION, evidence)
