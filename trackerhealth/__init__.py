"""trackerhealth: which training runs are unhealthy, why, and what to do about it.

The analysis core (schema, roles, diagnoses, scorecard, engine) depends only on numpy, scipy and
pandas; tracker integrations are extras that say what to install when missing.

The public names are imported on first use (PEP 562), so ``import trackerhealth`` — and with it
``trackerhealth --help`` and ``--version`` — loads neither the analysis core nor the monitor.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> the module that defines it
_LAZY = {
    "CheckResult": ".monitor",
    "HealthCheckError": ".monitor",
    "HealthMonitor": ".monitor",
    "NonFiniteLossError": ".monitor",
    "Config": ".config",
    "ConfigError": ".config",
    "analyze": ".engine",
    "DIMENSIONS": ".schema",
    "DimensionScore": ".schema",
    "Evidence": ".schema",
    "Finding": ".schema",
    "HealthReport": ".schema",
    "RunHistory": ".schema",
    "RunRef": ".schema",
    "Series": ".schema",
}

__all__ = [*_LAZY, "__version__"]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from .config import Config, ConfigError
    from .engine import analyze
    from .monitor import CheckResult, HealthCheckError, HealthMonitor, NonFiniteLossError
    from .schema import DIMENSIONS, DimensionScore, Evidence, Finding, HealthReport, RunHistory, RunRef, Series


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'trackerhealth' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
