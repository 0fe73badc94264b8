"""The ``trackerhealth`` command line. The only module that imports everything.

Exit codes: 0 healthy, 1 a finding at or above ``--fail-on``, 2 usage/configuration/input error,
3 tracker unreachable.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__
from .config import Config, ConfigError, load
from .diagnoses import _docs as diagnoses_docs
from .engine import analyze as analyze_history
from .schema import LEVEL_RANK
from .writers import formats

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
FAIL_ON = ("critical", "warning", "never")


def _load_config(path: str | None) -> Config:
    try:
        return load(path)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def fails(reports, fail_on: str) -> bool:
    """Whether any report has a finding at or above ``fail_on``."""
    if fail_on == "never":
        return False
    bar = LEVEL_RANK[fail_on]
    return any(LEVEL_RANK[f.level] >= bar for r in reports for f in r.findings if f.is_problem)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="trackerhealth")
def main() -> None:
    """Diagnose unhealthy training runs and write the answer back to W&B and MLflow.

    \b
    Examples:
      trackerhealth demo                        # tiny real trainings → local MLflow → scan → dashboards
      trackerhealth scan --mlflow-uri http://mlflow.internal:5000 --experiment my-team
      trackerhealth analyze runs/*.parquet trainer_state.json metrics.csv
      trackerhealth analyze run.csv --format json > report.json
      trackerhealth report lightning_logs/version_0/metrics.csv --html health.html
      trackerhealth diagnoses
    """


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(formats.FORMATS), default="table", show_default=True, help="Output format.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="critical", show_default=True,
              help="Exit 1 when a finding at or above this level is found.")
@click.option("--config", "config_path", type=click.Path(), default=None,
              help="trackerhealth.toml to use (default: ./trackerhealth.toml or [tool.trackerhealth] in ./pyproject.toml).")
@click.option("--step-column", default=None, help="Name of the step column in wide tables, when it is not step/global_step/iteration.")
@click.option("--full", is_flag=True, help="In JSON, include ok, skipped and error findings too.")
def analyze(paths, fmt, fail_on, config_path, step_column, full) -> None:
    """Analyze local training logs: CSV, Parquet, JSONL (long or wide), HF trainer_state.json,
    Lightning metrics.csv, detectron2 metrics.json, TensorBoard event files, MLflow run folders,
    W&B run folders (offline or synced).

    \b
    Examples:
      trackerhealth analyze runs/*.parquet trainer_state.json lightning_logs/version_0/metrics.csv
      trackerhealth analyze run.csv --format json > report.json
      trackerhealth analyze mlruns/0 --format markdown --fail-on warning
      trackerhealth analyze wandb/ --format json > health.json
    """
    from .adapters.files import read_paths

    config = _load_config(config_path)
    histories, errors = read_paths(paths, step_column=step_column)
    reports = [analyze_history(history, config) for history in histories]
    click.echo(formats.render(fmt, reports, errors, **({"full": full} if fmt == "json" else {})))
    if fails(reports, fail_on):
        sys.exit(EXIT_FINDINGS)
    if errors:
        sys.exit(EXIT_USAGE)


@main.command(name="diagnoses")
@click.argument("diagnosis_id", required=False)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown"]), default="text", show_default=True)
def list_diagnoses(diagnosis_id, fmt) -> None:
    """List the diagnoses: id, what each needs, thresholds with defaults and meaning, and the fix.

    \b
    Examples:
      trackerhealth diagnoses
      trackerhealth diagnoses overfitting
      trackerhealth diagnoses scorecard
      trackerhealth diagnoses --format markdown > docs/diagnoses.md
    """
    try:
        click.echo(diagnoses_docs.render(diagnosis_id, fmt))
    except KeyError as exc:
        raise click.UsageError(str(exc.args[0])) from None


def _register_commands() -> None:
    # Commands with their own modules; each imports its integration (plotly, mlflow…) lazily.
    from .demo import demo
    from .report_cli import report
    from .scan_cli import scan

    main.add_command(scan)
    main.add_command(report)
    main.add_command(demo)


_register_commands()

if __name__ == "__main__":  # pragma: no cover
    main()
