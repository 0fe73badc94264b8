"""Downsampling keeps what a person must see: every spike, every NaN/Inf, detail inside findings.

Stress inputs are generated (size, spike and NaN placement); no diagnosis is judged here.
"""

from __future__ import annotations

import numpy as np
import pytest

from trackerhealth.schema import Series
from trackerhealth.writers.dashboard import downsample as ds


def _series(values, steps=None) -> Series:
    values = np.asarray(values, dtype=np.float64)
    steps = np.arange(len(values), dtype=np.float64) if steps is None else np.asarray(steps, dtype=np.float64)
    return Series(steps, values, np.full(len(values), np.nan))


def test_short_series_is_kept_whole():
    s = _series(np.linspace(1, 0, 500))
    r = ds.reduce_series(s)
    assert len(r.steps) == 500 and r.original == 500


@pytest.mark.parametrize("where", [0, 1, 123_457, 500_000, 999_998, 999_999])
@pytest.mark.parametrize("sign", [1, -1])
def test_one_step_spike_survives_a_million_points(where, sign):
    rng = np.random.default_rng(where)
    v = 1.0 + 0.01 * rng.standard_normal(1_000_000)
    v[where] = 1.0 + sign * 50.0
    r = ds.reduce_series(_series(v))
    assert len(r.steps) <= 2 * ds.LINE_BUCKETS + 2
    assert where in r.steps  # at its own step, with its own value
    assert r.values[np.searchsorted(r.steps, where)] == v[where]
    # plain decimation, the defect the issue names, would have lost it (unless it sits on the grid)
    stride = len(v) // (2 * ds.LINE_BUCKETS)
    if where % stride:
        assert v[::stride].max() < 2 and v[::stride].min() > 0


def test_extremes_of_every_bucket_are_kept():
    rng = np.random.default_rng(1)
    v = rng.standard_normal(200_000)
    r = ds.reduce_series(_series(v), buckets=500)
    b = ds.bucket_ids(np.arange(len(v), dtype=float), 0, len(v) - 1, 500)
    for k in (0, 17, 250, 499):
        seg = v[b == k]
        kept = r.values[ds.bucket_ids(r.steps, 0, len(v) - 1, 500) == k]
        assert kept.max() == seg.max() and kept.min() == seg.min()


def test_nonfinite_values_become_markers_with_counts():
    v = np.ones(1_000_000)
    v[300_000] = np.inf
    v[600_000:600_010] = -np.inf
    v[900_000:] = np.nan  # goes NaN and stays NaN
    r = ds.reduce_series(_series(v))
    assert np.isfinite(r.values).all()  # lines never carry NaN (plots drop them silently)
    kinds = {m.kind: m for m in r.markers}
    assert set(kinds) == {"NaN", "+Inf", "-Inf"}
    assert list(kinds["+Inf"].steps) == [300_000] and list(kinds["+Inf"].counts) == [1]
    assert list(kinds["-Inf"].steps) == [600_000] and list(kinds["-Inf"].counts) == [10]
    nan = kinds["NaN"]
    assert list(nan.steps) == [900_000] and list(nan.counts) == [100_000] and list(nan.last_steps) == [999_999]
    assert list(nan.y) == [1.0]  # drawn where the line broke off


def test_scattered_nans_are_bounded_by_buckets():
    v = np.ones(1_000_000)
    v[::3] = np.nan  # pathological: a third of all points
    m = ds.nonfinite_markers(np.arange(len(v), dtype=float), v, 1000)
    assert len(m) == 1 and len(m[0]) <= 1000 and m[0].counts.sum() == len(v[::3])


def test_all_nan_series_still_has_markers():
    r = ds.reduce_series(_series(np.full(10, np.nan)))
    assert len(r.steps) == 0 and r.markers[0].counts.sum() == 10


def test_finding_ranges_keep_raw_points():
    rng = np.random.default_rng(2)
    v = rng.standard_normal(1_000_000)
    r = ds.reduce_series(_series(v), keep_ranges=[(400_000, 400_300)])
    inside = r.steps[(r.steps >= 400_000) & (r.steps <= 400_300)]
    assert len(inside) == 301  # every step of the finding, for zooming in
    wide = ds.reduce_series(_series(v), keep_ranges=[(100_000, 200_000)])
    assert len(ds.reduce_series(_series(v)).steps) < len(wide.steps) <= 3 * 2 * ds.LINE_BUCKETS


def test_irregular_fractional_steps():
    steps = np.cumsum(np.random.default_rng(3).random(50_000) * 3) + 0.5
    v = np.sin(steps / 100)
    v[777] = 9.0
    r = ds.reduce_series(_series(v, steps))
    assert steps[777] in r.steps and r.steps[0] == steps[0] and r.steps[-1] == steps[-1]


def test_layer_grid_keeps_the_spike_and_model_order():
    rng = np.random.default_rng(4)
    steps = np.arange(0, 1_000_000, 10, dtype=float)
    group = []
    for i in range(64):
        v = 0.05 * np.exp(0.3 * rng.standard_normal(len(steps)))
        if i == 40:
            v[54_321] = 1e4
        if i == 3:
            v[70_000:70_005] = np.nan
        group.append((f"layers.{i}", f"grad_norm/layers.{i}", Series(steps, v, np.full(len(v), np.nan))))
    grid = ds.layer_grid(group)
    assert grid.high.shape == (64, ds.HEATMAP_COLUMNS) and grid.labels[0] == "layers.0" and grid.labels[-1] == "layers.63"
    col = int(ds.bucket_ids(np.array([steps[54_321]]), steps[0], steps[-1], ds.HEATMAP_COLUMNS)[0])
    assert grid.high[40, col] == 1e4 and np.nanargmax(grid.high[40]) == col  # the one-point spike has its cell
    assert [(r, k) for _, r, k in grid.bad] == [(3, "NaN")]
    assert grid.original == 64 * len(steps)


def test_layer_grid_exact_when_small():
    steps = np.arange(0, 100, 10, dtype=float)
    group = [(f"l{i}", f"k{i}", Series(steps, np.full(10, i + 1.0), np.full(10, np.nan))) for i in range(3)]
    grid = ds.layer_grid(group)
    assert grid.exact and list(grid.x) == list(steps) and grid.high[2, 0] == 3.0
