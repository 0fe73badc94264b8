"""Write a run's health back onto its MLflow run: tags, ``trackerhealth/report.json``, the dashboard.

What a scan writes (the contract in DESIGN.md):

* tags ``trackerhealth.status`` (ok/warning/critical/error/unknown), ``trackerhealth.findings`` (comma-separated
  ids, empty when healthy), ``trackerhealth.score``, ``trackerhealth.scanned_at`` (UTC, ISO 8601);
* ``trackerhealth.alerted`` — critical finding ids already alerted (only with an alert webhook);
* ``trackerhealth.digest`` — a hash of what the artifacts hold, so an unchanged run is not
  re-uploaded (idempotence without local state);
* artifacts ``trackerhealth/report.json`` and, when :mod:`trackerhealth.writers.dashboard`
  provides ``render_run_html(history, report)``, ``trackerhealth/dashboard.html``.

Only ``MlflowClient`` calls that touch nothing else are used: one ``log_batch`` with tags only, and
artifact uploads. Never ``mlflow.start_run(run_id=…)``: resuming a run flips it to RUNNING and
rewrites its end time. Status, end time, metrics, params and every tag not starting with
``trackerhealth.`` stay as they were. MLflow silently truncates tag values over 8,000 characters,
so no value we write is longer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import MappingProxyType

from ..adapters.base import RunSkipped
from ..schema import HealthReport, RunHistory
from . import alerts as alerting
from ._common import Dashboard, report_json
from .base import ALERT, RENDER, AlertError, AlertSink, WriteOutcome, WriteProblem, Writer

__all__ = [
    "ALERTED",
    "DASHBOARD_ARTIFACT",
    "DIGEST",
    "FINDINGS",
    "MAX_TAG",
    "REPORT_ARTIFACT",
    "SCANNED_AT",
    "SCORE",
    "STATUS",
    "MlflowWriteOutcome",
    "MlflowWriter",
    "fit",
    "health_tags",
    "report_json",
]

PREFIX = "trackerhealth."
STATUS, FINDINGS, SCORE, SCANNED_AT = (PREFIX + n for n in ("status", "findings", "score", "scanned_at"))
ALERTED, DIGEST = PREFIX + "alerted", PREFIX + "digest"
MAX_TAG = 8000
REPORT_ARTIFACT = "trackerhealth/report.json"
DASHBOARD_ARTIFACT = "trackerhealth/dashboard.html"


def fit(value: str, limit: int = MAX_TAG) -> str:
    """A tag value MLflow will store whole: comma lists keep whole items plus a count of the rest."""
    if len(value) <= limit:
        return value
    items = value.split(",")
    kept, length = 0, 0
    for i, item in enumerate(items):
        grown = length + (1 if i else 0) + len(item)
        if grown + len(f",…+{len(items) - i - 1}") > limit:
            break
        kept, length = i + 1, grown
    if kept == 0:  # one item longer than the limit
        return value[: limit - 1] + "…"
    return ",".join(items[:kept]) + f",…+{len(items) - kept}"


def health_tags(report: HealthReport) -> dict[str, str]:
    return {
        STATUS: report.status,
        FINDINGS: fit(",".join(f.id for f in report.problems)),
        SCORE: "" if report.score is None else f"{report.score:.0f}",
    }


def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class MlflowWriteOutcome(WriteOutcome):
    """What one write did on an MLflow run (or, in a dry run, would do)."""

    tags: Mapping[str, str] = field(default_factory=dict)  # tags set (changed values and the scan stamp)
    artifacts: tuple[str, ...] = ()


@dataclass
class _Draft:
    """The outcome while the write is under way; :meth:`outcome` freezes it."""

    run_id: str
    tags: dict[str, str] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    alerts_sent: list[str] = field(default_factory=list)
    problems: list[WriteProblem] = field(default_factory=list)
    dry_run: bool = False

    def outcome(self) -> MlflowWriteOutcome:
        return MlflowWriteOutcome(
            self.run_id, changed=bool(set(self.tags) - {SCANNED_AT} or self.artifacts), dry_run=self.dry_run,
            alerts_sent=tuple(self.alerts_sent), problems=tuple(self.problems), tags=MappingProxyType(dict(self.tags)),
            artifacts=tuple(self.artifacts))


class MlflowWriter(Writer):
    """Writes reports onto the runs an MLflow adapter listed.

    ``current_tags(run_id)`` returns the run's tags as listed (to write only what changed and to
    read ``trackerhealth.alerted``); ``alert`` is where alerts go (a webhook), or None for no alerts.
    """

    def __init__(self, client, current_tags: Callable[[str], dict[str, str]],
                 alert: AlertSink | None = None, config=None, clock: Callable[[], str] = utc_stamp):
        from mlflow.entities import RunTag
        from mlflow.exceptions import MlflowException

        self.client = client
        self.current_tags = current_tags
        self.alert = alert
        self.clock = clock
        self._tag = RunTag
        self._exc = MlflowException
        self.config = config
        self._dashboard = Dashboard()
        self.notes = [self._dashboard.note] if self._dashboard.note else []

    def write(self, report: HealthReport, history: RunHistory, dry_run: bool = False) -> MlflowWriteOutcome:
        run_id = report.run.id
        current = self.current_tags(run_id)
        outcome = _Draft(run_id, dry_run=dry_run)
        body = report_json(report)
        digest = self._dashboard.digest(body)
        wanted = {**health_tags(report), DIGEST: digest}

        if self.alert is not None:
            def send(finding) -> bool:
                try:
                    self.alert.deliver(report, finding)
                except AlertError as exc:
                    outcome.problems.append(WriteProblem(ALERT, f"alert for {finding.id}: {exc}"))
                    return False  # not recorded as alerted: the next scan tries again
                return True

            outcome.alerts_sent, still = alerting.deliver(report, alerting.parse_ids(current.get(ALERTED)),
                                                          dry_run, send)
            wanted[ALERTED] = fit(alerting.format_ids(still))

        outcome.tags = {k: v for k, v in wanted.items() if current.get(k) != v}
        outcome.tags[SCANNED_AT] = self.clock()
        upload = current.get(DIGEST) != digest
        if upload:
            outcome.artifacts.append(REPORT_ARTIFACT)
            if self._dashboard.available:
                outcome.artifacts.append(DASHBOARD_ARTIFACT)
        if dry_run:
            return outcome.outcome()

        try:
            if upload:
                self.client.log_text(run_id, body, REPORT_ARTIFACT)
                if self._dashboard.available:
                    try:
                        html = self._dashboard.render(history, report, self.config)
                    except Exception as exc:  # noqa: BLE001 - a dashboard bug must not cost the tags
                        outcome.problems.append(WriteProblem(RENDER, f"dashboard: {type(exc).__name__}: {exc}"))
                        outcome.artifacts.remove(DASHBOARD_ARTIFACT)
                        outcome.tags.pop(DIGEST, None)  # retry the upload next scan
                    else:
                        self.client.log_text(run_id, html, DASHBOARD_ARTIFACT)
            # Tags last: the digest claims uploads that really happened.
            self.client.log_batch(run_id, tags=[self._tag(k, v) for k, v in outcome.tags.items()])
        except self._exc:
            self._raise_if_gone(run_id)
            raise
        return outcome.outcome()

    def _raise_if_gone(self, run_id: str) -> None:
        try:
            run = self.client.get_run(run_id)
        except self._exc as exc:
            if getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
                raise RunSkipped("deleted during the scan") from None
            return
        if run.info.lifecycle_stage == "deleted":
            raise RunSkipped("deleted during the scan")
