"""Read MLflow runs for a scan: any tracking URI, fast parallel/direct-SQL fetch, a history cache.

    from trackerhealth import trackers
    from trackerhealth.adapters.mlflow import MlflowAdapter
    from trackerhealth.scan import scan

    adapter = MlflowAdapter("http://mlflow.internal:5000", experiments=["my-team"])
    result = scan(adapter, trackers.writer_for(adapter))

mlflow itself is imported only when a store is opened; without it, the error says
``pip install 'trackerhealth[mlflow]'``.
"""

from .._shared import default_cache_dir, parse_since
from ._adapter import MlflowAdapter
from ._cache import HistoryCache
from ._errors import (
    ApiError,
    MlflowMissing,
    RunSkipped,
    SelectionError,
    TrackerUnreachable,
)
from ._http import RetryPolicy
from ._runs import MlflowRun
from ._uri import TrackingUri, check_ui_url
from ._uri import parse as parse_uri

__all__ = [
    "ApiError",
    "HistoryCache",
    "MlflowAdapter",
    "MlflowMissing",
    "MlflowRun",
    "RetryPolicy",
    "RunSkipped",
    "SelectionError",
    "TrackerUnreachable",
    "TrackingUri",
    "check_ui_url",
    "default_cache_dir",
    "parse_since",
    "parse_uri",
]
