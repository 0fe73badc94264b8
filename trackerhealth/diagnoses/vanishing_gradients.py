"""Early layers' gradients vanish while later layers learn.

**What it looks for.** Per-layer gradient norms, in model order (the order the run logged them).
Each layer's typical norm is its median over the run. The first ``early_share`` of layers is
compared with the last ``early_share`` (a layer whose gradient drops to exactly zero for good after being
non-zero, the dead units a blow-up leaves, or below ``collapse`` of its first tenth's level for good,
the saturated units an LR far too high leaves, is judged on the stretch before): critical when the early layers' norm is below ``tiny``
(1e-7, from the seed) while the late layers are at least ``min_late`` — normal; a warning when the
early layers are more than ``ratio``× smaller than the late ones, or when, through ``decay_min_layers`` or more layers, every
layer's norm is below the next one's and the first is below ``decay_ratio`` of the last (the gradient shrinks at each layer
on its way back: a plain sigmoid stack; evidence ``depthwise_decay``), or when every layer is below
``tiny`` (the whole network has stopped learning). Neither tiny early layers nor a tiny network is vanishing when
the training loss first rose ``blowup_factor``× its start (a blow-up killed or saturated the units: loss-oscillation
or nonfinite reports it) or ended below ``solved_loss`` of its start (a loss at 0 sends no gradient back: nothing
is left to learn).

**Why it matters.** Layers that receive no gradient do not learn: a deep network then behaves like
a shallow one on top of random features.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .. import stats
from ..roles import RoleView
from ..schema import Evidence, Finding
from . import _common as c
from ._real_cases import TORCH, RealCase
from ._thresholds import knob

ID = "vanishing-gradients"
TITLE = "Vanishing gradients in early layers"
NEEDS = ("layer_grad_norms",)
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Add residual connections and Batch/LayerNorm; replace sigmoid/tanh with ReLU or GELU; use He or "
    "Xavier initialization; keep logging per-layer gradient norms to confirm the gradient reaches the first layers."
)


REAL_CASES = (
    RealCase("mlp_vanishing_sigmoid20", TORCH, "20 sigmoid layers without residual connections",
             "the first 5 of 20 layers get gradient norms of 9.55e-18 (below 1.00e-07) while the last layers get 0.0101"),
)


@dataclass(frozen=True)
class Thresholds:
    tiny: float = knob(1e-7, "early layers' median gradient norm below this vanishes (the seed)")
    min_late: float = knob(1e-4, "critical only while the late layers' norm is at least this (normal)")
    ratio: float = knob(1e-4, "a warning when early layers are more than 1/ratio times smaller than late ones")
    early_share: float = knob(0.25, "share of the layers at each end compared (first vs last)")
    min_layers: int = knob(3, "layers with gradient norms needed to judge")
    collapse: float = knob(1e-3, "a layer's norms below this share of their first part's median from some step to the end collapsed (units knocked out): judged before")
    collapse_head_parts: int = knob(10, "the first 1/this of a layer's norms is its starting level for the collapse check")
    blowup_factor: float = knob(10.0, "every layer tiny is no vanishing when the training loss first rose this many times its start (a blow-up killed the units)")
    solved_loss: float = knob(1e-6, "nor when the training loss ended below this share of its start (nothing left to learn)")
    head_share: float = knob(0.02, "share of the run at the start whose median is the training loss' starting level (at least 3 points)")
    tail_share: float = knob(0.2, "share of the run at the end whose median is the training loss' end level")
    early_rise: float = knob(1.5, "a starting median this many times the first point is an early blow-up: the first point is the start")
    early_fall: float = knob(10.0, "a first logged loss this many times the median of the run's first head_share fell within it (a log of every one of 100k iterations): the start is that first point")
    decay_min_layers: int = knob(5, "layers needed before a steady fall of the gradient from layer to layer towards the input is judged")
    decay_ratio: float = knob(1e-2, "a warning when that fall is steady through every layer and the first layer's norm is below this share of the last's")


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    layers = history.group("layer_grad_norms")
    if not layers:
        return c.skipped(_SELF, "not logged: per-layer gradient norms (e.g. grad_norm/<layer>)")
    if len(layers) < thresholds.min_layers:
        return c.skipped(_SELF, f"only {len(layers)} layer(s) with gradient norms; need {thresholds.min_layers}")
    medians = []
    for label, key, s in layers:
        f = _while_alive(s.finite().values, thresholds)
        medians.append(stats.typical(np.abs(f)) if len(f) else np.nan)
    med = np.array(medians)
    k = max(1, int(round(len(layers) * thresholds.early_share)))
    early, late = med[:k], med[-k:]
    if np.isnan(early).all() or np.isnan(late).all():
        return c.skipped(_SELF, "per-layer gradient norms have no finite values")
    early_level = float(np.nanmedian(early))
    late_level = float(np.nanmedian(late))
    first_key, last_key = layers[0][1], layers[-1][1]
    steps = (float(layers[0][2].steps[0]), float(layers[0][2].steps[-1]))
    rel = early_level / late_level if late_level > 0 else float("inf")

    def ev(code: str, observed: float, threshold: float, detail: str, key: str = first_key):
        return Evidence(key, observed, threshold, steps[0], steps[1], code, detail)

    # Asked whenever a tiny level is about to be judged: the first layers' (below) or every layer's.
    other_cause = _stopped_for_another_reason(history, thresholds) if min(early_level, late_level) < thresholds.tiny else None
    if other_cause is not None:
        tiny = (f"every layer's gradient norm is tiny (last layers {c.fmt(late_level)})" if late_level < thresholds.tiny else
                f"the first layers' gradient norm is tiny ({c.fmt(early_level)}; last layers {c.fmt(late_level)})")
        return c.ok(_SELF, f"{tiny}, but {other_cause}")
    if early_level < thresholds.tiny and late_level >= thresholds.min_late:
        # One item per early layer, so every layer the message counts is named (the dashboard
        # outlines exactly these rows of its heatmap).
        evidence = [
            ev("early_layers_tiny", float(med[i]), thresholds.tiny,
               f"median gradient norm of {layers[i][0]}, one of the first {k} of {len(layers)} layers "
               f"(their median {c.fmt(early_level)})", layers[i][1])
            for i in range(k)
        ] + [
            ev("late_layers_normal", late_level, thresholds.min_late,
               f"median gradient norm of the last {k} layers", last_key),
        ]
        message = (f"the first {k} of {len(layers)} layers get gradient norms of {c.fmt(early_level)} (below {c.fmt(thresholds.tiny)}) "
                   f"while the last layers get {c.fmt(late_level)}: gradients vanish before reaching {layers[0][0]}.")
        return c.problem(_SELF, True, message, RECOMMENDATION, evidence)
    if late_level < thresholds.tiny:
        message = f"every layer's gradient norm is tiny (last layers {c.fmt(late_level)}, first {c.fmt(early_level)}): the network has stopped learning."
        return c.problem(_SELF, False, message, RECOMMENDATION,
                         [ev("all_layers_tiny", late_level, thresholds.tiny, "median gradient norm of the last layers", last_key)])
    if rel < thresholds.ratio:
        message = (f"the first {k} layers' gradient norms ({c.fmt(early_level)}) are {c.fmt(1 / rel)}x smaller than the last layers' "
                   f"({c.fmt(late_level)}): early layers barely learn.")
        return c.problem(_SELF, False, message, RECOMMENDATION,
                         [ev("early_late_ratio", rel, thresholds.ratio, "early/late median gradient-norm ratio")])
    if _decays_layer_by_layer(med, thresholds):
        # Each layer passes back a fraction of what it receives, all the way down: a sigmoid's derivative is at
        # most 0.25, so a plain sigmoid MLP's gradient shrinks by a constant factor per layer (public logs P494,
        # P495: a 4-layer sigmoid MLP, 1.37e-2 at the last layer, 4.6e-3, 9.8e-4, 2.4e-4, 1.3e-4 at the first,
        # its loss pinned at ln 10). Healthy networks' norms go up and down with the layers' sizes; with three or
        # four layers logged a steady rise is common (a small first layer), so five or more are needed.
        first, last = float(med[0]), float(med[-1])
        message = (f"the gradient norm falls at every layer on its way back to the input, through all {len(layers)} layers: "
                   f"{c.fmt(last)} at {layers[-1][0]}, {c.fmt(first)} at {layers[0][0]} ({c.fmt(last / first)}x smaller): "
                   "the first layers barely learn.")
        return c.problem(_SELF, False, message, RECOMMENDATION,
                         [ev("depthwise_decay", first / last, thresholds.decay_ratio,
                             f"first over last layer's median gradient norm; every layer's median below the next one's ({len(layers)} layers)")])
    return c.ok(_SELF, f"gradient reaches the first layers: early {c.fmt(early_level)} vs late {c.fmt(late_level)}")


def _decays_layer_by_layer(medians: np.ndarray, thresholds: Thresholds) -> bool:
    """Whether the layers' median gradient norms rise strictly from the first layer to the last, through at
    least ``decay_min_layers`` layers, the first below ``decay_ratio`` of the last."""
    if len(medians) < thresholds.decay_min_layers or not np.isfinite(medians).all() or (medians <= 0).any():
        return False
    return bool(np.all(np.diff(medians) > 0)) and medians[0] < thresholds.decay_ratio * medians[-1]


def _stopped_for_another_reason(history: RoleView, thresholds: Thresholds) -> str | None:
    """Why every layer's gradient can be tiny without vanishing: the training loss blew up first (the units a
    blow-up kills or saturates pass no gradient: loss-oscillation or nonfinite reports the blow-up; torch runs at
    an LR far too high, their losses 555x and 9,259x their start before they went still), or it reached 0 (a
    triplet loss whose margins are all met has a zero gradient: the training set is solved). None otherwise."""
    loss = history.series("train_loss")
    if loss is None:
        return None
    v = loss.finite().values
    if not len(v):
        return None
    # Where the loss started and ended, as the loss diagnoses measure it (a blow-up within the first logs starts at the first).
    start, end = c.start_and_end(v, thresholds.head_share, thresholds.tail_share, thresholds.early_rise, thresholds.early_fall)
    if start <= 0:
        return None
    peak = float(np.max(v))
    if peak >= thresholds.blowup_factor * start:
        return (f"the training loss first rose to {c.fmt(peak / start)}x its start: the units stopped in that blow-up, "
                "which loss-oscillation or nonfinite reports")
    if end <= thresholds.solved_loss * start:
        return f"the training loss went {c.fmt(start)} → {c.fmt(end)}: nothing is left to learn, so nothing flows back"
    return None


def _while_alive(values: np.ndarray, thresholds: Thresholds) -> np.ndarray:
    """A layer's norms up to where they collapse for good: to exactly zero, or below ``collapse`` of
    their first tenth's median, from some step to the end.

    A gradient that is exactly 0 from some step to the end, after being non-zero, comes from dead units
    (ReLUs knocked out by a blow-up or an LR spike); one that falls a thousandfold from a normal start
    and stays there comes from saturated units (a tanh or sigmoid layer whose weights an LR far too high
    blew up: the torch corpus's seqcls_lr_too_high runs, 0.1-1 for their first fifth, ~1e-8 after). The
    layer stopped learning because the run broke, which nonfinite or loss-oscillation reports.
    Vanishing is a gradient that is small while the layer is alive, so it is judged on the stretch
    before that. A layer small or zero from its first steps is kept as it is (it never got any gradient:
    a deep sigmoid stack's first layers are at 1e-18 from step 1)."""
    nonzero = np.flatnonzero(values != 0)
    if len(nonzero) == 0:
        return values
    end = int(nonzero[-1]) + 1
    if end < len(values):
        return values[:end]
    head = np.abs(values[:max(1, len(values) // thresholds.collapse_head_parts)])
    start = float(np.median(head))
    alive = np.flatnonzero(np.abs(values) >= thresholds.collapse * start)
    end = int(alive[-1]) + 1 if len(alive) else len(values)
    # Only from a living start (at least ``tiny``): a layer that begins vanished and fades further is vanishing.
    return values[:end] if start >= thresholds.tiny and end < len(values) else values

