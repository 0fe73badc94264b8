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
from typing import Any
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import MappingProxyType

from ..adapters.base import RunSkipped, TrackerUnreachable
from ..redaction import redact_secrets
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
    "WriteFailed",
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


class WriteFailed(Exception):
    """MLflow did not take a write; the message is MLflow's, with credentials redacted."""


def _caused_by_connection(exc: BaseException) -> bool:
    """Whether a failure was the transport (refused, reset, timed out), by the exceptions' types:
    MlflowClient chains the ``requests`` error it got (implicitly, without ``from``)."""
    import requests

    seen: BaseException | None = exc
    for _ in range(8):
        if isinstance(seen, (requests.ConnectionError, requests.Timeout)) and \
                not isinstance(seen, requests.exceptions.RetryError):
            return True
        seen = seen.__cause__ or seen.__context__
        if seen is None:
            return False
    return False


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

    def __init__(self, open_client: Callable[[], Any], current_tags: Callable[[str], dict[str, str]],
                 alert: AlertSink | None = None, config=None, clock: Callable[[], str] = utc_stamp):
        # The client (and mlflow itself) is opened on the first write: a re-scan in which every
        # run kept its report writes nothing, and importing mlflow is most of such a scan's time.
        self._open_client = open_client
        self._client = None
        self.current_tags = current_tags
        self.alert = alert
        self.clock = clock
        self.config = config
        self._dashboard = Dashboard()
        self.notes = [self._dashboard.note] if self._dashboard.note else []

    @property
    def client(self):
        if self._client is None:
            self._client = self._open_client()
        return self._client

    @property
    def _tag(self):
        from mlflow.entities import RunTag

        return RunTag

    @property
    def _exc(self):
        from mlflow.exceptions import MlflowException

        return MlflowException

    def write(self, report: HealthReport, history: RunHistory, dry_run: bool = False) -> MlflowWriteOutcome:
        run_id = report.run.id
        current = self.current_tags(run_id)
        outcome = _Draft(run_id, dry_run=dry_run)
        body = report_json(report)
        digest = self._dashboard.digest(body)
        wanted = {**health_tags(report), DIGEST: digest}

        if self.alert is not None:
            claim = alerting.TrackerClaim(lambda: self._guarded(run_id, lambda: self.client.get_run(run_id))
                                          .data.tags.get(ALERTED),
                                          lambda value: self._guarded(run_id, lambda: self.client.set_tag(
                                              run_id, ALERTED, fit(value))), settle=alerting.claim_settle())

            def send(finding) -> bool:
                try:
                    self.alert.deliver(report, finding, episode=claim.token)
                except AlertError as exc:
                    outcome.problems.append(WriteProblem(ALERT, redact_secrets(f"alert for {finding.id}: {exc}")))
                    return False  # not recorded as alerted: the next scan tries again
                return True

            outcome.alerts_sent, still = alerting.deliver(report, alerting.parse_entries(current.get(ALERTED)),
                                                          dry_run, send, claim)
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

        self._guarded(run_id, lambda: self._upload_and_tag(run_id, report, history, body, upload, outcome))
        return outcome.outcome()

    def _upload_and_tag(self, run_id, report, history, body, upload, outcome) -> None:
        if upload:
            self.client.log_text(run_id, body, REPORT_ARTIFACT)
            if self._dashboard.available:
                try:
                    html = self._dashboard.render(history, report, self.config)
                except Exception as exc:  # noqa: BLE001 - a dashboard bug must not cost the tags
                    outcome.problems.append(WriteProblem(RENDER, redact_secrets(f"dashboard: {type(exc).__name__}: {exc}")))
                    outcome.artifacts.remove(DASHBOARD_ARTIFACT)
                    outcome.tags.pop(DIGEST, None)  # retry the upload next scan
                else:
                    self.client.log_text(run_id, html, DASHBOARD_ARTIFACT)
        # Tags last: the digest claims uploads that really happened.
        self.client.log_batch(run_id, tags=[self._tag(k, v) for k, v in outcome.tags.items()])

    def _guarded(self, run_id: str, call):
        """``call()`` with MlflowClient's failures made ours: a run deleted meanwhile is skipped, a
        server that stopped answering is TrackerUnreachable, anything else a WriteFailed — each
        with the credentials MlflowClient quotes (it names the URL it was given) redacted."""
        try:
            return call()
        except (RunSkipped, TrackerUnreachable):
            raise
        except Exception as exc:  # noqa: BLE001 - MlflowClient and its artifact stores raise many kinds
            text = redact_secrets(str(exc) if isinstance(exc, self._exc) else f"{type(exc).__name__}: {exc}")
            if _caused_by_connection(exc):
                raise TrackerUnreachable(f"the MLflow server stopped answering writes: {text}") from None
            self._raise_if_gone(run_id)
            raise WriteFailed(text) from None

    def _raise_if_gone(self, run_id: str) -> None:
        try:
            run = self.client.get_run(run_id)
        except self._exc as exc:
            if getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
                raise RunSkipped("deleted during the scan") from None
            return
        if run.info.lifecycle_stage == "deleted":
            raise RunSkipped("deleted during the scan")
