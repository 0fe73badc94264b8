"""trackerhealth: which training runs are unhealthy, why, and what to do about it.

The analysis core (schema, roles, diagnoses, scorecard, engine) depends only on numpy, scipy and
pandas; tracker integrations are extras that say what to install when missing.
"""

from .config import Config, ConfigError
from .engine import analyze
from .monitor import CheckResult, HealthCheckError, HealthMonitor, NonFiniteLossError
from .schema import DIMENSIONS, DimensionScore, Evidence, Finding, HealthReport, RunHistory, RunRef, Series

__version__ = "0.1.0"

__all__ = [
    "CheckResult",
    "HealthCheckError",
    "HealthMonitor",
    "NonFiniteLossError",
    "Config",
    "ConfigError",
    "DIMENSIONS",
    "DimensionScore",
    "Evidence",
    "Finding",
    "HealthReport",
    "RunHistory",
    "RunRef",
    "Series",
    "analyze",
    "__version__",
]
