"""Load the corpus's real training runs into the contract server's store, as W&B would hold them.

Each run's points are grouped into one history row per step (``_step``, ``_timestamp``, metrics);
metrics named ``system/…`` or ``system.…`` become the run's system events (``system.<name>``), as
the W&B SDK logs them. The first ``exported`` fraction of rows sits in the parquet export, the
rest is "live", so every scan reads both paths of ``scan_history``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from trackerhealth.adapters.files import read_histories
from trackerhealth.schema import RunHistory

CORPUS = Path(__file__).resolve().parents[2] / "corpus"


def rows_of(history: RunHistory) -> tuple[list[dict], list[dict]]:
    by_step: dict[int, dict] = defaultdict(dict)
    events: dict[float, dict] = defaultdict(dict)
    for key in history.keys():  # noqa: SIM118 - RunHistory.keys() is its key order
        series = history[key]
        system = key.startswith(("system/", "system."))
        name = "system." + key.split("/", 1)[1] if key.startswith("system/") else key
        for step, value, wall in zip(series.steps, series.values, series.wall_times):
            wall = float(wall) if math.isfinite(wall) else 1.7e9 + float(step)
            if system:
                row = events[wall]
                row.update({"_timestamp": wall, "_runtime": wall - 1.7e9, name: float(value)})
            else:
                row = by_step[int(step)]
                row.setdefault("_step", int(step))
                row.setdefault("_timestamp", wall)
                row[key] = float(value)
    return [by_step[s] for s in sorted(by_step)], [events[t] for t in sorted(events)]


def load_into(store, entity: str, project: str, entries: list[dict], folder: Path = CORPUS,
              exported: float = 0.7) -> dict[str, object]:
    """Add each manifest entry as a run named after it; returns {name: StoredRun}."""
    added = {}
    for i, entry in enumerate(entries):
        (history,) = read_histories(folder / entry["file"])
        rows, events = rows_of(history)
        run_id = f"r{i:03d}{entry['name'][:20].replace('_', '')}"[:24].lower()
        run = store.add_run(entity, project, run_id, display_name=entry["name"], history=rows, events=events,
                            tags=["baseline"] if i % 3 == 0 else [], config={"lr": {"value": 0.01 * (i + 1)}},
                            summary={"epoch": i})
        run.exported_rows = int(len(rows) * exported)
        added[entry["name"]] = run
    return added
