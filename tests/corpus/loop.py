"""Scenario registry and the shared training loop used by most scenarios."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import models as M
from .runlog import RunLog

# --------------------------------------------------------------------------- registry


@dataclass
class Scenario:
    name: str
    fn: Callable[[str, int], RunLog]
    faults: list[str]
    fmt: str
    model: str
    dataset: str
    seed: int
    cadence: str
    naming: str
    description: str
    keys: dict = field(default_factory=dict)  # role -> metric key, for the summary and self-checks

    @property
    def file(self) -> str:
        ext = {"long-csv": ".csv.gz", "long-jsonl": ".jsonl", "wide-csv": ".csv"}
        if self.fmt == "hf-trainer-state":
            return f"runs/{self.name}/trainer_state.json"
        if self.fmt == "lightning-csv":
            return f"runs/{self.name}/lightning_logs/version_0/metrics.csv"
        return f"runs/{self.name}{ext[self.fmt]}"


SCENARIOS: dict[str, Scenario] = {}


def scenario(name, *, faults, model, dataset, seed, cadence, naming, description, fmt="long-csv", keys=None):
    def deco(fn):
        SCENARIOS[name] = Scenario(
            name, fn, list(faults), fmt, model, dataset, seed, cadence, naming, description, dict(keys or {})
        )
        return fn

    return deco


# --------------------------------------------------------------------------- batching


def batches(n, batch_size, rng, shuffle=True, drop_last=True):
    """Yield (epoch, index-in-epoch, indices) forever."""
    epoch = 0
    while True:
        order = rng.permutation(n) if shuffle else np.arange(n)
        nb = n // batch_size if drop_last else math.ceil(n / batch_size)
        for b in range(nb):
            yield epoch, b, order[b * batch_size : (b + 1) * batch_size]
        epoch += 1


def eval_loss(model, X, y, loss_fn, chunk=4096):
    with np.errstate(all="ignore"):
        tot, n = 0.0, 0
        for i in range(0, len(X), chunk):
            out = model.forward(X[i : i + chunk])
            bl, _ = loss_fn(out, y[i : i + chunk])
            tot += bl * len(out)
            n += len(out)
    return tot / n


# --------------------------------------------------------------------------- generic loop


def fit(
    log: RunLog,
    model,
    opt,
    lr_fn,
    Xtr,
    ytr,
    loss_fn,
    *,
    steps,
    batch_size,
    rng,
    names,
    log_every=1,
    avg_loss=False,
    Xva=None,
    yva=None,
    val_every=None,
    clip=None,
    shuffle=True,
    corrupt=None,
    layer_every=None,
    weight_norm_every=None,
    step_base=1,
    extra=None,
    stop=None,
):
    """Minibatch training with logging in a given naming style.

    names: role -> key, roles: loss, val_loss, lr, grad_norm, epoch, momentum,
    layer_grad (callable i -> key), weight_norm (callable i -> key), val_acc.
    corrupt(step, epoch, b, Xb, yb) -> (Xb, yb) lets a scenario inject a fault into a batch.
    extra(step, ctx) -> dict of additional values logged with the train record.
    stop(step, val_loss) -> bool ends training early (early stopping).
    Step numbers logged are optimizer steps counted from ``step_base``.
    """
    it = batches(len(Xtr), batch_size, rng, shuffle=shuffle)
    n_per_epoch = len(Xtr) // batch_size
    acc_loss, acc_n = 0.0, 0
    val_hist = []
    with np.errstate(all="ignore"):
        for s in range(steps):
            step = s + step_base
            epoch, b, idx = next(it)
            Xb, yb = Xtr[idx], ytr[idx]
            if corrupt is not None:
                Xb, yb = corrupt(step, epoch, b, Xb, yb)
            out = model.forward(Xb)
            loss, dout = loss_fn(out, yb)
            grads, _ = model.backward(dout)
            if clip is not None:
                grads, gnorm = M.clip_by_global_norm(grads, clip)
            else:
                gnorm = M.global_norm(grads)
            lr = lr_fn(s)
            opt.step(grads, lr)
            acc_loss += loss
            acc_n += 1
            rec = {}
            if step % log_every == 0:
                rec[names["loss"]] = acc_loss / acc_n if avg_loss else loss
                acc_loss, acc_n = 0.0, 0
                if "grad_norm" in names:
                    rec[names["grad_norm"]] = gnorm
                if "lr" in names:
                    rec[names["lr"]] = lr
                if "momentum" in names:
                    rec[names["momentum"]] = getattr(opt, "momentum", getattr(opt, "b1", 0.0))
                if "epoch" in names:
                    rec[names["epoch"]] = round(epoch + (b + 1) / n_per_epoch, 4)
                if extra is not None:
                    rec.update(extra(step, dict(epoch=epoch, b=b, loss=loss, grads=grads, model=model)))
            if layer_every and step % layer_every == 0 and "layer_grad" in names:
                for i in range(model.n_layers):
                    rec[names["layer_grad"](i)] = float(np.linalg.norm(grads[2 * i]))
            if weight_norm_every and step % weight_norm_every == 0 and "weight_norm" in names:
                for i, wn in enumerate(model.weight_norms()):
                    rec[names["weight_norm"](i)] = wn
            if rec:
                log.log(step, rec)
            if Xva is not None and val_every and step % val_every == 0:
                vl = eval_loss(model, Xva, yva, loss_fn)
                vrec = {names["val_loss"]: vl}
                if "val_acc" in names:
                    with np.errstate(all="ignore"):
                        vrec[names["val_acc"]] = M.accuracy(model.forward(Xva), yva)
                log.log(step, vrec)
                val_hist.append(vl)
                if stop is not None and stop(step, vl):
                    return step
    return steps + step_base - 1
