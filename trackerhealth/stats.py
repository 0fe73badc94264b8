"""Robust statistics shared by the diagnoses: binning, rolling medians, noise, spikes, periods.

Everything works on runs of any length and cadence: long series are reduced to a bounded number of
bins first (so a 10^7-step run costs the same as a 10^4-step one), and every statistic is relative
or robust (median/MAD) so the scale of the loss does not matter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

# scipy is imported where it is used: loading scipy.stats takes most of a second, and a re-scan in
# which every run keeps its report (or `--help`) should not pay for it.

MAD_TO_SIGMA = 1.4826


# np.median is written for any shape, axis and dtype; on the short series the diagnoses take many medians
# of (a run's head, a window, a fifth of its evaluations) its checks cost ~10x the partition itself, and
# the leave-one-family-out re-derivation takes ~10^6 of them. These two give np.median's value exactly
# (the middle of a partition; the mean of the two middles for an even count; NaN when any value is NaN)
# for the 1-D series and row blocks the diagnoses pass.
def median(values: np.ndarray) -> float:
    """``float(np.median(values))`` for a 1-D series (NaN when empty or when any value is NaN)."""
    v = np.asarray(values).ravel()
    if v.dtype.kind != "f":
        v = v.astype(float)  # a float32 series keeps its dtype, as np.median's mean of the middles does
    n = v.size
    if n == 0:
        return float("nan")
    k = n // 2
    part = np.partition(v, (k - 1, k, n - 1) if n > 1 else (0,))
    if np.isnan(part[-1]):  # partition puts NaN last
        return float("nan")
    return float(part[k]) if n % 2 else float((part[k - 1] + part[k]) / 2)


def row_medians(block: np.ndarray) -> np.ndarray:
    """``np.median(block, axis=1)`` for a 2-D block of finite values (one row a bin or a chunk)."""
    width = block.shape[1]
    k = width // 2
    if width % 2:
        return np.partition(block, k, axis=1)[:, k]
    part = np.partition(block, (k - 1, k), axis=1)
    return (part[:, k - 1] + part[:, k]) / 2


@dataclass(frozen=True)
class Binned:
    """A series reduced to equal-count bins: per-bin step centre, median, min and max."""

    steps: np.ndarray
    median: np.ndarray
    low: np.ndarray
    high: np.ndarray


def binned(steps: np.ndarray, values: np.ndarray, n_bins: int = 200) -> Binned:
    """Reduce to at most ``n_bins`` equal-count bins (finite values only).

    Every point belongs to exactly one bin, in order. When ``n_bins`` does not divide the
    number of points, the first ``n % n_bins`` bins hold one point more than the others
    (``numpy.array_split``'s rule): bin sizes differ by at most one, and no point is dropped.
    """
    mask = np.isfinite(values)
    steps, values = steps[mask], values[mask]
    n = len(values)
    if n <= n_bins:
        return Binned(steps, values, values, values)
    size, big = divmod(n, n_bins)
    # Two reshapes (the ``big`` bins of size+1, then the bins of size) keep this one vectorised
    # pass over the data, however long the run; a Python loop over bins would not.
    parts = []
    edge = big * (size + 1)
    for lo, hi, width in ((0, edge, size + 1), (edge, n, size)):
        if hi > lo:
            v = values[lo:hi].reshape(-1, width)
            s = steps[lo:hi].reshape(-1, width)
            parts.append((s[:, width // 2], row_medians(v), v.min(axis=1), v.max(axis=1)))
    return Binned(*(np.concatenate(cols) for cols in zip(*parts)))


def typical(values: np.ndarray, max_points: int = 20_000) -> float:
    """The median of a long series from at most ``max_points`` evenly strided points.

    For a typical level (a layer's gradient norm, a time unit) the strided median is the median
    to well within its own noise, at a fixed cost however long the run.
    """
    if len(values) > max_points:
        values = values[:: len(values) // max_points]
    return median(values)


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    window = max(1, min(int(window), len(values)))
    if window % 2 == 0:
        window += 1
    if window <= 1 or len(values) == 0:
        return values.copy()
    from scipy import ndimage

    return ndimage.median_filter(values, size=window, mode="nearest")


class Trend(NamedTuple):
    """A least-squares line: slope, intercept and the slope's t statistic."""

    slope: float
    intercept: float
    t: float


def trend(steps: np.ndarray, values: np.ndarray) -> Trend:
    """Least-squares line through ``values``; ``t`` is slope over its standard error (-inf for an
    exactly falling line, 0 for an exactly flat or rising one): how clearly the series falls beyond its noise.

    The same numbers as ``scipy.stats.linregress`` (``tests/test_stats.py`` checks it), written out in
    numpy: linregress's argument-checking wrapper costs about half a millisecond a call, most of the
    time the diagnoses spend on a short series, and a scan calls this a few times per run.
    """
    x = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2:
        raise ValueError("a trend needs at least two points")
    dx, dy = x - x.mean(), y - y.mean()
    sxx, syy, sxy = float(dx @ dx), float(dy @ dy), float(dx @ dy)
    if sxx == 0:
        raise ValueError("cannot fit a trend: all steps are identical")
    slope = sxy / sxx
    intercept = float(y.mean()) - slope * float(x.mean())
    if n == 2 or syy == 0:
        stderr = 0.0
    else:
        r = min(max(sxy / np.sqrt(sxx * syy), -1.0), 1.0)
        stderr = float(np.sqrt((1 - r * r) * syy / sxx / (n - 2)))
    t = slope / stderr if stderr > 0 else (-np.inf if slope < 0 else 0.0)
    return Trend(float(slope), float(intercept), float(t))


def mad(values: np.ndarray) -> float:
    """Median absolute deviation scaled to a normal sigma."""
    if len(values) == 0:
        return float("nan")
    med = median(values)
    return float(MAD_TO_SIGMA * median(np.abs(values - med)))


def spikes(values: np.ndarray, window: int, z: float, min_rel: float) -> np.ndarray:
    """Indices of isolated upward spikes: far above a rolling median in robust (MAD) units.

    ``min_rel`` also asks the excess to be a fraction of the local level, so a perfectly flat
    series with a tiny wobble does not produce spikes out of a near-zero MAD.
    """
    if len(values) < 5:
        return np.array([], dtype=np.int64)
    base = rolling_median(values, window)
    resid = values - base
    scale = mad(resid)
    if not np.isfinite(scale) or scale == 0:
        scale = np.finfo(float).eps
    excess = resid / scale
    local = np.abs(base) + 1e-12
    hit = (excess > z) & (resid > min_rel * local)
    idx = np.flatnonzero(hit)
    if len(idx) == 0:
        return idx
    # Collapse runs of adjacent hits to the tallest point: one spike, one index.
    groups = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
    return np.array([g[np.argmax(resid[g])] for g in groups], dtype=np.int64)


def lr_restarts(lr_steps: np.ndarray | None, lr_values: np.ndarray | None, rel_jump: float = 0.5) -> np.ndarray:
    """Steps where the learning rate jumps up (a schedule restart or warm-up end), for exclusion."""
    if lr_steps is None or lr_values is None or len(lr_values) < 2:
        return np.array([])
    v = lr_values
    prev = np.maximum(np.abs(v[:-1]), 1e-30)
    jump = (v[1:] - v[:-1]) / prev > rel_jump
    return lr_steps[1:][jump]


def warmup_end(lr_steps: np.ndarray | None, lr_values: np.ndarray | None) -> float | None:
    """The step at which a learning-rate warm-up ends (its first peak), or None."""
    if lr_steps is None or lr_values is None or len(lr_values) < 3:
        return None
    finite = np.isfinite(lr_values)
    v, s = lr_values[finite], lr_steps[finite]
    if len(v) < 3:
        return None
    peak = int(np.argmax(v))
    if peak == 0 or v[0] >= 0.9 * v[peak]:
        return None
    return float(s[peak])


def local_noise(values: np.ndarray, chunk: int = 5) -> tuple[float, float]:
    """Fluctuation of a series about its short moving level, and that level (both robust).

    The series is cut into consecutive chunks of ``chunk`` points (a short moving window); the
    fluctuation is the median over chunks of the within-chunk MAD, the level the median of the
    chunk medians' absolute value. O(n), so a 10^7-point loss costs one reshape.
    """
    values = values[np.isfinite(values)]
    n = (len(values) // chunk) * chunk
    if n < 2 * chunk:
        return float("nan"), float("nan")
    v = values[len(values) - n:].reshape(-1, chunk)
    med = row_medians(v)
    spread = MAD_TO_SIGMA * row_medians(np.abs(v - med[:, None]))
    return median(spread), median(np.abs(med))


def head_tail(values: np.ndarray, head: float = 0.02, tail: float = 0.2) -> tuple[float, float]:
    """Robust level of the start (first ``head`` share, at least 3 points) and the last ``tail`` share.

    The start is short on purpose: a loss that halves in its first 5 % of steps has improved,
    and a 10 % head would already sit on the plateau.
    """
    n = len(values)
    h = values[: min(n, max(3, int(n * head)))]
    t = values[n - max(1, int(n * tail)):]
    return median(h), median(t)




@dataclass(frozen=True)
class Comb:
    """A periodic pattern in event positions: the period, which events are in phase, how well."""

    period: float
    in_phase: np.ndarray  # boolean mask over the events
    cycles_hit: int  # distinct cycles holding an in-phase event
    coverage: float  # share of the run's cycles that hold an in-phase event
    chance: float  # the coverage randomly placed events would reach
    p_value: float  # family-wise chance of hitting this many cycles at random (Bonferroni over candidates)


def periodic_comb(positions: np.ndarray, start: float, end: float, min_period: float,
                  candidates: np.ndarray | None = None, tolerance: float = 0.01, from_gaps: bool = True) -> Comb | None:
    """Find a period whose comb of same-phase events covers the run, ignoring unrelated events.

    For each candidate period P (gaps between events, plus ``candidates`` such as the epoch
    length), events are folded onto their phase within P and the largest same-phase cluster is
    the periodic part. Coverage counts distinct cycles holding an in-phase event (two events in
    one cycle count once; the cycles counted start at the first in-phase event), and is compared
    with the coverage that the same number of randomly
    placed events would reach, so a run full of random spikes does not look periodic. With
    ``from_gaps`` false only ``candidates`` are tried (the periods a known cause allows). Among
    near-equal periods the shortest wins (a period's multiples score alike). ``p_value`` is the
    binomial probability of hitting that many cycles by chance, multiplied by the number of
    periods tried: with few cycles and many spikes, a perfect-looking comb can be luck.
    """
    positions = np.asarray(positions, dtype=float)
    n = len(positions)
    span = end - start
    if n < 3 or span <= 0:
        return None
    ordered = np.sort(positions)
    gaps = [ordered[k:] - ordered[:-k] for k in range(1, min(4, n))] if from_gaps else []
    extra = [np.asarray(candidates, dtype=float)] if candidates is not None else []
    if not gaps and not extra:
        return None
    cands = np.concatenate(gaps + extra)
    cands = np.unique(np.round(cands[(cands >= min_period) & (cands <= span / 3)], 6))
    found: list[tuple[float, Comb]] = []
    for period in cands:
        tol = max(tolerance * period, min_period / 3)
        rel = positions - start
        phase = np.mod(rel, period)
        d = np.abs(phase[:, None] - phase[None, :])
        d = np.minimum(d, period - d)  # circular distance on the phase
        near = d <= tol
        centre = int(near.sum(axis=1).argmax())
        mask = near[centre]
        # Which cycle an event belongs to, measured from its phase centre so the window never
        # straddles a cycle boundary.
        cycle = np.floor((rel - phase[centre] + period / 2) / period)
        hit = len(np.unique(cycle[mask]))
        # Cycles are counted from the first in-phase event: a bad shard stands out only once the
        # model fits the rest (early on every batch's loss is high), so the cycles before it cannot
        # hold a spike. Chance and p-value are taken over the same stretch and its events.
        first = float(positions[mask].min())
        cycles = min(span / period, (end - first) / period + 1)
        # Coverage counts only the cycles whose in-phase place the run reached: one it ended before cannot hold
        # a spike (a bad shard met in 5 of 5 reachable cycles read as 5 of 5.99, under the coverage asked: torch
        # run seq2seq_bad_shard_noshuffle, 80 steps per epoch, ending 79 steps after its fifth spike). Chance and
        # the p-value keep the fractional count, the more cautious one.
        reached = min(span / period, np.floor((end - first) / period) + 1)
        events = int(np.sum(positions >= first))
        coverage = min(1.0, hit / reached)
        chance = 1.0 - np.exp(-(events / cycles) * min(1.0, 2 * tol / period))
        excess = (coverage - chance) / (1.0 - chance) if chance < 1.0 else 0.0
        from scipy import stats

        p_hit = float(stats.binom.sf(hit - 1, max(hit, int(np.ceil(cycles))), chance))
        comb = Comb(float(period), mask, hit, float(coverage), float(chance), min(1.0, p_hit * len(cands)))
        found.append((excess * coverage, comb))
    if not found:
        return None
    top = max(score for score, _ in found)
    if top <= 0:
        return max(found, key=lambda sc: sc[0])[1]
    # Multiples of the true period score alike; the shortest near-best period is the period.
    return min((comb for score, comb in found if score >= 0.9 * top), key=lambda comb: comb.period)
