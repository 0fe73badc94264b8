"""One run's dashboard page: header, score card, findings with fixes, then the four panels.

Every piece of run-supplied text goes through :func:`._encode.esc`; the chart data travels in a
JSON data island (:func:`._encode.script_json`). The page is one self-contained file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ... import __version__
from ...roles import resolve
from ...schema import DIMENSIONS, ERROR, OK, SKIPPED, HealthReport, RunHistory
from ..formats import evidence_line, explained_text
from . import _plotlyjs, _status
from ._assets import CSP, CSP_SHARED_SCRIPT, CSS, RUN_JS
from ._encode import esc, safe_url, script_json
from .panels import Panel, build_panels

DIMENSION_LABELS = {
    "convergence_speed": "Convergence speed",
    "stability": "Stability",
    "gradient_health": "Gradient health",
    "resource_efficiency": "Resource efficiency",
    "overfitting_risk": "Overfitting risk",
}
# What each dimension rates, shown on its tile: a score is about the run's curves, the status is
# about the findings, and a person reading "gradient health 40" next to "ok" needs both sentences.
DIMENSION_MEANING = {
    "convergence_speed": "how early the loss made most of its improvement, and how large it was",
    "stability": "how much the (validation) loss still wobbles, relative to how far it has come",
    "gradient_health": "how steady the gradient norm is (spread relative to its median, spikes)",
    "resource_efficiency": "how busy the accelerator is (GPU utilization or compute share of a step)",
    "overfitting_risk": "validation/train loss ratio at the end and its trend (100 = no sign of overfitting)",
}
TRACKER_NAMES = {"wandb": "W&B", "mlflow": "MLflow"}
CONFIG_VALUE_LIMIT = 300


def score_class(score: float | None) -> str:
    if score is None:
        return "none"
    return "good" if score >= 75 else "fair" if score >= 50 else "poor"


def fmt_score(score: float | None) -> str:
    return "—" if score is None else f"{score:.0f}"


def _fmt_basis(basis: Mapping[str, Any]) -> str:
    parts = []
    for k, v in basis.items():
        parts.append(f"{k} = {v:.4g}" if isinstance(v, float) and math.isfinite(v) else f"{k} = {v}")
    return "; ".join(parts)


def html_document(title: str, body: str, head_extra: str = "", css_extra: str = "", csp: str = CSP) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<meta name=\"generator\" content=\"trackerhealth {esc(__version__)}\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}{css_extra}</style>\n{head_extra}\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def run_header(report: HealthReport, overview_href: str | None = None) -> str:
    run = report.run
    back = ""
    href = safe_url(overview_href, allow_relative=True)
    if href:
        back = f'<a class="back" id="back-to-overview" href="{esc(href)}">← all runs (overview)</a>'

    name = run.name or run.id
    bits = [f"<span>{esc(TRACKER_NAMES.get(run.tracker, run.tracker))}</span>",
            f"<span>project <code>{esc(run.project)}</code></span>", f"<span>run <code>{esc(run.id)}</code></span>"]
    if run.state:
        bits.append(f"<span>state {esc(run.state)}</span>")
    bits.append(f"<span>{report.n_points:,} points logged</span>")
    if report.last_step is not None:
        bits.append(f"<span>last step {report.last_step:,.0f}</span>")
    url = safe_url(run.url)
    if url:
        where = TRACKER_NAMES.get(run.tracker, "the tracker")
        bits.append(f'<a href="{esc(url)}" target="_blank" rel="noopener noreferrer">open in {esc(where)} ↗</a>')
    tags = ""
    if run.tags:
        tags = '<div class="tags" aria-label="tags">' + "".join(f'<span class="tag">{esc(t)}</span>' for t in run.tags) + "</div>"
    return (f'<header>{back}<h1 id="run-name">{esc(name)}</h1><div class="meta">{"".join(bits)}</div>{tags}'
            f'{group_line(report)}</header>')


def group_line(report: HealthReport) -> str:
    """The run's group and baseline, under the header (empty for a run analysed alone)."""
    g = report.group
    if not g or g.get("size", 1) < 2:
        return ""
    if g.get("baseline") == report.run.id:
        base = f"this run is the group's baseline ({esc(g.get('rule', ''))})"
    elif g.get("baseline_name"):
        base = (f"compared with the baseline <strong>{esc(g['baseline_name'])}</strong> ({esc(g.get('rule', ''))}), "
                "drawn in grey behind this run's curves")
    else:
        base = f"no baseline: {esc(g.get('reason', ''))}"
    return (f'<div class="group" id="run-group">group <code>{esc(g.get("label", ""))}</code> · {g["size"]} runs · '
            f'{base}</div>')


def _dimension_basis(d) -> str:
    """The line under a dimension's number: its numbers, or why there are none."""
    if d is None:
        return "not computed"
    if d.score is None:
        return d.reason or "not computed"
    return _fmt_basis(d.basis) if d.basis else (d.reason or "")


def scorecard(report: HealthReport) -> str:
    shown = _status.view(report)
    css, label = shown.css, shown.label
    if report.score is None and not report.problems and shown.healthy:
        css, label = "none", "no score"
    tiles = [(f'<div class="overall status-{esc(css)}" data-status="{esc(shown.status)}" title="overall score: the mean of '
              f'the available dimensions, less a penalty per finding"><span class="lbl">overall score</span>'
              f'<span class="num" data-score="{esc(fmt_score(report.score))}">{esc(fmt_score(report.score))}</span>'
              f'<span class="lbl" id="status-label">{esc(label)}</span></div>')]
    by_name = {d.name: d for d in report.dimensions}
    for name in DIMENSIONS:
        d = by_name.get(name)
        score = d.score if d else None
        basis = _dimension_basis(d)
        tip = f"{DIMENSION_LABELS[name]}: {DIMENSION_MEANING[name]}." + (f" {basis}" if basis else "")
        width = 0 if score is None else max(2, min(100, score))
        # A fair or poor score says why on the tile itself; a good one keeps it in the tooltip.
        visible = basis if (score is None or score < 75) and basis else ""
        tiles.append(
            f'<div class="dim" data-dimension="{esc(name)}" title="{esc(tip)}"><div class="name">{esc(DIMENSION_LABELS[name])}</div>'
            f'<div class="num">{esc(fmt_score(score))}</div>'
            f'<div class="bar"><span class="{score_class(score)}" style="width:{width:.0f}%"></span></div>'
            + (f'<div class="basis">{esc(visible)}</div>' if visible else "") + "</div>")
    return ('<section class="card" aria-label="score card"><div class="scorecard">' + "".join(tiles) + "</div>"
            '<div class="muted hint" id="score-hint">The status comes from the findings: it is '
            f'<strong>{esc(shown.status)}</strong> because {esc(_status_because(report, shown))}. '
            "The scores rate each dimension of the curves, 0–100, higher is healthier (overfitting risk: 100 = no "
            "sign of it); a score can be low while no check's threshold was crossed, so a low score next to "
            "<em>ok</em> is a tendency to watch, not a finding. Hover a dimension for what it measures and the "
            "numbers behind it.</div></section>")


def _status_because(report: HealthReport, shown) -> str:
    if shown.reason:
        return shown.reason
    problems = report.problems
    if problems:
        worst = [f.id for f in problems if f.level == problems[0].level]
        return f"of {len(problems)} finding(s), the worst {problems[0].level}: {', '.join(worst)}"
    return "every check that ran passed"


def _steps_text(start: float, end: float) -> str:
    return f"step {start:,.0f}" if start == end else f"steps {start:,.0f}–{end:,.0f}"


def findings_section(report: HealthReport, panels: list[Panel]) -> str:
    problems = report.problems
    drawn: dict[str, list] = {}
    for p in panels:
        for r in p.ranges:
            drawn.setdefault(r.finding, []).append(r)
    items = []
    for f in problems:
        ranges = drawn.get(f.id, [])
        zoom = ""
        if ranges:
            a, b = min(r.start for r in ranges), max(r.end for r in ranges)
            zoom = (f'<button type="button" data-zoom-start="{a!r}" data-zoom-end="{b!r}" '
                    f'title="zoom every chart to this finding">show {esc(_steps_text(a, b))}</button>')
        evidence = "".join(f"<li>{esc(evidence_line(e))}</li>" for e in f.evidence)
        items.append(
            f'<li class="finding {esc(f.level)}" id="finding-{esc(f.id)}" data-finding="{esc(f.id)}">'
            f'<div class="head"><span class="badge {esc(f.level)}">{esc(f.level.upper())}</span>'
            f'<code>{esc(f.id)}</code><strong>{esc(f.title)}</strong>{zoom}</div>'
            f'<p>{esc(f.message)}</p>' + (f"<ul>{evidence}</ul>" if evidence else "")
            + (f'<p class="fix"><strong>Fix:</strong> {esc(f.recommendation)}</p>' if f.recommendation else "")
            + "</li>")
    shown = _status.view(report)
    others = [f for f in report.findings if not f.is_problem]
    passed = sum(f.level == OK for f in others)
    skipped = sum(f.level == SKIPPED for f in others)
    failed = sum(f.level == ERROR for f in others)
    explained = sum(f.is_explained for f in others)
    counts = f"{passed} passed, {skipped} skipped (data not logged or too short), {failed} could not run"
    if explained:
        counts += f", {explained} explained by another finding"
    box = ""
    if not shown.healthy and shown.css == "other":
        box = (f'<div class="status-box" id="status-reason" data-status="{esc(shown.status)}">'
               f'<strong>{esc(shown.status)}</strong>: {esc(shown.reason)}</div>')
    if problems:
        head = f"<h2>Findings ({len(problems)})</h2>"
        body = box + f'<ul class="findings">{"".join(items)}</ul>'
    elif shown.healthy:
        head = "<h2>Findings</h2>"
        body = (f'<p class="muted" id="no-findings">No problems found by the {passed} check(s) that ran '
                f'({skipped} skipped: see below).</p>' if skipped else
                f'<p class="muted" id="no-findings">No problems found: all {passed} check(s) passed.</p>')
    else:
        # Not "No problems found": a run whose analysis failed, or whose loss was not recognised,
        # has not been shown to be healthy.
        head = "<h2>Findings</h2>"
        body = box + ('<p class="muted" id="no-findings">No warning or critical finding, but that does not make this '
                      'run healthy: see the reason above.</p>')
    rest = ""
    if others:
        lines = "".join(f'<li><span class="badge {esc(f.level)}">{esc(f.level)}</span> <code>{esc(f.id)}</code> '
                        + (f'<em class="explained" data-explained-by="{esc(f.explained_by)}">{esc(explained_text(f))}</em> '
                           if f.is_explained else "")
                        + f'{esc(f.message)}</li>' for f in others)
        rest = (f'<details id="other-checks"><summary>Checks without a finding ({len(others)}): {esc(counts)}</summary>'
                f'<ul class="notes">{lines}</ul></details>')
    notes = ""
    if report.notes:
        notes = ('<details><summary>Notes on the data</summary><ul class="notes">'
                 + "".join(f"<li>{esc(n)}</li>" for n in report.notes) + "</ul></details>")
    return f'<section class="card" aria-label="findings">{head}{body}{rest}{notes}</section>'


def panel_section(index: int, panel: Panel) -> str:
    toolbar = ""
    if panel.figure is not None and panel.log_axis:
        current = panel.figure["layout"].get(panel.log_axis, {}).get("type", "linear")
        buttons = "".join(
            f'<button type="button" data-scale-for="{panel.id}" data-axis="{panel.log_axis}" data-scale="{s}" '
            f'aria-pressed="{str(current == s).lower()}">{label}</button>'
            for s, label in (("linear", "Linear"), ("log", "Log")))
        toolbar = f'<div class="toolbar" role="group" aria-label="y-axis scale">y scale {buttons}</div>'
    reset = '<button type="button" data-reset-zoom="1" title="show the whole run in every chart">reset zoom</button>'
    if panel.figure is None:
        content = f'<div class="missing" data-missing="{panel.id}"><strong>Not logged.</strong> {esc(panel.missing)}</div>'
        reset = ""
    else:
        content = f'<div class="plot" id="plot-{panel.id}" data-points-logged="{panel.points_logged}" data-points-shown="{panel.points_shown}"></div>'
    notes = "".join(f"<li>{esc(n)}</li>" for n in panel.notes)
    notes = f'<ul class="notes">{notes}</ul>' if notes else ""
    return (f'<section class="card panel" id="panel-{panel.id}" data-panel="{panel.id}">'
            f'<div class="head"><h2>{index}. {esc(panel.title)}</h2><div class="toolbar">{toolbar}{reset}</div></div>'
            f"{content}{notes}</section>")


def config_section(report: HealthReport) -> str:
    config = report.run.config or {}
    if not config:
        return ""
    rows = []
    for k, v in list(config.items())[:500]:
        try:
            text = v if isinstance(v, str) else json.dumps(v, default=str)
        except (TypeError, ValueError):
            text = repr(v)
        if len(text) > CONFIG_VALUE_LIMIT:
            text = text[:CONFIG_VALUE_LIMIT] + "…"
        rows.append(f"<tr><td><code>{esc(k)}</code></td><td>{esc(text)}</td></tr>")
    return (f'<section class="card"><details><summary>Run config ({len(config)} values)</summary>'
            f'<table class="kv">{"".join(rows)}</table></details></section>')


def render(history: RunHistory, report: HealthReport, config=None, *, plotlyjs_src: str | None = None,
           overview_href: str | None = None) -> str:
    """The full HTML page for one run (see :func:`trackerhealth.writers.dashboard.render_run_html`)."""
    if config is not None:
        view = resolve(history, config.roles, config.units)
    else:
        view = resolve(history)
    panels = build_panels(view, report)
    head = _plotlyjs.script_tags(plotlyjs_src)
    version = _plotlyjs.require_plotly().get_plotlyjs_version()
    shown = [p for p in panels if p.figure is not None]
    xrange = shown[0].figure["layout"]["xaxis"]["range"] if shown else [0.0, 1.0]
    data = {"panels": [{"id": p.id, "figure": p.figure} for p in shown],
            "xrange": xrange, "span": max(xrange[1] - xrange[0], 1.0)}
    logged = sum(p.points_logged for p in panels)
    shown = sum(p.points_shown for p in panels)
    where = "embedded" if plotlyjs_src is None else f"from {esc(plotlyjs_src)}"
    footer = (f"<footer>trackerhealth {esc(__version__)} · plotly.js {esc(version)} {where} (works offline) · "
              f'<span id="points">{shown:,} of {logged:,} charted points drawn</span>; long series are reduced to '
              "each step bucket's minimum and maximum, so spikes, NaN/Inf (✕ and ▲▼ markers) and finding ranges stay visible."
              "</footer>")
    body = (
        "<main>" + run_header(report, overview_href) + scorecard(report) + findings_section(report, panels)
        + "".join(panel_section(i + 1, p) for i, p in enumerate(panels)) + config_section(report) + footer + "</main>"
        + f'\n<script type="application/json" id="th-data">{script_json(data)}</script>\n<script>{RUN_JS}</script>'
    )
    name = report.run.name or report.run.id
    return html_document(f"{name} — training health", body, head_extra=head,
                         csp=CSP if plotlyjs_src is None else CSP_SHARED_SCRIPT)
