"""The diagnosis registry.

Each diagnosis is one module in this package that defines:

- ``ID`` – the stable id from the contract (``loss-oscillation``, …);
- ``TITLE`` – a short human title;
- ``NEEDS`` – the roles it reads (see :mod:`trackerhealth.roles`); a run lacking all of them gets
  a ``skipped`` finding with the reason;
- ``Thresholds`` – a frozen dataclass whose fields, each declared with
  :func:`~trackerhealth.diagnoses._thresholds.knob` (default and one-line meaning), are every
  number the diagnosis decides on;
- ``RECOMMENDATION`` – the fix text: the one copy, used by the findings and the docs page;
- ``run(history, thresholds) -> Finding`` – pure: ``history`` is a :class:`~trackerhealth.roles.RoleView`;
- ``REAL_CASES`` – real runs it catches, quoted on its documentation page (see
  :mod:`._real_cases`; ``tests/test_real_cases.py`` re-checks each against its cached log);
- ``COMPARES_RUNS`` – optional, ``True`` for a diagnosis that judges a run against its group
  (``history.cohort``) and is skipped for a run analysed alone.

The module docstring ("What it looks for", "Why it matters") is the start of the diagnosis'
documentation page; :mod:`._docs` adds the fix and the thresholds table from the code. Modules are
discovered, so adding a ninth diagnosis is one new file (plus its tests): nothing else is edited.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType

from ._thresholds import described


@dataclass(frozen=True)
class Diagnosis:
    """A registered diagnosis module, as the engine, CLI and docs see it."""

    id: str
    title: str
    needs: tuple[str, ...]
    thresholds: type
    recommendation: str
    module: ModuleType
    real_cases: tuple = ()  # of _real_cases.RealCase
    compares_runs: bool = False  # judges a run against its group's baseline; skipped for a run alone

    @property
    def doc(self) -> str:
        return (self.module.__doc__ or "").strip()

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else self.title

    def default_thresholds(self):
        return self.thresholds()

    def threshold_fields(self) -> dict[str, object]:
        return {f.name: f.default for f in dataclasses.fields(self.thresholds)}

    def threshold_meanings(self) -> list[tuple[str, object, str]]:
        """``(name, default, meaning)`` per threshold, in declaration order."""
        return described(self.thresholds)

    def run(self, history, thresholds=None):
        return self.module.run(history, thresholds or self.thresholds())


def _discover() -> dict[str, Diagnosis]:
    found: dict[str, Diagnosis] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if not hasattr(module, "ID"):
            continue
        diag = Diagnosis(module.ID, module.TITLE, tuple(module.NEEDS), module.Thresholds, module.RECOMMENDATION, module,
                         tuple(module.REAL_CASES), bool(getattr(module, "COMPARES_RUNS", False)))
        if diag.id in found:
            raise RuntimeError(f"two diagnosis modules claim the id {diag.id!r}")
        found[diag.id] = diag
    return found


REGISTRY: dict[str, Diagnosis] = _discover()
# The diagnoses that judge one run on its own (every one but those that compare a run with its group).
SINGLE_RUN: tuple[str, ...] = tuple(d.id for d in REGISTRY.values() if not d.compares_runs)


def get(diagnosis_id: str) -> Diagnosis:
    try:
        return REGISTRY[diagnosis_id]
    except KeyError:
        raise KeyError(f"unknown diagnosis {diagnosis_id!r}; known: {', '.join(REGISTRY)}") from None


__all__ = ["Diagnosis", "REGISTRY", "get"]
