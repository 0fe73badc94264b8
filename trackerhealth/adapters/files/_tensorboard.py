"""TensorBoard event files: the scalar summaries (``simple_value`` and TF2 tensor-encoded scalars).

The ``tensorboard`` package is an optional extra and is imported only when an event file is read.
All event files of one run folder are read as one run, oldest file first, as TensorBoard does;
Keras' ``train/`` and ``validation/`` sub-folders become one run with prefixed keys. A file is read
up to its first damaged record (a failed CRC, a cut): the run gets a note saying where reading
stopped, and the folder's other files are still read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...schema import RunHistory
from ._common import Origin, build_history, categorical
from ._errors import InputError

INSTALL_HINT = "reading TensorBoard event files needs the tensorboard extra: pip install 'trackerhealth[tensorboard]'"
_SCALAR_DATA_CLASS = 1  # SummaryMetadata.DATA_CLASS_SCALAR
_NUMERIC_DTYPES = {1, 2, 3, 4, 5, 6, 9, 17, 19, 22, 23}  # float, double, ints, half, uints


def _tensorboard(path: Path):
    try:
        from tensorboard.backend.event_processing import event_file_loader
        from tensorboard.compat import tf
        from tensorboard.compat.proto import event_pb2
        from tensorboard.util import tensor_util
    except ImportError:
        raise InputError(path, INSTALL_HINT) from None
    return event_file_loader, tf, event_pb2, tensor_util


_RECORD_FRAME = 16  # TFRecord: 8-byte length, 4-byte length CRC, data, 4-byte data CRC


@dataclass
class _FileRead:
    """How far one event file was read: records and bytes up to the first damage, and the damage."""

    path: Path
    records: int = 0
    end: int = 0
    problem: str = ""

    def note(self) -> str:
        size = _size(self.path)
        return (f"event file {self.path.name} damaged or still being written: read {self.records} "
                f"record(s) up to byte {self.end} of {size} ({self.problem}); the data logged after "
                "that point in this file is missing")


def _size(path: Path) -> int | str:
    try:
        return path.stat().st_size
    except OSError:
        return "?"


def _events(path: Path, read: _FileRead):
    """The events of one file, in order, up to the first damaged record.

    TensorBoard's own loaders stop silently at a failed CRC or a cut record (they expect a file
    still being written); here the stop is recorded in ``read`` so the run can say data is missing.
    """
    loader_module, tf, event_pb2, _ = _tensorboard(path)
    records = loader_module._make_tf_record_iterator(str(path))  # noqa: SLF001 - TB's reader, TF or stub
    while True:
        try:
            record = next(records)
        except StopIteration:
            return
        except tf.errors.DataLossError as exc:
            read.problem = _tb_problem(exc, path)
            return
        try:
            event = event_pb2.Event.FromString(record)
        except Exception as exc:  # noqa: BLE001 - a record that passed its CRC but is no Event
            read.problem = f"record {read.records + 1} is not an event ({type(exc).__name__})"
            return
        read.records += 1
        read.end += len(record) + _RECORD_FRAME
        yield event


def _tb_problem(exc: Exception, path: Path) -> str:
    # The reader's message starts with the file name (as bytes under the stub); say only what broke.
    text = str(getattr(exc, "message", "") or exc)
    cut = re.search(r"truncated record in (.+)$", text)
    if cut:
        return f"the next record is cut short in its {cut.group(1).strip()}"
    crc = re.search(r"failed (\w+) crc32 check", text)
    if crc:
        return f"the next record fails its {crc.group(1)} CRC check"
    return text.replace(str(path), "").strip() or type(exc).__name__


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
    reads: list[_FileRead] = []
    for path, prefix in sorted(files, key=lambda fp: (fp[1], _file_order(fp[0]))):
        tensor_util = _tensorboard(path)[3]
        read = _FileRead(path)
        reads.append(read)
        try:
            for event in _events(path, read):
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
        except OSError as exc:
            read.problem = f"cannot be read: {exc.strerror or exc}"
    damaged = [r for r in reads if r.problem]
    if events == 0:
        why = f" ({damaged[0].problem})" if damaged else ""
        raise InputError(files[0][0], f"no TensorBoard events could be read{why}: the file is empty, damaged "
                                      "from its first record, or not an event file")
    notes = [r.note() for r in damaged]
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
