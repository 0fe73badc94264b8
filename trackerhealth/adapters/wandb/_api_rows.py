"""History rows as the W&B API returns them -> the long arrays :class:`RunHistory` is built from.

The mapping matches the local-folder reader (:mod:`._records`), so a run reads the same from its
``.wandb`` file and from the API:

* numeric values are kept (``NaN``/``Infinity`` whether they arrive as JSON numbers or strings);
  booleans, text and lists are skipped; a nested object without ``_type`` is flattened with ``/``;
* a histogram under ``gradients/…`` or ``parameters/…`` (what ``wandb.watch`` logs) becomes a
  ``grad_norm/<layer>`` / ``weight_norm/<layer>`` L2 estimate; other media objects are skipped;
* W&B's own ``_step``, ``_runtime``, ``_timestamp`` give the step and wall time;
* system metrics (``run.history(stream="system")`` rows, keys like ``system.gpu.0.gpu``) become
  ``system/gpu.0.gpu``, placed on the step axis by wall time through the history's own
  (time, step) pairs in log order (:mod:`._placement`, as for local folders).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from ._histogram import histogram_norm
from ._placement import place_on_steps

_SPECIAL = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf,
            "-Infinity": -math.inf, "-inf": -math.inf}
_OWN = {"_step", "_runtime", "_timestamp"}
SYSTEM_PREFIX = "system/"


def number(value) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return _SPECIAL.get(value)
    return None


@dataclass
class LongRows:
    """Columns of (step, key, value, wall time) in log order."""

    steps: list[float] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)

    def add(self, step: float, key: str, value: float, wall: float) -> None:
        self.steps.append(step)
        self.keys.append(key)
        self.values.append(value)
        self.walls.append(wall)

    def __len__(self) -> int:
        return len(self.steps)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (np.asarray(self.steps, dtype=np.float64), np.asarray(self.keys, dtype=object),
                np.asarray(self.values, dtype=np.float64), np.asarray(self.walls, dtype=np.float64))


def history_rows(rows: Iterable[Mapping], out: LongRows | None = None) -> LongRows:
    """Append the metric points of ``scan_history`` rows to ``out``."""
    out = out if out is not None else LongRows()
    for index, row in enumerate(rows):
        step = number(row.get("_step"))
        if step is None:
            step = float(index)
        wall = number(row.get("_timestamp"))
        wall = math.nan if wall is None else wall
        for key, value in row.items():
            if key in _OWN:
                continue
            _item(out, step, wall, key, value)
    return out


def _item(out: LongRows, step: float, wall: float, key: str, value) -> None:
    as_number = number(value)
    if as_number is not None:
        out.add(step, key, as_number, wall)
    elif isinstance(value, Mapping):
        if "_type" in value:
            found = histogram_norm((key,), value)
            if found is not None:
                out.add(step, found[0], found[1], wall)
            return
        for sub, inner in value.items():
            _item(out, step, wall, f"{key}/{sub}", inner)


def system_rows(events: Iterable[Mapping], history: LongRows) -> tuple[LongRows, str]:
    """System-metric points placed on the history's step axis by wall time (and a note if they
    could not be)."""
    out = LongRows()
    times, samples = [], []
    for row in events:
        wall = number(row.get("_timestamp"))
        if wall is None:
            continue
        items = [(k, number(v)) for k, v in row.items() if k not in _OWN]
        items = [(k, v) for k, v in items if v is not None]
        if items:
            times.append(wall)
            samples.append(items)
    if not times:
        return out, ""
    at, note = place_on_steps(times, history.walls, history.steps)
    for step, wall, items in zip(at, times, samples):
        for key, value in items:
            name = key.removeprefix("system.")
            out.add(float(step), SYSTEM_PREFIX + name, value, wall)
    return out, note


__all__ = ["SYSTEM_PREFIX", "LongRows", "history_rows", "number", "system_rows"]
