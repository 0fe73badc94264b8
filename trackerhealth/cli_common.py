"""What the commands share: the common options, loading the configuration, printing a result
and leaving with the right exit code.

Imports only click and :mod:`trackerhealth.exit_codes` at module level, so every command's
``--help`` stays fast; the analysis core is imported inside the functions that need it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from . import exit_codes

# The report formats (trackerhealth.writers.formats.FORMATS, which imports the schema and with it
# pandas); tests/test_cli_common.py checks that the two stay the same.
FORMATS = ("table", "markdown", "json")
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
_STARTED = "trackerhealth.started"


def mark_start(ctx: click.Context) -> None:
    """Remember when the command line was entered: the summary line reports the command's wall time."""
    ctx.meta.setdefault(_STARTED, time.perf_counter())


def wall_seconds() -> float | None:
    """Seconds since the command line was entered, or None outside a command."""
    ctx = click.get_current_context(silent=True)
    started = ctx.meta.get(_STARTED) if ctx is not None else None
    return None if started is None else time.perf_counter() - started


def die(message: str, code: int = exit_codes.USAGE) -> NoReturn:
    from .redaction import redact_secrets  # every message may quote a URL with its credentials

    click.echo(f"Error: {redact_secrets(message)}", err=True)
    sys.exit(code)


def fail_on_option(f):
    return click.option("--fail-on", type=click.Choice(exit_codes.FAIL_ON), default="critical", show_default=True,
                        help="Exit 1 when a run's status is at or above this level (a run with no recognised "
                             "training loss, status unknown, counts as a warning).")(f)


def loss_key_option(f):
    return click.option("--loss-key", metavar="KEY", default=None,
                        help="The metric key that is the training loss, when its name is not recognised "
                             "(e.g. cost, objective, train/total); overrides [roles] train_loss.")(f)


def config_option(f):
    return click.option("--config", "config_path", type=click.Path(), default=None,
                        help="trackerhealth.toml to use (default: ./trackerhealth.toml or [tool.trackerhealth] "
                             "in ./pyproject.toml).")(f)


def file_group_options(f):
    """``--group-by`` and ``--baseline`` for the commands that read local files (analyze, report)."""
    f = click.option("--baseline", "baselines", multiple=True, metavar="RUN",
                     help="With --group-by: the run (id or name, as the report shows it) its group is compared "
                          "with; else the group's healthiest finished run.")(f)
    return click.option("--group-by", "group_by", multiple=True, metavar="KEY",
                        help="Compare runs within groups of equal values of KEY (repeatable: the group is the tuple): "
                             "folder, config.NAME or params.NAME (the run's logged config), or a column's NAME (a "
                             "table's column with one value per run, e.g. model). Default: every run alone.")(f)


def check_group_options(group_by: Sequence[str], baselines: Sequence[str]) -> None:
    """Before anything is read: a --baseline needs a --group-by."""
    if baselines and not group_by:
        die("--baseline names the run a group is compared with: add --group-by KEY (folder, config.NAME, a column)")


def grouped_reports(histories, config, group_by: Sequence[str], baselines: Sequence[str]):
    """``(reports, sweeps)``: local runs analysed with their groups (:func:`trackerhealth.cohort.analyze_files`);
    a key or baseline that cannot work ends the command with the fix."""
    from .cohort import GroupingError, analyze_files

    try:
        return analyze_files(histories, config, group_by, baselines)
    except GroupingError as exc:
        die(str(exc))


def load_config(path: str | None, loss_key: str | None = None):
    """The configuration from ``path`` (or the default places), with ``--loss-key`` applied."""
    from .config import ConfigError, load

    try:
        config = load(path)
        return config if loss_key is None else config.with_loss_key(loss_key)
    except ConfigError as exc:
        die(str(exc))


def echo_errors(errors: Sequence[dict[str, Any]]) -> None:
    """Input and run errors go to stderr, one line each, whatever the format on stdout."""
    for err in errors:
        click.echo(f"error: {err.get('source', '?')}: {err.get('message', '')}", err=True)


def render(fmt: str, reports, errors: Sequence[dict[str, Any]], sweeps=(), **json_extra) -> str | None:
    """The report for stdout, or None when there is nothing to show. The table leaves the errors to
    :func:`echo_errors` (stderr); Markdown and JSON are documents and keep them. ``sweeps``: the
    sweep summaries of the groups of ten or more runs (:mod:`trackerhealth.sweeps`)."""
    from .writers import formats

    if fmt == "json":
        return formats.to_json(reports, errors, sweeps=sweeps, **json_extra)
    if fmt == "markdown":
        return formats.to_markdown(reports, errors, sweeps=sweeps)
    return formats.to_table(reports, (), sweeps=sweeps) if reports else None


def writable_file(path: Path, option: str) -> None:
    """Stop with a message naming the fix when ``path`` cannot be a file we write."""
    if path.is_dir():
        die(f"{option} {path} is a folder; give a file name inside it, e.g. {option} {path / 'summary.md'}")
    if not path.parent.is_dir():
        die(f"{option} {path}: the folder {path.parent} does not exist; create it first or choose another path")


def write_failed(path: Path, exc: OSError, option: str) -> NoReturn:
    """Stop with what went wrong writing ``path`` for ``option``, and what to do instead."""
    import errno

    where = Path(exc.filename) if getattr(exc, "filename", None) else path
    # ENOTDIR names the path being made, not the file in its way: name the file.
    blocking = next((p for p in (where, *where.parents) if p.exists() and not p.is_dir()), where)
    fixes = {
        errno.ENOSPC: "the disk is full; free some space or choose another disk",
        errno.EEXIST: f"{blocking} is a file where a folder is needed; remove it or choose another path",
        errno.ENOTDIR: f"{blocking} is a file where a folder is needed; remove it or choose another path",
        errno.EISDIR: f"{where} is a folder; give a file name inside it",
        errno.EACCES: "permission denied; choose a folder you can write to",
        errno.EPERM: "permission denied; choose a folder you can write to",
        errno.EROFS: "the file system is read-only; choose a writable folder",
    }
    fix = fixes.get(exc.errno, f"{exc.strerror or exc}; choose another path")
    die(f"could not write {option} {path}: {fix}")
