"""Write a run's health back onto its W&B run, without resuming it.

What a scan writes (the contract in DESIGN.md):

* tags ``health:ok``, or ``health:<id>`` per warning/critical finding, with ``health:error`` /
  ``health:unknown`` first when the analysis failed or found no training loss (such a run is never
  ``health:ok``) — only tags starting with ``health:`` are replaced, every other tag stays;
* summary keys ``trackerhealth/score`` and ``trackerhealth/<dimension>`` (the five scorecard
  dimensions; a dimension that could not be scored is left out), ``trackerhealth/status``,
  ``trackerhealth/findings``, plus two bookkeeping keys: ``trackerhealth/alerted`` (critical ids
  already alerted, so a stateless scheduled job never alerts twice) and ``trackerhealth/digest``
  (what the uploaded dashboard shows, so an unchanged run is not re-uploaded);
* the dashboard as the run file ``trackerhealth/dashboard.html``;
* a W&B alert (``notifyScriptableRunAlert``, addressed by entity, project and run: no live run is
  needed) for each new critical finding; W&B sends it to Slack or email as the user configured.

Never by resuming the run (``wandb.init(resume=…)`` rewrites its host, program and requirements and
marks it running). Tags and summary are both ``upsertBucket`` writes of the whole list/object, so
each is read from the server just before it is written and only ``health:*`` tags and
``trackerhealth/*`` keys change in it. The tag write sends only ``id`` and ``tags`` — not the
SDK's ``Run.update()``, which would also send back config, notes and description as read, and so
undo an edit made meanwhile. Nothing is written when nothing changed.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from ..adapters.base import RunSkipped
from ..schema import CRITICAL, ERROR, UNKNOWN, Finding, HealthReport, RunHistory
from . import alerts as alerting
from ._common import Dashboard, report_json
from .base import ALERT, RENDER, AlertError, AlertSink, WriteOutcome, WriteProblem, Writer
from .formats import evidence_line

__all__ = ["ALERTED", "DASHBOARD_FILE", "DIGEST", "FINDINGS", "SCORE", "STATUS", "TAG_PREFIX",
           "Retrying", "WandbAlertSink", "WandbTarget", "WandbWriteOutcome", "WandbWriter", "health_summary",
           "health_tags", "with_health_tags"]

T = TypeVar("T")
#: ``retrying(call, what)``: ``call()`` under the W&B retry policy; ``what`` names it in errors.
Retrying = Callable[[Callable[[], T], str], T]


class WandbTarget(Protocol):
    """The W&B project written to: the public members of
    :class:`~trackerhealth.adapters.wandb.WandbApiAdapter` that the writer uses."""

    api: Any  # wandb.Api, connected
    entity: str | None
    project: str

    @property
    def path(self) -> str: ...  # ENTITY/PROJECT

    @property
    def app_url(self) -> str: ...  # the W&B app, for links

TAG_PREFIX = "health:"
PREFIX = "trackerhealth/"
SCORE, STATUS, FINDINGS = PREFIX + "score", PREFIX + "status", PREFIX + "findings"
ALERTED, DIGEST = PREFIX + "alerted", PREFIX + "digest"
DASHBOARD_FILE = "trackerhealth/dashboard.html"

# wandb-core's own document for run.alert() (wandb 0.31), sent here for a run that is not live.
NOTIFY = """mutation NotifyScriptableRunAlert ($entityName: String!, $projectName: String!, $runName: String!, \
$title: String!, $text: String!, $severity: AlertSeverity = INFO, $waitDuration: Duration) {
	notifyScriptableRunAlert(input: {entityName:$entityName,projectName:$projectName,runName:$runName,\
title:$title,text:$text,severity:$severity,waitDuration:$waitDuration}) {
		success
	}
}"""
# The SDK's summary write (HTTPSummary._write): the whole summary object.
WRITE_SUMMARY = """
mutation UpsertBucket( $id: String, $summaryMetrics: JSONString) {
    upsertBucket(input: { id: $id, summaryMetrics: $summaryMetrics}) {
        bucket { id }
    }
}
"""
# The SDK's run update narrowed to the tags (see the module docstring).
WRITE_TAGS = """
mutation UpsertBucket($id: String!, $tags: [String!]) {
    upsertBucket(input: {id: $id, tags: $tags}) {
        bucket { id }
    }
}
"""


def health_tags(report: HealthReport) -> list[str]:
    ids = list(dict.fromkeys(f.id for f in report.problems))
    if report.status in (ERROR, UNKNOWN):  # a failed or unread analysis is never tagged healthy
        ids.insert(0, report.status)
    return [TAG_PREFIX + i for i in ids] if ids else [TAG_PREFIX + "ok"]


def with_health_tags(tags: list[str], report: HealthReport) -> list[str]:
    """``tags`` with its ``health:*`` tags replaced by the report's; every other tag kept, in order."""
    return [t for t in tags if not t.startswith(TAG_PREFIX)] + health_tags(report)


def health_summary(report: HealthReport) -> dict:
    values: dict = {STATUS: report.status, FINDINGS: ",".join(dict.fromkeys(f.id for f in report.problems))}
    if report.score is not None:
        values[SCORE] = round(float(report.score), 1)
    for name, score in report.scores.items():
        if score is not None:
            values[PREFIX + name] = round(float(score), 1)
    return values


@dataclass(frozen=True)
class WandbWriteOutcome(WriteOutcome):
    """What one write did on a W&B run (or, in a dry run, would do)."""

    tags_added: tuple[str, ...] = ()
    tags_removed: tuple[str, ...] = ()
    summary: Mapping[str, Any] = field(default_factory=dict)  # trackerhealth/* keys set (None: removed)
    files: tuple[str, ...] = ()


@dataclass
class _Draft:
    """The outcome while the write is under way; :meth:`outcome` freezes it."""

    run_id: str
    tags_added: list[str] = field(default_factory=list)
    tags_removed: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    alerts_sent: list[str] = field(default_factory=list)
    problems: list[WriteProblem] = field(default_factory=list)
    dry_run: bool = False

    def outcome(self) -> WandbWriteOutcome:
        return WandbWriteOutcome(
            self.run_id, changed=bool(self.tags_added or self.tags_removed or self.summary or self.files),
            dry_run=self.dry_run, alerts_sent=tuple(self.alerts_sent), problems=tuple(self.problems),
            tags_added=tuple(self.tags_added), tags_removed=tuple(self.tags_removed),
            summary=MappingProxyType(dict(self.summary)), files=tuple(self.files))


class WandbAlertSink(AlertSink):
    """A W&B alert on the run (``notifyScriptableRunAlert``, addressed by entity, project and
    run: no live run is needed); W&B sends it to Slack or email as the user configured."""

    label = "W&B"

    def __init__(self, target: WandbTarget, retrying: Retrying):
        self.target = target
        self.retrying = retrying

    def deliver(self, report: HealthReport, finding: Finding, episode: str = "") -> None:
        from ..adapters.wandb import graphql

        target = self.target
        title = f"trackerhealth: {finding.id} in {report.run.name or report.run.id}"[:256]
        text = _alert_text(report, finding)
        try:
            answer = self.retrying(lambda: graphql(target.api, NOTIFY, {
                "entityName": target.entity, "projectName": target.project, "runName": report.run.id,
                "title": title, "text": text, "severity": "ERROR" if finding.level == CRITICAL else "WARN"}),
                f"alerting on {report.run.id}")
        except Exception as exc:  # noqa: BLE001 - a failed alert is reported and retried next scan
            raise AlertError(str(exc)) from None
        if not (answer.get("notifyScriptableRunAlert") or {}).get("success"):
            raise AlertError("W&B did not accept the alert")


class WandbWriter(Writer):
    """Writes reports onto the runs a :class:`~trackerhealth.adapters.wandb.WandbApiAdapter` listed.

    ``target``: the W&B project (the adapter's public connection); ``retrying``: the retry policy
    for the writes (the adapter's, so reads and writes to one server follow one rule);
    ``alerts``: where each new critical finding is sent (a :class:`WandbAlertSink`, a webhook);
    ``report``: keep the project's "Training health" report up to date (see :meth:`finish`).
    :func:`trackerhealth.trackers.writer_for` builds it from an adapter.
    """

    def __init__(self, target: WandbTarget, *, retrying: Retrying, alerts: Sequence[AlertSink] = (), config=None,
                 report: bool = True):
        self.target = target
        self.retrying = retrying
        self.alerts = tuple(alerts)
        self.config = config
        self.report = report
        self._dashboard = Dashboard()
        self.notes = [self._dashboard.note] if self._dashboard.note else []
        self.run_roles: list[dict] = []  # role -> key(s) per written run, for the project report

    # -- one run ---------------------------------------------------------------------------------
    def write(self, report: HealthReport, history: RunHistory, dry_run: bool = False) -> WandbWriteOutcome:
        from ..adapters.wandb import graphql, summary_of

        target, run_id = self.target, report.run.id
        self.run_roles.append(self._roles(history))
        outcome = _Draft(run_id, dry_run=dry_run)
        run = self._fresh(run_id)
        current_tags = list(run.tags or [])
        summary = summary_of(run)

        wanted_tags = with_health_tags(current_tags, report)
        outcome.tags_added = [t for t in wanted_tags if t not in current_tags]
        outcome.tags_removed = [t for t in current_tags if t not in wanted_tags]

        body = report_json(report)
        digest = self._dashboard.digest(body)
        wanted = {**health_summary(report), DIGEST: digest}
        already = alerting.parse_entries(summary.get(ALERTED) if isinstance(summary.get(ALERTED), str) else "")
        claim = alerting.TrackerClaim(lambda: self._alerted_now(run_id), lambda value: self._claim(run_id, value),
                                      settle=alerting.claim_settle())
        outcome.alerts_sent, still = alerting.deliver(report, already, dry_run,
                                                      lambda finding: self._alert(report, finding, outcome,
                                                                                  claim.token), claim)
        wanted[ALERTED] = alerting.format_ids(still)
        ours = {k for k in summary if k.startswith(PREFIX)}
        outcome.summary = {k: v for k, v in wanted.items() if summary.get(k) != v}
        outcome.summary.update({k: None for k in ours - set(wanted)})
        upload = self._dashboard.available and summary.get(DIGEST) != digest
        if upload:
            outcome.files.append(DASHBOARD_FILE)
        if dry_run:
            return outcome.outcome()

        if upload and not self._upload_dashboard(run, report, history, outcome):
            outcome.summary.pop(DIGEST, None)  # not uploaded: try again next scan
        if outcome.tags_added or outcome.tags_removed:
            fresh = self._fresh(run_id)  # re-read just before writing the whole list
            tags = with_health_tags(list(fresh.tags or []), report)
            self.retrying(lambda: graphql(target.api, WRITE_TAGS, {"id": fresh.storage_id, "tags": tags}),
                          f"writing {run_id}'s tags")
        if outcome.summary:
            fresh = self._fresh(run_id)  # re-read just before writing the whole object
            merged = summary_of(fresh)
            for key, value in outcome.summary.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            body = json.dumps(merged)
            self.retrying(lambda: graphql(target.api, WRITE_SUMMARY, {"id": fresh.storage_id, "summaryMetrics": body}),
                          f"writing {run_id}'s summary")
        return outcome.outcome()

    def _alerted_now(self, run_id: str) -> str:
        from ..adapters.wandb import summary_of

        value = summary_of(self._fresh(run_id)).get(ALERTED)
        return value if isinstance(value, str) else ""

    def _claim(self, run_id: str, value: str) -> None:
        """Write only ``trackerhealth/alerted`` into the summary as the server has it now."""
        from ..adapters.wandb import graphql, summary_of

        fresh = self._fresh(run_id)
        body = json.dumps({**summary_of(fresh), ALERTED: value})
        self.retrying(lambda: graphql(self.target.api, WRITE_SUMMARY, {"id": fresh.storage_id, "summaryMetrics": body}),
                      f"claiming {run_id}'s alerts")

    def _roles(self, history: RunHistory) -> dict:
        from ..roles import resolve

        config = self.config
        try:
            view = resolve(history, config.roles if config is not None else None,
                           config.units if config is not None else None)
        except Exception:  # noqa: BLE001 - the report panels are a convenience
            return {}
        return view.roles.describe()

    def _fresh(self, run_id: str):
        from ..adapters.wandb import fresh_run

        target = self.target
        try:
            return self.retrying(lambda: fresh_run(target.api, target.entity, target.project, run_id),
                                 f"reading run {run_id}")
        except ValueError as exc:  # RunNotFoundError
            if "Could not find run" in str(exc):
                raise RunSkipped("deleted during the scan") from None
            raise

    def _alert(self, report: HealthReport, finding, outcome: _Draft, episode: str = "") -> bool:
        """Send one alert to every sink; True when at least one took it. ``episode`` is this scan's
        claim token: the payload's de-duplication key."""
        delivered = False
        for sink in self.alerts:
            try:
                sink.deliver(report, finding, episode=episode)
                delivered = True
            except AlertError as exc:
                outcome.problems.append(WriteProblem(ALERT, f"alert for {finding.id} via {sink.label}: {exc}"))
        return delivered

    def _upload_dashboard(self, run, report: HealthReport, history: RunHistory, outcome: _Draft) -> bool:
        try:
            html = self._dashboard.render(history, report, self.config)
        except Exception as exc:  # noqa: BLE001 - a dashboard bug must not cost the tags
            outcome.problems.append(WriteProblem(RENDER, f"dashboard: {type(exc).__name__}: {exc}"))
            outcome.files.remove(DASHBOARD_FILE)
            return False
        with tempfile.TemporaryDirectory(prefix="trackerhealth-") as tmp:
            path = Path(tmp) / DASHBOARD_FILE
            path.parent.mkdir(parents=True)
            path.write_text(html, encoding="utf-8")
            self.retrying(lambda: run.upload_file(str(path), root=tmp), f"uploading {run.id}'s dashboard")
        return True

    # -- the project ------------------------------------------------------------------------------
    def finish(self, reports: Sequence[HealthReport] = (), errors: Sequence[Mapping[str, Any]] = (),
               dry_run: bool = False, sweeps: Sequence[Any] = ()) -> list[str]:
        """Update the project's "Training health" report (with the sweeps' patterns); returns notes
        (what was done or why not)."""
        if not self.report or not self.run_roles:
            return []
        from .wandb_report import upsert_report

        return upsert_report(self.target, self.run_roles, dry_run=dry_run, retrying=self.retrying, sweeps=sweeps)


def _alert_text(report: HealthReport, finding) -> str:
    lines = [finding.message, f"Fix: {finding.recommendation}"]
    for e in finding.evidence[:3]:
        lines.append(evidence_line(e))
    if report.run.url:
        lines.append(f"Run: {report.run.url}")
    return "\n".join(lines)[:4000]
