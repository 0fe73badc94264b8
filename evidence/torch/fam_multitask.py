"""Multi-task family: a shared MLP trunk with a classification head and a regression head, total loss = the
sum of the task losses, each task's loss logged every step next to the total (and the val total).

- wine (scikit-learn ``load_wine``, 178 rows): head 1 the cultivar (cross-entropy), head 2 the proline
  column (mg/L, 278..1680) taken out of the 13 inputs (MSE);
- digits (``load_digits``, 1797 8x8 images): head 1 the digit (cross-entropy), head 2 the image's total
  ink, the sum of its 64 raw pixel values ("pixels", 185..433) (MSE).

Wine inputs are standardised on the training split, digit pixels scaled to 0..1; the regression target is standardised too unless the
fault is an unscaled auxiliary loss (the target left in raw units). Each fault run has a twin with the one
setting put right (same seed, split, init); labels come from :mod:`.truth` against it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits, load_wine
from torch import nn
from torch.nn import functional as F

from . import truth
from ._pipeline import loader_batches
from .common import NAMES, fit, lr_spike, minibatches, seed_all
from .sinks import open_run

FAMILY = "multitask"
SEED = 31
DATASETS = {"wine": "sklearn.load_wine", "digits": "sklearn.load_digits"}
REG_TASK = {"wine": "proline", "digits": "ink"}
N_CLASSES = {"wine": 3, "digits": 10}


def load(kind: str, seed: int, target: str = "std", n_train: int | None = None, shard: tuple | None = None):
    """(x_train, y_train, x_val, y_val); ``y`` packs [class, regression target] as float columns.

    ``target``: "std" (standardised on the clean training split), "raw" (mg/L or pixels), "div10" (raw / 10).
    ``shard=(lo, hi, factor)``: training rows lo..hi-1 carry their regression target in other units (x factor)."""
    if kind == "wine":
        data = load_wine()
        x, cls = data.data.astype(np.float64), data.target
        reg = x[:, 12].copy()  # proline, mg/L
        x = np.delete(x, 12, axis=1)
        n_tr = 138
    else:
        x, cls = load_digits(return_X_y=True)
        x = x.astype(np.float64)
        reg = x.sum(1)  # total ink of the raw 0..16 pixels
        n_tr = 1400
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:n_tr], order[n_tr:]
    if n_train is not None:
        tr = tr[:n_train]
    if kind == "wine":
        mu, sd = x[tr].mean(0), x[tr].std(0)
        x = (x - mu) / sd
    else:  # pixels scaled to 0..1 (standardising them would blow up the near-constant border pixels)
        x = x / 16.0
    r_mu, r_sd = reg[tr].mean(), reg[tr].std()
    reg_tr, reg_va = reg[tr].copy(), reg[va].copy()
    if shard is not None:
        lo, hi, factor = shard
        reg_tr[lo:hi] *= factor
    scale = {"std": lambda r: (r - r_mu) / r_sd, "raw": lambda r: r, "div10": lambda r: r / 10.0}[target]
    t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float32)
    y_tr = torch.stack([t(cls[tr]), t(scale(reg_tr))], 1)
    y_va = torch.stack([t(cls[va]), t(scale(reg_va))], 1)
    return t(x[tr]), y_tr, t(x[va]), y_va


class MultiTaskMLP(nn.Module):
    """A shared two-layer ReLU trunk; a classification head and a regression head on its features."""

    def __init__(self, n_in: int, n_classes: int, width: int = 64, dropout: float = 0.0):
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(n_in, width), nn.ReLU()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        layers += [nn.Linear(width, width), nn.ReLU()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        self.trunk = nn.Sequential(*layers)
        self.cls_head = nn.Linear(width, n_classes)
        self.reg_head = nn.Linear(width, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls_head(h), self.reg_head(h).squeeze(1)


def make_opt(params, cfg: dict):
    if cfg["opt"] == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    if cfg["opt"] == "adamw":
        return torch.optim.AdamW(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"], weight_decay=cfg["weight_decay"])


def make_sched(opt, schedule: str, total: int):
    if schedule == "constant":
        return None
    if schedule == "warmup_cosine":
        warm = max(1, total // 10)
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / (total - warm)))))
    if schedule == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, total // 3), gamma=0.3)
    if schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=opt.param_groups[0]["lr"], total_steps=total + 1)
    raise ValueError(schedule)


DEFAULT = dict(data="wine", opt="adam", lr=3e-3, momentum=0.9, weight_decay=0.0, batch_size=16, width=64, dropout=0.0,
               schedule="constant", shuffle=True, clip=None, target="std", cls_weight=1.0, reg_weight=1.0,
               n_train=None, steps=300, val_every=20, log_every=1, loader="memory", num_workers=0,
               early_stop=False, style="csv", naming="plain")


def train(root: Path, name: str, **over):
    """Train one multi-task run; returns (file, Logged, FitResult, config)."""
    cfg = {**DEFAULT, **over}
    seed = SEED
    seed_all(seed)
    kind, reg = cfg["data"], REG_TASK[cfg["data"]]
    xt, yt, xv, yv = load(kind, seed, cfg["target"], cfg["n_train"], cfg.get("shard"))
    torch.manual_seed(seed)
    net = MultiTaskMLP(xt.shape[1], N_CLASSES[kind], cfg["width"], cfg["dropout"])
    optimizer = make_opt(net.parameters(), cfg)
    steps = cfg["steps"]
    scheduler = make_sched(optimizer, cfg["schedule"], steps)
    if cfg["loader"] == "memory":
        batches = minibatches(xt, yt, cfg["batch_size"], seed, cfg["shuffle"])
    else:
        batches = loader_batches(xt, yt, cfg["batch_size"], seed, cfg["loader"], num_workers=cfg["num_workers"],
                                 shuffle=cfg["shuffle"], delay_s=cfg.get("delay_s", 0.0005))
    wc, wr = cfg["cls_weight"], cfg["reg_weight"]

    def terms(m, x, y):
        logits, pred = m(x)
        parts = {"cls": wc * F.cross_entropy(logits, y[:, 0].long()), reg: wr * F.mse_loss(pred, y[:, 1])}
        return parts["cls"] + parts[reg], parts

    def val_fn():
        net.eval()
        with torch.no_grad():
            return float(terms(net, xv, yv)[0])

    best = {"val": float("inf"), "bad": 0}
    if cfg["early_stop"]:
        inner = batches

        def batches(epoch):  # noqa: F811 - ends training once the val total stops improving (patience 3 epochs)
            if best["bad"] < 3:
                v = val_fn()
                if v < best["val"] - 1e-4:
                    best.update(val=v, bad=0)
                else:
                    best["bad"] += 1
            return iter(()) if best["bad"] >= 3 else inner(epoch)

    config = {k: v for k, v in cfg.items() if k not in ("style", "naming", "before_step")}
    if "before_step" in over:
        config["lr_spike"] = f"x{over.get('spike_factor')} at step {over.get('spike_at')}"
    config.update(model=f"mtl-mlp2x{cfg['width']}-{N_CLASSES[kind]}cls+{reg}", dataset=DATASETS[kind], seed=seed,
                  n_train=len(xt), tasks=["cls", reg])
    log = open_run(cfg["style"], root, name, config)
    result = fit(net, batches, lambda m, b: terms(m, b[0], b[1]), optimizer, log, epochs=100_000,
                 naming=cfg["naming"], scheduler=scheduler, val_fn=val_fn, val_every=cfg["val_every"],
                 log_every=cfg["log_every"], clip=cfg["clip"], before_step=over.get("before_step"), max_steps=steps)
    file = log.close()
    return file, log.logged, result, config


def entry(name, cfg, style, file, faults, intended, cause, twin, measures, description, also=None, healthy=None):
    e = {"name": name, "family": FAMILY, "model": cfg["model"], "dataset": cfg["dataset"], "style": style,
         "file": file, "faults": sorted(faults), "intended": sorted(intended), "cause": cause, "twin": twin,
         "seed": SEED, "config": cfg, "truth": measures, "description": description}
    if also:
        e["also_acceptable"] = sorted(also)
    if healthy is not None:
        e["healthy_confirmed"] = healthy
    return e


def build(root: Path, only: set[str] | None) -> list[dict]:
    out: list[dict] = []
    runs: dict[str, tuple] = {}
    done: set[str] = set()

    def run(name, over):
        if name not in runs:
            runs[name] = train(root, name, **over)
        return runs[name]

    def keys(over):
        return NAMES[over.get("naming", DEFAULT["naming"])]

    def task_key(over, task):
        return keys(over)["task"].format(task)

    def healthy_check(name, over):
        k = keys(over)
        reg = REG_TASK[over.get("data", DEFAULT["data"])]
        return truth.confirm_healthy(runs[name][1], k["loss"], k["val_loss"],
                                     (task_key(over, "cls"), task_key(over, reg)))

    def record_plain(name, over, cause, description, extra=None):
        """A healthy run or a twin: its own confirm_healthy measures."""
        if name in done:
            return
        f, lg, res, cfg = run(name, over)
        ok, m = healthy_check(name, over)
        m = {**m, "steps": res.steps, "samples_per_s": res.samples_per_s, **(extra or {})}
        out.append(entry(name, cfg, over.get("style", "csv"), f, [], [], cause, None, m, description, healthy=ok))
        done.add(name)

    def fault(name, twin, twin_over, twin_desc, cause, intended, check, description, over):
        """Train the twin and the run; ``check(fault, twin, fault_result, twin_result, over) -> (ok, measures,
        faults, also)``."""
        if only is not None and name not in only and twin not in only:
            return
        run(twin, twin_over)
        f, lg, res, cfg = run(name, over)
        ok, m, ids, also = check(lg, runs[twin][1], res, runs[twin][2], over)
        out.append(entry(name, cfg, over.get("style", "csv"), f, ids if ok else [], intended, cause, twin, m,
                         description, also=also if ok else None))
        done.add(name)
        record_plain(twin, twin_over, "twin", twin_desc)

    def stalled(lg, tlg, r, tr, over):
        ok, m = truth.confirm_task_stalled(lg, tlg, task_key(over, "cls"))
        reg = REG_TASK[over["data"]]
        _, fc = lg.get(task_key(over, "cls"))
        _, fr = lg.get(task_key(over, reg))
        m["reg_over_cls_loss_median"] = float(np.median(fr) / max(np.median(fc), 1e-12))
        return ok, m, ["task-imbalance"], None

    def osc(lg, tlg, r, tr, over):
        ok, m = truth.confirm_oscillation(lg, tlg, keys(over)["loss"])
        return ok, m, ["loss-oscillation"], None

    def slow(lg, tlg, r, tr, over):
        key = keys(over)["loss"]
        ok, m = truth.confirm_slow(lg, tlg, key)
        flat = False
        if not ok:
            flat, m2 = truth.confirm_oscillation(lg, tlg, key)
            m = {**m, **{f"osc_{k}": v for k, v in m2.items()}}
            ok = flat
        faults, also = truth.flat_or_slow_labels(["slow-convergence"], flat)
        return ok, m, faults, also

    def boom(lg, tlg, r, tr, over):
        k = keys(over)
        ok, m = truth.confirm_explosion(lg, tlg, k["grad_norm"], k["loss"])
        return ok, m, ["nonfinite"], None

    def overfit(lg, tlg, r, tr, over):
        k = keys(over)
        ok, m = truth.confirm_overfitting(lg, tlg, k["loss"], k["val_loss"])
        return ok, m, ["overfitting"], None

    def spikes_at(steps):
        def check(lg, tlg, r, tr, over):
            ok, m = truth.confirm_spikes_at(lg, tlg, keys(over)["loss"], steps)
            return ok, {**m, "spike_steps": steps}, ["periodic-spikes"], None
        return check

    def bottleneck(lg, tlg, r, tr, over):
        ok, m = truth.confirm_bottleneck(r.samples_per_s, tr.samples_per_s)
        return ok, m, ["input-bottleneck"], None

    W = dict(style="wandb", naming="wandb")
    M = dict(style="mlflow", naming="mlflow")
    P = dict(style="parquet", naming="plain")
    C = dict(style="csv", naming="plain")
    CW = dict(style="csv", naming="wandb")
    PM = dict(style="parquet", naming="mlflow")
    wine, digits = dict(data="wine"), dict(data="digits", batch_size=32, width=128, lr=1e-3)

    # --- task imbalance: the regression target left in raw units (an unscaled auxiliary loss). SGD with
    # momentum and the usual global grad-norm clip: the raw MSE's gradient fills the clipped step.
    sgd_clip = dict(opt="sgd", lr=0.05, momentum=0.9, clip=1.0)
    wine_sc = dict(wine, **sgd_clip, dropout=0.2, **CW)
    fault("multitask_wine_imbalance_raw_proline", "multitask_wine_twin_sgd_clip", wine_sc,
          "Wine cultivar + proline, SGD momentum lr 0.05, clip 1.0, dropout 0.2, proline standardised: the imbalance twin.",
          "unscaled_aux_loss", ["task-imbalance"], stalled,
          "Proline regressed in raw mg/L (MSE ~1e5) next to the cultivar cross-entropy (~1): the clipped step is "
          "all regression and the classification loss stalls.", dict(wine_sc, target="raw"))
    fault("multitask_wine_imbalance_proline_div10", "multitask_wine_twin_sgd_clip", wine_sc,
          "Wine cultivar + proline, SGD momentum lr 0.05, clip 1.0, dropout 0.2, proline standardised: the imbalance twin.",
          "unscaled_aux_loss", ["task-imbalance"], stalled,
          "Milder: proline in units of 10 mg/L (MSE ~1e3 at start) next to the cultivar cross-entropy.",
          dict(wine_sc, target="div10"))
    dig_sc = dict(digits, **sgd_clip, weight_decay=5e-4, **W)
    fault("multitask_digits_imbalance_raw_ink", "multitask_digits_twin_sgd_clip", dig_sc,
          "Digits class + total ink, SGD momentum lr 0.05, clip 1.0, weight decay 5e-4, ink standardised: the imbalance twin.",
          "unscaled_aux_loss", ["task-imbalance"], stalled,
          "Total ink regressed in raw pixel sums (MSE ~1e5) next to the digit cross-entropy: the digit task stalls.",
          dict(dig_sc, target="raw"))
    fault("multitask_digits_imbalance_ink_div10", "multitask_digits_twin_sgd_clip", dig_sc,
          "Digits class + total ink, SGD momentum lr 0.05, clip 1.0, weight decay 5e-4, ink standardised: the imbalance twin.",
          "unscaled_aux_loss", ["task-imbalance"], stalled,
          "Milder: total ink in units of 10 pixels (MSE ~1e3 at start) next to the digit cross-entropy.",
          dict(dig_sc, target="div10", style="csv"))

    # --- other causes
    wine_adam = dict(wine, **C)
    fault("multitask_wine_lr_too_high", "multitask_wine_twin_adam", wine_adam,
          "Wine multi-task MLP, Adam lr 3e-3, batch 16, standardised proline: the sane twin.",
          "lr_too_high", ["loss-oscillation"], osc,
          "Adam at lr 1.0 (~300x the twin's) on the wine multi-task MLP: the total loss stays far above the twin's and does not fall.",
          dict(wine_adam, lr=1.0))
    dig_adam = dict(digits, **M)
    fault("multitask_digits_lr_too_low", "multitask_digits_twin_adam", dig_adam,
          "Digits multi-task MLP, Adam lr 1e-3, batch 32, standardised ink: the sane twin.",
          "lr_too_low", ["slow-convergence"], slow,
          "Adam at lr 1e-5 (100x below the twin's): both task losses creep down.", dict(dig_adam, lr=1e-5))
    dig_sgd = dict(digits, opt="sgd", lr=0.02, momentum=0.9, **P)
    fault("multitask_digits_lr_spike_restart", "multitask_digits_twin_sgd", dig_sgd,
          "Digits multi-task MLP, SGD momentum lr 0.02, unclipped: the sane twin.",
          "lr_spike", ["nonfinite"], boom,
          "Unclipped SGD; a warm restart at step 150 multiplies the LR by 1000: the run blows up.",
          dict(dig_sgd, before_step=lr_spike(150, 1000.0), spike_at=150, spike_factor=1000))
    ns = dict(digits, shuffle=False, clip=1.0, batch_size=64, **C)
    per_epoch = 1400 // 64 + 1  # 22 batches; rows 640..703 are batch 10 of each epoch
    spike_steps = [float(e * per_epoch + 11) for e in range(0, 14) if e * per_epoch + 11 <= 300]
    fault("multitask_digits_bad_shard_noshuffle", "multitask_digits_twin_noshuffle", ns,
          "Digits multi-task MLP without shuffling, clean data, clip 1.0: the bad shard's twin.",
          "bad_shard", ["periodic-spikes"], spikes_at(spike_steps),
          "No shuffling; training rows 640..703 (batch 11 of every epoch) carry their ink target in other units (x100).",
          dict(ns, shard=(640, 704, 100.0)))
    ovf = dict(wine, n_train=30, width=512, steps=400, val_every=20, log_every=2, **PM)
    fault("multitask_wine_overfit_small_subset", "multitask_wine_twin_regularised",
          dict(ovf, opt="adamw", weight_decay=0.5, dropout=0.5),
          "The overfitting run's twin: the same 30 rows and 512-wide trunk with dropout 0.5 and AdamW weight decay 0.5.",
          "overfitting", ["overfitting"], overfit,
          "30 training rows, a 512-wide trunk, no weight decay, 400 steps: val total loss climbs while train falls.",
          ovf)
    fast = dict(wine, loader="fast", steps=200, **M)
    fault("multitask_wine_slow_loader", "multitask_wine_twin_fast_loader", fast,
          "Wine multi-task MLP through an in-memory DataLoader: the slow loader's twin.",
          "slow_loader", ["input-bottleneck"], bottleneck,
          "Each row takes 0.5 ms to arrive (slow storage, SlowIODataset) through a DataLoader with no workers.",
          dict(fast, loader="slow_io", delay_s=0.0005))

    # --- healthy variants
    healthy = [
        ("multitask_wine_warmup_cosine", dict(wine, lr=5e-3, schedule="warmup_cosine", **P), "Adam 5e-3, 10 % warm-up then cosine decay."),
        ("multitask_digits_step_decay", dict(digits, opt="sgd", lr=0.05, momentum=0.9, schedule="step", style="parquet", naming="wandb"),
         "SGD momentum 0.05 with step decay x0.3 every 100 steps."),
        ("multitask_wine_onecycle", dict(wine, opt="sgd", lr=0.05, momentum=0.9, schedule="onecycle", dropout=0.1, style="csv", naming="mlflow"),
         "One-cycle SGD to lr 0.05, dropout 0.1."),
        ("multitask_digits_early_stopping", dict(digits, early_stop=True, steps=400, **C),
         "Adam with early stopping (patience 3 epochs on the val total)."),
        ("multitask_wine_rare_val", dict(wine, val_every=100, log_every=2, **CW), "Logs every 2nd step, val total every 100."),
        ("multitask_digits_tiny_batch", dict(digits, batch_size=4, lr=2e-4, steps=400, log_every=2, **PM),
         "Batch 4 with Adam lr 2e-4."),
        ("multitask_digits_weighted_tasks", dict(digits, cls_weight=1.0, reg_weight=20.0, dropout=0.1, **P),
         "Sensible loss weights (standardised ink MSE x20, dropout 0.1): the logged weighted task terms differ by ~3x, a balance "
         "the user chose, not an imbalance."),
    ]
    for name, over, desc in healthy:
        if only is not None and name not in only:
            continue
        record_plain(name, over, "healthy", desc)
        if name == "multitask_digits_weighted_tasks":
            lg = runs[name][1]
            _, fc = lg.get(task_key(over, "cls"))
            _, fr = lg.get(task_key(over, "ink"))
            out[-1]["truth"]["ratio_of_task_losses_median"] = float(np.median(np.maximum(fr, fc) / np.minimum(fr, fc)))
    return out
