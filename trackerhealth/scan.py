"""The scan loop, for any tracker: list runs → fetch (bounded pool) → analyze → write → finish.

It takes an :class:`~trackerhealth.adapters.base.Adapter` and optionally a
:class:`~trackerhealth.writers.base.Writer` (:func:`trackerhealth.trackers.writer_for` gives the
one that goes with an adapter), and calls only the members those classes declare, so MLflow, W&B
and local folders share it.

Memory stays bounded: at most ``parallel_runs`` runs are between fetch and write at any time, and
a run's history is dropped as soon as it is written; only reports (small) are kept.

Failure is per run and per stage (house rule 3): fetching, analyzing and writing a run — and,
inside the write, rendering its dashboard and sending its alerts — each fail for that run only,
as a :class:`ScanError` whose ``kind`` names the stage; the other runs are analyzed and written.
A run deleted during the scan, or with nothing logged, is a :class:`ScanSkip` — data, not an
error. When the tracker stops answering, the runs not yet started are not attempted (each would
wait out its retries) and are reported as not scanned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .adapters.base import Adapter, RunSkipped, TrackedRun, TrackerUnreachable
from .config import Config
from .engine import analyze
from .redaction import redact_secrets
from .schema import CRITICAL, ERROR, OK, WARNING, HealthReport, RunRef
from .writers.base import ALERT, RENDER, WRITE, WriteOutcome, Writer

__all__ = ["ANALYZE", "ERROR_KINDS", "FETCH", "UNREACHABLE", "ScanError", "ScanResult", "ScanSkip", "ScanSummary",
           "run_workers_for", "scan"]

# ScanError kinds: stable, part of the JSON output (errors[].kind).
UNREACHABLE = "unreachable"  # the tracker stopped answering (the run was not scanned, or not written)
FETCH = "fetch"  # the run's history could not be read
ANALYZE = "analyze"  # the analysis raised (the engine reports a failed diagnosis itself, as a finding)
ERROR_KINDS = (UNREACHABLE, FETCH, ANALYZE, RENDER, ALERT, WRITE)
UNKNOWN = "unknown"  # the status of a run whose training loss was not recognised

_FAILED_WHILE = {FETCH: "fetching the history", ANALYZE: "analyzing the history", WRITE: "writing the health back"}


class _Record(Mapping):
    """A frozen result record that also reads as the JSON object it stands for (``error["kind"]``),
    so the report formats take scan errors and file errors alike."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in fields(self))

    def __len__(self) -> int:
        return len(fields(self))


@dataclass(frozen=True, eq=True)
class ScanError(_Record):
    """A run that could not be scanned or written, and at which stage (``kind``, one of
    :data:`ERROR_KINDS`)."""

    source: str  # tracker:project/run name, for people
    run_id: str
    kind: str
    message: str

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"ScanError kind must be one of {', '.join(ERROR_KINDS)}, not {self.kind!r}")


@dataclass(frozen=True, eq=True)
class ScanSkip(_Record):
    """A run left out, and why (deleted during the scan, nothing logged): not a failure."""

    source: str
    run_id: str
    reason: str


@dataclass(frozen=True)
class ScanSummary:
    listed: int = 0
    scanned: int = 0  # analyzed
    skipped: int = 0
    failed: int = 0  # runs with at least one error
    healthy: int = 0
    warning: int = 0
    critical: int = 0
    unknown: int = 0  # analyzed, but no training loss was recognised
    errored: int = 0  # analyzed, but part of the analysis failed (status error)
    points: int = 0  # analyzed
    fetched_points: int = 0  # downloaded this scan
    cached_points: int = 0  # read from the local cache
    fetch_seconds: float = 0.0  # wall time with at least one fetch in flight
    elapsed_seconds: float = 0.0
    written: int = 0  # runs whose health tags or artifacts changed
    alerts_sent: int = 0
    dry_run: bool = False
    read_only: bool = False  # scanned without a writer (local folders): nothing is ever written

    @property
    def fetch_rate(self) -> float:
        return self.fetched_points / self.fetch_seconds if self.fetch_seconds > 0 else 0.0

    def line(self) -> str:
        statuses = f"{self.healthy} healthy, {self.warning} warning, {self.critical} critical"
        if self.unknown:
            statuses += f", {self.unknown} unknown"
        if self.errored:
            statuses += f", {self.errored} with a failed analysis"
        text = (f"scanned {self.scanned} of {self.listed} runs ({self.skipped} skipped, {self.failed} failed): "
                f"{statuses} · {self.points:,} points ({self.fetched_points:,} fetched in {self.fetch_seconds:.1f}s"
                + (f" = {self.fetch_rate:,.0f}/s" if self.fetched_points else "")
                + f", {self.cached_points:,} from cache) · {self.elapsed_seconds:.1f}s")
        if self.read_only:
            text += " · read only: nothing written"
        elif self.dry_run:
            text += f" · dry run: nothing written, {self.alerts_sent} alert(s) would be sent"
        else:
            text += f" · {self.written} run(s) updated, {self.alerts_sent} alert(s) sent"
        return text

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["fetch_seconds"] = round(self.fetch_seconds, 3)
        doc["elapsed_seconds"] = round(self.elapsed_seconds, 3)
        return doc


@dataclass(frozen=True)
class ScanResult:
    """Everything one scan found and did, in the order the adapter listed the runs."""

    reports: tuple[HealthReport, ...] = ()
    errors: tuple[ScanError, ...] = ()
    skipped: tuple[ScanSkip, ...] = ()
    outcomes: tuple[WriteOutcome, ...] = ()  # what the writer returned, per written run
    notes: tuple[str, ...] = ()  # the writer's notes and what its finishing step did
    summary: ScanSummary = field(default_factory=ScanSummary)

    @property
    def unreachable(self) -> bool:
        return any(e.kind == UNREACHABLE for e in self.errors)


class _BusyTimer:
    """Wall time during which at least one fetch was running (parallel fetches count once)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._active = 0
        self._since = 0.0
        self.total = 0.0

    def __enter__(self):
        with self._lock:
            if self._active == 0:
                self._since = time.perf_counter()
            self._active += 1

    def __exit__(self, *exc):
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self.total += time.perf_counter() - self._since


@dataclass
class _RunResult:
    """One run's way through the stages, filled in by its worker thread."""

    index: int
    ref: RunRef
    fetched_points: int = 0
    cached_points: int = 0
    report: HealthReport | None = None
    outcome: WriteOutcome | None = None
    skipped: str | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)  # (kind, message)


class _Tally:
    """The summary's counters while the scan runs; :meth:`snapshot` freezes them."""

    def __init__(self, **fixed: Any):
        self.counts: dict[str, Any] = {f.name: f.default for f in fields(ScanSummary)}
        self.counts.update(fixed)

    def add(self, res: _RunResult) -> None:
        c = self.counts
        c["skipped"] += res.skipped is not None
        c["failed"] += bool(res.errors)
        c["fetched_points"] += res.fetched_points
        c["cached_points"] += res.cached_points
        if res.report is not None:
            c["scanned"] += 1
            c["points"] += res.report.n_points
            status = res.report.status
            c["healthy"] += status == OK
            c["warning"] += status == WARNING
            c["critical"] += status == CRITICAL
            c["unknown"] += status == UNKNOWN
            c["errored"] += status == ERROR
        if res.outcome is not None:
            c["alerts_sent"] += len(res.outcome.alerts_sent)
            c["written"] += res.outcome.written

    def snapshot(self, **extra: Any) -> ScanSummary:
        return ScanSummary(**{**self.counts, **extra})


def _source(ref: RunRef) -> str:
    return f"{ref.tracker}:{ref.project}/{ref.name or ref.id}"


def run_workers_for(workers: int) -> int:
    """Runs in flight: enough to keep ``workers`` requests busy between runs, few enough to bound memory."""
    return max(2, min(8, workers // 2))


def scan(adapter: Adapter, writer: Writer | None = None, config: Config | None = None, *, workers: int = 4,
         dry_run: bool = False, progress: Callable[[int, int, ScanSummary], None] | None = None) -> ScanResult:
    """Scan every run the adapter lists, write each one's health (when there is a writer), then
    let the writer finish (project-wide views) and the adapter remember a complete scan.

    Listing errors (unreachable, bad selection) propagate: there is nothing to scan. Everything
    after the listing fails per run. The caller owns the adapter and closes it.
    """
    started = time.perf_counter()
    config = config or Config()
    runs: Sequence[TrackedRun] = list(adapter.list_runs())
    tally = _Tally(listed=len(runs), dry_run=dry_run, read_only=writer is None)
    timer = _BusyTimer()
    stop = threading.Event()

    def one(index: int, run: TrackedRun) -> _RunResult:
        out = _RunResult(index, run.ref)
        if stop.is_set():
            out.errors.append((UNREACHABLE, "not scanned: the tracker stopped answering earlier in this scan"))
            return out
        stage = FETCH
        try:
            with timer:
                fetched = adapter.fetch_history(run)
            history = fetched.history
            out.fetched_points, out.cached_points = fetched.fetched_points, fetched.cached_points
            if history.n_points == 0:
                out.skipped = "no metrics logged"
                return out
            stage = ANALYZE
            out.report = analyze(history, config)
            if writer is None:
                return out
            stage = WRITE
            out.outcome = writer.write(out.report, history, dry_run)
        except RunSkipped as exc:
            out.skipped, out.report = exc.reason, None
            return out
        except TrackerUnreachable as exc:
            stop.set()
            out.errors.append((UNREACHABLE, str(exc) if stage == FETCH else f"{_FAILED_WHILE[stage]} failed: {exc}"))
            return out
        except Exception as exc:  # noqa: BLE001 - one run never fails the scan; the stage says where
            out.errors.append((stage, f"{_FAILED_WHILE[stage]} failed: {_describe(exc)}"))
            return out
        # The parts of the write that failed while the rest went through (dashboard, alerts).
        out.errors.extend((problem.stage, problem.message) for problem in out.outcome.problems)
        return out

    done: list[_RunResult] = []
    in_flight = adapter.parallel_runs or run_workers_for(workers)
    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="trackerhealth-run") as pool:
        futures = [pool.submit(one, i, run) for i, run in enumerate(runs)]
        for fut in as_completed(futures):
            res = fut.result()
            done.append(res)
            tally.add(res)
            if progress is not None:
                progress(len(done), len(runs), tally.snapshot(fetch_seconds=timer.total))

    done.sort(key=lambda r: r.index)
    reports = tuple(r.report for r in done if r.report is not None)
    errors = tuple(ScanError(_source(r.ref), r.ref.id, kind, redact_secrets(message))
                   for r in done for kind, message in r.errors)
    skipped = tuple(ScanSkip(_source(r.ref), r.ref.id, r.skipped) for r in done if r.skipped is not None)
    notes = _finish(adapter, writer, reports, errors, dry_run)
    return ScanResult(
        reports=reports, errors=errors, skipped=skipped,
        outcomes=tuple(r.outcome for r in done if r.outcome is not None), notes=tuple(notes),
        summary=tally.snapshot(fetch_seconds=timer.total, elapsed_seconds=time.perf_counter() - started))


def _finish(adapter: Adapter, writer: Writer | None, reports: tuple[HealthReport, ...],
            errors: tuple[ScanError, ...], dry_run: bool) -> list[str]:
    """The writer's project-wide step and the adapter's end of a complete scan; failures here
    cost no run its health (every run is written by now), so they are notes."""
    notes = list(writer.notes) if writer is not None else []
    unreachable = any(e.kind == UNREACHABLE for e in errors)
    if writer is not None and reports and not unreachable:
        try:
            notes.extend(writer.finish(reports, [e.to_dict() for e in errors], dry_run))
        except Exception as exc:  # noqa: BLE001 - the runs are written; this is a summary view
            notes.append(f"the project-wide view was not updated: {_describe(exc)}")
    if not dry_run and not errors:
        try:
            adapter.scan_complete()
        except Exception as exc:  # noqa: BLE001 - the next scan lists every run again: slower, not wrong
            notes.append(f"this scan could not be remembered, so the next one lists every run: {_describe(exc)}")
    return notes


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return text if text.startswith(type(exc).__name__) or ":" in text[:40] else f"{type(exc).__name__}: {text}"
