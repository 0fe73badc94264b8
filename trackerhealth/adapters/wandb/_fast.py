"""Vectorized decoding of the common records: which type each record is, and plain history items.

A 20,000-step × 20-metric run holds 60,000 records and 400,000 history items; reading each item
through the protobuf message objects costs ten times more than walking the log. But almost every
record and item is encoded the same way (SDK 0.13 through 0.31)::

    Record       := [0x08 num]  TAG LEN body                 the record_type field, after `num`
    HistoryRecord:= item* [0x12 SL 0x08 step]
    item         := 0x0a L  (0x0a | 0x12) KL key  0x82 0x01 VL value_json     one-byte lengths

so the records are parsed in lock-step with numpy: every record's first field at once, then every
history record's first item, second item, and so on. An item is taken only if all three of its
declared lengths agree (``L == KL + VL + 5``) and the items (plus an optional ``step`` field) end
exactly where the history record ends; such a record decodes to exactly what protobuf would give.
Any record that does not fit — nested keys, long values (histograms), typed values, other fields —
is handed back and decoded by the protobuf classes (:mod:`._records`), and so are records still
being parsed once fewer than ``_MIN_LOCKSTEP`` remain (a round costs the same for 1 record as
for 10,000, so a handful of very wide records is cheaper one by one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_NUMBER_FIRST = np.frombuffer(b"-0123456789NI", dtype=np.uint8)
_OBJECT_FIRST = ord("{")
_PAD = 16  # zero bytes after the joined records, so look-ahead reads stay in bounds
_GATHER_ITEMS = 1 << 18
# One lock-step round costs ~100 µs of numpy calls whatever the number of records in it; the
# protobuf path costs ~1 µs per item. Fewer live records than this go to the protobuf path.
_MIN_LOCKSTEP = 64


@dataclass
class Joined:
    """All records in one buffer: record ``r`` is ``buf[start[r]:end[r]]``."""

    buf: np.ndarray
    start: np.ndarray
    end: np.ndarray


def join(records: list[bytes]) -> Joined:
    lengths = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
    end = np.cumsum(lengths)
    buf = np.frombuffer(b"".join(records) + bytes(_PAD), dtype=np.uint8)
    return Joined(buf, end - lengths, end)


def _varint(buf: np.ndarray, pos: np.ndarray, ok: np.ndarray, max_bytes: int):
    """Decode a varint at each ``pos`` (at most ``max_bytes`` long); returns ``(value, next, ok)``."""
    value = np.zeros(len(pos), dtype=np.int64)
    done = np.zeros(len(pos), dtype=bool)
    cur = pos.copy()
    for shift in range(0, 7 * max_bytes, 7):
        b = buf[cur].astype(np.int64)
        live = ~done
        value[live] |= (b[live] & 0x7F) << shift
        cur[live] += 1
        done |= b < 0x80
    return value, cur, ok & done


def peek(j: Joined, kinds: np.ndarray, max_fields: int = 6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each record's ``record_type`` field number (one of ``kinds``) and that field's byte span.

    Fields before it (``num``, ``control``, ``_info``… — the Go core writes those first) are
    skipped. Field -1 where this cannot be read in ``max_fields`` fields: the caller parses those.
    """
    buf, end = j.buf, j.end
    n = len(end)
    field = np.full(n, -1, dtype=np.int64)
    body_start = np.zeros(n, dtype=np.int64)
    body_end = np.zeros(n, dtype=np.int64)
    idx = np.flatnonzero(j.start < end)
    pos = j.start[idx]
    for _ in range(max_fields):
        if not len(idx):
            break
        e = end[idx]
        tag, pos, ok = _varint(buf, pos, np.ones(len(idx), dtype=bool), 3)
        wire = tag & 7
        is_len = ok & (wire == 2)
        length, after, len_ok = _varint(buf, pos, is_len, 5)
        is_len &= len_ok & (after + length <= e)
        is_var = ok & (wire == 0)
        _, var_after, var_ok = _varint(buf, pos, is_var, 10)
        is_var &= var_ok & (var_after <= e)
        found = is_len & np.isin(tag >> 3, kinds)
        field[idx[found]] = tag[found] >> 3
        body_start[idx[found]] = after[found]
        body_end[idx[found]] = after[found] + length[found]
        # Skip any other field and look at the next one.
        nxt = np.where(is_len, after + length, var_after)
        go_on = (is_len & ~found) | is_var
        go_on &= nxt < e
        idx, pos = idx[go_on], nxt[go_on]
    return field, body_start, body_end


@dataclass
class Items:
    """The items of the history records the fast path took, as arrays (one entry per item)."""

    record: np.ndarray  # index into the history records given to parse_history
    codes: np.ndarray  # key codes into ``names``
    names: list[str]
    first: np.ndarray  # first byte of each value
    values: pa.Array  # value_json of each item (string)


def parse_history(buf: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Lock-step parse of history record bodies ``buf[start:end]``.

    Returns ``(taken, step_field, items)``: which records were decoded here, each record's ``step``
    field (NaN when absent), and their items.
    """
    n = len(start)
    pos = start.copy()
    alive = np.ones(n, dtype=bool)
    failed = np.zeros(n, dtype=bool)
    step_field = np.full(n, np.nan)
    rec_parts, key_pos, key_len, val_pos, val_len = [], [], [], [], []
    while alive.any():
        idx = np.flatnonzero(alive)
        p, e = pos[idx], end[idx]
        finished = p == e
        alive[idx[finished]] = False
        failed[idx[p > e]] = True
        alive[idx[p > e]] = False
        live = p < e
        idx, p, e = idx[live], p[live], e[live]
        if len(idx) < _MIN_LOCKSTEP:
            # A few wide records (thousands of keys) would take one round per item.
            failed[idx] = True
            break
        tag = buf[p]
        # An item.
        is_item = tag == 0x0A
        L = buf[p + 1].astype(np.int64)
        ktag = buf[p + 2]
        KL = buf[p + 3].astype(np.int64)
        vt = p + 4 + KL
        VL = buf[np.minimum(vt + 2, len(buf) - 1)].astype(np.int64)
        good = (is_item & (L < 0x80) & ((ktag == 0x0A) | (ktag == 0x12)) & (KL < 0x80)
                & (buf[np.minimum(vt, len(buf) - 1)] == 0x82) & (buf[np.minimum(vt + 1, len(buf) - 1)] == 0x01)
                & (VL < 0x80) & (L == KL + VL + 5) & (p + 2 + L <= e))
        rec_parts.append(idx[good])
        key_pos.append(p[good] + 4)
        key_len.append(KL[good])
        val_pos.append(vt[good] + 3)
        val_len.append(VL[good])
        pos[idx[good]] = p[good] + 2 + L[good]
        # The `step` field, which must end the record.
        is_step = (tag == 0x12) & ~good
        SL = buf[p + 1].astype(np.int64)
        step_ok = is_step & (SL < 0x80) & (p + 2 + SL == e)
        empty = step_ok & (SL == 0)
        step_field[idx[empty]] = 0.0
        body = step_ok & (SL > 0) & (buf[p + 2] == 0x08)
        if body.any():
            value, after, v_ok = _varint(buf, p[body] + 3, np.ones(body.sum(), dtype=bool), 10)
            v_ok &= after == e[body]
            step_field[idx[body][v_ok]] = value[v_ok].astype(np.float64)
            step_ok[np.flatnonzero(body)[~v_ok]] = False
        alive[idx[step_ok]] = False
        bad = ~good & ~step_ok
        failed[idx[bad]] = True
        alive[idx[bad]] = False
    taken = ~failed
    record = np.concatenate(rec_parts) if rec_parts else np.empty(0, dtype=np.int64)
    kp, kl, vp, vl = (np.concatenate(a) if a else np.empty(0, dtype=np.int64)
                      for a in (key_pos, key_len, val_pos, val_len))
    keep = taken[record]
    record, kp, kl, vp, vl = record[keep], kp[keep], kl[keep], vp[keep], vl[keep]
    # Items in log order: by record, then by position within it.
    order = np.lexsort((kp, record))
    record, kp, kl, vp, vl = record[order], kp[order], kl[order], vp[order], vl[order]
    keys = _strings(buf, kp, kl, pa.binary())
    encoded = pc.dictionary_encode(keys)
    names = [b.decode("utf-8", "replace") for b in encoded.dictionary.to_pylist()]
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    first = buf[vp] if len(vp) else np.empty(0, dtype=np.uint8)
    values = _strings(buf, vp, vl, pa.string())
    return taken, step_field, Items(record, codes, names, first, values)


def _strings(buf: np.ndarray, pos: np.ndarray, length: np.ndarray, kind: pa.DataType) -> pa.Array:
    """The byte ranges ``buf[pos:pos+length]`` as one Arrow array, gathered without a Python loop."""
    parts = []
    for lo in range(0, max(len(pos), 1), _GATHER_ITEMS):
        p, n = pos[lo:lo + _GATHER_ITEMS], length[lo:lo + _GATHER_ITEMS]
        offsets = np.zeros(len(n) + 1, dtype=np.int64)
        np.cumsum(n, out=offsets[1:])
        index = np.repeat(p - offsets[:-1], n) + np.arange(offsets[-1])
        data = buf[index]
        big = pa.large_binary() if kind == pa.binary() else pa.large_string()
        arr = pa.Array.from_buffers(big, len(n), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        parts.append(arr)
    out = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
    return out


def numeric_mask(first: np.ndarray) -> np.ndarray:
    return np.isin(first, _NUMBER_FIRST)


def object_mask(first: np.ndarray) -> np.ndarray:
    return first == _OBJECT_FIRST


def parse_numbers(values: pa.Array) -> np.ndarray:
    """JSON numbers to float64, correctly rounded; ``NaN``/``Infinity`` read as such."""
    if len(values) == 0:
        return np.empty(0, dtype=np.float64)
    try:
        return values.cast(pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        out = np.empty(len(values), dtype=np.float64)
        for i, v in enumerate(values.to_pylist()):
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                out[i] = np.nan
        return out
