"""``trackerhealth summary``: the Markdown summary (and the HTML overview) of a saved JSON report,
and, with ``--github``, the GitHub Actions job summary and step outputs.

This is what the Action's report step runs (action.yml); it holds no analysis: it reads what
``trackerhealth scan --format json`` (or ``analyze``) wrote. Loaded by the CLI's lazy group.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

import click

from . import exit_codes
from .cli_common import CONTEXT, die, write_failed

# The outputs the Action declares (action.yml `outputs:`), written to $GITHUB_OUTPUT by --github.
# `unknown` and `error` are counted apart: a run that could not be judged is never hidden among the healthy.
GITHUB_OUTPUTS = ("runs-scanned", "critical", "warning", "unknown", "error", "report-path")


@click.command("summary", context_settings=CONTEXT)
@click.argument("report_json", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--exit-code", "scan_exit_code", type=click.IntRange(0, 255), default=None, metavar="N",
              help="The exit code of the command that wrote REPORT_JSON. When it is not 0 or 1 the summary "
                   "says so, and a missing or empty REPORT_JSON is reported as a scan that did not finish.")
@click.option("--log", "log_path", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="PATH",
              help="That command's stderr, saved: its last 'Error:' lines go into the summary when the scan "
                   "did not finish.")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path), default=None, metavar="PATH",
              help="Write the Markdown summary here (default: stdout, unless --github).")
@click.option("--html", "html_path", type=click.Path(path_type=Path), default=None, metavar="PATH",
              help="Write the HTML overview of every run here (needs no plotly).")
@click.option("--github", is_flag=True,
              help="In GitHub Actions: append the summary to $GITHUB_STEP_SUMMARY, write the outputs "
                   "runs-scanned, critical, warning, unknown, error and report-path to $GITHUB_OUTPUT, and print the table "
                   "to the log (run names can never act as workflow commands).")
def summary(report_json, scan_exit_code, log_path, markdown_path, html_path, github) -> None:
    """Summarise a saved JSON report as Markdown, an HTML overview, or a GitHub job summary.

    \b
    Examples:
      trackerhealth scan -e my-team --format json > report.json; trackerhealth summary report.json
      trackerhealth analyze logs/ --format json > report.json; trackerhealth summary report.json --html index.html
      trackerhealth summary out/report.json --exit-code "$rc" --log out/scan.log --github   # in a workflow

    Exits 0 when the summary was written (the scan's own exit code is the verdict), 2 when
    REPORT_JSON cannot be read and no --exit-code says why.
    """
    from .writers import formats

    doc = _load(report_json)
    if doc is None and scan_exit_code is None:
        die(f"{report_json} is not a trackerhealth JSON report (missing, empty or not JSON); write one with "
            "`trackerhealth scan --format json > report.json`, or pass --exit-code with the scan's exit code")
    if doc is not None:
        reports, errors = read_report(doc)
        markdown = formats.to_markdown(reports, errors)
        statuses = [str(r.get("status", "")) for r in doc.get("runs", ())]
    else:
        reports, errors, statuses = [], [], []
        markdown = _did_not_finish(scan_exit_code, log_path)
    if scan_exit_code not in (None, exit_codes.OK, exit_codes.FINDINGS):
        markdown += (f"\n_The scan exited {scan_exit_code}: {_meaning(scan_exit_code)}; the Scan step's log has "
                     "the details._\n")

    if markdown_path is not None:
        _write(markdown_path, markdown, "--markdown")
    if html_path is not None:
        from .writers.dashboard import render_overview_html

        _write(html_path, render_overview_html(reports, {}, title="Training health", errors=errors), "--html")
    if github:
        _to_github(report_json, markdown, reports, errors, statuses)
    elif markdown_path is None:
        click.echo(markdown, nl=False)


def read_report(doc: dict[str, Any]):
    """(HealthReports, errors) from the contract's JSON (``--format json``); the counts in the
    outputs are taken from each run's ``status`` as written, never recomputed."""
    from .schema import HealthReport

    try:
        return [HealthReport.from_dict(r) for r in doc.get("runs", ())], list(doc.get("errors", ()))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        die(f"the JSON report does not follow trackerhealth's format ({type(exc).__name__}: {exc}); "
            "write it with `trackerhealth scan --format json` or `trackerhealth analyze --format json`")


def _load(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8") or "null")
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _meaning(code: int) -> str:
    return exit_codes.MEANING.get(code, "failed")


def _did_not_finish(code: int, log_path: Path | None) -> str:
    import html

    problem: list[str] = []
    if log_path is not None and log_path.is_file():
        text = log_path.read_text(encoding="utf-8", errors="replace")
        problem = [line[len("Error: "):] for line in text.splitlines() if line.startswith("Error: ")]
    shown = f"\n<pre>{html.escape(chr(10).join(problem[-3:]), quote=False)}</pre>\n" if problem else ""
    return f"## Training health\n\nThe scan did not finish: exit code {code} ({_meaning(code)}).\n{shown}"


def _write(path: Path, text: str, option: str) -> None:
    if path.is_dir():
        die(f"{option} {path} is a folder; give a file name inside it")
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        write_failed(path, exc, option)


def _to_github(report_json: Path, markdown: str, reports, errors, statuses: list[str]) -> None:
    from .writers import formats

    missing = [v for v in ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT") if not os.environ.get(v)]
    if missing:
        die(f"--github writes to {' and '.join('$' + v for v in missing)}, which GitHub Actions sets; "
            "outside a workflow leave --github out (the summary then goes to stdout or --markdown)")
    _append(Path(os.environ["GITHUB_STEP_SUMMARY"]), markdown, "$GITHUB_STEP_SUMMARY")
    if reports or errors:
        # Run names are written by whoever logs runs: between stop-commands they are inert text.
        token = secrets.token_hex(16)
        click.echo(f"::stop-commands::{token}\n{formats.to_table(reports, errors)}\n::{token}::")
    outputs = {"runs-scanned": len(statuses), "critical": statuses.count("critical"),
               "warning": statuses.count("warning"), "unknown": statuses.count("unknown"),
               "error": statuses.count("error"), "report-path": str(report_json.absolute().parent)}
    _append(Path(os.environ["GITHUB_OUTPUT"]), "".join(f"{k}={outputs[k]}\n" for k in GITHUB_OUTPUTS),
            "$GITHUB_OUTPUT")


def _append(path: Path, text: str, what: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        die(f"could not write {what} ({path}): {exc.strerror or exc}")
