"""TensorBoard event files: the scalar summaries (``simple_value`` and TF2 tensor-encoded scalars).

The ``tensorboard`` package is an optional extra and is imported only when an event file is read.
All event files of one run folder are read as one run, oldest file first, as TensorBoard does;
Keras' ``train/`` and ``validation/`` sub-folders become one run with prefixed keys, and so do the
sub-folders torch's ``SummaryWriter.add_scalars`` writes (:func:`fold_add_scalars`). A file is read
up to its first damaged record (a failed CRC, a cut): the run gets a note saying where reading
stopped, and the folder's other files are still read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ...schema import RunHistory, RunRef
from ._common import Origin, build_history, categorical
from ._errors import InputError

INSTALL_HINT = "reading TensorBoard event files needs the tensorboard extra: pip install 'trackerhealth[tensorboard]'"
# The note on a run whose event files hold no scalar: an add_scalars parent's own file, until its folders are folded in.
NO_SCALARS = "the event file(s) hold no scalar summaries"
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
        return RunHistory(origin.ref(), {}, tuple(notes) + (NO_SCALARS,))
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


def fold_add_scalars(runs: dict[Path, RunHistory], ref_of: Callable[[Path], RunRef]) -> list[RunHistory]:
    """The runs of a folder, with the curves of one ``add_scalars`` call folded back into their run.

    torch's ``SummaryWriter.add_scalars(main_tag, {name: value, ...})`` writes each name into an event file of
    its own, in a folder ``<run>/<main_tag>_<name>/`` (a ``/`` in ``main_tag`` written as ``_``) whose one tag is
    ``main_tag``. TensorBoard lists those folders as runs, but they are the curves of one training: read apart,
    its train and val loss never meet (public log P867: ``loss_training/`` and ``loss_validation/``). A folder
    whose one tag names it so becomes ``<main_tag>/<name>`` of its parent's run — when the parent is a run itself
    (the writer leaves its own event file there), or when two or more such folders share the parent (``ref_of``
    names that run then). A folder holding other tags is a run of its own, as TensorBoard shows it (an HParams
    search writes ``<root>/<run-N>/`` beside the root's own event file).
    """
    parts: dict[Path, list[tuple[Path, str]]] = {}
    for folder, history in runs.items():
        keys = history.keys()
        if len(keys) != 1:
            continue
        stem = keys[0].replace("/", "_") + "_"
        if folder.name.startswith(stem) and len(folder.name) > len(stem):
            parts.setdefault(folder.parent, []).append((folder, f"{keys[0]}/{folder.name[len(stem):]}"))
    out = dict(runs)
    for parent, members in parts.items():
        if parent not in runs and len(members) < 2:
            continue
        base = runs.get(parent)
        series = {k: base[k] for k in base.keys()} if base is not None else {}
        notes = list(base.notes) if base is not None else []
        if base is not None and not series:  # the parent's file held no scalars: that note no longer holds
            notes = [n for n in notes if n != NO_SCALARS]
        for folder, key in members:
            child = out.pop(folder)
            series[key] = child[child.keys()[0]]
            notes.extend(f"{folder.name}/: {n}" for n in child.notes)
        ref = base.ref if base is not None else ref_of(parent)
        latest = max((runs[f].ref.updated_at or 0.0 for f, _ in members), default=0.0)
        ref = replace(ref, updated_at=max(ref.updated_at or 0.0, latest) or None)
        out[parent] = RunHistory(ref, series, notes)
    return list(out.values())
