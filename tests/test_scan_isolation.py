"""One run never stops a scan: a failure at any stage of one run of three leaves the other two
analysed and written, and the failing run is reported with the stage that failed.

The thing under test is the scan loop (:func:`trackerhealth.scan.scan`), so the tracker is a small
in-test adapter and writer built on the declared interfaces, over real recorded trainings from
the corpus; the real MLflow and W&B adapters and writers have their own tests against real
servers (tests/mlflow, tests/wandb). Rendering uses the real dashboard writer through the demo's
:class:`~trackerhealth.demo._report.ReportDirWriter`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from trackerhealth.adapters.base import Adapter, Fetched, RunSkipped, TrackerUnreachable
from trackerhealth.adapters.files import read_histories
from trackerhealth.schema import RunHistory, RunRef
from trackerhealth.writers.base import ALERT, AlertError, AlertSink, WriteOutcome, WriteProblem, Writer

CORPUS = Path(__file__).parent / "corpus"
RUNS = ("healthy_autoencoder_adam", "overfit_regression_keras", "osc_softmax_sgd_lr_too_high")
VICTIM = "overfit_regression_keras"  # the middle run of three fails


def recorded(name: str) -> RunHistory:
    entry = next(e for e in json.loads((CORPUS / "manifest.json").read_text()) if e["name"] == name)
    (history,) = read_histories(CORPUS / entry["file"])
    return history.with_ref(RunRef(tracker="files", project="corpus", id=name, name=name))


@dataclass(frozen=True)
class Listed:
    ref: RunRef


class RecordedAdapter(Adapter):
    """Lists recorded trainings; ``fail`` maps a run id to what its fetch raises."""

    tracker = "files"

    def __init__(self, names=RUNS, fail: dict[str, Exception] | None = None):
        self.histories = {name: recorded(name) for name in names}
        self.fail = fail or {}
        self.completed = 0
        self.closed = False

    def list_runs(self):
        return [Listed(h.ref) for h in self.histories.values()]

    def fetch_history(self, run) -> Fetched:
        if run.ref.id in self.fail:
            raise self.fail[run.ref.id]
        history = self.histories[run.ref.id]
        return Fetched(history, fetched_points=history.n_points)

    def scan_complete(self) -> None:
        self.completed += 1


class FailingSink(AlertSink):
    label = "test sink"

    def deliver(self, report, finding, episode="") -> None:
        raise AlertError("the receiver said no")


class TrackerDouble(Writer):
    """Keeps what a tracker writer would put on each run (its status and finding ids).
    ``fail`` maps a run id to what its write raises; ``alert_fails`` lists runs whose alert fails."""

    def __init__(self, fail: dict[str, Exception] | None = None, alert_fails: tuple[str, ...] = ()):
        self.fail = fail or {}
        self.alert_fails = alert_fails
        self.tags: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.finished: list[tuple[str, ...]] = []
        self.notes = ["the double writes nothing anywhere"]
        self._lock = threading.Lock()

    def write(self, report, history, dry_run=False) -> WriteOutcome:
        run_id = report.run.id
        if run_id in self.fail:
            raise self.fail[run_id]
        problems: tuple[WriteProblem, ...] = ()
        if run_id in self.alert_fails:
            try:
                FailingSink().deliver(report, report.findings[0])
            except AlertError as exc:
                problems = (WriteProblem(ALERT, f"alert: {exc}"),)
        with self._lock:
            self.tags[run_id] = (report.status, tuple(f.id for f in report.problems))
        return WriteOutcome(run_id, changed=True, dry_run=dry_run, problems=problems)

    def finish(self, reports, errors, dry_run=False, sweeps=()):
        self.finished.append(tuple(r.run.id for r in reports))
        return [f"finished {len(reports)} run(s)"]


def scan(adapter, writer, **kw):
    from trackerhealth.scan import scan as run_scan

    return run_scan(adapter, writer, workers=4, **kw)


def survivors_analysed_and_written(result, writer: TrackerDouble, written_victim: bool) -> None:
    others = [n for n in RUNS if n != VICTIM]
    assert [r.run.id for r in result.reports if r.run.id != VICTIM] == others
    for report in result.reports:
        assert report.n_points > 0 and report.score is not None
    assert set(writer.tags) == set(others) | ({VICTIM} if written_victim else set())
    assert {o.run_id for o in result.outcomes} >= set(others)
    assert result.summary.scanned == len(result.reports) and result.summary.listed == 3


def the_victim_failed_at(result, stage: str) -> None:
    assert [(e.run_id, e.kind) for e in result.errors] == [(VICTIM, stage)]
    (error,) = result.errors
    assert error.message and error.source == f"files:corpus/{VICTIM}"
    assert set(error.to_dict()) == {"source", "run_id", "kind", "message"}  # the JSON errors[] keys
    assert json.loads(json.dumps(error.to_dict()))["kind"] == stage
    assert result.summary.failed == 1


def test_a_clean_scan_analyses_writes_and_finishes_every_run():
    adapter, writer = RecordedAdapter(), TrackerDouble()
    result = scan(adapter, writer)
    assert result.errors == () and result.skipped == ()
    assert [r.run.id for r in result.reports] == list(RUNS)
    assert set(writer.tags) == set(RUNS) and result.summary.written == 3
    assert writer.finished == [RUNS]
    assert adapter.completed == 1  # a complete scan is remembered (incremental listing)
    assert result.notes == ("the double writes nothing anywhere", "finished 3 run(s)")


def test_a_failed_fetch_fails_only_that_run():
    adapter, writer = RecordedAdapter(fail={VICTIM: ConnectionResetError("peer reset the connection")}), TrackerDouble()
    result = scan(adapter, writer)
    survivors_analysed_and_written(result, writer, written_victim=False)
    the_victim_failed_at(result, "fetch")
    assert "peer reset the connection" in result.errors[0].message
    assert adapter.completed == 0  # a scan with a failed run is not remembered: the next one retries it


def test_a_failed_analysis_fails_only_that_run(monkeypatch):
    import trackerhealth.scan as scan_module

    real = scan_module.analyze

    def analyze(history, config=None, cohort=None):
        if history.ref.id == VICTIM:
            raise RecursionError("maximum recursion depth exceeded")
        return real(history, config, cohort)

    monkeypatch.setattr(scan_module, "analyze", analyze)
    writer = TrackerDouble()
    result = scan(RecordedAdapter(), writer)
    survivors_analysed_and_written(result, writer, written_victim=False)
    assert VICTIM not in {r.run.id for r in result.reports}  # no made-up report, so nothing written for it
    the_victim_failed_at(result, "analyze")
    assert "RecursionError" in result.errors[0].message


def test_a_failed_render_fails_only_that_run_and_still_writes_its_health(monkeypatch, tmp_path):
    from trackerhealth.demo._report import ReportDirWriter
    from trackerhealth.writers import dashboard

    real = dashboard.render_run_html

    def render(history, report, config=None, **options):
        if report.run.id == VICTIM:
            raise ValueError("a panel could not be drawn")
        return real(history, report, config, **options)

    monkeypatch.setattr(dashboard, "render_run_html", render)
    inner = TrackerDouble()
    writer = ReportDirWriter(inner, tmp_path / "report")
    result = scan(RecordedAdapter(), writer)
    survivors_analysed_and_written(result, inner, written_victim=True)  # its tags do not wait on a page
    the_victim_failed_at(result, "render")
    assert "a panel could not be drawn" in result.errors[0].message
    pages = {p.name for p in (tmp_path / "report" / "runs").iterdir()}
    assert pages == {dashboard.dashboard_filename(r.run) for r in result.reports if r.run.id != VICTIM}
    assert writer.index.exists() and VICTIM in writer.index.read_text()  # the overview lists the error


def test_a_failed_write_fails_only_that_run():
    writer = TrackerDouble(fail={VICTIM: PermissionError("the artifact store refused the upload")})
    result = scan(RecordedAdapter(), writer)
    survivors_analysed_and_written(result, writer, written_victim=False)
    assert VICTIM in {r.run.id for r in result.reports}  # analysed, only not written
    the_victim_failed_at(result, "write")
    assert "refused the upload" in result.errors[0].message


def test_a_failed_alert_is_reported_with_its_stage_and_the_rest_of_the_write_stands():
    writer = TrackerDouble(alert_fails=(VICTIM,))
    result = scan(RecordedAdapter(), writer)
    survivors_analysed_and_written(result, writer, written_victim=True)
    the_victim_failed_at(result, "alert")


def test_a_run_deleted_before_its_write_is_skipped_not_failed():
    writer = TrackerDouble(fail={VICTIM: RunSkipped("deleted during the scan")})
    result = scan(RecordedAdapter(), writer)
    assert result.errors == ()
    assert [(s.run_id, s.reason) for s in result.skipped] == [(VICTIM, "deleted during the scan")]
    assert result.skipped[0]["reason"] == "deleted during the scan"  # reads as its JSON record too
    assert VICTIM not in {r.run.id for r in result.reports}


def test_an_unreachable_tracker_stops_new_runs_and_skips_the_finishing_step():
    adapter = RecordedAdapter(fail={RUNS[0]: TrackerUnreachable("127.0.0.1:9 did not answer")})
    adapter.parallel_runs = 1  # one run at a time: the first one's failure is seen before the others start
    writer = TrackerDouble()
    result = scan(adapter, writer)
    assert result.unreachable
    assert [(e.run_id, e.kind) for e in result.errors] == [(n, "unreachable") for n in RUNS]
    assert "did not answer" in result.errors[0].message and "not scanned" in result.errors[1].message
    assert writer.tags == {} and writer.finished == [] and adapter.completed == 0


def test_scan_results_are_frozen():
    result = scan(RecordedAdapter(names=RUNS[:1]), TrackerDouble())
    with pytest.raises(AttributeError):
        result.errors = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        result.summary.scanned = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        result.outcomes[0].changed = False  # type: ignore[misc]
    from trackerhealth.scan import ScanError

    with pytest.raises(ValueError, match="kind must be one of"):
        ScanError("files:corpus/x", "x", "error", "an unstable kind")
