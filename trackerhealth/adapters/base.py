"""What every tracker adapter hands to the scan loop, and the two ways a run can drop out of it.

An adapter lists runs and fetches one run's history; nothing else. The scan loop
(:mod:`trackerhealth.scan`) never imports a tracker, so W&B and MLflow plug into the same loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..schema import RunHistory, RunRef


@dataclass(frozen=True)
class Fetched:
    """One run's history and where its points came from (for the scan summary)."""

    history: RunHistory
    fetched_points: int = 0  # downloaded in this scan
    cached_points: int = 0  # read from the local history cache
    requests: int = 0


class RunSkipped(Exception):
    """The run cannot be analyzed, and that is not a failure: deleted during the scan, no metrics.

    A skipped run is data in the scan summary, never an error and never a failed scan.
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class SelectionError(ValueError):
    """The runs asked for cannot be selected (unknown project or experiment, bad --since, bad
    filter, rejected credentials). A usage error: the CLI exits 2 with the message."""


class TrackerUnreachable(Exception):
    """The tracker did not answer at all (connection refused, DNS, timeouts after retries).

    The message names the tracker and how to check it. The CLI exits 3 on it.
    """


@runtime_checkable
class TrackedRun(Protocol):
    """What ``list_runs`` yields: anything with the run's :class:`RunRef`."""

    ref: RunRef


class Adapter(Protocol):
    def list_runs(self) -> Iterable[TrackedRun]: ...

    def fetch_history(self, run: TrackedRun) -> Fetched: ...


class Writer(Protocol):
    def write(self, report, history: RunHistory, dry_run: bool): ...
