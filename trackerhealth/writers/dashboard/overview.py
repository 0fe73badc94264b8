"""The project overview: every run of a scan with its score, dimension scores and findings.

A sortable, filterable table, each row linking to the run's dashboard (a relative path) and to the
run in its tracker (``RunRef.url``). No charting library: a small self-contained page. The Markdown
twin for a GitHub Actions job summary is :func:`trackerhealth.writers.formats.to_markdown` with
``dashboard_links``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...schema import DIMENSIONS, HealthReport
from ...sweeps import SweepSummary
from .. import formats
from . import _status
from ._assets import OVERVIEW_CSS, OVERVIEW_JS
from ._encode import esc, safe_url
from .page import DIMENSION_LABELS, TRACKER_NAMES, fmt_score, html_document, score_class

SHORT = {
    "convergence_speed": "Convergence",
    "stability": "Stability",
    "gradient_health": "Gradients",
    "resource_efficiency": "Resources",
    "overfitting_risk": "Overfitting",
}


def _link_for(report: HealthReport, links: Mapping[str, str]) -> str | None:
    return links.get(report.run.id)


def _score_cell(score: float | None, title: str = "") -> str:
    v = "" if score is None else f"{score:.1f}"
    cls = score_class(score)
    pill = f'<span class="pill {cls}">{esc(fmt_score(score))}</span>'
    return f'<td class="num" data-v="{v}" title="{esc(title)}">{pill}</td>'


def _group_cell(report: HealthReport) -> str:
    g = report.group
    if not g or g.get("size", 1) < 2:
        return '<td data-v="~"><span class="muted">alone</span></td>'
    badge = ' <span class="badge ok" title="the group\'s baseline">baseline</span>' if g.get("baseline") == report.run.id else ""
    return f'<td data-v="{esc(g.get("label", ""))}"><code>{esc(g.get("label", ""))}</code>{badge}</td>'


def _row(report: HealthReport, links: Mapping[str, str], grouped: bool = False) -> str:
    run = report.run
    name = run.name or run.id
    dash = safe_url(_link_for(report, links), allow_relative=True)
    name_html = f'<a href="{esc(dash)}" data-dashboard="1">{esc(name)}</a>' if dash else esc(name)
    tracker = TRACKER_NAMES.get(run.tracker, run.tracker)
    url = safe_url(run.url)
    tracker_html = (f'<a href="{esc(url)}" target="_blank" rel="noopener noreferrer" data-tracker="1">{esc(tracker)} ↗</a>'
                    if url else esc(tracker))
    problems = report.problems
    shown = _status.view(report)
    fids = "".join(f'<span class="fid {esc(f.level)}" title="{esc(f.level.upper() + ": " + f.message)}">{esc(f.id)}</span>'
                   for f in problems)
    if shown.reason:  # error / unknown: the reason on the run's row, as the contract asks
        fids += f'<span class="muted status-why">{esc(shown.reason)}</span>'
    fids = fids or '<span class="muted">—</span>'
    label = str((report.group or {}).get("label", ""))
    search = " ".join([name, run.id, run.project, run.tracker, shown.status, label] + [f.id for f in problems]).lower()
    dims = "".join(
        _score_cell(report.scores.get(d), next((x.reason for x in report.dimensions if x.name == d and x.score is None), ""))
        for d in DIMENSIONS)
    return (
        f'<tr data-status="{esc(shown.status)}" data-search="{esc(search)}" data-run="{esc(run.id)}">'
        f'<td class="run" data-v="{esc(name.lower())}">{name_html}<div class="muted"><code>{esc(run.project)}</code> · '
        f'<code>{esc(run.id)}</code></div></td>'
        f'<td data-v="{esc(tracker)}">{tracker_html}</td>'
        + (_group_cell(report) if grouped else "")
        + f'<td data-v="{shown.rank}"><span class="badge {esc(shown.css)}" title="{esc(shown.reason)}">{esc(shown.status)}</span></td>'
        + _score_cell(report.score) + dims
        + f'<td data-v="{len(problems)}"><div class="fids">{fids}</div></td></tr>'
    )


def render(reports: Sequence[HealthReport], dashboard_links: Mapping[str, str] | None = None,
           title: str = "Training health", errors: Sequence[Mapping[str, Any]] = (),
           sweeps: Sequence[SweepSummary] = ()) -> str:
    """The overview page; runs analysed with their groups get a Group column (their group, the
    baseline marked) and are listed group by group; ``sweeps`` adds each sweep's patterns."""
    links = dict(dashboard_links or {})
    grouped = any(r.group and r.group.get("size", 1) > 1 for r in reports)
    ordered = sorted(reports, key=lambda r: (r.score is None, r.score if r.score is not None else 0.0))
    if grouped:
        ordered.sort(key=lambda r: str((r.group or {}).get("label") or "~"))
    counts: dict[str, int] = {}
    for r in reports:
        s = _status.view(r).status
        counts[s] = counts.get(s, 0) + 1
    # Every status that occurs is counted under its own name: an error or unknown run is never
    # folded into "healthy".
    order = sorted(counts, key=lambda s: _status.RANK.get(s, _status.RANK["error"]))
    tally = ", ".join(f"{counts[s]} {_status.KNOWN.get(s, s) if s == 'ok' else s}" for s in order) or "none"
    options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>'
                      for s in ["critical", "warning", "ok"] + [s for s in order if s not in _status.KNOWN])
    heads = ['<th data-sort="text" scope="col"><button type="button">Run</button></th>',
             '<th data-sort="text" scope="col"><button type="button">Tracker</button></th>']
    if grouped:
        heads.append('<th data-sort="text" scope="col"><button type="button">Group</button></th>')
    heads += ['<th data-sort="num" scope="col"><button type="button">Status</button></th>',
             '<th data-sort="num" scope="col" aria-sort="ascending"><button type="button">Score</button></th>']
    heads += [f'<th data-sort="num" scope="col" title="{esc(DIMENSION_LABELS[d])}"><button type="button">{SHORT[d]}</button></th>'
              for d in DIMENSIONS]
    heads.append('<th data-sort="num" scope="col"><button type="button">Findings</button></th>')
    rows = "".join(_row(r, links, grouped) for r in ordered)
    sweep_html = ""
    if sweeps:
        sweep_html = ('<section class="card" id="sweeps"><h2>Sweeps</h2><ul class="notes">' + "".join(
            f"<li><code>{esc(sw.group)}</code> ({sw.runs} runs)<ul>"
            + ("".join(f"<li>{esc(a.sentence())}</li>" for a in sw.associations)
               or "<li>no configuration value goes with a finding</li>") + "</ul></li>" for sw in sweeps)
            + "</ul></section>")
    err_html = ""
    if errors:
        err_html = ('<section class="card"><h2>Errors</h2><ul class="notes">' + "".join(
            f"<li><code>{esc(e.get('source', '?'))}</code>: {esc(e.get('message', ''))}</li>" for e in errors)
            + "</ul></section>")
    body = (
        f"<main><header><h1>{esc(title)}</h1><div class=\"meta\"><span>{len(reports)} run(s): "
        f"<span id=\"tally\">{esc(tally)}</span>. "
        "Scores are 0–100, higher is healthier; — means the run did not log what the dimension needs. "
        "The status comes from the findings; a run is healthy only when every check ran and none found a "
        "problem.</span></div></header>"
        '<section class="card"><div class="controls">'
        '<label>Filter <input id="filter" type="search" placeholder="run name, id, project or finding id" '
        'aria-label="filter runs"></label>'
        '<label>Status <select id="status-filter" aria-label="status"><option value="">all</option>'
        f'{options}</select></label>'
        f'<span class="muted"><span id="shown">{len(reports)}</span> of {len(reports)} shown</span></div>'
        f'<div class="scroll"><table class="runs" id="runs"><thead><tr>{"".join(heads)}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div></section>{sweep_html}{err_html}</main>"
        f"<script>{OVERVIEW_JS}</script>"
    )
    return html_document(title, body, css_extra=OVERVIEW_CSS)


def markdown(reports: Sequence[HealthReport], dashboard_links: Mapping[str, str] | None = None,
             errors: Sequence[Mapping[str, Any]] = (), sweeps: Sequence[SweepSummary] = ()) -> str:
    """The same overview in Markdown (GitHub Actions job summary)."""
    return formats.to_markdown(reports, errors, dashboard_links=dashboard_links, sweeps=sweeps)
