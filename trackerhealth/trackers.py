"""The one place that pairs each tracker's adapter with its writer.

Adapters only read and writers only write; neither imports the other. What a writer needs from
the adapter that listed its runs (an open ``MlflowClient``, the W&B project and its retry
policy) is handed over here, through the adapter's public members:

    from trackerhealth import trackers
    from trackerhealth.adapters.mlflow import MlflowAdapter
    from trackerhealth.scan import scan

    adapter = MlflowAdapter("http://mlflow.internal:5000", experiments=["my-team"])
    result = scan(adapter, trackers.writer_for(adapter, alert=webhook))

Each tracker's integration is imported only when its adapter or writer is asked for, so listing
the trackers loads neither mlflow nor wandb.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .adapters.base import Adapter, AdapterSpec
from .writers.base import AlertSink, Writer

if TYPE_CHECKING:
    from .config import Config

__all__ = ["TRACKERS", "Tracker", "WriterOptions", "get", "open_adapter", "tracker_of", "writer_for"]


@dataclass(frozen=True)
class WriterOptions:
    """What a scan asks of a writer, whatever the tracker."""

    alert: AlertSink | None = None  # where new critical findings go besides the tracker (a webhook)
    config: Config | None = None  # the dashboard's panels show the keys the diagnoses used
    notify: bool = True  # W&B: send W&B alerts
    report: bool = True  # W&B: keep the project's "Training health" report


@dataclass(frozen=True)
class Tracker:
    """A tracker's adapter class and how to build the writer for one of its adapters."""

    name: str
    module: str  # the public module that defines the adapter class
    adapter: Callable[[], type[Adapter]]  # imports and returns the adapter class
    writer: Callable[[Adapter, WriterOptions], Writer] | None  # None: read only, nothing is written
    description: str
    # Environment variables holding this tracker's secrets: a Ray worker gets them from the
    # driver through the object store (trackerhealth.fleet.credentials), never in task arguments.
    credential_env: tuple[str, ...] = ()
    # Settings without secrets that a worker needs as the driver has them (runtime_env env_vars).
    setting_env: tuple[str, ...] = ()

    @property
    def read_only(self) -> bool:
        return self.writer is None


def _mlflow_adapter() -> type[Adapter]:
    from .adapters.mlflow import MlflowAdapter

    return MlflowAdapter


def _mlflow_writer(adapter, options: WriterOptions) -> Writer:
    from .writers.mlflow_writer import MlflowWriter

    return MlflowWriter(lambda: adapter.client, adapter.current_tags, alert=options.alert, config=options.config)


def _wandb_adapter() -> type[Adapter]:
    from .adapters.wandb import WandbApiAdapter

    return WandbApiAdapter


def _wandb_writer(adapter, options: WriterOptions) -> Writer:
    from .writers.wandb_writer import WandbAlertSink, WandbWriter

    # The writer's requests go to the server the adapter reads from: the same retry policy.
    sinks: list[AlertSink] = [WandbAlertSink(adapter, adapter.retrying)] if options.notify else []
    if options.alert is not None:
        sinks.append(options.alert)
    return WandbWriter(adapter, retrying=adapter.retrying, alerts=sinks, config=options.config,
                       report=options.report)


def _wandb_folder_adapter() -> type[Adapter]:
    from .adapters.wandb import WandbFolderAdapter

    return WandbFolderAdapter


TRACKERS: dict[str, Tracker] = {t.name: t for t in (
    Tracker("mlflow", "trackerhealth.adapters.mlflow", _mlflow_adapter, _mlflow_writer,
            "an MLflow tracking server, database or file store (tags and artifacts are written back)",
            credential_env=("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
                            "DATABRICKS_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                            "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCESS_KEY"),
            setting_env=("MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_SERVER_CERT_PATH", "MLFLOW_S3_ENDPOINT_URL",
                         "MLFLOW_ALLOW_FILE_STORE", "AWS_DEFAULT_REGION", "DATABRICKS_HOST")),
    Tracker("wandb", "trackerhealth.adapters.wandb._api", _wandb_adapter, _wandb_writer,
            "a W&B project through the W&B API (tags, summary keys, the dashboard file, alerts, a report)",
            credential_env=("WANDB_API_KEY",), setting_env=("WANDB_BASE_URL",)),
    Tracker("wandb-local", "trackerhealth.adapters.wandb._folders", _wandb_folder_adapter, None,
            "local W&B run folders (read only)"),
)}


def get(name: str) -> Tracker:
    try:
        return TRACKERS[name]
    except KeyError:
        raise KeyError(f"unknown tracker {name!r}; known: {', '.join(TRACKERS)}") from None


def tracker_of(adapter: Adapter) -> Tracker:
    """The registry entry whose adapter class ``adapter`` is an instance of."""
    for tracker in TRACKERS.values():
        # An adapter object exists only once its module is imported: no other integration loads.
        if tracker.module in sys.modules and isinstance(adapter, tracker.adapter()):
            return tracker
    raise TypeError(f"{type(adapter).__name__} is not a registered tracker adapter "
                    f"({', '.join(TRACKERS)}); add it to trackerhealth.trackers.TRACKERS")


def open_adapter(spec: AdapterSpec) -> Adapter:
    """The adapter ``spec`` describes (:meth:`Adapter.spec`), opened in this process (a Ray worker)."""
    return get(spec.tracker).adapter()(**spec.kwargs())


def writer_for(adapter: Adapter, *, alert: AlertSink | None = None, config: Config | None = None,
               notify: bool = True, report: bool = True) -> Writer | None:
    """The writer for the runs ``adapter`` lists, or None for a read-only adapter.

    ``alert``: a webhook (or any :class:`AlertSink`) for new critical findings; ``config``: the
    scan's configuration; ``notify`` and ``report``: W&B alerts and the W&B project report.
    """
    tracker = tracker_of(adapter)
    if tracker.writer is None:
        return None
    return tracker.writer(adapter, WriterOptions(alert=alert, config=config, notify=notify, report=report))
