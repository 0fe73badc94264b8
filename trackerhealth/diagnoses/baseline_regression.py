"""The run ended clearly worse than its group's baseline.

**What it looks for.** Only a run analysed with its group (a scan groups by W&B's group or MLflow's
parent run, or by ``--group-by``) has a baseline: the run the user marked, else the group's
healthiest finished run (``trackerhealth.cohort.choose_baseline``). The run's final level — the
median of the last tenth of its val loss when both runs log one, else of its training loss — is
compared with the baseline's: the run is worse when it ends at ``times_worse`` (an order of
magnitude) the baseline's final level or more — also in units of each run's starting loss, when the
run started higher (loss weights or units that put a loss on another scale from its first step are
no regression) — and the gap is at least ``min_gap`` of the baseline's starting loss (two
losses near zero are not "twice as bad"). A run that saw less than ``equal_data_share`` of the
baseline's data (its steps, in samples when both configs give a batch size) is compared with the
baseline's level after as much data, not its end: a shorter budget ends higher without having lost
anything. The evidence also gives the best val loss, the median step
time, throughput and gradient norm against the baseline's. Another problem on the same run (slow convergence, overfitting, a blow-up…) explains the
regression and is the finding that is tagged (``trackerhealth/explain.py``); this one stands alone
only when nothing else says why. A run compared alone, or in a group with no healthy finished run,
is skipped, with that reason.

**Why it matters.** A run that ends worse than the team's own run of the same model on the same
data has lost something that run had — a setting, the data, the code — however healthy its
curve looks on its own.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..baseline import comparable, curve, final_level, per_step
from ..roles import RoleView
from ..schema import Evidence, Finding
from . import _common as c
from ._real_cases import TORCH, RealCase
from ._thresholds import knob

ID = "baseline-regression"
TITLE = "Worse than the group's baseline"
NEEDS = ("train_loss",)
COMPARES_RUNS = True
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Diff this run's config, code version and data against the baseline's (the evidence names it): the "
    "setting that differs is the first suspect. Re-run with the baseline's value of each difference in turn."
)


REAL_CASES = (
    RealCase("multitask_digits_lr_too_low", TORCH, "a two-head net trained with Adam at lr 1e-5, beside its sane siblings",
             "val_loss ended at 3.32, 14.6x the final 0.227 of the group's baseline multitask_digits_twin_sgd",
             grouped=True, explained_by="slow-convergence"),
)


@dataclass(frozen=True)
class Thresholds:
    times_worse: float = knob(10.0, "a final level at least this many times the baseline's final level is worse (an order of magnitude)")
    min_gap: float = knob(0.1, "and the gap must be at least this share of the baseline's starting loss")
    equal_data_share: float = knob(0.8, "a run that saw less than this share of the baseline's data (steps x batch) is compared with the baseline's level after as much data")
    comparable_start: float = knob(10.0, "a run starting more than this many times above or below the baseline's start is on another scale: not compared")


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    gone = c.missing_roles(_SELF, history)
    if gone is not None:
        return gone
    cohort = history.cohort
    if cohort is None:
        return c.skipped(_SELF, "compared alone: no group to compare with (scan a project, or pass --group-by)")
    if cohort.baseline is None:
        return c.skipped(_SELF, f"group {cohort.label}: {cohort.reason}")
    base = cohort.baseline
    if cohort.is_baseline(history.ref.id):
        return c.ok(_SELF, f"this run is the baseline of group {cohort.label} ({cohort.size} runs; {cohort.rule})")
    loss_curve = curve(history.series("train_loss"))
    if loss_curve is None or base.loss is None:
        return c.skipped(_SELF, "too few finite training-loss points to compare with the baseline")
    if not comparable(loss_curve, base.loss, thresholds.comparable_start):
        return c.skipped(_SELF, f"this run's loss starts at {c.fmt(loss_curve.start)}, the baseline {base.name}'s at "
                                f"{c.fmt(base.loss.start)}: losses on different scales (weights, units) are not compared")
    val = history.series("val_loss")
    val = val.finite() if val is not None else None
    val_final = final_level(val.values) if val is not None and len(val) else None
    if val_final is not None and base.val_final is not None:
        metric, mine, theirs = history.key("val_loss"), val_final, base.val_final
        base_curve = dict(base.curves).get("val_loss")
    else:
        metric, mine, theirs, base_curve = history.key("train_loss"), loss_curve.final, base.loss.final, base.loss
    # Like for like: a run that saw less data than the baseline (fewer steps, or a smaller batch for as
    # many steps) is compared with the baseline's level after as much data. Its higher end is its budget,
    # not a regression (three healthy batch-4 runs of the torch corpus ended 12-43x their batch-32
    # baselines' final val loss, as every run does that far into its training).
    seen = loss_curve.length * per_step(cohort.batch_size, base.batch_size)
    at_equal_data = ""
    if base_curve is not None and seen < thresholds.equal_data_share * base.loss.length:
        theirs = base_curve.level_after(seen)
        at_equal_data = f" after as much data ({c.fmt(100 * seen / base.loss.length)}% of the baseline's)"
    scale = abs(base.loss.start) or 1.0
    ratio = mine / theirs if theirs > 0 else (np.inf if mine > theirs else 1.0)
    # Each in units of where its loss started: a run whose loss weights or units put it 7x above the
    # baseline from its first step ends "7x worse" without having learned any less.
    started = loss_curve.start / base.loss.start
    relative = ratio / started
    gap = (mine - theirs) / scale
    where = f"baseline {base.name} ({cohort.rule}) of group {cohort.label}, {cohort.size} runs"
    evidence = [Evidence(metric, float(ratio), thresholds.times_worse, None, None, "final_vs_baseline",
                         f"final level {c.fmt(mine)} against {c.fmt(theirs)}{at_equal_data}; {where}")]
    if val_final is not None and base.val_best is not None:
        best = float(np.min(val.values))
        evidence.append(Evidence(history.key("val_loss"), best / base.val_best if base.val_best > 0 else float("nan"), None,
                                 None, None, "best_val_vs_baseline", f"best val loss {c.fmt(best)} against {c.fmt(base.val_best)}"))
    # The pace and gradient level against the baseline's, for the reader (no threshold): a regression
    # with a slower step or a larger gradient says where to look.
    evidence += c.against_baseline(history, ("step_time", "throughput", "grad_norm"))
    if relative < ratio:
        evidence.append(Evidence(metric, float(relative), thresholds.times_worse, None, None, "final_vs_baseline_from_start",
                                 f"the same ratio in units of each run's starting loss: this run started {c.fmt(started)}x "
                                 "the baseline's"))
    if min(ratio, relative) >= thresholds.times_worse and gap >= thresholds.min_gap:
        message = (f"{metric} ended at {c.fmt(mine)}, {c.fmt(ratio)}x the {'level' if at_equal_data else 'final'} "
                   f"{c.fmt(theirs)}{at_equal_data} of the group's baseline {base.name} (group {cohort.label}).")
        return c.problem(_SELF, False, message, RECOMMENDATION, evidence)
    return c.ok(_SELF, f"{metric} ended at {c.fmt(mine)}, {c.fmt(ratio)}x the baseline {base.name}'s {c.fmt(theirs)}{at_equal_data}",
                tuple(evidence))
