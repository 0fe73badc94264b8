"""Sniffing a file's format from its content, and reading CSV, JSON lines and Parquet into Arrow.

Names only hint: a ``metrics.json`` can be JSON lines (detectron2), a ``.csv`` can be gzip'd.
Readers return a :class:`pyarrow.Table` plus notes about what they had to skip; the layout
(long or wide) is decided later, in :mod:`._tables`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from ._columns import NULL_TOKENS, records_to_table
from ._common import file_stem
from ._errors import InputError, NotMetrics

_HEAD = 1 << 16
_DELIMITERS = (",", "\t", ";", "|")
TABLE_SUFFIXES = (".csv", ".tsv", ".json", ".jsonl", ".ndjson", ".parquet", ".pq")
_KEY_NAMES = ("key", "metric", "tag", "name", "metric_name", "metric_key")
_STEP_KEYS = ("step", "global_step", "_step", "iteration", "iter", "epoch")


@dataclass(frozen=True)
class Sniffed:
    kind: str  # parquet | tensorboard | csv | jsonl | json | empty | binary
    gzip: bool = False
    delimiter: str = ","
    encoding: str = "utf8"
    header: str = ""  # first line of a CSV, already decoded
    decimal_comma: bool = False  # numbers written 0,25 (a CSV with ';' between fields)


def looks_supported(path: Path) -> bool:
    """Whether a folder walk should open this file at all (content decides the rest)."""
    name = path.name.lower()
    if "tfevents" in name:
        return True
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(TABLE_SUFFIXES)


def sniff(path: Path) -> Sniffed:
    try:
        with open(path, "rb") as fh:
            head = fh.read(_HEAD)
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if "tfevents" in path.name.lower() or b"brain.Event:" in head[:64]:
        return Sniffed("tensorboard")
    if head[:4] == b"PAR1":
        return Sniffed("parquet")
    gz = head[:2] == b"\x1f\x8b"
    if gz:
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _HEAD)
        except zlib.error:
            raise InputError(path, "gzip data is corrupt; re-export or decompress the file") from None
    if not head.strip():
        return Sniffed("empty", gz)
    utf16 = _utf16(head)
    if utf16 is None and b"\x00" in head[:8192]:
        return Sniffed("binary", gz)
    text, encoding = _decode(head) if utf16 is None else utf16
    text = text.lstrip("\ufeff").lstrip()
    if text[:1] == "[":
        return Sniffed("json", gz, encoding=encoding)
    if text[:1] == "{":
        first, _, rest = text.partition("\n")
        try:
            row = json.loads(first)
        except (ValueError, RecursionError):
            return Sniffed("json", gz, encoding=encoding)  # a pretty-printed document (or a first line over 64 KiB)
        if not isinstance(row, dict) or "log_history" in row:
            return Sniffed("json", gz, encoding=encoding)
        # One line alone is JSON lines only if it looks like a logged row, not like a config.
        one_row = rest.strip() == "" and not any(k in row for k in _STEP_KEYS)
        return Sniffed("json" if one_row else "jsonl", gz, encoding=encoding)
    header = text.split("\n", 1)[0].rstrip("\r")
    delimiter = _delimiter(text, header)
    return Sniffed("csv", gz, delimiter, encoding, header, _decimal_comma(text, delimiter))


def _utf16(head: bytes) -> tuple[str, str] | None:
    """Text of a UTF-16 file (Excel's "Unicode text", PowerShell's ``>``), known by its BOM."""
    if head[:2] not in (b"\xff\xfe", b"\xfe\xff"):
        return None
    return head[: len(head) // 2 * 2].decode("utf-16", errors="replace"), "utf-16"


def _decode(head: bytes) -> tuple[str, str]:
    try:
        return head.decode("utf-8"), "utf8"
    except UnicodeDecodeError as exc:
        # A cut in the middle of a multi-byte character at the end of the sample is not an error.
        if exc.start >= len(head) - 4:
            return head[: exc.start].decode("utf-8"), "utf8"
        return head.decode("latin-1"), "latin-1"


def _delimiter(text: str, header: str) -> str:
    """The field separator, from the first lines (csv.Sniffer: the delimiter that splits every
    line into the same number of fields), else the one the header holds most of."""
    lines = text.splitlines()
    if len(lines) > 2 and not text.endswith(("\n", "\r")):
        lines = lines[:-1]  # the 64 KiB sample ends mid-line: that line's field count says nothing
    sample = "\n".join(lines[:50])
    try:
        found = csv.Sniffer().sniff(sample, delimiters="".join(_DELIMITERS)).delimiter
    except csv.Error:
        found = None
    if found and header.count(found):
        return found
    counts = {d: header.count(d) for d in _DELIMITERS}
    return max(_DELIMITERS, key=lambda d: counts[d]) if any(counts.values()) else ","


_DECIMAL_COMMA = re.compile(r"^[-+]?\d+,\d+(?:[eE][-+]?\d+)?$")
_DECIMAL_POINT = re.compile(r"^[-+]?\d*\.\d+(?:[eE][-+]?\d+)?$")


def _decimal_comma(text: str, delimiter: str) -> bool:
    """Whether numbers are written ``0,25`` (a spreadsheet saved in a European locale, with ';'
    between fields): only when some cell needs it and none is written with a point."""
    if delimiter == ",":
        return False
    cells = [c.strip().strip('"') for line in text.splitlines()[1:200] for c in line.split(delimiter)]
    return any(_DECIMAL_COMMA.match(c) for c in cells) and not any(_DECIMAL_POINT.match(c) for c in cells)


def _stream(path: Path, sniffed: Sniffed):
    return pa.input_stream(str(path), compression="gzip" if sniffed.gzip else None)


def read_csv(path: Path, sniffed: Sniffed) -> tuple[pa.Table, list[str]]:
    try:
        row = next(csv.reader([sniffed.header], delimiter=sniffed.delimiter), [])
    except csv.Error:  # a stray carriage return or quote in the header: Arrow decides the names
        row = sniffed.header.split(sniffed.delimiter)
    header = [c.strip().lstrip("\ufeff") for c in row]
    # np.savetxt("loss.txt", losses) writes numbers from the first line: no header. Read as a header, its first value
    # would be lost and name the column ("1.000000000000000000e+00"); read as data, the column takes the file's name.
    names = _headerless_names(path, header)
    if names:
        header = names
    lowered = {h.lower(): h for h in header}
    types = {}
    key = next((lowered[k] for k in _KEY_NAMES if k in lowered), None)
    if key is not None and "value" in lowered:
        types[key] = pa.dictionary(pa.int32(), pa.string())  # long table: hash each key once
    bad: list[str] = []
    short: list[int] = []

    def skip(row) -> str:
        bad.append(row.text)
        if row.actual_columns < row.expected_columns:
            short.append(row.number)
        return "skip"

    read = pa_csv.ReadOptions(encoding=sniffed.encoding, block_size=1 << 22, column_names=names or None)
    parse = pa_csv.ParseOptions(delimiter=sniffed.delimiter, invalid_row_handler=skip)
    convert = pa_csv.ConvertOptions(
        null_values=list(NULL_TOKENS), strings_can_be_null=True, quoted_strings_can_be_null=True, column_types=types,
        decimal_point="," if sniffed.decimal_comma else ".",
    )
    notes = []
    try:
        table = pa_csv.read_csv(_stream(path, sniffed), read_options=read, parse_options=parse, convert_options=convert)
    except (pa.ArrowException, OSError, UnicodeDecodeError, EOFError) as exc:
        salvaged = _gzip_whole_lines(path) if sniffed.gzip else None
        if salvaged is None:
            raise InputError(path, _csv_problem(exc, sniffed)) from None
        data, note = salvaged
        try:
            table = pa_csv.read_csv(pa.BufferReader(data), read_options=read, parse_options=parse,
                                    convert_options=convert)
        except (pa.ArrowException, UnicodeDecodeError):
            raise InputError(path, _csv_problem(exc, sniffed)) from None
        notes.append(note)
    if short:
        # Rows with fewer fields than the header (a header extended by later runs, a writer that stops at
        # its last value) lack only trailing fields; Arrow refuses them, so they are padded and the file
        # read again, as pandas reads them (seen: a results log whose per-epoch rows stop 2 fields short
        # of the summary columns appended later, 87 of 90 rows).
        n_short = len(short)
        bad.clear()
        table = pa_csv.read_csv(pa.BufferReader(_padded(path, sniffed, len(header))),
                                read_options=pa_csv.ReadOptions(encoding="utf8", block_size=1 << 22, column_names=names or None),
                                parse_options=parse, convert_options=convert)
        notes.append(f"{n_short} row(s) have fewer fields than the header; their missing trailing fields are read as not logged")
    if names:
        notes.append(f"the file has no header row (its first line is numbers): read as data, the column(s) named {', '.join(names)}"
                     + ("" if len(names) == 1 else "; add a header row naming them so the loss is recognised"))
    if sniffed.encoding == "latin-1":
        notes.append("the file is not UTF-8; read as Latin-1")
    if sniffed.decimal_comma:
        notes.append(f"the file uses {sniffed.delimiter!r} as separator and ',' as decimal mark; read so")
    if bad:
        notes.append(f"{len(bad)} malformed row(s) skipped (wrong number of fields, e.g. {bad[0][:60]!r})")
    _note_no_line_end(notes, path, sniffed, table)
    return table, notes


def _headerless_names(path: Path, header: list[str]) -> list[str]:
    """Column names for a file whose first line is all numbers (``[]`` when it has a header): the file's own name for
    one column (``loss.txt`` gives ``loss``), ``column_1``, ``column_2``, … for several."""
    if not header or not all(_is_number(h) for h in header):
        return []
    if header == [str(i) for i in range(len(header))]:
        return []  # pandas' default column names (pd.DataFrame(losses).to_csv(index=False) writes "0"): a header
    return [file_stem(path)] if len(header) == 1 else [f"column_{i + 1}" for i in range(len(header))]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _padded(path: Path, sniffed: Sniffed, width: int) -> bytes:
    """The CSV with every row shorter than ``width`` fields padded with empty ones, as UTF-8 (the csv
    module does the quoting: a quoted field may hold the delimiter)."""
    with _stream(path, sniffed) as raw:
        # utf-8-sig: a byte-order mark must not end up in the first column's name.
        text = raw.read().decode("utf-8-sig" if sniffed.encoding == "utf8" else sniffed.encoding, errors="replace")
    out = io.StringIO()
    writer = csv.writer(out, delimiter=sniffed.delimiter, lineterminator="\n")
    for row in csv.reader(io.StringIO(text, newline=""), delimiter=sniffed.delimiter):
        writer.writerow(row + [""] * (width - len(row)) if len(row) < width else row)
    return out.getvalue().encode("utf-8")


def _note_no_line_end(notes: list[str], path: Path, sniffed: Sniffed, table: pa.Table) -> None:
    if table.num_rows and not sniffed.gzip and not _ends_with_newline(path):
        notes.append("the last line has no line end: the file may be cut short or still being written "
                     "(its last row may be incomplete, and anything logged after it is missing)")


def _ends_with_newline(path: Path) -> bool:
    # Every logger (pandas, csv.writer, Lightning) ends a row with a line end; a file that stops
    # without one was cut mid-row.
    try:
        with open(path, "rb") as fh:
            fh.seek(-1, 2)
            return fh.read(1) in (b"\n", b"\r")
    except OSError:
        return True


def _csv_problem(exc: Exception, sniffed: Sniffed) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, OSError) and sniffed.gzip:
        return f"gzip data is truncated or corrupt ({msg}); re-export the file or decompress what is left"
    if "Empty CSV" in msg:
        return "the file is empty: nothing was logged yet (or the logger has not flushed)"
    return f"not a readable CSV table ({msg}); expected a header line followed by one row per step or per value"


def read_jsonl(path: Path, sniffed: Sniffed) -> tuple[pa.Table, list[str]]:
    """JSON lines via Arrow; files Arrow refuses (mixed types, a truncated line) line by line."""
    try:
        table = pa_json.read_json(_stream(path, sniffed), read_options=pa_json.ReadOptions(block_size=1 << 22))
        table.column_names  # noqa: B018 - raises on a key that is not UTF-8
        notes: list[str] = []
        table = _flatten_nested(table, notes)
        _note_no_line_end(notes, path, sniffed, table)
        return table, notes
    except (pa.ArrowException, OSError, UnicodeDecodeError):
        pass
    notes = []
    try:
        opener = gzip.open if sniffed.gzip else open
        with opener(path, "rt", encoding=sniffed.encoding, errors="replace") as fh:
            rows, bad, first_bad = _json_rows(fh)
    except (OSError, EOFError) as exc:
        salvaged = _gzip_whole_lines(path) if sniffed.gzip else None
        if salvaged is None:
            raise _unreadable(path, sniffed, exc) from None
        data, note = salvaged
        rows, bad, first_bad = _json_rows(data.decode(sniffed.encoding, errors="replace").splitlines())
        notes.append(note)
    if not rows:
        raise NotMetrics(path, f"no line is a JSON object ({first_bad}); expected JSON lines: one "
                               '{"step": ..., "loss": ...} object per line')
    if bad:
        notes.append(f"{bad} unreadable line(s) skipped ({first_bad})")
    nested = sorted({k for row in rows for k, v in row.items() if isinstance(v, dict)})
    if nested:
        rows = [_flat_row(row) for row in rows]
        notes.append(f"nested object(s) read as <name>.<key> columns: {', '.join(nested)}")
    table = records_to_table(rows, notes)
    _note_no_line_end(notes, path, sniffed, table)
    return table, notes


def _flat_row(row: dict, prefix: str = "") -> dict:
    """One parsed line with nested objects as ``name.key`` entries, as Arrow's ``Table.flatten`` names
    them. Hand-written: pandas' ``json_normalize`` fills a key a line lacks with NaN, which would turn
    "not logged at this step" into a non-finite value."""
    out: dict = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out.update(_flat_row(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _flatten_nested(table: pa.Table, notes: list[str]) -> pa.Table:
    """Nested objects (``{"train": {"loss": …}, "val": {"loss": …}}``, a common hand-written log) as
    ``train.loss`` and ``val.loss`` columns: Arrow reads them as struct columns, which are not metrics,
    so without this the run's losses would be silently dropped."""
    nested = [f.name for f in table.schema if pa.types.is_struct(f.type)]
    if not nested:
        return table
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    notes.append(f"nested object(s) read as <name>.<key> columns: {', '.join(nested)}")
    return table


def _json_rows(lines) -> tuple[list[dict], int, str]:
    """The JSON objects among ``lines``, how many lines were not one, and the first such line."""
    rows, bad, first_bad = [], 0, ""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            row, first_bad = None, first_bad or f"line {number}: {exc}"
        except RecursionError:
            row, first_bad = None, first_bad or f"line {number}: nested too deeply to read"
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
            first_bad = first_bad or f"line {number}: not a JSON object"
    return rows, bad, first_bad


def _gzip_whole_lines(path: Path) -> tuple[bytes, str] | None:
    """The whole lines of a gzip file that was cut short (a copy taken while the job was still
    writing it), and the note saying where it stopped; None when it is not cut but corrupt, or
    when not even one line after the header comes out.

    Python's gzip raises at the cut and returns nothing; zlib keeps what came before it. Corrupt
    data is refused instead: deflate can emit garbage for a long way before it notices (often
    only at the final CRC), so nothing before the error can be trusted."""
    out: list[bytes] = []
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        with open(path, "rb") as fh:
            pending = b""
            while piece := pending or fh.read(1 << 20):
                pending = b""
                out.append(inflate.decompress(piece))
                if inflate.eof:  # several gzip members one after another, as ``gzip -d`` reads them
                    pending = inflate.unused_data
                    if not pending:
                        return None  # whole: the damage is in the text, not the gzip stream
                    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except (zlib.error, OSError):
        return None
    data = b"".join(out)
    data = data[: data.rfind(b"\n") + 1]
    if data.count(b"\n") < 2:
        return None
    return data, (f"gzip file cut short (still being written, or an incomplete copy): read {len(data)} "
                  "decompressed bytes up to the last whole line; the data logged after that point is missing")


def read_parquet(path: Path) -> tuple[pa.Table, list[str]]:
    try:
        schema = pq.read_schema(path)
        lowered = {n.lower(): n for n in schema.names}
        key = next((lowered[k] for k in _KEY_NAMES if k in lowered), None)
        dictionary = []
        if key is not None and "value" in lowered:
            field = schema.field(key)
            if pa.types.is_string(field.type) or pa.types.is_large_string(field.type) or pa.types.is_binary(field.type):
                dictionary = [key]  # decoded as a dictionary: one string per distinct key, not per row
        return pq.read_table(path, read_dictionary=dictionary or None), []
    except (pa.ArrowException, OSError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(path, f"not a readable Parquet file ({msg}); the file may be truncated") from None


def _unreadable(path: Path, sniffed: Sniffed, exc: Exception) -> InputError:
    if sniffed.gzip:
        return InputError(path, f"gzip data is truncated or corrupt ({exc}); re-export the file or decompress "
                                "what is left")
    return InputError(path, f"cannot be read ({exc})")


def read_json_text(path: Path, sniffed: Sniffed) -> str:
    opener = gzip.open if sniffed.gzip else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as exc:
        raise _unreadable(path, sniffed, exc) from None
    return raw.decode(sniffed.encoding, errors="replace")
