"""Configuration: roles, units and thresholds from TOML; unknown keys name the valid ones."""

import pytest

from trackerhealth import Config, ConfigError, RunHistory, RunRef, analyze
from trackerhealth.config import from_dict, load


def test_pyproject_tool_section_is_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.trackerhealth]\ndisable = ["task-imbalance"]\n[tool.trackerhealth.thresholds.overfitting]\nmin_rise = 0.25\n'
    )
    cfg = load(start=tmp_path)
    assert cfg.disable == ("task-imbalance",)
    assert cfg.thresholds_for("overfitting").min_rise == 0.25
    assert cfg.thresholds_for("nonfinite").spike_factor == 10.0


def test_trackerhealth_toml_wins_over_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trackerhealth]\ndisable = ["overfitting"]\n')
    (tmp_path / "trackerhealth.toml").write_text('[roles]\ntrain_loss = "my/objective"\n')
    cfg = load(start=tmp_path)
    assert cfg.roles == {"train_loss": "my/objective"} and cfg.disable == ()


@pytest.mark.parametrize(
    "data, named",
    [
        ({"threshold": {}}, "roles, units, thresholds, disable"),
        ({"roles": {"trian_loss": "x"}}, "train_loss"),
        ({"units": {"step_time": "minutes"}}, "ms, s, us"),
        ({"thresholds": {"overfit": {}}}, "overfitting"),
        ({"thresholds": {"overfitting": {"min_rize": 1}}}, "min_rise"),
        ({"disable": ["nan"]}, "nonfinite"),
    ],
)
def test_unknown_keys_are_errors_naming_the_valid_ones(data, named):
    with pytest.raises(ConfigError, match=named):
        from_dict(data)


def test_invalid_toml_and_missing_file_name_the_fix(tmp_path):
    bad = tmp_path / "trackerhealth.toml"
    bad.write_text("[roles\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "nope.toml")


def test_role_override_is_used_by_the_analysis():
    steps = list(range(100))
    h = RunHistory.from_series(RunRef("file", "p", "r"), {"objective": (steps, [float("nan")] * 100)})
    assert analyze(h).finding("nonfinite").level == "skipped"
    cfg = from_dict({"roles": {"train_loss": "objective"}})
    assert analyze(h, cfg).finding("nonfinite").level == "critical"
    assert isinstance(cfg, Config)
    assert analyze(h).status == "unknown" and analyze(h, cfg).status == "critical"


def test_with_loss_key_is_a_copy_that_wins_over_the_file():
    cfg = from_dict({"roles": {"train_loss": "objective", "val_loss": "holdout"}, "disable": ["overfitting"]})
    mapped = cfg.with_loss_key("cost")
    assert mapped.roles == {"train_loss": "cost", "val_loss": "holdout"} and mapped.disable == ("overfitting",)
    assert cfg.roles["train_loss"] == "objective"  # the original is unchanged
    assert Config().with_loss_key("train/total").roles == {"train_loss": "train/total"}
    with pytest.raises(ConfigError, match="metric key"):
        Config().with_loss_key("  ")


@pytest.mark.parametrize("value, named", [(["a", "b"], "one metric key"), (3, "one metric key")])
def test_a_scalar_role_takes_one_key(value, named):
    with pytest.raises(ConfigError, match=named):
        from_dict({"roles": {"train_loss": value}})
    assert from_dict({"roles": {"layer_grad_norms": ["a", "b"]}}).roles == {"layer_grad_norms": ["a", "b"]}
    with pytest.raises(ConfigError, match="a list of keys"):
        from_dict({"roles": {"layer_grad_norms": [1, 2]}})
