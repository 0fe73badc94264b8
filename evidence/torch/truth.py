"""Ground truth that does not come from the detectors: a fault run against its sane twin.

A twin is the same family, data, seed and model with the one setting put right (the LR that
works, shuffling on, a scaled auxiliary loss, a fast loader, ...). Each ``confirm_*`` compares what the
two runs really logged (their in-memory :class:`~.sinks.Logged` taps) and returns
``(confirmed, measures)``; the generator records the measures in the manifest and labels a run with a
fault only when it is confirmed. None of these criteria reuses a diagnosis' statistic or threshold:
they ask what the twin shows is possible (how fast, how low, how steady), not what the curve looks
like on its own.
"""

from __future__ import annotations

import numpy as np

from .sinks import Logged

# How far apart twin and fault must be before the fault counts as real. These are the issue's
# definitions ("reaches the twin's final loss >= 4x later or never", "ends far above the twin's with
# a larger swing"), fixed before any detector was scored on the corpus.
SLOW_FACTOR = 4.0
FAR_ABOVE = 1.5
LARGER_SWING = 1.5
OVERFIT_GAP = 0.10
EXPLOSION_FACTOR = 100.0
SPIKE_FACTOR = 3.0
VANISH_FACTOR = 0.01
SLOWER_THROUGHPUT = 0.5
STALLED_TASK = 0.1


def _smooth(v: np.ndarray) -> np.ndarray:
    """Running median over ~5 % of the run: the level of the loss without its batch noise.

    The start is padded with the first point (where a run starts is its loss at initialisation, and a blow-up in
    the first steps must not lift it), the end is not: there the window shrinks to the last ~2.5 % of the points.
    Padded at the end as well, as it was until 2026-12-07, the last level was the last point itself (it filled the
    window's majority), so every end ratio compared two single batches; the ftt family's batch-2 run was confirmed
    oscillating on its last, 2-row batch (4.7x the twin's last point; its last 2.5 % sit at 0.16x the twin's)."""
    w = max(3, len(v) // 20) | 1
    pad = np.pad(v, (w // 2, 0), mode="edge")
    return np.array([np.median(pad[i:i + w]) for i in range(len(v))])


def _finite(logged: Logged, key: str) -> tuple[np.ndarray, np.ndarray]:
    got = logged.get(key)
    if got is None:
        raise KeyError(f"ground truth needs {key!r}, which the run did not log (it logged {logged.keys()})")
    steps, values = got
    ok = np.isfinite(values)
    return steps[ok], values[ok]


def _first_reach(steps: np.ndarray, level: np.ndarray, target: float) -> float:
    hit = np.flatnonzero(level <= target)
    return float(steps[hit[0]]) if len(hit) else float("inf")


def level_at_end(logged: Logged, key: str) -> float:
    """The smoothed level of a run's loss at its last logged step."""
    _, v = _finite(logged, key)
    return float(_smooth(v)[-1]) if len(v) else float("nan")


def _swing(v: np.ndarray) -> float:
    """Median absolute deviation of the raw loss from its level over the second half, relative to the level."""
    half = v[len(v) // 2:]
    level = _smooth(half)
    return float(np.median(np.abs(half - level)) / max(np.median(np.abs(level)), 1e-12))


def has_nonfinite(logged: Logged, keys: tuple[str, ...]) -> tuple[bool, dict]:
    """Any NaN/Inf in the named keys (loss, val loss, total grad norm), with its first step."""
    first = {}
    for key in keys:
        got = logged.get(key)
        if got is None:
            continue
        bad = np.flatnonzero(~np.isfinite(got[1]))
        if len(bad):
            first[key] = float(got[0][bad[0]])
    return bool(first), {"first_nonfinite": first}


def confirm_slow(fault: Logged, twin: Logged, loss_key: str) -> tuple[bool, dict]:
    """Slow: the fault reaches the level the twin reaches a quarter into its run >= 4x later, or never,
    while it does learn (its level falls) and is no noisier than the twin."""
    ts, tv = _finite(twin, loss_key)
    fs, fv = _finite(fault, loss_key)
    tl, fl = _smooth(tv), _smooth(fv)
    target = float(tl[len(tl) // 4])
    t_twin = _first_reach(ts, tl, target)
    t_fault = _first_reach(fs, fl, target)
    ratio = t_fault / t_twin if t_twin > 0 else float("inf")
    learns = fl[-1] < 0.95 * fl[0]
    swing_ratio = _swing(fv) / max(_swing(tv), 1e-12)
    measures = {"target": target, "twin_steps": t_twin, "fault_steps": t_fault, "slow_ratio": ratio,
                "fault_learns": bool(learns), "swing_ratio": swing_ratio}
    return bool(ratio >= SLOW_FACTOR and learns and swing_ratio < LARGER_SWING), measures


def confirm_oscillation(fault: Logged, twin: Logged, loss_key: str) -> tuple[bool, dict]:
    """Oscillating or not decreasing: the fault's level ends far above the twin's, and it either swings
    more than the twin or does not learn at all."""
    _, tv = _finite(twin, loss_key)
    _, fv = _finite(fault, loss_key)
    tl, fl = _smooth(tv), _smooth(fv)
    end_ratio = float(fl[-1] / max(tl[-1], 1e-12))
    swing_ratio = _swing(fv) / max(_swing(tv), 1e-12)
    fell = float((fl[0] - fl[-1]) / max(abs(fl[0]), 1e-12))
    measures = {"end_ratio": end_ratio, "swing_ratio": swing_ratio, "fault_fell": fell}
    return bool(end_ratio >= FAR_ABOVE and (swing_ratio >= LARGER_SWING or fell < 0.1)), measures


def confirm_overfitting(fault: Logged, twin: Logged, train_key: str, val_key: str) -> tuple[bool, dict]:
    """Overfitting: the regularised twin ends with a clearly lower val loss although the fault fits the
    training data at least as well."""
    _, fval = _finite(fault, val_key)
    _, tval = _finite(twin, val_key)
    _, ftr = _finite(fault, train_key)
    _, ttr = _finite(twin, train_key)
    gap = float(fval[-1] / max(tval[-1], 1e-12) - 1)
    fits = float(_smooth(ftr)[-1]) <= float(_smooth(ttr)[-1]) * 1.05
    measures = {"val_end_over_twin": gap, "fault_fits_train": bool(fits), "fault_val_end": float(fval[-1]), "twin_val_end": float(tval[-1])}
    return bool(gap >= OVERFIT_GAP and fits), measures


def confirm_explosion(fault: Logged, twin: Logged, grad_key: str, loss_key: str) -> tuple[bool, dict]:
    """Gradient explosion / divergence: NaN, or a total gradient norm >= 100x the twin's median (the same
    model and data trained sanely), at a step given as the onset."""
    bad, nonfinite = has_nonfinite(fault, (loss_key, grad_key))
    fs, fg = _finite(fault, grad_key)
    _, tg = _finite(twin, grad_key)
    base = float(np.median(tg)) if len(tg) else float("nan")
    peak = int(np.argmax(fg)) if len(fg) else 0
    factor = float(fg[peak] / base) if len(fg) and base > 0 else float("nan")
    measures = {**nonfinite, "grad_peak_over_twin_median": factor, "onset_step": float(fs[peak]) if len(fs) else None}
    if bad:
        first = min(nonfinite["first_nonfinite"].values())
        measures["onset_step"] = first
    return bool(bad or factor >= EXPLOSION_FACTOR), measures


def confirm_spikes_at(fault: Logged, twin: Logged, loss_key: str, spike_steps: list[float]) -> tuple[bool, dict]:
    """Periodic spikes: at the steps where the bad shard (or oversized batch) comes round, the fault's loss
    is >= 3x the twin's at the same steps, on at least three of them."""
    fs, fv = _finite(fault, loss_key)
    ts, tv = _finite(twin, loss_key)
    ratios = []
    for step in spike_steps:
        i, j = np.searchsorted(fs, step), np.searchsorted(ts, step)
        if i < len(fs) and j < len(ts) and fs[i] == step and ts[j] == step:
            ratios.append(float(fv[i] / max(tv[j], 1e-12)))
    hits = sum(r >= SPIKE_FACTOR for r in ratios)
    return bool(hits >= 3), {"spike_ratios": ratios[:20], "spikes_confirmed": hits}


def confirm_vanishing(fault: Logged, twin: Logged, first_layer_key: str) -> tuple[bool, dict]:
    """Vanishing gradients: the first layer's gradient norm is <= 1 % of the twin's (ReLU + He init, or
    residual) for the same layer shape."""
    _, fg = _finite(fault, first_layer_key)
    _, tg = _finite(twin, first_layer_key)
    ratio = float(np.median(fg) / max(np.median(tg), 1e-30))
    return bool(ratio <= VANISH_FACTOR), {"first_layer_grad_over_twin": ratio}


def confirm_bottleneck(fault_samples_per_s: float, twin_samples_per_s: float) -> tuple[bool, dict]:
    """Input bottleneck: measured throughput (samples over wall-clock seconds) at most half the twin's,
    whose loader is fast; the model and compute are the same."""
    ratio = fault_samples_per_s / twin_samples_per_s
    return bool(ratio <= SLOWER_THROUGHPUT), {"throughput_over_twin": ratio,
                                               "fault_samples_per_s": fault_samples_per_s, "twin_samples_per_s": twin_samples_per_s}


def confirm_task_stalled(fault: Logged, twin: Logged, small_task_key: str) -> tuple[bool, dict]:
    """Task imbalance: the small task's loss falls < 10 % in the fault, while in the twin (auxiliary loss
    scaled) it falls at least 3x as much."""
    _, fv = _finite(fault, small_task_key)
    _, tv = _finite(twin, small_task_key)
    fl, tl = _smooth(fv), _smooth(tv)
    f_fell = float((fl[0] - fl[-1]) / max(abs(fl[0]), 1e-12))
    t_fell = float((tl[0] - tl[-1]) / max(abs(tl[0]), 1e-12))
    return bool(f_fell < STALLED_TASK and t_fell >= 3 * max(f_fell, STALLED_TASK)), {"fault_task_fell": f_fell, "twin_task_fell": t_fell}


# A run meant to be healthy is scored as healthy only when its own logged values say it is: it
# learned, nothing went non-finite, and its validation loss did not end clearly above the best it
# reached. These are the plain meanings of the words, read off the raw values (no smoothing, no
# detector statistic); a run that fails is left out of the scoring, as an unconfirmed fault is.
HEALTHY_LEARNS = 0.9
HEALTHY_VAL_ABOVE_BEST = 0.10


def confirm_healthy(run: Logged, loss_key: str, val_key: str | None = None,
                    extra_keys: tuple[str, ...] = ()) -> tuple[bool, dict]:
    """Healthy: finite throughout, the training loss's last tenth sits below 0.9x its first tenth, and
    (when validated at least three times) the last val loss is within 10 % of the lowest."""
    bad, nonfinite = has_nonfinite(run, (loss_key,) + ((val_key,) if val_key else ()) + extra_keys)
    _, tv = _finite(run, loss_key)
    tenth = max(1, len(tv) // 10)
    start, end = float(np.median(tv[:tenth])), float(np.median(tv[-tenth:]))
    learned = end <= HEALTHY_LEARNS * start
    measures = {**nonfinite, "train_start": start, "train_end": end, "learned": bool(learned)}
    val_ok = True
    if val_key is not None and val_key in run:
        _, vv = _finite(run, val_key)
        if len(vv) >= 3:
            above = float(vv[-1] / max(float(vv.min()), 1e-12) - 1)
            val_ok = above <= HEALTHY_VAL_ABOVE_BEST
            measures.update(val_end_above_best=above, val_best_at=int(np.argmin(vv)), val_points=len(vv))
    return bool(not bad and learned and val_ok), measures


def flat_or_slow_labels(intended: list[str], confirmed_flat: bool) -> tuple[list[str], list[str]]:
    """(faults, also_acceptable) for a run meant to be slow. One that does not learn at all is the flat
    case of loss-oscillation (seed 3.1: not decreasing *or* oscillating), and its cause (LR too low,
    eps too large, init too small) is also what slow-convergence names: both readings are accepted."""
    if confirmed_flat and "slow-convergence" in intended:
        return ["loss-oscillation"], ["slow-convergence"]
    return list(intended), []


def labels_from_check(intended: list[str], confirmed: bool, measures: dict, fault: Logged, twin: Logged,
                      loss_key: str) -> tuple[list[str], list[str], dict]:
    """(faults, also_acceptable, measures) of a fault run whose twin check gave ``confirmed``: the intended
    faults when confirmed; for a run meant to be slow that was not, the flat case of loss-oscillation
    when it did not learn at all (:func:`flat_or_slow_labels`), else no label (kept, not scored)."""
    if confirmed:
        return list(intended), [], measures
    if "slow-convergence" not in intended:
        return [], [], measures
    flat, flat_measures = confirm_oscillation(fault, twin, loss_key)
    faults, also = flat_or_slow_labels(intended, flat) if flat else ([], [])
    return faults, also, {**measures, **flat_measures}
