"""What both tracker writers put on a run: the report JSON, the run dashboard, and the digest
that lets an unchanged run skip its uploads (idempotence without local state)."""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable

from ..schema import HealthReport, RunHistory

REPORT_FORMAT = 1


def report_json(report: HealthReport) -> str:
    """The report artifact; deterministic (no scan time), so an unchanged run's digest is stable."""
    from .. import __version__

    doc = {"format": REPORT_FORMAT, "trackerhealth_version": __version__, **report.to_dict(full=True)}
    return json.dumps(doc, indent=2, sort_keys=True, allow_nan=False)


def dashboard_renderer() -> tuple[Callable[..., str] | None, str]:
    """``render_run_html`` of the dashboard writer when it is installed and usable, else why not.

    The dashboard writer is an extra (it needs Plotly), so it is imported here, when a tracker
    writer is built, never at package import. Its declared interface is ``require_plotly()``
    (raises, saying what to install) and ``render_run_html(history, report, config=None)``.
    """
    try:
        # Through sys.modules (not the package attribute), so an uninstalled extra reads as one.
        dashboard = importlib.import_module(f"{__package__}.dashboard")
    except ImportError:
        return None, "the dashboard writer is not installed"
    try:
        dashboard.require_plotly()
    except Exception as exc:  # noqa: BLE001 - its message says what to install
        return None, f"no dashboard artifact: {exc}"
    return dashboard.render_run_html, ""


class Dashboard:
    """The run dashboard, when the dashboard writer is installed and usable (``note`` says why
    not, otherwise)."""

    def __init__(self):
        self._render, self.note = dashboard_renderer()

    @property
    def available(self) -> bool:
        return self._render is not None

    def render(self, history: RunHistory, report: HealthReport, config=None) -> str:
        """The run's dashboard page; the config makes its panels show the keys the diagnoses used."""
        return self._render(history, report, config=config)

    def digest(self, body: str) -> str:
        """What the run's uploads hold: the report JSON, and whether a dashboard goes with it."""
        return hashlib.sha256((body + ("\ndashboard" if self.available else "")).encode()).hexdigest()[:16]


__all__ = ["REPORT_FORMAT", "Dashboard", "dashboard_renderer", "report_json"]
