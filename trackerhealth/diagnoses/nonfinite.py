"""Loss became NaN/Inf, or the gradient norm exploded.

**What it looks for.** Any NaN or ±Inf in the training or validation loss, or in a logged term of the training loss
(a per-task loss, a KL), is critical: the run is dead from that step on, even if it keeps logging. A non-finite total gradient norm is critical
when it persists to the end of the run (more than ``persist_fraction`` of the last
``persist_tail_share``); a few while the loss stays finite are a warning: either a mixed-precision
loss scaler skipping overflow steps, or a NaN loss that the logger hid (HF's Trainer filters NaN
losses out of its log by default, ``logging_nan_inf_filter``; the gradient norm still shows them). The evidence names
the first non-finite step and, when a gradient norm is logged, the largest gradient norm shortly
before it compared with the run's median (a spike there points to gradient explosion). Without any
NaN, a gradient norm whose level (the median of blocks of at least ``block`` points) climbs past
``spike_factor`` × the median of the levels before it is an explosion warning (critical past
``critical_factor`` ×) — unless the training loss kept falling through it (its median over
``learning_window`` of the run after the climb below that before, its level never above
``learning_peak`` × its level just before the climb): a classifier's gradient norm grows as its
logits sharpen, while the loss falls faster than ever. Nor is a climb short of critical after which the loss ends below
``recovered_share`` of its level just before it: the run survived it and went on learning. A single outlier batch does not move a block's median: that is a bad
batch, not an explosion — unless its gradient norm is ``point_spike_factor`` × the level before it
(evidence ``grad_norm_outlier``, a warning): one corrupt record or extreme batch, which the run
survived this time.

A finite blow-up is critical too (evidence ``loss_divergence``): a loss that had fallen by
``learned_share`` of its start and whose level (block medians) then jumps, within ``jump_share`` of
the run, at least ``rebound`` of the way back to its start — an exploding update, an LR spike at a
restart, an fp16 loss-scale collapse. When a gradient norm is logged it must spike past
``spike_factor`` × its earlier median there (past ``critical_factor`` × its median after the blow-up when the
blow-up came within the first logs, before any norm could set a baseline, and then the loss must still be blown up
over the last ``held_share`` of the run: one that came back to its start after a few steps never learned, which
loss-oscillation reports), and that spike is the onset; a loss that climbs back
more than ``max_episodes`` times is bouncing (``loss-oscillation``), not blowing up. A log of ``short_min_points``
points or more but too short for ``min_level_blocks`` blocks of ``min_level_points`` has each point for a level, held for
``short_persist_points`` points. A loss level held at
``start_factor`` × its start (the first block's level or the first point, the lower, where that point is its block's lowest) has blown up whether or not the
log shows it learning first (evidence ``loss_above_start``; the same gradient-norm check), and so has a loss point that
high within the first ``jump_share`` of the run after which the loss ended ``early_held_factor`` × its start or more (evidence
``loss_spike_early``: an update that blew the model away in a step or two, too brief to move a block's level; the same
gradient-norm check, against the larger of the first norm logged and the median after; only where a gradient norm is
logged: one loss point alone is a bad batch as easily). Neither finite blow-up is
read from a GAN's generator or discriminator loss (a generator's loss may climb 10× in healthy training). With nothing of the
above, a val loss ``val_spike_factor`` × the median of the evaluations before it (after the first
``val_skip_first``) is a blow-up of the evaluated model though the train loss does not show it (evidence
``val_loss_blowup``): a warning when the run came back, critical when its last evaluation is still there.

A training loss that stops being logged ``stopped_share`` of the run before the training loop's own per-step metrics
(its learning rate or step timing, logged beside the loss at ``stopped_companion_share`` of its points or more) is a
warning (evidence ``loss_stopped``): pandas' ``to_csv`` writes a NaN as an empty cell, which reads as not logged.

**Why it matters.** A NaN silently wastes every GPU hour after it; an exploding gradient is the
usual step before it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import numpy as np

from .. import stats
from ..roles import RoleView
from ..schema import Evidence, Finding, Series
from . import _common as c
from ._real_cases import PUBLIC, TORCH, RealCase
from ._thresholds import knob

_SELF = sys.modules[__name__]

ID = "nonfinite"
TITLE = "NaN/Inf loss or gradient explosion"
NEEDS = ("train_loss",)

RECOMMENDATION = (
    "Clip gradients (e.g. torch.nn.utils.clip_grad_norm_(params, 1.0)) and log the norm before and after "
    "clipping; lower the learning rate or lengthen warm-up; inspect the batch before the first bad step "
    "for invalid labels or extreme inputs; check the LR schedule for a spike at a restart; with mixed "
    "precision use a gradient scaler."
)


REAL_CASES = (
    RealCase("cnn_lr_spike_restart", TORCH, "a CNN whose learning rate jumps to 50 at a warm restart",
             "loss diverged at step 153, after the gradient norm spiked to 1.74e+06x its median … without a NaN"),
    RealCase("regression_corrupt_target", TORCH, "a regression with one target of 10^6 in the training set",
             "one update at step 150 had a gradient norm of 1.54e+05, 1.94e+05x the run's level"),
    RealCase("distill_gradient_explosion_high_lr", TORCH, "a distilled student trained with SGD at lr 6, unclipped, whose loss never recovers",
             "it shot up to 8.27e+05x its start 14 and ends above that start, without a NaN"),
    RealCase("P02-v0", PUBLIC, "0729max0729/PINNforEM, a Lightning CSVLogger metrics.csv (a physics-informed net)",
             "mean_loss diverged at step 543: its level jumped from 0.0223 back to 0.552 (its start was 0.324) without a NaN"),
    RealCase("P321", PUBLIC, "Paksu64/Neural_Networks, a Lightning CSVLogger run folder whose first logged loss is its lowest",
             "train_loss diverged at step 99: its level rose from 0.0506 to 9.99, 579x its start 0.0173, without a NaN"),
)


@dataclass(frozen=True)
class Thresholds:
    spike_factor: float = knob(10.0, "a gradient-norm level above this multiple of its earlier median is an explosion (the seed: > 10 x median)")
    critical_factor: float = knob(100.0, "an explosion above this multiple is critical")
    point_spike_factor: float = knob(1000.0, "one gradient norm above this multiple of the level before it is a corrupt record or an extreme batch (a warning), though the level never moved")
    ignore_first: float = knob(0.02, "share of the run at the start where large gradients are normal")
    ignore_min_blocks: int = knob(2, "blocks at the start that are always ignored")
    lookback: int = knob(50, "points before the first NaN searched for a gradient-norm spike")
    block: int = knob(5, "points per block at least; a block's median is the gradient-norm level")
    max_blocks: int = knob(200, "blocks the gradient norm is cut into at most")
    running_blocks: int = knob(512, "cost bound: the earlier median is taken over at most this many block medians")
    min_points: int = knob(20, "finite gradient-norm points needed to judge an explosion")
    min_points_before: int = knob(3, "finite gradient-norm points before the first NaN needed to look for a spike there")
    persist_tail_share: float = knob(0.1, "share of the run at the end where non-finite gradient norms count as persisting")
    persist_tail_min_points: int = knob(3, "points at the end where non-finite gradient norms count as persisting, at least")
    persist_fraction: float = knob(0.5, "non-finite gradient norms persist when more than this fraction of that end is non-finite")
    learned_share: float = knob(0.3, "divergence needs a loss that had first fallen by this share of its start")
    rebound: float = knob(0.5, "a loss level that climbs back this share of the way from its lowest level to its start has diverged")
    jump_share: float = knob(0.05, "the climb back happens within this share of the run (a slow rise is not a blow-up)")
    level_blocks: int = knob(100, "blocks the train loss is cut into; a block's median is its level (a lone bad batch does not move it)")
    min_level_points: int = knob(3, "points per loss block at least")
    persist_levels: int = knob(2, "consecutive loss levels that must stay above the rebound line")
    stopped_share: float = knob(0.1, "a train loss that stops this share of the run before the training loop's LR or step timing does went silent (NaN written blank, or broken logging): a warning")
    stopped_companion_share: float = knob(0.5, "that loop metric counts when it was logged at this share of the loss's points or more while the loss was")
    short_min_points: int = knob(10, "a log with fewer points than min_level_blocks blocks of min_level_points, but at least this many, is read with each point its own level")
    short_persist_points: int = knob(3, "in such a short log, consecutive points that must stay above the line (persist_levels' stand-in)")
    min_level_blocks: int = knob(8, "loss blocks needed to look for a divergence")
    learning_window: float = knob(0.1, "share of the run before a gradient-norm climb and after it whose loss medians are compared: a climb while the loss keeps falling is the model learning, not an explosion")
    learning_peak: float = knob(1.1, "and the loss's level never rose above this multiple of its level just before the climb")
    recovered_share: float = knob(0.5, "a climb short of critical_factor after which the loss ends below this share of its level just before it was survived: a transient, not an explosion")
    max_episodes: int = knob(2, "a loss that climbs back above the rebound line more often than this is bouncing (loss-oscillation), not blowing up")
    held_share: float = knob(0.1, "a blow-up in the first logs, measured against the gradient norms after it, must still hold over this last share of the run")
    early_held_factor: float = knob(1.1, "a loss point start_factor x its start within the first jump_share blew the model up when the loss then ends (its median over the last held_share) at least this multiple of its start: above where it began, not back at it")
    start_factor: float = knob(10.0, "a loss level this many times its starting level has blown up, whether or not it had learned first")
    val_spike_factor: float = knob(100.0, "a val loss this many times the median of the evaluations before it (after the first few) is a blow-up of the evaluated model")
    val_skip_first: int = knob(2, "first evaluations left out of the val blow-up check (an untrained model's val loss is high)")
    min_val_points: int = knob(5, "finite val-loss points needed to look for a val blow-up")


def _first_nonfinite(view: RoleView, role: str):
    s = view.series(role)
    if s is None:
        return None
    bad = np.flatnonzero(~np.isfinite(s.values))
    if len(bad) == 0:
        return None
    return view.key(role), s, bad


def _nonfinite_terms(view: RoleView) -> list[tuple[str, Series, np.ndarray]]:
    """The logged terms of the training loss (``task_losses``: a reconstruction and a KL, a box and a class loss)
    holding a NaN/Inf. A term that is Inf makes the sum Inf whether or not the total was logged as a number:
    the torch family vae's SGD run at lr 2.0 logged its KL as Inf at step 4, and its total only as an empty
    CSV cell (pandas writes NaN so), which reads as not logged."""
    main = view.key("train_loss")
    out = []
    for _, key, s in view.group("task_losses"):
        bad = np.flatnonzero(~np.isfinite(s.values))
        if key != main and len(bad):
            out.append((key, s, bad))
    return out


def run(history: RoleView, thresholds: Thresholds) -> Finding:
    module = _SELF
    roles = ("train_loss", "val_loss", "grad_norm")
    if all(history.series(r) is None for r in roles):
        return c.skipped(module, "not logged: train_loss, val_loss or grad_norm")
    grad = history.series("grad_norm")
    evidence: list[Evidence] = []
    first_bad_step = None
    # A non-finite gradient norm while the loss stays finite is usually a mixed-precision loss
    # scaler skipping an overflow step (the update is dropped, training goes on): it only kills
    # the run when it persists to the end.
    loss_roles = ("train_loss", "val_loss")
    terms = _nonfinite_terms(history)
    if grad is not None and not terms and not any(_first_nonfinite(history, r) for r in loss_roles):
        bad = ~np.isfinite(grad.values)
        tail = bad[-max(thresholds.persist_tail_min_points, int(len(bad) * thresholds.persist_tail_share)):]
        if bad.any() and not tail.mean() > thresholds.persist_fraction:
            # Not dead, but not nothing either: HF's Trainer hides a NaN loss from its log by default
            # (logging_nan_inf_filter) and only the gradient norm still shows it. A warning names both
            # readings; a loss scaler skipping overflow steps is the benign one.
            first = float(grad.steps[np.flatnonzero(bad)[0]])
            ev = Evidence(history.key("grad_norm"), float(grad.values[bad][0]), None, first, float(grad.steps[np.flatnonzero(bad)[-1]]),
                          "nonfinite_grad_norm", f"{int(bad.sum())} of {len(bad)} gradient norms are NaN/Inf while the logged loss stays finite")
            message = (f"{history.key('grad_norm')} became NaN/Inf at step {c.fmt_step(first)} ({int(bad.sum())} time(s)) while the logged "
                       "loss stayed finite: either a mixed-precision loss scaler skipped overflow steps (benign if rare), or the loss "
                       "went NaN and the logger filtered it out (HF's logging_nan_inf_filter is on by default).")
            return c.problem(module, False, message, RECOMMENDATION, [ev])
    hits = [hit for hit in (_first_nonfinite(history, r) for r in roles) if hit is not None] + terms
    for key, s, bad in hits:
        step = float(s.steps[bad[0]])
        first_bad_step = step if first_bad_step is None else min(first_bad_step, step)
        kinds = sorted({"NaN" if np.isnan(x) else ("+Inf" if x > 0 else "-Inf") for x in s.values[bad]})
        evidence.append(
            Evidence(key, float(s.values[bad[0]]), None, step, float(s.steps[bad[-1]]), "nonfinite_value",
                     f"{len(bad)} of {len(s)} points are {'/'.join(kinds)}")
        )
    if evidence:
        detail = ""
        if grad is not None and first_bad_step is not None:
            g = grad.finite()
            before = g.steps <= first_bad_step
            if before.sum() >= thresholds.min_points_before:
                gv = g.values[before]
                window = gv[-thresholds.lookback:]
                base = float(np.median(gv[: max(thresholds.min_points_before, len(gv) - len(window))]))
                peak = float(window.max())
                if base > 0 and peak > thresholds.spike_factor * base:
                    at = float(g.steps[before][-len(window):][int(np.argmax(window))])
                    evidence.append(
                        Evidence(history.key("grad_norm"), peak, thresholds.spike_factor * base, at, first_bad_step,
                                 "grad_norm_spike_before_nonfinite", f"{c.fmt(peak / base)}x the median {c.fmt(base)}")
                    )
                    detail = f", right after the gradient norm spiked to {c.fmt(peak)} ({c.fmt(peak / base)}x its median) at step {c.fmt_step(at)}"
        # Name the metric that went bad first (the gradient norm can turn Inf a step before the loss).
        first = min((e for e in evidence if e.code == "nonfinite_value"), key=lambda e: e.step_start)
        message = f"{first.metric} became {first.detail.split(' are ')[-1]} at step {c.fmt_step(first_bad_step)}{detail}; every step after it is wasted."
        return c.problem(module, True, message, RECOMMENDATION, evidence)
    stopped = _loss_stopped(history, thresholds)
    if stopped is not None:
        return stopped

    # A GAN's generator loss may climb 10x its start in healthy training (trackerhealth.adversarial): its level
    # is no evidence of a blow-up. A NaN (above) and an exploding gradient norm (below) still are.
    diverged = _divergence(history, thresholds) if c.adversarial_pair(history) is None else None
    if diverged is not None:
        return diverged
    exploded = _gradient_explosion(history, grad, thresholds)
    if not exploded.is_problem:
        return _val_blowup(history, thresholds) or exploded
    return exploded


# The training loop's own per-step metrics: while they are logged, the loop is running.
_LOOP_ROLES = ("lr", "step_time", "data_time", "compute_time", "throughput")


def _loss_stopped(history: RoleView, thresholds: Thresholds) -> Finding | None:
    """A warning when the training loss stops being logged ``stopped_share`` of the run before the training loop's own
    per-step metrics (its learning rate, its step timing: logged beside the loss at ``stopped_companion_share`` of its
    points or more) do. A loss that went NaN is written as an empty cell by pandas' ``to_csv`` (and as a null by Arrow),
    which reads as not logged (torch run kan_corrupt_record, built blind: a NaN feature at step 300, the loss and the
    gradient norm blank from there to step 600 while the LR and the timings go on): read so, the run looks healthy."""
    loss = history.series("train_loss")
    if loss is None or len(loss) < thresholds.min_points:
        return None
    first, last = float(loss.steps[0]), float(loss.steps[-1])
    for role in _LOOP_ROLES:
        s = history.series(role)
        if s is None:
            continue
        during = int(np.count_nonzero((s.steps >= first) & (s.steps <= last)))
        after = s.steps > last
        end = float(s.steps[-1])
        if (during >= thresholds.stopped_companion_share * len(loss) and after.sum() >= thresholds.min_points_before
                and end - last >= thresholds.stopped_share * (end - first)):
            key = history.key("train_loss")
            evidence = [Evidence(key, last, None, last, end, "loss_stopped",
                                 f"{key} logged up to step {c.fmt_step(last)}; {history.key(role)} went on to step {c.fmt_step(end)} "
                                 f"({int(after.sum())} more points)")]
            message = (f"{key} stops at step {c.fmt_step(last)} while the training loop's {history.key(role)} is logged on to step "
                       f"{c.fmt_step(end)}: the loss most likely went NaN where the writer leaves NaN blank (pandas' to_csv "
                       "default; Arrow writes a null), or its logging broke. Either way the last part of the run is unmeasured.")
            return c.problem(_SELF, False, message, RECOMMENDATION, evidence)
    return None


def _gradient_explosion(history: RoleView, grad: Series | None, thresholds: Thresholds) -> Finding:
    """No NaN: an exploding gradient norm (or ``ok`` saying why not)."""
    module = _SELF
    if grad is None:
        return c.ok(module, "no NaN/Inf in the logged losses (no gradient norm logged to check for explosions)")
    g = grad.finite()
    if len(g) < thresholds.min_points:
        return c.ok(module, f"no NaN/Inf; only {len(g)} gradient-norm points, too few to judge explosions")
    # An explosion is sustained: the gradient norm's level (medians of blocks of at least
    # ``block`` points) climbs far above where it was before. A lone heavy-tailed outlier is a
    # bad batch, not an explosion, and does not move a block median.
    b = stats.binned(g.steps, g.values, max(1, min(thresholds.max_blocks, len(g) // thresholds.block)))
    v = b.median
    ref = _running_median(v, thresholds.running_blocks)
    ratio = np.where(ref > 0, v / np.maximum(ref, 1e-300), 0.0)  # 1e-300: a numeric guard, never a decision
    ratio[: max(int(len(v) * thresholds.ignore_first), thresholds.ignore_min_blocks)] = 0.0
    worst = int(np.argmax(ratio))
    if ratio[worst] <= thresholds.spike_factor:
        outlier = _lone_spike(history, g, b, ref, thresholds)
        if outlier is not None:
            return outlier
        return c.ok(_SELF, f"no NaN/Inf loss; gradient-norm level at most {c.fmt(ratio[worst])}x its earlier median")
    spikes = np.flatnonzero(ratio > thresholds.spike_factor)
    critical = ratio[worst] > thresholds.critical_factor
    if not critical:
        learning = (_loss_kept_falling(history, float(b.steps[spikes[0]]), float(b.steps[spikes[-1]]), thresholds)
                    or _survived(history, float(b.steps[spikes[0]]), thresholds))
        if learning is not None:
            return c.ok(_SELF, f"gradient-norm level rose to {c.fmt(ratio[worst])}x its earlier median around step "
                               f"{c.fmt_step(b.steps[worst])} while {learning}: the model learning, not an explosion")
    ev = Evidence(
        history.key("grad_norm"), float(v[worst]), float(thresholds.spike_factor * ref[worst]),
        float(b.steps[spikes[0]]), float(b.steps[spikes[-1]]), "grad_norm_explosion",
        f"gradient-norm level above {c.fmt(thresholds.spike_factor)}x its earlier median in {len(spikes)} stretch(es); worst {c.fmt(ratio[worst])}x",
    )
    message = (
        f"gradient norm exploded: its level reached {c.fmt(v[worst])} around step {c.fmt_step(b.steps[worst])}, "
        f"{c.fmt(ratio[worst])}x its earlier median {c.fmt(ref[worst])}; no NaN yet."
    )
    return c.problem(module, critical, message, RECOMMENDATION, [ev])


def _val_blowup(history: RoleView, thresholds: Thresholds) -> Finding | None:
    """A finite val loss ``val_spike_factor`` x the median of the evaluations before it or more (after the first
    ``val_skip_first``): the evaluated model blew up there though the train loss did not show it (public log
    P283: a YOLOv7 run in LR warm-up whose val objectness loss went 0.04 -> 90 at one epoch and recovered,
    while its train losses stayed smooth). Critical when the last evaluation is still that high; a warning
    when the run recovered."""
    val = history.series("val_loss")
    if val is None:
        return None
    val = val.finite()
    if len(val) < thresholds.min_val_points:
        return None
    v = val.values
    # Against the median of the evaluations before each one: a val loss that falls by orders of magnitude
    # over a healthy run (public log P29: 1.57 -> 0.0007) is far above its own overall median early on.
    # Block-wise past a few hundred evaluations (running_blocks): a val loss logged every step is 10^6 points.
    earlier = _running_median(v, thresholds.running_blocks)
    ratio = np.where(earlier > 0, v / np.where(earlier > 0, earlier, 1.0), 0.0)
    ratio[: thresholds.val_skip_first] = 0.0
    hit = np.flatnonzero(ratio >= thresholds.val_spike_factor)
    if not len(hit):
        return None
    base = float(earlier[hit[0]])
    peak = hit[int(np.argmax(v[hit]))]
    critical = bool(v[-1] >= thresholds.val_spike_factor * base)
    key = history.key("val_loss")
    ev = Evidence(key, float(v[peak] / base), thresholds.val_spike_factor, float(val.steps[hit[0]]),
                  float(val.steps[hit[-1]]), "val_loss_blowup",
                  f"{len(hit)} evaluation(s) at {c.fmt(thresholds.val_spike_factor)}x the median of the val losses before "
                  f"them or more; worst {c.fmt(v[peak])} at step {c.fmt_step(val.steps[peak])}")
    after = "and is still there at the end" if critical else "and then came back"
    message = (f"{key} blew up at step {c.fmt_step(val.steps[hit[0]])}: {c.fmt(v[peak])}, "
               f"{c.fmt(v[peak] / base)}x its earlier median {c.fmt(base)}, {after}. The model being evaluated "
               "diverged there even though the training loss does not show it (an LR warm-up too steep, an EMA or "
               "BatchNorm statistics thrown off by a bad batch).")
    return c.problem(_SELF, critical, message, RECOMMENDATION, [ev])


def _survived(history: RoleView, first: float, thresholds: Thresholds) -> str | None:
    """Why a gradient-norm climb beginning at ``first`` is not an explosion, or None: the training loss ends
    (median of its last tenth) below ``recovered_share`` of its level just before the climb (its last
    ``block`` points before it). The run went on to learn far past where the climb found it, so whatever
    the climb was (an XLM-R fine-tune's warm-up, public log P213: 25x its median at step 39, then a loss
    falling 2.9 -> 0.0007), it did not lead towards NaN."""
    loss = history.series("train_loss")
    if loss is None:
        return None
    f = loss.finite()
    before = f.values[f.steps < first]
    if len(before) < thresholds.block or len(f) < thresholds.min_points:
        return None
    just_before = stats.median(before[-thresholds.block:])
    end = stats.median(f.values[-max(thresholds.block, len(f) // 10):])
    if just_before > 0 and end < thresholds.recovered_share * just_before:
        return f"{history.key('train_loss')} went on to end at {c.fmt(end)}, {c.fmt(100 * end / just_before)}% of its {c.fmt(just_before)} just before it"
    return None


def _loss_kept_falling(history: RoleView, first: float, last: float, thresholds: Thresholds) -> str | None:
    """Why a gradient norm that climbed from ``first`` to ``last`` is not an explosion, or None: the
    training loss's median over ``learning_window`` of the run after the climb is below its median
    over as long before it, and its level (medians of ``block``-point stretches) never rose above
    ``learning_peak`` times its level just before the climb (its last ``block`` points) in between.
    SGD's gradient norm grows as a classifier's logits sharpen, while the loss falls faster than
    ever; an explosion hurts the loss."""
    loss = history.series("train_loss")
    if loss is None:
        return None
    f = loss.finite()
    if len(f) < thresholds.min_points:
        return None
    span = float(f.steps[-1] - f.steps[0]) * thresholds.learning_window
    before = f.values[(f.steps >= first - span) & (f.steps < first)]
    inside = (f.steps >= first) & (f.steps <= last + span)
    after = f.values[(f.steps > last) & (f.steps <= last + span)]
    if len(before) < thresholds.block or len(after) < thresholds.block:
        return None
    was, now = stats.median(before), stats.median(after)
    just_before = stats.median(before[-thresholds.block:])
    levels = stats.binned(f.steps[inside], f.values[inside], max(1, int(inside.sum()) // thresholds.block)).median
    if now < was and float(np.max(levels)) <= thresholds.learning_peak * just_before:
        return f"the training loss kept falling ({c.fmt(was)} before, {c.fmt(now)} after)"
    return None


def _lone_spike(history: RoleView, g, b, ref: np.ndarray, thresholds: Thresholds) -> Finding | None:
    """One update whose gradient norm is ``point_spike_factor`` x the level before it, though the level
    itself never moved: a corrupt record or an extreme batch. The run survived it this time (a warning),
    but the same record comes round every epoch, and an unclipped update that large can end a run."""
    peaks = np.where(ref > 0, b.high / np.maximum(ref, 1e-300), 0.0)  # 1e-300: a numeric guard, never a decision
    peaks[: max(int(len(peaks) * thresholds.ignore_first), thresholds.ignore_min_blocks)] = 0.0
    j = int(np.argmax(peaks)) if len(peaks) else 0
    if not len(peaks) or peaks[j] <= thresholds.point_spike_factor:
        return None
    at = np.flatnonzero(g.values == b.high[j])
    step = float(g.steps[at[np.argmin(np.abs(g.steps[at] - b.steps[j]))]]) if len(at) else float(b.steps[j])
    ev = Evidence(history.key("grad_norm"), float(b.high[j]), float(thresholds.point_spike_factor * ref[j]), step, step,
                  "grad_norm_outlier", f"one update's gradient norm {c.fmt(peaks[j])}x the level before it ({c.fmt(ref[j])})")
    message = (f"one update at step {c.fmt_step(step)} had a gradient norm of {c.fmt(b.high[j])}, {c.fmt(peaks[j])}x the run's level "
               f"{c.fmt(ref[j])}: a corrupt record or an extreme batch. The run recovered; clip gradients and check that batch.")
    return c.problem(_SELF, False, message, RECOMMENDATION, [ev])


def _divergence(history: RoleView, thresholds: Thresholds) -> Finding | None:
    """A finite blow-up: the loss had learned, then its level jumped most of the way back to where it
    started, fast (an exploding update, an LR spike at a restart, an fp16 loss-scale collapse).

    The level is the median of blocks, so one bad batch (a periodic spike) does not count; the jump
    must happen within ``jump_share`` of the run (a slow climb is a rising loss, not a blow-up) and
    hold for ``persist_levels`` blocks (in a log too short for blocks, each point is a level, held for
    ``short_persist_points``). The onset is the block where the climb started, moved to a
    gradient-norm spike there when one is logged.
    """
    loss = history.series("train_loss")
    if loss is None:
        return None
    loss = loss.finite()
    n_blocks = min(thresholds.level_blocks, len(loss) // thresholds.min_level_points)
    if n_blocks < thresholds.min_level_blocks and len(loss) >= thresholds.short_min_points:
        # A short log (an HF fine-tune logging 10 times, a 20-epoch CSV) has too few points for blocks of three: each
        # point is its own level, and a level that stays up must be seen ``short_persist_points`` times in a row, not
        # twice (a step loss logged 15 times scatters that high twice by chance: public log P157). Public logs P824
        # (a QLoRA whose loss climbs to 30x its first log in ten logs) and P219 (a domain term that jumps the total to
        # 25x and pins it there, 21 logs) blew up where no block could be formed.
        n_blocks = len(loss)
        thresholds = replace(thresholds, persist_levels=thresholds.short_persist_points)
    if n_blocks < thresholds.min_level_blocks:
        return None
    b = stats.binned(loss.steps, loss.values, n_blocks)
    level, steps = b.median, b.steps
    # The first point stands for the start only where it is its block's lowest: a blow-up within the first logs lifts
    # every point after it (P154), while a noisy per-sample loss scatters below it too (P551, P552: batch 1, points
    # from 1e-10 to 26 about a flat 0.006, the first a low draw of 8e-4).
    first = float(loss.values[0]) if loss.values[0] <= b.low[0] else float(level[0])
    return (_diverged_after_learning(history, level, steps, thresholds)
            or _blown_past_start(history, level, steps, first, thresholds)
            or _early_point_blowup(history, loss, first, thresholds))


def _early_point_blowup(history: RoleView, loss: Series, first: float, thresholds: Thresholds) -> Finding | None:
    """A loss point ``start_factor`` × its start within the first ``jump_share`` of the run, after which the loss never
    got back to that start (its median over the last ``held_share`` is ``early_held_factor`` × it or more): an update in
    the first logs blew the model away and it never learned again. Block levels miss it (the blow-up lasts a step or two and its
    block's median shrugs it off: torch runs distill_gradient_explosion_high_lr, SGD at lr 6, the loss 14 → 1.2e7 at
    step 6 and then ~17 to the end; textcls_gradient_explosion_noclip, 1.8 → 69 at step 3, then 4-8). A bad shard's
    first spike is not one (the loss comes back and goes on falling), nor is a loss that shot up and came back to sit
    at its start (the torch LR sweep's run at lr 0.3: 227x in its second step, then ln 10 to the end; it never learned,
    loss-oscillation's reading), nor one whose gradient norm never dwarfed its first one (:func:`_blow_up`). Only with a gradient norm logged."""
    if history.series("grad_norm") is None:
        # One loss point is all this path sees of the blow-up: without a gradient norm to show the update that caused it,
        # it is one bad batch as easily (public log P24: one step at 29x, beside a loss that sits at ln 2 and never learned).
        return None
    head = max(thresholds.min_points_before, int(round(thresholds.jump_share * len(loss))))
    values = loss.values[:head]
    peak = int(np.argmax(values))
    if not first > 0 or values[peak] < thresholds.start_factor * first:
        return None
    if not _held_to_end(history, thresholds.early_held_factor * first, thresholds):
        return None  # back at its start (a classifier collapsed to the uniform prediction, at ln K): never learned
    evidence = Evidence(history.key("train_loss"), float(values[peak]), thresholds.start_factor * first, float(loss.steps[0]),
                        float(loss.steps[peak]), "loss_spike_early",
                        f"loss {c.fmt(first)} → {c.fmt(values[peak])}, {c.fmt(values[peak] / first)}x its start; it ends above its start")
    return _blow_up(history, float(loss.steps[0]), float(loss.steps[peak]), evidence, thresholds,
                    f"it shot up to {c.fmt(values[peak] / first)}x its start {c.fmt(first)} and ends above that start,", held=True)


def _diverged_after_learning(history: RoleView, level: np.ndarray, steps: np.ndarray, thresholds: Thresholds) -> Finding | None:
    start = float(level[0])
    lowest = np.minimum.accumulate(level)
    fallen = start - lowest
    with np.errstate(invalid="ignore", divide="ignore"):
        back = np.where(fallen > thresholds.learned_share * abs(start), (level - lowest) / fallen, 0.0)
    above = back >= thresholds.rebound
    episodes = int(np.count_nonzero(above[1:] & ~above[:-1]) + above[0])
    if episodes > thresholds.max_episodes:
        return None  # repeated climbs are an oscillating loss; loss-oscillation reports those
    width = max(1, int(round(thresholds.jump_share * len(level))))
    for k in _held(above, thresholds.persist_levels):
        low_at = int(np.argmin(level[max(0, k - width):k + 1])) + max(0, k - width)
        if level[low_at] > lowest[k] + (1 - thresholds.rebound) * fallen[k]:
            continue  # the climb from the bottom took longer than jump_share of the run
        evidence = Evidence(history.key("train_loss"), float(level[k]), float(lowest[k] + thresholds.rebound * fallen[k]),
                            float(steps[low_at]), float(steps[k]), "loss_divergence",
                            f"loss level {c.fmt(lowest[k])} → {c.fmt(level[k])}, {c.fmt(100 * back[k])}% of the way back to its start {c.fmt(start)}")
        return _blow_up(history, float(steps[low_at]), float(steps[k]), evidence, thresholds,
                        f"its level jumped from {c.fmt(lowest[k])} back to {c.fmt(level[k])} (its start was {c.fmt(start)})")
    return None


def _blown_past_start(history: RoleView, level: np.ndarray, steps: np.ndarray, first: float, thresholds: Thresholds) -> Finding | None:
    """A loss level ``start_factor`` × its first level, held for ``persist_levels`` blocks: a blow-up
    whether or not the log shows it learning first — a run whose first logged loss is already its lowest
    (P321: 0.017 → 10.3 in four logs; P154: 1.4e6 → 1.9e12) has no fall for the learned-first path to
    measure. No healthy training loss climbs an order of magnitude above where it started. The start is
    the first block's level or ``first`` (the first point where it is its block's lowest), the lower: a blow-up within
    the first few logs (P154's second step) lifts the first block's median with it."""
    start = min(float(level[0]), first)
    if not start > 0 or not np.all(level > 0):
        return None  # a loss that crosses zero (an RL objective, a log-likelihood) has no scale to multiply
    above = level >= thresholds.start_factor * start
    for k in _held(above, thresholds.persist_levels):
        low_at = int(np.argmin(level[:k + 1]))
        evidence = Evidence(history.key("train_loss"), float(level[k]), thresholds.start_factor * start, float(steps[low_at]),
                            float(steps[k]), "loss_above_start",
                            f"loss level {c.fmt(level[low_at])} → {c.fmt(level[k])}, {c.fmt(level[k] / start)}x its start {c.fmt(start)}")
        return _blow_up(history, float(steps[low_at]), float(steps[k]), evidence, thresholds,
                        f"its level rose from {c.fmt(level[low_at])} to {c.fmt(level[k])}, {c.fmt(level[k] / start)}x its start {c.fmt(start)},")
    return None


def _held(above: np.ndarray, persist: int):
    """The blocks from which ``above`` holds for ``persist`` blocks in a row, in order: a level that
    stays up, not one bad block."""
    for k in np.flatnonzero(above):
        if k + persist <= len(above) and above[k:k + persist].all():
            yield int(k)


def _blow_up(history: RoleView, onset: float, until: float, evidence: Evidence, thresholds: Thresholds, how: str,
             held: bool = False) -> Finding | None:
    """The critical finding for a finite blow-up of the loss between ``onset`` and ``until``; None when a
    logged gradient norm stayed calm there (a jump with a calm gradient norm is not an exploding update).
    The onset moves to the gradient-norm spike when one is logged."""
    detail = ""
    found = [evidence]
    grad = history.series("grad_norm")
    if grad is not None:
        g = grad.finite()
        near = (g.steps >= onset) & (g.steps <= until)
        earlier = g.steps < onset
        spiked = False
        later = g.steps > until
        # A blow-up within the first logs has no gradient norms before it to set a baseline (torch run
        # seq2seq_gradient_explosion_noclip: SGD at lr 30, the norm 4e4 at step 11, ~4 after). The norms logged
        # after it stand in, at the critical factor: a healthy run's first gradients can be 10-100x its later ones.
        # So does the first norm logged, the larger of the two: a model that collapsed after its overshoot (torch run
        # ftt_lr_too_high_adam, Adam at lr 1, stuck at ln 2 with norms ~0.1 after a peak of 36 at step 2, its first 1.0)
        # has gradients so small after it that any norm of its first steps towers over them.
        before = earlier.sum() >= thresholds.min_points_before
        # Without that baseline the blow-up must also hold to the end: a loss that shot up for a few steps and then
        # sat back at its start (the torch LR sweep's runs at 0.3, stuck at ln 10 after a 250x overshoot) is a loss
        # that never learned, loss-oscillation's reading, not a model the updates blew away.
        held = held or before or _held_to_end(history, evidence.threshold, thresholds)  # held: the caller checked its own
        if near.any() and held and (before or later.sum() >= thresholds.min_points_before):
            after = stats.median(g.values[later]) if not before else 0.0
            base = stats.median(g.values[earlier]) if before else max(after, float(g.values[0]))
            factor = thresholds.spike_factor if before else thresholds.critical_factor
            peak_i = int(np.argmax(np.where(near, g.values, -np.inf)))
            peak = float(g.values[peak_i])
            if base > 0 and peak > factor * base:
                onset = float(g.steps[peak_i])
                median = "median" if before else ("median after the blow-up" if base == after else "first logged value")
                found.append(Evidence(history.key("grad_norm"), peak, factor * base, onset, until,
                                      "grad_norm_spike_before_divergence", f"{c.fmt(peak / base)}x the {median} {c.fmt(base)}"))
                detail = f", after the gradient norm spiked to {c.fmt(peak / base)}x its {median}"
                spiked = True
        if not spiked:
            return None
    message = (f"{history.key('train_loss')} diverged at step {c.fmt_step(onset)}{detail}: {how} without a NaN; "
               "the updates blew the model up.")
    return c.problem(_SELF, True, message, RECOMMENDATION, found)


def _held_to_end(history: RoleView, level: float | None, thresholds: Thresholds) -> bool:
    """The training loss's median over the last ``held_share`` of its finite points is still at ``level`` or above."""
    loss = history.series("train_loss")
    if loss is None or level is None:
        return False
    v = loss.finite().values
    tail = v[-max(1, int(np.ceil(thresholds.held_share * len(v)))):]
    return len(tail) > 0 and stats.median(tail) >= level


def _running_median(v: np.ndarray, blocks: int) -> np.ndarray:
    """For each point, the median of the points logged before it (block-wise, so O(n))."""
    n = len(v)
    if n == 0:
        return np.empty(0)
    size = max(1, -(-n // blocks))
    pad = size * (-(-n // size)) - n
    block_medians = np.median(np.pad(v, (0, pad), mode="edge").reshape(-1, size), axis=1)
    # A point's reference is the median of the block medians before its block (its own block for
    # the first block): robust to the spike itself and cheap on 10^7 points.
    prefix = np.array([stats.median(block_medians[: max(k, 1)]) for k in range(len(block_medians))])
    return np.repeat(prefix, size)[:n]
