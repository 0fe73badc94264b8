"""Loss spikes at a fixed period (e.g. once per epoch), then recovers.

**What it looks for.** Upward spikes of the training loss: points more than ``z`` robust standard
deviations (MAD of the residual) and at least ``min_rel`` of the local level above a short rolling
median, so a spike is a brief excursion that recovers, not a level change. Spikes right after a
learning-rate jump (a rise of more than ``lr_restart_jump``: a warm restart) are excluded. Candidate periods come from the gaps between
spikes — or, when the run logs its epoch, only whole numbers of epochs and whole fractions of one
(down to ``epoch_fractions``): a data-order spike is locked to the epoch; for each, the spikes are folded onto
their phase within the period (within ``phase_tolerance`` of it, or one logging interval: data-order spikes recur
at an exact step period, and a loose window lets random spikes line up). The spikes are periodic when in-phase spikes appear in at least
``min_spikes`` cycles and in at least ``min_coverage`` of the run's cycles from the first in-phase
spike on (sparse logging may miss some; a bad shard stands out only once the model fits the rest), and hitting that many cycles by chance — given how many spikes there are and how
many periods were tried — has a probability of at most ``max_p_value`` (binomial, Bonferroni) —
so unrelated noise spikes neither hide the pattern nor fake one.

**Why it matters.** A spike at the same place every epoch points at the data, not the optimizer:
the loader does not shuffle, or one shard or batch is corrupt (bad labels, extreme values, a
sequence or image size far outside the rest).
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

ID = "periodic-spikes"
TITLE = "Periodic loss spikes"
NEEDS = ("train_loss",)
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Shuffle the training data every epoch (DataLoader(shuffle=True); set_epoch() on distributed samplers); "
    "log sample ids and inspect the batch at the spike steps for bad labels or extreme inputs; clip gradients "
    "to limit the damage of one bad batch."
)


REAL_CASES = (
    RealCase("cnn_bad_shard_overfit", TORCH, "a CNN fed unshuffled data with one bad shard, which also overfits",
             "loss spikes every 7 steps (54 spikes at steps 25, 32, 39, 46…), each 596% above the local level"),
)


@dataclass(frozen=True)
class Thresholds:
    z: float = knob(6.0, "a spike is more than this many robust standard deviations above the rolling median")
    min_rel: float = knob(0.15, "and at least this share of the local level above it")
    min_spikes: int = knob(5, "cycles holding an in-phase spike needed")
    min_coverage: float = knob(0.85, "share of the run's cycles holding an in-phase spike needed")
    max_p_value: float = knob(0.01, "the chance of hitting that many cycles at random must be at most this (binomial, Bonferroni)")
    window: int = knob(9, "points of the rolling-median baseline; also the reach of a learning-rate restart in logging intervals")
    critical_height: float = knob(1.0, "critical when the median spike is more than this share above the local level (1.0: doubles the loss)")
    min_points: int = knob(40, "finite train-loss points needed to judge")
    lr_restart_jump: float = knob(0.5, "a learning-rate rise of more than this share is a restart; spikes right after it are excluded")
    phase_tolerance: float = knob(0.01, "spikes within this share of the period (or a third of the shortest period tried) are in phase")
    min_period_intervals: float = knob(3.0, "the shortest period tried, in logging intervals")
    max_spikes: int = knob(300, "cost bound: only the tallest this many spikes are folded (the comb test is quadratic)")
    epoch_match: float = knob(0.1, "a period within this many epochs of a whole number of epochs is named per epoch")
    epoch_fractions: int = knob(4, "with a logged epoch counter, periods of a whole number of epochs or 1/2 .. 1/this of one are tried")


def _epoch_length(history: RoleView) -> float | None:
    """Steps per epoch, from a logged epoch counter: the steps between its whole-epoch boundaries over the
    epochs they cover. Not the median gap between boundaries: an epoch of 10.24
    optimizer steps has boundaries 10, 10, 10, 11 steps apart, and a period of 10 drifts a whole epoch
    over 40 epochs, so a once-per-epoch comb finds nothing (public log P443)."""
    ep = history.series("epoch")
    if ep is None:
        return None
    e = ep.finite()
    whole = np.floor(e.values + 1e-9)  # 1e-9: a float guard (2.9999999 logged for epoch 3)
    change = np.flatnonzero(np.diff(whole) > 0) + 1
    if len(change) < 2:  # a length needs two epoch boundaries (also covers a counter of fewer than three points)
        return None
    # Between consecutive boundaries where the counter went up; a counter that starts over (trainings appended to
    # one log) goes down between two of them, and that gap is no epoch.
    gaps, epochs = np.diff(e.steps[change]), np.diff(whole[change])
    forward = epochs > 0
    if not forward.any():
        return None
    length = float(gaps[forward].sum() / epochs[forward].sum())
    # An epoch takes at least one optimizer step: a counter that runs ahead of the steps (an epoch column that
    # is no epoch count) gives no length to lock to, and its whole multiples up to the run's length would be
    # millions of periods (at one step or more, there are at most as many as the run has steps).
    return length if length >= 1 else None


def _epoch_locked_periods(epoch_len: float, span: float, thresholds: Thresholds) -> np.ndarray:
    """Whole multiples of the epoch up to the run's length (:func:`stats.periodic_comb` keeps those that fit
    three times), and its whole fractions down to a half, a third ... an ``epoch_fractions``-th."""
    multiples = epoch_len * np.arange(1, max(1, int(span / epoch_len)) + 1)
    fractions = epoch_len / np.arange(2, thresholds.epoch_fractions + 1)
    return np.concatenate([fractions, multiples])


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    loss = history.series("train_loss")
    if loss is None:
        return c.skipped(_SELF, "not logged: train_loss")
    loss = c.until_first_nonfinite(loss).finite()
    if len(loss) < thresholds.min_points:
        return c.skipped(_SELF, f"only {len(loss)} finite train-loss points; need {thresholds.min_points}")
    key = history.key("train_loss")
    v, s = loss.values, loss.steps
    idx = stats.spikes(v, thresholds.window, thresholds.z, thresholds.min_rel)
    lr = history.series("lr")
    if lr is not None and len(idx):
        restarts = stats.lr_restarts(lr.steps, lr.values, thresholds.lr_restart_jump)
        if len(restarts):
            gap = float(np.median(np.diff(s))) * thresholds.window
            near = np.abs(s[idx][:, None] - restarts[None, :]).min(axis=1) <= gap
            idx = idx[~near]
    if len(idx) < thresholds.min_spikes:
        return c.ok(_SELF, f"{len(idx)} isolated spike(s) in {key}; no periodic pattern")
    base = stats.rolling_median(v, thresholds.window)
    if len(idx) > thresholds.max_spikes:  # the comb test is quadratic in spikes; the tallest 300 carry any period
        idx = np.sort(idx[np.argsort(v[idx] - base[idx])[-thresholds.max_spikes:]])
    cadence = float(np.median(np.diff(s)))
    epoch_len = _epoch_length(history)
    # With the epoch length known, only periods locked to it are tried: the same batch comes back once
    # per epoch (or every few epochs, or a few times per epoch at fixed places), so a data-order spike
    # recurs at a whole number of epochs or a whole fraction of one. Spikes that line up at some other
    # period drift through the epoch (public log P56: every ~330 steps with 80-step epochs) and are not
    # the data order; without an epoch counter every gap between spikes is a candidate.
    locked = _epoch_locked_periods(epoch_len, float(s[-1] - s[0]), thresholds) if epoch_len else None
    comb = stats.periodic_comb(s[idx], float(s[0]), float(s[-1]), thresholds.min_period_intervals * cadence,
                               locked, thresholds.phase_tolerance, from_gaps=locked is None)
    regular = (comb is not None and comb.cycles_hit >= thresholds.min_spikes and comb.coverage >= thresholds.min_coverage
               and comb.p_value <= thresholds.max_p_value)
    if not regular:
        best = (f"best: period {c.fmt(comb.period)}, {comb.cycles_hit} cycles hit, {c.fmt(100 * comb.coverage)}% of cycles vs "
                f"{c.fmt(100 * comb.chance)}% by chance") if comb else "too few"
        return c.ok(_SELF, f"{len(idx)} spikes in {key}, but no period explains them ({best})")
    period, coverage, in_phase = comb.period, comb.coverage, comb.cycles_hit
    idx = idx[comb.in_phase]
    heights = (v[idx] - base[idx]) / np.maximum(np.abs(base[idx]), 1e-12)  # 1e-12: a numeric guard
    height = float(np.median(heights))
    per_epoch = ""
    if epoch_len:
        multiple = period / epoch_len
        if abs(multiple - round(multiple)) < thresholds.epoch_match and round(multiple) >= 1:
            per_epoch = " — once per epoch" if round(multiple) == 1 else f" — every {round(multiple)} epochs"
    evidence = [
        Evidence(key, period, None, float(s[idx[0]]), float(s[idx[-1]]), "spike_period",
                 f"spikes in {in_phase} cycles ({c.fmt(100 * coverage)}% of them; random spikes would reach {c.fmt(100 * comb.chance)}%, "
                 f"p={c.fmt(comb.p_value)}){per_epoch}"),
        Evidence(key, height, thresholds.min_rel, float(s[idx[0]]), float(s[idx[-1]]), "spike_height",
                 "median spike height relative to the local loss level"),
    ]
    if epoch_len:
        evidence.append(Evidence(history.key("epoch"), epoch_len, None, None, None, "epoch_length", "steps per epoch"))
    at = ", ".join(c.fmt_step(x) for x in s[idx[:4]])
    message = (f"{key} spikes every {c.fmt(period)} steps{per_epoch} ({len(idx)} spikes at steps {at}…), each "
               f"{c.fmt(100 * height)}% above the local level before recovering: a data-order or bad-shard problem.")
    return c.problem(_SELF, height > thresholds.critical_height, message, RECOMMENDATION, evidence)
