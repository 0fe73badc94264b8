"""A per-layer gradient (or weight) L2 norm estimated from a logged W&B histogram.

``wandb.watch`` logs, per parameter and step, ``gradients/<name>`` (and with ``log="all"``
``parameters/<name>``) as a histogram of the tensor's finite elements: ``values`` are the counts of
64 equal bins spanning [min, max] and ``bins`` the 65 edges (a single bin [x, x] when every element
is equal). Every element lies in its bin, so replacing each by its bin's centre moves it by at most
half the bin's width, and by the triangle inequality::

    | ||g||_2 - sqrt(sum(count * centre^2)) |  <=  sqrt(sum(count * (width / 2)^2))

The estimate is that centre sum; :func:`l2_estimate` returns it with this bound. NaN/Inf elements
are not in a W&B histogram, so the estimate is the norm of the finite elements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

# Histogram keys whose per-layer L2 estimate becomes a scalar, by their first path part (lower case).
DERIVED_PREFIX = {
    "gradients": "grad_norm",  # wandb.watch(log="gradients" | "all")
    "grads": "grad_norm",
    "parameters": "weight_norm",  # wandb.watch(log="parameters" | "all")
    "weights": "weight_norm",
}


def derived_key(parts: tuple[str, ...]) -> str | None:
    """``("gradients", "fc1.weight")`` -> ``grad_norm/fc1.weight``; None for other histograms."""
    if len(parts) < 2:
        head, _, rest = parts[0].partition("/") if parts else ("", "", "")
        parts = (head, rest) if rest else ()
    if not parts:
        return None
    name = DERIVED_PREFIX.get(parts[0].lower())
    layer = "/".join(parts[1:])
    return f"{name}/{layer}" if name and layer else None


def edges_of(hist: Mapping[str, Any]) -> np.ndarray | None:
    """The bin edges of a histogram object (``bins``, or TensorBoard-style ``packedBins``)."""
    bins = hist.get("bins")
    if bins is not None:
        return np.asarray(bins, dtype=np.float64)
    packed = hist.get("packedBins")
    if isinstance(packed, Mapping):
        try:
            lo, size, count = float(packed["min"]), float(packed["size"]), int(packed["count"])
        except (KeyError, TypeError, ValueError):
            return None
        return lo + size * np.arange(count + 1, dtype=np.float64)
    return None


def l2_estimate(counts: Any, edges: Any) -> tuple[float, float] | None:
    """``(estimate, bound)`` of the L2 norm of the histogrammed elements; None if not a histogram."""
    try:
        c = np.asarray(counts, dtype=np.float64)
        e = np.asarray(edges, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if c.ndim != 1 or e.ndim != 1 or len(c) == 0 or len(e) != len(c) + 1:
        return None
    if not (np.isfinite(c).all() and np.isfinite(e).all()) or (c < 0).any() or (np.diff(e) < 0).any():
        return None
    centre = (e[:-1] + e[1:]) / 2
    half = (e[1:] - e[:-1]) / 2
    return math.sqrt(float(np.dot(c, centre * centre))), math.sqrt(float(np.dot(c, half * half)))


def histogram_norm(path: tuple[str, ...], obj: Mapping[str, Any]) -> tuple[str, float] | None:
    """``(grad_norm/<layer>, L2 estimate)`` (or ``weight_norm/…``) for a gradient/weight histogram
    logged under ``path``; None for any other media object, or a histogram that is not usable."""
    if obj.get("_type") != "histogram":
        return None
    key = derived_key(path)
    if key is None:
        return None
    edges = edges_of(obj)
    estimate = None if edges is None else l2_estimate(obj.get("values"), edges)
    return None if estimate is None else (key, estimate[0])
