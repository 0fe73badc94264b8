"""What every tracker adapter uses: the history cache's folder and its atomic writes, and ``--since``."""

from __future__ import annotations

import os
import re
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .base import SelectionError


def default_cache_dir() -> Path:
    try:
        from platformdirs import user_cache_dir
    except ImportError:
        return Path.home() / ".cache" / "trackerhealth"
    return Path(user_cache_dir("trackerhealth"))


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename: a reader (or a CI cache
    saved mid-scan) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_parquet(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as Parquet at ``path``, written like :func:`atomic_write`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def parse_since(text: str | None, now: float | None = None) -> int | None:
    """``2h``, ``30m``, ``7d``, ``1w``, an ISO date/time (UTC unless it says otherwise) -> epoch ms."""
    if not text:
        return None
    now = time.time() if now is None else now
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if m:
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        return int((now - seconds) * 1000)
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise SelectionError(f"--since {text!r} is neither a duration (30m, 2h, 7d, 1w) nor an ISO date/time "
                             "(2025-06-01 or 2025-06-01T12:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


__all__ = ["atomic_parquet", "atomic_write", "default_cache_dir", "parse_since"]
