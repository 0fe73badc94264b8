"""Read training metrics from local files: what ``trackerhealth analyze FILES...`` uses.

``read_histories(path)`` returns every run found at ``path``, a file or a folder:

* long tables (``step, key, value[, wall_time][, run]``) and wide tables (a step column plus one
  column per metric) as CSV/TSV (optionally gzip'd), JSON lines or Parquet;
* HF Trainer ``trainer_state.json``; Lightning ``metrics.csv``; detectron2 ``metrics.json`` and
  Keras ``CSVLogger`` files (several runs appended to one file are split where ``iteration`` or
  ``epoch`` starts over);
* MLflow file-store run folders, experiment folders and ``mlruns`` roots;
* DVCLive output folders (``plots/metrics/**/*.tsv``, one run; :mod:`._dvclive`);
* TensorBoard event files (needs the ``tensorboard`` extra);
* W&B run folders and their ``run-<id>.wandb`` logs, offline or synced (needs the ``wandb`` extra;
  read by :mod:`trackerhealth.adapters.wandb`);
* printed training logs (``.log``, ``.txt``, ``.out``, ``.err``: nanoGPT, Megatron-LM, OLMo, Keras, HF Trainer's
  console), named one by one — a folder's text files are not read (:mod:`._textlog`).

Formats are recognised by content, not only by name (the CSV separator, decimal commas, UTF-16
too). Input that cannot be used raises :class:`InputError`, whose message says what is wrong and
how to fix it — any failure of a reader, foreseen or not, becomes one for that file, so one bad
file never stops the others (:func:`read_paths`). Quirks that could be worked around (text in a
numeric column, no step column, a file cut short, a damaged TensorBoard record) are worked around
and told in ``RunHistory.notes``: a file read only up to its damage says so on the run.
Each run's ``RunRef.source`` is the file or folder it was read from.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

from ...schema import RunHistory
from ._common import Origin, mtime, stable_id
from ._dvclive import read_dvclive
from ._errors import SUPPORTED, InputError, NotMetrics, reject_lfs_pointer
from ._hparams import sibling_hparams
from ._json import json_document_histories
from ._mlflow import is_run_folder, read_run
from ._tables import table_histories
from ._tabular import Sniffed, read_csv, read_jsonl, read_parquet, sniff
from ._tensorboard import fold_add_scalars, read_event_files
from ._textlog import looks_like_text_log, read_text_log
from ._walk import walk

__all__ = [
    "InputError", "SUPPORTED", "collect_histories", "read_histories", "read_paths"]


def read_histories(path: str | Path, *, step_column: str | None = None) -> list[RunHistory]:
    """Every run at ``path`` (a file, a run folder or a folder of them).

    ``step_column`` names the step column of CSV/JSON/Parquet tables when it is not one of
    ``step``, ``global_step``, ``_step``, ``iteration``, ``iter`` (or ``epoch``).
    Raises :class:`InputError` when ``path`` or any metrics file inside it cannot be read; use
    :func:`collect_histories` to keep the readable runs of a folder and get the errors as data.
    """
    histories, errors = collect_histories(path, step_column=step_column)
    if errors:
        if len(errors) == 1:
            raise errors[0]
        listed = "; ".join(str(e) for e in errors[:5]) + ("; ..." if len(errors) > 5 else "")
        raise InputError(path, f"{len(errors)} metrics files could not be read: {listed}")
    return histories


def read_paths(paths, *, step_column: str | None = None) -> tuple[list[RunHistory], list[dict[str, str]]]:
    """Every run under ``paths``, and ``{"source", "message"}`` for each file or path that could
    not be read: one bad file never stops the others (the CLI's ``analyze`` and ``report``)."""
    histories: list[RunHistory] = []
    errors: list[dict[str, str]] = []
    for path in paths:
        try:
            found, bad = _guarded(Path(path), lambda p=path: collect_histories(p, step_column=step_column))
        except InputError as exc:
            errors.append({"source": str(path), "message": exc.problem})
            continue
        errors.extend({"source": str(e.path or path), "message": e.problem} for e in bad)
        histories.extend(found)
    return histories, errors


def collect_histories(
    path: str | Path, *, step_column: str | None = None
) -> tuple[list[RunHistory], list[InputError]]:
    """Like :func:`read_histories`, but a folder's unreadable files come back as errors, not raised.

    Raises :class:`InputError` only when ``path`` itself cannot be used (missing, or a folder with
    no supported file).
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise InputError(path, "no such file or folder")
    if not path.is_dir():
        if path.suffix == ".wandb":
            return [_read_wandb(path)], []
        return _read_file(path, step_column), []
    if is_run_folder(path):
        return _read_run_folder(path), []
    if any(p.suffix == ".wandb" for p in path.iterdir() if p.is_file()):
        return [_read_wandb(path)], []
    return _read_folder(path, step_column)


def _read_folder(root: Path, step_column: str | None) -> tuple[list[RunHistory], list[InputError]]:
    found = walk(root)
    histories: list[RunHistory] = []
    errors: list[InputError] = [
        InputError(folder, f"cannot be listed ({why}); its runs are not read — check its permissions")
        for folder, why in found.unreadable]
    for run in found.mlflow_runs:
        _collect(histories, errors, run, lambda r=run: _read_run_folder(r))
    for run in found.wandb_runs:
        _collect(histories, errors, run, lambda r=run: [_read_wandb(r)])
    for run in found.dvclive_runs:
        _collect(histories, errors, run, lambda r=run: [read_dvclive(r)])
    event_runs: dict[Path, RunHistory] = {}
    for run_dir, files in found.event_runs.items():
        origin = _event_origin(run_dir, max((mtime(f) or 0.0) for f, _ in files) or None)
        read: list[RunHistory] = []
        _collect(read, errors, run_dir, lambda f=files, o=origin: [read_event_files(f, o)])
        event_runs.update((run_dir, h) for h in read)
    histories.extend(fold_add_scalars(event_runs, lambda folder: _event_origin(folder, None).ref()))
    skipped = 0
    for file in found.files:
        try:
            histories.extend(_read_file(file, step_column, in_folder=True))
        except NotMetrics:
            skipped += 1
        except InputError as exc:
            errors.append(exc)
    if not histories and not errors:
        why = f" ({skipped} candidate file(s) held no metrics)" if skipped else ""
        raise InputError(root, f"no supported metrics files found{why}. Supported: {SUPPORTED}")
    return histories, errors


def _event_origin(run_dir: Path, updated_at: float | None) -> Origin:
    """A TensorBoard run is its folder: the same id whether the folder or its parent is read."""
    return Origin(path=run_dir, project=run_dir.resolve().parent.name, id=stable_id(run_dir),
                  name=run_dir.resolve().name, updated_at=updated_at)


def _collect(histories: list, errors: list, path: Path, read) -> None:
    try:
        histories.extend(_guarded(path, read))
    except InputError as exc:
        errors.append(exc)


_DAMAGE = (OSError, EOFError, UnicodeError, zlib.error, pa.ArrowException, ValueError, OverflowError)


def _guarded(path: Path, read):
    """``read()``, with every failure but an interrupt turned into an InputError naming ``path``:
    one file the readers did not foresee must cost its own run, never the whole ``analyze``."""
    try:
        return read()
    except InputError:
        raise
    except RecursionError:
        raise InputError(path, "nested too deeply to read (a thousand levels or more): no metrics log "
                               "is shaped like this — the file is damaged or is not a training log") from None
    except MemoryError:
        raise InputError(path, "too large to read in the memory available; split the file or analyze "
                               "it on a machine with more memory") from None
    except _DAMAGE as exc:
        raise InputError(path, f"could not be read ({_first_line(exc)}); it may be truncated or damaged: "
                               "re-export it, or use an older copy") from exc
    except Exception as exc:  # noqa: BLE001 - see the docstring; the message asks for a report
        raise InputError(path, f"could not be read: the reader failed unexpectedly ({_first_line(exc)}); "
                               "the file may be damaged — if it is not, please report this "
                               "to trackerhealth's issue tracker with the file attached") from exc


def _first_line(exc: BaseException) -> str:
    detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _read_file(path: Path, step_column: str | None, in_folder: bool = False) -> list[RunHistory]:
    return _guarded(path, lambda: _read_one(path, step_column, in_folder))


def _read_run_folder(folder: Path) -> list[RunHistory]:
    return _guarded(folder, lambda: [read_run(folder)])


def _read_wandb(path: Path) -> RunHistory:
    """A W&B run folder or its ``.wandb`` log (trackerhealth.adapters.wandb); its errors, and a
    missing wandb extra, as InputError."""
    from ..wandb import WandbFolderError, WandbMissing, read_run_folder

    def read() -> RunHistory:
        try:
            history = read_run_folder(path)
        except WandbFolderError as exc:
            raise InputError(exc.path, exc.problem) from None
        except WandbMissing as exc:
            raise InputError(path, str(exc)) from None
        history.ref = replace(history.ref, source=str(path))  # where analyze read it, as for every file
        return history

    return _guarded(path, read)


def _read_one(path: Path, step_column: str | None, in_folder: bool) -> list[RunHistory]:
    reject_lfs_pointer(path)
    if looks_like_text_log(path):
        try:
            return read_text_log(path)
        except NotMetrics as printed:
            # A table saved as .txt is still a table; when it is not one either, say what a log needs.
            try:
                return _read_table(path, step_column, in_folder)
            except InputError:
                raise printed from None
    try:
        return _read_table(path, step_column, in_folder)
    except NotMetrics as not_a_table:
        # A printed log saved under another name and named by the user (a training log pasted into a README.md, Keras'
        # output redirected into a .rb file: public logs P709, P904) is read as one; in a folder only the log suffixes
        # are, so a project's other text files are never taken for logs.
        if in_folder or sniff(path).kind in _NOT_TEXT:
            raise
        try:
            return read_text_log(path)
        except NotMetrics:
            raise not_a_table from None


# Kinds of content no printed log has: a table reader's refusal of these is final.
_NOT_TEXT = frozenset({"empty", "binary", "parquet", "tensorboard", "json", "jsonl"})


def _read_table(path: Path, step_column: str | None, in_folder: bool) -> list[RunHistory]:
    sniffed = sniff(path)
    kind = sniffed.kind
    if kind == "empty":
        raise NotMetrics(path, "the file is empty: nothing was logged yet (or the logger has not flushed)")
    if kind == "binary":
        raise NotMetrics(path, f"binary content of no supported format. Supported: {SUPPORTED}")
    if kind == "tensorboard":
        run_dir = path.parent.resolve()
        alone = [p.name for p in run_dir.iterdir() if "tfevents" in p.name.lower()] == [path.name]
        # The folder is the run in TensorBoard: the same id whether the file or its folder is read.
        origin = Origin.for_file(path, name=run_dir.name, project=run_dir.parent.name,
                                 id=stable_id(run_dir) if alone else stable_id(path))
        return [read_event_files([(path, "")], origin)]
    if kind == "json":
        return json_document_histories(path, sniffed, step_column, _jsonl_reader(in_folder), in_folder)
    if kind == "jsonl":
        return _jsonl_reader(in_folder)(path, sniffed, step_column)
    if kind == "parquet":
        table, notes = read_parquet(path)
        return table_histories(table, Origin.for_file(path), step_column=step_column,
                               require_step=in_folder, notes=tuple(notes))
    table, notes = read_csv(path, sniffed)
    # Lightning's CSVLogger writes the run's hyper-parameters beside its metrics.csv.
    hparams, hparams_notes = sibling_hparams(path)
    try:
        return table_histories(table, Origin.for_file(path, config=hparams), step_column=step_column,
                               split_restarts=True, require_step=in_folder, notes=(*notes, *hparams_notes))
    except InputError as exc:
        hint = _separator_hint(sniffed, table.num_columns)
        if not hint:
            raise
        raise type(exc)(exc.path, f"{exc.problem} ({hint})") from None


def _separator_hint(sniffed: Sniffed, columns: int) -> str:
    """Where a CSV could not be used, whether its separator may be why."""
    if sniffed.delimiter != ",":
        return f"this file uses {sniffed.delimiter!r} as separator and was read so"
    others = [d for d in ";\t|" if d in sniffed.header]
    if columns == 1 and others:
        return (f"the header holds no ',' but {others[0]!r}: if that is the separator, "
                "re-export the file with ',' between fields")
    return ""


def _jsonl_reader(in_folder: bool):
    def read(path: Path, sniffed: Sniffed, step_column: str | None) -> list[RunHistory]:
        table, notes = read_jsonl(path, sniffed)
        # detectron2 appends each new training run to the same metrics.json.
        return table_histories(table, Origin.for_file(path), step_column=step_column, split_restarts=True,
                               require_step=in_folder, notes=tuple(notes))

    return read
