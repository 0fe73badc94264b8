"""Training loops that need more than ``loop.fit``: measured step timing with real
data loaders (fast, slow-I/O and heavy-preprocessing), and multi-task training."""

from __future__ import annotations

import time

import numpy as np

from . import models as M
from .runlog import RunLog

# --------------------------------------------------------------------------- data loaders


def fast_loader(X, y, batch_size, rng):
    """Everything preloaded in memory; a batch is one fancy-index (like pinned, prefetched data)."""
    while True:
        order = rng.permutation(len(X))
        for b in range(len(X) // batch_size):
            idx = order[b * batch_size : (b + 1) * batch_size]
            yield X[idx], y[idx]


def sleepy_loader(X, y, batch_size, rng, read_s):
    """Reads each batch from 'disk': time.sleep emulates the I/O latency of a slow network filesystem."""
    while True:
        order = rng.permutation(len(X))
        for b in range(len(X) // batch_size):
            idx = order[b * batch_size : (b + 1) * batch_size]
            time.sleep(read_s)
            yield X[idx].copy(), y[idx]


def _augment_one(raw: bytes, side: int, rng, up: int):
    """Decode + augment one image sample-by-sample in Python, as a naive Dataset.__getitem__ does."""
    img = np.frombuffer(raw, dtype=np.uint8).reshape(side, side).astype(np.float64)
    big = np.kron(img, np.ones((up, up)))  # upsample "decode to full resolution"
    pad = np.pad(big, 4 * up, mode="reflect")
    oy, ox = rng.integers(0, 8 * up, 2)
    big = pad[oy : oy + side * up, ox : ox + side * up]
    if rng.random() < 0.5:
        big = big[:, ::-1]
    # gaussian blur through the FFT, then colour jitter
    f = np.fft.rfft2(big)
    ky = np.fft.fftfreq(big.shape[0])[:, None]
    kx = np.fft.rfftfreq(big.shape[1])[None, :]
    big = np.fft.irfft2(f * np.exp(-(kx**2 + ky**2) * 40.0), s=big.shape)
    big = big * rng.uniform(0.8, 1.2) + rng.uniform(-10, 10)
    small = big.reshape(side, up, side, up).mean(axis=(1, 3))
    return ((small - 128.0) / 64.0).reshape(-1)


def heavy_loader(raw_images: list, y, batch_size, rng, up=4):
    """Per-sample decode/augment in a Python loop in the training process (num_workers=0)."""
    side = int(round(len(raw_images[0]) ** 0.5))
    while True:
        order = rng.permutation(len(raw_images))
        for b in range(len(raw_images) // batch_size):
            idx = order[b * batch_size : (b + 1) * batch_size]
            Xb = np.stack([_augment_one(raw_images[i], side, rng, up) for i in idx])
            yield Xb, y[idx]


# --------------------------------------------------------------------------- timed loop


def fit_timed(
    log: RunLog,
    model,
    opt,
    lr_fn,
    loader,
    loss_fn,
    *,
    steps,
    batch_size,
    names,
    log_every=10,
    unit="s",
    step_base=1,
    Xva=None,
    yva=None,
    val_every=None,
):
    """Train while measuring data time, compute time and step time with perf_counter.

    The "utilization" logged is the measured busy share of the compute device over the
    logging interval, 100 * compute_time / step_time (on this CPU-only machine the
    compute device is the CPU running forward+backward+update).
    names: loss, lr, data_time, compute_time, step_time, util, throughput (optional), val_loss.
    """
    scale = 1000.0 if unit == "ms" else 1.0
    acc = dict(data=0.0, comp=0.0, step=0.0, loss=0.0, n=0)
    with np.errstate(all="ignore"):
        for s in range(steps):
            step = s + step_base
            t0 = time.perf_counter()
            Xb, yb = next(loader)
            t1 = time.perf_counter()
            out = model.forward(Xb)
            loss, d = loss_fn(out, yb)
            g, _ = model.backward(d)
            lr = lr_fn(s)
            opt.step(g, lr)
            t2 = time.perf_counter()
            acc["data"] += t1 - t0
            acc["comp"] += t2 - t1
            acc["step"] += t2 - t0
            acc["loss"] += loss
            acc["n"] += 1
            if step % log_every == 0:
                n = acc["n"]
                rec = {names["loss"]: acc["loss"] / n}
                if "lr" in names:
                    rec[names["lr"]] = lr
                rec[names["data_time"]] = acc["data"] / n * scale
                rec[names["compute_time"]] = acc["comp"] / n * scale
                rec[names["step_time"]] = acc["step"] / n * scale
                rec[names["util"]] = 100.0 * acc["comp"] / acc["step"]
                if "throughput" in names:
                    rec[names["throughput"]] = n * batch_size / acc["step"]
                log.log(step, rec)
                acc = dict(data=0.0, comp=0.0, step=0.0, loss=0.0, n=0)
            if Xva is not None and val_every and step % val_every == 0:
                from .loop import eval_loss

                log.log(step, {names["val_loss"]: eval_loss(model, Xva, yva, loss_fn)})


# --------------------------------------------------------------------------- multi-task loop


def fit_multitask(
    log: RunLog,
    model: M.MultiTaskMLP,
    opt,
    lr_fn,
    X,
    targets: dict,
    losses: dict,
    *,
    steps,
    batch_size,
    rng,
    names: dict,
    total_key,
    weights=None,
    log_every=1,
    extra_names=None,
    step_base=1,
    val=None,
    val_every=None,
    val_names=None,
    clip=None,
):
    """Sum of per-task losses (optionally weighted); each task loss and the total are logged.

    names: task -> logged key; extra_names: lr / grad_norm keys; val: (X_val, targets_val).
    """
    weights = weights or {t: 1.0 for t in targets}
    extra_names = extra_names or {}
    n = len(X)
    order = rng.permutation(n)
    pos = 0
    with np.errstate(all="ignore"):
        for s in range(steps):
            step = s + step_base
            if pos + batch_size > n:
                order, pos = rng.permutation(n), 0
            idx = order[pos : pos + batch_size]
            pos += batch_size
            outs = model.forward(X[idx])
            task_loss, douts = {}, {}
            for t, fn in losses.items():
                bl, d = fn(outs[t], targets[t][idx])
                task_loss[t] = weights[t] * bl
                douts[t] = weights[t] * d
            grads = model.backward(douts)
            if clip is not None:
                grads, gn = M.clip_by_global_norm(grads, clip)
            else:
                gn = M.global_norm(grads)
            lr = lr_fn(s)
            opt.step(grads, lr)
            if step % log_every == 0:
                rec = {names[t]: task_loss[t] for t in losses}
                rec[total_key] = sum(task_loss.values())
                if "lr" in extra_names:
                    rec[extra_names["lr"]] = lr
                if "grad_norm" in extra_names:
                    rec[extra_names["grad_norm"]] = gn
                log.log(step, rec)
            if val is not None and val_every and step % val_every == 0:
                Xv, tv = val
                outs = model.forward(Xv)
                vrec = {}
                for t, fn in losses.items():
                    vrec[val_names[t]] = weights[t] * fn(outs[t], tv[t])[0]
                log.log(step, vrec)
