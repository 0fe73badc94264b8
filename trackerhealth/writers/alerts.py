"""Alerts for newly critical findings: a Slack-compatible webhook payload, a sender, de-duplication.

Trackers have no run alerts, so trackerhealth sends them. The payload is what a Slack incoming
webhook takes (``text`` as the notification fallback, ``blocks`` for the message) plus a
``trackerhealth`` object with the same facts as data, so any webhook receiver (a Teams/Discord
relay, an incident tool, a script) can use it without parsing Markdown. Slack ignores the extra key.

De-duplication is stateless on our side: the writer keeps, on the run itself, the ids of the
critical findings already alerted (MLflow: tag ``trackerhealth.alerted``). A scheduled job that
forgets everything between runs therefore alerts once per finding; a finding that clears leaves
that list, so if it returns it alerts again.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from ..schema import CRITICAL, Finding, HealthReport
from .base import AlertError, AlertSink
from .formats import evidence_line

__all__ = ["AlertError", "WebhookSender", "build_payload", "format_ids", "parse_ids", "plan", "redact"]

ALERT_LEVEL = CRITICAL
TRACKER_LABELS = {"mlflow": "MLflow", "wandb": "W&B"}  # RunRef.tracker -> the name in alert text
_MAX_SECTION = 2900  # Slack rejects section text over 3,000 characters
_MAX_HEADER = 150


def parse_ids(value: str | None) -> set[str]:
    return {part.strip() for part in (value or "").split(",") if part.strip()}


def format_ids(ids: Iterable[str]) -> str:
    return ",".join(sorted(set(ids)))


def plan(report: HealthReport, already: set[str]) -> tuple[list[Finding], set[str]]:
    """The critical findings to alert now, and which already-alerted ids are still critical.

    Ids no longer critical are dropped from the returned set, so their return alerts again.
    """
    critical = [f for f in report.problems if f.level == ALERT_LEVEL]
    new = [f for f in critical if f.id not in already]
    still = already & {f.id for f in critical}
    return new, still


def deliver(report: HealthReport, already: set[str], dry_run: bool,
            send: Callable[[Finding], bool]) -> tuple[list[str], set[str]]:
    """Alert each new critical finding through ``send`` (True when it was delivered).

    Returns the ids alerted now (in a dry run, those that would be) and every id now on record as
    alerted: the ones still critical from before plus the ones delivered. A failed delivery is not
    recorded, so the next scan tries it again.
    """
    new, still = plan(report, already)
    sent: list[str] = []
    for finding in new:
        if dry_run:
            sent.append(finding.id)
        elif send(finding):
            still.add(finding.id)
            sent.append(finding.id)
    return sent, still


def _escape(text: str) -> str:
    """Slack mrkdwn needs &, < and > escaped; everything else is literal."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_payload(report: HealthReport, finding: Finding, *, tracker_label: str = "MLflow") -> dict:
    """One message for one newly critical finding of one run."""
    run = report.run
    name = run.name or run.id
    link = f"<{run.url}|{_escape(name)}>" if run.url else f"*{_escape(name)}*"
    evidence = "\n".join(f"• {_escape(evidence_line(e))}" for e in finding.evidence) or "• (no evidence recorded)"
    score = "—" if report.score is None else f"{report.score:.0f}"
    open_run = f" · <{run.url}|open the run in {tracker_label}>" if run.url else ""
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(f"🚨 {finding.id} in {name}", _MAX_HEADER)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(
            f"Run {link} in `{_escape(run.project)}` is *critical*: {_escape(finding.message)}", _MAX_SECTION)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _cut(f"*Evidence*\n{evidence}", _MAX_SECTION)}},
    ]
    if finding.recommendation:
        blocks.append({"type": "section", "text": {"type": "mrkdwn",
                                                   "text": _cut(f"*Fix:* {_escape(finding.recommendation)}", _MAX_SECTION)}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(
        f"trackerhealth · {tracker_label} run `{run.id}` · health score {score}{open_run}", _MAX_SECTION)}]})
    return {
        "text": _cut(f"trackerhealth: run {name} is critical — {finding.id}: {finding.message}", _MAX_SECTION),
        "blocks": blocks,
        "trackerhealth": {
            "run": {**run.to_dict(), "url": run.url},
            "status": report.status,
            "score": report.score,
            "finding": finding.to_dict(),
        },
    }


def redact(url: str) -> str:
    """Webhook URLs carry their secret in the path: show only scheme and host."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}/…"


class WebhookSender(AlertSink):
    """POSTs JSON to one webhook URL, retrying 429/5xx and network errors with backoff."""

    def __init__(self, url: str, timeout: float = 10.0, retries: int = 3, backoff: float = 1.0):
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"alert webhook must be an http(s) URL, not {redact(url)!r}")
        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    @classmethod
    def from_env(cls, url: str) -> WebhookSender:
        """Retry budget from ``TRACKERHEALTH_HTTP_RETRIES`` / ``TRACKERHEALTH_HTTP_BACKOFF`` (as for the tracker)."""
        retries = os.environ.get("TRACKERHEALTH_HTTP_RETRIES")
        backoff = os.environ.get("TRACKERHEALTH_HTTP_BACKOFF")
        return cls(url, retries=min(int(retries), 5) if retries else 3, backoff=float(backoff) if backoff else 1.0)

    @property
    def label(self) -> str:
        return redact(self.url)

    def deliver(self, report: HealthReport, finding: Finding, episode: str = "") -> None:
        """The :class:`AlertSink` call: :func:`build_payload` for the run's tracker, then :meth:`send`."""
        self.send(build_payload(report, finding, tracker_label=TRACKER_LABELS.get(report.run.tracker,
                                                                                 report.run.tracker)))

    def send(self, payload: dict) -> None:
        data = json.dumps(payload, allow_nan=False).encode()
        problem = ""
        for attempt in range(self.retries + 1):
            req = urllib.request.Request(self.url, data=data, method="POST",
                                         headers={"Content-Type": "application/json", "User-Agent": "trackerhealth"})
            retry_after = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    resp.read()
                    return
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code}"
                if exc.code != 429 and exc.code < 500:
                    raise AlertError(f"webhook {self.label} refused the alert ({problem}); check --alert-webhook") from None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
            except (urllib.error.URLError, OSError) as exc:
                problem = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt < self.retries:
                try:
                    delay = min(float(retry_after), 30.0) if retry_after else None
                except ValueError:
                    delay = None
                time.sleep(delay if delay is not None else self.backoff * 2**attempt * random.uniform(0.5, 1.0))
        raise AlertError(f"webhook {self.label} did not take the alert ({problem}) after {self.retries + 1} tries; "
                         "it will be retried on the next scan")
