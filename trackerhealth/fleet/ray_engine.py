"""Ray as the scan's engine: each run's fetch → analyse → write is one Ray task.

The driver (``trackerhealth scan … --ray ADDRESS``) lists the runs, keeps the unchanged ones'
reports (:mod:`trackerhealth.reuse`), and submits the rest. What a task receives: the adapter's
:class:`~trackerhealth.adapters.base.AdapterSpec` (no credentials), the configuration, the run
in its portable form, and a reference to the credentials (:mod:`.credentials`). A worker process
opens the adapter and writer once and reuses them for every task it runs.

The guarantees are the one-process scan's:

* the same function processes a run (:func:`trackerhealth.scan.process_run`), so findings, tags
  and artifacts are identical, and a run's failure is that run's;
* a worker killed mid-task is Ray's to retry (``max_retries``): the task runs again from the
  fetch. Writes are idempotent (tags and summary keys set to values, artifacts overwritten) and
  alerts are de-duplicated on the tracker (the claim in :mod:`trackerhealth.writers.alerts`), so
  a retried run is written and alerted once; a run whose task died on every try is reported as
  failed, never dropped;
* back-pressure: at most ``in_flight`` tasks are submitted at a time and each task's adapter
  makes one request at a time, so at most ``in_flight`` requests reach the tracker from the whole
  cluster, however many workers it has (a 429 storm does not multiply by the workers);
* results come back as they finish; the driver holds only reports (no history), so its memory
  grows with the number of runs only by their reports.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..adapters.base import Adapter, AdapterSpec
from ..baseline import Cohort
from ..config import Config
from ..scan import FETCH, Engine, RunResult, not_scanned, process_run
from ..trackers import get, open_adapter, tracker_of, writer_for
from ..writers.base import Writer
from . import credentials as creds
from .ray_connect import LOCAL, RaySession, connect, import_ray

__all__ = ["RayEngine", "WorkerWriterOptions"]

MAX_RETRIES = 3  # Ray's default for tasks: a worker (or its node) dying mid-task


@dataclass(frozen=True)
class WorkerWriterOptions:
    """The writer's options without the alert webhook (a secret: it travels with the credentials)."""

    notify: bool = True
    report: bool = True
    timeout: float | None = None  # the webhook's request budget


# Per worker process: adapters and writers opened for a (spec, options, credentials) triple, so a
# worker that runs many tasks of one scan opens its tracker client once.
_OPENED: dict[tuple, tuple[Adapter, Writer | None]] = {}


def _opened(spec: AdapterSpec, options: WorkerWriterOptions, config: Config, box: list) -> tuple[Adapter, Writer | None]:
    import ray

    # One credentials object is put per scan of a project, so its id also stands for the config.
    key = (spec, options, box[0].hex())
    if key not in _OPENED:
        secret: creds.Credentials = ray.get(box[0])
        creds.install(secret)
        adapter = open_adapter(spec)
        alert = None
        if secret.alert_webhook:
            from ..writers.alerts import WebhookSender

            alert = WebhookSender.from_env(secret.alert_webhook, options.timeout)
        writer = writer_for(adapter, alert=alert, config=config, notify=options.notify, report=options.report)
        _OPENED[key] = (adapter, writer)
    return _OPENED[key]


def scan_one(spec: AdapterSpec, options: WorkerWriterOptions, config: Config, index: int, run: Any,
             dry_run: bool, box: list, cohort: Cohort | None = None, profile_only: bool = False) -> RunResult:
    """The Ray task: one run, in a worker. ``box`` holds the credentials' reference (see module doc);
    ``cohort`` and ``profile_only`` are :func:`~trackerhealth.scan.process_run`'s."""
    adapter, writer = _opened(spec, options, config, box)
    return process_run(adapter, None if profile_only else writer, config, index, adapter.adopt(run), dry_run,
                       cohort, profile_only)


class RayEngine(Engine):
    """Runs a scan's runs as Ray tasks on the cluster at ``address`` (joined on first use, so a
    re-scan in which nothing changed never connects)."""

    def __init__(self, address: str, *, in_flight: int, notify: bool = True, report: bool = True,
                 alert_webhook: str | None = None, timeout: float | None = None, num_cpus: float = 1.0):
        self.address = address
        self.in_flight = max(1, in_flight)
        self.options = WorkerWriterOptions(notify=notify, report=report, timeout=timeout)
        self.alert_webhook = alert_webhook
        self.num_cpus = num_cpus
        self._session: RaySession | None = None

    def _remote(self, tracker_name: str):
        ray = import_ray()
        if self._session is None:
            # A Ray started here gets a slot per run in flight: a scan waits on the network far
            # more than it computes, and Ray would otherwise run only one task per core.
            local = max(self.in_flight, os.cpu_count() or 1) if self.address == LOCAL else None
            self._session = connect(self.address, num_cpus=local)
        return ray.remote(scan_one).options(
            max_retries=MAX_RETRIES, retry_exceptions=False, num_cpus=self.num_cpus, name="trackerhealth_run",
            runtime_env={"env_vars": creds.runtime_settings(get(tracker_name))})

    def process(self, adapter, writer, config, work, dry_run, cohorts=None, profile_only=False) -> Iterator[RunResult]:
        spec = adapter.spec()  # NotPortable (a usage error) before anything is submitted
        # One request at a time per task: the cluster-wide bound is then the tasks in flight.
        spec = dataclasses.replace(spec, options=tuple((k, 1 if k == "workers" else v) for k, v in spec.options))
        tracker = tracker_of(adapter)
        task = self._remote(tracker.name)
        ray = import_ray()
        spec_ref, config_ref = ray.put(spec), ray.put(config)
        box = [ray.put(creds.collect(tracker, self.alert_webhook))]
        queue = list(reversed(work))
        pending: dict[Any, tuple[int, Any]] = {}
        stopped = False
        while queue or pending:
            while queue and not stopped and len(pending) < self.in_flight:
                index, run = queue.pop()
                ref = task.remote(spec_ref, self.options, config_ref, index, adapter.portable(run), dry_run, box,
                                  (cohorts or {}).get(run.ref.id), profile_only)
                pending[ref] = (index, run)
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                index, run = pending.pop(ref)
                result = self._result(ray, ref, index, run)
                stopped = stopped or result.unreachable
                yield result
        for index, run in reversed(queue):  # not started: the tracker stopped answering
            yield not_scanned(index, run.ref)

    @staticmethod
    def _result(ray, ref, index: int, run) -> RunResult:
        try:
            return ray.get(ref)
        except ray.exceptions.RayError as exc:
            # Every try died (worker or node lost MAX_RETRIES + 1 times): reported, never dropped.
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
            return RunResult(index, run.ref, errors=[(FETCH, f"the Ray task for this run failed {MAX_RETRIES + 1} "
                                                             f"times ({type(exc).__name__}: {first})")])

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

