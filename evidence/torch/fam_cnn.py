"""CNN family: a small convnet on scikit-learn's bundled 8x8 digits (1797 images, 10 classes).

Each fault run has a twin with the one setting put right (same seed, split and init unless init is
the fault); the label is what :mod:`.truth` confirms against that twin.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from sklearn.datasets import load_digits
from torch import nn

from . import truth
from .common import NAMES, fit, minibatches, seed_all
from .sinks import open_run

FAMILY = "cnn"
DATASET = "sklearn.load_digits"


def _data(seed: int):
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16.0
    y = torch.tensor(y, dtype=torch.long)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    x, y = x[order], y[order]
    return (x[:1400], y[:1400]), (x[1400:], y[1400:])


class SmallCNN(nn.Module):
    def __init__(self, act: type[nn.Module] = nn.ReLU, depth: int = 2, width: int = 16, dropout: float = 0.0):
        super().__init__()
        layers, c = [], 1
        for _ in range(depth):
            layers += [nn.Conv2d(c, width, 3, padding=1), act()]
            c = width
        self.features = nn.Sequential(*layers)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(width * 4, 10)
        self.pool = nn.AdaptiveAvgPool2d(2)

    def forward(self, x):
        return self.head(self.drop(self.pool(self.features(x)).flatten(1)))


def _scale_init(model: nn.Module, scale: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(scale)


def _train(root: Path, name: str, style: str, naming: str, *, seed: int = 0, lr: float = 1e-3, opt: str = "adam",
           batch: int = 32, epochs: int = 8, eps: float = 1e-8, weight_decay: float = 0.0, init_scale: float = 1.0,
           act: str = "relu", depth: int = 2, dropout: float = 0.0, n_train: int | None = None, shuffle: bool = True,
           corrupt: dict | None = None, bad_shard: tuple[int, int] | None = None, spike: dict | None = None,
           schedule: str = "constant", log_every: int = 1, max_steps: int | None = None):
    seed_all(seed)
    (xt, yt), (xv, yv) = _data(seed)
    if n_train is not None:
        xt, yt = xt[:n_train], yt[:n_train]
    if bad_shard is not None:
        lo, hi = bad_shard
        yt = yt.clone()
        yt[lo:hi] = (yt[lo:hi] + 5) % 10  # a contiguous block of wrong labels, met at the same place each epoch
    torch.manual_seed(seed)
    acts = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}
    model = SmallCNN(acts[act], depth, dropout=dropout)
    if init_scale != 1.0:
        _scale_init(model, init_scale)
    if opt == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=lr, eps=eps, weight_decay=weight_decay)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(len(xt) / batch)
    scheduler = None
    if schedule == "cosine":
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps_per_epoch * epochs)
    elif schedule == "sgdr":
        scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, steps_per_epoch * 2)
    base_batches = minibatches(xt, yt, batch, seed, shuffle)
    if corrupt is not None:
        def batches(epoch, _base=base_batches):
            for i, (bx, by) in enumerate(_base(epoch)):
                if epoch == corrupt["epoch"] and i == corrupt["batch"]:
                    bx = bx.clone()
                    bx[0, 0, 3, 3] = corrupt["value"]
                yield bx, by
    else:
        batches = base_batches
    before = None
    if spike is not None:
        def before(step, o, _s=spike):
            if step == _s["step"]:
                for g in o.param_groups:
                    g["lr"] = _s["lr"]
    ce = nn.CrossEntropyLoss()

    def loss_fn(m, b):
        return ce(m(b[0]), b[1])

    def val_fn():
        model.eval()
        with torch.no_grad():
            return float(ce(model(xv), yv))

    config = {"model": f"SmallCNN-{depth}x{act}", "optimizer": opt, "lr": lr, "eps": eps, "batch_size": batch,
              "weight_decay": weight_decay, "init_scale": init_scale, "activation": act, "depth": depth,
              "dropout": dropout, "schedule": schedule, "shuffle": shuffle, "epochs": epochs,
              "n_train": len(xt), "num_workers": 0, "seed": seed}
    log = open_run(style, root, name, config)
    layer_names = [n for n, p in model.named_parameters() if n.endswith("weight")]
    res = fit(model, batches, loss_fn, optimizer, log, epochs=epochs, naming=naming, scheduler=scheduler,
              val_fn=val_fn, val_every=10, log_every=log_every, layer_grads=layer_names, before_step=before,
              max_steps=max_steps)
    path = log.close()
    entry = {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": style,
             "file": path, "seed": seed, "config": config,
             "steps_per_epoch": steps_per_epoch}
    return entry, log.logged, res, layer_names


def _label(entry, intended, cause, twin, faults, truth_measures, description):
    entry.update({"intended": intended, "cause": cause, "twin": twin, "faults": faults, "truth": truth_measures,
                  "description": description})
    entry.pop("steps_per_epoch", None)
    return entry


def build(root: Path, only: set[str] | None = None) -> list[dict]:
    out: list[dict] = []

    def want(*names):
        return only is None or any(n in only for n in names)

    # --- Adam twin (wandb naming, wandb sink) and its faults
    tw, tlog, tres, layers = _train(root, "cnn_twin_adam", "wandb", "wandb", lr=1e-3)
    L, G = NAMES["wandb"]["loss"], NAMES["wandb"]["grad_norm"]
    out.append(_label(tw, [], "healthy", None, [], {}, "Healthy twin: Adam lr 1e-3, batch 32, 8 epochs."))

    if want("cnn_lr_too_high_adam"):
        e, lg, _, _ = _train(root, "cnn_lr_too_high_adam", "wandb", "wandb", lr=0.05)
        ok, m = truth.confirm_oscillation(lg, tlog, L)
        out.append(_label(e, ["loss-oscillation"], "lr_too_high", "cnn_twin_adam", ["loss-oscillation"] if ok else [], m,
                          "Adam lr 0.05 (50x the twin's): the loss bounces at a high level."))
    if want("cnn_lr_too_low_adam"):
        e, lg, _, _ = _train(root, "cnn_lr_too_low_adam", "csv", "wandb", lr=2e-5)
        ok, m = truth.confirm_slow(lg, tlog, L)
        out.append(_label(e, ["slow-convergence"], "lr_too_low", "cnn_twin_adam", ["slow-convergence"] if ok else [], m,
                          "Adam lr 2e-5 (50x below the twin's): learns, but slowly."))
    if want("cnn_adam_eps_large"):
        e, lg, _, _ = _train(root, "cnn_adam_eps_large", "parquet", "wandb", lr=1e-3, eps=1.0)
        ok, m = truth.confirm_slow(lg, tlog, L)
        if not ok:
            ok2, m2 = truth.confirm_oscillation(lg, tlog, L)
            m = {**m, **{f"osc_{k}": v for k, v in m2.items()}}
            fl = ["loss-oscillation"] if ok2 and m2["fault_fell"] < 0.1 else []
        else:
            fl = ["slow-convergence"]
        out.append(_label(e, ["slow-convergence"], "adam_eps_large", "cnn_twin_adam", fl, m,
                          "Adam with eps=1.0: the update is ~lr*grad, far smaller than the adaptive step."))
    if want("cnn_corrupt_record"):
        e, lg, _, _ = _train(root, "cnn_corrupt_record", "mlflow", "wandb", lr=1e-3,
                             corrupt={"epoch": 3, "batch": 10, "value": float("nan")})
        ok, m = truth.confirm_explosion(lg, tlog, G, L)
        out.append(_label(e, ["nonfinite"], "corrupt_record", "cnn_twin_adam", ["nonfinite"] if ok else [], m,
                          "One pixel of one image in epoch 3 is NaN: the weights go NaN and stay there."))
    if want("cnn_bad_shard_noshuffle"):
        e, lg, _, _ = _train(root, "cnn_bad_shard_noshuffle", "csv", "wandb", lr=1e-3, shuffle=False, bad_shard=(640, 704))
        tn, tnl, _, _ = _train(root, "cnn_twin_noshuffle", "csv", "wandb", lr=1e-3, shuffle=False)
        spe = e["steps_per_epoch"]
        steps = [float(ep * spe + k + 1) for ep in range(2, 8) for k in (20, 21)]
        ok, m = truth.confirm_spikes_at(lg, tnl, L, steps)
        out.append(_label(e, ["periodic-spikes"], "bad_shard_noshuffle", "cnn_twin_noshuffle",
                          ["periodic-spikes"] if ok else [], {**m, "spike_steps": steps},
                          "No shuffling; samples 640..703 have wrong labels, met at batches 20-21 of every epoch."))
        out.append(_label(tn, [], "healthy", None, [], {}, "Healthy twin: no shuffling, clean labels."))

    # --- SGD twin (plain naming) for init and spike faults
    sw, slog, _, _ = _train(root, "cnn_twin_sgd", "parquet", "plain", lr=0.05, opt="sgd")
    out.append(_label(sw, [], "healthy", None, [], {}, "Healthy twin: SGD momentum 0.9 lr 0.05, default init."))
    if want("cnn_init_too_small"):
        e, lg, _, _ = _train(root, "cnn_init_too_small", "parquet", "plain", lr=0.05, opt="sgd", init_scale=1e-3)
        ok, m = truth.confirm_slow(lg, slog, "loss")
        fl = ["slow-convergence"] if ok else []
        if not ok:
            ok2, m2 = truth.confirm_oscillation(lg, slog, "loss")
            m = {**m, **{f"osc_{k}": v for k, v in m2.items()}}
            fl = ["loss-oscillation"] if ok2 and m2["fault_fell"] < 0.1 else []
        out.append(_label(e, ["slow-convergence"], "init_too_small", "cnn_twin_sgd", fl, m,
                          "Every parameter scaled by 1e-3 at init: the signal and its gradient start near zero."))
    if want("cnn_lr_spike_restart"):
        e, lg, _, _ = _train(root, "cnn_lr_spike_restart", "wandb", "plain", lr=0.05, opt="sgd",
                             spike={"step": 150, "lr": 50.0})
        ok, m = truth.confirm_explosion(lg, slog, "grad_norm", "loss")
        out.append(_label(e, ["nonfinite"], "lr_spike_restart", "cnn_twin_sgd", ["nonfinite"] if ok else [], m,
                          "At the restart (step 150) the LR is set to 50 instead of 0.05: the run diverges."))
    return out
