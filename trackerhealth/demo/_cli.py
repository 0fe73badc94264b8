"""``trackerhealth demo``: the first command of the README, with no tracker and no network."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import click

from ..exit_codes import USAGE as EXIT_USAGE

DEFAULT_DIR = "trackerhealth-demo"


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the current directory when inside it."""
    path = path.resolve()
    try:
        rel = path.relative_to(Path.cwd().resolve())
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."


def _sqlite_uri(path: Path) -> str:
    shown = _shown(path)
    # sqlite:/// + a relative path is relative to where mlflow runs; + an absolute one gives ////.
    return f"sqlite:///{shown}"


@click.command("demo", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR,
              show_default=True, metavar="DIR",
              help="Folder for the demo's MLflow store (mlflow.db, artifacts/) and report (report/index.html). "
                   "A folder made by an earlier demo is replaced; any other non-empty folder is refused.")
@click.option("--quick", is_flag=True, help="Shorter trainings (about half the steps); the same faults.")
def demo(directory: Path, quick: bool) -> None:
    """Train a few tiny models (some healthy, some broken), log them into a local MLflow store,
    scan them, and show what trackerhealth finds. No tracker, no network, under a minute.

    Six small numpy trainings run on this CPU: a healthy MLP with warm-up and cosine decay, one
    overfitting a tiny training set, one whose learning rate typo drives the loss to NaN, one
    starved by a slow data loader, one with a mislabeled shard in every epoch, and a deep sigmoid
    net whose early-layer gradients vanish. They are logged into DIR/mlflow.db with their real
    steps and timestamps, scanned exactly as `trackerhealth scan` scans a team's MLflow, and
    written back: tags trackerhealth.status/findings/score on every run, a dashboard artifact per
    run, and a local report in DIR/report/ (index.html: the overview, runs/: one dashboard each).

    \b
    Examples:
      trackerhealth demo
      trackerhealth demo --quick --dir /tmp/th-demo
      mlflow ui --backend-store-uri sqlite:///trackerhealth-demo/mlflow.db   # then look at the runs' tags
      trackerhealth scan --mlflow-uri sqlite:///trackerhealth-demo/mlflow.db -e trackerhealth-demo --format markdown

    \b
    Needs mlflow (pip install 'trackerhealth[mlflow]'); the run dashboards also need Plotly
    (pip install 'trackerhealth[dashboard]'). Exit codes: 0 done, 2 missing package or unusable --dir.
    """
    from ..adapters.mlflow import MlflowMissing
    from ..writers import formats
    from ._run import MLFLOW_UI, run_demo
    from ._store import DemoDirError

    started = time.perf_counter()
    try:
        result = run_demo(directory, quick=quick, echo=click.echo)
    except MlflowMissing:
        click.echo("Error: the demo logs its runs into a local MLflow store, so it needs mlflow: "
                   "pip install 'trackerhealth[mlflow]' (from a clone: pip install -e '.[mlflow]')", err=True)
        sys.exit(EXIT_USAGE)
    except DemoDirError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_USAGE)

    scan = result.scan
    click.echo("")
    click.echo(formats.to_table(scan.reports, scan.errors))
    click.echo("")
    click.echo(scan.summary.line())
    for note in result.notes:
        click.echo(f"note: {note}")
    missed = [t.name for t in result.trainings
              if not set(t.expected) <= {f.id for r in scan.reports if r.run.name == t.name for f in r.problems}]
    if missed:  # a fault the diagnoses did not see: say so rather than pretend
        click.echo(f"note: not found as expected in: {', '.join(missed)}")

    db = _sqlite_uri(result.directory / "mlflow.db")
    overview = _shown(result.overview)
    click.echo("")
    click.echo(f"Done in {time.perf_counter() - started:.0f}s. Each run now has the tags trackerhealth.status, "
               "trackerhealth.findings and trackerhealth.score, and its dashboard under the artifacts' trackerhealth/.")
    click.echo("Look at the results:")
    click.echo(f"  overview     open {shlex.quote(overview)}   (every run, linking to its dashboard in "
               f"{shlex.quote(_shown(result.overview.parent / 'runs'))}/)")
    click.echo(f"  MLflow UI    mlflow ui --backend-store-uri {shlex.quote(db)}")
    click.echo(f"               then {MLFLOW_UI}, experiment {result.experiment}; search "
               "tags.trackerhealth.status = 'critical'")
    click.echo(f"  scan again   trackerhealth scan --mlflow-uri {shlex.quote(db)} -e {result.experiment}")
    click.echo("Your own runs:")
    click.echo("  trackerhealth scan --mlflow-uri http://your-mlflow:5000 -e your-experiment --dry-run")
    click.echo("  trackerhealth scan --project your-entity/your-project --dry-run   (W&B: set WANDB_API_KEY; "
               "from a clone: pip install -e '.[wandb]')")
    click.echo("  trackerhealth analyze path/to/logs      (CSV, Parquet, trainer_state.json, metrics.csv, TensorBoard, "
               "DVCLive, W&B run folders)")
    if os.environ.get("GITHUB_ACTIONS") == "true":
        click.echo(f"(in CI: upload {shlex.quote(_shown(result.overview.parent))} as an artifact to look at it)")
