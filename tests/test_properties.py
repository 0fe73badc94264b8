"""Property tests: any history of finite and non-finite values never raises, scores stay in 0-100."""

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trackerhealth import RunHistory, RunRef, analyze
from trackerhealth.schema import ERROR

REF = RunRef("file", "prop", "r")
KEYS = ["train/loss", "val/loss", "grad_norm", "lr", "momentum", "gpu_util", "data_time", "compute_time",
        "step_time_ms", "grad_norm/layer_0", "grad_norm/layer_1", "grad_norm/layer_2", "loss/task_a", "loss/task_b", "epoch"]
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.floats(min_value=-1e6, max_value=1e6),
    st.floats(min_value=0, max_value=10),
)


@st.composite
def histories(draw):
    chosen = draw(st.lists(st.sampled_from(KEYS), min_size=0, max_size=len(KEYS), unique=True))
    data = {}
    for key in chosen:
        n = draw(st.integers(min_value=0, max_value=120))
        vals = draw(st.lists(values, min_size=n, max_size=n))
        steps = draw(st.lists(st.integers(min_value=-5, max_value=10_000), min_size=n, max_size=n))
        data[key] = (np.array(steps, dtype=float), np.array(vals, dtype=float))
    return RunHistory.from_series(REF, data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_any_history_analyzes_without_error_and_scores_stay_in_range(history):
    report = analyze(history)
    errors = [f for f in report.findings if f.level == ERROR]
    assert not errors, errors
    for s in [report.score, *report.scores.values()]:
        assert s is None or 0 <= s <= 100
    report.to_dict(full=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(values, min_size=30, max_size=400), st.integers(min_value=1, max_value=50))
@example([0.0625] + [0.0, 1.0, 1.0] * 10, 1)  # once found at random: a level held 16x its start
def test_a_loss_with_nonfinite_values_is_always_critical_and_a_finite_one_never_reads_as_nan(vals, stride):
    arr = np.array(vals, dtype=float)
    steps = np.arange(len(arr)) * stride
    h = RunHistory.from_series(REF, {"loss": (steps, arr)})
    finding = analyze(h).finding("nonfinite")
    codes = {e.code for e in finding.evidence}
    if not np.isfinite(arr).all():
        assert finding.level == "critical" and "nonfinite_value" in codes
    else:  # a finite loss may still have diverged (a finite blow-up, or a level held 10x its start), but never reads as NaN
        assert "nonfinite_value" not in codes and (finding.level != "critical" or codes & FINITE_BLOW_UPS)


# The evidence a critical nonfinite finding on an all-finite loss rests on: a blow-up from its low, or a level held far
# above its start (hypothesis found 0.0625 then 0/1 alternating: a level 16x its start, which the check left out).
FINITE_BLOW_UPS = {"loss_divergence", "loss_above_start"}



@st.composite
def decaying_runs(draw):
    """A realistic training log: a decaying train loss with noise, a sparser val loss, a gradient norm.

    The noise is that of a loss logged as the mean over its logging interval (up to 2 % of the
    level). Known limit, kept visible: with raw per-batch noise of 5-20 %, convergence_speed (the
    first smoothed bin below 90 % of the improvement, measured from the first bin) can move 2-5
    points when one early point is added or removed; see the report of issue 16.
    """
    # Lengths at a multiple of the 200 scorecard bins and one below are where a binning that drops
    # the remainder flips from keeping every point to dropping 199 of them.
    n = draw(st.one_of(st.integers(min_value=60, max_value=3000),
                       st.builds(lambda k, d: 200 * k - d, st.integers(min_value=1, max_value=15), st.sampled_from([0, 1]))))
    seed = draw(st.integers(min_value=0, max_value=2**32 - 1))
    start = draw(st.floats(min_value=0.5, max_value=10))
    floor = draw(st.floats(min_value=0.01, max_value=0.5)) * start  # it decays: to at most half its start
    tau = draw(st.floats(min_value=0.02, max_value=0.5)) * n
    noise = draw(st.floats(min_value=0.0, max_value=0.02))
    every = draw(st.sampled_from([1, 5, 20]))
    overfit = draw(st.floats(min_value=0.0, max_value=0.5))
    with_val = draw(st.booleans())
    r = np.random.default_rng(seed)
    steps = np.arange(n, dtype=float) * every
    clean = floor + (start - floor) * np.exp(-np.arange(n) / tau)
    loss = clean * np.exp(r.normal(0, noise, n))  # multiplicative noise: the loss stays positive
    grad = (0.5 + 5 * clean / start) * np.exp(r.normal(0, 0.3, n))
    data = {"train/loss": (steps, loss), "grad_norm": (steps, grad)}
    if with_val:
        k = max(1, n // 30)
        v = clean[::k] * (1.05 + overfit * np.linspace(0, 1, len(clean[::k])) ** 2)
        data["val/loss"] = (steps[::k], v * np.exp(r.normal(0, noise / 5, len(v))))
    return data


def _scores(data) -> dict[str, float | None]:
    return analyze(RunHistory.from_series(REF, data)).scores


# derandomize: a fixed, reproducible set of examples (the property is checked, not re-drawn each run).
@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(decaying_runs(), st.floats(min_value=0.0, max_value=0.05), st.booleans())
def test_adding_or_removing_one_early_train_loss_point_moves_no_dimension_score_by_more_than_2(data, where, remove):
    """No dimension may hinge on one log row at the start (binning once dropped up to 199 of them).

    The point is one of the densely logged train loss, in the first 5 % of the run; the sparse
    val loss (30 evaluations) is left alone: its first evaluation is the only measure of where
    it started, not one point among many.
    """
    steps, values = data["train/loss"]
    i = int(where * len(steps))
    if remove:
        changed = (np.delete(steps, i), np.delete(values, i))
    else:  # one more row between two logged ones, at their mean
        changed = (np.insert(steps, i + 1, (steps[i] + steps[i + 1]) / 2), np.insert(values, i + 1, (values[i] + values[i + 1]) / 2))
    before, after = _scores(data), _scores({**data, "train/loss": changed})
    for name, score in before.items():
        assert (score is None) == (after[name] is None), name
        if score is not None:
            assert abs(score - after[name]) <= 2.0, (name, score, after[name], i, remove)
