"""A local report folder written during a scan: one dashboard per run and the overview page.

:class:`ReportDirWriter` wraps the tracker's writer (which still writes tags and artifacts onto the
run) and, as each run is written, renders that run's dashboard to ``runs/`` and drops the history,
so memory stays bounded as in the scan loop itself. :meth:`ReportDirWriter.finish` writes
``index.html`` (the overview) and ``summary.md`` (its Markdown twin), as
:func:`trackerhealth.writers.dashboard.write_report_dir` does for local files.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..writers import dashboard


class ReportDirWriter:
    def __init__(self, inner, directory: Path, config=None):
        self.inner = inner
        self.directory = Path(directory)
        self.config = config
        self.links: dict[str, str] = {}
        self.notes: list[str] = list(getattr(inner, "notes", ()))
        self._lock = threading.Lock()
        try:
            dashboard.require_plotly()
            self.dashboards = True
        except dashboard.DashboardDependencyError as exc:
            self.dashboards = False
            self.notes.append(f"no run dashboards in {self.directory}: {exc}")

    def write(self, report, history, dry_run: bool = False):
        outcome = self.inner.write(report, history, dry_run) if self.inner is not None else None
        if self.dashboards:
            rel = f"runs/{dashboard.dashboard_filename(report.run)}"
            try:
                dashboard.write_run_dashboard(self.directory / rel, history, report, self.config)
            except Exception as exc:  # noqa: BLE001 - a dashboard bug must not cost the scan
                with self._lock:
                    self.notes.append(f"dashboard for {report.run.name or report.run.id}: {type(exc).__name__}: {exc}")
            else:
                with self._lock:
                    self.links[report.run.id] = rel
        return outcome

    def finish(self, reports, errors=(), title: str = "Training health") -> dict[str, Path]:
        """Write the overview (``index.html``) and ``summary.md``; returns their paths."""
        self.directory.mkdir(parents=True, exist_ok=True)
        index, summary = self.directory / "index.html", self.directory / "summary.md"
        index.write_text(dashboard.render_overview_html(reports, self.links, title=title, errors=errors), encoding="utf-8")
        summary.write_text(dashboard.render_overview_markdown(reports, self.links, errors), encoding="utf-8")
        return {"index": index, "summary": summary}
