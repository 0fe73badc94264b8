"""The mixup family: a small CNN on scikit-learn's digits trained with mixup and label smoothing.

Every other family trains on its plain loss, so its train loss sits at or below its val loss. Here, as in
most modern image recipes (timm, DeiT, MAE fine-tuning), the optimised loss is regularised: each training
batch is mixed with a shuffled copy of itself (``x = lam * x + (1 - lam) * x[perm]``, ``lam ~ Beta(alpha,
alpha)``, the loss the same mix of the two labels' cross-entropies) and the targets are label-smoothed. The
train loss then sits *above* the val loss, which is plain cross-entropy on clean images: the shape of public
log P198 (a DeiT-style fine-tune whose test loss rose while its mixup train loss stayed above it).

The CNN: conv3x3 1->32, ReLU, conv3x3 32->64, ReLU, 2x2 max-pool, dropout, a 1024->128 linear, ReLU, dropout,
a 128->10 head; named ``conv1``, ``conv2``, ``fc1``, ``fc2``. Digits are standardised with the training split's
statistics (the resnet family's seeded 1400/397 split).

Added as a family held out from every threshold chosen before it was trained, built blind to the detectors:
settings are a practitioner's, every fault run has a twin with the one setting put right (same seed and data),
and the label is what :mod:`.truth` confirms against it. Its first score is reported as measured.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from . import truth
from .common import (NAMES, cross_entropy_val_fn, early_stopping, fit, lr_spike, make_optimizer, make_scheduler,
                     seed_all, shrink_init)
from .fam_resnet import digits
from .family_runs import FamilyRuns, batches_for, describe_injections
from .sinks import open_run

FAMILY = "mixup"
SEED = 53
DATASET = "sklearn.load_digits"


class SmallCNN(nn.Module):
    def __init__(self, width: int = 32, hidden: int = 128, dropout: float = 0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.drop = nn.Dropout(dropout)
        self.fc1 = nn.Linear(2 * width * 16, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.conv2(torch.relu(self.conv1(x)))), 2)
        h = self.drop(torch.relu(self.fc1(self.drop(h.flatten(1)))))
        return self.fc2(h)


BASE = {"optimizer": "adamw", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.01, "init": "default",
        "width": 32, "hidden": 128, "dropout": 0.1, "schedule": "constant", "shuffle": True, "loader": "memory",
        "num_workers": 0, "clip": None, "max_steps": 500, "n_train": None, "label_noise": 0.0, "early_stop": None,
        "mixup_alpha": 0.4, "label_smoothing": 0.1}
LAYERS = ("conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight")


def _model(cfg: dict) -> SmallCNN:
    seed_all(cfg["seed"])
    return shrink_init(SmallCNN(cfg["width"], cfg["hidden"], cfg["dropout"]), cfg["init"])


def mixed(batches, seed: int, alpha: float):
    """Mixup: each batch becomes (mixed images, labels, the shuffled labels, lam); seeded per epoch. alpha 0: no mix
    (lam 1, the batch itself)."""
    def mixing(epoch):
        rng = np.random.default_rng(seed * 7919 + epoch)
        for x, y in batches(epoch):
            if alpha <= 0:
                yield x, y, y, 1.0
                continue
            lam = float(rng.beta(alpha, alpha))
            perm = torch.from_numpy(rng.permutation(len(x)))
            yield lam * x + (1 - lam) * x[perm], y, y[perm], lam
    return mixing


def mixup_loss(smoothing: float):
    def loss(model, batch):
        x, y, y2, lam = batch
        out = model(x)
        return (lam * F.cross_entropy(out, y, label_smoothing=smoothing)
                + (1 - lam) * F.cross_entropy(out, y2, label_smoothing=smoothing))
    return loss


class _Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, cfg: dict, *, before_step=None, val_every: int = 20,
              log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **cfg}
        xt, yt, xv, yv = digits(cfg["seed"], cfg["n_train"], cfg["label_noise"])
        model = _model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        val_fn = cross_entropy_val_fn(model, xv, yv)
        batches = batches_for(xt, yt, cfg, default_delay_s=0.0005)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        batches = mixed(batches, cfg["seed"], cfg["mixup_alpha"])
        logged_cfg = dict(cfg, model=f"cnn2-w{cfg['width']}-h{cfg['hidden']}", dataset=DATASET, n_train=len(xt))
        describe_injections(logged_cfg, before_step=before_step)
        log = open_run(style, self.root, name, logged_cfg)
        res = fit(model, batches, mixup_loss(cfg["label_smoothing"]), opt, log, epochs=10_000, naming=naming,
                  scheduler=make_scheduler(opt, cfg), val_fn=val_fn, val_every=val_every, log_every=log_every,
                  layer_grads=LAYERS, clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged_cfg


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda *n: True) if only is None else (lambda *n: any(x in only for x in n))
    L = NAMES
    key, val_key, grad_key = L["wandb"]["loss"], L["wandb"]["val_loss"], L["wandb"]["grad_norm"]

    def twin_run(name, style, cfg, description, **kw):
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        runs.add_unlabelled(name, style, f, c, cause="twin", description=description)

    twin_run("mixup_twin_adamw", "wandb", {},
             "Small CNN, mixup alpha 0.4 and label smoothing 0.1, AdamW 1e-3 (weight decay 0.01), dropout 0.1, batch 32: "
             "the sane twin.")

    def fault(name, cause, intended, cfg, check, description, style="wandb", twin_name="mixup_twin_adamw", **kw):
        # Metric names as the twins log them (W&B's), whatever the file format: the truth compares like with like.
        if not want(name):
            return
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        ok, measures = check(runs.taps[name], runs.taps[twin_name])
        runs.add_checked(name, style, f, c, intended=intended, ok=ok, measures=measures, cause=cause, twin=twin_name,
                         loss_key=key, description=description)

    osc = lambda tap, twin: truth.confirm_oscillation(tap, twin, key)
    slow = lambda tap, twin: truth.confirm_slow(tap, twin, key)
    boom = lambda tap, twin: truth.confirm_explosion(tap, twin, grad_key, key)
    overfit = lambda tap, twin: truth.confirm_overfitting(tap, twin, key, val_key)
    fault("mixup_lr_too_high_adamw", "lr_too_high", ["loss-oscillation"], {"lr": 0.1}, osc,
          "AdamW at lr 0.1 (100x the twin's), mixup and label smoothing as the twin.", style="csv")
    fault("mixup_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          "AdamW lr 1e-5 (100x below the twin).", style="mlflow")
    # Changed after its truth check: at lr 0.01 batch 2 still learned (ended 1.5x the twin, swings no larger);
    # lr 0.03 is the one change.
    fault("mixup_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.03}, osc,
          "Batch 2 with AdamW lr 0.03.", style="parquet")
    fault("mixup_lr_spike_restart", "lr_spike", ["nonfinite"], {}, boom,
          "AdamW 1e-3; at step 250 a restart sets the LR 1000x (1.0).", style="wandb", before_step=lr_spike(250, 1000))

    # Overfitting: 120 training digits, a wide CNN and no weight decay or dropout, 900 steps; mixup (or label
    # smoothing alone) still on, so the train loss stays above the val loss. Each twin adds weight decay and
    # dropout to the same recipe.
    small = {"n_train": 120, "width": 64, "hidden": 256, "max_steps": 900, "dropout": 0.0, "weight_decay": 0.0}
    regularised = {"weight_decay": 0.3, "dropout": 0.5}
    # Changed after its truth check: on 120 digits for 900 steps mixup alone regularised as well as the twin's
    # weight decay and dropout (val 2.4 % apart); 50 digits for 1500 steps (run and twin alike) is the one change.
    tiny = {**small, "n_train": 50, "max_steps": 1500}
    if want("mixup_overfit_small_subset", "mixup_twin_overfit_reg"):
        twin_run("mixup_twin_overfit_reg", "csv", {**tiny, **regularised},
                 "50 training digits, a wide CNN, mixup 0.4 and label smoothing 0.1, AdamW weight decay 0.3 and dropout "
                 "0.5: the overfitting run's twin.", log_every=2)
        fault("mixup_overfit_small_subset", "overfitting", ["overfitting"], tiny, overfit,
              "50 training digits, a wide CNN, mixup 0.4 and label smoothing 0.1, no weight decay or dropout, 1500 steps.",
              style="mlflow", twin_name="mixup_twin_overfit_reg", log_every=2)
    smoothing_only = {**small, "mixup_alpha": 0.0, "label_smoothing": 0.2}
    if want("mixup_overfit_label_smoothing", "mixup_twin_smoothing_reg"):
        twin_run("mixup_twin_smoothing_reg", "parquet", {**smoothing_only, **regularised},
                 "120 training digits, a wide CNN, label smoothing 0.2 without mixup, AdamW weight decay 0.3 and dropout "
                 "0.5: the label-smoothing overfitting run's twin.", log_every=2)
        fault("mixup_overfit_label_smoothing", "overfitting", ["overfitting"], smoothing_only, overfit,
              "120 training digits, a wide CNN, label smoothing 0.2 (no mixup), no weight decay or dropout, 900 steps.",
              style="wandb", twin_name="mixup_twin_smoothing_reg", log_every=2)

    healthy = [
        ("mixup_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 3e-3}, {},
         "AdamW 3e-3, a tenth of warm-up then cosine decay."),
        ("mixup_step_decay_sgd", "mlflow", "mlflow", {"optimizer": "sgd", "lr": 0.05, "weight_decay": 5e-4,
                                                      "schedule": "step"}, {},
         "SGD momentum lr 0.05, weight decay 5e-4, step decay x0.3 every third of the run."),
        ("mixup_onecycle", "parquet", "plain", {"schedule": "onecycle", "lr": 5e-3}, {}, "AdamW with a one-cycle LR peaking at 5e-3."),
        ("mixup_heavy_alpha", "wandb", "wandb", {"mixup_alpha": 1.0}, {},
         "Mixup alpha 1.0 (lam uniform): a high, noisy train loss far above the val loss."),
        ("mixup_smoothing_only", "mlflow", "wandb", {"mixup_alpha": 0.0, "label_smoothing": 0.2}, {},
         "Label smoothing 0.2 without mixup: the train loss floors at the smoothed targets' entropy."),
        ("mixup_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "Logs every 3rd step and validates every 100."),
        ("mixup_early_stopping", "wandb", "plain", {"max_steps": 2000, "early_stop": 3}, {"log_every": 3},
         "Early stopping (patience 3 epochs on the val loss), at most 2000 steps."),
        ("mixup_long_converged", "parquet", "mlflow", {"max_steps": 1200}, {"log_every": 3},
         "1200 steps: learns the digits in a few hundred, then idles under mixup's noise."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, cfg, **kw)
            runs.add_unlabelled(name, style, f, c, cause="healthy", description=desc)
    return runs.entries
