"""``trackerhealth scan``: scan tracked runs and write their health back (MLflow today).

Registered into the main group by the CLI (``main.add_command(scan)``); it imports the CLI module
only inside the command, so either module can be imported first.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .writers import formats

__all__ = ["scan"]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
FAIL_ON = ("critical", "warning", "never")


def _die(message: str, code: int) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


class _Progress:
    """One self-rewriting line on stderr: runs done, points, failures."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.shown = False

    def __call__(self, done: int, total: int, summary) -> None:
        if not self.enabled:
            return
        width = 24
        filled = width * done // max(total, 1)
        bar = "#" * filled + "." * (width - filled)
        text = (f"\r[{bar}] {done}/{total} runs · {summary.points:,} points · "
                f"{summary.critical} critical · {summary.failed} failed ")
        click.echo(text, err=True, nl=False)
        self.shown = True

    def finish(self) -> None:
        if self.shown:
            click.echo("", err=True)


@click.command("scan", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--mlflow-uri", envvar="MLFLOW_TRACKING_URI", metavar="URI",
              help="Tracking server (http://host:5000), database (sqlite:///…, postgresql://…) or file store "
                   "(./mlruns). Default: $MLFLOW_TRACKING_URI. Auth: MLFLOW_TRACKING_TOKEN or "
                   "MLFLOW_TRACKING_USERNAME/PASSWORD.")
@click.option("--experiment", "-e", "experiments", multiple=True, metavar="NAME_OR_ID",
              help="Experiment to scan, by name or id (repeatable).")
@click.option("--filter", "filter_string", metavar="EXPR",
              help="MLflow search filter, e.g. \"params.optimizer = 'adam' and tags.team = 'nlp'\" (no OR).")
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID", help="A run to scan, by id (repeatable).")
@click.option("--since", metavar="WHEN",
              help="Only runs started, ended or still running since WHEN: 30m, 2h, 7d or an ISO date/time.")
@click.option("--format", "fmt", type=click.Choice(formats.FORMATS), default="table", show_default=True,
              help="Report format on stdout (the summary goes to stderr).")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="critical", show_default=True,
              help="Exit 1 when a finding at or above this level is found.")
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Requests in flight (match the server's --workers).")
@click.option("--config", "config_path", type=click.Path(), default=None,
              help="trackerhealth.toml to use (default: ./trackerhealth.toml or [tool.trackerhealth] in ./pyproject.toml).")
@click.option("--cache-dir", type=click.Path(path_type=Path), envvar="TRACKERHEALTH_CACHE_DIR", default=None,
              help="History cache (default: the user cache dir, e.g. ~/.cache/trackerhealth; keep it in your CI cache).")
@click.option("--no-cache", is_flag=True, help="Fetch every history in full; read and write no cache.")
@click.option("--dry-run", is_flag=True, help="Report only: write no tags or artifacts, send no alerts.")
@click.option("--alert-webhook", envvar="TRACKERHEALTH_ALERT_WEBHOOK", metavar="URL",
              help="Slack-compatible webhook for each newly critical finding (default: $TRACKERHEALTH_ALERT_WEBHOOK).")
@click.option("--mlflow-ui-url", envvar="TRACKERHEALTH_MLFLOW_UI_URL", metavar="URL",
              help="MLflow UI to link to from alerts and reports, when --mlflow-uri is not the server itself.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: only when stderr is a terminal).")
@click.option("--full", is_flag=True, help="In JSON, include ok, skipped and error findings too.")
def scan(mlflow_uri, experiments, filter_string, run_ids, since, fmt, fail_on, workers, config_path, cache_dir,
         no_cache, dry_run, alert_webhook, mlflow_ui_url, progress, full) -> None:
    """Scan MLflow runs, write their health back onto each run, alert on new critical findings.

    Each run gets tags trackerhealth.status (ok/warning/critical), trackerhealth.findings,
    trackerhealth.score and trackerhealth.scanned_at, and artifacts under trackerhealth/
    (report.json, and the dashboard). In the MLflow UI, filter with
    tags.trackerhealth.status = 'critical'. Histories are cached, so a scheduled scan downloads
    only new steps. Other tags, params, metrics, status and end time are never touched.

    \b
    Examples:
      trackerhealth scan --mlflow-uri http://mlflow.internal:5000 --experiment my-team
      trackerhealth scan -e my-team -e 12 --since 2h --alert-webhook "$SLACK_WEBHOOK_URL"
      trackerhealth scan -e my-team --filter "params.optimizer = 'adam'" --format json > health.json
      trackerhealth scan --mlflow-uri sqlite:////srv/mlflow/mlflow.db -e my-team \\
          --mlflow-ui-url http://mlflow.internal:5000
      trackerhealth scan --mlflow-uri ./mlruns -e Default --dry-run --format markdown
      trackerhealth scan --run 1455c5d579de434490f60138d67492de --dry-run

    \b
    Exit codes: 0 healthy; 1 a finding at or above --fail-on; 2 usage or configuration error,
    or a run that could not be scanned or written; 3 tracker unreachable.
    """
    from .adapters.mlflow import (
        ApiError,
        MlflowAdapter,
        MlflowMissing,
        SelectionError,
        TrackerUnreachable,
    )
    from .cli import fails
    from .config import ConfigError, load
    from .scan import scan as run_scan
    from .writers.alerts import WebhookSender

    try:
        config = load(config_path)
    except ConfigError as exc:
        _die(str(exc), EXIT_USAGE)
    try:
        sender = WebhookSender.from_env(alert_webhook) if alert_webhook else None
    except ValueError as exc:
        _die(f"{exc}; pass the webhook's full https:// URL to --alert-webhook", EXIT_USAGE)
    try:
        adapter = MlflowAdapter(
            mlflow_uri, experiments=experiments, filter_string=filter_string, run_ids=run_ids, since=since,
            cache_dir=None if no_cache else (cache_dir if cache_dir is not None else _default()),
            workers=workers, ui_url=mlflow_ui_url)
    except SelectionError as exc:
        _die(str(exc), EXIT_USAGE)

    show = progress if progress is not None else _isatty(sys.stderr)
    bar = _Progress(bool(show))
    try:
        writer = adapter.writer(alert=sender, config=config)
        result = run_scan(adapter, writer, config, workers=workers, dry_run=dry_run, progress=bar)
    except MlflowMissing as exc:
        _die(str(exc), EXIT_USAGE)
    except SelectionError as exc:
        _die(str(exc), EXIT_USAGE)
    except TrackerUnreachable as exc:
        _die(str(exc), EXIT_UNREACHABLE)
    except ApiError as exc:
        if exc.status in (401, 403) or 400 <= exc.status < 500:
            _die(f"{adapter.uri.redacted}: {exc}", EXIT_USAGE)
        _die(f"{adapter.uri.redacted} failed while listing runs: {exc}; check the server's logs", EXIT_UNREACHABLE)
    finally:
        bar.finish()
        adapter.close()

    extra = {"full": full, "summary": {**result.summary.to_dict(), "skipped": result.skipped}} if fmt == "json" else {}
    click.echo(formats.render(fmt, result.reports, result.errors, **extra))
    for note in getattr(writer, "notes", ()):
        click.echo(f"note: {note}", err=True)
    for item in result.skipped:
        click.echo(f"skipped {item['source']} ({item['run_id']}): {item['reason']}", err=True)
    click.echo(result.summary.line(), err=True)
    if result.unreachable:
        sys.exit(EXIT_UNREACHABLE)
    if result.errors:
        sys.exit(EXIT_USAGE)
    if fails(result.reports, fail_on):
        sys.exit(EXIT_FINDINGS)


def _default():
    from .adapters.mlflow import default_cache_dir

    return default_cache_dir()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
