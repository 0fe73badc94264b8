"""What every tracker adapter is to the scan loop, and the ways a run can drop out of it.

An adapter lists runs and fetches one run's history; nothing else (writing is a writer's job,
:mod:`trackerhealth.writers.base`; :mod:`trackerhealth.trackers` pairs the two). The scan loop
(:mod:`trackerhealth.scan`) never imports a tracker and calls only the members declared on
:class:`Adapter`, so W&B, MLflow and local folders plug into the same loop.

This module imports only the schema: an adapter never imports a writer.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..schema import RunHistory, RunRef

__all__ = ["Adapter", "AdapterSpec", "Fetched", "NotPortable", "RunSkipped", "SelectionError", "TrackedRun",
           "TrackerUnreachable"]


@dataclass(frozen=True)
class Fetched:
    """One run's history and where its points came from (for the scan summary)."""

    history: RunHistory
    fetched_points: int = 0  # downloaded in this scan
    cached_points: int = 0  # read from the local history cache
    requests: int = 0


class RunSkipped(Exception):
    """The run cannot be analyzed, and that is not a failure: deleted during the scan, no metrics.

    A skipped run is data in the scan summary, never an error and never a failed scan. Raised by
    :meth:`Adapter.fetch_history` and by a writer's ``write`` (a run deleted before its write).
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


class NotPortable(SelectionError):
    """This adapter cannot be opened in another process (a Ray worker), and the message says why
    and what to do instead (a usage error: exit 2)."""


@dataclass(frozen=True)
class AdapterSpec:
    """How to open the same store in another process: the tracker's name (a key of
    :data:`trackerhealth.trackers.TRACKERS`) and its adapter's keyword arguments.

    It travels to Ray workers as a task argument, so it never holds a credential: keys and
    passwords reach a worker separately (:mod:`trackerhealth.fleet.credentials`). It opens the
    adapter for fetching and writing only, so selection options (filters, --since) are left out.
    """

    tracker: str
    options: tuple[tuple[str, Any], ...] = ()

    def kwargs(self) -> dict[str, Any]:
        return dict(self.options)


@runtime_checkable
class TrackedRun(Protocol):
    """What :meth:`Adapter.list_runs` yields: the run's :class:`RunRef`, plus whatever the adapter
    needs to fetch it later (the scan loop reads only ``ref`` and hands the run back)."""

    ref: RunRef


class Adapter(ABC):
    """Reads one tracker's (or folder's) runs for the scan loop.

    Subclasses implement :meth:`list_runs` and :meth:`fetch_history`; the other members have
    defaults that suit an adapter with nothing to tune, remember or release. Errors an adapter
    raises mean: :class:`SelectionError` (usage, exit 2), :class:`TrackerUnreachable` (exit 3;
    from ``fetch_history`` it stops the scan from starting further runs), :class:`RunSkipped`
    (the run is data, not a failure); anything else from ``fetch_history`` fails that run only.
    """

    #: The tracker's name in :class:`RunRef` (``"mlflow"``, ``"wandb"``, ``"files"``).
    tracker: ClassVar[str] = ""

    #: Runs the scan loop keeps in flight at once; ``None``: the loop's default for its
    #: ``workers`` (:func:`trackerhealth.scan.run_workers_for`). An adapter whose requests are
    #: per run (W&B) sets it to its request pool's size.
    parallel_runs: int | None = None

    @abstractmethod
    def list_runs(self) -> Sequence[TrackedRun]:
        """The selected runs. Raises :class:`SelectionError` or :class:`TrackerUnreachable` when
        there is no selection to scan; the scan then does not start."""

    @abstractmethod
    def fetch_history(self, run: TrackedRun) -> Fetched:
        """One listed run's full history (from the cache where it is current). Called from the
        scan's worker threads, so it must be safe to call for several runs at once."""

    # -- groups of runs compared with each other (trackerhealth.cohort) ------------------------
    #: The keys that group runs when the user passes no ``--group-by``, tried in order: a run is
    #: grouped by the first one it has (W&B: group, sweep; MLflow: the parent run).
    default_group_by: ClassVar[tuple[str, ...]] = ()

    def group_values(self, run: TrackedRun, with_config: bool = False) -> Mapping[str, str]:
        """The values ``--group-by`` keys name for ``run``, read from its listing (``params.lr``,
        ``tags.team``, ``parent``, ``group``…). ``with_config``: also its configuration
        (``config.NAME`` / ``params.NAME``), which the scan asks for only when a key or a sweep
        summary needs it (on W&B it costs one request per run). Default: none, so every run is
        compared alone."""
        return {}

    def with_siblings(self, runs: Sequence[TrackedRun], group_by: Sequence[str] | None) -> Sequence[TrackedRun]:
        """``runs`` (this scan's listing) and the other runs of their groups that the listing left
        out — an incremental listing lists only the runs that changed, and a run is compared with
        its whole group. ``group_by``: the keys (None: :attr:`default_group_by`). Default: ``runs``
        (the listing is complete)."""
        return runs

    def marked_baseline(self, run: TrackedRun) -> bool:
        """Whether the user marked ``run`` on the tracker as its group's baseline."""
        return False

    # -- incremental re-scans and other processes (fleet scans) --------------------------------
    @property
    def scope(self) -> str:
        """The store and project this adapter's runs belong to, as a stable name (e.g.
        ``mlflow/<store>/<experiment>``), under which a re-scan finds the last scan's reports.
        Empty (the default): this adapter's runs are always analysed again."""
        return ""

    def signature(self, run: TrackedRun) -> str | None:
        """What the listing says of ``run`` that changes whenever its data does (new points, a new
        state, new params) and never when only trackerhealth's own tags or summary keys do.
        A run whose signature equals the last scan's keeps that scan's report: it is not fetched,
        analysed or written again. ``None`` (the default): always analysed."""
        return None

    def spec(self) -> AdapterSpec:
        """How to open this store in another process (a Ray worker); raises :class:`NotPortable`
        when it cannot be (a local folder only this machine has, credentials inside the URI)."""
        raise NotPortable(f"{type(self).__name__} reads what only this machine has; scan it without --ray")

    def portable(self, run: TrackedRun) -> TrackedRun:
        """``run`` as it can be pickled to another process (without open clients)."""
        return run

    def adopt(self, run: TrackedRun) -> TrackedRun:
        """The inverse of :meth:`portable`, in the process that fetches and writes ``run``: bind it
        to this adapter's clients and remember it as listed (the writer reads its listed tags)."""
        return run

    def scan_complete(self) -> None:
        """Called by the scan loop after a scan that wrote and failed nothing (not a dry run):
        an incremental adapter may remember the scan so the next one lists only what changed."""

    def close(self) -> None:
        """Release connections and flush caches. The adapter's owner calls it once, at the end."""

    def __enter__(self) -> Adapter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
