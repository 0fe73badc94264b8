"""JSON documents: HF Trainer ``trainer_state.json``, a list of records, a Keras ``history`` dict.

Python's ``json`` reads the bare ``NaN``/``Infinity``/``-Infinity`` tokens that HF Trainer and
other Python loggers write, as float nan/inf: they are kept as logged values.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...schema import RunHistory
from ._columns import records_to_table
from ._common import Origin, file_stem
from ._errors import InputError, NotMetrics
from ._tables import table_histories
from ._tabular import Sniffed, read_json_text

_HF_CONFIG_SKIP = ("log_history", "stateful_callbacks", "trial_params")


def json_document_histories(
    path: Path, sniffed: Sniffed, step_column: str | None, jsonl, require_step: bool = False
) -> list[RunHistory]:
    """Runs in a JSON document; ``jsonl`` reads the file instead when it turns out to be JSON lines.

    ``require_step``: a list of records without a step column is data, not a metrics log.
    """
    text = read_json_text(path, sniffed)
    try:
        doc = json.loads(text)
    except RecursionError:
        raise InputError(path, "JSON nested too deeply to read (about a thousand levels or more): no "
                               "metrics log is shaped like this — the file is damaged or is not a "
                               "training log; re-export it") from None
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and text.lstrip()[:1] == "{":
            return jsonl(path, sniffed, step_column)
        where = f"{exc.msg} at line {exc.lineno}, column {exc.colno}"
        if "\n" not in text[exc.pos:].rstrip():
            fix = ("the file looks truncated — was training still writing it? Use a copy saved after the "
                   "write finished (e.g. the last checkpoint's trainer_state.json)")
        else:
            fix = "the file is damaged in the middle (edited by hand, or two writers at once?); repair or re-export it"
        raise InputError(path, f"not valid JSON ({where}); {fix}") from None
    if isinstance(doc, dict) and isinstance(doc.get("log_history"), list):
        return [hf_trainer_state(path, doc, step_column)]
    notes: list[str] = []
    if isinstance(doc, list) and doc and all(isinstance(r, dict) for r in doc):
        table = records_to_table(doc, notes)
        return table_histories(table, Origin.for_file(path), step_column=step_column,
                               require_step=require_step, notes=tuple(notes))
    if isinstance(doc, list) and doc and all(_is_number_or_null(x) for x in doc):
        # json.dump(losses, f): one metric, one value per entry, named after the file (train_losses.json). Every entry
        # was logged, so a null is a value that strict JSON could not write (JSON.stringify writes NaN as null): NaN.
        name = file_stem(path)
        nulls = sum(x is None for x in doc)
        notes.append(f"a bare list of {len(doc)} numbers: read as one metric named {name!r}, one point per entry"
                     + (f"; its {nulls} null(s) read as NaN (strict JSON writes NaN as null)" if nulls else ""))
        table = _columns_table({name: [float("nan") if x is None else x for x in doc]}, notes)
        return table_histories(table, Origin.for_file(path), step_column=step_column, notes=tuple(notes))
    if isinstance(doc, dict) and _is_column_dict(doc):
        table = _columns_table(doc, notes)
        return table_histories(table, Origin.for_file(path), step_column=step_column, notes=tuple(notes))
    raise NotMetrics(
        path,
        "JSON document is not a metrics log: expected an HF Trainer trainer_state.json (with log_history), "
        "a list of {\"step\": ..., \"loss\": ...} records, a {\"loss\": [...], ...} history dict, a list of numbers, "
        "or JSON lines",
    )


def hf_trainer_state(path: Path, doc: dict, step_column: str | None) -> RunHistory:
    entries = [e for e in doc["log_history"] if isinstance(e, dict)]
    config = {
        k: v for k, v in doc.items()
        if k not in _HF_CONFIG_SKIP and (v is None or isinstance(v, (str, int, float, bool)))
    }
    origin = Origin.for_file(path, config=config)
    if not entries:
        return RunHistory(origin.ref(), {}, ("log_history is empty: the trainer had not logged anything yet",))
    notes: list[str] = []
    table = records_to_table(entries, notes)
    if step_column is None:
        step_column = "step"
        if "step" not in table.column_names:
            # Entries in log_history are in logging order, so their position is a usable step.
            table = table.append_column("step", pa.array(np.arange(len(entries), dtype=np.float64)))
            notes.append("log_history entries have no 'step'; their position in log_history is used as the step")
    return table_histories(table, origin, step_column=step_column, notes=tuple(notes))[0]


def _is_number_or_null(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def _is_column_dict(doc: dict) -> bool:
    lists = [v for v in doc.values() if isinstance(v, list)]
    return bool(doc) and len(lists) == len(doc) and any(
        any(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) for v in lists
    )


def _columns_table(doc: dict, notes: list[str]) -> pa.Table:
    length = max(len(v) for v in doc.values())
    rows = [{k: v[i] for k, v in doc.items() if i < len(v)} for i in range(length)]
    return records_to_table(rows, notes)
