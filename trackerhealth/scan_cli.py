"""``trackerhealth scan``: scan W&B or MLflow runs and write their health back (or report on local W&B folders).

Loaded by the CLI's lazy group (``trackerhealth.cli.LAZY_COMMANDS``); it imports nothing from the
CLI module, and nothing but click at module level, so ``scan --help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from . import exit_codes
from .cli_common import (
    CONTEXT,
    FORMATS,
    config_option,
    echo_errors,
    fail_on_option,
    load_config,
    loss_key_option,
    render,
    wall_seconds,
)
from .cli_common import die as _die

__all__ = ["scan"]


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
        """End the progress line (once, however often it is called)."""
        if self.shown:
            click.echo("", err=True)
            self.shown = False


def _ui_url(ctx, param, value):
    if value is None:
        return None
    from .adapters.base import SelectionError
    from .adapters.mlflow import check_ui_url

    try:
        return check_ui_url(value)
    except SelectionError as exc:
        raise click.BadParameter(str(exc).removeprefix("--mlflow-ui-url "), ctx, param) from None


@click.command("scan", context_settings=CONTEXT)
@click.option("--project", "--wandb-project", "wandb_projects", multiple=True, metavar="ENTITY/PROJECT",
              help="W&B project to scan through the W&B API (WANDB_API_KEY; WANDB_BASE_URL for W&B Server; "
                   "repeatable).")
@click.option("--entity", "entities", multiple=True, metavar="ENTITY",
              help="W&B: scan every project of this entity (repeatable).")
@click.option("--wandb-dir", "wandb_dirs", multiple=True, type=click.Path(path_type=Path), metavar="PATH",
              help="Local W&B run folders to scan instead (a wandb/ folder or run folders; repeatable). "
                   "No network; nothing is written.")
@click.option("--mlflow-uri", envvar="MLFLOW_TRACKING_URI", metavar="URI",
              help="Tracking server (http://host:5000), database (sqlite:///…, postgresql://…) or file store "
                   "(./mlruns). Default: $MLFLOW_TRACKING_URI. Auth: MLFLOW_TRACKING_TOKEN or "
                   "MLFLOW_TRACKING_USERNAME/PASSWORD.")
@click.option("--experiment", "-e", "experiments", multiple=True, metavar="NAME_OR_ID",
              help="Experiment to scan, by name or id (repeatable: each is its own project in the summary).")
@click.option("--all-experiments", is_flag=True, help="MLflow: scan every active experiment of the store.")
@click.option("--filter", "filter_string", metavar="EXPR",
              help="MLflow: a search filter, e.g. \"params.optimizer = 'adam'\" (no OR). W&B: filter JSON, "
                   "e.g. '{\"config.optimizer\": \"adam\"}'.")
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID", help="A run to scan, by id (repeatable).")
@click.option("--since", metavar="WHEN",
              help="Only runs active since WHEN: 30m, 2h, 7d or an ISO date/time (MLflow: started, ended or "
                   "running; W&B: updated).")
@click.option("--state", "states", multiple=True, metavar="STATE",
              help="W&B: only runs in this state (running, finished, crashed, failed, killed; repeatable).")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="W&B: only runs with this tag (repeatable: any).")
@click.option("--all-runs", is_flag=True,
              help="W&B: list every selected run, not only those updated since the last scan (the cache's).")
@click.option("--no-wandb-alerts", is_flag=True, help="W&B: send no W&B alerts (a --alert-webhook still gets them).")
@click.option("--no-report", is_flag=True, help="W&B: do not create or update the project's 'Training health' report.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="Report format on stdout (the summary goes to stderr).")
@fail_on_option
@loss_key_option
@click.option("--timeout", type=click.FloatRange(1, 3600), default=None, metavar="SECONDS",
              help="Longest wait for one tracker request, retries included (default 30; $TRACKERHEALTH_TIMEOUT); "
                   "a server that does not answer in time is named and the scan exits 3.")
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True,
              help="Requests in flight (match the server's --workers); with --ray, runs in flight on the "
                   "cluster, each making one request at a time.")
@click.option("--ray", "ray_address", metavar="ADDRESS", envvar="TRACKERHEALTH_RAY_ADDRESS",
              help="Process runs as Ray tasks: local (start Ray on this machine), auto, HOST:PORT or "
                   "ray://HOST:10001 (pip install 'trackerhealth[ray]').")
@config_option
@click.option("--cache-dir", type=click.Path(path_type=Path), envvar="TRACKERHEALTH_CACHE_DIR", default=None,
              help="History cache (default: the user cache dir, e.g. ~/.cache/trackerhealth; keep it in your CI cache).")
@click.option("--no-cache", is_flag=True, help="Fetch every history in full; read and write no cache.")
@click.option("--reanalyze", is_flag=True,
              help="Analyse and write every run again, also those unchanged since the last scan (the history "
                   "cache still saves the download).")
@click.option("--dry-run", is_flag=True, help="Report only: write no tags or artifacts, send no alerts.")
@click.option("--alert-webhook", envvar="TRACKERHEALTH_ALERT_WEBHOOK", metavar="URL",
              help="Slack-compatible webhook for each newly critical finding (default: $TRACKERHEALTH_ALERT_WEBHOOK).")
@click.option("--mlflow-ui-url", envvar="TRACKERHEALTH_MLFLOW_UI_URL", metavar="URL", callback=_ui_url,
              help="MLflow UI to link to from alerts and reports, when --mlflow-uri is not the server itself.")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: only when stderr is a terminal).")
@click.option("--full", is_flag=True, help="In JSON, include ok, skipped and error findings too.")
@click.option("--group-by", "group_by", multiple=True, metavar="KEY",
              help="Compare runs within groups of equal values of KEY (repeatable: the group is the tuple). W&B: "
                   "group, job_type, sweep, config.NAME; MLflow: params.NAME, tags.NAME, parent. Default: W&B's group "
                   "(else sweep), MLflow's parent run.")
@click.option("--baseline", "baselines", multiple=True, metavar="RUN_ID",
              help="The run (id or name) its group is compared with (repeatable: one per group); else a run tagged "
                   "trackerhealth:baseline (W&B) or trackerhealth.baseline=true (MLflow), else the group's healthiest "
                   "finished run.")
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Also write an overview of the scanned runs to DIR/index.html (and DIR/summary.md): runs by group, "
                   "their scores and findings, the sweeps; each row links to the run in its tracker, where its dashboard is.")
def scan(wandb_projects, entities, wandb_dirs, mlflow_uri, experiments, all_experiments, filter_string, run_ids, since,
         states, tags, all_runs, no_wandb_alerts, no_report, fmt, fail_on, loss_key, workers, ray_address, config_path,
         cache_dir, no_cache, reanalyze, dry_run, alert_webhook, mlflow_ui_url, progress, full, timeout, group_by,
         baselines, report_dir) -> None:
    """Scan W&B or MLflow runs, write their health back onto each run, alert on new critical findings.

    W&B (--project ENTITY/PROJECT): each run gets tags health:ok or health:<diagnosis>, summary
    keys trackerhealth/score and trackerhealth/<dimension>, the file trackerhealth/dashboard.html,
    and a W&B alert for each new critical finding; the project gets a "Training health" report.
    In the runs table, filter by tag health:overfitting or sort by trackerhealth/score. Only runs
    updated since the last scan are listed (--all-runs for every run).

    MLflow (--mlflow-uri / --experiment): each run gets tags trackerhealth.status
    (ok/warning/critical), trackerhealth.findings, trackerhealth.score and
    trackerhealth.scanned_at, and artifacts under trackerhealth/ (report.json, the dashboard).
    In the MLflow UI, filter runs with:

    \b
      tags.trackerhealth.status = 'critical'

    Histories are cached, so a scheduled scan downloads only new steps, and a run unchanged since
    the last scan keeps its report (counted as reused: nothing fetched, analysed or written).
    Nothing else on a run (other tags, config, params, metrics, state) is ever touched.

    Fleets: --project and --experiment repeat, --entity scans every project of a W&B entity,
    --all-experiments every MLflow experiment; one summary, and one project's failure is that
    project's. --ray runs each run's fetch, analysis and write as a Ray task on a cluster.

    \b
    Examples:
      trackerhealth scan --project my-team/llm-pretrain
      trackerhealth scan --project my-team/llm-pretrain --state running --since 1d --dry-run
      trackerhealth scan --project my-team/llm-pretrain --filter '{"config.optimizer": "adam"}'
      trackerhealth scan --wandb-dir ./wandb --format markdown
      trackerhealth scan --mlflow-uri http://mlflow.internal:5000 --experiment my-team
      trackerhealth scan -e my-team -e 12 --since 2h --alert-webhook "$SLACK_WEBHOOK_URL"
      trackerhealth scan -e my-team --filter "params.optimizer = 'adam'" --format json > health.json
      trackerhealth scan --mlflow-uri sqlite:////srv/mlflow/mlflow.db -e my-team \\
          --mlflow-ui-url http://mlflow.internal:5000
      trackerhealth scan --mlflow-uri ./mlruns -e Default --dry-run --format markdown
      trackerhealth scan --run 1455c5d579de434490f60138d67492de --dry-run
      trackerhealth scan --entity my-team --ray auto --format json > fleet.json
      trackerhealth scan --mlflow-uri http://mlflow.internal:5000 --all-experiments --ray ray://head:10001
      trackerhealth scan -e my-team --group-by params.model --group-by params.dataset   # each run against its group
      trackerhealth scan --project my-team/sweeps --baseline 1x2y3z4w             # W&B groups by default
      trackerhealth scan -e my-team --group-by params.model --report-dir health/   # open health/index.html

    \b
    Exit codes: 0 healthy; 1 a run at or above --fail-on; 2 usage or configuration error, or a run
    that could not be scanned, analysed or written; 3 tracker unreachable.
    """
    from .writers.alerts import WebhookSender

    config = load_config(config_path, loss_key)
    try:
        sender = WebhookSender.from_env(alert_webhook, timeout) if alert_webhook else None
    except ValueError as exc:
        _die(f"{exc}; pass the webhook's full https:// URL to --alert-webhook", exit_codes.USAGE)
    show = progress if progress is not None else _isatty(sys.stderr)
    bar = _Progress(bool(show))
    wandb_api = bool(wandb_projects or entities)
    if wandb_api and wandb_dirs:
        _die("pass either --project/--entity (the W&B API) or --wandb-dir (local folders), not both", exit_codes.USAGE)
    if (wandb_api or wandb_dirs) and (experiments or all_experiments or mlflow_ui_url):
        _die("--experiment, --all-experiments and --mlflow-ui-url are MLflow options; a W&B scan takes --project, "
             "--entity or --wandb-dir", exit_codes.USAGE)
    if not (wandb_api or wandb_dirs) and (states or tags or all_runs or no_wandb_alerts or no_report):
        _die("--state, --tag, --all-runs, --no-wandb-alerts and --no-report are W&B options: add --project "
             "ENTITY/PROJECT", exit_codes.USAGE)
    if all_experiments and (experiments or run_ids):
        _die("--all-experiments already selects every experiment: drop --experiment/--run, or drop it",
             exit_codes.USAGE)
    if (group_by or baselines) and wandb_dirs:
        _die("--group-by and --baseline compare runs of a W&B project or an MLflow store; local W&B folders are not "
             "grouped yet: use --project ENTITY/PROJECT, or trackerhealth analyze DIR --group-by folder", exit_codes.USAGE)
    if wandb_api:
        bad = [k for k in group_by if k not in ("group", "job_type", "sweep") and not (k.startswith("config.") and k[7:])]
        if bad:
            _die(f"--group-by {bad[0]}: W&B runs group by group, job_type, sweep or config.NAME "
                 "(e.g. --group-by config.model --group-by config.dataset)", exit_codes.USAGE)
    else:
        bad = [k for k in group_by if not (k == "parent" or k.startswith(("params.", "tags.")) and len(k.split(".", 1)[1]))]
        if bad:
            _die(f"--group-by {bad[0]}: MLflow runs group by params.NAME, tags.NAME or parent "
                 "(e.g. --group-by params.model --group-by params.dataset)", exit_codes.USAGE)
    if report_dir is not None:
        try:
            report_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            _die(f"--report-dir {report_dir}: cannot create it ({exc.strerror or exc}); pass a folder you can write to",
                 exit_codes.USAGE)
    cache = None if no_cache else (cache_dir if cache_dir is not None else _default())
    job = _Job(fmt=fmt, fail_on=fail_on, workers=workers, dry_run=dry_run, full=full, bar=bar, config=config,
               cache=cache, reuse=not (no_cache or reanalyze), ray_address=ray_address, alert_webhook=alert_webhook, timeout=timeout,
               group_by=tuple(group_by) or None, baselines=tuple(baselines), report_dir=report_dir)
    if wandb_dirs:
        if filter_string or run_ids or since or states or tags:
            _die("--wandb-dir scans every run folder under the paths; selection options need --project", exit_codes.USAGE)
        if ray_address:
            _die("--wandb-dir reads folders on this machine only; scan them without --ray", exit_codes.USAGE)
        _scan_wandb_dirs(wandb_dirs, job)
    elif wandb_api:
        _scan_wandb(job, wandb_projects, entities, filter_string=filter_string, run_ids=run_ids, since=since,
                    states=states, tags=tags, all_runs=all_runs, notify=not no_wandb_alerts, report=not no_report,
                    sender=sender)
    else:
        _scan_mlflow(job, mlflow_uri, experiments, all_experiments, filter_string, run_ids, since, sender,
                     mlflow_ui_url)


@dataclasses.dataclass
class _Job:
    """What every project of one scan shares."""

    fmt: str
    fail_on: str
    workers: int
    dry_run: bool
    full: bool
    bar: _Progress
    config: object
    cache: Path | None
    reuse: bool  # keep unchanged runs' reports (not with --no-cache or --reanalyze)
    ray_address: str | None
    alert_webhook: str | None
    timeout: float | None
    group_by: tuple[str, ...] | None = None  # None: the tracker's default grouping
    baselines: tuple[str, ...] = ()
    report_dir: Path | None = None  # --report-dir: where the overview page goes


@dataclasses.dataclass
class _Target:
    """One project of the scan: its name in the summary and how to open its adapter."""

    label: str
    open: object  # () -> Adapter; may raise SelectionError


def _engine(job: _Job, notify: bool = True, report: bool = True):
    if not job.ray_address:
        return None
    from .fleet.ray_engine import RayEngine

    return RayEngine(job.ray_address, in_flight=job.workers, notify=notify, report=report,
                     alert_webhook=job.alert_webhook, timeout=job.timeout)


def _scan_targets(job: _Job, targets: list[_Target], writer_options: dict, list_errors: tuple[type, ...]):
    """Scan each target in turn with one engine; a single target's listing failure ends the
    command as before (exit 2 or 3), one of several is that project's error and the others go on."""
    engine = _engine(job, writer_options.get("notify", True), writer_options.get("report", True))
    if engine is not None:
        from .fleet.ray_connect import cluster_events_on_stderr

        with cluster_events_on_stderr():
            return _scan_with(job, targets, writer_options, list_errors, engine)
    return _scan_with(job, targets, writer_options, list_errors, None)


def _scan_with(job: _Job, targets: list[_Target], writer_options: dict, list_errors: tuple[type, ...], engine):
    from .adapters.base import SelectionError, TrackerUnreachable
    from .reuse import ReuseStore, scan_key
    from .scan import LIST, UNREACHABLE, ScanError, ScanResult, combine
    from .scan import scan as run_scan
    from .trackers import writer_for

    key = scan_key(job.config, sorted((k, v) for k, v in writer_options.items() if k != "alert"), bool(job.alert_webhook),
                   job.group_by, job.baselines)
    results, notes, per_project = [], [], []
    try:
        for target in targets:
            adapter = None
            try:
                adapter = target.open()
                writer = writer_for(adapter, config=job.config, **writer_options)
                reuse = ReuseStore(job.cache, adapter.scope, key) if job.reuse else None
                result = run_scan(adapter, writer, job.config, workers=job.workers, dry_run=job.dry_run,
                                  progress=job.bar, engine=engine, reuse=reuse, group_by=job.group_by,
                                  baselines=job.baselines, baselines_elsewhere=len(targets) > 1)
                notes.extend(_project_notes(adapter, result))
            except (SelectionError, TrackerUnreachable, *list_errors) as exc:
                if len(targets) == 1:
                    raise
                kind = UNREACHABLE if isinstance(exc, TrackerUnreachable) else LIST
                result = ScanResult(errors=(ScanError(target.label, "", kind, f"listing the project's runs failed: "
                                                                                f"{exc}"),))
            finally:
                if adapter is not None:
                    adapter.close()
            results.append(result)
            per_project.append({"project": target.label, **result.summary.to_dict(),
                                "error": next((e.message for e in result.errors if not e.run_id), None)})
    finally:
        job.bar.finish()
        if engine is not None:
            engine.close()
    merged = combine(results)
    notes.extend(_unmatched_baselines(job.baselines, merged) if len(targets) > 1 else [])
    return merged, [*merged.notes, *notes], per_project if len(targets) > 1 else None


def _unmatched_baselines(baselines, result) -> list[str]:
    """A fleet scan's --baseline that no project's runs matched (each project checks only its own)."""
    seen = {r.run.id for r in result.reports} | {r.run.name for r in result.reports}
    return [f"--baseline {b} matched no run in any of the projects scanned" for b in baselines if b not in seen]


def _project_notes(adapter, result) -> list[str]:
    from .adapters.wandb import WandbApiAdapter

    if isinstance(adapter, WandbApiAdapter) and adapter.listed_since and not result.summary.listed:
        return [f"no run of {adapter.path} was updated since {adapter.listed_since} UTC (the last scan); "
                "--all-runs lists every run"]
    return []


def _scan_mlflow(job, mlflow_uri, experiments, all_experiments, filter_string, run_ids, since, sender,
                 mlflow_ui_url) -> None:
    from .adapters.mlflow import ApiError, MlflowAdapter, MlflowMissing, SelectionError, TrackerUnreachable

    def opener(exps):
        return lambda: MlflowAdapter(mlflow_uri, experiments=exps, filter_string=filter_string, run_ids=run_ids,
                                     since=since, cache_dir=job.cache, workers=job.workers, ui_url=mlflow_ui_url,
                                     timeout=job.timeout)

    try:
        if all_experiments:
            probe = MlflowAdapter(mlflow_uri, cache_dir=None, workers=job.workers, timeout=job.timeout)
            try:
                experiments = probe.experiment_ids()
            finally:
                probe.close()
            if not experiments:
                _die(f"{probe.uri.redacted} has no active experiment to scan", exit_codes.USAGE)
        split = len(experiments) > 1 and not run_ids
        targets = ([_Target(f"mlflow:{e}", opener([e])) for e in experiments] if split
                   else [_Target(f"mlflow:{','.join(experiments) or 'runs'}", opener(list(experiments)))])
        result, notes, projects = _scan_targets(job, targets, {"alert": sender}, (ApiError,))
    except (MlflowMissing, SelectionError) as exc:
        _die(str(exc), exit_codes.USAGE)
    except TrackerUnreachable as exc:
        _die(str(exc), exit_codes.UNREACHABLE)
    except ApiError as exc:
        where = _uri_label(mlflow_uri)
        if 400 <= exc.status < 500:
            _die(f"{where}: {exc}", exit_codes.USAGE)
        _die(f"{where} failed while listing runs: {exc}; check the server's logs", exit_codes.UNREACHABLE)
    _finish(result, notes, job, projects=projects, title=f"Training health: {', '.join(t.label for t in targets)}")


def _uri_label(uri) -> str:
    from .adapters.mlflow._uri import redact

    return redact(uri or "$MLFLOW_TRACKING_URI")


def _scan_wandb(job, projects, entities, *, filter_string, run_ids, since, states, tags, all_runs, notify, report,
                sender) -> None:
    from .adapters._shared import parse_since
    from .adapters.base import SelectionError, TrackerUnreachable
    from .adapters.wandb import WandbApiAdapter, WandbMissing

    def opener(path):
        return lambda: WandbApiAdapter(path, filters=filter_string, states=states, tags=tags, run_ids=run_ids,
                                       since_ms=parse_since(since), incremental=not all_runs, cache_dir=job.cache,
                                       workers=job.workers, timeout=job.timeout)

    try:
        paths = list(dict.fromkeys(projects))
        if entities:
            from .adapters.wandb._projects import list_projects

            for entity in entities:
                found = list_projects(entity, timeout=job.timeout)
                if not found:
                    click.echo(f"note: the W&B entity {entity} has no project this API key can see", err=True)
                paths.extend(p for p in (f"{entity}/{name}" for name in found) if p not in paths)
        if not paths:
            _die("no W&B project to scan: the entities listed none", exit_codes.USAGE)
        targets = [_Target(f"wandb:{p}", opener(p)) for p in paths]
        # The loop ends each project with the writer's project report and the adapter's scan_complete().
        result, notes, per_project = _scan_targets(job, targets, {"alert": sender, "notify": notify, "report": report},
                                                   ())
    except (SelectionError, WandbMissing) as exc:
        _die(str(exc), exit_codes.USAGE)
    except TrackerUnreachable as exc:
        _die(str(exc), exit_codes.UNREACHABLE)
    _finish(result, notes, job, projects=per_project, title=f"Training health: {', '.join(paths)}")


def _scan_wandb_dirs(roots, job) -> None:
    from .adapters.wandb import WandbFolderAdapter, WandbFolderError, WandbMissing
    from .scan import scan as run_scan

    try:
        result = run_scan(WandbFolderAdapter(roots), None, job.config, workers=job.workers, dry_run=job.dry_run,
                          progress=job.bar)
    except (WandbFolderError, WandbMissing) as exc:
        _die(str(exc), exit_codes.USAGE)
    finally:
        job.bar.finish()
    _finish(result, ["local W&B folders are only read: nothing is written back"], job,
            title=f"Training health: {', '.join(str(r) for r in roots)}")


def _finish(result, notes, job: _Job, *, projects=None, title: str = "Training health") -> None:
    fmt, fail_on, full = job.fmt, job.fail_on, job.full
    summary = result.summary
    wall = wall_seconds()
    if wall is not None:  # the command's wall time (listing, connecting, imports), not only the scan loop's
        summary = dataclasses.replace(summary, elapsed_seconds=max(wall, summary.elapsed_seconds))
    errors = [e.to_dict() for e in result.errors]
    skipped = [s.to_dict() for s in result.skipped]
    doc = {**summary.to_dict(), "skipped": skipped}
    if projects is not None:
        doc["projects"] = projects
    extra = {"full": full, "summary": doc} if fmt == "json" else {}
    text = render(fmt, result.reports, errors, sweeps=result.sweeps, **extra)
    if text is not None:
        click.echo(text)
    echo_errors(errors)
    overview_failed = False
    if job.report_dir is not None:
        overview_failed = not _write_overview(job.report_dir, result, errors, title)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    for item in result.skipped:
        click.echo(f"skipped {item.source} ({item.run_id}): {item.reason}", err=True)
    click.echo(summary.line(), err=True)
    sys.exit(exit_codes.for_reports(result.reports, fail_on, input_errors=bool(result.errors) or overview_failed,
                                    unreachable=result.unreachable))


def _write_overview(directory: Path, result, errors, title: str) -> bool:
    """``--report-dir``: the overview of every run the scan reported (reused ones too, so a scan
    where nothing changed still leaves a complete page). True when written."""
    from .writers.dashboard import write_overview

    try:
        written = write_overview(directory, result.reports, title=title, errors=errors, sweeps=result.sweeps)
    except OSError as exc:
        click.echo(f"error: the overview was not written to {directory}: {exc}", err=True)
        return False
    click.echo(f"overview: {written['index']}", err=True)
    return True


def _default():
    from .adapters._shared import default_cache_dir

    return default_cache_dir()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
