"""The training loop corpus runs share, with the timing and gradient measurements each run logs.

Each family builds its model, data and optimizer and hands them to :func:`fit`. The loop measures
what it logs: data time (waiting for the next batch) and compute time (forward, backward, step) are
two separate ``time.perf_counter`` intervals, never one derived from the other; throughput is samples
over wall-clock seconds.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .sinks import RunLog

# Metric names per naming style: the same measurements under the names different stacks use.
NAMES: dict[str, dict[str, str]] = {
    "wandb": {"loss": "train/loss", "val_loss": "val/loss", "grad_norm": "train/grad_norm", "lr": "train/lr",
              "layer_grad": "grad_norm/{}", "weight_norm": "train/weight_norm", "data_time": "perf/data_time",
              "compute_time": "perf/compute_time", "step_time": "perf/step_time", "throughput": "perf/samples_per_sec",
              "task": "train/loss_{}"},
    "plain": {"loss": "loss", "val_loss": "val_loss", "grad_norm": "grad_norm", "lr": "lr", "layer_grad": "{}.grad_norm",
              "weight_norm": "weight_norm", "data_time": "data_time", "compute_time": "compute_time",
              "step_time": "step_time", "throughput": "samples_per_second", "task": "loss_{}"},
    "mlflow": {"loss": "train_loss", "val_loss": "val_loss", "grad_norm": "grad_norm", "lr": "learning_rate",
               "layer_grad": "grad_norm.{}", "weight_norm": "weight_norm", "data_time": "data_time_ms",
               "compute_time": "compute_time_ms", "step_time": "step_time_ms", "throughput": "throughput", "task": "{}_loss"},
}
_MS = {"data_time_ms", "compute_time_ms", "step_time_ms"}


def seed_all(seed: int) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
    random.seed(seed)


@dataclass
class FitResult:
    steps: int
    samples: int
    wall_seconds: float
    samples_per_s: float
    diverged: bool
    extra: dict = field(default_factory=dict)


def total_grad_norm(model: torch.nn.Module) -> float:
    norms = [p.grad.detach().norm() for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(norms))) if norms else float("nan")


def weight_norm(model: torch.nn.Module) -> float:
    return float(torch.linalg.vector_norm(torch.stack([p.detach().norm() for p in model.parameters()])))


def fit(
    model: torch.nn.Module,
    batches: Callable[[int], Iterable[tuple]],
    loss_fn: Callable[[torch.nn.Module, tuple], torch.Tensor | tuple[torch.Tensor, Mapping[str, torch.Tensor]]],
    optimizer: torch.optim.Optimizer,
    log: RunLog,
    *,
    epochs: int,
    naming: str = "plain",
    scheduler=None,
    val_fn: Callable[[], float] | None = None,
    val_every: int = 20,
    log_every: int = 1,
    layer_grads: Iterable[str] = (),
    timing: bool = True,
    clip: float | None = None,
    before_step: Callable[[int, torch.optim.Optimizer], None] | None = None,
    max_steps: int | None = None,
    stop_on_nonfinite: bool = False,
) -> FitResult:
    """Train for ``epochs`` over ``batches(epoch)``, logging every ``log_every`` steps.

    ``loss_fn`` returns the loss, or ``(total, {task: loss})`` for a multi-task head (each task's
    loss is logged). ``layer_grads`` names the parameters whose gradient norms are logged (model
    order). ``before_step(step, optimizer)`` may change the LR (an LR spike at a restart). A run that
    goes NaN keeps logging (as real runs do) unless ``stop_on_nonfinite``.
    """
    names = NAMES[naming]
    layer_set = list(layer_grads)
    params = dict(model.named_parameters())
    step, samples, diverged = 0, 0, False
    start = time.perf_counter()
    for epoch in range(epochs):
        it = iter(batches(epoch))
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                break
            t1 = time.perf_counter()
            if before_step is not None:
                before_step(step, optimizer)
            model.train()
            optimizer.zero_grad(set_to_none=True)
            out = loss_fn(model, batch)
            loss, tasks = out if isinstance(out, tuple) else (out, {})
            loss.backward()
            gnorm = total_grad_norm(model)
            layer = {n: float(params[n].grad.norm()) for n in layer_set if params[n].grad is not None}
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            t2 = time.perf_counter()
            samples += len(batch[0])
            step += 1
            value = float(loss.detach())
            diverged = diverged or not math.isfinite(value)
            if step % log_every == 0:
                row = {names["loss"]: value, names["grad_norm"]: gnorm, names["lr"]: optimizer.param_groups[0]["lr"]}
                row.update({names["task"].format(k): float(v.detach()) for k, v in tasks.items()})
                row.update({names["layer_grad"].format(n): g for n, g in layer.items()})
                if timing:
                    data_t, compute_t = t1 - t0, t2 - t1
                    for key, secs in ((names["data_time"], data_t), (names["compute_time"], compute_t), (names["step_time"], t2 - t0)):
                        row[key] = secs * 1000 if key in _MS else secs
                    row[names["throughput"]] = len(batch[0]) / max(t2 - t0, 1e-9)
                if val_fn is not None and step % val_every == 0:
                    row[names["val_loss"]] = val_fn()
                    row[names["weight_norm"]] = weight_norm(model)
                log.log(row, step)
            elif val_fn is not None and step % val_every == 0:
                log.log({names["val_loss"]: val_fn(), names["weight_norm"]: weight_norm(model)}, step)
            if (stop_on_nonfinite and diverged) or (max_steps is not None and step >= max_steps):
                break
        if (stop_on_nonfinite and diverged) or (max_steps is not None and step >= max_steps):
            break
    wall = time.perf_counter() - start
    return FitResult(step, samples, wall, samples / wall if wall > 0 else float("nan"), diverged)


def cross_entropy_val_fn(model: torch.nn.Module, xv: torch.Tensor, yv: torch.Tensor) -> Callable[[], float]:
    """``val_fn`` for :func:`fit`: plain cross-entropy of ``model`` on the held-out ``(xv, yv)``, in eval mode."""
    def fn() -> float:
        model.eval()
        with torch.no_grad():
            loss = torch.nn.functional.cross_entropy(model(xv), yv).item()
        model.train()
        return loss
    return fn


def minibatches(x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int, shuffle: bool = True):
    """``batches(epoch)`` for in-memory tensors: a fresh seeded permutation per epoch when shuffling."""
    def batches(epoch: int):
        n = len(x)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1000 + epoch)) if shuffle else torch.arange(n)
        for i in range(0, n, batch_size):
            idx = order[i:i + batch_size]
            yield x[idx], y[idx]
    return batches


def lr_spike(at: int, factor: float):
    """``before_step`` for :func:`fit`: at step ``at`` every param group's LR is multiplied by ``factor``
    (an LR spike at a warm restart); ``label`` says so for the run's description."""
    def before(step, optimizer):
        if step == at:
            for g in optimizer.param_groups:
                g["lr"] *= factor
    before.label = f"x{factor:g} at step {at}"
    return before


# The optimizer, LR schedule and "init far too small" that the text and sequence families share (the
# transformer family keeps its own optimizer default, AdamW, and adds two schedules of its own).
# Shared by the image families (resnet, vit): an 8x8 digit batch stream's corrupt record and early stop.
def corrupt_nan_at(step: int):
    """One pixel of one image (N, 1, 8, 8) in the batch at ``step`` is NaN (a corrupt record); no other batch is touched."""
    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                if epoch * per_epoch + i + 1 == step:
                    x = x.clone()
                    x[0, 0, 3, 3] = float("nan")
                yield x, y
        return batches
    wrap.label = f"NaN pixel in one image at step {step}"
    return wrap


def nan_cell_at(step: int, column: int, label: str):
    """A corrupt record for flat (N, D) batches: column ``column`` of the first row in the batch met at ``step`` reads
    NaN; every other batch is untouched. ``label`` says what the cell is, for the run's logged config."""
    def wrap(batches, per_epoch):
        def gen(epoch):
            for k, (x, y) in enumerate(batches(epoch)):
                if epoch * per_epoch + k + 1 == step:
                    x = x.clone()
                    x[0, column] = float("nan")
                yield x, y
        return gen
    wrap.label = label
    return wrap


def nan_pixel_at(step: int, pixel: int = 36):
    """One pixel of the first digit in the batch met at ``step`` reads NaN (:func:`nan_cell_at`)."""
    return nan_cell_at(step, pixel, f"NaN in pixel {pixel} of one digit at step {step}")


def oversized_images_at(batch_index: int, scale: int = 2):
    """The batch at ``batch_index`` of every epoch holds its images at ``scale`` times the resolution (bilinear),
    as a shard exported at another size and never resized by the loader would (the seed's "one batch whose
    image size is abnormal"). Models that pool globally accept it, so nothing fails; only the loss shows it.
    Met at the same step every epoch when the loader does not shuffle."""
    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                if i == batch_index:
                    x = torch.nn.functional.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False)
                yield x, y
        return batches
    wrap.label = f"batch {batch_index} of every epoch at {scale}x the image size"
    return wrap


def long_sequences_at(batch_index: int, factor: int = 2):
    """The batch at ``batch_index`` of every epoch holds sequences ``factor`` times as long (each step of a
    (N, T, F) batch repeated ``factor`` times: scans at that many times the height, read row by row) — the seed's
    "one batch whose sequence length is abnormal". A recurrent model reads any length, so nothing fails."""
    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                yield (x.repeat_interleave(factor, dim=1) if i == batch_index else x), y
        return batches
    wrap.label = f"batch {batch_index} of every epoch at {factor}x the sequence length"
    return wrap


def early_stopping(batches, val_fn, patience: int):
    """Stop the batch stream once the val loss has not improved for ``patience`` epochs (checked at each epoch start)."""
    best = {"val": float("inf"), "bad": 0}

    def stopping(epoch):
        if epoch > 0 and best["bad"] < patience:
            v = val_fn()
            if v < best["val"] - 1e-4:
                best.update(val=v, bad=0)
            else:
                best["bad"] += 1
        return iter(()) if best["bad"] >= patience else batches(epoch)
    return stopping


def shrink_init(model: torch.nn.Module, init: str) -> torch.nn.Module:
    """``init`` "scaled:F" multiplies every weight by F (the seed's "init far too small"); else unchanged."""
    if init.startswith("scaled:"):
        factor = float(init.split(":")[1])
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(factor)
    return model


def make_optimizer(params, cfg: Mapping[str, Any]) -> torch.optim.Optimizer:
    """SGD with momentum 0.9, Adam or AdamW, from ``cfg["optimizer"]``, ``lr``, ``eps``, ``weight_decay``."""
    kind = cfg["optimizer"]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=0.9, weight_decay=cfg["weight_decay"])
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=cfg["lr"], eps=cfg["eps"], weight_decay=cfg["weight_decay"])
    if kind == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"], eps=cfg["eps"], weight_decay=cfg["weight_decay"])
    raise ValueError(f"unknown optimizer {kind!r}: sgd, adam or adamw")


def make_scheduler(opt: torch.optim.Optimizer, cfg: Mapping[str, Any]):
    """None for "constant"; warm-up (a tenth) + cosine, step decay x0.3 every third, SGDR every quarter, one-cycle."""
    kind, steps = cfg["schedule"], cfg["max_steps"]
    if kind == "constant":
        return None
    if kind == "warmup_cosine":
        warm = steps // 10
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm))))
    if kind == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=steps // 3, gamma=0.3)
    if kind == "sgdr":
        return torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=steps // 4)
    if kind == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg["lr"], total_steps=steps + 1)
    raise ValueError(f"unknown schedule {kind!r}")
