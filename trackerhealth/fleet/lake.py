"""A "lake" of Parquet histories: many files of long rows with a run column, one report per run.

What it reads: exported W&B histories, a dump of MLflow's ``metrics`` table
(``key, value, timestamp, step, is_nan, run_uuid``), Databricks' ``run_metrics_history``
(``run_id, metric_name, metric_step, metric_value, metric_time``) — any Parquet whose schema has
a run column plus either long columns (key, value, step) or, W&B-export style, a step column and
one numeric column per metric. A run's rows may be spread over many files (date partitions):
runs are grouped across *all* files.

Two engines give the same reports: :func:`analyze_lake` in this process, streaming each file's
row groups and keeping a run's rows only until the last file that holds it is read;
:func:`analyze_lake_ray` groups by run with Ray Data and analyses each run on a worker. Both
turn one run's rows into a history with :func:`run_history`, so they cannot drift apart.
"""

from __future__ import annotations

import functools
import glob
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..adapters.files._common import TRACKER, seconds
from ..config import Config
from ..engine import analyze
from ..schema import HealthReport, RunHistory, RunRef

__all__ = ["LakeError", "Layout", "analyze_lake", "analyze_lake_ray", "find_files", "is_lake", "layout_of",
           "run_history"]

# Spellings per role, most specific first (``run_uuid`` is MLflow's metrics table, ``metric_*``
# Databricks', ``_step``/``_timestamp`` W&B's).
RUN_NAMES = ("run_id", "run_uuid", "run", "run_name")
KEY_NAMES = ("key", "metric", "metric_name", "name")
VALUE_NAMES = ("value", "metric_value")
STEP_NAMES = ("step", "metric_step", "_step")
TIME_NAMES = ("timestamp", "metric_time", "_timestamp", "wall_time")
PROJECT_NAMES = ("experiment_id", "project")
RUN_LABEL_NAMES = ("run_name",)  # a person's name for the run, when the run column is an id
IS_NAN = "is_nan"
NO_RUN = "(no run)"

LAYOUTS = (
    "long rows: a run column (run_id/run_uuid/run/run_name), a key column (key/metric/metric_name/name), "
    "a value column (value/metric_value) and a step column (step/metric_step/_step); or a W&B-style wide "
    "table: a run column, a step column (_step/step) and one numeric column per metric"
)


class LakeError(ValueError):
    """The lake cannot be read as asked; the message says what to change (the CLI exits 2)."""


@dataclass(frozen=True)
class Layout:
    """Which column plays which part; ``metrics`` is set for a wide table, ``key``/``value`` for long."""

    run: str
    step: str
    key: str | None = None
    value: str | None = None
    time: str | None = None
    is_nan: str | None = None
    project: str | None = None
    label: str | None = None
    metrics: tuple[str, ...] = ()

    @property
    def wide(self) -> bool:
        return self.key is None

    def columns(self) -> list[str]:
        """The columns to read: nothing else leaves the file."""
        named = (self.run, self.key, self.value, self.step, self.time, self.is_nan, self.project, self.label)
        return list(dict.fromkeys([c for c in named if c] + list(self.metrics)))

    def same_roles(self, other: Layout) -> bool:
        return (self.run, self.key, self.value, self.step, self.time, self.is_nan, self.project, self.label) == (
            other.run, other.key, other.value, other.step, other.time, other.is_nan, other.project, other.label)


@dataclass(frozen=True)
class Lake:
    """The files, their common layout, and what every run's RunRef shares."""

    files: tuple[Path, ...]
    layout: Layout
    root: Path  # the folder the files have in common: the project when no column names one

    @property
    def project(self) -> str:
        return self.root.name or str(self.root)


# -- finding the files ---------------------------------------------------------------------------
_GLOB_CHARS = "*?["


def find_files(paths: Iterable[str | Path]) -> list[Path]:
    """The Parquet files of ``paths``: each a folder (searched recursively for ``*.parquet``), a
    glob pattern (``exports/2024-*/*.parquet``, ``**`` allowed) or a file. Raises LakeError when
    a path matches nothing."""
    found: dict[Path, None] = {}
    for path in paths:
        for file in _matches(str(path)):
            found.setdefault(file, None)
    return list(found)


def _matches(path: str) -> list[Path]:
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.parquet") if f.is_file())
        if not files:
            raise LakeError(f"{path}: no *.parquet files in this folder or below; pass the folder that holds "
                            "the exported Parquet files, or the files themselves")
        return files
    if p.is_file():
        return [p]
    if any(c in path for c in _GLOB_CHARS):
        files = sorted(Path(f) for f in glob.glob(str(p), recursive=True) if Path(f).is_file())
        if not files:
            raise LakeError(f"{path}: the pattern matches no file; check it (quote it so that the shell leaves "
                            "it to trackerhealth, and use ** to search sub-folders)")
        return files
    raise LakeError(f"{path}: no such file or folder")


# -- recognising the layout ------------------------------------------------------------------------
def _find(names: dict[str, str], candidates: Sequence[str]) -> str | None:
    return next((names[c] for c in candidates if c in names), None)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def layout_of(schema: pa.Schema, path: Path | str = "") -> Layout:
    """The layout a Parquet schema holds, or LakeError naming the accepted ones."""
    names = {n.lower(): n for n in reversed(schema.names)}  # the first spelling wins on a clash
    run = _find(names, RUN_NAMES)
    if run is None:
        raise LakeError(f"{path}: no run column (looked for {', '.join(RUN_NAMES)}); a Parquet lake needs {LAYOUTS}")
    step = _find(names, STEP_NAMES)
    if step is None:
        raise LakeError(f"{path}: no step column (looked for {', '.join(STEP_NAMES)}); a Parquet lake needs {LAYOUTS}")
    time = _find(names, TIME_NAMES)
    project = _find(names, PROJECT_NAMES)
    label = _find({k: v for k, v in names.items() if v != run}, RUN_LABEL_NAMES)
    key, value = _find(names, KEY_NAMES), _find(names, VALUE_NAMES)
    common = {"run": run, "step": step, "time": time, "project": project, "label": label}
    if key is not None and value is not None and key not in (run, label):
        if not _numeric(schema.field(value).type):
            raise LakeError(f"{path}: the value column {value!r} holds {schema.field(value).type}, not numbers; "
                            f"a Parquet lake needs {LAYOUTS}")
        return Layout(key=key, value=value, is_nan=names.get(IS_NAN), **common)
    used = set(common.values())
    # W&B's own columns (_runtime, _wandb...) start with an underscore: they are not training metrics.
    metrics = tuple(f.name for f in schema if f.name not in used and not f.name.startswith("_") and _numeric(f.type))
    if not metrics:
        raise LakeError(f"{path}: a run column but neither key/value columns nor numeric metric columns; "
                        f"a Parquet lake needs {LAYOUTS}")
    return Layout(metrics=metrics, **common)


def _read_schema(path: Path) -> pa.Schema:
    try:
        return pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise LakeError(f"{path}: not a readable Parquet file ({str(exc).strip().splitlines()[0][:200]}); "
                        "re-export it, or leave it out") from None


def open_lake(paths: Iterable[str | Path]) -> Lake:
    """The lake at ``paths``: every file must hold the same layout (a wide table's metric columns
    may differ from file to file; the lake has their union)."""
    paths = list(paths)
    files = find_files(paths)
    layouts = [(f, layout_of(_read_schema(f), f)) for f in files]
    first_file, layout = layouts[0]
    for file, other in layouts[1:]:
        if not other.same_roles(layout):
            raise LakeError(f"{file} and {first_file} lay their columns out differently ({other.columns()} vs "
                            f"{layout.columns()}); analyze them separately")
        layout = Layout(**{**layout.__dict__, "metrics": tuple(dict.fromkeys(layout.metrics + other.metrics))})
    return Lake(tuple(files), layout, _root(paths, files))


def _root(paths: list, files: list[Path]) -> Path:
    """The folder given, or the one the files share (their run's project when no column names one)."""
    folders = [Path(p).expanduser().resolve() if Path(p).expanduser().is_dir() else None for p in paths]
    if len(folders) == 1 and folders[0] is not None:
        return folders[0]
    return Path(os.path.commonpath([str(f.resolve().parent) for f in files]))


def is_lake(paths: Iterable[str | Path]) -> bool:
    """Whether every path is lake input: a Parquet file (or a folder, or a glob, holding only Parquet
    metrics files) whose schema has a run column. Other input is read file by file, as before
    lakes existed. Reads schemas only."""
    from ..adapters.files._walk import walk

    paths = list(paths)
    for path in paths:
        p = Path(path).expanduser()
        if p.is_dir():
            found = walk(p)
            # A folder that also holds other logs (CSV, MLflow runs, TensorBoard) is not a lake.
            if found.mlflow_runs or found.wandb_runs or found.event_runs or not found.files:
                return False
            if any(f.suffix.lower() != ".parquet" for f in found.files):
                return False
        try:
            matched = _matches(str(path))
        except LakeError:
            return False
        if not all(f.suffix.lower() == ".parquet" and _has_run_column(f) for f in matched):
            return False
    return bool(paths)


def _has_run_column(path: Path) -> bool:
    try:
        names = {n.lower() for n in pq.read_schema(path).names}
    except (pa.ArrowException, OSError):
        return False  # left to the file reader, which says what is wrong with it
    return any(n in names for n in RUN_NAMES)


# -- one run's rows as a history (both engines) ----------------------------------------------------
def _floats(col: pd.Series) -> np.ndarray:
    """Numbers as float64 with null as NaN, whatever pandas dtype the rows came in (NumPy, nullable
    or Arrow-backed: Ray Data hands Arrow-backed frames, pyarrow's to_pandas NumPy ones)."""
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _clock(col: pd.Series) -> np.ndarray:
    """Wall times in unix seconds: a timestamp type (Databricks) or numbers in s/ms/us/ns (MLflow: ms)."""
    if pd.api.types.is_datetime64_any_dtype(col.dtype) or (
            isinstance(col.dtype, pd.ArrowDtype) and pa.types.is_timestamp(col.dtype.pyarrow_dtype)):
        stamps = pd.to_datetime(col, utc=True)
        return ((stamps - pd.Timestamp(0, tz="UTC")) / pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64,
                                                                                         na_value=np.nan)
    return seconds(_floats(col))


def _first(col: pd.Series | None) -> str | None:
    """The column's first value as text (an id read back as float from a column with nulls: 3.0 -> 3)."""
    if col is None:
        return None
    present = col.dropna()
    if present.empty:
        return None
    value = present.iloc[0]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _long_rows(frame: pd.DataFrame, layout: Layout) -> tuple[pd.DataFrame, list[str]]:
    """``step, key, value, time`` rows (floats and text) of one run, and what was worked around."""
    notes: list[str] = []
    time = _clock(frame[layout.time]) if layout.time else np.full(len(frame), np.nan)
    if layout.wide:
        wide = pd.DataFrame({"step": _floats(frame[layout.step]), "time": time})
        for name in layout.metrics:
            wide[name] = _floats(frame[name]) if name in frame else np.nan
        # In a wide export a blank cell is "not logged in this row" (W&B leaves every metric not
        # logged at that call blank); a NaN cannot be told from a blank once pandas wrote it.
        rows = wide.melt(id_vars=["step", "time"], value_vars=list(layout.metrics), var_name="key")
        return rows[rows["value"].notna()], notes
    keys = frame[layout.key]
    values = _floats(frame[layout.value])
    if layout.is_nan:
        # MLflow stores a NaN as value 0 with is_nan true: the flag is the value.
        flagged = frame[layout.is_nan].fillna(False).to_numpy(dtype=bool)
        values = np.where(flagged, np.nan, values)
    blank = int(frame[layout.value].isna().sum())
    if blank:
        # A row exists because a value was logged: pandas >= 3 with pyarrow writes NaN as null.
        notes.append(f"{blank} row(s) with an empty value read as NaN (a long table's row is a logged value; "
                     "pandas writes NaN as null)")
    rows = pd.DataFrame({"step": _floats(frame[layout.step]), "key": keys.to_numpy(dtype=object, na_value=None),
                         "value": values, "time": time})
    no_key = rows["key"].isna()
    if no_key.any():
        notes.append(f"{int(no_key.sum())} row(s) without a key ignored")
        rows = rows[~no_key]
    rows["key"] = rows["key"].astype(str)
    return rows, notes


def run_history(frame: pd.DataFrame, layout: Layout, lake: Lake) -> RunHistory:
    """One run's rows (any order, from any files) as its history: what both engines analyse."""
    rows, notes = _long_rows(frame, layout)
    no_step = int(rows["step"].isna().sum())
    if no_step:
        notes.append(f"{no_step} row(s) without a step in column {layout.step!r} ignored")
    # Rows arrive in file, row-group or shuffle order: sorting on every column gives one order,
    # so that the last of two values logged at the same step is the same for both engines.
    rows = rows.sort_values(["step", "time", "key", "value"], kind="stable", na_position="last")
    run_id = _first(frame[layout.run]) or NO_RUN
    project = (_first(frame[layout.project]) if layout.project else None) or lake.project
    name = (_first(frame[layout.label]) if layout.label else None) or run_id
    ref = RunRef(TRACKER, project, run_id, name, source=str(lake.root))
    history = RunHistory.from_long(ref, rows["step"].to_numpy(), pd.Categorical(rows["key"]),
                                   rows["value"].to_numpy(), rows["time"].to_numpy())
    # The reader's notes ahead of the schema's own, as for every file the adapters read.
    return RunHistory(ref, {k: history[k] for k in history.keys()}, (*notes, *history.notes))


# -- in this process ---------------------------------------------------------------------------------
def analyze_lake(paths: Iterable[str | Path], config: Config | None = None) -> list[HealthReport]:
    """One report per run of the lake at ``paths``, ordered by run id, in this process."""
    lake = open_lake(paths)
    reports = [analyze(run_history(frame, lake.layout, lake), config) for frame in _run_frames(lake)]
    return sorted(reports, key=lambda r: r.run.id)


def _run_frames(lake: Lake) -> Iterator[pd.DataFrame]:
    """Each run's rows, as soon as the last file holding that run has been read.

    Memory holds the runs that are still open, not the lake: a run split over date partitions
    waits only until its last partition."""
    run = lake.layout.run
    last_file = {}
    for i, file in enumerate(lake.files):
        for label in _run_labels(file, run):
            last_file[label] = i
    pending: dict[object, list[pd.DataFrame]] = {}
    for i, file in enumerate(lake.files):
        for frame in _batches(file, lake.layout):
            for label, part in frame.groupby(run, sort=False, dropna=False):
                pending.setdefault(_label(label), []).append(part)
        for label in [k for k in pending if last_file.get(k) == i]:
            yield pd.concat(pending.pop(label), ignore_index=True)
    for parts in pending.values():  # none expected; never lose rows over a label mismatch
        yield pd.concat(parts, ignore_index=True)


def _label(value) -> object:
    return None if pd.isna(value) else str(value)


def _run_labels(file: Path, run: str) -> set:
    try:
        col = pq.read_table(file, columns=[run]).column(run).unique().to_pylist()
    except (pa.ArrowException, OSError) as exc:
        raise _damaged(file, exc) from None
    return {None if v is None else str(v) for v in col}


def _batches(file: Path, layout: Layout) -> Iterator[pd.DataFrame]:
    """The lake's columns of ``file``, batch by batch (a wide file may lack some metrics)."""
    try:
        parquet = pq.ParquetFile(file)
        present = set(parquet.schema_arrow.names)
        columns = [c for c in layout.columns() if c in present]
        for batch in parquet.iter_batches(columns=columns):
            yield batch.to_pandas()
    except (pa.ArrowException, OSError) as exc:
        raise _damaged(file, exc) from None


def _damaged(file: Path, exc: Exception) -> LakeError:
    return LakeError(f"{file}: could not be read ({str(exc).strip().splitlines()[0][:200]}); it may be "
                     "truncated or damaged: re-export it, or leave it out")


# -- with Ray Data -----------------------------------------------------------------------------------
def analyze_lake_ray(paths: Iterable[str | Path], config: Config | None, address: str) -> list[HealthReport]:
    """The same reports as :func:`analyze_lake`, grouped by run with Ray Data on the cluster at
    ``address`` (``local``, ``auto``, ``HOST:PORT``, ``ray://HOST:10001``); each run is analysed on
    a worker, which needs trackerhealth installed. Raises RayMissing / RayUnreachable (ray_connect)."""
    from .ray_connect import connect

    lake = open_lake(paths)
    session = connect(address)
    try:
        return _ray_reports(lake, config or Config())
    finally:
        session.close()


def _ray_reports(lake: Lake, config: Config) -> list[HealthReport]:
    import ray

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # stdout/stderr carry the report, not Ray's progress
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    # partitioning=None: the rows are the files' own, as in one process (no hive columns added).
    ds = ray.data.read_parquet([str(f) for f in lake.files], partitioning=None).select_columns(lake.layout.columns())
    # A few groups' partitions per CPU keep every core busy without Ray's default of 200.
    partitions = max(1, 2 * int(ray.cluster_resources().get("CPU", 1)))
    analysed = ds.groupby(lake.layout.run, num_partitions=partitions).map_groups(
        functools.partial(_analyze_group, lake=lake, config=config), batch_format="pandas")
    reports = [HealthReport.from_dict(json.loads(row["report"])) for row in analysed.take_all()]
    return sorted(reports, key=lambda r: r.run.id)


def _analyze_group(frame: pd.DataFrame, *, lake: Lake, config: Config) -> pd.DataFrame:
    """On a worker: one run's rows -> its report, as JSON text (a report is not a Ray column type)."""
    report = analyze(run_history(frame, lake.layout, lake), config)
    return pd.DataFrame({"run": [report.run.id], "report": [json.dumps(report.to_dict(full=True))]})
