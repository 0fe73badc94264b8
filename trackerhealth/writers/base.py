"""What every writer and every alert sink is to the scan loop, and what one write reports back.

A writer puts one run's health back onto the run (tags, summary keys, artifacts, alerts) and says
what it did as a frozen :class:`WriteOutcome`. The scan loop (:mod:`trackerhealth.scan`) calls
only the members declared here; :mod:`trackerhealth.trackers` builds the writer that goes with an
adapter. An :class:`AlertSink` delivers one alert (a Slack-compatible webhook, a W&B alert).

This module imports only the schema and the adapters' public errors: a writer never reaches into
an adapter's private members.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import Finding, HealthReport, RunHistory

__all__ = ["ALERT", "RENDER", "STAGES", "WRITE", "AlertError", "AlertSink", "WriteOutcome", "WriteProblem", "Writer"]

# The part of a write that failed; the scan reports it as the error's ``kind``.
RENDER = "render"  # the run's dashboard could not be rendered (its tags are still written)
ALERT = "alert"  # an alert was not delivered (it is retried on the next scan)
WRITE = "write"  # a tag, summary or artifact write failed
STAGES = (RENDER, ALERT, WRITE)


@dataclass(frozen=True)
class WriteProblem:
    """A part of one run's write that failed while the rest went through."""

    stage: str  # one of STAGES
    message: str

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"WriteProblem stage must be one of {', '.join(STAGES)}, not {self.stage!r}")


@dataclass(frozen=True)
class WriteOutcome:
    """What one write did (or, in a dry run, would do). Writers return a subclass with the
    details of their tracker (the tags set, the files uploaded)."""

    run_id: str
    changed: bool = False  # anything of the run's health changed (not only the scan stamp)
    dry_run: bool = False
    alerts_sent: tuple[str, ...] = ()  # finding ids alerted now; in a dry run, those that would be
    problems: tuple[WriteProblem, ...] = ()  # parts that failed; the run is reported as an error
    notes: tuple[str, ...] = ()  # worth telling, not failures

    @property
    def written(self) -> bool:
        """Whether the run was really changed on the tracker."""
        return self.changed and not self.dry_run


class Writer(ABC):
    """Writes reports back onto the runs its adapter listed.

    :meth:`write` is called from the scan's worker threads, several runs at once; it raises
    :class:`~trackerhealth.adapters.base.RunSkipped` for a run deleted before its write,
    :class:`~trackerhealth.adapters.base.TrackerUnreachable` when the tracker stopped answering,
    and anything else when the run's health could not be written at all. A part that failed
    while the rest went through is a :class:`WriteProblem` in the outcome instead.
    """

    #: Writer-wide notes for the scan summary (e.g. why there is no dashboard); set in ``__init__``.
    notes: Sequence[str] = ()

    @abstractmethod
    def write(self, report: HealthReport, history: RunHistory, dry_run: bool = False) -> WriteOutcome:
        """Write one run's health (in a dry run: only work out what would be written)."""

    def finish(self, reports: Sequence[HealthReport], errors: Sequence[Mapping[str, Any]],
               dry_run: bool = False, sweeps: Sequence[Any] = ()) -> Sequence[str]:
        """Called once by the scan loop after every run was written (not when the tracker became
        unreachable): project-wide views, such as the W&B project report or a local overview.
        ``sweeps``: the scan's sweep summaries (:class:`trackerhealth.sweeps.SweepSummary`).
        Returns notes saying what was done. The default does nothing."""
        return ()


class AlertError(Exception):
    """An alert was not delivered (after retries); the message never contains a secret."""


class AlertSink(ABC):
    """Delivers one alert for one finding of one run."""

    #: Where alerts go, safe to print (no secret): ``https://hooks.slack.com/…``, ``W&B``.
    label: str = ""

    @abstractmethod
    def deliver(self, report: HealthReport, finding: Finding, episode: str = "") -> None:
        """Send the alert; raises :class:`AlertError` when it was not taken. ``episode`` tells one
        episode of a finding from the next (the alert claim's token): a sink that de-duplicates by
        a key in the payload keys it with it; others may ignore it."""
