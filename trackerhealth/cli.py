"""The ``trackerhealth`` command line.

Each command lives in its own module and is imported only when it runs or its help is shown
(click's lazy-group pattern), and every command module imports the analysis core (scipy, pandas)
and the integrations (plotly, mlflow, wandb) inside the command: ``trackerhealth --help``,
``--version`` and ``scan --help`` load none of them. Exit codes: :mod:`trackerhealth.exit_codes`.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from . import __version__, exit_codes
from .cli_common import (
    CONTEXT,
    FORMATS,
    check_group_options,
    config_option,
    die,
    echo_errors,
    fail_on_option,
    file_group_options,
    grouped_reports,
    load_config,
    loss_key_option,
    mark_start,
    render,
)

# name -> "module:attribute"; the order is the order of `trackerhealth --help`.
LAZY_COMMANDS = {
    "analyze": "trackerhealth.cli:analyze",
    "scan": "trackerhealth.scan_cli:scan",
    "report": "trackerhealth.report_cli:report",
    "summary": "trackerhealth.summary_cli:summary",
    "diagnoses": "trackerhealth.cli:list_diagnoses",
    "demo": "trackerhealth.demo._cli:demo",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (click's documented lazy-loading pattern)."""

    def __init__(self, *args, lazy_commands: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.lazy_commands, *(n for n in super().list_commands(ctx) if n not in self.lazy_commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands:
            module_name, attr = self.lazy_commands[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy_commands[cmd_name]} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, lazy_commands=LAZY_COMMANDS, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="trackerhealth")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Diagnose unhealthy training runs and write the answer back to W&B and MLflow.

    \b
    Examples:
      trackerhealth demo                        # tiny real trainings → local MLflow → scan → dashboards
      trackerhealth scan --mlflow-uri http://mlflow.internal:5000 --experiment my-team
      trackerhealth analyze examples/logs       # the example logs in this repository
      trackerhealth analyze runs/*.parquet trainer_state.json metrics.csv
      trackerhealth analyze run.csv --format json > report.json
      trackerhealth report lightning_logs/version_0/metrics.csv --html health.html
      trackerhealth summary report.json         # the Markdown summary of a saved JSON report
      trackerhealth diagnoses

    \b
    Exit codes: 0 healthy; 1 a run at or above --fail-on; 2 usage, configuration or input error,
    or a run whose analysis failed; 3 tracker unreachable.
    """
    mark_start(ctx)


@click.command("analyze", context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True, help="Output format.")
@fail_on_option
@loss_key_option
@config_option
@click.option("--step-column", default=None, help="Name of the step column in wide tables, when it is not step/global_step/iteration.")
@click.option("--full", is_flag=True, help="In JSON, include ok, skipped and error findings too.")
@click.option("--ray", "ray_address", metavar="ADDRESS", default=None,
              help="Group a Parquet lake by run with Ray Data on this cluster: local (start Ray here), auto, "
                   "HOST:PORT or ray://HOST:10001. Needs the ray extra.")
@file_group_options
def analyze(paths, fmt, fail_on, loss_key, config_path, step_column, full, ray_address, group_by, baselines) -> None:
    """Analyze local training logs: CSV, Parquet, JSONL (long or wide), HF trainer_state.json,
    Lightning metrics.csv, detectron2 metrics.json, Ultralytics YOLO results.csv, TensorBoard event
    files (add_scalars sub-folders as their run's curves), MLflow run folders, DVCLive folders, W&B run
    folders (offline or synced), a JSON list or np.savetxt file of numbers, and printed training logs
    (.log, .txt, .out: nanoGPT, Megatron-LM, OLMo, Keras, YOLO console lines, Chinese metric names; named one by
    one; a log under another name, such as one pasted into a README.md, when named on its own).

    \b
    Examples:
      trackerhealth analyze examples/logs
      trackerhealth analyze runs/*.parquet trainer_state.json lightning_logs/version_0/metrics.csv
      trackerhealth analyze slurm-1234.out train.log   # what a training script printed
      trackerhealth analyze run.csv --format json > report.json
      trackerhealth analyze mlruns/0 --format markdown --fail-on warning
      trackerhealth analyze costs.csv --loss-key cost
      trackerhealth analyze wandb/ --format json > health.json
      trackerhealth analyze dvclive/ runs/exp1/   # a DVCLive folder; a SummaryWriter folder with add_scalars
      trackerhealth analyze losses.json loss.txt   # json.dump(losses) and np.savetxt(losses): one metric each
      trackerhealth analyze exports/ --ray auto  # a Parquet lake: long rows with a run column
      trackerhealth analyze lightning_logs/ --group-by config.model   # each run against its group's best
      trackerhealth analyze runs.csv --group-by model                 # a column with one value per run

    A folder, glob or files of Parquet that all have a run column (exported W&B histories, a dump
    of MLflow's metrics table, Databricks' run_metrics_history) are one lake: one report per run,
    a run's rows gathered from every file; --ray does the grouping on a Ray cluster.
    """
    from .fleet.lake import is_lake

    config = load_config(config_path, loss_key)
    sweeps = ()
    check_group_options(group_by, baselines)
    if is_lake(paths):
        if group_by:
            die("--group-by compares runs read from files; a Parquet lake's runs are not grouped yet: leave it out")
        reports, errors = _lake_reports(paths, config, ray_address), []
    elif ray_address is not None:
        die("--ray analyzes a Parquet lake: every path must be Parquet with a run column (run_id, run_uuid, "
            "run or run_name); leave --ray out to read these files in this process")
    else:
        from .adapters.files import read_paths
        from .engine import analyze as analyze_history

        histories, errors = read_paths(paths, step_column=step_column)
        if group_by:
            reports, sweeps = grouped_reports(histories, config, group_by, baselines)
        else:
            reports = [analyze_history(history, config) for history in histories]
    text = render(fmt, reports, errors, sweeps=sweeps, **({"full": full} if fmt == "json" else {}))
    if text is not None:
        click.echo(text)
    echo_errors(errors)
    raise SystemExit(exit_codes.for_reports(reports, fail_on, input_errors=bool(errors)))


def _lake_reports(paths, config, ray_address):
    """One report per run of a Parquet lake, here or (``--ray``) on a Ray cluster."""
    from .adapters.base import SelectionError
    from .fleet.lake import LakeError, analyze_lake, analyze_lake_ray
    from .fleet.ray_connect import RayUnreachable, cluster_events_on_stderr

    try:
        if ray_address is None:
            return analyze_lake(paths, config)
        with cluster_events_on_stderr():  # the report printed after is stdout's only content
            return analyze_lake_ray(paths, config, ray_address)
    except RayUnreachable as exc:
        die(str(exc), exit_codes.UNREACHABLE)
    except (LakeError, SelectionError) as exc:  # RayMissing is a SelectionError: usage, exit 2
        die(str(exc))


@click.command(name="diagnoses", context_settings=CONTEXT)
@click.argument("diagnosis_id", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True)
def list_diagnoses(diagnosis_id, fmt) -> None:
    """List the diagnoses: id, what each needs, thresholds with defaults, and the fix.

    \b
    Examples:
      trackerhealth diagnoses
      trackerhealth diagnoses overfitting
      trackerhealth diagnoses scorecard
      trackerhealth diagnoses --format markdown > docs/diagnoses.md
    """
    # The rendering lives with the diagnoses (the docs page is made by the same code).
    from .diagnoses import _docs as diagnoses_docs

    try:
        click.echo(diagnoses_docs.render(diagnosis_id, fmt))
    except KeyError as exc:
        raise click.UsageError(str(exc.args[0])) from None


__all__ = ["LAZY_COMMANDS", "LazyGroup", "analyze", "die", "list_diagnoses", "main"]

if __name__ == "__main__":  # pragma: no cover
    main()
