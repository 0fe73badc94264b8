"""A local report folder written during a scan: one dashboard per run and the overview page.

:class:`ReportDirWriter` wraps the tracker's writer (which still writes tags and artifacts onto the
run) and, as each run is written, renders that run's dashboard to ``runs/`` and drops the history,
so memory stays bounded as in the scan loop itself. Its :meth:`~ReportDirWriter.finish`, called by
the scan loop after the last run, writes ``index.html`` (the overview) and ``summary.md`` (its
Markdown twin), as :func:`trackerhealth.writers.dashboard.write_report_dir` does for local files.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..schema import HealthReport, RunHistory
from ..writers import dashboard
from ..writers.base import RENDER, WriteOutcome, WriteProblem, Writer


class ReportDirWriter(Writer):
    """``inner`` (the tracker's writer, or None) plus a local report folder in ``directory``."""

    def __init__(self, inner: Writer | None, directory: Path, config=None, title: str = "Training health"):
        self.inner = inner
        self.directory = Path(directory)
        self.config = config
        self.title = title
        self.index = self.directory / "index.html"
        self.summary = self.directory / "summary.md"
        self.links: dict[str, str] = {}
        self.notes: list[str] = list(inner.notes) if inner is not None else []
        self._lock = threading.Lock()
        try:
            dashboard.require_plotly()
            self.dashboards = True
        except dashboard.DashboardDependencyError as exc:
            self.dashboards = False
            self.notes.append(f"no run dashboards in {self.directory}: {exc}")

    def write(self, report: HealthReport, history: RunHistory, dry_run: bool = False) -> WriteOutcome:
        outcome = (self.inner.write(report, history, dry_run) if self.inner is not None
                   else WriteOutcome(report.run.id, dry_run=dry_run))
        if not self.dashboards:
            return outcome
        try:
            # One plotly.js for the whole folder, and a link back to the overview on every page.
            rel = dashboard.write_report_page(self.directory, history, report, self.config)
        except Exception as exc:  # noqa: BLE001 - a dashboard bug costs this run's page, not the scan
            problem = WriteProblem(RENDER, f"local dashboard: {type(exc).__name__}: {exc}")
            return dataclasses.replace(outcome, problems=(*outcome.problems, problem))
        with self._lock:
            self.links[report.run.id] = rel
        return outcome

    def finish(self, reports: Sequence[HealthReport], errors: Sequence[Mapping[str, Any]],
               dry_run: bool = False, sweeps: Sequence[Any] = ()) -> list[str]:
        """Write the overview (``index.html``) and ``summary.md``, after the inner writer's finish."""
        notes = list(self.inner.finish(reports, errors, dry_run, sweeps)) if self.inner is not None else []
        self.directory.mkdir(parents=True, exist_ok=True)
        dashboard.write_overview(self.directory, reports, self.links, title=self.title, errors=errors, sweeps=sweeps)
        return notes
