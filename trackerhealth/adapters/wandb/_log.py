"""Walk the records of a ``run-*.wandb`` transaction log, checking every checksum.

The format is LevelDB's log format with W&B's own header and checksum (verified against files
written by SDK 0.13 through 0.31 and against the SDK's former Python reader, ``datastore.py``)::

    file   := header block*
    header := ":W&B" magic:uint16le (0xBEE1) version:uint8 (0)
    block  := chunk* trailer?            32 KiB, counted from the start of the file, header included
    chunk  := crc:uint32le length:uint16le type:uint8 data[length]
    type   := FULL (1) | FIRST (2) | MIDDLE (3) | LAST (4)

A record is one FULL chunk or FIRST MIDDLE* LAST; a block whose tail is shorter than a chunk
header is padded with zeros. Unlike LevelDB (masked CRC-32C), ``crc`` is the plain CRC-32
(zlib's) of the type byte followed by the data. Each record is a serialized
``wandb_internal_pb2.Record``; this module does not look inside them and imports nothing of wandb.

A run that is still writing, or was killed, ends inside a chunk or between the chunks of one
record. The walk stops at the last complete record with a good checksum and says so in
:attr:`LogScan.problem`; nothing after a damaged chunk is trusted.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

IDENT = b":W&B"
MAGIC = 0xBEE1
VERSION = 0
FILE_HEADER_LEN = 7
BLOCK_LEN = 32 * 1024
CHUNK_HEADER_LEN = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_TYPE_NAMES = {FULL: "FULL", FIRST: "FIRST", MIDDLE: "MIDDLE", LAST: "LAST"}
# The checksum covers the type byte, then the data: start each chunk's CRC from its type's CRC.
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in _TYPE_NAMES}
_CHUNK_HEADER = struct.Struct("<IHB")


class LogFormatError(ValueError):
    """The bytes are not a W&B transaction log this reader understands (wrong header or version)."""


@dataclass
class LogScan:
    """The complete records of one log, in order, and where reading stopped."""

    records: list[bytes | memoryview] = field(default_factory=list)  # views into the file's bytes
    end: int = FILE_HEADER_LEN  # byte offset just past the last complete record
    size: int = 0  # bytes in the file
    problem: str = ""  # empty when the log was read to its last byte

    @property
    def complete(self) -> bool:
        return not self.problem


def check_header(data: bytes) -> None:
    """Raise :class:`LogFormatError` unless ``data`` starts with a W&B log header we can read."""
    if len(data) < FILE_HEADER_LEN:
        if IDENT.startswith(bytes(data[:4])):
            raise LogFormatError(f"only {len(data)} bytes: the run has not written its log header yet")
        raise LogFormatError("not a W&B transaction log (too short for its 7-byte header)")
    ident = bytes(data[:4])
    magic, version = struct.unpack_from("<HB", data, 4)
    if ident != IDENT or magic != MAGIC:
        raise LogFormatError(f"not a W&B transaction log (header {bytes(data[:7])!r}, expected ':W&B' and 0xBEE1)")
    if version != VERSION:
        raise LogFormatError(
            f"W&B log format version {version} is newer than this reader (version {VERSION}); "
            "upgrade trackerhealth (pip install -U 'trackerhealth[wandb]')"
        )


def scan(data: bytes) -> LogScan:
    """Every complete record of ``data`` (a whole ``.wandb`` file), checksums verified.

    Records are ``memoryview`` s into ``data`` (records split across blocks are joined copies)."""
    check_header(data)
    n = len(data)
    view = memoryview(data)  # a FULL chunk's record is a view, not a copy
    out = LogScan(size=n)
    records = out.records
    append = records.append
    unpack = _CHUNK_HEADER.unpack_from
    crc32 = zlib.crc32
    type_crc = _TYPE_CRC
    pos = FILE_HEADER_LEN
    good_end = pos
    parts: list[bytes] | None = None  # chunks of a record split across blocks
    problem = ""
    while pos < n:
        left = BLOCK_LEN - pos % BLOCK_LEN
        if left < CHUNK_HEADER_LEN:
            # Block trailer: zeros up to the next block.
            if data[pos:pos + left].count(0) != min(left, n - pos):
                problem = f"non-zero block trailer at byte {pos}"
                break
            pos += left
            continue
        if pos + CHUNK_HEADER_LEN > n:
            problem = "ends inside a chunk header"
            break
        crc, length, kind = unpack(data, pos)
        if kind == 0 and length == 0 and crc == 0:
            # Zero-filled space (preallocated, or a crash before the data reached the disk).
            rest = data[pos:]
            problem = ("ends in zero-filled space" if rest.count(0) == len(rest)
                       else f"zero chunk header at byte {pos} followed by data")
            break
        start = pos + CHUNK_HEADER_LEN
        end = start + length
        if kind not in type_crc:
            problem = f"unknown chunk type {kind} at byte {pos}"
            break
        if length > left - CHUNK_HEADER_LEN:
            problem = f"chunk at byte {pos} claims {length} bytes, more than its block holds"
            break
        if end > n:
            problem = f"ends inside a chunk ({n - start} of its {length} bytes written)"
            break
        chunk = view[start:end]
        if crc32(chunk, type_crc[kind]) != crc:
            problem = f"bad checksum in the chunk at byte {pos}"
            break
        pos = end
        if kind == FULL:
            if parts is not None:
                problem = f"record split across blocks is missing its LAST chunk (at byte {good_end})"
                break
            append(chunk)
            good_end = pos
        elif kind == FIRST:
            if parts is not None:
                problem = f"record split across blocks is missing its LAST chunk (at byte {good_end})"
                break
            parts = [chunk]
        elif parts is None:
            problem = f"{_TYPE_NAMES[kind]} chunk without a FIRST chunk at byte {pos - length - CHUNK_HEADER_LEN}"
            break
        elif kind == MIDDLE:
            parts.append(chunk)
        else:
            parts.append(chunk)
            append(b"".join(parts))
            parts = None
            good_end = pos
    if not problem and parts is not None:
        problem = "ends between the chunks of a record split across blocks"
    out.end = good_end
    out.problem = problem
    return out


def describe_stop(result: LogScan) -> str:
    """The note for a log that was not read to its end."""
    return (
        f"run still writing or truncated: read {len(result.records)} records up to byte {result.end} "
        f"of {result.size} ({result.problem}); the rest is ignored"
    )
