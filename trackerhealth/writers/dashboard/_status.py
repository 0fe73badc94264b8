"""How the pages show a run's status: only ``ok`` is green, and only ``ok`` with every check run.

``report.status`` is ``ok``, ``warning`` or ``critical`` from the findings, and — from the
"no silent health" contract — ``error`` (part of the analysis failed) or ``unknown`` (no training
loss recognised), each with a reason. Any status the pages do not know is drawn in a neutral grey
with its own name and reason, never as healthy: a new status added to the schema cannot turn green
here by accident.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...schema import CRITICAL, ERROR, OK, SKIPPED, WARNING, HealthReport

KNOWN = {OK: "healthy", WARNING: "warning", CRITICAL: "critical"}
# The contract's order for sorting: worst first. A status this table lacks sorts with ``error``.
RANK = {CRITICAL: 0, "error": 1, "unknown": 2, WARNING: 3, OK: 4}
MEANING = {
    "error": "part of the analysis failed, so this run is not known to be healthy",
    "unknown": "no training loss was recognised, so this run's health could not be judged",
}


@dataclass(frozen=True)
class StatusView:
    status: str  # the status as shown (report.status, or "error" when a check failed under "ok")
    label: str  # the word on the score card
    css: str  # ok / warning / critical, or "other" (neutral grey)
    reason: str  # why, for any status that is not ok/warning/critical ("" otherwise)

    @property
    def rank(self) -> int:
        return RANK.get(self.status, RANK["error"])

    @property
    def healthy(self) -> bool:
        return self.status == OK


def status_reason(report: HealthReport) -> str:
    """The reason the report gives for its status, else what its failed checks said."""
    # The reason attribute is being added to the schema alongside the new statuses; read it when
    # the report has one (any of the names under discussion), so this page works before and after.
    for name in ("status_reason", "reason"):
        text = getattr(report, name, None)
        if isinstance(text, str) and text.strip():
            return text.strip()
    failed = [f for f in report.findings if f.level == ERROR]
    return "; ".join(f"{f.id} could not run: {f.message}" for f in failed)


def view(report: HealthReport) -> StatusView:
    status = str(report.status)
    failed = any(f.level == ERROR for f in report.findings)
    # Guards for an ``ok`` that the findings do not support (never green, issue 16 "no silent
    # health"): a check that crashed is not a check that passed, and no check at all is no verdict.
    if status == OK and failed:
        status = "error"
    elif status == OK and not any(f.level == OK for f in report.findings):
        status = "unknown"
        skipped = [f for f in report.findings if f.level == SKIPPED]
        reason = status_reason(report) or (
            f"no check could run ({len(skipped)} skipped, e.g. {skipped[0].id}: {skipped[0].message})"
            if skipped else "no check ran on this run")
        return StatusView(status, status, "other", reason)
    if status in KNOWN:
        return StatusView(status, KNOWN[status], status, "")
    reason = status_reason(report) or MEANING.get(status, f"status {status!r}: not one of ok, warning, critical")
    return StatusView(status, status, "other", reason)


__all__ = ["KNOWN", "MEANING", "RANK", "StatusView", "status_reason", "view"]
