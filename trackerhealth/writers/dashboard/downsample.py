"""Shrink long metric series for drawing without hiding what matters.

A chart is a few thousand pixels wide, so a 1,000,000-step series is cut into step buckets and each
bucket keeps its minimum and its maximum (in step order). Unlike plain decimation (every n-th
point), a one-step spike is the maximum of its bucket and is always kept. NaN/Inf points cannot be
drawn on a line (plotting libraries drop them), so they are returned separately, bucketed the same
way, as explicit markers. Finding ranges are kept in more detail: a narrow range keeps every raw
point, a wider one gets its own min/max pass, so zooming into a finding shows the real data.

Pure numpy; no plotting import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...schema import Series

LINE_BUCKETS = 2000  # ~ the width of a wide screen in pixels; two points per bucket
HEATMAP_COLUMNS = 800
RAW_RANGE_POINTS = 2000  # a finding range with at most this many points keeps all of them
MAX_REFINED_RANGES = 8

NONFINITE_KINDS = ("NaN", "+Inf", "-Inf")


@dataclass(frozen=True)
class Markers:
    """Non-finite points of one kind: one marker per run of consecutive bad points.

    ``steps`` is the first bad step of the run, ``y`` where to draw it (the last finite value
    before it, so the marker sits where the line broke off), ``counts`` how many bad points the
    run holds and ``last_steps`` the last of them.
    """

    kind: str
    steps: np.ndarray
    y: np.ndarray
    counts: np.ndarray
    last_steps: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class Reduced:
    """A series ready to draw: kept finite points, non-finite markers and the original size."""

    steps: np.ndarray
    values: np.ndarray
    original: int
    markers: tuple[Markers, ...] = field(default=())

    @property
    def kept(self) -> int:
        return len(self.steps) + sum(int(m.counts.size) for m in self.markers)


def bucket_ids(steps: np.ndarray, lo: float, hi: float, buckets: int) -> np.ndarray:
    """Equal-width step buckets over [lo, hi]; non-decreasing when ``steps`` is sorted."""
    if len(steps) == 0:
        return np.zeros(0, dtype=np.int64)
    if not hi > lo:
        return np.zeros(len(steps), dtype=np.int64)
    b = np.floor((steps - lo) * (buckets / (hi - lo))).astype(np.int64)
    np.clip(b, 0, buckets - 1, out=b)
    return b


def _segments(b: np.ndarray) -> np.ndarray:
    """Start index of each run of equal bucket ids (``b`` sorted)."""
    if len(b) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], b[1:] != b[:-1])))


def _first_match_per_segment(mask: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """For each segment, the first index where ``mask`` holds (segments without one are absent)."""
    idx = np.flatnonzero(mask)
    if len(idx) == 0:
        return idx
    _, first = np.unique(seg[idx], return_index=True)
    return idx[first]


def extreme_indices(steps: np.ndarray, values: np.ndarray, buckets: int) -> np.ndarray:
    """Indices of the min and max finite value of every step bucket, plus both finite ends."""
    n = len(steps)
    finite = np.isfinite(values)
    if n == 0 or not finite.any():
        return np.zeros(0, dtype=np.int64)
    b = bucket_ids(steps, float(steps[0]), float(steps[-1]), buckets)
    starts = _segments(b)
    seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    low = np.where(finite, values, np.inf)
    high = np.where(finite, values, -np.inf)
    mins = np.minimum.reduceat(low, starts)
    maxs = np.maximum.reduceat(high, starts)
    at_min = _first_match_per_segment(finite & (low == mins[seg]), seg)
    at_max = _first_match_per_segment(finite & (high == maxs[seg]), seg)
    fin = np.flatnonzero(finite)
    return np.unique(np.concatenate((at_min, at_max, fin[:1], fin[-1:])))


def _range_indices(steps: np.ndarray, values: np.ndarray, ranges: Iterable[tuple[float, float]], buckets: int) -> list[np.ndarray]:
    """Extra detail inside finding ranges: every point of a narrow range, min/max of a wide one."""
    out = []
    span = float(steps[-1] - steps[0]) if len(steps) else 0.0
    # Wide ranges (a quarter of the run or more) already look right at full view.
    chosen = [(a, b) for a, b in ranges if span <= 0 or (b - a) < 0.25 * span][:MAX_REFINED_RANGES]
    for a, b in chosen:
        pad = max(1.0, 0.5 * (b - a), 0.0005 * span)  # some context either side, even for a one-step finding
        lo = int(np.searchsorted(steps, a - pad, side="left"))
        hi = int(np.searchsorted(steps, b + pad, side="right"))
        if hi - lo <= 0:
            continue
        if hi - lo <= RAW_RANGE_POINTS:
            idx = np.arange(lo, hi)
            out.append(idx[np.isfinite(values[lo:hi])])
        else:
            out.append(lo + extreme_indices(steps[lo:hi], values[lo:hi], buckets))
    return out


def nonfinite_markers(steps: np.ndarray, values: np.ndarray, buckets: int) -> tuple[Markers, ...]:
    """NaN, +Inf and -Inf points as markers: one per run of consecutive bad points (a run that goes
    NaN and stays NaN is one marker, with its count and last step), and at most one per bucket when
    runs are more numerous than buckets."""
    bad = ~np.isfinite(values)
    if len(values) == 0 or not bad.any():
        return ()
    n = len(values)
    last_finite = np.maximum.accumulate(np.where(~bad, np.arange(n), -1))
    fin = np.flatnonzero(~bad)
    fallback = float(values[fin[0]]) if len(fin) else 1.0
    b = bucket_ids(steps, float(steps[0]), float(steps[-1]), buckets)
    out = []
    for kind, mask in (("NaN", np.isnan(values)), ("+Inf", values == np.inf), ("-Inf", values == -np.inf)):
        idx = np.flatnonzero(mask)
        if len(idx) == 0:
            continue
        breaks = np.flatnonzero(np.diff(idx) != 1) + 1
        run_first = idx[np.concatenate(([0], breaks))]
        run_last = idx[np.concatenate((breaks - 1, [len(idx) - 1]))]
        run_count = run_last - run_first + 1
        if len(run_first) > buckets:
            _, group = np.unique(b[run_first], return_index=True)
            run_count = np.add.reduceat(run_count, group)
            run_last = run_last[np.concatenate((group[1:] - 1, [len(run_first) - 1]))]
            run_first = run_first[group]
        lf = last_finite[run_first]
        y = np.where(lf >= 0, values[np.maximum(lf, 0)], fallback)
        out.append(Markers(kind, steps[run_first], y.astype(np.float64), run_count.astype(np.int64), steps[run_last]))
    return tuple(out)


def reduce_series(series: Series, buckets: int = LINE_BUCKETS, keep_ranges: Sequence[tuple[float, float]] = ()) -> Reduced:
    """The points to draw for ``series`` (see the module docstring)."""
    steps = np.asarray(series.steps, dtype=np.float64)
    values = np.asarray(series.values, dtype=np.float64)
    n = len(steps)
    markers = nonfinite_markers(steps, values, buckets)
    if n <= 2 * buckets:
        keep = np.isfinite(values)
        return Reduced(steps[keep], values[keep], n, markers)
    parts = [extreme_indices(steps, values, buckets)]
    parts += _range_indices(steps, values, keep_ranges, buckets)
    idx = np.unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
    return Reduced(steps[idx], values[idx], n, markers)


# -- per-layer heatmap --------------------------------------------------------------------------
@dataclass(frozen=True)
class Grid:
    """Per-layer values on a shared step axis: one row per layer (model order), one column per step
    bucket. ``high`` is each cell's largest finite value (spikes stay visible), ``low`` its smallest;
    NaN where the layer logged nothing finite there. ``bad`` lists non-finite cells as
    ``(column, row, kind)``."""

    x: np.ndarray
    labels: tuple[str, ...]
    keys: tuple[str, ...]
    high: np.ndarray  # rows x columns
    low: np.ndarray
    bad: tuple[tuple[int, int, str], ...]
    original: int
    exact: bool  # columns are the logged steps themselves (no aggregation)

    @property
    def kept(self) -> int:
        return int(np.isfinite(self.high).sum())


def layer_grid(group: Sequence[tuple[str, str, Series]], columns: int = HEATMAP_COLUMNS) -> Grid | None:
    """Bucket a per-layer group (``RoleView.group``) onto one step axis."""
    if not group:
        return None
    labels = tuple(label for label, _, _ in group)
    keys = tuple(key for _, key, _ in group)
    original = sum(len(s) for _, _, s in group)
    first = group[0][2].steps
    same = all(len(s) == len(first) and np.array_equal(s.steps, first) for _, _, s in group)
    if same and len(first) <= columns:
        high = np.vstack([np.where(np.isfinite(s.values), s.values, np.nan) for _, _, s in group])
        bad = tuple((int(c), r, _kind(s.values[c])) for r, (_, _, s) in enumerate(group)
                    for c in np.flatnonzero(~np.isfinite(s.values)))
        return Grid(np.asarray(first, dtype=np.float64), labels, keys, high, high, bad, original, True)
    lo = min(float(s.steps[0]) for _, _, s in group)
    hi = max(float(s.steps[-1]) for _, _, s in group)
    ncol = columns if hi > lo else 1
    width = (hi - lo) / ncol if hi > lo else 1.0
    x = lo + (np.arange(ncol) + 0.5) * width
    high = np.full((len(group), ncol), np.nan)
    low = np.full((len(group), ncol), np.nan)
    bad: list[tuple[int, int, str]] = []
    for r, (_, _, s) in enumerate(group):
        v = np.asarray(s.values, dtype=np.float64)
        b = bucket_ids(np.asarray(s.steps, dtype=np.float64), lo, hi, ncol)
        starts = _segments(b)
        cols = b[starts]
        finite = np.isfinite(v)
        mx = np.maximum.reduceat(np.where(finite, v, -np.inf), starts)
        mn = np.minimum.reduceat(np.where(finite, v, np.inf), starts)
        ok = np.isfinite(mx)
        high[r, cols[ok]] = mx[ok]
        low[r, cols[ok]] = mn[ok]
        if not finite.all():
            kinds: dict[int, list[str]] = {}
            for kind, mask in (("NaN", np.isnan(v)), ("+Inf", v == np.inf), ("-Inf", v == -np.inf)):
                for c in np.unique(b[mask]):
                    kinds.setdefault(int(c), []).append(kind)
            bad.extend((c, r, "/".join(k)) for c, k in sorted(kinds.items()))
    return Grid(x, labels, keys, high, low, tuple(bad), original, False)


def _kind(value: float) -> str:
    if np.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"
