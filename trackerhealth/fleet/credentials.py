"""How a Ray worker gets the keys the driver scans with, without anyone else seeing them.

Ray's ``runtime_env`` is the obvious road, but Ray writes it into its logs in plain text (the
runtime-env agent logs every environment it creates: ``runtime_env_agent.log``, measured with Ray
2.60), and shows it with the job. So the runtime environment carries only settings without
secrets (``WANDB_BASE_URL``, ``MLFLOW_S3_ENDPOINT_URL``: :attr:`Tracker.setting_env`), and the
secrets (:attr:`Tracker.credential_env`, and the alert webhook's URL, which holds a token) travel
once per scan as one object in Ray's object store: the driver ``ray.put``s a
:class:`Credentials`, and each task receives only a reference to it, wrapped in a list so that
Ray passes the reference itself rather than the value (a task's arguments are then an id, never a
key). The worker resolves it, and sets each variable the driver had; a variable the driver does
not have keeps the worker's own value (a cluster whose pods get ``WANDB_API_KEY`` from a
Kubernetes secret needs nothing from the driver). Its ``repr`` shows names only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..trackers import Tracker

__all__ = ["Credentials", "collect", "install", "runtime_settings"]


@dataclass(frozen=True)
class Credentials:
    env: Mapping[str, str] = field(default_factory=dict)
    alert_webhook: str | None = None

    def __repr__(self) -> str:  # never the values: this object may be printed in a traceback
        return f"Credentials(env={sorted(self.env)}, alert_webhook={'set' if self.alert_webhook else None})"


def collect(tracker: Tracker, alert_webhook: str | None = None) -> Credentials:
    """The driver's values of ``tracker``'s secret variables (those it has)."""
    return Credentials({k: os.environ[k] for k in tracker.credential_env if os.environ.get(k)}, alert_webhook)


def runtime_settings(tracker: Tracker) -> dict[str, str]:
    """Settings without secrets, for the tasks' ``runtime_env`` ``env_vars``."""
    names = (*tracker.setting_env, "TRACKERHEALTH_TIMEOUT", "TRACKERHEALTH_HTTP_RETRIES", "TRACKERHEALTH_HTTP_BACKOFF")
    return {k: os.environ[k] for k in names if os.environ.get(k)}


def install(credentials: Credentials) -> None:
    """In a worker: the driver's secret variables win over the worker's own; the rest stay."""
    os.environ.update(credentials.env)
