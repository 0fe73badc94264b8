"""Loss does not decrease, or oscillates around a plateau it never leaves.

**What it looks for.** After warm-up and before any NaN, the training loss is compared with itself.
Learning: its overall improvement, median of the last 20 % of points against the first 2 %.
Instability, the signature of a learning rate too high or a batch too small: the loss overshot —
in the first tenth of the run it rose to ``blowup`` × its starting level — or, over the second
half, the raw loss swings about its short moving level (median within-window MAD over the moving
level, the seed's "raw loss fluctuation far above its short moving average") by more than
``fluctuation_ratio``. A run that is unstable and improved by less than ``max_improvement`` is
flagged, and so is a run whose loss ends ``rise`` above where it started. A steady slow fall
(``slow-convergence``) and a smooth, flat loss (for example a network whose early layers get no
gradient) are stable and not this fault; a loss that fell far and then flattens is a finished
plateau.

**Why it matters.** The optimizer overshoots (learning rate too high) or the gradient direction is
mostly noise (batch too small); more steps will not help.

**Thresholds.** ``max_improvement`` (0.45: a loss that fell by nearly half is learning),
``blowup`` (3), ``fluctuation_ratio`` (0.3), ``critical_ratio`` (0.6), ``rise`` (0.1), ``window``
(5 points of moving level), ``min_points`` (30).

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
    max_improvement: float = 0.45
    blowup: float = 3.0
    fluctuation_ratio: float = 0.3
    critical_ratio: float = 0.6
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
    tenth = max(5, len(v) // 10)
    overshoot = float(np.max(v[:tenth])) / head
    half = len(v) // 2
    noise, moving = stats.local_noise(v[half:], thresholds.window)
    ratio = noise / moving if moving and np.isfinite(noise) else 0.0

    rising = improvement < -thresholds.rise
    unstable = overshoot >= thresholds.blowup or ratio > thresholds.fluctuation_ratio
    if not (rising or (unstable and improvement < thresholds.max_improvement)):
        return c.ok(_SELF, f"{key} improved {c.fmt(100 * improvement)}%; swings {c.fmt(100 * ratio)}% of its level; "
                           f"early peak {c.fmt(overshoot)}x its start")

    evidence = [
        Evidence(key, improvement, thresholds.max_improvement, float(s[0]), float(s[-1]), "low_improvement",
                 f"loss {c.fmt(head)} at the start, {c.fmt(tail)} at the end"),
        Evidence(key, ratio, thresholds.fluctuation_ratio, float(s[half]), float(s[-1]), "fluctuation_over_level",
                 f"swings of {c.fmt(noise)} about a moving level of {c.fmt(moving)}"),
        Evidence(key, overshoot, thresholds.blowup, float(s[0]), float(s[tenth - 1]), "early_overshoot",
                 "highest loss in the first tenth of the run over its starting level"),
    ]
    val = history.series("val_loss")
    if val is not None and len(val.finite()) >= 4:
        vv = val.finite().values
        vnoise = stats.mad(np.diff(vv)) / (abs(np.median(vv)) or 1e-12)
        evidence.append(Evidence(history.key("val_loss"), float(vnoise), None, float(val.steps[0]), float(val.steps[-1]),
                                 "val_instability", "point-to-point change of val loss relative to its level"))
    if rising:
        message = (f"{key} rose from {c.fmt(head)} to {c.fmt(tail)} between steps {c.fmt_step(s[0])} and {c.fmt_step(s[-1])}: "
                   "training is not decreasing the loss.")
    else:
        how = []
        if overshoot >= thresholds.blowup:
            how.append(f"shot up to {c.fmt(overshoot)}x its starting level early on")
        if ratio > thresholds.fluctuation_ratio:
            how.append(f"swings by {c.fmt(100 * ratio)}% of its level")
        message = (f"{key} is stuck near {c.fmt(tail)}, only {c.fmt(100 * improvement)}% below its start {c.fmt(head)}, and it "
                   f"{' and '.join(how)}: the optimizer is overshooting instead of descending.")
    critical = rising or ratio > thresholds.critical_ratio
    return c.problem(_SELF, critical, message, RECOMMENDATION, evidence)
