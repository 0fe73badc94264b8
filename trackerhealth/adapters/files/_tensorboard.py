"""TensorBoard event files: the scalar summaries (``simple_value`` and TF2 tensor-encoded scalars).

The ``tensorboard`` package is an optional extra and is imported only when an event file is read.
All event files of one run folder are read as one run, oldest file first, as TensorBoard does;
Keras' ``train/`` and ``validation/`` sub-folders become one run with prefixed keys.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ...schema import RunHistory
from ._common import Origin, build_history, categorical
from ._errors import InputError

INSTALL_HINT = "reading TensorBoard event files needs the tensorboard extra: pip install 'trackerhealth[tensorboard]'"
_SCALAR_DATA_CLASS = 1  # SummaryMetadata.DATA_CLASS_SCALAR
_NUMERIC_DTYPES = {1, 2, 3, 4, 5, 6, 9, 17, 19, 22, 23}  # float, double, ints, half, uints


def _loader(path: Path):
    try:
        from tensorboard.backend.event_processing import event_file_loader
        from tensorboard.util import tensor_util
    except ImportError:
        raise InputError(path, INSTALL_HINT) from None
    cls = getattr(event_file_loader, "LegacyEventFileLoader", event_file_loader.EventFileLoader)
    return cls(str(path)), tensor_util


def _file_order(path: Path) -> tuple:
    # events.out.tfevents.<unix time>.<host>...: TensorBoard reads a folder's files in this order.
    m = re.search(r"tfevents\.(\d+)", path.name)
    return (int(m.group(1)) if m else 0, path.name)


def read_event_files(files: list[tuple[Path, str]], origin: Origin) -> RunHistory:
    """One run from ``(event file, key prefix)`` pairs."""
    steps: list[float] = []
    walls: list[float] = []
    values: list[float] = []
    codes: list[int] = []
    code_of: dict[str, int] = {}
    skipped = events = 0
    for path, prefix in sorted(files, key=lambda fp: (fp[1], _file_order(fp[0]))):
        loader, tensor_util = _loader(path)
        try:
            for event in loader.Load():
                events += 1
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    number = _scalar(value, tensor_util)
                    if number is None:
                        skipped += 1
                        continue
                    key = prefix + value.tag
                    code = code_of.setdefault(key, len(code_of))
                    steps.append(float(event.step))
                    walls.append(event.wall_time)
                    values.append(number)
                    codes.append(code)
        except Exception as exc:  # noqa: BLE001 - any parse failure of a corrupt file is an input problem
            raise InputError(path, f"not a readable TensorBoard event file ({type(exc).__name__}: {exc})") from None
    if events == 0:
        raise InputError(files[0][0], "no TensorBoard events could be read: the file is empty or corrupt")
    notes = []
    if skipped:
        notes.append(f"{skipped} non-scalar summary value(s) (histograms, images, text) ignored")
    if not codes:
        return RunHistory(origin.ref(), {}, tuple(notes) + ("the event file(s) hold no scalar summaries",))
    return build_history(
        origin,
        np.asarray(steps, dtype=np.float64),
        categorical(np.asarray(codes, dtype=np.int32), list(code_of)),
        np.asarray(values, dtype=np.float64),
        np.asarray(walls, dtype=np.float64),
        notes,
    )


def _scalar(value, tensor_util) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor":
        return None
    meta = value.metadata
    if meta.plugin_data.plugin_name not in ("scalars", "") and meta.data_class != _SCALAR_DATA_CLASS:
        return None
    tensor = value.tensor
    if tensor.dtype not in _NUMERIC_DTYPES or any(d.size != 1 for d in tensor.tensor_shape.dim):
        return None
    try:
        arr = tensor_util.make_ndarray(tensor)
    except Exception:  # noqa: BLE001 - a malformed tensor is skipped like a non-scalar
        return None
    return float(arr.reshape(-1)[0]) if arr.size == 1 else None
