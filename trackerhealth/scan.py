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

import dataclasses
import hashlib
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from . import cohort as cohorts_
from .adapters.base import Adapter, RunSkipped, SelectionError, TrackedRun, TrackerUnreachable
from .baseline import Cohort, RunProfile
from .config import Config
from .engine import analyze
from .roles import resolve
from .redaction import redact_secrets
from .reuse import ReuseStore
from .schema import CRITICAL, ERROR, OK, WARNING, HealthReport, RunRef
from .sweeps import CONFIG_PREFIXES, MIN_RUNS, SweepSummary, summarize_groups
from .writers.base import ALERT, RENDER, WRITE, WriteOutcome, Writer

__all__ = ["ANALYZE", "ERROR_KINDS", "FETCH", "LIST", "UNREACHABLE", "combine", "Engine", "RunResult", "ScanError", "ScanResult",
           "ScanSkip", "ScanSummary", "ThreadEngine", "process_run", "run_workers_for", "scan"]

# ScanError kinds: stable, part of the JSON output (errors[].kind).
UNREACHABLE = "unreachable"  # the tracker stopped answering (the run was not scanned, or not written)
FETCH = "fetch"  # the run's history could not be read
ANALYZE = "analyze"  # the analysis raised (the engine reports a failed diagnosis itself, as a finding)
LIST = "list"  # a project's runs could not be listed (one project of several: the others are scanned)
ERROR_KINDS = (UNREACHABLE, LIST, FETCH, ANALYZE, RENDER, ALERT, WRITE)
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
    run_id: str  # empty for a project's error (kind list or unreachable before any run was listed)
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
    scanned: int = 0  # runs with a report: analyzed + reused
    analyzed: int = 0  # fetched and analysed in this scan
    reused: int = 0  # unchanged since the last scan: its report kept, nothing fetched, analysed or written
    skipped: int = 0
    failed: int = 0  # runs with at least one error
    healthy: int = 0
    warning: int = 0
    critical: int = 0
    unknown: int = 0  # analyzed, but no training loss was recognised
    errored: int = 0  # analyzed, but part of the analysis failed (status error)
    points: int = 0  # in the reports (reused ones included)
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
        reused = f", {self.reused} unchanged since the last scan" if self.reused else ""
        text = (f"scanned {self.scanned} of {self.listed} runs ({self.skipped} skipped, {self.failed} failed{reused}): "
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
    sweeps: tuple[SweepSummary, ...] = ()  # per group of ten or more runs: configuration values and findings

    @property
    def unreachable(self) -> bool:
        return any(e.kind == UNREACHABLE for e in self.errors)


@dataclass
class RunResult:
    """One run's way through the stages, filled in where it was processed (a thread here, or a Ray
    worker: so it holds only what pickles — no history, no client)."""

    index: int
    ref: RunRef
    fetched_points: int = 0
    cached_points: int = 0
    report: HealthReport | None = None
    outcome: WriteOutcome | None = None
    skipped: str | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)  # (kind, message)
    fetch_span: tuple[float, float] | None = None  # wall clock (time.time()) around the fetch
    reused: bool = False  # the last scan's report: nothing was fetched, analysed or written
    profile: RunProfile | None = None  # what its group compares it with (the first pass over a group)

    @property
    def unreachable(self) -> bool:
        return any(kind == UNREACHABLE for kind, _ in self.errors)


def not_scanned(index: int, ref: RunRef) -> RunResult:
    """A run not started because the tracker stopped answering earlier in the scan."""
    return RunResult(index, ref, errors=[(UNREACHABLE, "not scanned: the tracker stopped answering earlier in this scan")])


def process_run(adapter: Adapter, writer: Writer | None, config: Config, index: int, run: TrackedRun,
                dry_run: bool, cohort: Cohort | None = None, profile_only: bool = False) -> RunResult:
    """Fetch → analyse → write one run; every failure is this run's, named by its stage. The same
    function runs in the thread engine and in a Ray worker. ``cohort``: the run's group and its
    baseline. ``profile_only``: the first pass over a group — analyse alone, keep the run's
    :class:`RunProfile`, write nothing."""
    out = RunResult(index, run.ref)
    stage = FETCH
    try:
        began = time.time()
        try:
            fetched = adapter.fetch_history(run)
        finally:
            out.fetch_span = (began, time.time())
        history = fetched.history
        out.fetched_points, out.cached_points = fetched.fetched_points, fetched.cached_points
        if history.n_points == 0:
            out.skipped = "no metrics logged"
            return out
        stage = ANALYZE
        if profile_only:
            out.report = analyze(history, config)
            # Baseline marks (tags, --baseline) are the driver's to set: it saw the whole listing.
            out.profile = cohorts_.profile(resolve(history, config.roles, config.units), out.report,
                                           finished=run.ref.state in cohorts_.FINISHED_STATES)
            return out
        out.report = analyze(history, config, cohort=cohort)
        if writer is None:
            return out
        stage = WRITE
        out.outcome = writer.write(out.report, history, dry_run)
    except RunSkipped as exc:
        out.skipped, out.report = exc.reason, None
        return out
    except TrackerUnreachable as exc:
        out.errors.append((UNREACHABLE, str(exc) if stage == FETCH else f"{_FAILED_WHILE[stage]} failed: {exc}"))
        return out
    except Exception as exc:  # noqa: BLE001 - one run never fails the scan; the stage says where
        out.errors.append((stage, f"{_FAILED_WHILE[stage]} failed: {_describe(exc)}"))
        return out
    # The parts of the write that failed while the rest went through (dashboard, alerts).
    out.errors.extend((problem.stage, problem.message) for problem in out.outcome.problems)
    return out


def busy_seconds(spans: Iterable[tuple[float, float]]) -> float:
    """Wall time during which at least one fetch was running (overlapping fetches count once)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(spans):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


class Engine(ABC):
    """Where runs are processed: threads in this process (:class:`ThreadEngine`) or Ray workers
    (:class:`trackerhealth.fleet.ray_engine.RayEngine`)."""

    @abstractmethod
    def process(self, adapter: Adapter, writer: Writer | None, config: Config, work: Sequence[tuple[int, TrackedRun]],
                dry_run: bool, cohorts: Mapping[str, Cohort] | None = None, profile_only: bool = False) -> Iterator[RunResult]:
        """Each run of ``work`` processed once (:func:`process_run`, with the run's cohort from
        ``cohorts`` by run id), as it completes (any order). Once a result says the tracker is
        unreachable, runs not yet started are yielded as :func:`not_scanned`. ``profile_only``: the
        first pass over grouped runs (analysed alone, profiled, not written)."""

    def close(self) -> None:
        """Release what the engine started (a local Ray instance)."""


class ThreadEngine(Engine):
    """A bounded thread pool in this process: at most ``in_flight`` runs between fetch and write."""

    def __init__(self, in_flight: int):
        self.in_flight = max(1, in_flight)

    def process(self, adapter, writer, config, work, dry_run, cohorts=None, profile_only=False):
        stop = threading.Event()
        cohorts = cohorts or {}

        def one(index: int, run: TrackedRun) -> RunResult:
            if stop.is_set():
                return not_scanned(index, run.ref)
            res = process_run(adapter, writer, config, index, run, dry_run, cohorts.get(run.ref.id), profile_only)
            if res.unreachable:
                stop.set()
            return res

        with ThreadPoolExecutor(max_workers=self.in_flight, thread_name_prefix="trackerhealth-run") as pool:
            futures = [pool.submit(one, i, run) for i, run in work]
            for fut in as_completed(futures):
                yield fut.result()


class _Tally:
    """The summary's counters while the scan runs; :meth:`snapshot` freezes them."""

    def __init__(self, **fixed: Any):
        self.counts: dict[str, Any] = {f.name: f.default for f in fields(ScanSummary)}
        self.counts.update(fixed)
        self.spans: list[tuple[float, float]] = []

    def add(self, res: RunResult) -> None:
        c = self.counts
        c["skipped"] += res.skipped is not None
        c["failed"] += bool(res.errors)
        c["fetched_points"] += res.fetched_points
        c["cached_points"] += res.cached_points
        if res.fetch_span is not None:
            self.spans.append(res.fetch_span)
        if res.report is not None:
            c["scanned"] += 1
            c["reused" if res.reused else "analyzed"] += 1
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

    def add_fetch(self, res: RunResult) -> None:
        """A first pass over a grouped run: its download counts, its report comes later."""
        self.counts["fetched_points"] += res.fetched_points
        self.counts["cached_points"] += res.cached_points
        if res.fetch_span is not None:
            self.spans.append(res.fetch_span)

    def snapshot(self, **extra: Any) -> ScanSummary:
        return ScanSummary(**{**self.counts, "fetch_seconds": busy_seconds(self.spans), **extra})


def _source(ref: RunRef) -> str:
    return f"{ref.tracker}:{ref.project}/{ref.name or ref.id}"


def run_workers_for(workers: int) -> int:
    """Runs in flight: enough to keep ``workers`` requests busy between runs, few enough to bound memory."""
    return max(2, min(8, workers // 2))


def scan(adapter: Adapter, writer: Writer | None = None, config: Config | None = None, *, workers: int = 4,
         dry_run: bool = False, progress: Callable[[int, int, ScanSummary], None] | None = None,
         engine: Engine | None = None, reuse: ReuseStore | None = None, group_by: Sequence[str] | None = None,
         baselines: Sequence[str] = (), baselines_elsewhere: bool = False) -> ScanResult:
    """Scan every run the adapter lists, write each one's health (when there is a writer), then
    let the writer finish (project-wide views) and the adapter remember a complete scan.

    ``engine``: where runs are processed (default: a thread pool here). ``reuse``: the last scan's
    reports; a run whose listing signature and scan key are unchanged keeps its report and is not
    fetched, analysed or written (counted as ``reused``).

    ``group_by``: the keys whose values group runs (:meth:`Adapter.group_values`; None: the
    adapter's :attr:`~Adapter.default_group_by`, the first a run has). A group of two or more is
    analysed twice: each run alone first (its profile and status choose the baseline,
    :func:`trackerhealth.cohort.choose_baseline`), then with its :class:`Cohort`, and only then
    written. ``baselines``: run ids or names the user marks as their group's baseline; one the
    listing lacks is a :class:`SelectionError`, unless ``baselines_elsewhere`` (a fleet scan: it
    may be another project's).

    Listing errors (unreachable, bad selection) propagate: there is nothing to scan. Everything
    after the listing fails per run. The caller owns the adapter and the engine, and closes them.
    """
    started = time.perf_counter()
    config = config or Config()
    runs: Sequence[TrackedRun] = list(adapter.with_siblings(adapter.list_runs(), group_by))
    tally = _Tally(listed=len(runs), dry_run=dry_run, read_only=writer is None)
    writing = writer is not None and not dry_run
    keys, marked, values = _groups(adapter, runs, group_by, baselines, baselines_elsewhere)
    grouped = cohorts_.grouped_ids(keys)
    signatures = _signatures(adapter, runs, keys, grouped, marked) if reuse is not None else {}
    done: list[RunResult] = []
    kept: dict[str, HealthReport] = {}
    for run in runs:
        report = reuse.lookup(run.ref, signatures[run.ref.id], writing=writing) if reuse is not None else None
        if report is not None:
            kept[run.ref.id] = report
    # A group is analysed whole or not at all: its runs' comparisons depend on every member.
    stale_groups = {keys[run.ref.id] for run in runs if run.ref.id in grouped and run.ref.id not in kept}
    for run_id in [r for r in kept if r in grouped and keys[r] in stale_groups]:
        del kept[run_id]
    work: list[tuple[int, TrackedRun]] = []
    for index, run in enumerate(runs):
        if run.ref.id in kept:
            done.append(RunResult(index, run.ref, report=kept[run.ref.id], reused=True))
            tally.add(done[-1])
        else:
            work.append((index, run))
    if progress is not None and done:
        progress(len(done), len(runs), tally.snapshot())
    if work:
        engine = engine or ThreadEngine(adapter.parallel_runs or run_workers_for(workers))
        found = _first_pass(engine, adapter, config, [(i, r) for i, r in work if r.ref.id in grouped], dry_run,
                            marked, tally, done)
        failed = {res.ref.id for res in done}
        cohorts = cohorts_.cohorts(list(found.values()), keys)
        for index, run in work:
            key = keys[run.ref.id]
            if run.ref.id not in grouped and key is not None:
                cohorts[run.ref.id] = cohorts_.alone(key)
        for res in engine.process(adapter, writer, config, [(i, r) for i, r in work if r.ref.id not in failed], dry_run,
                                  cohorts=cohorts):
            done.append(res)
            tally.add(res)
            if progress is not None:
                progress(len(done), len(runs), tally.snapshot())

    done.sort(key=lambda r: r.index)
    if reuse is not None:
        # A writer with notes wrote less than it could (no dashboard renderer installed): its runs
        # are written again next time rather than kept as they are.
        complete = writer is None or not writer.notes
        for res in done:
            if res.reused:
                continue
            # A report whose analysis failed (status error) is made again next time, never kept.
            if res.report is not None and not res.errors and complete and res.report.status != ERROR:
                reuse.remember(res.ref, signatures[res.ref.id], res.report, written=writing)
            else:
                reuse.forget(res.ref)
    reports = tuple(r.report for r in done if r.report is not None)
    sweeps = summarize_groups(reports, keys, values)
    errors = tuple(ScanError(_source(r.ref), r.ref.id, kind, redact_secrets(message))
                   for r in done for kind, message in r.errors)
    skipped = tuple(ScanSkip(_source(r.ref), r.ref.id, r.skipped) for r in done if r.skipped is not None)
    notes = _finish(adapter, writer, reports, errors, dry_run, changed=bool(work), sweeps=sweeps)
    if reuse is not None:
        try:
            reuse.save()
        except OSError as exc:  # the next scan analyses every run again: slower, not wrong
            notes.append(f"the reports could not be kept for the next scan ({exc}); it will analyse every run again")
    if runs and not work:
        notes.append("no run changed since the last scan: every report is the last scan's (nothing fetched, "
                     "analysed or written)")
    return ScanResult(
        reports=reports, errors=errors, skipped=skipped,
        outcomes=tuple(r.outcome for r in done if r.outcome is not None), notes=tuple(notes),
        summary=tally.snapshot(elapsed_seconds=time.perf_counter() - started), sweeps=sweeps)


def _groups(adapter: Adapter, runs: Sequence[TrackedRun], group_by: Sequence[str] | None,
            baselines: Sequence[str], elsewhere: bool = False
            ) -> tuple[dict[str, cohorts_.GroupKey | None], set[str], dict[str, Mapping[str, str]]]:
    """Each run's group key (None: compared alone), the ids of the runs marked as baselines, and
    each run's group values (with its configuration where a key or a sweep summary needs it)."""
    config_keys = bool(group_by) and any(k.startswith(CONFIG_PREFIXES) for k in group_by)
    values = {run.ref.id: dict(adapter.group_values(run, with_config=config_keys)) for run in runs}
    if group_by:
        keys = {run_id: cohorts_.group_key(v, group_by) for run_id, v in values.items()}
    else:
        keys = {run_id: cohorts_.default_group_key(v, adapter.default_group_by) for run_id, v in values.items()}
    if not config_keys:
        # A sweep summary needs the configuration of the runs of every group of ten or more.
        sizes = cohorts_.group_sizes(keys)
        for run in runs:
            key = keys[run.ref.id]
            if key is not None and sizes[key] >= MIN_RUNS and not any(k.startswith(CONFIG_PREFIXES) for k in values[run.ref.id]):
                values[run.ref.id] = dict(adapter.group_values(run, with_config=True))
    named, unknown = cohorts_.marked_runs(baselines, [run.ref for run in runs])
    if unknown and not elsewhere:
        raise SelectionError(f"--baseline {', '.join(sorted(unknown))}: no such run among the {len(runs)} listed; "
                             "pass the id or name of a run the selection lists")
    return keys, named | {run.ref.id for run in runs if adapter.marked_baseline(run)}, values


def _signatures(adapter: Adapter, runs: Sequence[TrackedRun], keys: Mapping[str, Any], grouped: set[str],
                marked: set[str]) -> dict[str, str | None]:
    """Each run's reuse signature; a grouped run's also covers every member of its group and the
    baseline marks, so that any change in the group analyses the whole group again."""
    own = {run.ref.id: adapter.signature(run) for run in runs}
    members: dict[Any, list[str]] = {}
    for run in runs:
        if run.ref.id in grouped:
            members.setdefault(keys[run.ref.id], []).append(run.ref.id)
    out: dict[str, str | None] = {}
    for run in runs:
        run_id = run.ref.id
        if run_id not in grouped:
            out[run_id] = own[run_id]
            continue
        group = members[keys[run_id]]
        if any(own[m] is None for m in group):
            out[run_id] = None
            continue
        doc = json.dumps([own[run_id], sorted((own[m], m in marked) for m in group)])
        out[run_id] = hashlib.sha256(doc.encode()).hexdigest()
    return out


def _first_pass(engine: Engine, adapter: Adapter, config: Config, work: list[tuple[int, TrackedRun]], dry_run: bool,
                marked: set[str], tally: _Tally, done: list[RunResult]) -> dict[str, RunProfile]:
    """Analyse the grouped runs alone and keep their profiles; a run that failed or was skipped here
    is final (appended to ``done``) and has no place in its group's comparison."""
    found: dict[str, RunProfile] = {}
    if not work:
        return found
    for res in engine.process(adapter, None, config, work, dry_run, profile_only=True):
        if res.profile is None:
            done.append(res)
            tally.add(res)
            continue
        tally.add_fetch(res)
        found[res.ref.id] = dataclasses.replace(res.profile, marked=res.ref.id in marked)
    return found


def combine(results: Sequence[ScanResult]) -> ScanResult:
    """Several projects' scans as one: everything in project order, the counts summed (elapsed
    time too: the projects are scanned one after another)."""
    if len(results) == 1:
        return results[0]
    counts: dict[str, Any] = {f.name: f.default for f in fields(ScanSummary)}
    for res in results:
        for name, value in asdict(res.summary).items():
            counts[name] = (counts[name] or value) if isinstance(value, bool) else counts[name] + value
    return ScanResult(
        reports=tuple(r for res in results for r in res.reports), errors=tuple(e for res in results for e in res.errors),
        skipped=tuple(s for res in results for s in res.skipped),
        outcomes=tuple(o for res in results for o in res.outcomes), notes=tuple(n for res in results for n in res.notes),
        summary=ScanSummary(**counts), sweeps=tuple(s for res in results for s in res.sweeps))


def _finish(adapter: Adapter, writer: Writer | None, reports: tuple[HealthReport, ...],
            errors: tuple[ScanError, ...], dry_run: bool, changed: bool = True,
            sweeps: tuple[SweepSummary, ...] = ()) -> list[str]:
    """The writer's project-wide step and the adapter's end of a complete scan; failures here
    cost no run its health (every run is written by now), so they are notes. When every run was
    reused (``changed`` False) the project-wide view is already what it would become."""
    notes = list(writer.notes) if writer is not None else []
    unreachable = any(e.kind == UNREACHABLE for e in errors)
    if writer is not None and reports and not unreachable and changed:
        try:
            notes.extend(writer.finish(reports, [e.to_dict() for e in errors], dry_run, sweeps))
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
