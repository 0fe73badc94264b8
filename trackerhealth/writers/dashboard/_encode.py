"""Escaping and encoding for the dashboard pages.

Every string that came from a run (its name, tags, config values, metric keys) is untrusted: it
reaches the page only through :func:`esc` (HTML text and attributes), :func:`plot_text` (Plotly
labels, which understand a few HTML tags of their own) or :func:`script_json` (data islands a
``<script>`` cannot be broken out of). Links from a tracker pass :func:`safe_url`, so a
``javascript:`` URL never becomes clickable.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

_SAFE_SCHEMES = {"http", "https"}


def esc(text: Any) -> str:
    """HTML-escape for text and quoted attribute values."""
    return html.escape("" if text is None else str(text), quote=True)


def plot_text(text: Any) -> str:
    """Text for a Plotly label: Plotly renders ``<b>``, ``<a href>``, ``<br>`` … from labels, and
    decodes entities back to plain characters, so escaping keeps a key like ``<b>x`` literal."""
    return esc(text)


def safe_url(url: Any, allow_relative: bool = False) -> str | None:
    """``url`` when it is an http(s) link (or, with ``allow_relative``, a relative path); else None."""
    if not url:
        return None
    url = str(url).strip()
    if any(ord(c) < 32 for c in url):
        return None
    parts = urlsplit(url)
    if parts.scheme:
        return url if parts.scheme.lower() in _SAFE_SCHEMES and parts.netloc else None
    if not allow_relative or url.startswith("//") or ":" in url.split("/", 1)[0]:
        return None
    return quote(url, safe="/._-~#?=&%")


def script_json(obj: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: no ``</script>``, no
    ``<!--``, and no U+2028/2029 (line terminators in older JavaScript)."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False, default=_default)
    return (
        text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def _default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return finite_or_none(float(obj))
    if isinstance(obj, np.ndarray):
        return [_default(x) if isinstance(x, (np.generic, np.ndarray)) else x for x in obj.tolist()]
    raise TypeError(f"cannot encode {type(obj).__name__}")


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


def typed_array(values: np.ndarray, dtype: str = "f4") -> dict[str, str]:
    """A Plotly typed-array spec (``{"dtype", "bdata"[, "shape"]}``): base64 of little-endian
    binary, about a third of the size of the same numbers written out as JSON text."""
    arr = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    spec = {"dtype": dtype, "bdata": base64.b64encode(arr.tobytes()).decode("ascii")}
    if arr.ndim > 1:
        spec["shape"] = ",".join(str(d) for d in arr.shape)
    return spec


def step_array(steps: np.ndarray) -> dict[str, str]:
    """Steps as int32 when they are whole numbers that fit, else float64 (fractional or huge)."""
    steps = np.asarray(steps, dtype=np.float64)
    if len(steps) and np.all(steps == np.round(steps)) and np.abs(steps).max() < 2**31:
        return typed_array(steps, "i4")
    if not len(steps):
        return typed_array(steps, "i4")
    return typed_array(steps, "f8")


def value_array(values: np.ndarray) -> dict[str, str]:
    """Values as float32 (7 significant digits: more than a chart shows) unless they would overflow
    or underflow it, then float64."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if len(finite):
        mags = np.abs(finite[finite != 0])
        if len(mags) and (mags.max() > 3e38 or mags.min() < 1e-37):
            return typed_array(values, "f8")
    return typed_array(values, "f4")


_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe version of ``text`` (never empty, never hidden)."""
    s = _SLUG.sub("-", text).strip("-.")[:limit]
    return s or "run"
