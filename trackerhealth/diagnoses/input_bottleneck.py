"""The accelerator waits for input: low GPU utilization, data time above compute time.

**What it looks for.** The seed's rule: mean GPU utilization below ``max_gpu_util`` (60 %) with
the time spent fetching data above the time spent computing (``data_over_compute`` × compute).
Utilization comes from MLflow (``system/gpu_N_utilization_percentage``) or W&B
(``system.gpu.N.gpu``; where W&B marks the GPU the run's own process holds,
``system.gpu.process.N.gpu``, that one) system metrics or a plain ``gpu_util`` (fractions are read
as percent unless the tracker defines the key in percent; a utilization that never changes over the run
did not measure anything, and one that never reached ``min_busy_util`` belongs to a GPU the run did not
use (the model left on the CPU): neither is judged);
times from ``data_time`` and ``compute_time`` (or ``step_time − data_time``), in any unit the name
states. Only utilization sampled while the training loss was being logged counts (by wall time: a
tracker samples the GPU from process start to exit, through loading and the final evaluation and
saving), and of it the first ``skip_start`` share is ignored (start-up is always slow). With only
one side logged, the finding is a warning that says which metric would confirm it — and utilization
alone must be below ``util_only_max_gpu_util`` (a GPU idle most of the time), since a small model or
batch leaves a GPU 30-60 % busy as often as a slow input pipeline does; critical needs
both sides and utilization below ``critical_gpu_util`` or data time at least
``critical_data_factor`` × ``data_over_compute`` × compute. A run analysed with its group gets the
run's median step time and throughput against the baseline's as evidence
(``step_time_vs_baseline``, ``throughput_vs_baseline``).

**Why it matters.** Every idle percent of the accelerator is paid for and wasted.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..roles import RoleView
from ..schema import Evidence, Finding, Series
from . import _common as c
from ._real_cases import PUBLIC, TORCH, RealCase
from ._thresholds import knob

ID = "input-bottleneck"
TITLE = "Input bottleneck: accelerator waits for data"
NEEDS = ("gpu_util", "data_time")
_SELF = sys.modules[__name__]

RECOMMENDATION = (
    "Raise DataLoader num_workers, set pin_memory=True and persistent_workers=True with prefetching; move "
    "decoding/augmentation to the GPU or precompute it; read data from fast local storage; then check that "
    "data time falls below compute time."
)


REAL_CASES = (
    RealCase("mlp_too_few_workers", TORCH, "FFT augmentation in a single DataLoader worker",
             "Each step spends 14.9x as long waiting for data as computing"),
    RealCase("P16-p2r8mweq", PUBLIC, "2btlFe/SSD-Practice, a W&B run folder with system metrics",
             "The GPU is busy only 28.9% of the time on average"),
)


@dataclass(frozen=True)
class Thresholds:
    max_gpu_util: float = knob(60.0, "mean GPU utilization (percent) below this is low (the seed's rule)")
    critical_gpu_util: float = knob(30.0, "with both sides logged, utilization below this is critical")
    data_over_compute: float = knob(1.0, "data time above this multiple of compute time is data-bound")
    critical_data_factor: float = knob(2.0, "with both sides logged, data time at least this multiple of data_over_compute x compute is critical")
    skip_start: float = knob(0.05, "share of the run at the start (start-up) that is ignored")
    min_points: int = knob(5, "points of utilization or timing needed to judge")
    min_busy_util: float = knob(1.0, "a GPU whose utilization (percent) never reached this did no work for the run: not judged")
    util_only_max_gpu_util: float = knob(30.0, "with no data/compute timing logged, mean utilization (percent) must be below this to be flagged (a warning)")


def _body(s: Series | None, skip: float) -> Series | None:
    if s is None:
        return None
    s = s.finite()
    start = int(len(s) * skip)
    s = Series(s.steps[start:], s.values[start:], s.wall_times[start:])
    return s if len(s) else None


def _compute_time(history: RoleView, data: Series, skip: float) -> tuple[Series | None, str]:
    compute = _body(history.series("compute_time"), skip)
    if compute is not None:
        return compute, history.key("compute_time")
    step = _body(history.series("step_time"), skip)
    if step is None:
        return None, ""
    # Compute time = step time − data time, at the steps where both were logged.
    common, i, j = np.intersect1d(step.steps, data.steps, return_indices=True)
    if len(common) == 0:
        return None, ""
    derived = np.clip(step.values[i] - data.values[j], 0, None)
    return Series(common, derived, step.wall_times[i]), f"{history.key('step_time')} - {history.key('data_time')}"


def _while_training(util: Series | None, loss: Series | None) -> Series | None:
    """The utilization samples taken while the training loss was being logged, by wall time: a tracker
    samples the GPU from process start to exit, and the samples before the first logged loss (loading the
    model and data) and after the last (the final evaluation, saving, uploading) are not the training
    loop, whose input pipeline this judges. W&B places them on the first / last history row's step, so
    only their wall time tells them apart (public log P396: one of its five samples came after training).
    Without wall times on both sides, all samples."""
    if util is None or loss is None:
        return util
    walls = loss.wall_times[np.isfinite(loss.wall_times)]
    if len(walls) < 2 or not np.isfinite(util.wall_times).all():
        return util
    inside = (util.wall_times >= walls.min()) & (util.wall_times <= walls.max())
    return Series(util.steps[inside], util.values[inside], util.wall_times[inside])


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    logged_util = history.series("gpu_util")
    util = _body(_while_training(logged_util, history.series("train_loss")), thresholds.skip_start)
    data = _body(history.series("data_time"), thresholds.skip_start)
    compute, compute_key = _compute_time(history, data, thresholds.skip_start) if data is not None else (None, "")
    has_util = util is not None and len(util) >= thresholds.min_points
    has_timing = data is not None and compute is not None and len(data) >= thresholds.min_points
    unmeasured = ""
    if has_util and float(np.ptp(util.values)) == 0.0:
        # A sensor that never moves did not measure: on a GPU that trains, utilization varies from sample
        # to sample. P342 (a W&B TinyLlama LoRA run) logged 3589 samples of exactly 0 % at a constant power
        # draw while its loss and gradient norm moved: a driver or VM exposing no utilization, or a run
        # that computed elsewhere — no evidence of a starved GPU either way.
        unmeasured = (f"{history.key('gpu_util')} never changed ({len(util)} samples, all {c.fmt(float(util.values[0]))}%): "
                      "the sensor did not report utilization, so it is not judged")
        has_util = False
    elif has_util and (busiest := float(np.max(util.values))) < thresholds.min_busy_util:
        # A GPU that was never even 1 % busy did no work for this run: the model or its batches stayed on the
        # CPU, or the run computed on another GPU than the one sampled (P398, a W&B GNN run: 0.07 % at 5 % of
        # the GPU's memory for 2000 steps). An input pipeline slow enough to idle a GPU that completely still
        # leaves it a few percent busy; "waiting for input" would send the user to the wrong fix.
        unmeasured = (f"{history.key('gpu_util')} never reached {c.fmt(thresholds.min_busy_util)}% ({len(util)} samples, "
                      f"at most {c.fmt(busiest)}%): this GPU did no work for the run — check that the "
                      "model and its batches are moved to it, or that it is the GPU the run was given; not judged as "
                      "an input bottleneck")
        has_util = False
    if not has_util and not has_timing:
        if not unmeasured and logged_util is not None and len(logged_util) >= thresholds.min_points:
            unmeasured = (f"{history.key('gpu_util')} has {len(util) if util is not None else 0} samples from while the training loss "
                          f"was logged (of {len(logged_util)}); need {thresholds.min_points}")
        return c.skipped(_SELF, unmeasured or "not logged: gpu_util, or data_time with compute_time/step_time")

    evidence = []
    low_util = data_bound = False
    mean_util = data_ratio = None
    if has_util:
        mean_util = float(np.mean(util.values))
        low_util = mean_util < thresholds.max_gpu_util
        evidence.append(Evidence(history.key("gpu_util"), mean_util, thresholds.max_gpu_util, float(util.steps[0]),
                                 float(util.steps[-1]), "mean_gpu_util", "mean GPU utilization, percent"))
    if has_timing:
        mean_data, mean_compute = float(np.mean(data.values)), float(np.mean(compute.values))
        data_ratio = mean_data / mean_compute if mean_compute > 0 else float("inf")
        data_bound = data_ratio > thresholds.data_over_compute
        evidence.append(Evidence(history.key("data_time"), data_ratio, thresholds.data_over_compute, float(data.steps[0]),
                                 float(data.steps[-1]), "data_over_compute",
                                 f"mean data time {c.fmt(mean_data)} s vs compute time {c.fmt(mean_compute)} s ({compute_key})"))

    if has_util and has_timing:
        hit = low_util and data_bound
        critical = hit and (mean_util < thresholds.critical_gpu_util or data_ratio >= thresholds.critical_data_factor * thresholds.data_over_compute)
    else:
        # Utilization alone cannot tell a GPU starved of input from one a small model or batch leaves idle:
        # on public W&B logs, 30-60 % busy was the second far more often than the first (P265, P282, P284
        # healthy or overfitting, not input-bound). Alone it must be low enough to be critical-grade.
        hit, critical = (mean_util < thresholds.util_only_max_gpu_util if has_util else data_bound), False
    if not hit:
        parts = []
        if mean_util is not None:
            parts.append(f"mean GPU utilization {c.fmt(mean_util)}%")
        if data_ratio is not None:
            parts.append(f"data time {c.fmt(data_ratio)}x compute time")
        if low_util and not has_timing:
            parts.append(f"below {c.fmt(thresholds.max_gpu_util)}%, but with no data_time logged that is not blamed on the "
                         f"input pipeline unless under {c.fmt(thresholds.util_only_max_gpu_util)}% (a small model or batch "
                         "leaves a GPU as idle): log data_time and compute_time per step to tell")
        return c.ok(_SELF, "; ".join(parts), tuple(evidence))

    said = []
    if mean_util is not None:
        said.append(f"the GPU is busy only {c.fmt(mean_util)}% of the time on average")
    if data_ratio is not None:
        said.append(f"each step spends {c.fmt(data_ratio)}x as long waiting for data as computing")
    confirm = ""
    if not has_timing:
        confirm = " Log data_time and compute_time per step to confirm the input pipeline is the cause."
    elif not has_util:
        confirm = " Log GPU utilization (system metrics) to see how idle the accelerator is."
    text = " and ".join(said)
    message = text[0].upper() + text[1:] + ": the accelerator is waiting for input." + confirm
    # Against its group's baseline: how much slower each step is, and how much less data flows.
    relative = c.against_baseline(history, ("step_time", "throughput"))
    pace = next((e for e in relative if e.code == "throughput_vs_baseline"), None)
    if pace is not None and pace.observed < 1:
        message += f" Its throughput is {c.fmt(pace.observed)}x the group's baseline's."
    return c.problem(_SELF, critical, message, RECOMMENDATION, evidence + relative)
