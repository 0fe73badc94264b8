"""Loss falls, but so slowly that the run will not get anywhere.

**What it looks for.** After warm-up and before any NaN, a training loss that is falling steadily
(Spearman correlation with the step ≤ −``min_monotonic`` over 20 binned medians), is still falling
at the end (the last quarter sits at least ``still_falling`` below the third — a finished plateau is
not slow), and yet over the whole run has improved by less than ``max_improvement`` of where it
started. The evidence gives the improvement and a projection: how many more runs of this length it
would take to halve the loss at the current rate (critical beyond ``critical_runs_to_halve``).

**Why it matters.** Typical causes are an initialization that is too small (activations saturate),
unnormalized input features, or an optimizer set up too timidly (a tiny learning rate, a huge Adam
epsilon). The run burns compute for a model that is barely better than its start.

**Thresholds.** ``max_improvement`` (0.15), ``min_monotonic`` (0.6), ``still_falling`` (0.005),
``critical_runs_to_halve`` (20), ``min_points`` (30).

**Fix.** Normalize input features (zero mean, unit variance); use a standard initialization
(He/Kaiming for ReLU, Xavier/Glorot for tanh) and add Batch/LayerNorm; raise the learning rate
(an LR range test finds it quickly); with Adam, use the default epsilon (1e-8).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .. import stats
from ..roles import RoleView
from ..schema import Evidence, Finding
from . import _common as c

ID = "slow-convergence"
TITLE = "Extremely slow convergence"
NEEDS = ("train_loss",)
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Normalize input features; use a standard initialization (He for ReLU, Xavier for tanh) and add "
    "Batch/LayerNorm; raise the learning rate (run an LR range test); with Adam keep epsilon near 1e-8."
)


@dataclass(frozen=True)
class Thresholds:
    max_improvement: float = 0.15
    min_monotonic: float = 0.6
    still_falling: float = 0.005
    critical_runs_to_halve: float = 20.0
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
    # Twenty bins: each median averages enough steps that a slow, steady fall shows through noise.
    b = stats.binned(s, v, 20)
    _, rho = stats.trend(b.steps, b.median)
    third = len(v) * 2 // 3
    slope, _ = stats.trend(s[third:], v[third:])
    span = s[-1] - s[0]
    last_drop = stats.quarter_drop(v)
    falling = rho <= -thresholds.min_monotonic and last_drop >= thresholds.still_falling
    if not (falling and 0 < improvement < thresholds.max_improvement):
        return c.ok(_SELF, f"{key} improved {c.fmt(100 * improvement)}% over the run (trend correlation {c.fmt(rho)})")

    # At the end-of-run slope, how many runs of this length to reach half the current loss?
    runs_to_halve = (0.5 * tail) / (-slope * span) if slope < 0 and span > 0 else float("inf")
    evidence = [
        Evidence(key, improvement, thresholds.max_improvement, float(s[0]), float(s[-1]), "small_improvement",
                 f"loss {c.fmt(head)} at the start, {c.fmt(tail)} at the end"),
        Evidence(key, runs_to_halve, thresholds.critical_runs_to_halve, float(s[third]), float(s[-1]), "runs_to_halve",
                 f"last quarter {c.fmt(100 * last_drop)}% below the third; slope {c.fmt(slope)} per step"),
    ]
    message = (f"{key} fell only {c.fmt(100 * improvement)}% in {c.fmt_step(span)} steps ({c.fmt(head)} → {c.fmt(tail)}) and is still "
               f"falling steadily: at this rate halving it takes about {c.fmt(runs_to_halve)} more runs of this length.")
    return c.problem(_SELF, runs_to_halve > thresholds.critical_runs_to_halve, message, RECOMMENDATION, evidence)
