"""Arrow columns as float arrays, keeping "not logged" (a blank) apart from a logged NaN.

Every tabular reader ends in a :class:`pyarrow.Table`; these helpers turn one of its columns into
``present`` (a value was logged in that row) and ``values`` (float64; NaN/Inf kept as logged).
Text that is not a number ("abc", "12h:03m") is counted and left out rather than turned into a
NaN, so that a stray string never reads as a diverged loss.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# Spellings of a logged non-finite value; any other non-number text is not a value.
NONFINITE_TOKENS = ("nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")
# Cells that mean "nothing logged here" (never "nan": that one is a value).
NULL_TOKENS = ("", "null", "NULL", "None", "none", "NA", "N/A", "n/a", "#N/A", "<NA>")


@dataclass
class Numeric:
    """One column as numbers: ``present`` rows hold a value (possibly NaN/Inf) in ``values``."""

    present: np.ndarray
    values: np.ndarray
    n_text: int = 0  # cells holding text that is not a number (left out of ``present``)
    example: str = ""  # one such cell, for the note
    text: np.ndarray | None = None  # which rows hold such text (None: no row does)

    def blank(self) -> np.ndarray:
        """Rows holding nothing at all (null or an empty cell): not text, not a number."""
        return ~self.present if self.text is None else ~self.present & ~self.text

    @property
    def n_numbers(self) -> int:
        return int(self.present.sum())

    def note(self, column: str) -> str:
        if not self.n_text:
            return ""
        return f"{self.n_text} non-numeric value(s) in column '{column}' ignored (e.g. {self.example!r})"


def _flat(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    return col


def _valid(col: pa.Array) -> np.ndarray:
    if col.null_count == 0:
        return np.ones(len(col), dtype=bool)
    return col.is_valid().to_numpy(zero_copy_only=False)


def to_numeric(col: pa.ChunkedArray | pa.Array, *, clock: bool = False) -> Numeric | None:
    """The column as numbers, or None when it holds no numbers at all (text, bools, nested data).

    Date-time columns count only when ``clock`` (a wall-time column): as unix seconds.
    """
    col = _flat(col)
    t = col.type
    if pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        col, t = col.cast(pa.string()), pa.string()
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        present = _valid(col)
        if not pa.types.is_float64(t):
            col = col.cast(pa.float64())
        values = col.to_numpy(zero_copy_only=False)
        return Numeric(present, np.asarray(values, dtype=np.float64))
    if pa.types.is_timestamp(t) and clock:
        present = _valid(col)
        values = col.cast(pa.timestamp("ns", tz=t.tz)).cast(pa.int64()).to_numpy(zero_copy_only=False)
        return Numeric(present, np.asarray(values, dtype=np.float64) / 1e9)
    if pa.types.is_string(t):
        return _text_to_numeric(col)
    return None


def _text_to_numeric(col: pa.Array) -> Numeric | None:
    trimmed = pc.utf8_trim_whitespace(col)
    blank = pc.is_in(trimmed, value_set=pa.array(NULL_TOKENS)).fill_null(True)
    present = _valid(col) & ~blank.to_numpy(zero_copy_only=False)
    values = pd.to_numeric(pd.Series(trimmed.to_numpy(zero_copy_only=False), dtype=object), errors="coerce")
    values = values.to_numpy(dtype=np.float64, na_value=np.nan)
    nonfinite_token = pc.is_in(pc.utf8_lower(trimmed), value_set=pa.array(NONFINITE_TOKENS)).fill_null(False)
    nonfinite_token = nonfinite_token.to_numpy(zero_copy_only=False)
    text = present & np.isnan(values) & ~nonfinite_token
    n_text = int(text.sum())
    present &= ~text
    if not present.any():
        return None
    if n_text > present.sum():
        return None  # a text column with the odd number in it, not a metric
    example = str(trimmed[int(np.flatnonzero(text)[0])].as_py()) if n_text else ""
    return Numeric(present, values, n_text, example[:40], text if n_text else None)


def records_to_table(rows: list[dict], notes: list[str] | None = None) -> pa.Table:
    """Rows of parsed JSON as a table: numeric columns float64 with nulls where a key is absent.

    A column mixing numbers with text becomes text (numbers written back as ``repr``, NaN as
    ``nan``) so that :func:`to_numeric` can count the text cells; nested values become JSON text.
    An integer beyond float64's range (``10**400``) becomes ±Inf, as ``float("1e400")`` and the
    CSV reader make it; ``notes`` (when given) is told how many.
    """
    n = len(rows)
    order: dict[str, None] = {}
    for row in rows:
        for key in row:
            order.setdefault(key, None)
    arrays, names = [], []
    for key in order:
        cells = [row.get(key) for row in rows]
        if all(c is None or (isinstance(c, (int, float)) and not isinstance(c, bool)) for c in cells):
            present = np.fromiter((c is not None for c in cells), dtype=bool, count=n)
            try:
                values = np.fromiter((math.nan if c is None else c for c in cells), dtype=np.float64, count=n)
            except OverflowError:
                values, huge = _floats_saturated(cells)
                if notes is not None:
                    notes.append(f"{huge} integer(s) in '{key}' too large for a float (over 1.8e308) read as ±Inf")
            arrays.append(pa.array(values, mask=~present))
        else:
            arrays.append(pa.array([None if c is None else _as_text(c) for c in cells], type=pa.string()))
        names.append(str(key))
    return pa.Table.from_arrays(arrays, names=names) if names else pa.table({})


def _floats_saturated(cells: list) -> tuple[np.ndarray, int]:
    """Cells as float64, integers beyond its range as ±Inf (Python's ``float()`` raises on them)."""
    out = np.empty(len(cells), dtype=np.float64)
    huge = 0
    for i, c in enumerate(cells):
        if c is None:
            out[i] = math.nan
            continue
        try:
            out[i] = c
        except OverflowError:
            out[i] = math.inf if c > 0 else -math.inf
            huge += 1
    return out, huge


def _as_text(cell: object) -> str:
    if isinstance(cell, str):
        return cell
    if isinstance(cell, bool):
        return "true" if cell else "false"
    if isinstance(cell, float):
        return repr(cell)  # nan / inf / -inf: read back as logged non-finite values
    if isinstance(cell, (dict, list)):
        return json.dumps(cell)
    return str(cell)
