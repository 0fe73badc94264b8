"""The bytes of a printed training log as text, in the encodings such logs are saved in."""

from __future__ import annotations


def decode(data: bytes) -> tuple[str, str]:
    """(text, encoding): UTF-16 when the bytes open with its byte-order mark (Windows PowerShell's
    ``python train.py > log.txt``), UTF-8 when they are UTF-8, else GB18030 (GBK's superset, what a
    Chinese Windows writes) when they are that, else UTF-8 with each bad byte replaced. Written out, not
    detected with charset-normalizer: a training log is mostly ASCII digits, on which a statistical
    guess can pick any single-byte code page, and these are the encodings such logs come in."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace"), "utf-16"
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("gb18030"), "gb18030"
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), "utf-8"


__all__ = ["decode"]
