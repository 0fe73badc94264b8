"""Where the monitor's findings go: Python logging, W&B alerts, MLflow tags, a webhook.

Every channel is called from inside the training loop, so none may raise into it or block it:
failures are logged on the ``trackerhealth`` logger, webhook posts run on one background thread.

* ``log`` — ``logging.getLogger("trackerhealth")``: a warning per new warning, an error per new
  critical finding, an info line when one clears. Always on.
* ``wandb`` — ``wandb.alert`` on the live run (``wandb.run``), with ``wait_duration`` so a
  flapping finding cannot flood the inbox; titles are per finding id, so W&B de-duplicates them.
* ``mlflow`` — on ``mlflow.active_run()``, the tags a scan writes (``trackerhealth.status``,
  ``.findings``, ``.score``, ``.scanned_at``; ``.alerted`` when a webhook is configured, so a
  later scheduled scan does not alert the same finding again). The run is never ended or resumed.
* an ``http(s)://`` URL — the scan's Slack-compatible payload, for critical findings (as a scan
  sends), POSTed with a timeout on a background thread.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Iterable, Sequence

from ..schema import CRITICAL, ERROR, LEVEL_RANK, UNKNOWN, WARNING, Finding, HealthReport
from ..writers.formats import evidence_line

logger = logging.getLogger("trackerhealth")

AUTO = "auto"
CHANNELS = ("log", "wandb", "mlflow")


def _install_hint(extra: str, package: str) -> str:
    return f"pip install 'trackerhealth[{extra}]' (or pip install {package})"


def alert_text(finding: Finding) -> str:
    lines = [finding.message]
    if finding.recommendation:
        lines.append(f"Fix: {finding.recommendation}")
    lines.extend(f"- {evidence_line(e)}" for e in finding.evidence)
    return "\n".join(lines)


class AlertedIds:
    """Critical finding ids the webhook delivered; the webhook thread writes, MLflow tags read."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def add(self, diag_id: str) -> None:
        with self._lock:
            self._ids.add(diag_id)

    def discard(self, diag_id: str) -> None:
        with self._lock:
            self._ids.discard(diag_id)

    def snapshot(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._ids)

    def __contains__(self, diag_id: object) -> bool:
        return diag_id in self.snapshot()

    def __bool__(self) -> bool:
        return bool(self.snapshot())


class FailureNote:
    """A channel's delivery failures, said once: a warning at the first, an info line when it works
    again (and a warning at the next failure after that); the ones in between go to debug."""

    def __init__(self) -> None:
        self.failing = False
        self.count = 0

    def note(self, message: str) -> None:
        self.count += 1
        if self.failing:
            logger.debug(message)
            return
        self.failing = True
        logger.warning("%s (said once until it works again)", message)

    def ok(self, message: str) -> None:
        if self.failing:
            self.failing = False
            logger.info(message)


class Channel:
    """A destination for findings; ``notify`` gets the newly raised ones and the cleared ids."""

    name = "channel"

    def notify(self, new: Sequence[Finding], cleared: Sequence[str], report: HealthReport,
               active: dict[str, Finding]) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def close(self, timeout: float) -> None:
        pass


class LogChannel(Channel):
    name = "log"

    def __init__(self, run_label: str):
        self.run_label = run_label

    def notify(self, new, cleared, report, active) -> None:
        for f in new:
            level = logging.ERROR if f.level == CRITICAL else logging.WARNING
            logger.log(level, "%s: %s (%s) %s%s", self.run_label, f.id, f.level, f.message,
                       f" Fix: {f.recommendation}" if f.recommendation else "")
        for diag_id in cleared:
            logger.info("%s: %s cleared", self.run_label, diag_id)


class WandbChannel(Channel):
    """``wandb.alert`` on the live run; nothing (one note) when no run is live."""

    name = "wandb"

    def __init__(self, min_level: str, wait_duration: float, required: bool):
        try:
            import wandb
        except ImportError:
            if required:
                raise ImportError(f"alert='wandb' needs the W&B SDK: {_install_hint('wandb', 'wandb')}") from None
            wandb = None
        self.wandb = wandb
        self.min_rank = LEVEL_RANK[min_level]
        self.wait_duration = wait_duration
        self.required = required  # asked for by name: a missing run is a warning, not an info line
        self._told = False
        self.failures = FailureNote()

    def notify(self, new, cleared, report, active) -> None:
        if self.wandb is None:
            return
        run = getattr(self.wandb, "run", None)
        if run is None:
            if not self._told:
                _say_once(self.required, "no live W&B run (wandb.init not called yet): W&B alerts are skipped "
                          "until there is one (this is said once)")
                self._told = True
            return
        for f in new:
            if LEVEL_RANK[f.level] < self.min_rank:
                continue
            level = self.wandb.AlertLevel.ERROR if f.level == CRITICAL else self.wandb.AlertLevel.WARN
            try:
                run.alert(title=f"trackerhealth: {f.id}", text=alert_text(f), level=level,
                          wait_duration=self.wait_duration)
            except Exception as exc:  # noqa: BLE001 - never into the training loop
                self.failures.note(f"W&B alert for {f.id} failed: {type(exc).__name__}: {exc}")
            else:
                self.failures.ok("W&B alerts are delivered again")


class MlflowChannel(Channel):
    """The scan's health tags on the active MLflow run, written when they change."""

    name = "mlflow"

    def __init__(self, required: bool, alerted: AlertedIds | None = None):
        try:
            import mlflow
        except ImportError:
            if required:
                raise ImportError(f"alert='mlflow' needs MLflow: {_install_hint('mlflow', 'mlflow')}") from None
            mlflow = None
        self.mlflow = mlflow
        self.alerted = alerted  # the webhook's record of alerted ids, shared; None without a webhook
        self.required = required
        self._written: dict[str, dict[str, str]] = {}  # run id -> tags last written
        self._told = False
        self.failures = FailureNote()

    def notify(self, new, cleared, report, active) -> None:
        if self.mlflow is None:
            return
        run = self.mlflow.active_run()
        if run is None:
            if not self._told:
                _say_once(self.required, "no active MLflow run (mlflow.start_run not called yet): MLflow health "
                          "tags are skipped until there is one (this is said once)")
                self._told = True
            return
        from ..writers import mlflow_writer as mw
        from ..writers.alerts import format_ids

        problems = sorted(active.values(), key=lambda f: -LEVEL_RANK[f.level])
        worst = max((LEVEL_RANK[f.level] for f in problems), default=0)
        tags = {
            # error/unknown as a scan writes them: a failed or unjudged analysis is never tagged ok.
            mw.STATUS: report.status if report.status in (ERROR, UNKNOWN) else {0: "ok", 1: WARNING, 2: CRITICAL}[worst],
            mw.FINDINGS: mw.fit(",".join(f.id for f in problems)),
            mw.SCORE: "" if report.score is None else f"{report.score:.0f}",
        }
        if self.alerted is not None:
            tags[mw.ALERTED] = mw.fit(format_ids(self.alerted.snapshot() & set(active)))
        run_id = run.info.run_id
        if self._written.get(run_id) == tags:
            return
        try:
            from mlflow.entities import RunTag
            from mlflow.tracking import MlflowClient

            stamped = {**tags, mw.SCANNED_AT: mw.utc_stamp()}
            MlflowClient().log_batch(run_id, tags=[RunTag(k, v) for k, v in stamped.items()])
            self._written[run_id] = tags
        except Exception as exc:  # noqa: BLE001 - never into the training loop
            self.failures.note(f"writing trackerhealth tags on MLflow run {run_id} failed: {type(exc).__name__}: {exc}")
        else:
            self.failures.ok(f"trackerhealth tags on MLflow run {run_id} are written again")


class WebhookChannel(Channel):
    """The scan's Slack-compatible alert payload for each new critical finding, on a background thread."""

    def __init__(self, url: str, timeout: float, alerted: AlertedIds):
        from ..writers.alerts import WebhookSender

        self.sender = WebhookSender(url, timeout=timeout, retries=1, backoff=0.5)  # validates the scheme
        self.name = f"webhook {self.sender.label}"
        self.alerted = alerted
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self.undelivered: list[str] = []  # finding ids whose alert did not go out (the thread appends)

    def notify(self, new, cleared, report, active) -> None:
        from ..writers.alerts import build_payload

        for diag_id in cleared:
            self.alerted.discard(diag_id)  # it may alert again if it returns
        for f in new:
            if f.level != CRITICAL or f.id in self.alerted:
                continue
            self._queue.put((f.id, build_payload(report, f, tracker_label="training")))
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="trackerhealth-webhook", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                diag_id, payload = item
                try:
                    self.sender.send(payload)
                    self.alerted.add(diag_id)
                except Exception as exc:  # noqa: BLE001 - AlertError or anything else: log, never raise
                    self.undelivered.append(diag_id)
                    if len(self.undelivered) == 1:  # said once; close() gives the count
                        logger.warning("trackerhealth alert for %s not delivered: %s (this webhook's further "
                                       "failures are counted and reported at close())", diag_id, exc)
            finally:
                self._queue.task_done()

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for queued alerts to go out."""
        if self._thread is None:
            return
        done = threading.Event()

        def wait():
            self._queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        if not done.wait(timeout):
            logger.warning("%s: %d alert(s) still unsent after %.0f s", self.name, self._queue.qsize(), timeout)
        if len(self.undelivered) > 1:
            logger.warning("%s: %d alert(s) not delivered (%s)", self.name, len(self.undelivered),
                           ", ".join(self.undelivered))


def _say_once(loud: bool, message: str) -> None:
    """A channel that cannot deliver: a warning when the user named it, an info line under ``auto``."""
    logger.log(logging.WARNING if loud else logging.INFO, message)


def make_channels(alert, *, min_level: str, wait_duration: float, timeout: float,
                  run_label: str) -> tuple[list[Channel], AlertedIds]:
    """Channels for the ``alert`` argument; the shared set of webhook-alerted ids."""
    if alert is None:
        wanted: list[str] = []
    elif isinstance(alert, str):
        wanted = [alert]
    else:
        wanted = list(alert)
    auto = AUTO in wanted
    wanted = [a for a in wanted if a != AUTO]
    for a in wanted:
        if not isinstance(a, str) or (a not in CHANNELS and not a.startswith(("http://", "https://"))):
            raise ValueError(f"unknown alert channel {a!r}; use 'log', 'wandb', 'mlflow', 'auto' or an http(s):// webhook URL")
    alerted = AlertedIds()
    channels: list[Channel] = [LogChannel(run_label)]  # logging is always on
    for url in (a for a in wanted if a.startswith(("http://", "https://"))):
        channels.append(WebhookChannel(url, timeout, alerted))
    has_hook = any(isinstance(c, WebhookChannel) for c in channels)
    if "wandb" in wanted or (auto and "wandb" in sys.modules):
        channels.append(WandbChannel(min_level, wait_duration, required="wandb" in wanted))
    if "mlflow" in wanted or (auto and "mlflow" in sys.modules):
        channels.append(MlflowChannel(required="mlflow" in wanted, alerted=alerted if has_hook else None))
    return channels, alerted


def broadcast(channels: Iterable[Channel], new, cleared, report, active) -> None:
    for channel in channels:
        try:
            channel.notify(new, cleared, report, active)
        except Exception as exc:  # noqa: BLE001 - a broken channel never stops training
            logger.warning("trackerhealth %s channel failed: %s: %s", channel.name, type(exc).__name__, exc)
