"""The last scan's report per run, so a re-scan of an unchanged run costs nothing.

A run keeps its last report — no history request, no analysis, no write, no alert — when three
things are what they were: the run's listing signature (:meth:`Adapter.signature`: new points, a
new state or new params change it; trackerhealth's own tags and summary keys do not), the
trackerhealth version, and everything the report depends on in this scan (the configuration and
the writer's options: :func:`scan_key`). A report made by a dry run, or a run that had any error,
is never reused by a scan that writes.

It lives with the history cache, on the machine that runs ``trackerhealth scan`` (the driver of a
Ray scan), one JSON file per tracker store and project::

    <cache-dir>/reuse/<scope digest>.json   # {"format", "scope", "runs": {run_id: {...}}}

Ray workers never read or write it: the driver decides what to dispatch and stores what comes
back, so it is right when workers share no disk. Plain files written atomically, like the cache,
so a CI cache can keep them between scheduled scans.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from . import __version__
from .adapters._shared import atomic_write
from .config import Config
from .schema import HealthReport, RunRef

__all__ = ["ReuseStore", "scan_key"]

FORMAT = 1
PRUNE_AFTER_S = 90 * 86400  # runs not listed for this long are forgotten


def scan_key(config: Config, *writer_options: Any) -> str:
    """What a report depends on besides the run's data: the version, the configuration (roles,
    units, thresholds, disabled diagnoses; not where it was read from) and the writer's options."""
    doc = [__version__, sorted(config.roles.items()), sorted(config.units.items()),
           sorted((k, repr(v)) for k, v in config.thresholds.items()), sorted(config.disable),
           [repr(o) for o in writer_options]]
    return hashlib.sha256(json.dumps(doc, default=repr).encode()).hexdigest()


class ReuseStore:
    """One scope's remembered reports. ``root=None`` (``--no-cache``): nothing is remembered."""

    def __init__(self, root: Path | None, scope: str, key: str):
        self.enabled = root is not None and bool(scope)
        self.scope, self.key = scope, key
        digest = hashlib.sha256(scope.encode()).hexdigest()[:16]
        self.path = Path(root) / "reuse" / f"{digest}.json" if self.enabled else None
        self._runs = self._read() if self.enabled else {}
        self._changed: dict[str, dict | None] = {}

    def _read(self) -> dict[str, dict]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("scope") != self.scope:
            return {}  # another format, or a digest collision: start over rather than misread
        runs = doc.get("runs")
        return runs if isinstance(runs, dict) else {}

    def lookup(self, ref: RunRef, signature: str | None, *, writing: bool) -> HealthReport | None:
        """The remembered report for ``ref``, with the listing's fresh ref, when nothing it depends
        on changed; ``writing``: this scan writes, so only a report that was written counts."""
        if not self.enabled or signature is None:
            return None
        entry = self._runs.get(ref.id)
        if not isinstance(entry, dict) or entry.get("signature") != signature or entry.get("key") != self.key:
            return None
        if writing and not entry.get("written"):
            return None
        try:
            report = HealthReport.from_dict(entry["report"])
        except (KeyError, TypeError, ValueError):
            return None  # written by another version despite the key: analyse again
        self._changed[ref.id] = {**entry, "seen": time.time()}
        return dataclasses.replace(report, run=ref)

    def remember(self, ref: RunRef, signature: str | None, report: HealthReport, *, written: bool) -> None:
        if not self.enabled or signature is None:
            return
        self._changed[ref.id] = {"signature": signature, "key": self.key, "written": written, "seen": time.time(),
                                 "report": report.to_dict(full=True)}

    def forget(self, ref: RunRef) -> None:
        """A run that failed this scan: analyse it next time, whatever its signature."""
        if self.enabled:
            self._changed[ref.id] = None

    def save(self) -> None:
        """Merge this scan's entries into the file as it is now (another adapter of the same store
        may have saved since this one was read), drop long-unseen runs, write atomically."""
        if not self.enabled or not self._changed:
            return
        runs = self._read()
        for run_id, entry in self._changed.items():
            if entry is None:
                runs.pop(run_id, None)
            else:
                runs[run_id] = entry
        cutoff = time.time() - PRUNE_AFTER_S
        runs = {k: v for k, v in runs.items() if isinstance(v, dict) and v.get("seen", 0) >= cutoff}
        doc = {"format": FORMAT, "scope": self.scope, "runs": runs}
        atomic_write(self.path, json.dumps(doc, sort_keys=True).encode())
        self._runs, self._changed = runs, {}
