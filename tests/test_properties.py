"""Property tests: any history of finite and non-finite values never raises, scores stay in 0-100."""

import numpy as np
from hypothesis import HealthCheck, given, settings
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
def test_a_loss_with_nonfinite_values_is_always_critical(vals, stride):
    arr = np.array(vals, dtype=float)
    steps = np.arange(len(arr)) * stride
    h = RunHistory.from_series(REF, {"loss": (steps, arr)})
    finding = analyze(h).finding("nonfinite")
    assert (finding.level == "critical") == (not np.isfinite(arr).all())
