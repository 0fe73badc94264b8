"""Helpers for the W&B local-folder tests: the SDK's own reader as a second path, truth files."""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from pathlib import Path

REALWORLD = Path(__file__).resolve().parents[3] / "shared" / "realworld"
HERE = Path(__file__).resolve().parent
_JSON_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@functools.lru_cache(maxsize=32)
def leet_records(log_path: str) -> tuple[dict, ...]:
    """Every record of a ``.wandb`` log as decoded by the SDK's Go reader (``wandb leet inspect
    --json``): an implementation independent of ours, shipped in the pinned SDK."""
    out = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", log_path],
                         capture_output=True, text=True, timeout=120, check=True)
    return tuple(json.loads(line) for line in out.stdout.splitlines() if line.strip())


def number(value) -> float | None:
    """A numeric JSON value as leet prints it (NaN/Infinity as strings); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in _JSON_SPECIAL:
        return _JSON_SPECIAL[value]
    return None


def leet_history(log_path: Path) -> list[tuple[float, float, dict[str, float]]]:
    """``(step, wall time, {key: value})`` per history record, numeric items only, keys with '.'
    joining nested parts as leet prints them; fields of media objects (a ``_type`` sibling) and
    W&B's own ``_`` keys are left out."""
    rows = []
    for rec in leet_records(str(log_path)):
        if rec["type"] != "history":
            continue
        item = rec["history"]["item"]
        media = {k[: -len("._type")] for k in item if k.endswith("._type")}
        values = {}
        for key, value in item.items():
            if key.startswith("_") or any(key.startswith(m + ".") for m in media):
                continue
            v = number(value)
            if v is not None:
                values[key] = v
        rows.append((float(item["_step"]), float(item["_timestamp"]), values))
    return rows


def leet_stats(log_path: Path) -> list[tuple[str, dict[str, float]]]:
    """``(timestamp text, {key: value})`` per stats record."""
    out = []
    for rec in leet_records(str(log_path)):
        if rec["type"] == "stats":
            stats = rec["stats"]
            out.append((stats["timestamp"], {k: number(v) for k, v in stats["item"].items()
                                             if number(v) is not None}))
    return out


def leet_console(log_path: Path) -> str:
    return "".join(rec["output_raw"].get("line", "") for rec in leet_records(str(log_path))
                   if rec["type"] == "output_raw")


def dotted(key: str) -> str:
    """Our keys join nested parts with '/', leet's with '.': compare both with '.'."""
    return key.replace("/", ".")


def flatten(row: dict, prefix: str = "") -> dict[str, float]:
    out = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = float(v)
    return out


def read_truth(folder: Path) -> tuple[dict, list[dict]]:
    """What the training script logged: its header line and one ``{step, time, row}`` per step."""
    lines = (folder / "truth.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    rows = [json.loads(line) for line in lines[1:] if line.strip()]
    for r in rows:
        r["row"] = flatten(r["row"])
    return header, rows


def encode_log(records: list[bytes]) -> bytes:
    """A transaction log written the way the SDK writes one (header, 32 KiB blocks, zero-padded
    block tails, FULL/FIRST/MIDDLE/LAST chunks with CRC-32 of type and data): for damage tests."""
    import struct
    import zlib

    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    for data in records:
        first = True
        while True:
            left = 32768 - len(out) % 32768
            if left < 7:
                out += bytes(left)
                continue
            chunk, data = data[: left - 7], data[left - 7:]
            kind = (1 if first else 4) if not data else (2 if first else 3)
            out += struct.pack("<IHB", zlib.crc32(bytes([kind]) + chunk), len(chunk), kind) + chunk
            first = False
            if not data:
                break
    return bytes(out)


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))
