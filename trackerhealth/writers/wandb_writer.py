"""Write a run's health back onto its W&B run, without resuming it.

What a scan writes (the contract in DESIGN.md):

* tags ``health:ok``, or ``health:<id>`` per warning/critical finding — only tags starting with
  ``health:`` are replaced, every other tag stays;
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
from dataclasses import dataclass, field
from pathlib import Path

from ..adapters.base import RunSkipped
from ..schema import CRITICAL, HealthReport, RunHistory
from . import alerts as alerting
from ._common import Dashboard, report_json
from .formats import evidence_line

__all__ = ["ALERTED", "DASHBOARD_FILE", "DIGEST", "FINDINGS", "SCORE", "STATUS", "TAG_PREFIX",
           "WandbWriteOutcome", "WandbWriter", "health_summary", "health_tags", "with_health_tags"]

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


@dataclass
class WandbWriteOutcome:
    """What one write did (or, in a dry run, would do)."""

    run_id: str
    tags_added: list[str] = field(default_factory=list)
    tags_removed: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)  # trackerhealth/* keys set (None: removed)
    files: list[str] = field(default_factory=list)
    alerts_sent: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.tags_added or self.tags_removed or self.summary or self.files)


class WandbWriter:
    """Writes reports onto the runs a :class:`~trackerhealth.adapters.wandb.WandbApiAdapter` listed.

    ``notify``: send W&B alerts for new critical findings; ``webhook``: also (or instead) a
    Slack-compatible webhook; ``report``: keep the project's "Training health" report up to date
    (see :meth:`finish`).
    """

    def __init__(self, adapter, *, webhook: alerting.WebhookSender | None = None, config=None,
                 notify: bool = True, report: bool = True):
        self.adapter = adapter
        self.webhook = webhook
        self.notify = notify
        self.config = config
        self.report = report
        self._dashboard = Dashboard()
        self.notes = [self._dashboard.note] if self._dashboard.note else []
        self.run_roles: list[dict] = []  # role -> key(s) per written run, for the project report

    # -- one run ---------------------------------------------------------------------------------
    def write(self, report: HealthReport, history: RunHistory, dry_run: bool = False) -> WandbWriteOutcome:
        from ..adapters.wandb import _sdk

        adapter, run_id = self.adapter, report.run.id
        self.run_roles.append(self._roles(history))
        outcome = WandbWriteOutcome(run_id, dry_run=dry_run)
        run = self._fresh(run_id)
        current_tags = list(run.tags or [])
        summary = _sdk.summary_of(run)

        wanted_tags = with_health_tags(current_tags, report)
        outcome.tags_added = [t for t in wanted_tags if t not in current_tags]
        outcome.tags_removed = [t for t in current_tags if t not in wanted_tags]

        body = report_json(report)
        digest = self._dashboard.digest(body)
        wanted = {**health_summary(report), DIGEST: digest}
        already = alerting.parse_ids(summary.get(ALERTED) if isinstance(summary.get(ALERTED), str) else "")
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
            return outcome

        if upload and not self._upload_dashboard(run, report, history, outcome):
            outcome.summary.pop(DIGEST, None)  # not uploaded: try again next scan
        if outcome.tags_added or outcome.tags_removed:
            fresh = self._fresh(run_id)  # re-read just before writing the whole list
            tags = with_health_tags(list(fresh.tags or []), report)
            adapter.retrying(lambda: _sdk.graphql(adapter.api, WRITE_TAGS, {"id": fresh.storage_id, "tags": tags}),
                              f"writing {run_id}'s tags")
        if outcome.summary:
            fresh = self._fresh(run_id)  # re-read just before writing the whole object
            merged = _sdk.summary_of(fresh)
            for key, value in outcome.summary.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            body = json.dumps(merged)
            adapter.retrying(lambda: _sdk.graphql(adapter.api, WRITE_SUMMARY, {"id": fresh.storage_id,
                                                                                  "summaryMetrics": body}),
                              f"writing {run_id}'s summary")
        return outcome

    def _alerted_now(self, run_id: str) -> str:
        value = _sdk_summary(self._fresh(run_id)).get(ALERTED)
        return value if isinstance(value, str) else ""

    def _claim(self, run_id: str, value: str) -> None:
        """Write only ``trackerhealth/alerted`` into the summary as the server has it now."""
        from ..adapters.wandb import _sdk

        fresh = self._fresh(run_id)
        merged = {**_sdk.summary_of(fresh), ALERTED: value}
        body = json.dumps(merged)
        self.adapter.retrying(lambda: _sdk.graphql(self.adapter.api, WRITE_SUMMARY, {
            "id": fresh.storage_id, "summaryMetrics": body}), f"claiming {run_id}'s alerts")

    def _roles(self, history: RunHistory) -> dict:
        from ..roles import resolve

        config = self.config
        try:
            view = resolve(history, getattr(config, "roles", None), getattr(config, "units", None))
        except Exception:  # noqa: BLE001 - the report panels are a convenience
            return {}
        return view.roles.describe()

    def _fresh(self, run_id: str):
        from ..adapters.wandb import _sdk

        adapter = self.adapter
        try:
            return adapter.retrying(lambda: _sdk.fresh_run(adapter.api, adapter.entity, adapter.project, run_id),
                                     f"reading run {run_id}")
        except ValueError as exc:  # RunNotFoundError
            if "Could not find run" in str(exc):
                raise RunSkipped("deleted during the scan") from None
            raise

    def _alert(self, report: HealthReport, finding, outcome: WandbWriteOutcome, episode: str = "") -> bool:
        """Send one alert through W&B (and the webhook); True when at least one took it."""
        from ..adapters.wandb import _sdk

        delivered = False
        if self.notify:
            adapter = self.adapter
            title = f"trackerhealth: {finding.id} in {report.run.name or report.run.id}"[:256]
            text = _alert_text(report, finding)
            try:
                answer = adapter.retrying(lambda: _sdk.graphql(adapter.api, NOTIFY, {
                    "entityName": adapter.entity, "projectName": adapter.project, "runName": report.run.id,
                    "title": title, "text": text, "severity": "ERROR" if finding.level == CRITICAL else "WARN"}),
                    f"alerting on {report.run.id}")
                delivered = bool((answer.get("notifyScriptableRunAlert") or {}).get("success"))
                if not delivered:
                    outcome.problems.append(f"W&B did not accept the alert for {finding.id}")
            except Exception as exc:  # noqa: BLE001 - a failed alert is reported and retried next scan
                outcome.problems.append(f"W&B alert for {finding.id}: {exc}")
        if self.webhook is not None:
            try:
                self.webhook.send(alerting.build_payload(report, finding, tracker_label="W&B", episode=episode))
                delivered = True
            except alerting.AlertError as exc:
                outcome.problems.append(f"webhook alert for {finding.id}: {exc}")
        return delivered

    def _upload_dashboard(self, run, report: HealthReport, history: RunHistory, outcome: WandbWriteOutcome) -> bool:
        try:
            html = self._dashboard.render(history, report, self.config)
        except Exception as exc:  # noqa: BLE001 - a dashboard bug must not cost the tags
            outcome.problems.append(f"dashboard: {type(exc).__name__}: {exc}")
            outcome.files.remove(DASHBOARD_FILE)
            return False
        with tempfile.TemporaryDirectory(prefix="trackerhealth-") as tmp:
            path = Path(tmp) / DASHBOARD_FILE
            path.parent.mkdir(parents=True)
            path.write_text(html, encoding="utf-8")
            self.adapter.retrying(lambda: run.upload_file(str(path), root=tmp), f"uploading {run.id}'s dashboard")
        return True

    # -- the project ------------------------------------------------------------------------------
    def finish(self, dry_run: bool = False) -> list[str]:
        """Update the project's "Training health" report; returns notes (what was done or why not)."""
        if not self.report or not self.run_roles:
            return []
        from .wandb_report import upsert_report

        return upsert_report(self.adapter, self.run_roles, dry_run=dry_run)


def _sdk_summary(run) -> dict:
    from ..adapters.wandb import _sdk

    return _sdk.summary_of(run)


def _alert_text(report: HealthReport, finding) -> str:
    lines = [finding.message, f"Fix: {finding.recommendation}"]
    for e in finding.evidence[:3]:
        lines.append(evidence_line(e))
    if report.run.url:
        lines.append(f"Run: {report.run.url}")
    return "\n".join(lines)[:4000]
