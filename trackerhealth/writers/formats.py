"""Render health reports as a terminal table, Markdown, or the contract's JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..schema import CRITICAL, DIMENSIONS, ERROR, OK, UNKNOWN, WARNING, Evidence, Finding, HealthReport
from ..sweeps import SweepSummary

FORMATS = ("table", "markdown", "json")
_SHORT = {
    "convergence_speed": "conv",
    "stability": "stab",
    "gradient_health": "grad",
    "resource_efficiency": "res",
    "overfitting_risk": "ovf",
}


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}"


def evidence_line(e: Evidence) -> str:
    """One evidence item as text: ``metric steps a–b: observed (threshold t) — detail``."""
    steps = ""
    if e.step_start is not None:
        steps = f" steps {e.step_start:,.0f}" + (f"–{e.step_end:,.0f}" if e.step_end is not None and e.step_end != e.step_start else "")
    vs = f" (threshold {e.threshold:.4g})" if e.threshold is not None else ""
    obs = f"{e.observed:.4g}" if e.observed is not None else "n/a"
    detail = f" — {e.detail}" if e.detail else ""
    return f"{e.metric}{steps}: {obs}{vs}{detail}"


def explained_findings(report: HealthReport) -> list[Finding]:
    """The warning/critical symptoms another finding explains: shown, never tagged or counted."""
    return [f for f in report.findings if f.is_explained]


def explained_text(f: Finding) -> str:
    return f"explained by {f.explained_by}"


def by_score(reports: Sequence[HealthReport]) -> list[HealthReport]:
    """Worst score first; runs without a score last (in their given order)."""
    return sorted(reports, key=lambda r: (r.score is None, r.score if r.score is not None else 0))


def status_counts(reports: Sequence[HealthReport]) -> str:
    """``3 run(s): 1 error, 0 critical, 1 warning, 1 healthy`` — only `ok` counts as healthy;
    error and unknown are named when there are any."""
    count = Counter(r.status for r in reports)
    parts = [f"{count[s]} {s}" for s in (ERROR, UNKNOWN) if count[s]]
    parts += [f"{count[CRITICAL]} critical", f"{count[WARNING]} warning", f"{count[OK]} healthy"]
    return f"{len(reports)} run(s): " + ", ".join(parts)


_ROW_REASON = 240  # characters of the status reason on a table row; the run's section has it whole


def _short(text: str, limit: int = _ROW_REASON) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_json(reports: Sequence[HealthReport], errors: Sequence[dict[str, Any]] = (), full: bool = False, summary: dict | None = None,
            sweeps: Sequence[SweepSummary] = ()) -> str:
    doc: dict[str, Any] = {"runs": [r.to_dict(full=full) for r in reports], "errors": list(errors)}
    if summary is not None:
        doc["summary"] = summary
    if sweeps:
        doc["sweeps"] = [s.to_dict() for s in sweeps]
    return json.dumps(doc, indent=2, allow_nan=False)


def group_line(r: HealthReport) -> str | None:
    """What the run was compared with, in words (None: analysed alone)."""
    g = r.group
    if not g or g.get("size", 1) < 2:
        return None
    base = f"baseline {g['baseline_name']} ({g['rule']})" if g.get("baseline_name") else f"no baseline: {g.get('reason', '')}"
    return f"compared with group {g['label']} ({g['size']} runs), {base}"


def sweep_lines(sweeps: Sequence[SweepSummary], markdown: bool = False) -> list[str]:
    """The sweeps' patterns, a line per sweep and one per pattern under it (``markdown``: a nested
    list, the text escaped: the job summary and the W&B report)."""
    esc = _md_escape if markdown else str
    lines = []
    for s in sweeps:
        head = f"sweep {s.group} ({s.runs} runs):" + ("" if s.associations else " no configuration value goes with a finding")
        lines.append(f"- {esc(head)}" if markdown else head)
        lines.extend(f"  - {esc(a.sentence())}" for a in s.associations)
    return lines


def to_table(reports: Sequence[HealthReport], errors: Sequence[dict[str, Any]] = (), verbose: bool = True,
             sweeps: Sequence[SweepSummary] = ()) -> str:
    lines = []
    width = max([len(r.run.name or r.run.id) for r in reports] + [3])
    width = min(width, 48)
    head = f"{'run':<{width}}  {'score':>5}  " + "  ".join(f"{_SHORT[d]:>4}" for d in DIMENSIONS) + "  status    findings"
    lines.append(head)
    lines.append("-" * len(head))
    reports = by_score(reports)
    for r in reports:
        name = (r.run.name or r.run.id)[:width]
        dims = "  ".join(f"{_num(r.scores.get(d)):>4}" for d in DIMENSIONS)
        ids = ", ".join(f.id for f in r.problems) or "-"
        reason = f"  ({_short(r.status_reason)})" if r.status in (ERROR, UNKNOWN) and r.status_reason else ""
        lines.append(f"{name:<{width}}  {_num(r.score):>5}  {dims}  {r.status:<8}  {ids}{reason}")
    if verbose:
        for r in reports:
            failed = r.status in (ERROR, UNKNOWN)
            explained = explained_findings(r)
            if not r.problems and not explained and not r.notes and not failed:
                continue
            lines.append("")
            # A local run says which file it came from: two runs can share a name (every HF output has one).
            where = r.run.source if r.run.source else f"{r.run.tracker}: {r.run.project}/{r.run.id}"
            lines.append(f"== {r.run.name or r.run.id}  ({where})")
            if group_line(r):
                lines.append(f"  {group_line(r)}")
            if failed:
                lines.append(f"  [{r.status.upper()}] {r.status_reason}")
            for f in r.problems:
                lines.append(f"  [{f.level.upper()}] {f.id}: {f.message}")
                for e in f.evidence:
                    lines.append(f"      · {evidence_line(e)}")
                lines.append(f"      fix: {f.recommendation}")
            for f in explained:
                lines.append(f"  ({f.level}) {f.id}: {explained_text(f)}: {f.message}")
            for note in r.notes:
                lines.append(f"  note: {note}")
    if sweeps:
        lines.append("")
        lines.extend(sweep_lines(sweeps))
    for err in errors:
        lines.append(f"error: {err.get('source', '?')}: {err.get('message', '')}")
    lines.append("")
    lines.append("dimensions: conv=convergence_speed stab=stability grad=gradient_health res=resource_efficiency ovf=overfitting_risk (0-100, higher is healthier; — = not logged)")
    return "\n".join(lines)


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]|#!~"})


def _md_escape(text: str) -> str:
    """Untrusted text as literal Markdown: no links, emphasis, code spans or raw HTML from a run name."""
    return text.translate(_MD_SPECIAL).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _md_url(url: str | None, allow_relative: bool = False) -> str | None:
    """A link target safe to put in Markdown: http(s) (or a relative path), with spaces and
    parentheses percent-encoded so the link cannot be broken out of."""
    if not url:
        return None
    url = str(url).strip()
    scheme = url.split(":", 1)[0].lower() if ":" in url.split("/", 1)[0] else ""
    if scheme not in ("http", "https") and not (allow_relative and not scheme and not url.startswith("//")):
        return None
    if any(ord(c) < 32 for c in url):
        return None
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")


def to_markdown(reports: Sequence[HealthReport], errors: Sequence[dict[str, Any]] = (),
                dashboard_links: dict[str, str] | None = None, sweeps: Sequence[SweepSummary] = ()) -> str:
    """Markdown summary (e.g. a GitHub Actions job summary). ``dashboard_links`` maps a run id to
    its dashboard (a relative path or URL) and adds a dashboard column."""
    links = dashboard_links or {}
    out = ["## Training health", ""]
    out.append(status_counts(reports) + ".")
    out.append("")
    dash_col = " dashboard |" if links else ""
    out.append("| run | score | " + " | ".join(DIMENSIONS) + " | status | findings |" + dash_col)
    out.append("|---|---:|" + "---:|" * len(DIMENSIONS) + "---|---|" + ("---|" if links else ""))
    for r in by_score(reports):
        name = _md_escape(r.run.name or r.run.id)
        url = _md_url(r.run.url)
        if url:
            name = f"[{name}]({url})"
        dims = " | ".join(_num(r.scores.get(d)) for d in DIMENSIONS)
        ids = ", ".join(f"`{f.id}`" for f in r.problems) or "—"
        status = r.status
        if r.status in (ERROR, UNKNOWN) and r.status_reason:
            status = f"**{r.status}**: {_md_escape(_short(r.status_reason))}"
        dash = ""
        if links:
            target = _md_url(links.get(r.run.id), allow_relative=True)
            dash = f" [dashboard]({target}) |" if target else " — |"
        out.append(f"| {name} | {_num(r.score)} | {dims} | {status} | {ids} |{dash}")
    for r in reports:
        failed = r.status in (ERROR, UNKNOWN)
        explained = explained_findings(r)
        if not r.problems and not explained and not failed:
            continue
        out.append("")
        out.append(f"### {_md_escape(r.run.name or r.run.id)}")
        if group_line(r):
            out.append(f"- {_md_escape(group_line(r))}")
        if failed:
            out.append(f"- **{r.status}** — {_md_escape(r.status_reason)}")
        for f in r.problems:
            out.append(f"- **{f.level}** `{f.id}` — {_md_escape(f.message)}")
            for e in f.evidence:
                out.append(f"  - {_md_escape(evidence_line(e))}")
            out.append(f"  - *Fix:* {_md_escape(f.recommendation)}")
        for f in explained:
            out.append(f"- ({f.level}) `{f.id}` — {_md_escape(explained_text(f))}: {_md_escape(f.message)}")
    if sweeps:
        out.append("")
        out.append("### Sweeps")
        out.extend(sweep_lines(sweeps, markdown=True))
    if errors:
        out.append("")
        out.append("### Errors")
        for err in errors:
            out.append(f"- `{_md_escape(str(err.get('source', '?')))}`: {_md_escape(str(err.get('message', '')))}")
    return "\n".join(out) + "\n"


def render(fmt: str, reports: Sequence[HealthReport], errors: Sequence[dict[str, Any]] = (),
           sweeps: Sequence[SweepSummary] = (), **kw) -> str:
    if fmt == "json":
        return to_json(reports, errors, sweeps=sweeps, **kw)
    if fmt == "markdown":
        return to_markdown(reports, errors, sweeps=sweeps)
    return to_table(reports, errors, sweeps=sweeps)
