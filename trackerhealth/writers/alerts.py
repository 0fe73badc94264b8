"""Alerts for newly critical findings: a Slack-compatible webhook payload, a sender, de-duplication.

Trackers have no run alerts, so trackerhealth sends them. The payload is what a Slack incoming
webhook takes (``text`` as the notification fallback, ``blocks`` for the message) plus a
``trackerhealth`` object with the same facts as data, so any webhook receiver (a Teams/Discord
relay, an incident tool, a script) can use it without parsing Markdown. Slack ignores the extra key.

De-duplication is stateless on our side: the writer keeps, on the run itself, the ids of the
critical findings already alerted (MLflow: tag ``trackerhealth.alerted``). A scheduled job that
forgets everything between runs therefore alerts once per finding; a finding that clears leaves
that list, so if it returns it alerts again. Scans running at the same time claim a finding on the
run before sending it (:class:`TrackerClaim`), so only one of them sends.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

from ..retry import UNSENT_STATUS, RetryableAnswer, RetryPolicy, parse_retry_after
from ..schema import CRITICAL, Finding, HealthReport
from .base import AlertError, AlertSink
from .formats import evidence_line

__all__ = ["AlertError", "TrackerClaim", "WebhookSender", "build_payload", "dedup_key", "deliver", "format_entries",
           "format_ids", "parse_entries", "parse_ids", "plan", "redact"]

ALERT_LEVEL = CRITICAL
TRACKER_LABELS = {"mlflow": "MLflow", "wandb": "W&B"}  # RunRef.tracker -> the name in alert text
_MAX_SECTION = 2900  # Slack rejects section text over 3,000 characters
_MAX_HEADER = 150


CLAIM_SEP = "@"


def parse_entries(value: str | None) -> dict[str, str]:
    """The bookkeeping value as ``{finding id: claim token}``; the token is "" for an id already
    alerted, and a scan's token while that scan holds the claim to send it."""
    entries: dict[str, str] = {}
    for part in (value or "").split(","):
        ident, _, token = part.strip().partition(CLAIM_SEP)
        if ident:
            entries[ident] = token
    return entries


def format_entries(entries: dict[str, str]) -> str:
    return ",".join(f"{i}{CLAIM_SEP}{t}" if t else i for i, t in sorted(entries.items()))


def parse_ids(value: str | None) -> set[str]:
    """Ids alerted or claimed for alerting: either way not to be sent by this scan."""
    return set(parse_entries(value))


def format_ids(ids: Iterable[str]) -> str:
    return ",".join(sorted(set(ids)))


def claim_settle() -> float:
    """Seconds between claiming an alert on the run and checking the claim survived."""
    raw = os.environ.get("TRACKERHEALTH_ALERT_SETTLE", "").strip()
    return float(raw) if raw else 1.0


class TrackerClaim:
    """A claim on the tracker before sending, so concurrent scans send each alert once.

    The bookkeeping value (MLflow tag ``trackerhealth.alerted``, W&B summary key
    ``trackerhealth/alerted``) is read fresh; ids nobody holds are written back with this scan's
    token (``nonfinite@3f9c…``); after ``settle`` seconds — longer than another scan takes from
    its read to its write — it is read again, and only the ids still carrying our token are ours
    to send. Two scans that claim at once both write; the last write wins, and both see it.

    ``read()`` returns the value as the tracker has it now; ``write(value)`` replaces it.
    """

    def __init__(self, read: Callable[[], str | None], write: Callable[[str], None], settle: float = 1.0,
                 sleep: Callable[[float], None] = time.sleep):
        self.read, self.write, self.settle, self.sleep = read, write, settle, sleep
        self.token = uuid.uuid4().hex[:12]

    def __call__(self, ids: list[str]) -> tuple[set[str], dict[str, str]]:
        """(ids this scan won and must send, {id: token} for those another scan alerted or holds)."""
        held = parse_entries(self.read())
        taken = {i: held[i] for i in ids if i in held}
        mine = [i for i in ids if i not in held]
        if not mine:
            return set(), taken
        self.write(format_entries({**held, **{i: self.token for i in mine}}))
        self.sleep(self.settle)
        after = parse_entries(self.read())
        won = {i for i in mine if after.get(i) == self.token}
        taken.update({i: after[i] for i in mine if i in after and after[i] != self.token})
        return won, taken


def plan(report: HealthReport, already: set[str]) -> tuple[list[Finding], set[str]]:
    """The critical findings to alert now, and which already-alerted ids are still critical.

    Ids no longer critical are dropped from the returned set, so their return alerts again.
    """
    critical = [f for f in report.problems if f.level == ALERT_LEVEL]
    new = [f for f in critical if f.id not in already]
    still = already & {f.id for f in critical}
    return new, still


def deliver(report: HealthReport, already: Mapping[str, str] | set[str], dry_run: bool,
            send: Callable[[Finding], bool],
            claim: Callable[[list[str]], tuple[set[str], dict[str, str]]] | None = None) -> tuple[list[str], set[str]]:
    """Alert each new critical finding through ``send`` (True when it was delivered).

    With ``claim`` (a :class:`TrackerClaim`), only the findings this scan won the claim for are
    sent; those another scan alerted or holds count as alerted. Returns the ids alerted now (in a
    dry run, those that would be) and every id now on record as alerted: the ones still critical
    from before plus the ones delivered. A failed delivery is not recorded, so the next scan tries
    it again.
    """
    held = already if isinstance(already, Mapping) else dict.fromkeys(already, "")
    new, still = plan(report, set(held))
    # An id another scan holds a pending claim on (``id@token``) keeps its token in our record:
    # writing it back bare would make that scan's re-read see its claim gone, and nobody would
    # send the alert (seen with two scans started together).
    still = {f"{i}{CLAIM_SEP}{held[i]}" if held[i] else i for i in still}
    sent: list[str] = []
    if new and claim is not None and not dry_run:
        won, taken = claim([f.id for f in new])
        # Another scan's claim is recorded as we saw it, token and all: if our record lands after
        # its final one, its claim still stands (and still reads as alerted); if before, it wins.
        still |= {f"{i}{CLAIM_SEP}{t}" if t else i for i, t in taken.items()}
        new = [f for f in new if f.id in won]
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


def dedup_key(report: HealthReport, finding: Finding, episode: str = "") -> str:
    """The same for every try of one alert; ``episode`` (the claim token) tells a finding that
    cleared and came back from a repeat of the same alert."""
    run = report.run
    ident = "|".join((run.tracker, run.project, run.id, finding.id, episode))
    return "trackerhealth-" + hashlib.sha256(ident.encode()).hexdigest()[:24]


def build_payload(report: HealthReport, finding: Finding, *, tracker_label: str = "MLflow",
                  episode: str = "") -> dict:
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
    key = dedup_key(report, finding, episode)
    return {
        "text": _cut(f"trackerhealth: run {_escape(name)} is critical — {finding.id}: {_escape(finding.message)}",
                     _MAX_SECTION),
        "blocks": blocks,
        # Slack ignores keys it does not know; relays that de-duplicate (PagerDuty-style) read this.
        "dedup_key": key,
        "trackerhealth": {
            "dedup_key": key,
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


class _NotDelivered(Exception):
    """The request never reached the server (refused, unresolvable, connect timeout): safe to repeat."""


class WebhookSender(AlertSink):
    """POSTs JSON to one webhook URL under the shared retry policy (:mod:`trackerhealth.retry`).

    A POST is not idempotent: once the body may have been taken, repeating it can alert twice. So
    only what proves the server did not take it is retried — a connection that never opened, 429
    and 503 (the server says it did not process the request) — and never a timeout or a dropped
    connection after sending, nor a 500. Each payload carries ``dedup_key`` for receivers that
    de-duplicate (it is the same for every try of one alert).

    ``timeout`` bounds one alert, retries included.
    """

    def __init__(self, url: str, timeout: float = 10.0, retries: int = 3, backoff: float = 1.0):
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"alert webhook must be an http(s) URL, not {redact(url)!r}")
        self.url = url
        self.policy = RetryPolicy(retries=retries, backoff=backoff, timeout=timeout)

    @classmethod
    def from_env(cls, url: str, timeout: float | None = None) -> WebhookSender:
        """Retry budget from ``TRACKERHEALTH_HTTP_RETRIES`` / ``TRACKERHEALTH_HTTP_BACKOFF`` (as for the tracker)."""
        policy = RetryPolicy.from_env(timeout)
        return cls(url, timeout=min(policy.timeout, 30.0), retries=min(policy.retries, 5), backoff=policy.backoff)

    @property
    def label(self) -> str:
        return redact(self.url)

    def deliver(self, report: HealthReport, finding: Finding, episode: str = "") -> None:
        """The :class:`AlertSink` call: :func:`build_payload` for the run's tracker, then :meth:`send`."""
        label = TRACKER_LABELS.get(report.run.tracker, report.run.tracker)
        self.send(build_payload(report, finding, tracker_label=label, episode=episode))

    def send(self, payload: dict) -> None:
        data = json.dumps(payload, allow_nan=False).encode()
        tries = 0

        def attempt(left: float) -> None:
            nonlocal tries
            tries += 1
            req = urllib.request.Request(self.url, data=data, method="POST",
                                         headers={"Content-Type": "application/json", "User-Agent": "trackerhealth"})
            try:
                with urllib.request.urlopen(req, timeout=left) as resp:
                    resp.read()
            except urllib.error.HTTPError as exc:
                if exc.code in UNSENT_STATUS:
                    raise RetryableAnswer(exc.code, parse_retry_after(exc.headers.get("Retry-After")
                                                                      if exc.headers else None)) from None
                raise
            except urllib.error.URLError as exc:
                # urllib raises URLError only while connecting and sending; an error while waiting
                # for the answer comes out as the bare OSError (the server may have the alert).
                raise _NotDelivered(f"{type(exc.reason).__name__}: {exc.reason}") from None

        try:
            self.policy.call(attempt, lambda exc: isinstance(exc, _NotDelivered))
        except RetryableAnswer as exc:
            raise AlertError(f"webhook {self.label} did not take the alert ({exc}) after {tries} tries; "
                             "it will be retried on the next scan") from None
        except _NotDelivered as exc:
            raise AlertError(f"webhook {self.label} could not be reached ({exc}) after {tries} tries; "
                             "it will be retried on the next scan") from None
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise AlertError(f"webhook {self.label} refused the alert (HTTP {exc.code}); check --alert-webhook") from None
            raise AlertError(f"webhook {self.label} answered HTTP {exc.code}: not repeated now, since it may have "
                             "taken the alert; it will be retried on the next scan") from None
        except OSError as exc:
            raise AlertError(f"webhook {self.label} did not confirm the alert ({type(exc).__name__}): not repeated "
                             "now, since it may have taken it; it will be retried on the next scan") from None
