"""How a threshold is declared: a frozen-dataclass field with its default and a one-line meaning.

Every number a diagnosis or the scorecard decides on is one such field, so ``trackerhealth
diagnoses`` and docs/diagnoses.md list it (default and meaning), and ``[thresholds.<id>]`` in the
config changes it. The meaning lives in the field's metadata (declared next to the default, read
back by :func:`described`), never parsed out of a docstring.
"""

from __future__ import annotations

import dataclasses
from typing import Any

MEANING = "meaning"


def knob(default: Any, meaning: str) -> Any:
    """A threshold field: ``default`` and the one line that says what it decides."""
    if not meaning or "\n" in meaning:
        raise ValueError("a threshold's meaning is one non-empty line")
    return dataclasses.field(default=default, metadata={MEANING: meaning})


def described(thresholds_class: type) -> list[tuple[str, Any, str]]:
    """``(name, default, meaning)`` for every field of a Thresholds class, in declaration order."""
    out = []
    for f in dataclasses.fields(thresholds_class):
        if MEANING not in f.metadata:
            raise TypeError(f"{thresholds_class.__qualname__}.{f.name} has no meaning: declare it with knob(default, meaning)")
        out.append((f.name, f.default, f.metadata[MEANING]))
    return out
