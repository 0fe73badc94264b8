"""Health dashboards: one self-contained interactive HTML page per run, and a project overview.

A run's page has the score card (overall plus the five dimensions), the findings with their fixes,
and four Plotly panels — loss (log toggle), per-layer gradient-norm heatmap, learning rate and
momentum, GPU utilization and step time — with every finding drawn as a shaded step range. A panel
whose data the run did not log says what to log. A page on its own embeds plotly.js (compressed),
so it makes no request: it works offline, from ``file://``, as an MLflow artifact and as a W&B run
file. A report folder (:func:`write_report_dir`) holds one shared ``plotly.min.js`` that every page
loads by a relative path, and each page links back to the folder's overview; a page written alone
has no back link (there is no overview to go back to). Long runs are reduced by
:mod:`.downsample`, which keeps every spike and NaN/Inf.

    from trackerhealth.writers.dashboard import RunDashboard
    RunDashboard(history, report)            # renders inline in Jupyter
    RunDashboard(history, report).save("run.html")

Plotly is an extra: ``pip install 'trackerhealth[dashboard]'``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...schema import HealthReport, RunHistory, RunRef
from ._encode import esc, slug
from . import _plotlyjs
from ._plotlyjs import INSTALL_HINT, DashboardDependencyError, require_plotly

__all__ = [
    "INSTALL_HINT",
    "DashboardDependencyError",
    "RunDashboard",
    "dashboard_filename",
    "render_overview_html",
    "render_overview_markdown",
    "render_run_html",
    "require_plotly",
    "write_overview",
    "write_report_dir",
    "write_report_page",
    "write_run_dashboard",
]

# Where a report folder keeps its parts: pages under runs/, the overview and the shared bundle at
# its root, so a page reaches both with "../".
RUNS_DIR = "runs"
OVERVIEW_FROM_PAGE = "../index.html"


def render_run_html(history: RunHistory, report: HealthReport, config=None, *, plotlyjs_src: str | None = None,
                    overview_href: str | None = None) -> str:
    """One run's dashboard as an HTML document; self-contained (plotly.js embedded) by default.

    ``config`` (a :class:`trackerhealth.Config`) is only needed when it maps roles or units, so the
    panels show the same keys the diagnoses used. ``plotlyjs_src`` (a relative URL such as
    ``../plotly.min.js``) loads a folder's shared copy instead of embedding it: use it only when
    that file is written beside the page (:func:`write_report_page` does both). ``overview_href``
    adds a link back to the overview page. Raises :class:`DashboardDependencyError` naming the
    install command when Plotly is missing.
    """
    require_plotly()
    from .page import render

    return render(history, report, config, plotlyjs_src=plotlyjs_src, overview_href=overview_href)


def render_overview_html(reports: Sequence[HealthReport], dashboard_links: Mapping[str, str] | None = None,
                         title: str = "Training health", errors: Sequence[Mapping[str, Any]] = (), sweeps=()) -> str:
    """The project overview page; ``dashboard_links`` maps run id -> relative path of its dashboard;
    ``sweeps``: the sweep summaries (:mod:`trackerhealth.sweeps`) to list under the runs."""
    from .overview import render

    return render(reports, dashboard_links, title=title, errors=errors, sweeps=sweeps)


def render_overview_markdown(reports: Sequence[HealthReport], dashboard_links: Mapping[str, str] | None = None,
                             errors: Sequence[Mapping[str, Any]] = (), sweeps=()) -> str:
    """The overview as Markdown, for a GitHub Actions job summary (``formats.to_markdown``), with
    the sweeps' patterns."""
    from .overview import markdown

    return markdown(reports, dashboard_links, errors, sweeps)


def write_overview(directory: str | os.PathLike, reports: Sequence[HealthReport], dashboard_links: Mapping[str, str] | None = None,
                   title: str = "Training health", errors: Sequence[Mapping[str, Any]] = (), sweeps=()) -> dict[str, Path]:
    """Write the overview alone: ``directory/index.html`` and its Markdown twin ``summary.md``
    (``scan --report-dir``: each run's dashboard is in its tracker, which each row links to).
    Needs no Plotly. Returns ``{"index": …, "summary": …}``."""
    directory = Path(directory)
    _write_text(directory / "index.html", render_overview_html(reports, dashboard_links, title=title, errors=errors, sweeps=sweeps))
    _write_text(directory / "summary.md", render_overview_markdown(reports, dashboard_links, errors, sweeps))
    return {"index": directory / "index.html", "summary": directory / "summary.md"}


def _write_text(path: Path, text: str) -> bool:
    """Write only when the content changed (writers are idempotent); True when written."""
    path = Path(path)
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True


def write_run_dashboard(path: str | os.PathLike, history: RunHistory, report: HealthReport, config=None) -> Path:
    """Render and write one run's self-contained dashboard to ``path`` (plotly.js embedded, no back
    link: a page meant to travel alone); returns the path."""
    path = Path(path)
    _write_text(path, render_run_html(history, report, config))
    return path


def write_report_page(directory: str | os.PathLike, history: RunHistory, report: HealthReport, config=None) -> str:
    """Write one run's page into a report folder: ``directory/runs/<name>.html``, loading the
    folder's shared ``plotly.min.js`` (written here when missing or stale) and linking back to
    ``directory/index.html``, which the caller writes once every page is done. Returns the page's
    path relative to ``directory``, for the overview's links."""
    directory = Path(directory)
    _plotlyjs.write_shared(directory)
    rel = f"{RUNS_DIR}/{dashboard_filename(report.run)}"
    html = render_run_html(history, report, config, plotlyjs_src=f"../{_plotlyjs.SHARED_NAME}",
                           overview_href=OVERVIEW_FROM_PAGE)
    _write_text(directory / rel, html)
    return rel


def dashboard_filename(ref: RunRef) -> str:
    """A stable, file-name-safe, collision-free name for a run's dashboard: ``<name>-<hash>.html``."""
    digest = hashlib.sha1(f"{ref.tracker}\x00{ref.project}\x00{ref.id}".encode()).hexdigest()[:8]
    return f"{slug(ref.name or ref.id)}-{digest}.html"


def write_report_dir(directory: str | os.PathLike, runs: Iterable[tuple[RunHistory, HealthReport]], config=None,
                     title: str = "Training health", errors: Sequence[Mapping[str, Any]] = (), sweeps=()) -> dict[str, Path]:
    """Write every run's dashboard under ``directory/runs/``, one shared ``plotly.min.js``, the
    overview as ``index.html`` (with ``sweeps``, the sweep summaries) and its Markdown twin as
    ``summary.md``. Returns ``{"index", "summary", <run id>: dashboard path, …}``."""
    directory = Path(directory)
    links: dict[str, str] = {}
    written: dict[str, Path] = {}
    reports = []
    for history, report in runs:
        rel = write_report_page(directory, history, report, config)
        links[report.run.id] = rel
        written[report.run.id] = directory / rel
        reports.append(report)
    written.update(write_overview(directory, reports, links, title=title, errors=errors, sweeps=sweeps))
    return written


class RunDashboard:
    """A run's dashboard as an object: shown inline by Jupyter, saved with :meth:`save`.

    In a notebook the page is shown in a sandboxed ``<iframe srcdoc>``, so its styles and scripts
    never touch the notebook's own (e.g. require.js in classic Jupyter).
    """

    height = 900

    def __init__(self, history: RunHistory, report: HealthReport | None = None, config=None):
        if report is None:
            from ...engine import (
                analyze,  # only when asked to analyze here; writers stay light
            )

            report = analyze(history, config)
        self.history = history
        self.report = report
        self.config = config
        self._html: str | None = None

    @property
    def html(self) -> str:
        if self._html is None:
            self._html = render_run_html(self.history, self.report, self.config)
        return self._html

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        _write_text(path, self.html)
        return path

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{esc(self.html)}" sandbox="allow-scripts allow-downloads" '
                f'title="{esc("training health: " + (self.report.run.name or self.report.run.id))}" '
                f'style="width:100%;height:{self.height}px;border:1px solid #d1d9e0;border-radius:6px"></iframe>')

    def __repr__(self) -> str:
        r = self.report
        return f"RunDashboard({r.run.name or r.run.id!r}, score={r.score}, status={r.status!r})"
