"""A table (from CSV, JSON lines, Parquet or a JSON document) as one or more run histories.

Two layouts are understood:

* **long** -- one row per logged value: a step column, a key column (``key``/``metric``/``tag``/
  ``name``), a ``value`` column and optionally a wall-time column; a row exists because a value
  was logged, so an empty or null value is a logged NaN (how pandas writes NaN to CSV and JSON,
  and with pandas >= 3 and pyarrow to Parquet);
* **wide** -- one row per logging call: a step column plus one column per metric; a blank cell
  means "not logged in this row", an explicit ``nan``/``inf`` is a logged value.

A ``run``/``run_id`` column splits the table into several runs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...schema import RunHistory
from ._columns import Numeric, to_numeric
from ._common import Origin, build_history, categorical, seconds, unique_names
from ._errors import InputError, NotMetrics

STEP_NAMES = ("step", "global_step", "_step", "iteration", "iter", "trainer/global_step", "train/global_step", "epoch")
KEY_NAMES = ("key", "metric", "tag", "name", "metric_name", "metric_key")
VALUE_NAMES = ("value",)
RUN_NAMES = ("run", "run_id", "run_name")
WALL_NAMES = ("wall_time", "walltime", "_timestamp", "_wall_time")
# Names that are a wall clock in a long table but, in a wide one, are often a duration metric
# (detectron2 logs ``time`` = seconds per iteration): there they must look like unix times.
MAYBE_WALL_NAMES = ("timestamp", "time", "date", "datetime")
_UNIX_1990 = 6.3e8

STEP_HINT = "pass --step-column NAME if your step column has another name"
LAYOUT_HINT = (
    "expected a long table with columns step,key,value or a wide table with a step column and "
    "one numeric column per metric"
)


def _norm(name: str) -> str:
    return name.strip().lstrip("\ufeff").lower().replace(" ", "_").replace("-", "_")


class _Columns:
    """Column lookup by the loose spellings people use (``Step``, ``Wall time``, ``global-step``)."""

    def __init__(self, table: pa.Table):
        self.names = list(table.column_names)
        self.by_norm: dict[str, str] = {}
        for name in self.names:
            self.by_norm.setdefault(_norm(name), name)

    def find(self, candidates: tuple[str, ...]) -> str | None:
        for cand in candidates:
            if cand in self.by_norm:
                return self.by_norm[cand]
        return None

    def explicit(self, path, name: str) -> str:
        if name in self.names:
            return name
        if _norm(name) in self.by_norm:
            return self.by_norm[_norm(name)]
        shown = ", ".join(self.names[:20]) + (" ..." if len(self.names) > 20 else "")
        raise InputError(path, f"step column {name!r} (from --step-column) not found; the columns are: {shown}")


def table_histories(
    table: pa.Table,
    origin: Origin,
    *,
    step_column: str | None = None,
    split_restarts: bool = False,
    require_step: bool = False,
    notes: tuple[str, ...] = (),
) -> list[RunHistory]:
    """All runs in ``table``.

    ``split_restarts``: where an ``epoch`` or ``iteration`` step falls back to its start, a new run
    begins (Keras' CSVLogger with ``append=True`` and detectron2 append each training to the same file). ``require_step``: a wide table
    without a step column is not a metrics log (used when walking folders full of other CSVs).
    """
    if table.num_columns == 0:
        raise NotMetrics(origin.path, f"no columns found; {LAYOUT_HINT}")
    table = table.rename_columns(unique_names(n.strip().lstrip("\ufeff") for n in table.column_names))
    cols = _Columns(table)
    step = cols.explicit(origin.path, step_column) if step_column else cols.find(STEP_NAMES)
    key, value = cols.find(KEY_NAMES), cols.find(VALUE_NAMES)
    if table.num_rows == 0:
        return [RunHistory(origin.ref(), {}, notes + ("the file has a header but no rows: nothing was logged yet",))]
    if key is not None and value is not None and key != step and value != step:
        return _long(table, cols, origin, step, key, value, notes)
    index = _pandas_index(table)
    if index is not None:
        # pandas' to_csv writes the frame's index as a first column with an empty header ("Unnamed: 0" once
        # re-read and re-written): it numbers the rows and is no metric (public logs P251, P254). Without a
        # step column it is the step; a folder walk still asks for a named one (require_step), since any
        # DataFrame saved with its defaults has this column.
        if step is None and not require_step:
            step = index
            notes = notes + ("the first column has no name and numbers the rows 0, 1, 2, ... (pandas' index, which "
                             f"to_csv writes by default): read as the step — {STEP_HINT}",)
        else:
            table = table.drop_columns([index])
            cols = _Columns(table)
    return _wide(table, cols, origin, step, split_restarts, require_step, notes)


def _pandas_index(table: pa.Table) -> str | None:
    """The name of a first column that is pandas' index — headed "" or "Unnamed: 0" and holding the
    integers 0, 1, 2, … in order — else None."""
    name = table.column_names[0]
    if table.num_columns < 2 or _norm(name) not in ("", "unnamed:_0"):
        return None
    col = table.column(0)
    if col.null_count or not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        return None
    values = np.asarray(col.to_numpy(), dtype=np.float64)
    return name if np.array_equal(values, np.arange(len(values), dtype=np.float64)) else None


# -- long ---------------------------------------------------------------------------------------
def _keys(col: pa.ChunkedArray) -> pd.Categorical:
    """The key column as a Categorical, hashing each distinct key once (in Arrow), not per row."""
    if not pa.types.is_dictionary(col.type):
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            col = col.cast(pa.string())
        col = pc.dictionary_encode(col)
    series = col.to_pandas()  # Arrow unifies the chunks' dictionaries
    cat = series.array if isinstance(series, pd.Series) else series
    return pd.Categorical.from_codes(
        np.asarray(cat.codes), categories=pd.Index([str(c) for c in cat.categories], dtype=object)
    )


def _plain_numbers(col: pa.ChunkedArray) -> bool:
    return col.null_count == 0 and (pa.types.is_integer(col.type) or pa.types.is_floating(col.type))


def _long_chunked(table, cols, origin, step, key, value, notes) -> list[RunHistory] | None:
    """The common large case — dictionary keys, numeric columns, nothing missing, one run — read
    row group by row group without combining any column (10^7 rows: four fewer full copies).
    None when the table needs the general path."""
    wall_name = cols.find(WALL_NAMES + MAYBE_WALL_NAMES)
    kcol = table.column(key)
    if step is None or cols.find(RUN_NAMES) is not None or not pa.types.is_dictionary(kcol.type) or kcol.null_count:
        return None
    numeric = [step, value] + ([wall_name] if wall_name else [])
    if not all(_plain_numbers(table.column(c)) for c in numeric):
        return None
    if pa.types.is_floating(table.column(step).type) and not pc.all(pc.is_finite(table.column(step))).as_py():
        return None
    table = table.unify_dictionaries()
    batches = table.select([c for c in (step, key, value, wall_name) if c]).to_batches()
    if not batches:
        return None
    names = [str(x) for x in batches[0].column(1).dictionary.to_pylist()]

    def chunks():
        for b in batches:
            # Zero-copy views where Arrow allows; the wall-time unit is judged per batch like the
            # general path does for the whole column.
            wall = seconds(b.column(3).to_numpy()) if wall_name else None
            yield b.column(0).to_numpy(), b.column(1).indices.to_numpy(), b.column(2).to_numpy(), wall

    extra = [c for c in cols.names if c not in {step, key, value, wall_name}]
    if extra:
        notes = list(notes) + [f"long table: column(s) {', '.join(extra[:10])} ignored"]
    history = RunHistory.from_chunks(origin.ref(), names, chunks())
    if notes:
        history = RunHistory(history.ref, {k: history[k] for k in history.keys()}, tuple(notes) + history.notes)
    return [history]


def _long(table, cols, origin, step, key, value, notes) -> list[RunHistory]:
    fast = _long_chunked(table, cols, origin, step, key, value, notes)
    if fast is not None:
        return fast
    notes = list(notes)
    path = origin.path
    keys = _keys(table.column(key))
    codes = keys.codes
    num = to_numeric(table.column(value))
    if num is None:
        raise InputError(path, f"long table: column {value!r} holds no numbers; {LAYOUT_HINT}")
    if num.note(value):
        notes.append(num.note(value))
    num = _blank_values_as_nan(num, codes, notes)
    keep = num.present & (codes >= 0)
    if step is not None:
        steps = _step_numbers(table.column(step), path, step)
        if steps.dtype.kind == "f":
            _note_dropped(notes, keep, np.isfinite(steps), step)
    else:
        # Without a step column each key's own count of logged values is its step.
        steps = pd.Series(codes).groupby(codes).cumcount().to_numpy(dtype=np.float64)
        notes.append(f"no step column found (looked for {', '.join(STEP_NAMES)}); each key's value count "
                     f"is used as its step — {STEP_HINT}")
    wall = _long_wall(table, cols)
    run = cols.find(RUN_NAMES)
    used = {step, key, value, run, cols.find(WALL_NAMES + MAYBE_WALL_NAMES)}
    extra = [c for c in cols.names if c not in used]
    if extra:
        notes.append(f"long table: column(s) {', '.join(extra[:10])} ignored")
    out = []
    all_kept = bool(keep.all())
    for part, rows in _groups(table, run, origin):
        if rows is None and all_kept:
            sub_keys, sub = keys, slice(None)  # every row is used: no 10^7-row index to build
        else:
            idx = np.flatnonzero(keep if rows is None else keep & rows)
            sub_keys, sub = categorical(codes[idx], list(keys.categories)), idx
        out.append(build_history(part, steps[sub], sub_keys, num.values[sub],
                                 None if wall is None else wall[sub], notes))
    return out


def _blank_values_as_nan(num: Numeric, codes: np.ndarray, notes: list[str]) -> Numeric:
    """In a long table a row exists only because a value was logged, so an empty value is a
    non-finite one: pandas writes NaN as an empty CSV cell, ``to_json`` writes NaN and Inf as
    null, and pandas >= 3 with pyarrow writes a float NaN to Parquet as null. (In a wide table a
    blank cell means "not logged in this row" and stays out.)"""
    blank = num.blank() & (codes >= 0)
    n_blank = int(blank.sum())
    if not n_blank:
        return num
    values = num.values.copy()
    values[blank] = np.nan
    notes.append(f"{n_blank} row(s) with an empty value read as NaN (a long table's row is a logged "
                 "value; pandas writes NaN as an empty cell or null)")
    return Numeric(num.present | blank, values, num.n_text, num.example, num.text)


def _long_wall(table, cols) -> np.ndarray | None:
    name = cols.find(WALL_NAMES + MAYBE_WALL_NAMES)
    if name is None:
        return None
    num = to_numeric(table.column(name), clock=True)
    if num is None:
        return None
    return seconds(np.where(num.present, num.values, np.nan))


# -- wide ---------------------------------------------------------------------------------------
def _wide(table, cols, origin, step, split_restarts, require_step, notes) -> list[RunHistory]:
    notes = list(notes)
    path = origin.path
    n = table.num_rows
    wall_name, wall = _wide_wall(table, cols)
    run = cols.find(RUN_NAMES)
    metrics: list[tuple[str, Numeric]] = []
    skipped = []
    restarts: list[np.ndarray] = []  # row masks of the trainings appended to one file, when there are several
    for name in cols.names:
        if name in (step, wall_name, run):
            continue
        num = to_numeric(table.column(name))
        if num is None:
            if table.column(name).null_count < n:
                skipped.append(name)
            continue
        if num.note(name):
            notes.append(num.note(name))
        stopped = _stopped_logging(num)
        if stopped is not None:
            notes.append(f"'{name}' is blank in every row from row {stopped + 1} of {n} on, after a value in every "
                         "row before: read as not logged — if it went NaN there, the file was written with NaN "
                         "as a blank cell (pandas' default); write it with na_rep='nan' to keep NaN")
        metrics.append((name, num))
    if not metrics:
        raise NotMetrics(path, f"no numeric metric columns found; {LAYOUT_HINT} — {STEP_HINT}")
    if step is None:
        if require_step:
            raise NotMetrics(path, f"no step column found (looked for {', '.join(STEP_NAMES)}) — {STEP_HINT}")
        steps = np.arange(n, dtype=np.float64)
        notes.append(f"no step column found (looked for {', '.join(STEP_NAMES)}); the row number is used "
                     f"as the step — {STEP_HINT}")
    else:
        steps = _step_numbers(table.column(step), path, step)
        _note_dropped(notes, np.ones(n, dtype=bool), np.isfinite(steps), step)
        # An epoch (or detectron2 iteration) counter that falls back to its start begins another training
        # appended to the same file (Keras' CSVLogger(append=True)); a step that merely repeats within an
        # epoch (``epoch, batch`` rows) never falls back, so it is not split.
        if split_restarts and run is None and _norm(step) in RESTART_STEPS:
            restarts = _restart_segments(steps)
        if _norm(step) == "epoch" and run is None and len(restarts) > 1:
            steps = steps.copy()  # the column's numbers may be a read-only view of the table
            for rows in restarts:  # each training's repeated epochs are spread within that training only
                steps[rows], _ = _spread_within_epochs(steps[rows])
        elif _norm(step) == "epoch" and run is None:
            steps, epochs = _spread_within_epochs(steps)
            if epochs:
                notes.append(f"the step column '{step}' repeats ({int(np.isfinite(steps).sum())} rows over {epochs} "
                             "epochs): each epoch's rows are spread evenly over it in file order, so every row is "
                             f"kept — {STEP_HINT}")
    names = [name for name, _ in metrics]
    if len(names) == 1 and _norm(names[0]) in VALUE_NAMES:
        names = [origin.name]  # TensorBoard's CSV download: Wall time,Step,Value for one tag
    groups = list(_groups(table, run, origin))
    if len(restarts) > 1:
        groups = [(origin.part(i + 1), rows) for i, rows in enumerate(restarts)]
        notes.append(f"the step counter '{step}' starts over {len(groups) - 1} time(s): read as {len(groups)} "
                     "runs appended to one file")
    attributes, ignored = _run_attributes(table, skipped, [rows for _, rows in groups])
    if attributes:
        notes.append(f"text column(s) with one value per run read as the run's attributes (its config; "
                     f"analyze --group-by NAME): {_listed(list(attributes))}")
    if ignored:
        notes.append(f"non-numeric column(s) ignored: {_listed(ignored)}")
    out = []
    for i, (part, rows) in enumerate(groups):
        found = {name: values[i] for name, values in attributes.items() if values[i] is not None}
        if found:
            part = dataclasses.replace(part, config={**part.config, **found})
        out.append(_wide_history(part, steps, wall, metrics, names, rows, notes))
    return out


# Step columns whose falling back to their start means a new training: an epoch count never restarts
# within one run; detectron2's iteration does when a new run is appended to metrics.json.
RESTART_STEPS = ("epoch", "iteration")


def _spread_within_epochs(steps: np.ndarray) -> tuple[np.ndarray, int]:
    """An epoch column that counts epochs, not the batches logged in them (``Epoch,Batch,Gen Loss``:
    21 rows per epoch): each row becomes ``epoch + i / rows_in_epoch`` in file order, and the number of
    epochs is returned; steps that are mostly distinct (an epoch per row, the odd re-logged row) come
    back unchanged with 0. Without this, a re-logged step keeps its last value, which here would keep
    one row in 21."""
    finite = np.flatnonzero(np.isfinite(steps))
    values, inverse, counts = np.unique(steps[finite], return_inverse=True, return_counts=True)
    if len(finite) < 2 * len(values):
        return steps, 0
    order = np.argsort(inverse, kind="stable")  # rows grouped by epoch, file order within each
    first_of_group = np.concatenate(([0], np.cumsum(counts)[:-1]))
    within = np.empty(len(finite), dtype=np.float64)
    within[order] = np.arange(len(finite)) - np.repeat(first_of_group, counts)
    spread = steps.astype(np.float64, copy=True)
    spread[finite] = steps[finite] + within / counts[inverse]
    return spread, len(values)


def _listed(names: list[str]) -> str:
    return ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def _run_attributes(table, names: list[str], groups: list) -> tuple[dict[str, list], list[str]]:
    """The text columns that hold one value per run (``model``, ``dataset`` beside the metrics of a
    run column's runs): ``{name: [each run's value or None]}``, and the columns that vary within a
    run (ignored, as before)."""
    attributes, ignored = {}, []
    group_of = np.full(table.num_rows, -1, dtype=np.int64)  # each row's run, -1: in none
    for i, rows in enumerate(groups):
        group_of[slice(None) if rows is None else rows] = i
    for name in names:
        kind = table.column(name).type
        text = pa.types.is_string(kind) or pa.types.is_large_string(kind) or (
            pa.types.is_dictionary(kind) and (pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)))
        if not text:  # a struct, a list, bytes: no run attribute
            ignored.append(name)
            continue
        labels = _keys(table.column(name))
        codes, categories = np.asarray(labels.codes, dtype=np.int64), labels.categories
        # Each distinct (run, value) pair once, in one sort: no pass over the rows per run.
        valid = (codes >= 0) & (group_of >= 0)
        pairs = np.unique(group_of[valid] * len(categories) + codes[valid])
        runs_of = pairs // max(len(categories), 1)
        per_run = np.bincount(runs_of, minlength=len(groups))
        if per_run.max(initial=0) == 1:
            value = {int(r): str(categories[int(v)]) for r, v in zip(runs_of, pairs % len(categories), strict=True)}
            attributes[name] = [value.get(i) for i in range(len(groups))]
        else:
            ignored.append(name)
    return attributes, ignored


_MIN_ROWS_STOPPED = 5


def _stopped_logging(num: Numeric) -> int | None:
    """The row from which a column logged in every row before is blank to the end, or None.

    In a wide table a blank is "not logged", but a metric that stops for good while the rows go on
    is how a NaN looks after pandas writes it (``na_rep=''``): worth a note, not a guess."""
    present = num.present
    n = len(present)
    if n < 2 * _MIN_ROWS_STOPPED or present[-1] or not present[0]:
        return None
    first_blank = int(np.argmin(present))
    if first_blank < _MIN_ROWS_STOPPED or n - first_blank < _MIN_ROWS_STOPPED or present[first_blank:].any():
        return None
    blank = num.blank()
    return first_blank if blank[first_blank:].all() else None


def _wide_history(origin, steps, wall, metrics, names, rows, notes) -> RunHistory:
    finite_step = np.isfinite(steps)
    if rows is not None:
        finite_step = finite_step & rows
    idx_parts, code_parts = [], []
    for j, (_, num) in enumerate(metrics):
        idx = np.flatnonzero(num.present & finite_step)
        idx_parts.append(idx)
        code_parts.append(np.full(len(idx), j, dtype=np.int32))
    idx = np.concatenate(idx_parts)
    vals = np.concatenate([num.values[i] for (_, num), i in zip(metrics, idx_parts, strict=True)])
    codes = np.concatenate(code_parts)
    return build_history(origin, steps[idx], categorical(codes, names), vals,
                         None if wall is None else wall[idx], notes)


def _wide_wall(table, cols) -> tuple[str | None, np.ndarray | None]:
    name = cols.find(WALL_NAMES)
    if name is not None:
        num = to_numeric(table.column(name), clock=True)
        if num is not None:
            return name, seconds(np.where(num.present, num.values, np.nan))
    for cand in MAYBE_WALL_NAMES:
        name = cols.find((cand,))
        if name is None:
            continue
        col = table.column(name)
        num = to_numeric(col, clock=True)
        if num is None:
            continue
        wall = np.where(num.present, num.values, np.nan)
        finite = wall[np.isfinite(wall)]
        if pa.types.is_timestamp(col.type) or (len(finite) and np.median(finite) > _UNIX_1990):
            return name, seconds(wall)
    return None, None


# -- shared -------------------------------------------------------------------------------------
def _step_numbers(col: pa.ChunkedArray, path, name: str) -> np.ndarray:
    if pa.types.is_integer(col.type) and col.null_count == 0:
        # The common case: whole steps, none missing. Keep them integers (no cast, no mask); the
        # schema converts each metric's steps after grouping.
        return (col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)).to_numpy()
    num = to_numeric(col)
    if num is None:
        raise InputError(path, f"step column {name!r} holds no numbers — {STEP_HINT}")
    return num.values if num.present.all() else np.where(num.present, num.values, np.nan)


def _note_dropped(notes: list[str], rows: np.ndarray, ok: np.ndarray, step: str) -> None:
    dropped = int((rows & ~ok).sum())
    if dropped:
        notes.append(f"{dropped} row(s) without a usable value in step column {step!r} ignored")


def _groups(table, run: str | None, origin: Origin):
    """(origin, row mask) per value of the run column; one group of all rows when there is none."""
    if run is None:
        yield origin, None
        return
    labels = _keys(table.column(run))
    codes = labels.codes
    for i, label in enumerate(labels.categories):
        if (codes == i).any():
            yield origin.labelled(str(label) or "(no run)"), codes == i
    if (codes < 0).any():
        yield origin.labelled("(no run)"), codes < 0


def _restart_segments(steps: np.ndarray) -> list[np.ndarray]:
    """Row masks of the runs in a file where the step counter falls back to its start."""
    n = len(steps)
    rows = np.flatnonzero(np.isfinite(steps))
    if len(rows) < 2:
        return [np.ones(n, dtype=bool)]
    s = steps[rows]
    drops = np.flatnonzero(s[1:] < s[:-1]) + 1
    starts = [0]
    for i in drops:
        if s[i] <= s[starts[-1]]:
            starts.append(int(i))
    if len(starts) == 1:
        return [np.ones(n, dtype=bool)]
    bounds = [rows[i] for i in starts] + [n]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        mask = np.zeros(n, dtype=bool)
        mask[lo:hi] = True
        out.append(mask)
    out[0][: bounds[0]] = True
    return out
