"""A failed or unjudgeable analysis never looks healthy on the pages (issue 16 "no silent health"):
``error`` and ``unknown`` runs, and any status the pages do not know, are drawn grey with their
reason — never green, never "No problems found" — on the run page and in the overview."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from dashboard_helpers import open_page

from trackerhealth import RunHistory, RunRef, analyze
from trackerhealth.diagnoses import REGISTRY
from trackerhealth.schema import HealthReport
from trackerhealth.writers.dashboard import write_report_dir

GREEN = "rgb(0, 158, 115)"
TILE_JS = """() => { const t = document.querySelector('.overall');
  return {status: t.dataset.status, colour: getComputedStyle(t).backgroundColor,
          label: document.getElementById('status-label').textContent}; }"""


class _NewerStatus(HealthReport):
    """A report with a status of its own, as a newer schema may have: the pages must show any
    status string, with its reason, without knowing it in advance."""

    forced_status = "quarantined"

    @property
    def status(self) -> str:
        return self.forced_status


def _as(report: HealthReport, status: str, reason: str) -> HealthReport:
    cls = type("Reported", (_NewerStatus,), {"forced_status": status})
    fields = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    return cls(**{**fields, "status_reason": reason})


def _check_not_healthy(page, status: str, reason_part: str):
    tile = page.evaluate(TILE_JS)
    assert tile["status"] == status and tile["label"] == status and tile["colour"] != GREEN, tile
    assert reason_part in page.inner_text("#status-reason")
    assert "No problems found" not in page.inner_text("main")


@pytest.fixture
def crashed_run(monkeypatch, healthy_run):
    """The healthy training analysed with one diagnosis that raises (a real engine run)."""
    def boom(history, thresholds):
        raise ZeroDivisionError("injected for the test")

    monkeypatch.setattr(REGISTRY["periodic-spikes"].module, "run", boom)
    h = healthy_run[0]
    history = RunHistory(RunRef("wandb", h.ref.project, "crashed-0", name="crashed"), {k: h[k] for k in h.keys()})
    return history, analyze(history)


def test_a_crashed_diagnosis_is_shown_as_error(tmp_path, watched, crashed_run, healthy_run):
    history, report = crashed_run
    assert report.finding("periodic-spikes").level == "error"
    written = write_report_dir(tmp_path, [crashed_run, healthy_run])
    page = watched.page
    assert open_page(page, written[report.run.id]) == "1"
    _check_not_healthy(page, "error", "diagnosis:periodic-spikes failed")
    assert "1 could not run" in page.inner_text("#other-checks summary")
    page.click("#back-to-overview")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    # two runs of the same training: the crashed one is "error" with its reason, the other healthy
    row = page.locator(f"tr[data-status='error'][data-run='{report.run.id}']")
    assert row.count() == 1 and "injected for the test" in row.inner_text()
    assert page.evaluate("() => getComputedStyle(document.querySelector('tr[data-status=error] .badge')).backgroundColor") != GREEN
    tally = page.inner_text("#tally")
    assert "1 error" in tally and "1 healthy" in tally, tally


def test_a_run_without_a_recognised_loss_is_unknown(tmp_path, watched):
    steps = np.arange(300.0)
    ref = RunRef("file", "dashboard-tests", "cost-only", name="cost-only")
    history = RunHistory.from_series(ref, {"cost": (steps, 2.0 * np.exp(-steps / 80) + 0.1)})
    report = analyze(history)
    assert report.problems == ()
    written = write_report_dir(tmp_path, [(history, report)])
    page = watched.page
    assert open_page(page, written[report.run.id]) == "1"
    _check_not_healthy(page, "unknown", "")
    page.goto(written["index"].resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", state="attached")
    assert page.locator("tr[data-status='unknown']").count() == 1 and "healthy" not in page.inner_text("#tally")


@pytest.mark.parametrize("status", ["error", "unknown", "quarantined"])
def test_any_status_beyond_ok_warning_critical_is_grey_with_its_reason(tmp_path, watched, healthy_run, status):
    history, report = healthy_run
    reason = f"the reason for {status}: <b>not markup</b>"
    shown = _as(report, status, reason)
    written = write_report_dir(tmp_path, [(history, shown)])
    page = watched.page
    assert open_page(page, written[report.run.id]) == "1"
    _check_not_healthy(page, status, reason)  # the reason as text, its markup escaped
    page.goto(written["index"].resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", state="attached")
    assert reason in page.inner_text(f"tr[data-status='{status}']")
    page.select_option("#status-filter", status)
    assert page.inner_text("#shown") == "1"
    assert page.locator("b").count() == 0
