"""Loss does not decrease, or oscillates around a plateau it never leaves.

**What it looks for.** After warm-up and before any NaN, the training loss is compared with itself.
Learning: its overall improvement, median of the last ``tail_share`` of points against the first
``head_share``.
Instability, the signature of a learning rate too high or a batch too small: the loss overshot —
in the first ``early_share`` of the run it rose to ``blowup`` × its starting level — or, over the second
half, the raw loss swings about its short moving level (median within-window MAD over the moving
level, the seed's "raw loss fluctuation far above its short moving average") by more than
``fluctuation_ratio``. A run that is unstable and improved by less than ``max_improvement`` is
flagged, and so is a run whose loss ends ``rise`` above where it started. A steady slow fall
(``slow-convergence``) and a smooth, flat loss (for example a network whose early layers get no
gradient) are stable and not this fault; a loss that fell far and then flattens is a finished
plateau.

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
from ._thresholds import knob

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
    max_improvement: float = knob(0.45, "an unstable loss that improved less than this share is flagged (one that fell by nearly half is learning)")
    blowup: float = knob(3.0, "in the first early_share of the run, a loss this many times its start overshot")
    fluctuation_ratio: float = knob(0.3, "over the second half, swings about the moving level above this share of it are unstable")
    critical_ratio: float = knob(0.6, "critical when the swings exceed this share of the level")
    rise: float = knob(0.1, "a loss that ends this share above its start is rising (critical)")
    window: int = knob(5, "points of the short moving level the swings are measured about")
    min_points: int = knob(30, "finite train-loss points after warm-up needed to judge")
    head_share: float = knob(0.02, "share of the run at the start whose median is the starting level (at least 3 points)")
    tail_share: float = knob(0.2, "share of the run at the end whose median is the end level")
    early_share: float = knob(0.1, "share of the run at the start searched for an overshoot")
    early_min_points: int = knob(5, "points searched for an overshoot at least")
    min_val_points: int = knob(4, "finite val-loss points needed to report the val instability evidence")


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    loss, reason = c.judged_loss(history, thresholds.min_points)
    if loss is None:
        return c.skipped(_SELF, reason)
    key = history.key("train_loss")
    v, s = loss.values, loss.steps
    head, tail = stats.head_tail(v, thresholds.head_share, thresholds.tail_share)
    if head <= 0:
        return c.skipped(_SELF, f"{key} is not positive (starts at {c.fmt(head)}); relative change is undefined")
    improvement = (head - tail) / head
    tenth = max(thresholds.early_min_points, int(len(v) * thresholds.early_share))
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
    if val is not None and len(val.finite()) >= thresholds.min_val_points:
        vv = val.finite().values
        vnoise = stats.mad(np.diff(vv)) / (abs(np.median(vv)) or 1e-12)  # 1e-12: a numeric guard against a zero level
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
