"""RunHistory construction: sorting, duplicates, restarted counters, categorical keys, JSON safety."""

import json

import numpy as np
import pandas as pd

from trackerhealth.schema import Evidence, Finding, HealthReport, RunHistory, RunRef

REF = RunRef("file", "p", "r1", "run one")


def test_from_long_splits_keys_in_first_logged_order():
    h = RunHistory.from_long(REF, [0, 0, 1, 1], ["b", "a", "b", "a"], [1.0, 2.0, 3.0, 4.0])
    assert h.keys() == ["b", "a"]
    assert h["a"].values.tolist() == [2.0, 4.0]
    assert h.n_points == 4 and h.last_step == 1


def test_unsorted_and_duplicate_steps_keep_last_value():
    h = RunHistory.from_long(REF, [3, 1, 2, 2], ["x"] * 4, [30.0, 10.0, 20.0, 21.0])
    assert h["x"].steps.tolist() == [1, 2, 3]
    assert h["x"].values.tolist() == [10.0, 21.0, 30.0]


def test_restarted_step_counter_is_rebased_onto_one_timeline():
    steps = [10, 20, 30, 10, 20, 30]
    h = RunHistory.from_long(REF, steps, ["loss"] * 6, [6, 5, 4, 3, 2, 1])
    s = h["loss"]
    assert np.all(np.diff(s.steps) > 0)
    assert s.values.tolist() == [6, 5, 4, 3, 2, 1]  # log order survives
    assert any("restarted" in n for n in h.notes)


def test_nonfinite_values_are_kept_and_string_values_become_nan():
    h = RunHistory.from_long(REF, [1, 2, 3], ["l"] * 3, np.array(["1.5", "nan", "oops"], dtype=object))
    v = h["l"].values
    assert v[0] == 1.5 and np.isnan(v[1]) and np.isnan(v[2])


def test_categorical_keys_match_object_keys():
    df = pd.DataFrame({"step": [0, 1, 0, 1], "key": ["a", "a", "b", "b"], "value": [1.0, 2, 3, 4]})
    plain = RunHistory.from_frame(REF, df)
    cat = RunHistory.from_frame(REF, df.assign(key=df["key"].astype("category")))
    assert plain.keys() == cat.keys()
    for k in plain.keys():
        assert plain[k].values.tolist() == cat[k].values.tolist()


def test_report_json_has_no_nan_tokens():
    ev = Evidence("loss", float("nan"), float("inf"), 1, 2, "nonfinite_value")
    f = Finding("nonfinite", "critical", "t", "m", "fix", (ev,))
    r = HealthReport(REF, 10.0, (), (f,), loss_key="loss")
    text = json.dumps(r.to_dict(), allow_nan=False)
    assert '"NaN"' in text and '"Infinity"' in text
    assert r.status == "critical"
