"""The corpus-wide label checks every family gets, applied to its manifest entries after training.

- A run meant to be healthy (a twin or a healthy variant) is checked with :func:`.truth.confirm_healthy`
  on the values its file holds; ``healthy_confirmed`` and the measures go into the entry, and an
  unconfirmed one is left out of the scoring (:func:`evidence.lofo.scored`).
- A run meant to be slow that the twin shows does not learn at all is labelled ``loss-oscillation``
  with ``slow-convergence`` also accepted (:func:`.truth.flat_or_slow_labels`).

A family may do either itself (then its entries already carry the fields, and are left as they are).
``python -m evidence.torch.recheck`` applies both to the committed manifest fragments in place.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trackerhealth.adapters.files import read_histories

from . import manifest, truth
from .sinks import Logged

HERE = Path(__file__).parent
# The training and validation loss keys the corpus' naming styles and integrations write, most specific first.
LOSS_KEYS = ("train/loss", "loss", "train_loss_step", "train_loss")
VAL_KEYS = ("val/loss", "val_loss", "eval_loss")


def logged_from_file(root: Path, file: str) -> Logged:
    """What a run's file holds, as the tap the truth criteria read (every key, every logged value)."""
    (history,) = read_histories(root / file)
    tap = Logged()
    for key in history.keys():
        series = history[key]
        for step, value in zip(series.steps, series.values):
            tap.add(key, float(step), float(value))
    return tap


def _first(tap: Logged, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in tap), None)


def apply(entries: list[dict], root: Path = HERE) -> list[dict]:
    for entry in entries:
        meant_healthy = not entry["intended"]
        if meant_healthy and "healthy_confirmed" not in entry:
            tap = logged_from_file(root, entry["file"])
            loss_key = _first(tap, LOSS_KEYS)
            if loss_key is None:
                raise KeyError(f"{entry['name']}: no training loss among {LOSS_KEYS} in {entry['file']}")
            ok, measures = truth.confirm_healthy(tap, loss_key, _first(tap, VAL_KEYS))
            entry["healthy_confirmed"] = ok
            entry["truth"] = {**entry.get("truth", {}), "healthy_check": measures}
        flat_slow = "slow-convergence" in entry["intended"] and entry["faults"] == ["loss-oscillation"]
        if flat_slow:
            entry["faults"], also = truth.flat_or_slow_labels(entry["intended"], True)
            entry["also_acceptable"] = sorted(set(entry.get("also_acceptable", ())) | set(also))
    return entries


def main() -> int:
    for path in sorted(manifest.FRAGMENTS.glob("*.json")):
        entries = apply(json.loads(path.read_text()))
        manifest.write_fragment(path.stem, entries, manifest.FRAGMENTS)
        unconfirmed = [e["name"] for e in entries if e.get("healthy_confirmed") is False]
        print(f"{path.stem}: {len(entries)} entries; meant healthy but not confirmed: {unconfirmed or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
