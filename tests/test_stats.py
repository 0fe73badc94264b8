"""Every public function of trackerhealth.stats against data whose answer is known by construction.

In the style of ruptures' tests: a generator builds a series with a known slope, median, MAD,
spike set, restart steps or period, and the statistic must return it.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trackerhealth import RunHistory, RunRef, scorecard, stats
from trackerhealth.roles import resolve


def _gaussian(n, sigma=1.0, level=0.0, seed=0):
    return level + sigma * np.random.default_rng(seed).standard_normal(n)


# -- median, row_medians ----------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40), st.sampled_from(["float64", "float32", "int64"]))
def test_median_is_numpys_median_for_any_length_and_dtype(values, dtype):
    v = np.array(values).astype(dtype)
    assert stats.median(v) == float(np.median(v))


def test_median_is_nan_for_an_empty_series_or_one_holding_a_nan():
    assert np.isnan(stats.median(np.array([])))
    assert np.isnan(stats.median(np.array([1.0, np.nan, 3.0, 4.0])))
    assert stats.median(np.array([3.0, 1.0, 2.0, 10.0])) == 2.5


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.integers(1, 9), st.integers(0, 2**31))
def test_row_medians_are_numpys_medians_along_the_rows(rows, width, seed):
    block = np.random.default_rng(seed).standard_normal((rows, width))
    assert np.array_equal(stats.row_medians(block), np.median(block, axis=1))


# -- binned ----------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=1, max_value=400))
def test_binned_puts_every_point_in_exactly_one_bin_and_sizes_differ_by_at_most_one(n, n_bins):
    # values = their own index, so a bin's min and max are its first and last member.
    idx = np.arange(n, dtype=float)
    b = stats.binned(idx * 3.0, idx, n_bins)
    assert len(b.median) == min(n, n_bins)
    if n == 0:
        return
    sizes = b.high - b.low + 1
    assert sizes.sum() == n  # no point dropped, none counted twice
    assert sizes.max() - sizes.min() <= 1  # as equal as possible
    assert b.low[0] == 0 and b.high[-1] == n - 1
    assert np.array_equal(b.low[1:], b.high[:-1] + 1)  # consecutive, in order
    assert np.allclose(b.median, (b.low + b.high) / 2)  # the median of a run of integers is its middle
    assert np.all((b.steps >= 3 * b.low) & (b.steps <= 3 * b.high))  # a step from inside its bin


def test_binned_of_a_line_lies_on_the_line_and_drops_non_finite_values():
    steps = np.arange(10_007, dtype=float)
    values = 4.0 - 0.25 * steps
    b = stats.binned(steps, values, 200)
    assert len(b.median) == 200
    # Each bin's median of an odd-sized or even-sized run of a line is the line at the bin's middle.
    assert np.allclose(b.median, (b.low + b.high) / 2)
    assert b.high[0] == 4.0 and b.low[-1] == 4.0 - 0.25 * 10_006  # the first and the last point are kept
    assert np.polyfit(b.steps, b.median, 1)[0] == pytest.approx(-0.25, rel=1e-3)
    # Non-finite values are left out before binning: the bins are those of the finite points.
    dirty = values.copy()
    dirty[[5, 500, 9000]] = [np.nan, np.inf, -np.inf]
    keep = np.isfinite(dirty)
    expected = stats.binned(steps[keep], values[keep], 200)
    got = stats.binned(steps, dirty, 200)
    assert np.array_equal(got.median, expected.median) and np.array_equal(got.steps, expected.steps)


def test_binned_returns_short_series_unchanged():
    steps, values = np.arange(5.0), np.array([3.0, 1.0, 4.0, 1.0, 5.0])
    b = stats.binned(steps, values, 200)
    assert np.array_equal(b.steps, steps) and np.array_equal(b.median, values)
    assert np.array_equal(b.low, values) and np.array_equal(b.high, values)


def test_convergence_speed_of_one_decay_does_not_depend_on_one_point_more_or_less():
    # The defect this pins: 399 points into 200 bins used to drop the first 199 points.
    def score(n):
        s = np.arange(n, dtype=float)
        view = resolve(RunHistory.from_series(RunRef("file", "p", "r"), {"loss": (s, 5 * np.exp(-s / 60) + 0.1)}), {}, {})
        return scorecard.convergence_speed(view).score

    for n in (399, 401, 799, 1999):
        assert abs(score(n) - score(n + 1)) <= 1.0, n


# -- typical, mad, rolling_median -------------------------------------------------------------

def test_typical_is_the_median_of_a_long_series_within_its_resolution():
    # 0..100 repeated: the median is 50; the strided median must land within one step of it.
    values = np.tile(np.arange(101.0), 10_000)  # 1,010,000 points, far above max_points
    assert abs(stats.typical(values) - 50.0) <= 1.0
    assert stats.typical(np.array([7.0, 1.0, 3.0])) == 3.0
    assert np.isnan(stats.typical(np.array([])))


def test_mad_is_sigma_for_gaussian_noise_and_exact_on_a_known_sample():
    assert stats.mad(np.array([1.0, 2.0, 3.0, 4.0, 5.0])) == pytest.approx(stats.MAD_TO_SIGMA * 1.0)
    for sigma in (1e-6, 0.3, 250.0):
        assert stats.mad(_gaussian(200_000, sigma, level=17.0)) == pytest.approx(sigma, rel=0.01)
    # Robust: a quarter of wild outliers barely moves it.
    x = _gaussian(100_000, 2.0)
    x[::4] = 1e9
    assert stats.mad(x) == pytest.approx(2.0 * 1.44, rel=0.1)  # the MAD of the clean 75 %, stretched by the lost tail
    assert np.isnan(stats.mad(np.array([])))


def test_rolling_median_keeps_a_monotone_ramp_and_a_step_and_removes_an_isolated_spike():
    ramp = np.linspace(0.0, 9.0, 200)
    assert np.allclose(stats.rolling_median(ramp, 9), ramp)
    step = np.r_[np.zeros(50), np.ones(50)]
    assert np.array_equal(stats.rolling_median(step, 5), step)  # a median filter keeps edges
    spiky = np.full(200, 3.0)
    spiky[100] = 1e6
    assert np.array_equal(stats.rolling_median(spiky, 5), np.full(200, 3.0))
    # An even window is widened to the next odd one; a window past the length is the length.
    assert np.array_equal(stats.rolling_median(np.array([0.0, 0, 9, 0, 0]), 2), np.zeros(5))
    assert np.array_equal(stats.rolling_median(np.array([1.0, 2.0]), 1), np.array([1.0, 2.0]))
    assert len(stats.rolling_median(np.array([]), 5)) == 0


# -- spikes, lr_restarts, warmup_end ----------------------------------------------------------

def test_spikes_finds_exactly_the_planted_spikes_and_one_index_per_spike():
    base = 2.0 + _gaussian(3000, 0.01, seed=1)
    planted = np.array([150, 700, 1234, 2000, 2950])
    values = base.copy()
    values[planted] += 1.0
    values[1235] += 0.6  # an adjacent, lower hit belongs to the spike at 1234
    found = stats.spikes(values, window=9, z=6.0, min_rel=0.15)
    assert np.array_equal(found, planted)
    # A dip is not a spike; a bump below min_rel of the level is not one either.
    values = base.copy()
    values[500] -= 1.0
    values[900] += 0.2  # 10 % of the level
    assert len(stats.spikes(values, 9, 6.0, 0.15)) == 0
    assert len(stats.spikes(np.array([1.0, 9.0, 1.0, 1.0]), 3, 1.0, 0.0)) == 0  # fewer than 5 points


def test_spikes_on_a_perfectly_flat_series_with_a_tiny_wobble_finds_none():
    values = np.full(500, 3.0)
    values[::7] += 1e-9
    assert len(stats.spikes(values, 9, 6.0, 0.15)) == 0


def test_lr_restarts_are_the_steps_where_a_cosine_schedule_restarts():
    steps = np.arange(3000, dtype=float)
    period = 750
    lr = 1e-5 + 0.5 * 1e-3 * (1 + np.cos(np.pi * (steps % period) / period))  # SGDR, restarts every 750
    assert np.array_equal(stats.lr_restarts(steps, lr), [750.0, 1500.0, 2250.0])
    assert np.array_equal(stats.lr_restarts(steps, lr, rel_jump=1e6), [])
    assert len(stats.lr_restarts(None, None)) == 0 and len(stats.lr_restarts(steps[:1], lr[:1])) == 0


def test_warmup_end_is_the_peak_of_a_linear_warmup():
    steps = np.arange(1000, dtype=float)
    lr = np.where(steps < 120, 1e-3 * (steps + 1) / 121, 1e-3 * np.exp(-(steps - 120) / 400))
    assert stats.warmup_end(steps, lr) == 120.0  # the ramp ends at 120/121 of the peak; step 120 holds it
    # No warm-up: a schedule that starts at (or within 10 % of) its peak.
    assert stats.warmup_end(steps, 1e-3 * np.exp(-steps / 400)) is None
    assert stats.warmup_end(steps, np.r_[0.95e-3, np.full(999, 1e-3)]) is None
    assert stats.warmup_end(None, None) is None
    assert stats.warmup_end(steps[:3], np.array([np.nan, 1.0, np.nan])) is None


# -- local_noise, head_tail -------------------------------------------------------------------

def test_local_noise_returns_the_constructed_spread_and_level():
    # Every chunk of 5 is level + a * (-2, -1, 0, 1, 2): its MAD is a, so the spread is 1.4826 a.
    a, level = 0.3, 7.0
    values = np.tile(level + a * np.array([-2.0, -1, 0, 1, 2]), 400)
    noise, moving = stats.local_noise(values, 5)
    assert noise == pytest.approx(stats.MAD_TO_SIGMA * a)
    assert moving == pytest.approx(level)
    # A ramp of slope b per point: each chunk is its own level + b * (-2..2), so the spread is 1.4826 b.
    b = 0.01
    noise, _ = stats.local_noise(100.0 - b * np.arange(2000.0), 5)
    assert noise == pytest.approx(stats.MAD_TO_SIGMA * b)
    # Non-finite points are dropped; fewer than two chunks is no answer.
    with_nan = np.r_[values, np.nan, np.inf]
    assert stats.local_noise(with_nan, 5) == pytest.approx((stats.MAD_TO_SIGMA * a, level))
    assert all(np.isnan(stats.local_noise(np.arange(9.0), 5)))


def test_head_tail_are_the_medians_of_the_first_and_last_shares():
    values = np.r_[np.full(20, 9.0), np.linspace(8, 2, 780), np.full(200, 1.0)]  # 1,000 points
    assert stats.head_tail(values) == (9.0, 1.0)  # first 2 % = 20 points, last 20 % = 200
    head, tail = stats.head_tail(values, head=0.5, tail=0.5)
    assert head == pytest.approx(np.median(values[:500])) and tail == pytest.approx(np.median(values[500:]))
    assert stats.head_tail(np.array([5.0, 4.0, 3.0, 2.0])) == (4.0, 2.0)  # at least 3 head points, 1 tail point


# -- periodic_comb ----------------------------------------------------------------------------

def test_periodic_comb_recovers_a_known_period_among_random_events():
    rng = np.random.default_rng(3)
    period, start, end = 137.0, 0.0, 137.0 * 40
    comb_events = 20 + period * np.arange(40)
    noise_events = rng.uniform(start, end, 15)
    comb = stats.periodic_comb(np.r_[comb_events, noise_events], start, end, min_period=10.0)
    assert comb is not None
    assert comb.period == pytest.approx(period, rel=0.01)
    assert comb.cycles_hit >= 39 and comb.coverage >= 0.97
    assert comb.in_phase[:40].all()  # every comb event is in phase
    assert comb.p_value < 1e-6 and comb.chance < 0.5


def test_periodic_comb_finds_no_period_in_random_events():
    rng = np.random.default_rng(4)
    comb = stats.periodic_comb(rng.uniform(0, 10_000, 25), 0.0, 10_000.0, min_period=10.0)
    assert comb is not None
    assert comb.p_value > 0.01 or comb.coverage < 0.85  # what periodic-spikes requires of a period


def test_periodic_comb_prefers_the_period_over_its_multiples_and_refuses_too_few_events():
    events = 5 + 50.0 * np.arange(30)
    comb = stats.periodic_comb(events, 0.0, 1500.0, min_period=5.0, candidates=np.array([100.0, 150.0]))
    assert comb.period == pytest.approx(50.0)
    assert stats.periodic_comb(np.array([1.0, 2.0]), 0.0, 10.0, 1.0) is None
    assert stats.periodic_comb(events, 10.0, 10.0, 1.0) is None  # an empty run


def test_periodic_comb_counts_only_the_cycles_the_run_reached():
    # Torch run seq2seq_bad_shard_noshuffle (built blind): a bad shard every 80 steps spikes at 101, 181, 261, 341
    # and 421 (not at 21: the model had not yet fitted the rest), three unrelated spikes beside them, and the run
    # ends at 500, before the sixth visit. Five of five reachable cycles, not five of 5.99.
    events = np.array([101.0, 110.0, 181.0, 261.0, 307.0, 320.0, 341.0, 421.0])
    comb = stats.periodic_comb(events, 1.0, 500.0, min_period=3.0)
    assert comb.period == pytest.approx(80.0)
    assert comb.cycles_hit == 5 and comb.coverage == pytest.approx(1.0) and comb.p_value < 1e-4


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 400), st.floats(-5, 5), st.floats(0, 3), st.integers(0, 2**31 - 1))
def test_trend_gives_what_scipy_linregress_gives(n, slope, noise, seed):
    from scipy.stats import linregress

    rng = np.random.default_rng(seed)
    steps = np.sort(rng.uniform(0, 1000, n))
    if np.ptp(steps) == 0:
        return
    values = slope * steps + noise * rng.standard_normal(n) * 100
    fit, ours = linregress(steps, values), stats.trend(steps, values)
    assert ours.slope == pytest.approx(fit.slope, rel=1e-9, abs=1e-12)
    assert ours.intercept == pytest.approx(fit.intercept, rel=1e-9, abs=1e-9)
    # An exact line's stderr is rounding error in both (t = ±inf or ±1e8: both say "clearly"). Near-exact lines
    # too: both compute stderr from 1 - r², whose relative rounding error is about eps / (1 - r²), so past
    # 1 - r² < 1e-6 the two t's differ by rounding alone (n=3, t ≈ 1.3e5 once differed by 2e-6 relative).
    if noise > 1e-3 and 1 - fit.rvalue**2 > 1e-6:
        assert ours.t == pytest.approx(fit.slope / fit.stderr, rel=1e-6)


def test_trend_known_answers():
    steps = np.arange(10.0)
    exact = stats.trend(steps, 3.0 - 0.5 * steps)
    assert exact.slope == pytest.approx(-0.5) and exact.intercept == pytest.approx(3.0) and exact.t == -np.inf
    assert stats.trend(steps, np.full(10, 2.0)).t == 0.0
    noisy = stats.trend(steps, np.array([0.0, 1, 0, 1, 0, 1, 0, 1, 0, 1]))
    # Sxy = 2.5, Sxx = 82.5: slope 1/33; SSE = Syy - Sxy^2/Sxx with Syy = 2.5; se = sqrt(SSE/8/Sxx)
    se = np.sqrt((2.5 - 2.5**2 / 82.5) / 8 / 82.5)
    assert noisy.slope == pytest.approx(1 / 33) and noisy.t == pytest.approx((1 / 33) / se)
