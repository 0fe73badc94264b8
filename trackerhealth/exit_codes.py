"""The command line's exit codes, and the one rule that turns a command's outcome into one.

Every command (``analyze``, ``report``, ``scan``, ``summary``, ``demo``) exits through this module,
so a CI job reads the same number the same way whichever command it ran.

Imports nothing from trackerhealth: ``--help`` and ``--version`` load it without the analysis core.
"""

from __future__ import annotations

from collections.abc import Iterable

OK = 0            # nothing at or above --fail-on, and everything was analysed
FINDINGS = 1      # a run at or above --fail-on
USAGE = 2         # usage, configuration or input error, or a run whose analysis failed (status `error`)
UNREACHABLE = 3   # the tracker did not answer

MEANING = {
    OK: "healthy",
    FINDINGS: "findings at or above fail-on",
    USAGE: "usage, configuration or input error, or an analysis that failed",
    UNREACHABLE: "tracker unreachable",
}

FAIL_ON = ("critical", "warning", "never")

# How far each run status reaches towards --fail-on. `unknown` (no training loss recognised) is
# not health: it counts as a warning. `error` is not on this scale: it exits USAGE on its own.
_STATUS_RANK = {"ok": 0, "warning": 1, "unknown": 1, "critical": 2}
_FAIL_ON_RANK = {"warning": 1, "critical": 2}


def reaches(status: str, fail_on: str) -> bool:
    """Whether a run with this status fails a job run with ``--fail-on fail_on``."""
    if fail_on not in FAIL_ON:
        raise ValueError(f"fail_on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
    if fail_on == "never":
        return False
    return _STATUS_RANK.get(status, 0) >= _FAIL_ON_RANK[fail_on]


def exit_code(statuses: Iterable[str], fail_on: str, *, input_errors: bool = False,
              unreachable: bool = False) -> int:
    """The exit code for a command whose runs ended with ``statuses`` (``HealthReport.status``).

    The most serious outcome wins: an unreachable tracker (3), then anything that was not
    analysed — an input or write error, or a run whose analysis failed (status ``error``) — (2),
    then a run at or above ``fail_on`` (1). An incomplete analysis outranks findings so that it
    never reads as "only findings", and ``--fail-on never`` silences findings, not failures.
    """
    statuses = list(statuses)
    if unreachable:
        return UNREACHABLE
    if input_errors or "error" in statuses:
        return USAGE
    if any(reaches(s, fail_on) for s in statuses):
        return FINDINGS
    return OK


def for_reports(reports, fail_on: str, *, input_errors: bool = False, unreachable: bool = False) -> int:
    """:func:`exit_code` for ``HealthReport`` objects (reads only their ``status``)."""
    return exit_code((r.status for r in reports), fail_on, input_errors=input_errors, unreachable=unreachable)
