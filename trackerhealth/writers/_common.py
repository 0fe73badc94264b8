"""What both tracker writers put on a run: the report JSON, the run dashboard, and the digest
that lets an unchanged run skip its uploads (idempotence without local state)."""

from __future__ import annotations

import hashlib
import importlib
import inspect
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
    """``render_run_html`` from the dashboard writer when it is there and usable, else why not."""
    try:
        module = importlib.import_module("trackerhealth.writers.dashboard")
    except ImportError:
        return None, "the dashboard writer is not installed"
    render = getattr(module, "render_run_html", None)
    if render is None:
        return None, "the dashboard writer has no render_run_html"
    check = getattr(module, "require_plotly", None)
    if check is not None:
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - its message says what to install
            return None, f"no dashboard artifact: {exc}"
    return render, ""


class Dashboard:
    """The run dashboard, when the dashboard writer is installed and usable (``note`` says why
    not, otherwise)."""

    def __init__(self):
        self._render, self.note = dashboard_renderer()
        # Passed when the renderer takes it, so the panels show the keys the diagnoses used.
        self._takes_config = self.available and "config" in inspect.signature(self._render).parameters

    @property
    def available(self) -> bool:
        return self._render is not None

    def render(self, history: RunHistory, report: HealthReport, config=None) -> str:
        return self._render(history, report, **({"config": config} if self._takes_config else {}))

    def digest(self, body: str) -> str:
        """What the run's uploads hold: the report JSON, and whether a dashboard goes with it."""
        return hashlib.sha256((body + ("\ndashboard" if self.available else "")).encode()).hexdigest()[:16]


__all__ = ["REPORT_FORMAT", "Dashboard", "dashboard_renderer", "report_json"]
