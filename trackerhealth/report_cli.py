"""``trackerhealth report``: interactive HTML health dashboards for local training logs.

Registered into the main group by the CLI (``main.add_command(report)``); it imports nothing from
the CLI module, so either can be imported first.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .writers import formats

EXIT_OK, EXIT_USAGE = 0, 2
HTML_SUFFIXES = (".html", ".htm")


def _die(message: str, code: int = EXIT_USAGE) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


@click.command("report", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--html", "html_path", required=True, type=click.Path(path_type=Path), metavar="PATH",
              help="Where to write: a .html file for one run, or a folder for several "
                   "(one dashboard per run under runs/, plus index.html and summary.md).")
@click.option("--markdown", "markdown_path", type=click.Path(path_type=Path), default=None, metavar="PATH",
              help="Also write the Markdown summary here, e.g. \"$GITHUB_STEP_SUMMARY\" in GitHub Actions.")
@click.option("--config", "config_path", type=click.Path(), default=None,
              help="trackerhealth.toml to use (default: ./trackerhealth.toml or [tool.trackerhealth] in ./pyproject.toml).")
@click.option("--step-column", default=None, help="Name of the step column in wide tables, when it is not step/global_step/iteration.")
def report(paths, html_path, markdown_path, config_path, step_column) -> None:
    """Write interactive health dashboards for training logs (any input `analyze` takes).

    Each dashboard is one self-contained HTML file (works offline, no external request): the score
    card, the findings with fixes, and four panels (loss, per-layer gradient norms, learning rate and
    momentum, GPU utilization and step time), with every finding drawn where it happened.

    \b
    Examples:
      trackerhealth report run.parquet --html run.html
      trackerhealth report mlruns/0 runs/*.csv --html health/        # health/index.html + one page per run
      trackerhealth report logs/ --html health/ --markdown "$GITHUB_STEP_SUMMARY"
    """
    from .adapters.files import read_paths
    from .config import ConfigError, load
    from .engine import analyze
    from .writers import dashboard

    try:
        config = load(config_path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        dashboard.require_plotly()
    except dashboard.DashboardDependencyError as exc:
        _die(str(exc))

    histories, errors = read_paths(paths, step_column=step_column)
    runs = [(h, analyze(h, config)) for h in histories]

    if not runs:
        for err in errors:
            click.echo(f"error: {err['source']}: {err['message']}", err=True)
        _die("no run could be read, so no dashboard was written")

    single_file = html_path.suffix.lower() in HTML_SUFFIXES and not html_path.is_dir()
    if single_file and len(runs) > 1:
        _die(f"{len(runs)} runs were read but --html {html_path} is one file; give a folder instead "
             f"(e.g. --html {html_path.with_suffix('')}/) to get one dashboard per run and an index.html overview")
    reports = [r for _, r in runs]
    if single_file:
        history, rep = runs[0]
        dashboard.write_run_dashboard(html_path, history, rep, config)
        links = {rep.run.id: html_path.name}
        click.echo(formats.to_table(reports, errors, verbose=False))
        click.echo(f"wrote {html_path}")
    else:
        written = dashboard.write_report_dir(html_path, runs, config, errors=errors)
        links = {rid: str(p.relative_to(html_path)) for rid, p in written.items() if rid not in ("index", "summary")}
        click.echo(formats.to_table(reports, errors, verbose=False))
        click.echo(f"wrote {len(runs)} dashboard(s) and the overview {written['index']}")
    if markdown_path is not None:
        text = formats.to_markdown(reports, errors, dashboard_links=links)
        with open(markdown_path, "a" if str(markdown_path) == _step_summary() else "w", encoding="utf-8") as fh:
            fh.write(text)
        click.echo(f"wrote {markdown_path}")
    if errors:
        sys.exit(EXIT_USAGE)


def _step_summary() -> str:
    """GitHub's job summary file is appended to, never replaced (other steps write to it too)."""
    import os

    return os.environ.get("GITHUB_STEP_SUMMARY", "\0")
