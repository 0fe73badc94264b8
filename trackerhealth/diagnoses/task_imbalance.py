"""Multi-task training where one loss term dominates and another does not learn.

**What it looks for.** Two or more per-task loss terms (``loss/<task>``, ``train/<task>_loss``,
``loss_<task>`` beside the total loss). Over the last ``tail`` share of the run, each task's share
of the summed loss is computed from their medians. The finding fires when one task holds more than
``dominant_share`` (90 %, from the seed) of the total while another task's loss stayed flat — it
fell by less than ``flat_change`` of its starting level over the run, or over that last ``tail``
share (its first ``late_parts``-th against its last: a term that fell in the first epochs and then stopped
while the dominant one went on falling), or rose — unless it fell ``converged_fall`` (90 %) of its start over
the run: a term that fell by orders of magnitude was trained, and flat at the end it has converged (an
auxiliary head that solved its task in its first steps, a distilled student that matched its teacher). Critical above ``critical_share``. A term that the
dominant one outweighs by orders of magnitude (``swamp_ratio`` × its level or more: an unscaled
regression target in grams or pixels summed with a cross-entropy) is not being trained either when it
fell by less than ``lag_ratio`` of what the dominant term fell, both measured as log-ratios of start to
end (evidence ``lagging_task_loss``): its gradient is a rounding error beside the other's, so what it
learns comes by chance through the shared layers. A term that never moved from its start (changed
by less than ``flat_change`` either way) beside one that began ``swamp_ratio`` × its level or more is
the same fault even when the big term has since fallen to a smaller share (over ``swamped_min_share``:
still the larger part): its gradient was a rounding error while the shared layers formed (evidence
``swamped_from_start``).

A term that is exactly 0 at every step is no task (nothing reaches it: a detector's box loss when no
training image has a box) and is left out. So is a penalty that grew — a term named as a KL divergence or a
regulariser (``kl``, ``kld``, ``reg``, ``penalty``) that rose, over the run or over its last part: a VAE's KL to its prior starts
near 0 and grows exactly as the code starts to carry information, traded against the reconstruction that
dominates the sum; it is the model learning, not a task left behind. Such a term still counts in the shares,
and one that stays flat or lags is judged as any task. A mixture-of-experts load-balancing term (named ``balance``,
``balancing`` or ``router``) is never the task left behind, flat or not: it keeps the experts' load even and a fresh
router already sits near its floor, so flat is its healthy course. It too counts in the shares: a coefficient so
large that it dominates while the task term stalls is this fault.

**Why it matters.** The optimizer follows the dominant term's gradient; the flat task is not being
trained, whatever its weight in the report.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..roles import RoleView, tokens
from ..schema import Evidence, Finding
from . import _common as c
from ._real_cases import PUBLIC, TORCH, RealCase
from ._thresholds import knob

ID = "task-imbalance"
TITLE = "Multi-task loss imbalance"
NEEDS = ("task_losses",)
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Balance the loss terms: normalize targets or divide each task loss by its initial value, or weight them "
    "dynamically (GradNorm, uncertainty weighting); log per-task gradient norms to watch the balance."
)


REAL_CASES = (
    RealCase("multitask_wine_imbalance_raw_proline", TORCH,
             "proline regressed in raw mg/L beside a cultivar classifier, the two losses summed unweighted",
             "train/loss_proline is 100% of the total loss while train/loss_cls rose by 149%"),
    RealCase("P10", PUBLIC, "Martinmbiro/variational-autoencoder, a plain training-log CSV of a VAE's loss terms",
             "recon_loss is 93.2% of the total loss while kl_loss fell by only 0.233%"),
    RealCase("multitask_digits_imbalance_ink_div10", TORCH, "ink in units of 10 pixels beside a digit classifier: 80 % of the total at the end",
             "train/loss_ink began at 429x train/loss_cls's level: its gradient swamped that task's from the first step."),
)


# Words that name a penalty the optimiser trades against the task rather than a task: a term named so that
# grew is not neglected (torch family vae: the ELBO's KL grew 5-35x on every healthy run, 97 % of the sum
# being reconstruction; public log P172's reg_loss switched on late in the run).
_PENALTY_WORDS = frozenset({"kl", "kld", "kldiv", "reg", "penalty", "regularization", "regularisation"})
# Words that name a mixture-of-experts load-balancing (router) term. It is no task to be trained: it keeps the
# experts' load even, and a fresh router is already near its floor (about 1x its coefficient for an even split),
# so flat, or rising a little as the experts specialise, is its healthy course (torch family moe, built blind:
# its balance term was called "not being trained" on 15 of 35 runs). It still counts in the shares, so a
# coefficient so large that the term dominates while the task stalls is still found.
_BALANCE_WORDS = frozenset({"balance", "balancing", "router"})


@dataclass(frozen=True)
class Thresholds:
    dominant_share: float = knob(0.9, "one task holding more than this share of the summed loss dominates (the seed)")
    critical_share: float = knob(0.99, "critical above this share")
    flat_change: float = knob(0.05, "a task whose loss fell by less than this share of its start (or rose) is flat")
    tail: float = knob(0.5, "share of the run at the end over which the shares are measured")
    min_points: int = knob(10, "finite points a task loss needs to count")
    change_head_share: float = knob(0.02, "share at the start whose median is a task's starting level (at least 3 points)")
    late_parts: int = knob(5, "the last tail share is cut into this many parts: its first part's median against its last part's is the late change")
    change_tail_share: float = knob(0.2, "share at the end whose median is a task's end level")
    swamp_ratio: float = knob(30.0, "a dominant term this many times another task's level swamps that task's gradient (orders of magnitude)")
    lag_ratio: float = knob(0.25, "a swamped task whose loss fell by less than this share of the dominant term's fall (log-ratios) is not being trained")
    min_dominant_fall: float = knob(0.69, "the dominant term must have fallen at least this log-ratio (0.69: halved) for a lag to mean anything")
    converged_fall: float = knob(0.9, "a term that fell this share of its start over the run was trained: flat at the end, it converged")
    swamped_min_share: float = knob(0.5, "a term that began swamp_ratio x a never-moving task's level dominates while it holds more than this share")


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    tasks = history.group("task_losses")
    if len(tasks) < 2:
        return c.skipped(_SELF, "fewer than two per-task losses logged (e.g. loss/<task>)")
    levels, heads, overall, changes, falls, names, spans, not_tasks = [], [], [], [], [], [], [], []
    for label, key, s in tasks:
        f = c.until_first_nonfinite(s).finite()
        if len(f) < thresholds.min_points:
            continue
        v = f.values
        if not np.any(v):
            # A term that is exactly 0 at every step carries no gradient: nothing is there to balance (a
            # detector's box loss when no image has a box, a disabled auxiliary head). It is no stalled task.
            continue
        tail = v[int(len(v) * (1 - thresholds.tail)):]
        levels.append(abs(float(np.median(tail))))
        head, end = stats.head_tail(v, thresholds.change_head_share, thresholds.change_tail_share)
        heads.append(abs(head))
        # Signed: how far the task's loss FELL. One that rose while another term dominates is not being
        # trained either (worse than flat), so it counts as flat, not as a task that moved.
        change = (head - end) / (abs(head) or 1e-12)  # 1e-12: a numeric guard against a zero start
        overall.append(change)
        if len(tail) >= thresholds.min_points:
            # A task whose loss fell in the first epochs (from a blown-up start, or its easy part) and
            # then stopped while the other term went on falling is not being trained either. Over the
            # window the shares come from: the median of its first part against its last (``late_parts``).
            part = max(2, len(tail) // thresholds.late_parts)
            late_start, late_end = float(np.median(tail[:part])), float(np.median(tail[-part:]))
            change = min(change, (late_start - late_end) / (abs(late_start) or 1e-12))  # 1e-12: a numeric guard
        changes.append(change)
        falls.append(_log_fall(head, end))
        # Never the task left behind: a load-balancing term, or a penalty that grew (the model learning).
        words = set(tokens(key))
        not_tasks.append(bool(_BALANCE_WORDS & words) or (bool(_PENALTY_WORDS & words) and change < 0))
        names.append((label, key))
        spans.append((float(f.steps[0]), float(f.steps[-1])))
    if len(levels) < 2:
        return c.skipped(_SELF, f"fewer than two task losses with {thresholds.min_points}+ finite points")
    total = sum(levels)
    if total <= 0:
        return c.ok(_SELF, "all task losses are zero")
    shares = np.array(levels) / total
    top = int(np.argmax(shares))
    # A term that fell by orders of magnitude over the run was trained: flat at the end, it has converged (an
    # auxiliary head that solved its task in the first steps; a distilled student that matched its teacher).
    flat = [i for i in range(len(levels)) if i != top and changes[i] < thresholds.flat_change and not not_tasks[i]
            and overall[i] < thresholds.converged_fall]
    lagging = [i for i in _swamped(levels, falls, top, thresholds) if i not in flat and not not_tasks[i]]
    # A task that never moved beside a term that began orders of magnitude above it: swamped from the
    # first step, even though the big term has fallen since (a rise is not "never moved": something trains it).
    never_moved = [i for i in flat if abs(overall[i]) < thresholds.flat_change and heads[i] > 0
                   and heads[top] >= thresholds.swamp_ratio * heads[i]]
    dominates = shares[top] > thresholds.dominant_share or (never_moved and shares[top] > thresholds.swamped_min_share)
    if not dominates or not (flat or lagging):
        return c.ok(_SELF, f"largest task share {c.fmt(100 * shares[top])}% ({names[top][0]}); "
                           f"{'no' if not flat else len(flat)} flat task(s)")
    evidence = [Evidence(names[top][1], float(shares[top]), thresholds.dominant_share, *spans[top], "dominant_task_share",
                         f"share of the summed task losses over the last {c.fmt(100 * thresholds.tail)}% of the run")]
    for i in flat:
        evidence.append(Evidence(names[i][1], float(changes[i]), thresholds.flat_change, *spans[i], "flat_task_loss",
                                 "relative change of this task's loss from start to end, or over the last part of the run when smaller"))
    for i in never_moved:
        evidence.append(Evidence(names[i][1], heads[top] / heads[i], thresholds.swamp_ratio, *spans[i], "swamped_from_start",
                                 f"{names[top][1]}'s starting level over this task's; this task never moved from its start"))
    for i in lagging:
        evidence.append(Evidence(names[i][1], falls[i] / falls[top], thresholds.lag_ratio, *spans[i], "lagging_task_loss",
                                 f"this task's fall over {names[top][1]}'s (log-ratios of start to end); "
                                 f"{names[top][1]} is {c.fmt(levels[top] / levels[i])}x its level"))
    if flat:
        flat_names = ", ".join(names[i][1] for i in flat)
        least = min(changes[i] for i in flat)
        moved = f"rose by {c.fmt(-100 * least)}%" if least < 0 else f"fell by only {c.fmt(100 * least)}%"
        message = (f"{names[top][1]} is {c.fmt(100 * shares[top])}% of the total loss while {flat_names} "
                   f"{moved}: that task is not being trained.")
        if never_moved and shares[top] <= thresholds.dominant_share:
            i = never_moved[0]
            message += (f" {names[top][1]} began at {c.fmt(heads[top] / heads[i])}x {names[i][1]}'s level: "
                        "its gradient swamped that task's from the first step.")
    else:
        i = lagging[0]
        message = (f"{names[top][1]} is {c.fmt(levels[top] / levels[i])}x {names[i][1]}'s level and fell to "
                   f"{c.fmt(100 * np.exp(-falls[top]))}% of its start, while {names[i][1]} only fell to "
                   f"{c.fmt(100 * np.exp(-falls[i]))}% of its start: its gradient is swamped, that task is barely being trained.")
    return c.problem(_SELF, shares[top] > thresholds.critical_share, message, RECOMMENDATION, evidence)


def _log_fall(head: float, end: float) -> float:
    """How far a term fell as ln(start/end), comparable between terms of any scale; NaN unless both are positive."""
    return float(np.log(head / end)) if head > 0 and end > 0 else float("nan")


def _swamped(levels: list[float], falls: list[float], top: int, thresholds: Thresholds) -> list[int]:
    """Tasks the dominant term outweighs by ``swamp_ratio`` or more that fell by less than ``lag_ratio`` of
    what it fell: the gradient of the sum is the dominant term's, so the small task trains only by accident."""
    if not falls[top] >= thresholds.min_dominant_fall:  # also False for NaN
        return []
    return [i for i in range(len(levels)) if i != top and levels[top] >= thresholds.swamp_ratio * levels[i]
            and np.isfinite(falls[i]) and falls[i] < thresholds.lag_ratio * falls[top]]
