"""The monitor's bounded history: exact up to ``cap`` points per key, bounded buckets beyond.

Streams here are formulas (size and NaN placement are the point, as DESIGN.md allows for stress
cases); whether the bucket view still gives the scan's findings is judged on real trainings
(the corpus) at the end of this file.
"""

from __future__ import annotations

import json
import math
from itertools import groupby
from pathlib import Path

import numpy as np
import pytest

from trackerhealth.adapters.files import read_histories
from trackerhealth.engine import analyze
from trackerhealth.monitor import HealthMonitor
from trackerhealth.monitor._store import KeyStore

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _stream(n, seed=0):
    rng = np.random.default_rng(seed)
    s = np.arange(n, dtype=np.float64)
    v = 1.0 + np.exp(-s / (n / 5)) + 0.05 * rng.standard_normal(n)
    return s, v, s * 0.01


def _feed(store, s, v, w, chunk):
    for lo in range(0, len(s), chunk):
        store.extend(s[lo:lo + chunk], v[lo:lo + chunk], w[lo:lo + chunk])


def test_every_point_is_kept_up_to_the_cap():
    s, v, w = _stream(500)
    v[123] = np.nan
    store = KeyStore(500, np.random.default_rng(0), spiky=True)
    _feed(store, s, v, w, 37)
    assert store.exact and store.width == 1
    ps, pv, pw = store.points()
    np.testing.assert_array_equal(ps, s)
    np.testing.assert_array_equal(pv, v)
    np.testing.assert_array_equal(pw, w)
    assert store.first_bad[0] == 123


@pytest.mark.parametrize("chunk", [1_000, 65_536])
def test_memory_stays_bounded_and_what_matters_survives(chunk):
    n, cap = 1_000_000, 2_000
    s, v, w = _stream(n, seed=1)
    v[700_001] = np.inf  # one overflow step, and a NaN tail from 900,000 on
    v[900_000:] = np.nan
    spikes = np.arange(50_000, 850_000, 100_000) + 17
    v[spikes] += 5.0  # a few tall spikes (well above the noise) the samples would miss
    store = KeyStore(cap, np.random.default_rng(0), spiky=True)
    _feed(store, s, v, w, chunk)
    assert not store.exact
    assert store.buckets.size <= cap and store.width & (store.width - 1) == 0  # a power of two
    # O(cap) bytes whatever the run's length: 11 columns of 8 bytes for at most 2 x cap buckets,
    # 4 columns for the open bucket (< width points, capacity at most 4 x).
    assert store.nbytes <= 2 * 88 * (cap + 2) + 4 * 32 * max(store.width, 64)
    ps, pv, _ = store.points()
    assert cap / 2 <= len(ps) <= cap + store.width + 2 * len(spikes) + 10
    # Every point shown is a real point of the stream, in log order.
    idx = ps.astype(np.int64)
    assert np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(pv[np.isfinite(pv)], v[idx][np.isfinite(pv)])
    assert np.isnan(pv[~np.isfinite(pv)]).sum() + np.isinf(pv).sum() == (~np.isfinite(pv)).sum()
    # The first NaN/Inf is exact; the lone Inf and every spike survive the sampling.
    assert store.first_bad == (700_001.0, math.inf)
    assert 700_001 in idx and 900_000 in idx
    assert set(spikes) <= set(idx.tolist())
    # The samples keep the level and the noise: the tail medians agree with the raw stream's.
    tail_raw = v[800_000:900_000]
    tail = pv[(idx >= 800_000) & (idx < 900_000) & np.isfinite(pv)]
    tail = tail[tail < 3]  # without the spikes
    assert abs(np.median(tail) - np.median(tail_raw[tail_raw < 3])) < 0.01
    assert abs(np.std(tail) - np.std(tail_raw[tail_raw < 3])) < 0.01


def test_monitor_memory_and_analyses_are_bounded():
    """10^5 logged steps, 1,000 checks: memory O(cap), and the diagnoses run O(log n) times."""
    monitor = HealthMonitor(alert=None, cap=2_000)
    _, v, _ = _stream(100_000, seed=2)
    analyses = 0
    for i in range(100_000):
        monitor.log({"train/loss": v[i], "grad_norm": 1.0 + 0.1 * v[i], "lr": 0.01}, step=i)
        if i % 100 == 99:
            analyses += monitor.check().analyzed
    assert monitor.n_points == 300_000
    assert monitor.nbytes <= 3 * (2 * 88 * 2_002 + 4 * 32 * 64)
    assert analyses <= math.log(100_000 / 100) / math.log(1.1) + 2, analyses
    assert monitor.close().analyzed
    history = monitor.history()
    keys = history.keys()
    assert all(len(history[k]) <= 2_000 + 64 for k in keys)


def test_non_numbers_are_ignored_and_steps_default_to_a_counter():
    monitor = HealthMonitor(alert=None)
    monitor.log({"loss": 1.0, "note": "warm-up", "shape": [1, 2], "flag": None})
    monitor.log({"loss": np.float32(0.5)})
    monitor.log({"loss": 0.25}, step=10)
    monitor.log({"loss": 0.2})
    history = monitor.history()
    assert history.keys() == ["loss"]
    np.testing.assert_array_equal(history["loss"].steps, [0, 1, 10, 11])
    np.testing.assert_array_equal(history["loss"].values, [1.0, 0.5, 0.25, 0.2])


def _replay(entry, cap):
    """A corpus run (a real training's log) replayed step by step into a monitor."""
    (history,) = read_histories(CORPUS / entry["file"])
    keys = history.keys()
    rows = sorted(((s, k, v) for k in keys for s, v in zip(history[k].steps, history[k].values)),
                  key=lambda r: r[0])
    monitor = HealthMonitor(alert=None, cap=cap)
    n_steps = len({r[0] for r in rows})
    every = max(1, n_steps // 20)
    for i, (step, group) in enumerate(groupby(rows, key=lambda r: r[0])):
        monitor.log({k: v for _, k, v in group}, step=step)
        if i % every == every - 1:
            monitor.check()
    bucketed = any(not store.exact for store in monitor._stores.values())
    return history, monitor.close(), bucketed


@pytest.mark.parametrize("cap, min_agreement", [(2_000, 1.0), (500, 0.95)])
def test_the_bucket_view_gives_the_scans_findings_on_the_trained_corpus(cap, min_agreement):
    """Every corpus run (real trainings) replayed into a monitor whose cap is below its length.

    At cap 2,000 the longest runs are bucketed (widths 2-4) and every answer is the scan's. At
    cap 500 the 17 longer runs are (widths 2-8): the samples then carry 1/2-1/8 of the points, and a
    finding whose statistic sits near its threshold may tip — but nothing healthy is flagged and
    no dead run is missed.
    """
    entries = json.loads((CORPUS / "manifest.json").read_text())
    bucketed, disagree = 0, []
    for entry in entries:
        history, final, was_bucketed = _replay(entry, cap=cap)
        bucketed += was_bucketed
        scan = sorted(f.id for f in analyze(history).problems)
        if sorted(final.ids) != scan:
            disagree.append((entry["name"], scan, final.ids))
        if not entry["faults"]:
            assert final.ids == [], entry["name"]
        if "nonfinite" in entry["faults"]:
            assert "nonfinite" in final.ids, entry["name"]
    assert bucketed >= (4 if cap == 2_000 else 15), "the test must exercise the bucket view"
    assert len(disagree) <= (1 - min_agreement) * len(entries), disagree
