"""The corpus manifest: one JSON fragment per family (``manifest/<family>.json``), read together.

An entry: ``name``, ``family``, ``model``, ``dataset``, ``style`` (how it was logged), ``file`` (path
relative to this folder that ``trackerhealth analyze`` / ``read_histories`` opens), ``faults``
(confirmed by :mod:`.truth` against the twin — the label), ``intended`` (what the run set out to break),
``cause`` (the seed's cause, e.g. ``lr_too_high``), ``twin`` (name of its sane twin or null), ``seed``,
``config`` (the hyper-parameters as logged), ``truth`` (the twin measures), ``description``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
FRAGMENTS = HERE / "manifest"
REQUIRED = ("name", "family", "model", "dataset", "style", "file", "faults", "intended", "cause", "twin", "seed",
            "config", "truth", "description")


def write_fragment(family: str, entries: list[dict], folder: Path = FRAGMENTS) -> Path:
    for entry in entries:
        missing = [k for k in REQUIRED if k not in entry]
        if missing:
            raise ValueError(f"manifest entry {entry.get('name')!r} lacks {missing}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{family}.json"
    path.write_text(json.dumps(sorted(entries, key=lambda e: e["name"]), indent=1, default=float) + "\n")
    return path


def merge_fragment(family: str, entries: list[dict], folder: Path = FRAGMENTS) -> Path:
    """Write ``entries`` into the family's fragment, replacing those of the same name and keeping the rest."""
    path = folder / f"{family}.json"
    kept = json.loads(path.read_text()) if path.exists() else []
    fresh = {e["name"] for e in entries}
    return write_fragment(family, [e for e in kept if e["name"] not in fresh] + entries, folder)


def load(folder: Path = FRAGMENTS) -> list[dict]:
    """Every family's entries; names are unique across the corpus."""
    entries: list[dict] = []
    for path in sorted(folder.glob("*.json")):
        entries.extend(json.loads(path.read_text()))
    names = [e["name"] for e in entries]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate run names in the corpus manifest: {sorted(dupes)}")
    return entries
