"""User configuration: ``trackerhealth.toml`` or ``[tool.trackerhealth]`` in ``pyproject.toml``.

```toml
[roles]                 # raw metric key for a role; lists for per-layer/per-task roles
train_loss = "train/total"
layer_grad_norms = ["grad/embed", "grad/block0", "grad/head"]

[units]                 # when a name does not say it
step_time = "ms"        # ms | s | us
gpu_util = "fraction"   # fraction | percent

[thresholds.overfitting]
min_rise = 0.2

[thresholds.scorecard]  # the scorecard's numbers (`trackerhealth diagnoses scorecard`)
penalty_warning = 5

disable = ["task-imbalance"]
```

Every unknown key is an error that lists the valid ones, so a typo never silently does nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import config_facts, diagnoses, explain, scorecard
from .roles import GROUP_ROLES, ROLES, TIME_ROLES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOP_KEYS = ("roles", "units", "thresholds", "disable")
UNIT_VALUES = {**{r: ("ms", "s", "us") for r in TIME_ROLES}, "gpu_util": ("fraction", "percent")}


class ConfigError(ValueError):
    """The configuration is invalid; the message says what to change."""


@dataclass(frozen=True)
class Config:
    roles: dict[str, Any] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    thresholds: dict[str, Any] = field(default_factory=dict)  # diagnosis id -> Thresholds instance
    disable: tuple[str, ...] = ()
    source: str = "defaults"

    def with_loss_key(self, key: str) -> Config:
        """A copy that reads ``key`` as the training loss (``--loss-key``); it wins over the file."""
        if not isinstance(key, str) or not key.strip():
            raise ConfigError(f"the loss key must be a metric key such as 'train/loss', not {key!r}")
        return dataclasses.replace(self, roles={**self.roles, "train_loss": key})

    def thresholds_for(self, diagnosis_id: str):
        found = self.thresholds.get(diagnosis_id)
        return found if found is not None else _default_thresholds(diagnosis_id)


# Threshold sections that are not a diagnosis: the scorecard, explained-by rules, config corroboration.
STAGE_THRESHOLDS = {scorecard.ID: scorecard.Thresholds, explain.ID: explain.Thresholds, config_facts.ID: config_facts.Thresholds}


def _default_thresholds(section: str):
    """The default Thresholds of a diagnosis id, or of a stage in :data:`STAGE_THRESHOLDS`."""
    stage = STAGE_THRESHOLDS.get(section)
    return stage() if stage is not None else diagnoses.get(section).default_thresholds()


def _unknown(what: str, bad, valid) -> ConfigError:
    return ConfigError(f"unknown {what} {bad!r}; valid: {', '.join(map(str, valid))}")


def from_dict(data: dict[str, Any], source: str = "<dict>") -> Config:
    for key in data:
        if key not in TOP_KEYS:
            raise _unknown(f"key in {source}:", key, TOP_KEYS)
    roles = dict(data.get("roles", {}))
    for role, value in roles.items():
        if role not in ROLES:
            raise _unknown(f"role in {source} [roles]:", role, ROLES)
        if role in GROUP_ROLES:
            if not isinstance(value, (str, list)) or not all(isinstance(v, str) for v in ([value] if isinstance(value, str) else value)):
                raise ConfigError(f"{source} [roles] {role} must be a metric key or a list of keys, not {value!r}")
        elif not isinstance(value, str):
            raise ConfigError(f"{source} [roles] {role} must be one metric key (a string), not {value!r}")
    units = dict(data.get("units", {}))
    for role, unit in units.items():
        if role not in UNIT_VALUES:
            raise _unknown(f"role in {source} [units]:", role, UNIT_VALUES)
        if unit not in UNIT_VALUES[role]:
            raise _unknown(f"unit for {role} in {source}:", unit, UNIT_VALUES[role])
    thresholds = {}
    for diag_id, values in dict(data.get("thresholds", {})).items():
        if diag_id not in diagnoses.REGISTRY and diag_id not in STAGE_THRESHOLDS:
            raise _unknown(f"diagnosis in {source} [thresholds]:", diag_id, [*diagnoses.REGISTRY, *STAGE_THRESHOLDS])
        defaults = _default_thresholds(diag_id)
        names = [f.name for f in dataclasses.fields(defaults)]
        for name, value in dict(values).items():
            if name not in names:
                raise _unknown(f"threshold for {diag_id} in {source}:", name, names)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(f"{source} [thresholds.{diag_id}] {name} must be a number, not {value!r}")
        thresholds[diag_id] = dataclasses.replace(defaults, **dict(values))
    disable = tuple(data.get("disable", ()))
    for diag_id in disable:
        if diag_id not in diagnoses.REGISTRY:
            raise _unknown(f"diagnosis in {source} disable:", diag_id, diagnoses.REGISTRY)
    return Config(roles, units, thresholds, disable, source)


def load(path: str | Path | None = None, start: str | Path = ".") -> Config:
    """Load an explicit file, else ``trackerhealth.toml`` or ``pyproject.toml`` in ``start``."""
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist; pass an existing trackerhealth.toml or drop --config")
        return _read(p)
    here = Path(start)
    if (here / "trackerhealth.toml").is_file():
        return _read(here / "trackerhealth.toml")
    if (here / "pyproject.toml").is_file():
        return _read(here / "pyproject.toml")
    return Config()


def _read(p: Path) -> Config:
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p} is not valid TOML: {exc}") from None
    if p.name == "pyproject.toml":
        data = data.get("tool", {}).get("trackerhealth")
        if data is None:
            return Config()
        return from_dict(data, f"{p} [tool.trackerhealth]")
    return from_dict(data, str(p))
