"""The corpus-wide label checks every family gets, applied to its manifest entries after training.

- A run meant to be healthy (a twin or a healthy variant) is checked with :func:`.truth.confirm_healthy`
  on the values its file holds; ``healthy_confirmed`` and the measures go into the entry, and an
  unconfirmed one is left out of the scoring (:func:`evidence.lofo.scored`).
- A run meant to be slow that the twin shows does not learn at all is labelled ``loss-oscillation``
  with ``slow-convergence`` also accepted (:func:`.truth.flat_or_slow_labels`): ``one_of`` records that
  either finding names the fault (the scoring counts whichever was flagged as the label).

- A fault run is also checked against its twin for the two faults any run can have on top of the one
  it set out to cause: a blow-up (:func:`.truth.confirm_explosion`) and vanishing gradients in the first
  layer (:func:`.truth.confirm_vanishing`; not in a run that blew up, whose dead layers are the blow-up's,
  nor in one whose loss ends at or below the twin's, whose gradients shrank because it converged). One the twin confirms is added to ``also_acceptable`` (a
  finding for it is a right reading, not a false alarm), never to the labels.

A family may do the first two itself (then its entries already carry the fields, and are left as they are).
``python -m evidence.torch.recheck`` applies both to the committed manifest fragments in place.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path

from trackerhealth.adapters.files import read_histories

from . import manifest, truth
from .sinks import Logged

HERE = Path(__file__).parent
# The training and validation loss keys the corpus' naming styles and integrations write, most specific first.
LOSS_KEYS = ("train/loss", "loss", "train_loss_step", "train_loss")
VAL_KEYS = ("val/loss", "val_loss", "eval_loss")
GRAD_KEYS = ("train/grad_norm", "grad_norm")
_LAYER = re.compile(r"^(?:grad_norm[/.](?P<a>.+)|(?P<b>.+)\.grad_norm)$")


def _natural(text: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def first_layer_key(tap: Logged) -> tuple[str, str] | None:
    """(layer name, key) of the first layer by name order ("0.weight" < "2.weight" < "10.weight";
    "embed" and "features.0" come before "head"): the layer nearest the input in this corpus' models."""
    layers = []
    for key in tap.keys():
        m = _LAYER.match(key)
        if m:
            layers.append((m.group("a") or m.group("b"), key))
    return min(layers, key=lambda nk: _natural(nk[0])) if layers else None


def _cross_check(entry: dict, root: Path, entries_by_name: dict[str, dict]) -> None:
    twin = entries_by_name.get(entry.get("twin") or "")
    if not entry["faults"] or twin is None:
        return
    fault_tap, twin_tap = logged_from_file(root, entry["file"]), logged_from_file(root, twin["file"])
    loss_key, grad_key = _first(fault_tap, LOSS_KEYS), _first(fault_tap, GRAD_KEYS)
    # Re-runnable: what an earlier cross-check added is taken back before it is decided again.
    earlier = set(entry.get("truth", {}).get("cross_check", {}).get("added", ()))
    measures, also = {}, set(entry.get("also_acceptable", ())) - earlier
    before = set(also)
    if "nonfinite" not in entry["faults"] and grad_key and grad_key in twin_tap and loss_key:
        ok, m = truth.confirm_explosion(fault_tap, twin_tap, grad_key, loss_key)
        measures["explosion"] = m
        if ok:
            also.add("nonfinite")
    layer = first_layer_key(fault_tap)
    # In a run that blew up, layers that stop getting gradient afterwards are the blow-up's doing
    # (dead units), which one finding (nonfinite, with its onset) names.
    blew_up = "nonfinite" in entry["faults"] or "nonfinite" in also
    # Gradients also shrink when a net fits its data better than the twin (a memorised small subset):
    # that is convergence, not gradients starved on their way to the first layer.
    fits_better = loss_key is not None and loss_key in twin_tap and (
        truth.level_at_end(fault_tap, loss_key) <= truth.level_at_end(twin_tap, loss_key))
    if ("vanishing-gradients" not in entry["faults"] and not blew_up and not fits_better and layer
            and layer[1] in twin_tap):
        ok, m = truth.confirm_vanishing(fault_tap, twin_tap, layer[1])
        measures["vanishing"] = m
        if ok:
            also.add("vanishing-gradients")
    measures["added"] = sorted(also - before - set(entry["faults"]))
    entry["truth"] = {**entry.get("truth", {}), "cross_check": measures}
    also -= set(entry["faults"])
    if also:
        entry["also_acceptable"] = sorted(also)
    else:
        entry.pop("also_acceptable", None)


@lru_cache(maxsize=None)
def logged_from_file(root: Path, file: str) -> Logged:
    """What a run's file holds, as the tap the truth criteria read (every key, every logged value).
    Cached: a twin is read once however many fault runs compare with it (the tap is never modified)."""
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
    by_name = {e["name"]: e for e in entries}
    for entry in entries:
        _cross_check(entry, root, by_name)
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
            entry["one_of"] = [["loss-oscillation", "slow-convergence"]]
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
