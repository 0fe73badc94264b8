"""The diagnosis registry.

Each diagnosis is one module in this package that defines:

- ``ID`` – the stable id from the contract (``loss-oscillation``, …);
- ``TITLE`` – a short human title;
- ``NEEDS`` – the roles it reads (see :mod:`trackerhealth.roles`); a run lacking all of them gets
  a ``skipped`` finding with the reason;
- ``Thresholds`` – a frozen dataclass whose field defaults are the diagnosis' only defaults;
- ``run(history, thresholds) -> Finding`` – pure: ``history`` is a :class:`~trackerhealth.roles.RoleView`.

The module docstring is the diagnosis' documentation page. Modules are discovered, so adding a
ninth diagnosis is one new file (plus its tests): nothing else is edited.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Diagnosis:
    """A registered diagnosis module, as the engine, CLI and docs see it."""

    id: str
    title: str
    needs: tuple[str, ...]
    thresholds: type
    module: ModuleType

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
        diag = Diagnosis(module.ID, module.TITLE, tuple(module.NEEDS), module.Thresholds, module)
        if diag.id in found:
            raise RuntimeError(f"two diagnosis modules claim the id {diag.id!r}")
        found[diag.id] = diag
    return found


REGISTRY: dict[str, Diagnosis] = _discover()


def get(diagnosis_id: str) -> Diagnosis:
    try:
        return REGISTRY[diagnosis_id]
    except KeyError:
        raise KeyError(f"unknown diagnosis {diagnosis_id!r}; known: {', '.join(REGISTRY)}") from None


__all__ = ["Diagnosis", "REGISTRY", "get"]
