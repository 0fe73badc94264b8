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
- ``score`` — the mean of the available dimensions, less ``penalty_critical`` per critical and
  ``penalty_warning`` per warning finding, floored at 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import stats
from .roles import RoleView
from .schema import CRITICAL, DIMENSIONS, WARNING, DimensionScore, Finding, Series

PENALTY_CRITICAL = 30.0
PENALTY_WARNING = 10.0
TAIL_POINTS = 50


def _clip(x: float) -> float:
    return float(round(min(100.0, max(0.0, x)), 1))


def _has_nonfinite(s: Series | None) -> bool:
    return s is not None and not np.isfinite(s.values).all()


def convergence_speed(view: RoleView) -> DimensionScore:
    loss = view.series("train_loss")
    if loss is None:
        return DimensionScore("convergence_speed", None, {}, "no train loss logged")
    f = loss.finite()
    if len(f) < 10:
        return DimensionScore("convergence_speed", None, {"points": len(f)}, "fewer than 10 finite train-loss points")
    b = stats.binned(f.steps, f.values, 200)
    smooth = stats.rolling_median(b.median, 5)
    start, best = float(smooth[0]), float(smooth.min())
    if start <= 0 or start <= best:
        return DimensionScore("convergence_speed", 0.0, {"start_loss": start, "best_loss": best}, "loss never improved")
    target = start - 0.9 * (start - best)
    reached = int(np.argmax(smooth <= target))
    span = b.steps[-1] - b.steps[0]
    share = float((b.steps[reached] - b.steps[0]) / span) if span > 0 else 1.0
    improvement = (start - best) / start
    score = 100 * (0.5 * (1 - share) + 0.5 * min(1.0, improvement / 0.5))
    basis = {"start_loss": start, "best_loss": best, "target_loss": target, "step_reached": float(b.steps[reached]),
             "share_of_run": share, "relative_improvement": improvement}
    return DimensionScore("convergence_speed", _clip(score), basis)


def _start_level(view: RoleView) -> float | None:
    loss = view.series("train_loss")
    if loss is None or len(loss.finite()) < 3:
        return None
    head, _ = stats.head_tail(loss.finite().values)
    return head


def stability(view: RoleView) -> DimensionScore:
    val = view.series("val_loss")
    role = "val_loss" if val is not None and len(val.finite()) >= 5 else "train_loss"
    s = view.series(role)
    if s is None:
        return DimensionScore("stability", None, {}, "no loss logged")
    if _has_nonfinite(s):
        return DimensionScore("stability", 0.0, {"nonfinite_points": float((~np.isfinite(s.values)).sum())}, f"{view.key(role)} became NaN/Inf")
    if len(s) < 5:
        return DimensionScore("stability", None, {"points": len(s)}, "fewer than 5 points")
    tail = s.values[-TAIL_POINTS:]
    # The recent wobble (robust std of point-to-point changes) measured against how far the loss
    # has come: a loss near zero is not unstable because its coefficient of variation is large.
    wobble = stats.mad(np.diff(tail)) / np.sqrt(2)
    progress = max(float(np.max(s.values[: max(3, len(s) // 50)])) - float(np.min(s.values)), 1e-12)
    ratio = wobble / progress
    basis = {"metric_is_val": float(role == "val_loss"), "points": float(len(tail)), "recent_wobble": wobble,
             "progress": progress, "wobble_over_progress": ratio}
    return DimensionScore("stability", _clip(100 * np.exp(-ratio / 0.15)), basis)


def gradient_health(view: RoleView, findings: Sequence[Finding]) -> DimensionScore:
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
    if bad[-max(3, len(bad) // 10):].mean() > 0.5:
        return DimensionScore("gradient_health", 0.0, {}, "gradient norm is NaN/Inf at the end of the run")
    v = g.values[~bad]  # a few overflow steps skipped by a loss scaler are not the run's gradient
    if len(v) < 5:
        return DimensionScore("gradient_health", None, {"points": len(v)}, "fewer than 5 gradient-norm points")
    # The second half: early norms are large by nature and shrink as the loss falls; mixing the two
    # would call every converging run oscillating.
    v = v[len(v) // 2:]
    med = float(np.median(v))
    std = float(np.std(v))
    ratio = std / med if med > 0 else float("inf")
    spike_share = float((v > 10 * med).mean()) if med > 0 else 1.0
    score = 100 * (1 - min(1.0, ratio / 4)) - 200 * spike_share
    vanish = next((f for f in findings if f.id == "vanishing-gradients" and f.is_problem), None)
    if vanish is not None:
        score = min(score, 20.0 if vanish.level == CRITICAL else 50.0)
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


def overfitting_risk(view: RoleView) -> DimensionScore:
    val, train = view.series("val_loss"), view.series("train_loss")
    if val is None or train is None:
        return DimensionScore("overfitting_risk", None, {}, "needs both train and val loss")
    val, train = val.finite(), train.finite()
    if len(val) < 2 or len(train) < 2:
        return DimensionScore("overfitting_risk", None, {}, "too few finite loss points")
    # The train level at each evaluation: a rolling median, on bins when the run is long.
    tb = stats.binned(train.steps, train.values, 2000)
    t_at = np.interp(val.steps, tb.steps, stats.rolling_median(tb.median, 5))
    # A floor of 5 % of the starting loss keeps the ratio meaningful when both losses near zero.
    floor = 0.05 * abs(_start_level(view) or 0.0)
    ratio = (val.values + floor) / np.where(t_at + floor > 0, t_at + floor, np.nan)
    ratio = ratio[np.isfinite(ratio)]
    if len(ratio) < 2:
        return DimensionScore("overfitting_risk", None, {}, "train loss is not positive")
    best = int(np.argmin(val.values))
    end = float(np.median(ratio[-3:]))
    rise = float(end - ratio[min(best, len(ratio) - 1)])
    score = 100 - max(0.0, end - 1.2) * 40 - max(0.0, rise) * 20
    return DimensionScore("overfitting_risk", _clip(score), {"val_train_ratio_end": end, "ratio_rise_since_val_min": rise})


def score_run(view: RoleView, findings: Sequence[Finding]) -> tuple[float | None, tuple[DimensionScore, ...]]:
    dims = (
        convergence_speed(view),
        stability(view),
        gradient_health(view, findings),
        resource_efficiency(view),
        overfitting_risk(view),
    )
    assert tuple(d.name for d in dims) == DIMENSIONS
    available = [d.score for d in dims if d.score is not None]
    if not available:
        return None, dims
    penalty = sum(PENALTY_CRITICAL if f.level == CRITICAL else PENALTY_WARNING for f in findings if f.level in (CRITICAL, WARNING))
    return _clip(float(np.mean(available)) - penalty), dims
