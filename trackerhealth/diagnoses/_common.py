"""Helpers every diagnosis uses to build findings and to pick the part of a run worth judging."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import adversarial
from ..roles import RoleView
from ..schema import CRITICAL, OK, SKIPPED, WARNING, Evidence, Finding, Series
from .. import stats
from ..baseline import finite_median, relative_evidence


def fmt(x: float | None) -> str:
    """Numbers for messages: short, readable at any scale."""
    if x is None or not np.isfinite(x):
        return str(x)
    ax = abs(x)
    if ax != 0 and (ax < 1e-3 or ax >= 1e5):
        return f"{x:.2e}"
    if ax >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def fmt_step(x: float | None) -> str:
    if x is None or not np.isfinite(x):
        return "?"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}"


def skipped(module, reason: str) -> Finding:
    return Finding(module.ID, SKIPPED, module.TITLE, reason)


def missing_roles(module, view: RoleView) -> Finding | None:
    """A `skipped` finding naming what to log when the run lacks a role the diagnosis needs."""
    gone = view.missing(*module.NEEDS)
    if not gone:
        return None
    return skipped(module, f"not logged: {', '.join(gone)} (see `trackerhealth diagnoses` for the key names understood)")


def ok(module, message: str, evidence: tuple[Evidence, ...] = ()) -> Finding:
    return Finding(module.ID, OK, module.TITLE, message, "", evidence)


def problem(module, critical: bool, message: str, recommendation: str, evidence) -> Finding:
    return Finding(module.ID, CRITICAL if critical else WARNING, module.TITLE, message, recommendation, tuple(evidence))


def until_first_nonfinite(s: Series) -> Series:
    """The part of a series before it first became NaN/Inf: later values describe a dead run."""
    bad = np.flatnonzero(~np.isfinite(s.values))
    if len(bad) == 0:
        return s
    end = bad[0]
    return Series(s.steps[:end], s.values[:end], s.wall_times[:end])


def after_warmup(view: RoleView, s: Series) -> Series:
    """Drop the learning-rate warm-up: a loss that has not started to fall yet is no fault."""
    if len(s) == 0:
        return s
    lr = view.series("lr")
    end = stats.warmup_end(lr.steps, lr.values) if lr is not None else None
    if end is None or end >= s.steps[-1]:
        return s
    return s.between(end, s.steps[-1])


# Tracker states of a run that has not ended (W&B "running", MLflow "RUNNING", queued or preempting ones).
LIVE_STATES = frozenset({"running", "pending", "scheduled", "preempting"})


def still_training(view: RoleView) -> bool:
    """Whether the run is still in progress: its loss has not ended anywhere yet."""
    return (view.ref.state or "").lower() in LIVE_STATES


def adversarial_pair(view: RoleView) -> tuple[str, str] | None:
    """``(generator key, discriminator key)`` when the training loss is one side of a GAN's adversarial pair, else None."""
    mine = view.key("train_loss")
    other = adversarial.counterpart(mine, view.history.keys())
    if other is None:
        return None
    return (mine, other) if adversarial.side(mine) == "generator" else (other, mine)


def adversarial_skip(module, view: RoleView) -> Finding | None:
    """``skipped`` when the training loss is one side of a GAN's adversarial pair (:func:`adversarial_pair`):
    its course is a game, not a descent, so the rules that read a falling loss as learning do not apply."""
    pair = adversarial_pair(view)
    if pair is None:
        return None
    mine = view.key("train_loss")
    other = pair[1] if pair[0] == mine else pair[0]
    return skipped(module, f"{mine} is one side of an adversarial pair with {other} (a GAN): "
                           "a generator's loss may rise and a discriminator's sit flat in healthy training, so its "
                           "course is not judged as a descent")


def judged_loss(view: RoleView, min_points: int) -> tuple[Series | None, str]:
    """The train loss a trend diagnosis should judge, or None with the reason it cannot."""
    loss = view.series("train_loss")
    if loss is None:
        return None, "not logged: train_loss (see `trackerhealth diagnoses` for the key names understood)"
    loss = after_warmup(view, loss_with_warmup(view))
    if len(loss) < min_points:
        return None, f"only {len(loss)} finite train-loss points after warm-up; need {min_points}"
    return loss, ""


def against_baseline(view: RoleView, roles: tuple[str, ...]) -> list[Evidence]:
    """The run's medians of ``roles`` against its group baseline's (:func:`trackerhealth.baseline.relative_evidence`);
    empty for a run analysed alone or that is its group's baseline."""
    cohort = view.cohort
    if cohort is None or cohort.baseline is None or cohort.is_baseline(view.ref.id):
        return []
    medians = {role: finite_median(view.series(role)) for role in roles}
    return relative_evidence({r: (view.key(r), m) for r, m in medians.items() if m is not None}, cohort.baseline)


def loss_with_warmup(view: RoleView) -> Series:
    """The train loss from its first logged point, warm-up included, up to its first NaN/Inf."""
    return until_first_nonfinite(view.series("train_loss")).finite()


def fall_with_warmup(view: RoleView, head_share: float, tail_share: float, early_rise: float, early_fall: float) -> float:
    """The train loss' fall from its first logged level to its end, warm-up included, as a share of
    that start. The trend rules judge the loss after warm-up, but a loss that fell most of the way
    during warm-up made its progress early: an HF fine-tune's 0.99 -> 0.35 in its warm-up (public
    log P43) is not a crawl, and detectron2's 2.13 -> 0.28 in its 1,000 warm-up iterations, flat
    after them (public log P70), is not a loss that never learned."""
    whole = loss_with_warmup(view)
    start, tail = start_and_end(whole.values, head_share, tail_share, early_rise, early_fall)
    return (start - tail) / start if start > 0 else 0.0


def start_and_end(values, head_share: float, tail_share: float, early_rise: float, early_fall: float) -> tuple[float, float]:
    """The loss' starting level (:func:`start_level` of its first ``head_share``) and its end level
    (median of its last ``tail_share``): what the trend rules compare."""
    head, tail = stats.head_tail(values, head_share, tail_share)
    return start_level(values, head, early_rise, early_fall), tail


def start_level(values, head: float, early_rise: float, early_fall: float) -> float:
    """Where a loss started: the median of its first points (``head``), unless that median is ``early_rise``
    x above the very first point: a loss that blew up within its first few steps (Adam at a huge LR)
    started at that first point, and measured from the blown-up median it would seem to have fallen. So did
    a loss whose first point is ``early_fall`` x its head's median: it fell an order of magnitude within the
    head, and measured from the head it would seem to have learned little (public log P908: a DDPM logged at
    every one of 106,260 iterations, 1.11 at the first, the first 2 % a median of 0.033, 0.019 at the end)."""
    first = float(values[0])
    if first > 0 and (head > early_rise * first or first > early_fall * head):
        return first
    return head



@dataclass(frozen=True)
class NeverScored:
    """A higher-is-better quality metric that never scored: exactly 0 (``value`` 0.0), or one and the same
    value at every evaluation (``constant``): what the never-scored check found."""

    key: str
    zeros: int  # evaluations at ``value``
    points: int
    first_step: float
    last_step: float
    value: float = 0.0
    constant: bool = False


# A metric that sits at its best possible value throughout is a task solved from the first evaluation,
# not a model that never learned: accuracy 1.0 (or 100 when logged in percent).
_PERFECT_SCORES = (1.0, 100.0)


def never_scored_metric(view: RoleView, min_points: int, zero_share: float) -> NeverScored | None:
    """The first quality metric (accuracy, F1, mAP, …: role ``quality_metrics``) that never scored, else None:
    exactly 0 at ``zero_share`` or more of its ``min_points``-plus finite evaluations, the last one included,
    or the very same value at every one of them (short of a perfect 1.0 or 100); failing that, the first error rate
    (WER, CER: role ``error_metrics``) at one and the same value at every evaluation (short of a perfect 0).

    A model that learned anything gets some answer right: an accuracy, F1 or mAP that is 0 at every
    evaluation says it never did, whatever its loss does (a detector at mAP 0 for 100 epochs, public
    log P214; a sequence model at token accuracy 0, P01). Exact zeros, not "low": what counts as low
    depends on the task, 0 does not. The same holds for one exact value at every evaluation, the first
    included: a model whose predictions change at all moves its accuracy by at least one example, so a
    val accuracy of 0.72414 at all 31 epochs is a model that predicts the majority class and never
    stopped (public log P429, a 72/28 split)."""
    for _, key, series in view.group("quality_metrics"):
        s = series.finite()
        if len(s) < min_points:
            continue
        first, last = float(s.values[0]), float(s.values[-1])
        if last == 0:
            zeros = int(np.count_nonzero(s.values == 0))
            if zeros >= zero_share * len(s):
                return NeverScored(key, zeros, len(s), float(s.steps[0]), float(s.steps[-1]))
        elif first not in _PERFECT_SCORES and (constant := _constant(key, s)) is not None:
            return constant
    # An error rate (role ``error_metrics``: WER, CER) at one and the same value at every evaluation, short of a perfect 0:
    # the output never changed (public log P669, an ASR fine-tune at WER exactly 1.0 at all six evaluations).
    for _, key, series in view.group("error_metrics"):
        s = series.finite()
        if len(s) >= min_points and s.values[0] != 0 and (constant := _constant(key, s)) is not None:
            return constant
    return None


def _constant(key: str, s: Series) -> NeverScored | None:
    """``s`` at one and the same value at every evaluation, the first included, as a never-scored finding; else None."""
    first = float(s.values[0])
    if not bool((s.values == first).all()):
        return None
    return NeverScored(key, len(s), len(s), float(s.steps[0]), float(s.steps[-1]), first, constant=True)
