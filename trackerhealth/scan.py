"""The scan loop, for any tracker: list runs → fetch (bounded pool) → analyze → write → summarize.

It takes an adapter (``list_runs()``, ``fetch_history(run)``; see :mod:`trackerhealth.adapters.base`)
and optionally a writer (``write(report, history, dry_run)``), so MLflow and W&B share it.

Memory stays bounded: at most ``run_workers`` runs are between fetch and write at any time, and a
run's history is dropped as soon as it is written; only reports (small) are kept.

Failure is per run (house rule 3): a run that fails is an error entry, the others are analyzed and
written. A run deleted during the scan, or with nothing logged, is *skipped* — data, not an error.
When the tracker stops answering, the runs not yet started are not attempted (each would wait out
its retries) and are reported as not scanned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any

from .adapters.base import Adapter, RunSkipped, TrackerUnreachable, Writer
from .config import Config
from .engine import analyze
from .redaction import redact_secrets
from .schema import CRITICAL, OK, WARNING, HealthReport

__all__ = ["ScanResult", "ScanSummary", "run_workers_for", "scan"]

UNREACHABLE, FAILED = "unreachable", "error"


@dataclass
class ScanSummary:
    listed: int = 0
    scanned: int = 0  # analyzed
    skipped: int = 0
    failed: int = 0
    healthy: int = 0
    warning: int = 0
    critical: int = 0
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
        text = (f"scanned {self.scanned} of {self.listed} runs ({self.skipped} skipped, {self.failed} failed): "
                f"{self.healthy} healthy, {self.warning} warning, {self.critical} critical · "
                f"{self.points:,} points ({self.fetched_points:,} fetched in {self.fetch_seconds:.1f}s"
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


@dataclass
class ScanResult:
    reports: list[HealthReport] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)  # {"source", "run_id", "kind", "message"}
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {"source", "run_id", "reason"}
    outcomes: list[Any] = field(default_factory=list)  # what the writer returned, per written run
    summary: ScanSummary = field(default_factory=ScanSummary)

    @property
    def unreachable(self) -> bool:
        return any(e.get("kind") == UNREACHABLE for e in self.errors)


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
    index: int
    ref: Any
    fetched_points: int = 0
    cached_points: int = 0
    report: HealthReport | None = None
    outcome: Any = None
    skipped: str | None = None
    errors: list[tuple[str, str]] = field(default_factory=list)  # (kind, message)


def _source(ref) -> str:
    return f"{ref.tracker}:{ref.project}/{ref.name or ref.id}"


def run_workers_for(workers: int) -> int:
    """Runs in flight: enough to keep ``workers`` requests busy between runs, few enough to bound memory."""
    return max(2, min(8, workers // 2))


def scan(adapter: Adapter, writer: Writer | None = None, config: Config | None = None, *, workers: int = 4,
         dry_run: bool = False, progress: Callable[[int, int, ScanSummary], None] | None = None) -> ScanResult:
    """Scan every run the adapter lists. Listing errors (unreachable, bad selection) propagate."""
    started = time.perf_counter()
    config = config or Config()
    runs = list(adapter.list_runs())
    result = ScanResult(summary=ScanSummary(listed=len(runs), dry_run=dry_run, read_only=writer is None))
    timer = _BusyTimer()
    stop = threading.Event()

    def one(index: int, run) -> _RunResult:
        out = _RunResult(index, run.ref)
        if stop.is_set():
            out.errors.append((UNREACHABLE, "not scanned: the tracker stopped answering earlier in this scan"))
            return out
        try:
            with timer:
                fetched = adapter.fetch_history(run)
        except RunSkipped as exc:
            out.skipped = exc.reason
            return out
        except TrackerUnreachable as exc:
            stop.set()
            out.errors.append((UNREACHABLE, str(exc)))
            return out
        except Exception as exc:  # noqa: BLE001 - one run never fails the scan
            out.errors.append((FAILED, f"fetching the history failed: {_describe(exc)}"))
            return out
        history = fetched.history
        out.fetched_points, out.cached_points = fetched.fetched_points, fetched.cached_points
        if history.n_points == 0:
            out.skipped = "no metrics logged"
            return out
        out.report = analyze(history, config)
        if writer is not None:
            try:
                out.outcome = writer.write(out.report, history, dry_run)
            except RunSkipped as exc:
                out.skipped, out.report = exc.reason, None
                return out
            except TrackerUnreachable as exc:
                stop.set()
                out.errors.append((UNREACHABLE, f"writing the health back failed: {exc}"))
            except Exception as exc:  # noqa: BLE001
                out.errors.append((FAILED, f"writing the health back failed: {_describe(exc)}"))
            for problem in getattr(out.outcome, "problems", ()) or ():
                out.errors.append((FAILED, problem))
        return out

    done: list[_RunResult] = []
    # An adapter whose requests are per run (W&B) says how many runs to fetch at once.
    in_flight = getattr(adapter, "parallel_runs", None) or run_workers_for(workers)
    with ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="trackerhealth-run") as pool:
        futures = [pool.submit(one, i, run) for i, run in enumerate(runs)]
        for fut in as_completed(futures):
            res = fut.result()
            done.append(res)
            _tally(result.summary, res)
            if progress is not None:
                result.summary.fetch_seconds = timer.total
                progress(len(done), len(runs), result.summary)

    for res in sorted(done, key=lambda r: r.index):
        if res.report is not None:
            result.reports.append(res.report)
        if res.outcome is not None:
            result.outcomes.append(res.outcome)
        if res.skipped is not None:
            result.skipped.append({"source": _source(res.ref), "run_id": res.ref.id, "reason": res.skipped})
        for kind, message in res.errors:
            result.errors.append({"source": _source(res.ref), "run_id": res.ref.id, "kind": kind,
                                  "message": redact_secrets(message)})
    result.summary.fetch_seconds = timer.total
    result.summary.elapsed_seconds = time.perf_counter() - started
    return result


def _tally(s: ScanSummary, res: _RunResult) -> None:
    if res.skipped is not None:
        s.skipped += 1
    if res.errors:
        s.failed += 1
    s.fetched_points += res.fetched_points
    s.cached_points += res.cached_points
    if res.report is not None:
        s.scanned += 1
        s.points += res.report.n_points
        status = res.report.status
        s.healthy += status == OK
        s.warning += status == WARNING
        s.critical += status == CRITICAL
    if res.outcome is not None:
        s.alerts_sent += len(getattr(res.outcome, "alerts_sent", ()) or ())
        s.written += bool(getattr(res.outcome, "changed", False)) and not getattr(res.outcome, "dry_run", False)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return text if text.startswith(type(exc).__name__) or ":" in text[:40] else f"{type(exc).__name__}: {text}"
