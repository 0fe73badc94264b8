"""trackerhealth: which training runs are unhealthy, why, and what to do about it.

The analysis core (schema, roles, diagnoses, scorecard, engine) depends only on numpy, scipy and
pandas; tracker integrations are extras that say what to install when missing.

The public names below are imported on first use (PEP 562), so ``import trackerhealth.schema``
runs nothing but the schema: no adapter, writer or monitor module is loaded by importing the
package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS = {
    "CheckResult": "monitor",
    "HealthCheckError": "monitor",
    "HealthMonitor": "monitor",
    "NonFiniteLossError": "monitor",
    "Config": "config",
    "ConfigError": "config",
    "DIMENSIONS": "schema",
    "DimensionScore": "schema",
    "Evidence": "schema",
    "Finding": "schema",
    "HealthReport": "schema",
    "RunHistory": "schema",
    "RunRef": "schema",
    "Series": "schema",
    "analyze": "engine",
}

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time these come from __getattr__
    from .config import Config, ConfigError
    from .engine import analyze
    from .monitor import CheckResult, HealthCheckError, HealthMonitor, NonFiniteLossError
    from .schema import DIMENSIONS, DimensionScore, Evidence, Finding, HealthReport, RunHistory, RunRef, Series


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
