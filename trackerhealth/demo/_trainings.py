"""The demo's trainings: small real models, some healthy, some with a real fault.

Each training really runs (numpy, a few seconds or less on a laptop CPU) and records what a
training loop would log to MLflow: per-step metrics with their wall-clock timestamps. The faults
are the ordinary ones — a learning rate typed 100x too large, a training set far too small, a data
loader that reads from a slow disk, one corrupt shard in every epoch, a deep sigmoid net — and what
trackerhealth finds in them is measured, never scripted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from . import _nn as nn

LOSS, VAL_LOSS, LR, GRAD = "train/loss", "val/loss", "train/lr", "train/grad_norm"
# The compute device here is the CPU: its measured busy share is logged under the key MLflow's
# system metrics use for GPU utilization, so the run reads like one from a GPU box.
UTIL = "system/gpu_0_utilization_percentage"


@dataclass
class Training:
    """One demo run: what it is, what trackerhealth should find, and what it logged."""

    name: str
    description: str
    expected: tuple[str, ...]  # diagnosis ids the fault should trigger; () for a healthy run
    params: dict[str, str] = field(default_factory=dict)
    rows: list[tuple[int, str, float, int]] = field(default_factory=list)  # step, key, value, timestamp ms
    seconds: float = 0.0

    def log(self, step: int, values: dict[str, float]) -> None:
        ms = int(time.time() * 1000)
        self.rows.extend((step, k, float(v), ms) for k, v in values.items())


def _batches(X, y, batch: int, rng, shuffle: bool = True) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(index in epoch, X batch, y batch), epoch after epoch."""
    n = len(X) // batch
    while True:
        order = rng.permutation(len(X)) if shuffle else np.arange(len(X))
        for b in range(n):
            idx = order[b * batch:(b + 1) * batch]
            yield b, X[idx], y[idx]


def _fit(run: Training, model: nn.MLP, opt, lr_fn: Callable[[int], float], loader, loss_fn, *, steps: int,
         val=None, val_every: int = 50, layer_every: int = 0, timed: bool = False, log_every: int = 1,
         read_delay: float = 0.0) -> None:
    """Minibatch training that logs like a real loop: loss, lr and grad norm every ``log_every``
    steps (timings averaged over the interval), per-layer grad norms every ``layer_every`` steps,
    and the validation loss every ``val_every`` steps."""
    started = time.perf_counter()
    acc = {"data": 0.0, "compute": 0.0, "loss": 0.0, "n": 0}
    with np.errstate(all="ignore"):  # a diverging run overflows: that is the point, not a crash
        for step in range(1, steps + 1):
            t0 = time.perf_counter()
            if read_delay:
                time.sleep(read_delay)  # the batch is read from a slow network filesystem
            _, Xb, yb = next(loader)
            t1 = time.perf_counter()
            loss, dout = loss_fn(model.forward(Xb), yb)
            grads = model.backward(dout)
            lr = lr_fn(step - 1)
            opt.step(grads, lr)
            t2 = time.perf_counter()
            acc["data"] += t1 - t0
            acc["compute"] += t2 - t1
            acc["loss"] += loss
            acc["n"] += 1
            if step % log_every == 0:
                n = acc["n"]
                rec = {LOSS: acc["loss"] / n, LR: lr, GRAD: nn.global_norm(grads)}
                if timed:
                    data, compute = acc["data"] / n, acc["compute"] / n
                    rec.update({"data_time": data, "compute_time": compute, "step_time": data + compute,
                                UTIL: 100.0 * compute / (data + compute), "samples_per_sec": len(Xb) / (data + compute)})
                acc = {"data": 0.0, "compute": 0.0, "loss": 0.0, "n": 0}
                run.log(step, rec)
            if layer_every and step % layer_every == 0:
                run.log(step, {f"grad_norm/layer_{i}": float(np.linalg.norm(grads[2 * i])) for i in range(model.n_layers)})
            if val is not None and step % val_every == 0:
                run.log(step, {VAL_LOSS: loss_fn(model.forward(val[0]), val[1])[0]})
    run.seconds = time.perf_counter() - started


def healthy(quick: bool) -> Training:
    run = Training("healthy-warmup-cosine", "MLP 2-64-64-3 on spirals, Adam 3e-3 with warm-up and cosine decay, "
                   "data in memory", (), {"model": "MLP 2-64-64-3 ReLU", "optimizer": "adam", "lr": "0.003",
                                          "schedule": "warmup+cosine", "batch_size": "64"})
    rng = np.random.default_rng(1)
    X, y = nn.spirals(3000, rng)
    model = nn.MLP([2, 64, 64, 3], rng)
    steps = 600 if quick else 1200
    _fit(run, model, nn.Adam(model.params), nn.warmup_cosine(3e-3, steps // 20, steps),
         _batches(X[:2400], y[:2400], 64, rng), nn.softmax_ce, steps=steps, val=(X[2400:], y[2400:]),
         layer_every=20, timed=True, log_every=10)
    return run


def overfitting(quick: bool) -> Training:
    run = Training("overfit-tiny-train-set", "MLP 2-128-128-3 trained on 60 noisy spiral points, validated on 600",
                   ("overfitting",), {"model": "MLP 2-128-128-3 ReLU", "optimizer": "adam", "lr": "0.003",
                                      "train_size": "60", "batch_size": "20"})
    rng = np.random.default_rng(2)
    X, y = nn.spirals(660, rng, noise=0.5)
    model = nn.MLP([2, 128, 128, 3], rng)
    _fit(run, model, nn.Adam(model.params), lambda s: 3e-3, _batches(X[:60], y[:60], 20, rng), nn.softmax_ce,
         steps=800 if quick else 1500, val=(X[60:], y[60:]), val_every=25)
    return run


def lr_too_high(quick: bool) -> Training:
    run = Training("nan-lr-typo", "regression MLP 8-64-64-1 (tanh), SGD momentum 0.9, warm-up to lr 0.5 "
                   "(meant 0.005): the loss falls while the lr is small, then explodes and turns NaN",
                   ("nonfinite",), {"model": "MLP 8-64-64-1 tanh", "optimizer": "sgd", "momentum": "0.9",
                                    "lr": "0.5", "warmup_steps": "300"})
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2000, 8))
    y = (np.sin(X @ rng.standard_normal(8)) + 0.5 * X @ rng.standard_normal(8))[:, None]
    y += 0.1 * rng.standard_normal(y.shape)
    model = nn.MLP([8, 64, 64, 1], rng, activation="tanh")
    steps = 400 if quick else 600
    _fit(run, model, nn.SGD(model.params), nn.warmup_cosine(0.5, 300, steps),
         _batches(X[:1600], y[:1600], 32, rng), nn.mse, steps=steps, val=(X[1600:], y[1600:]), val_every=20)
    return run


def slow_loader(quick: bool) -> Training:
    run = Training("slow-data-loader", "the healthy MLP again, but every batch is read from a slow network "
                   "filesystem (5 ms per read) in the training process: the compute device waits for data",
                   ("input-bottleneck",), {"model": "MLP 2-64-64-3 ReLU", "optimizer": "adam", "lr": "0.003",
                                           "num_workers": "0", "data": "nfs"})
    rng = np.random.default_rng(4)
    X, y = nn.spirals(3000, rng)
    model = nn.MLP([2, 64, 64, 3], rng)
    steps = 200 if quick else 400
    _fit(run, model, nn.Adam(model.params), nn.warmup_cosine(3e-3, steps // 20, steps),
         _batches(X[:2400], y[:2400], 64, rng), nn.softmax_ce, steps=steps, val=(X[2400:], y[2400:]),
         timed=True, log_every=5, read_delay=0.005)
    return run


def corrupt_shard(quick: bool) -> Training:
    run = Training("bad-shard-every-epoch", "MLP 16-64-4 on blobs, unshuffled; one shard's labels are off by one "
                   "class (a label-map bug in one file): the loss spikes once per epoch", ("periodic-spikes",),
                   {"model": "MLP 16-64-4 ReLU", "optimizer": "sgd", "lr": "0.01", "shuffle": "false"})
    rng = np.random.default_rng(5)
    X, y = nn.blobs(1600, rng)
    y[800:832] = (y[800:832] + 1) % 4  # batch 25 of 50, in every epoch
    model = nn.MLP([16, 64, 4], rng)
    _fit(run, model, nn.SGD(model.params), lambda s: 0.01, _batches(X, y, 32, rng, shuffle=False), nn.softmax_ce,
         steps=1000 if quick else 2000)
    return run


def vanishing(quick: bool) -> Training:
    run = Training("deep-sigmoid-vanishing", "14 sigmoid layers, Xavier init: the first layers' gradients vanish",
                   ("vanishing-gradients",), {"model": "MLP 16-32x13-4 sigmoid", "optimizer": "sgd", "lr": "0.05"})
    rng = np.random.default_rng(6)
    X, y = nn.blobs(2000, rng)
    model = nn.MLP([16] + [32] * 13 + [4], rng, activation="sigmoid")
    _fit(run, model, nn.SGD(model.params), lambda s: 0.05, _batches(X, y, 32, rng), nn.softmax_ce,
         steps=300 if quick else 600, layer_every=10)
    return run


TRAININGS: tuple[Callable[[bool], Training], ...] = (healthy, overfitting, lr_too_high, slow_loader, corrupt_shard,
                                                     vanishing)


def train_all(quick: bool = False, on_done: Callable[[Training], None] | None = None) -> list[Training]:
    runs = []
    for make in TRAININGS:
        run = make(quick)
        runs.append(run)
        if on_done is not None:
            on_done(run)
    return runs
