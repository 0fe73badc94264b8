"""Decode the records of a W&B transaction log into long rows, config, summary and run facts.

Record types used (``wandb.proto.wandb_internal_pb2.Record``):

* ``history`` — one row per ``wandb.log`` commit. Keys as logged; nested keys (SDK >= 0.2x writes
  ``nested_key`` parts, older SDKs a JSON object in ``value_json``) are joined with ``/``. The step
  is the ``_step`` item (else ``history.step.num``), the wall time ``_timestamp``; other keys that
  start with ``_`` are W&B's own (``_runtime``, ``_wandb``) and are not metrics. Values are read
  from ``value_json`` (numbers, ``NaN``, ``Infinity``) or the typed ``number``/``integer`` fields;
  booleans, text, lists and media objects (anything with a ``_type``) are skipped, except
  histograms under ``gradients/…`` or ``parameters/…`` (what ``wandb.watch`` logs), which become
  ``grad_norm/<layer>`` / ``weight_norm/<layer>`` L2 estimates (see :mod:`._histogram`). A
  derived key never replaces a key the run logged itself.
* ``stats`` — system metrics (``gpu.0.gpu``, ``cpu``, ``memory_percent``…), keyed
  ``system/<key>``, each sample with its own wall time. They are placed on the step axis by wall
  time: linear interpolation between the history rows logged around the sample (a fractional
  step), clamped to the first / last history step outside them. Interpolation rather than "the
  step of the last history row before it" keeps every sample of a long stall (evaluation, a
  stuck data loader) as its own point instead of collapsing them onto one step.
* ``run`` (id, project, display name, tags, config), ``config`` (later updates), ``summary``
  (updates merged in order; decoded only when asked for), ``exit`` (exit code).
"""

from __future__ import annotations

import importlib
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ._fast import Joined, join, numeric_mask, object_mask, parse_history, parse_numbers, peek
from ._histogram import histogram_norm
from ._placement import place_on_steps

INSTALL_HINT = "pip install 'trackerhealth[wandb]'"
_NUMBER_START = frozenset("-0123456789NI")  # JSON numbers, NaN, Infinity, -Infinity


class WandbMissing(ImportError):
    """The wandb package (for its protobuf classes) is not installed; the message says how to get it."""


def import_proto():
    """``wandb.proto.wandb_internal_pb2``, imported on first use: nothing else needs wandb."""
    try:
        wandb_internal_pb2 = importlib.import_module("wandb.proto.wandb_internal_pb2")
    except ImportError as exc:
        raise WandbMissing(
            f"reading W&B run folders needs the wandb package for its record format ({exc}); "
            f"install it with: {INSTALL_HINT}"
        ) from None
    return wandb_internal_pb2


class Decoded:
    """What the records of one log say: history and system rows as arrays, plus the run's facts."""

    def __init__(self, n_records: int) -> None:
        # Per record (history records only): its step and wall time (NaN until known).
        self.is_history = np.zeros(n_records, dtype=bool)
        self.steps = np.full(n_records, np.nan)
        self.times = np.full(n_records, np.nan)
        # Items decoded one by one (records the fast path did not take, JSON objects).
        self.sl_rec: list[int] = []
        self.sl_keys: list[str] = []
        self.sl_vals: list[Any] = []
        # Histogram-derived scalars: (history record index, key, value).
        self.derived: list[tuple[int, str, float]] = []
        # System metrics: per item key and raw value; per record its wall time and item count.
        self.s_keys: list[str] = []
        self.s_vals: list[Any] = []
        self.s_counts: list[int] = []
        self.s_times: list[float] = []
        self.run: Any = None  # the RunRecord
        self.config: dict[str, Any] = {}
        self.summary_raw: list[bytes] = []  # serialized summary records, decoded on demand
        self.exit_code: int | None = None
        self.sdk_version: str = ""
        self.unordered = False  # written by wandb-core: item order within a record is random
        self.undecodable = 0  # records with a good checksum that protobuf could not parse
        # Set by finish(): the history items as arrays (record index, key, value).
        self.items: tuple[np.ndarray, pd.Categorical, np.ndarray] | None = None

    def emit(self, record: int, key: str, value: Any) -> None:
        self.sl_rec.append(record)
        self.sl_keys.append(key)
        self.sl_vals.append(value)

    # -- rows as arrays -------------------------------------------------------------------------
    def history_rows(self) -> tuple[np.ndarray, pd.Categorical, np.ndarray, np.ndarray]:
        rec, keys, values = self.items
        return self.steps[rec], keys, values, self.times[rec]

    def stats_rows(self) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray, str]:
        """System-metric rows with steps placed by wall time (see the module docstring)."""
        times = np.asarray(self.s_times, dtype=np.float64)
        at, note = place_on_steps(times, self.times[self.is_history], self.steps[self.is_history])
        steps = np.repeat(at, self.s_counts)
        walls = np.repeat(times, self.s_counts)
        return steps, self.s_keys, _as_floats(self.s_vals), walls, note

    def summary(self) -> dict[str, Any]:
        """The run's summary: every summary update merged in log order, as nested dicts."""
        pb = import_proto()
        from google.protobuf.message import DecodeError

        flat: dict[tuple[str, ...], str] = {}
        records = []
        for raw in self.summary_raw:
            try:
                records.append(pb.Record.FromString(raw).summary)
            except DecodeError:
                continue  # counted and told about when the history was read
        if self.run is not None and self.run.HasField("summary"):
            records.insert(0, self.run.summary)
        for rec in records:
            for item in rec.update:
                flat[_path(item)] = item.value_json
            for item in rec.remove:
                path = _path(item)
                for p in [p for p in flat if p[: len(path)] == path]:
                    del flat[p]
        out: dict[str, Any] = {}
        for path, raw in flat.items():
            _set_nested(out, path, _loads(raw))
        return out

    # -- assembling ---------------------------------------------------------------------------
    def finish(self, joined: Joined, start: np.ndarray, end: np.ndarray, history: np.ndarray,
               read_slow) -> None:
        """Decode the history records (indices ``history``, spans ``start:end``): in bulk where
        the fast path takes them, one by one (``read_slow``) where it does not."""
        taken, step_field, items = parse_history(joined.buf, start[history], end[history])
        for r in history[~taken].tolist():
            read_slow(r)
        steps, times = self.steps, self.times
        taken_records = history[taken]
        unset = ~np.isfinite(steps[taken_records])
        steps[taken_records[unset]] = step_field[taken][unset]
        rec = history[items.record]
        names, codes = items.names, items.codes
        private = np.array([n[:1] == "_" for n in names], dtype=bool)
        # A record's `_step` item gives its step, else its `step` field (as in the slow path).
        for name, target in (("_step", steps), ("_timestamp", times)):
            if name in names:
                at = codes == names.index(name)
                found = parse_numbers(items.values.filter(pa.array(at)))
                finite = np.isfinite(found)
                target[rec[at][finite]] = found[finite]
        is_private = private[codes] if len(names) else np.zeros(len(codes), dtype=bool)
        for i in np.flatnonzero(object_mask(items.first) & ~is_private).tolist():
            _json_object(self, int(rec[i]), (names[codes[i]],), items.values[i].as_py())
        metric = numeric_mask(items.first) & ~is_private
        f_rec, f_codes = rec[metric], codes[metric]
        f_vals = parse_numbers(items.values.filter(pa.array(metric)))
        # Items decoded one by one join the bulk ones; log order is record order.
        if self.sl_keys:
            index = {n: i for i, n in enumerate(names)}
            for k in self.sl_keys:
                if k not in index:
                    index[k] = len(names)
                    names.append(k)
            s_codes = np.fromiter((index[k] for k in self.sl_keys), dtype=np.int64, count=len(self.sl_keys))
            all_rec = np.concatenate((f_rec, np.asarray(self.sl_rec, dtype=np.int64)))
            order = np.argsort(all_rec, kind="stable")
            f_rec = all_rec[order]
            f_codes = np.concatenate((f_codes, s_codes))[order]
            f_vals = np.concatenate((f_vals, _as_floats(self.sl_vals)))[order]
        _fill_steps(steps, self.is_history)
        self.items = (f_rec, pd.Categorical.from_codes(f_codes, categories=names) if names
                      else pd.Categorical([]), f_vals)


def _fill_steps(steps: np.ndarray, is_history: np.ndarray) -> None:
    """A history record with no ``_step`` (nor ``history.step``) follows the one before it."""
    previous = -1.0
    missing = set(np.flatnonzero(is_history & ~np.isfinite(steps)).tolist())
    if not missing:
        return
    for r in np.flatnonzero(is_history).tolist():
        if r in missing:
            steps[r] = previous + 1
        previous = steps[r]


def decode(payloads: list[bytes], bulk: bool = True) -> Decoded:
    """Parse the serialized ``Record`` s of one log and keep what the schema needs.

    ``bulk=False`` decodes every history record through protobuf (the reference the tests
    compare the fast path with)."""
    pb = import_proto()
    from google.protobuf.message import DecodeError

    record = pb.Record
    number = {f.name: f.number for f in record.DESCRIPTOR.fields}
    wanted = [number[k] for k in ("stats", "run", "config", "exit", "header", "telemetry")]
    records = payloads if isinstance(payloads, list) else list(payloads)
    out = Decoded(len(records))
    joined = join(records)
    kinds = np.array([f.number for f in record.DESCRIPTOR.oneofs_by_name["record_type"].fields])
    field, start, end = peek(joined, kinds)
    history = np.flatnonzero(field == number["history"])
    out.is_history[history] = True
    if not bulk:
        field[history] = -1
        history = history[:0]
    out.summary_raw = [records[i] for i in np.flatnonzero(field == number["summary"]).tolist()]
    slow = _history_reader(out)

    def parse(index: int):
        try:
            return record.FromString(records[index])
        except DecodeError:
            # A record that passed its checksum but is not a Record (a newer or foreign writer):
            # skip it, say so, and keep the rest of the run.
            out.undecodable += 1
            return None

    def read_slow(index: int, message=None) -> None:
        message = message or parse(index)
        if message is not None:
            out.is_history[index] = True
            slow(index, message.history)
        else:
            out.is_history[index] = False

    # The run's own facts, in log order (config updates apply in order); records the peek could
    # not classify are parsed whole.
    for i in np.flatnonzero(np.isin(field, wanted) | (field < 0)).tolist():
        rec = parse(i)
        if rec is not None:
            _other(out, rec, i, read_slow)
    out.finish(joined, start, end, history, read_slow)
    return out


def _other(out: Decoded, rec, index: int, read_slow) -> None:
    kind = rec.WhichOneof("record_type")
    if kind == "history":  # only when the peek could not classify the record
        read_slow(index, rec)
    elif kind == "summary":
        out.summary_raw.append(rec.SerializeToString())
    elif kind == "stats":
        _stats(out, rec.stats)
    elif kind == "run":
        _run(out, rec.run)
    elif kind == "config":
        _merge_config(out.config, rec.config)
    elif kind == "exit":
        out.exit_code = int(rec.exit.exit_code)
    elif kind == "header":
        producer = rec.header.version_info.producer
        out.sdk_version = producer.split("+")[0] or out.sdk_version
        # wandb-core (Go) writes a producer version; it also writes each step's keys in random order.
        out.unordered = bool(producer)
    elif kind == "telemetry" and not out.sdk_version:
        out.sdk_version = rec.telemetry.cli_version


# -- history, one record at a time -----------------------------------------------------------------
def _history_reader(out: Decoded):
    emit = out.emit
    number_start = _NUMBER_START

    def read(index: int, h) -> None:
        step = ts = None
        nested = None
        for item in h.item:
            nk = item.nested_key
            if nk:
                if len(nk) > 1:
                    if nested is None:
                        nested = []
                    nested.append(item)
                    continue
                key = nk[0]
            else:
                key = item.key
            vj = item.value_json
            if key[:1] == "_":
                if key == "_step":
                    step = vj or _typed(item)
                elif key == "_timestamp":
                    ts = vj or _typed(item)
                continue
            if vj:
                first = vj[0]
                if first in number_start:
                    emit(index, key, vj)
                elif first == "{":
                    _json_object(out, index, (key,), vj)
            else:
                value = _typed(item)
                if value is not None:
                    emit(index, key, value)
        if nested is not None:
            _nested_items(out, index, nested)
        step = math.nan if step is None else _number(step)
        if not math.isfinite(step) and h.HasField("step"):
            step = float(h.step.num)
        out.steps[index] = step
        out.times[index] = math.nan if ts is None else _number(ts)

    return read


def _nested_items(out: Decoded, index: int, items: list) -> None:
    """Items logged from nested dicts (SDK >= 0.2x flattens them into ``nested_key`` parts).

    A media object (histogram, image…) arrives as one item per field under its path, with a
    ``_type`` field: its numeric fields (an image's ``width``) are not metrics.
    """
    paths = [tuple(item.nested_key) for item in items]
    media: dict[tuple[str, ...], dict[str, Any]] = {p[:-1]: {} for p in paths if p[-1] == "_type"}
    for path, item in zip(paths, items):
        if path[0][:1] == "_":
            continue
        owner = next((path[:i] for i in range(len(path) - 1, 0, -1) if path[:i] in media), None)
        if owner is not None:
            if len(path) == len(owner) + 1:
                media[owner][path[-1]] = _loads(item.value_json) if item.value_json else _typed(item)
            continue
        vj = item.value_json
        if vj:
            if vj[0] in _NUMBER_START:
                out.emit(index, "/".join(path), vj)
            elif vj[0] == "{":
                _json_object(out, index, path, vj)
        else:
            value = _typed(item)
            if value is not None:
                out.emit(index, "/".join(path), value)
    for owner, obj in media.items():
        _media(out, index, owner, obj)


def _json_object(out: Decoded, index: int, path: tuple[str, ...], raw: str) -> None:
    """A dict logged as one JSON value (older SDKs): numeric leaves become keys joined by ``/``."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return
    _walk_object(out, index, path, obj)


def _walk_object(out: Decoded, index: int, path: tuple[str, ...], obj: Any) -> None:
    if not isinstance(obj, dict):
        if isinstance(obj, (int, float)) and not isinstance(obj, bool):
            out.emit(index, "/".join(path), float(obj))
        return
    if "_type" in obj:
        _media(out, index, path, obj)
        return
    for k, v in obj.items():
        _walk_object(out, index, (*path, str(k)), v)


def _media(out: Decoded, index: int, path: tuple[str, ...], obj: dict[str, Any]) -> None:
    """Keep only what a media object says about training health: a gradient/weight histogram's norm."""
    found = histogram_norm(path, obj)
    if found is not None:
        out.derived.append((index, *found))


# -- stats, run, config ----------------------------------------------------------------------------
def _stats(out: Decoded, st) -> None:
    n0 = len(out.s_keys)
    for item in st.item:
        vj = item.value_json
        if vj and vj[0] in _NUMBER_START:
            out.s_keys.append("system/" + item.key)
            out.s_vals.append(vj)
    ts = st.timestamp
    out.s_counts.append(len(out.s_keys) - n0)
    out.s_times.append(ts.seconds + ts.nanos * 1e-9 if st.HasField("timestamp") else math.nan)


def _run(out: Decoded, run) -> None:
    # A resumed run may write its run record again: the later one wins, config updates merge.
    out.run = run
    if run.HasField("config"):
        _merge_config(out.config, run.config)


def _merge_config(config: dict[str, Any], rec) -> None:
    for item in rec.update:
        path = _path(item)
        if path and path[0] != "_wandb":
            _set_nested(config, path, _loads(item.value_json))
    for item in rec.remove:
        path = _path(item)
        node = config
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)


# -- values ---------------------------------------------------------------------------------------
def _path(item) -> tuple[str, ...]:
    return tuple(item.nested_key) if item.nested_key else (item.key,)


def _set_nested(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = target
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


def _loads(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _typed(item) -> float | None:
    """A history item's typed value (``number``/``integer``); None for text, bools and the rest."""
    which = item.WhichOneof("value")
    if which == "number":
        return float(item.number)
    if which == "integer":
        return float(item.integer)
    if which == "json":
        value = _loads(item.json)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _as_floats(values: list[Any]) -> np.ndarray:
    """JSON number strings (and floats) to float64; ``NaN``/``Infinity`` are read as such."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_number(v) for v in values], dtype=np.float64)
