"""``trackerhealth report``: interactive HTML health dashboards for local training logs.

Loaded by the CLI's lazy group (``trackerhealth.cli.LAZY_COMMANDS``); nothing but click at module
level, so ``report --help`` stays fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from . import exit_codes
from .cli_common import (
    CONTEXT,
    check_group_options,
    config_option,
    die,
    echo_errors,
    fail_on_option,
    file_group_options,
    grouped_reports,
    load_config,
    loss_key_option,
    writable_file,
    write_failed,
)

HTML_SUFFIXES = (".html", ".htm")


@click.command("report", context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
# A str, not a Path: a trailing "/" (meaning "a folder") would be lost in a Path.
@click.option("--html", "html_arg", required=True, type=click.Path(), metavar="PATH",
              help="Where to write: a .html file for one run, or a folder for several "
                   "(one dashboard per run under runs/, plus index.html and summary.md).")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path), default=None, metavar="PATH",
              help="Also write the Markdown summary here, e.g. \"$GITHUB_STEP_SUMMARY\" in GitHub Actions.")
@fail_on_option
@loss_key_option
@config_option
@click.option("--step-column", default=None, help="Name of the step column in wide tables, when it is not step/global_step/iteration.")
@file_group_options
def report(paths, html_arg, markdown_path, fail_on, loss_key, config_path, step_column, group_by, baselines) -> None:
    """Write interactive health dashboards for training logs (any input `analyze` takes).

    Each dashboard is one self-contained HTML file (works offline, no external request): the score
    card, the findings with fixes, and four panels (loss, per-layer gradient norms, learning rate and
    momentum, GPU utilization and step time), with every finding drawn where it happened.

    \b
    Examples:
      trackerhealth report run.parquet --html run.html
      trackerhealth report mlruns/0 runs/*.csv --html health/        # health/index.html + one page per run
      trackerhealth report logs/ --html health/ --markdown "$GITHUB_STEP_SUMMARY" --fail-on never
      trackerhealth report runs/ --group-by folder --html health/     # each page draws its group's baseline

    \b
    Exit codes: 0 healthy; 1 a run at or above --fail-on; 2 usage or input error (a file that
    cannot be read or written), or a run whose analysis failed.
    """
    from .adapters.files import read_paths
    from .engine import analyze
    from .writers import dashboard, formats

    config = load_config(config_path, loss_key)
    html_path, single_file = _html_target(html_arg)
    if markdown_path is not None:
        writable_file(markdown_path, "--markdown")
    try:
        dashboard.require_plotly()
    except dashboard.DashboardDependencyError as exc:
        die(str(exc))

    check_group_options(group_by, baselines)
    histories, errors = read_paths(paths, step_column=step_column)
    sweeps = ()
    if group_by:
        grouped, sweeps = grouped_reports(histories, config, group_by, baselines)
        runs = list(zip(histories, grouped))
    else:
        runs = [(h, analyze(h, config)) for h in histories]

    if not runs:
        echo_errors(errors)
        die("no run could be read, so no dashboard was written")

    if single_file and len(runs) > 1:
        die(f"{len(runs)} runs were read but --html {html_path} is one file; give a folder instead "
            f"(e.g. --html {html_path.with_suffix('')}/) to get one dashboard per run and an index.html overview")
    reports = [r for _, r in runs]
    try:
        if single_file:
            history, rep = runs[0]
            dashboard.write_run_dashboard(html_path, history, rep, config)
            links = {rep.run.id: html_path.name}
            wrote = f"wrote {html_path}"
        else:
            written = dashboard.write_report_dir(html_path, runs, config, errors=errors, sweeps=sweeps)
            links = {rid: str(p.relative_to(html_path)) for rid, p in written.items() if rid not in ("index", "summary")}
            wrote = f"wrote {len(runs)} dashboard(s) and the overview {written['index']}"
    except OSError as exc:
        write_failed(html_path, exc, "--html")
    click.echo(formats.to_table(reports, (), verbose=False))
    click.echo(wrote)
    if markdown_path is not None:
        text = formats.to_markdown(reports, errors, dashboard_links=links)
        try:
            with open(markdown_path, "a" if str(markdown_path) == _step_summary() else "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            write_failed(markdown_path, exc, "--markdown")
        click.echo(f"wrote {markdown_path}")
    echo_errors(errors)
    sys.exit(exit_codes.for_reports(reports, fail_on, input_errors=bool(errors)))


def _html_target(text: str) -> tuple[Path, bool]:
    """(the path, whether it is one file) for ``--html``, or a message naming the fix.

    A name ending in .html/.htm that is not an existing folder is one file; anything else (a name
    ending in "/", an existing folder, a name without that suffix) is a folder for one page per run.
    """
    path = Path(text)
    wants_folder = text.endswith(("/", os.sep)) or path.is_dir() or path.suffix.lower() not in HTML_SUFFIXES
    if wants_folder:
        if path.exists() and not path.is_dir():
            die(f"--html {text} is an existing file, not a folder; give a folder (new or existing) for one "
                f"dashboard per run, or a file name ending in .html for one run")
        return path, False
    return path, True


def _step_summary() -> str:
    """GitHub's job summary file is appended to, never replaced (other steps write to it too)."""
    return os.environ.get("GITHUB_STEP_SUMMARY", "\0")
