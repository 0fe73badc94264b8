"""What one run's comparison with its group needs: a run's compact profile and its group's context.

A :class:`RunProfile` is a run reduced to what a sibling is compared against — its training loss as
the medians of ``PROFILE_BINS`` equal-count bins (with each bin's last step and wall time), its best
and final val loss, its median step time, throughput and gradient norm, and the status of its own
single-run analysis. It is small (a few kB), so a scan keeps one per run of a project and sends the
baseline's to a Ray worker. A :class:`Cohort` is what a run's analysis receives about its group:
which group, how many runs, and the baseline's profile (or why there is none).

Pure data and arithmetic (numpy and the schema only): the diagnoses import it, the tracker code
never has to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .schema import Evidence, Series

# Bins of a profile's loss curve: fine enough to place "when did it reach this level" within 1 %
# of the run, coarse enough that a profile stays a few kB however long the run.
PROFILE_BINS = 100
# Share of the run at the end whose median is a run's final level (the scorecard's tail).
FINAL_SHARE = 0.1

BASELINE_CURVES = "baseline_curves"  # the key of the baseline's curves in a report's group (full JSON only)
DRAWN_ROLES = ("val_loss", "grad_norm", "lr", "gpu_util", "step_time")  # besides the training loss
MARKED = "marked"  # the user marked the baseline (a tag, or --baseline)
HEALTHIEST = "healthiest"  # chosen by the documented rule (trackerhealth.cohort.choose_baseline)


def final_level(values) -> float:
    """Where a run ended: the median of the last :data:`FINAL_SHARE` of its values."""
    n = max(1, round(len(values) * FINAL_SHARE))
    return float(np.median(values[-n:]))


def finite_median(series: Series | None) -> float | None:
    """The median of a series' finite values (None: not logged, or nothing finite)."""
    if series is None:
        return None
    v = series.values[np.isfinite(series.values)]
    return float(np.median(v)) if len(v) else None


@dataclass(frozen=True)
class Curve:
    """A loss reduced to equal-count bins: each bin's median, last step and last wall time."""

    steps: tuple[float, ...]  # the last step of each bin
    level: tuple[float, ...]  # the median of each bin
    seconds: tuple[float, ...]  # wall seconds from the first point to each bin's last point (nan: not logged)
    first_step: float

    @property
    def start(self) -> float:
        return self.level[0]

    @property
    def best(self) -> float:
        return min(self.level)

    @property
    def final(self) -> float:
        return final_level(self.level)

    @property
    def length(self) -> float:
        """Steps the curve spans (at least one)."""
        return max(self.steps[-1] - self.first_step, 1.0)

    def level_after(self, length: float) -> float:
        """The curve's level once ``length`` steps past its first step were run (its bin that
        ends there or next); the last bin's when the curve is shorter."""
        i = int(np.searchsorted(np.asarray(self.steps) - self.first_step, length))
        return self.level[min(i, len(self.level) - 1)]

    def reached(self, level: float) -> tuple[float, float] | None:
        """``(steps, seconds)`` from the start until the bins' median first got to ``level`` or
        below, or None when it never did."""
        hit = np.flatnonzero(np.asarray(self.level) <= level)
        if len(hit) == 0:
            return None
        i = int(hit[0])
        return max(self.steps[i] - self.first_step, 1.0), self.seconds[i]


def curve(series: Series | None, bins: int = PROFILE_BINS) -> Curve | None:
    """The curve of a loss series up to its first non-finite value, or None with too few points.

    Hand-written rather than :func:`trackerhealth.stats.binned`: a reach needs each bin's *last*
    step and wall time (when the loss had got there), not its middle."""
    if series is None or len(series) == 0:
        return None
    bad = np.flatnonzero(~np.isfinite(series.values))
    end = int(bad[0]) if len(bad) else len(series)
    steps, values, walls = series.steps[:end], series.values[:end], series.wall_times[:end]
    if len(values) < 3:
        return None
    parts = np.array_split(np.arange(len(values)), min(bins, len(values)))
    wall0 = walls[0] if np.isfinite(walls[0]) else np.nan
    return Curve(
        steps=tuple(float(steps[p[-1]]) for p in parts),
        level=tuple(float(np.median(values[p])) for p in parts),
        seconds=tuple(float(walls[p[-1]] - wall0) for p in parts),
        first_step=float(steps[0]),
    )


@dataclass(frozen=True)
class RunProfile:
    """A run as its siblings see it (see the module doc)."""

    run_id: str
    name: str
    loss_key: str | None
    loss: Curve | None
    val_best: float | None = None
    val_final: float | None = None
    step_seconds: float | None = None  # median step time
    batch_size: int | None = None  # samples per optimizer step, as the run's logged config says
    throughput: float | None = None  # median samples (or tokens) per second
    grad_norm: float | None = None  # median gradient norm
    status: str = ""  # the run's own single-run status
    finished: bool = True  # a running or crashed run is never a baseline
    marked: bool = False  # the user marked it as the group's baseline
    # Its logged config entries that define the loss (trackerhealth.loss_setting): a group compares
    # loss levels only between runs that agree on the ones that differ among its members.
    loss_setting: tuple[tuple[str, str], ...] = ()
    # The other curves a dashboard draws faintly behind a sibling's (role → curve): val loss,
    # gradient norm, learning rate, GPU utilization, step time, where logged.
    curves: tuple[tuple[str, Curve], ...] = ()

    def drawn(self) -> dict[str, dict[str, list]]:
        """Every curve of the profile (the training loss first) as ``{role: {"steps", "values"}}``."""
        out = {"train_loss": self.loss} if self.loss is not None else {}
        out.update(dict(self.curves))
        return {role: {"steps": list(c.steps), "values": list(c.level)} for role, c in out.items()}


@dataclass(frozen=True)
class Cohort:
    """What a run's analysis is told about its group.

    ``baseline`` is None when there is nothing to compare with, and ``reason`` says why (a group
    of one, no finished healthy run); ``rule`` says how the baseline was chosen (:data:`MARKED`
    or :data:`HEALTHIEST`)."""

    group: tuple[tuple[str, str], ...]  # ((key, value), …): the values the runs were grouped by
    size: int
    baseline: RunProfile | None = None
    rule: str = ""
    reason: str = ""
    batch_size: int | None = None  # the analysed run's own samples per step (its config), to compare in samples

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.group) or "(no group key)"

    def is_baseline(self, run_id: str) -> bool:
        return self.baseline is not None and self.baseline.run_id == run_id

    def to_dict(self) -> dict[str, Any]:
        """The group as a report carries it; ``baseline_curves`` (what a dashboard draws behind the
        run's own curves) only for a run in a group of two or more that is not the baseline itself."""
        out = {"group": {k: v for k, v in self.group}, "label": self.label, "size": self.size,
               "baseline": self.baseline.run_id if self.baseline else None,
               "baseline_name": self.baseline.name if self.baseline else None, "rule": self.rule, "reason": self.reason}
        if self.baseline is not None:
            out[BASELINE_CURVES] = self.baseline.drawn()
        return out


def per_step(run_batch: int | None, base_batch: int | None) -> float:
    """How many of the baseline's steps one of the run's steps is worth in samples: the batch sizes'
    ratio when both configs give one and they differ, else 1 (steps compared as steps). A batch-4
    run takes 8 steps for the samples the batch-32 baseline sees in one; counted in steps it would
    look 8x slow while it learns as fast from the data."""
    if run_batch and base_batch and run_batch != base_batch:
        return run_batch / base_batch
    return 1.0


@dataclass(frozen=True)
class Reach:
    """How long a run took to reach one of the baseline's loss levels, against the baseline."""

    level: float  # the baseline's start minus the asked share of its fall
    baseline_steps: float
    steps: float | None  # None: never reached
    ratio: float  # steps / baseline_steps; when never reached, a lower bound: the run's length / baseline_steps
    reached: bool
    baseline_seconds: float = float("nan")
    seconds: float = float("nan")


def reaches(run: Curve, base: Curve, shares: tuple[float, ...], scale: float = 1.0) -> list[Reach]:
    """For each share of the baseline's fall, when the baseline and the run got to that loss;
    ``scale`` (:func:`per_step`) turns the run's steps into the baseline's for the ratio."""
    fall = base.start - base.best
    out: list[Reach] = []
    if not fall > 0:
        return out
    for share in shares:
        level = base.start - share * fall
        got = base.reached(level)
        if got is None:  # cannot happen for share <= 1; kept for safety with odd curves
            continue
        b_steps, b_secs = got
        mine = run.reached(level)
        if mine is None:
            out.append(Reach(level, b_steps, None, scale * run.length / b_steps, False, b_secs))
        else:
            out.append(Reach(level, b_steps, mine[0], scale * mine[0] / b_steps, True, b_secs, mine[1]))
    return out


def comparable(run: Curve, base: Curve, factor: float) -> bool:
    """Whether two losses start within ``factor`` of each other: beyond it they are on different scales
    (another weighting of the tasks, another unit) and one's levels say nothing about the other."""
    if not (run.start > 0 and base.start > 0):
        return False
    return 1 / factor <= run.start / base.start <= factor


# The run's level against its baseline's for each pace and gradient measure a profile keeps:
# (profile field, role, evidence code, what it is).
RELATIVE = (("step_seconds", "step_time", "step_time_vs_baseline", "median step time"),
            ("throughput", "throughput", "throughput_vs_baseline", "median throughput"),
            ("grad_norm", "grad_norm", "grad_norm_vs_baseline", "median gradient norm"))


def relative_evidence(own: dict[str, tuple[str, float]], base: RunProfile) -> list[Evidence]:
    """Evidence of the run's medians against the baseline's (``own``: role → (key, median)), for
    each measure both logged: observed is the run's median over the baseline's (no threshold)."""
    out = []
    for attr, role, code, what in RELATIVE:
        theirs = getattr(base, attr)
        if role in own and theirs:
            key, mine = own[role]
            out.append(Evidence(key, mine / theirs, None, None, None, code,
                                f"{what} {mine:.4g} against the baseline {base.name}'s {theirs:.4g}"))
    return out
