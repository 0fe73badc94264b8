"""How the pages show a run's status: only ``ok`` is green, and only ``ok`` with every check run.

``report.status`` is ``ok``, ``warning`` or ``critical`` from the findings, and — from the
"no silent health" contract — ``error`` (part of the analysis failed) or ``unknown`` (no training
loss recognised), each with a reason. Any status the pages do not know is drawn in a neutral grey
with its own name and reason, never as healthy: a new status added to the schema cannot turn green
here by accident.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...schema import CRITICAL, ERROR, OK, UNKNOWN, WARNING, HealthReport

KNOWN = {OK: "healthy", WARNING: "warning", CRITICAL: "critical"}
# The contract's order for sorting: worst first. A status this table lacks sorts with ``error``.
RANK = {CRITICAL: 0, ERROR: 1, UNKNOWN: 2, WARNING: 3, OK: 4}
MEANING = {
    ERROR: "part of the analysis failed, so this run is not known to be healthy",
    UNKNOWN: "the training loss was not recognised or could not be judged, so this run's health is not known",
}


@dataclass(frozen=True)
class StatusView:
    status: str  # the status as shown (report.status, or "error" when a check failed under "ok")
    label: str  # the word on the score card
    css: str  # ok / warning / critical, or "other" (neutral grey)
    reason: str  # why, for any status that is not ok/warning/critical ("" otherwise)

    @property
    def rank(self) -> int:
        return RANK.get(self.status, RANK[ERROR])

    @property
    def healthy(self) -> bool:
        return self.status == OK


def status_reason(report: HealthReport) -> str:
    """Why the report has its status (empty for ok/warning/critical)."""
    return report.status_reason.strip()


def view(report: HealthReport) -> StatusView:
    # The schema's status is the one truth (the tags say the same): error when a stage failed,
    # unknown when no training loss was recognised or it could not be judged. The page never re-derives it.
    status = str(report.status)
    if status in KNOWN:
        return StatusView(status, KNOWN[status], status, "")
    reason = status_reason(report) or MEANING.get(status, f"status {status!r}: not one of ok, warning, critical")
    return StatusView(status, status, "other", reason)


__all__ = ["KNOWN", "MEANING", "RANK", "StatusView", "status_reason", "view"]
