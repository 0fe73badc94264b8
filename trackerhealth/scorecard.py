"""The health scorecard: five dimensions, each 0-100 (higher is healthier), and one overall score.

Each dimension reports the numbers it was computed from (``basis``); a dimension whose data the
run did not log is ``None`` with the reason, never an invented number.

- ``convergence_speed`` — steps to reach 90 % of the run's total loss improvement, as a share of
  the run, combined with how large that improvement is.
- ``stability`` — the recent wobble of the val loss (train loss when no val): robust std of its
  point-to-point changes over the last 50 points, relative to how far the loss has come (start
  minus best), so a loss near zero is not called unstable; 0 when the loss became NaN/Inf.
- ``gradient_health`` — gradient-norm std relative to its median over the second half of the run
  (the seed's oscillation risk when > 2) and spikes above 10 × median; 0 when the norm is NaN/Inf
  at the end; capped when gradients vanish.
- ``resource_efficiency`` — mean GPU utilization, else the compute share of step time; samples/s
  are reported alongside.
- ``overfitting_risk`` — val/train loss ratio at the end and its trend since the val minimum (with a
  floor of 5 % of the starting loss added to both, so two losses near zero do not make a huge ratio).
- A GAN's generator or discriminator loss (:mod:`trackerhealth.adversarial`) gets no ``convergence_speed`` and, when no
  val loss is logged, no ``stability``: both measure how far a loss fell, which a game's need not.
- ``score`` — the mean of the available dimensions, less ``penalty_critical`` per critical and
  ``penalty_warning`` per warning finding, floored at 0.

Every number the scorecard decides on is a field of :class:`Thresholds` (config
``[thresholds.scorecard]``; ``trackerhealth diagnoses`` lists them with their meaning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import adversarial, stats
from .diagnoses._thresholds import knob
from .roles import RoleView
from .schema import CRITICAL, DIMENSIONS, WARNING, DimensionScore, Finding, Series

ID = "scorecard"  # the section name in ``[thresholds.scorecard]``
TITLE = "Health scorecard"


@dataclass(frozen=True)
class Thresholds:
    penalty_critical: float = knob(30.0, "points the overall score loses per critical finding")
    penalty_warning: float = knob(10.0, "points the overall score loses per warning finding")
    convergence_min_points: int = knob(10, "convergence_speed: finite train-loss points needed")
    convergence_bins: int = knob(200, "convergence_speed: bins the train loss is reduced to")
    convergence_smooth_window: int = knob(5, "convergence_speed: bins of the rolling median over the bin medians")
    convergence_target: float = knob(0.9, "convergence_speed: the share of the total improvement whose step is timed")
    convergence_speed_weight: float = knob(0.5, "convergence_speed: weight of speed (1 - share of run); the rest weighs the improvement")
    convergence_full_improvement: float = knob(0.5, "convergence_speed: a relative improvement that earns the full improvement part")
    start_min_points: int = knob(3, "overfitting_risk: finite train-loss points needed for the starting level of the floor")
    start_head_share: float = knob(0.02, "overfitting_risk: share at the start whose median is the starting level (at least 3 points)")
    stability_min_points: int = knob(5, "stability: points needed (val loss is used when it has this many finite points)")
    stability_tail_points: int = knob(50, "stability: last points whose point-to-point changes are the recent wobble")
    stability_head_share: float = knob(0.02, "stability: share at the start whose maximum is the starting level of the progress")
    stability_head_min_points: int = knob(3, "stability: points at the start whose maximum is the starting level, at least")
    stability_scale: float = knob(0.15, "stability: score = 100 exp(-wobble/progress / stability_scale)")
    grad_dead_tail_share: float = knob(0.1, "gradient_health: share at the end checked for NaN/Inf")
    grad_dead_tail_min_points: int = knob(3, "gradient_health: points at the end checked for NaN/Inf, at least")
    grad_dead_fraction: float = knob(0.5, "gradient_health: 0 when more than this fraction of that end is NaN/Inf")
    grad_min_points: int = knob(5, "gradient_health: finite gradient-norm points needed")
    grad_cv_zero: float = knob(4.0, "gradient_health: std/median of the second half at which the score reaches 0")
    grad_spike_factor: float = knob(10.0, "gradient_health: points above this multiple of the median are spikes")
    grad_spike_penalty: float = knob(200.0, "gradient_health: points lost per unit share of spikes")
    vanish_cap_critical: float = knob(20.0, "gradient_health: cap when vanishing-gradients is critical")
    vanish_cap_warning: float = knob(50.0, "gradient_health: cap when vanishing-gradients is a warning")
    overfit_train_bins: int = knob(2000, "overfitting_risk: bins the train loss is reduced to")
    overfit_smooth_window: int = knob(5, "overfitting_risk: bins of the rolling median giving the train level at each evaluation")
    overfit_floor_share: float = knob(0.05, "overfitting_risk: share of the starting loss added to both losses (two losses near zero make no huge ratio)")
    overfit_end_points: int = knob(3, "overfitting_risk: last evaluations whose median is the end ratio")
    overfit_ratio_ok: float = knob(1.2, "overfitting_risk: a val/train ratio up to this costs nothing")
    overfit_ratio_penalty: float = knob(40.0, "overfitting_risk: points lost per unit of end ratio above overfit_ratio_ok")
    overfit_rise_penalty: float = knob(20.0, "overfitting_risk: points lost per unit the ratio rose since the val minimum")


DEFAULTS = Thresholds()


def _clip(x: float) -> float:
    return float(round(min(100.0, max(0.0, x)), 1))


def _has_nonfinite(s: Series | None) -> bool:
    return s is not None and not np.isfinite(s.values).all()


def convergence_speed(view: RoleView, t: Thresholds = DEFAULTS) -> DimensionScore:
    loss = view.series("train_loss")
    if loss is None:
        return DimensionScore("convergence_speed", None, {}, "no train loss logged")
    other = adversarial.counterpart(view.key("train_loss"), view.history.keys())
    if other is not None:
        # A GAN's generator loss may rise in healthy training: how fast it fell scores nothing (not 0).
        return DimensionScore("convergence_speed", None, {}, f"{view.key('train_loss')} is one side of an adversarial pair with {other}")
    f = loss.finite()
    if len(f) < t.convergence_min_points:
        return DimensionScore("convergence_speed", None, {"points": len(f)}, f"fewer than {t.convergence_min_points} finite train-loss points")
    b = stats.binned(f.steps, f.values, t.convergence_bins)
    smooth = stats.rolling_median(b.median, t.convergence_smooth_window)
    start, best = float(smooth[0]), float(smooth.min())
    if start <= 0 or start <= best:
        return DimensionScore("convergence_speed", 0.0, {"start_loss": start, "best_loss": best}, "loss never improved")
    target = start - t.convergence_target * (start - best)
    reached = int(np.argmax(smooth <= target))
    span = b.steps[-1] - b.steps[0]
    share = float((b.steps[reached] - b.steps[0]) / span) if span > 0 else 1.0
    improvement = (start - best) / start
    w = t.convergence_speed_weight
    score = 100 * (w * (1 - share) + (1 - w) * min(1.0, improvement / t.convergence_full_improvement))
    basis = {"start_loss": start, "best_loss": best, "target_loss": target, "step_reached": float(b.steps[reached]),
             "share_of_run": share, "relative_improvement": improvement}
    return DimensionScore("convergence_speed", _clip(score), basis)


def _start_level(view: RoleView, t: Thresholds) -> float | None:
    loss = view.series("train_loss")
    if loss is None or len(loss.finite()) < t.start_min_points:
        return None
    head, _ = stats.head_tail(loss.finite().values, t.start_head_share)
    return head


def stability(view: RoleView, t: Thresholds = DEFAULTS) -> DimensionScore:
    val = view.series("val_loss")
    role = "val_loss" if val is not None and len(val.finite()) >= t.stability_min_points else "train_loss"
    s = view.series(role)
    if s is None:
        return DimensionScore("stability", None, {}, "no loss logged")
    other = adversarial.counterpart(view.key(role), view.history.keys()) if role == "train_loss" else None
    if other is not None:
        # Measured against how far the loss has come, which a GAN's generator or discriminator loss need not.
        return DimensionScore("stability", None, {}, f"{view.key(role)} is one side of an adversarial pair with {other}")
    if _has_nonfinite(s):
        return DimensionScore("stability", 0.0, {"nonfinite_points": float((~np.isfinite(s.values)).sum())}, f"{view.key(role)} became NaN/Inf")
    if len(s) < t.stability_min_points:
        return DimensionScore("stability", None, {"points": len(s)}, f"fewer than {t.stability_min_points} points")
    tail = s.values[-t.stability_tail_points:]
    # The recent wobble (robust std of point-to-point changes) measured against how far the loss
    # has come: a loss near zero is not unstable because its coefficient of variation is large.
    # / sqrt(2): the std of a difference of two independent points is sqrt(2) times theirs.
    wobble = stats.mad(np.diff(tail)) / np.sqrt(2)
    head = max(t.stability_head_min_points, int(len(s) * t.stability_head_share))
    progress = max(float(np.max(s.values[:head])) - float(np.min(s.values)), 1e-12)  # 1e-12: a numeric guard
    ratio = wobble / progress
    basis = {"metric_is_val": float(role == "val_loss"), "points": float(len(tail)), "recent_wobble": wobble,
             "progress": progress, "wobble_over_progress": ratio}
    return DimensionScore("stability", _clip(100 * np.exp(-ratio / t.stability_scale)), basis)


def gradient_health(view: RoleView, findings: Sequence[Finding], t: Thresholds = DEFAULTS) -> DimensionScore:
    g = view.series("grad_norm")
    layers = view.group("layer_grad_norms")
    if g is None and layers:
        # Without a total norm, the root of the sum of squared per-layer norms at shared steps is one.
        steps = layers[0][2].steps
        sq = np.zeros(len(steps))
        for _, _, s in layers:
            sq += np.interp(steps, s.steps, s.values) ** 2
        g = Series(steps, np.sqrt(sq), np.full(len(steps), np.nan))
    if g is None:
        return DimensionScore("gradient_health", None, {}, "no gradient norm logged")
    bad = ~np.isfinite(g.values)
    if bad[-max(t.grad_dead_tail_min_points, int(len(bad) * t.grad_dead_tail_share)):].mean() > t.grad_dead_fraction:
        return DimensionScore("gradient_health", 0.0, {}, "gradient norm is NaN/Inf at the end of the run")
    v = g.values[~bad]  # a few overflow steps skipped by a loss scaler are not the run's gradient
    if len(v) < t.grad_min_points:
        return DimensionScore("gradient_health", None, {"points": len(v)}, f"fewer than {t.grad_min_points} gradient-norm points")
    # The second half: early norms are large by nature and shrink as the loss falls; mixing the two
    # would call every converging run oscillating.
    v = v[len(v) // 2:]
    med = float(np.median(v))
    std = float(np.std(v))
    ratio = std / med if med > 0 else float("inf")
    spike_share = float((v > t.grad_spike_factor * med).mean()) if med > 0 else 1.0
    score = 100 * (1 - min(1.0, ratio / t.grad_cv_zero)) - t.grad_spike_penalty * spike_share
    vanish = next((f for f in findings if f.id == "vanishing-gradients" and f.is_problem), None)
    if vanish is not None:
        score = min(score, t.vanish_cap_critical if vanish.level == CRITICAL else t.vanish_cap_warning)
    basis = {"median": med, "std": std, "std_over_median": ratio, "spike_share": spike_share, "nonfinite_points": float(bad.sum())}
    return DimensionScore("gradient_health", _clip(score), basis)


def resource_efficiency(view: RoleView) -> DimensionScore:
    util = view.series("gpu_util")
    basis: dict[str, float] = {}
    tp = view.series("throughput")
    if tp is not None and len(tp.finite()):
        basis["samples_per_s"] = stats.typical(tp.finite().values)
    if util is not None and len(util.finite()):
        mean = float(np.mean(util.finite().values))
        basis["mean_gpu_util"] = mean
        return DimensionScore("resource_efficiency", _clip(mean), basis)
    data, compute, step = view.series("data_time"), view.series("compute_time"), view.series("step_time")
    if data is not None and (compute is not None or step is not None):
        d = float(np.nanmean(data.values))
        total = float(np.nanmean(compute.values)) + d if compute is not None else float(np.nanmean(step.values))
        if total > 0:
            share = max(0.0, 1 - d / total)
            basis["compute_share_of_step"] = share
            return DimensionScore("resource_efficiency", _clip(100 * share), basis)
    return DimensionScore("resource_efficiency", None, basis, "no GPU utilization or data/compute timing logged")


def overfitting_risk(view: RoleView, t: Thresholds = DEFAULTS) -> DimensionScore:
    val, train = view.series("val_loss"), view.series("train_loss")
    if val is None or train is None:
        return DimensionScore("overfitting_risk", None, {}, "needs both train and val loss")
    val, train = val.finite(), train.finite()
    if len(val) < 2 or len(train) < 2:
        return DimensionScore("overfitting_risk", None, {}, "too few finite loss points")
    # The train level at each evaluation: a rolling median, on bins when the run is long.
    tb = stats.binned(train.steps, train.values, t.overfit_train_bins)
    t_at = np.interp(val.steps, tb.steps, stats.rolling_median(tb.median, t.overfit_smooth_window))
    # A floor of 5 % of the starting loss keeps the ratio meaningful when both losses near zero.
    floor = t.overfit_floor_share * abs(_start_level(view, t) or 0.0)
    ratio = (val.values + floor) / np.where(t_at + floor > 0, t_at + floor, np.nan)
    ratio = ratio[np.isfinite(ratio)]
    if len(ratio) < 2:
        return DimensionScore("overfitting_risk", None, {}, "train loss is not positive")
    best = int(np.argmin(val.values))
    end = float(np.median(ratio[-t.overfit_end_points:]))
    rise = float(end - ratio[min(best, len(ratio) - 1)])
    score = 100 - max(0.0, end - t.overfit_ratio_ok) * t.overfit_ratio_penalty - max(0.0, rise) * t.overfit_rise_penalty
    return DimensionScore("overfitting_risk", _clip(score), {"val_train_ratio_end": end, "ratio_rise_since_val_min": rise})


def score_run(view: RoleView, findings: Sequence[Finding],
              thresholds: Thresholds = DEFAULTS) -> tuple[float | None, tuple[DimensionScore, ...]]:
    t = thresholds
    dims = (
        convergence_speed(view, t),
        stability(view, t),
        gradient_health(view, findings, t),
        resource_efficiency(view),
        overfitting_risk(view, t),
    )
    assert tuple(d.name for d in dims) == DIMENSIONS
    available = [d.score for d in dims if d.score is not None]
    if not available:
        return None, dims
    # Only problems cost points: an explained symptom is its explainer's, which already paid.
    penalty = sum(t.penalty_critical if f.level == CRITICAL else t.penalty_warning for f in findings if f.is_problem)
    return _clip(float(np.mean(available)) - penalty), dims
