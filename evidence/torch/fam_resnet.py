"""The resnet family: a small residual CNN with BatchNorm on scikit-learn's 8x8 digits.

A stem convolution (1->32) with BatchNorm and ReLU, three basic residual blocks (conv-BN-ReLU-conv-BN plus
the skip; the third halves the resolution and doubles the width with a 1x1 projection), global average
pooling and a linear head, named as torchvision names a ResNet (``conv1``, ``layer1``, ``layer2``, ``fc``).
Training images get the usual random-shift augmentation (pad one pixel, crop back to 8x8) unless a run turns
it off. The cnn family sees the same digits through a plain convnet without normalisation or augmentation.

Added after the seqcls family and built blind to the detectors: settings are what a practitioner would
configure, and every fault run has a twin with the one setting put right (same seed and data); the label
is what :mod:`.truth` confirms against it. Scored once, held out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

from . import truth
from .common import (NAMES, corrupt_nan_at, cross_entropy_val_fn, early_stopping, fit, lr_spike, make_optimizer,
                     make_scheduler, oversized_images_at, seed_all, shrink_init)
from .family_runs import FamilyRuns, batches_for, describe_injections
from .sinks import open_run

FAMILY = "resnet"
SEED = 23
DATASET = "sklearn.load_digits"
N_TRAIN = 1400


def digits(seed: int, n_train: int | None = None, label_noise: float = 0.0, bad_shard: tuple[int, int] | None = None):
    """Seeded 1400/397 split as (n, 1, 8, 8) images, standardised with the training split's statistics;
    ``label_noise`` re-draws that fraction of the training labels uniformly, ``bad_shard`` [lo, hi) shifts
    the labels of a contiguous block of training rows by 5 (a shard written with the wrong label map).
    Validation stays clean."""
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:N_TRAIN], order[N_TRAIN:]
    if n_train is not None:
        tr = tr[:n_train]
    x = x.astype(np.float32)
    mu, sd = x[tr].mean(), x[tr].std()
    x = ((x - mu) / sd).reshape(-1, 1, 8, 8)
    yt = y[tr].copy()
    if label_noise:
        rng = np.random.default_rng(seed + 1)
        flip = rng.permutation(len(tr))[: int(round(label_noise * len(tr)))]
        yt[flip] = rng.integers(0, 10, len(flip))
    if bad_shard is not None:
        lo, hi = bad_shard
        yt[lo:hi] = (yt[lo:hi] + 5) % 10
    f = lambda a: torch.tensor(a, dtype=torch.float32)
    i = lambda a: torch.tensor(a, dtype=torch.long)
    return f(x[tr]), i(yt), f(x[va]), i(y[va])


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN plus the identity (or a 1x1 conv + BN projection when the shape changes), then ReLU."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class SmallResNet(nn.Module):
    def __init__(self, width: int = 32, dropout: float = 0.0):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = nn.Sequential(BasicBlock(width, width), BasicBlock(width, width))
        self.layer2 = nn.Sequential(BasicBlock(width, 2 * width, stride=2))
        self.drop = nn.Dropout(dropout)
        self.fc = nn.Linear(2 * width, 10)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.layer2(self.layer1(h))
        return self.fc(self.drop(h.mean((2, 3))))


BASE = {"optimizer": "adam", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "width": 32, "dropout": 0.0, "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0,
        "clip": None, "augment": "shift1", "max_steps": 400, "n_train": None, "label_noise": 0.0, "early_stop": None}
# Stem, first block, last block, head: model order (and name order puts conv1 first, as the recheck expects).
LAYERS = ("conv1.weight", "layer1.0.conv1.weight", "layer2.0.conv2.weight", "fc.weight")
SGD = {"optimizer": "sgd", "lr": 0.05, "weight_decay": 5e-4}


def _model(cfg: dict) -> SmallResNet:
    seed_all(cfg["seed"])
    return shrink_init(SmallResNet(cfg["width"], cfg["dropout"]), cfg["init"])


def shift_augment(batches, seed: int, background: float):
    """Random-shift augmentation (the CIFAR recipe's pad-and-crop): each training image is padded by one pixel of
    background and cropped back to 8x8 at a random offset (up to one pixel each way); seeded per epoch."""
    def augmented(epoch):
        g = torch.Generator().manual_seed(seed * 7919 + epoch)
        for x, y in batches(epoch):
            n = len(x)
            padded = torch.nn.functional.pad(x, (1, 1, 1, 1), value=background)
            dy, dx = torch.randint(0, 3, (n,), generator=g).tolist(), torch.randint(0, 3, (n,), generator=g).tolist()
            yield torch.stack([padded[i, :, dy[i]:dy[i] + 8, dx[i]:dx[i] + 8] for i in range(n)]), y
    return augmented


class _Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, cfg: dict, *, before_step=None, corrupt=None,
              bad_shard: tuple[int, int] | None = None, val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **cfg}
        xt, yt, xv, yv = digits(cfg["seed"], cfg["n_train"], cfg["label_noise"], bad_shard)
        model = _model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for(xt, yt, cfg, default_delay_s=0.0005)
        if cfg["augment"] == "shift1":
            batches = shift_augment(batches, cfg["seed"], float(xt.min()))
        if corrupt is not None:
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
        val_fn = cross_entropy_val_fn(model, xv, yv)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged_cfg = dict(cfg, model=f"resnet8-w{cfg['width']}-bn", dataset=DATASET, n_train=len(xt))
        describe_injections(logged_cfg, corrupt=corrupt, before_step=before_step, bad_shard_rows=bad_shard)
        log = open_run(style, self.root, name, logged_cfg)
        res = fit(model, batches, lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]), opt, log,
                  epochs=10_000, naming=naming, scheduler=make_scheduler(opt, cfg), val_fn=val_fn, val_every=val_every,
                  log_every=log_every, layer_grads=LAYERS, clip=cfg["clip"], before_step=before_step,
                  max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged_cfg


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda *n: True) if only is None else (lambda *n: any(x in only for x in n))
    L = NAMES
    key, val_key, grad_key = L["wandb"]["loss"], L["wandb"]["val_loss"], L["wandb"]["grad_norm"]

    def twin_run(name, style, cfg, description, **kw):
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        runs.add(name, style, f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
                 description=description)

    twin_run("resnet_twin_adam", "wandb", {}, "Small ResNet with BatchNorm, Adam 1e-3, batch 32: the sane twin.")
    twin_run("resnet_twin_sgd", "mlflow", SGD,
             "Small ResNet with BatchNorm, SGD momentum 0.9 lr 0.05, weight decay 5e-4, batch 32: the SGD faults' twin.")

    def fault(name, cause, intended, cfg, check, description, style="wandb", twin_name="resnet_twin_adam", **kw):
        # Metric names as the twins log them (W&B's), whatever the file format: the truth compares like with like.
        if not want(name):
            return
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        twin = runs.taps[twin_name]
        ok, measures = check(runs.taps[name], twin, name, twin_name)
        got, also, measures = truth.labels_from_check(intended, ok, measures, runs.taps[name], twin, key)
        extra = {"also_acceptable": also} if also else {}
        runs.add(name, style, f, c, faults=got, intended=intended, cause=cause, twin=twin_name,
                 truth_measures=measures, description=description, **extra)

    osc = lambda tap, twin, *_: truth.confirm_oscillation(tap, twin, key)
    slow = lambda tap, twin, *_: truth.confirm_slow(tap, twin, key)
    boom = lambda tap, twin, *_: truth.confirm_explosion(tap, twin, grad_key, key)
    fault("resnet_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 2.0}, osc,
          "SGD momentum 0.9 at lr 2 (40x the twin's 0.05), weight decay 5e-4.", style="csv", twin_name="resnet_twin_sgd")
    fault("resnet_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 0.3}, osc,
          "Adam at lr 0.3 (300x the twin's).", style="parquet")
    fault("resnet_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.05}, osc,
          "Batch 2 (BatchNorm statistics over two images) with Adam lr 0.05.", style="mlflow")
    fault("resnet_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          "Adam lr 1e-5 (100x below the twin).", style="csv")
    fault("resnet_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    fault("resnet_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          "Every weight (BatchNorm scales included) multiplied by 1e-3 at init, SGD momentum lr 0.05.",
          style="parquet", twin_name="resnet_twin_sgd")
    fault("resnet_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          "SGD momentum lr 0.05; at step 200 a restart sets the LR 1000x (50).", style="wandb",
          twin_name="resnet_twin_sgd", before_step=lr_spike(200, 1000))
    fault("resnet_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          "Adam 1e-3; one pixel of one image in the batch at step 250 is NaN.", style="mlflow",
          corrupt=corrupt_nan_at(250))

    # Bad shard without shuffling: rows 640..703 carry labels shifted by 5 and, unshuffled, are batches 21-22
    # of every 44-batch epoch. Its twin is the same unshuffled run on clean labels.
    per_epoch = -(-N_TRAIN // BASE["batch_size"])
    shard_steps = [float(ep * per_epoch + k + 1) for ep in range(2, 10) for k in (20, 21)
                   if ep * per_epoch + k + 1 <= BASE["max_steps"]]
    if want("resnet_bad_shard_noshuffle", "resnet_twin_noshuffle"):
        twin_run("resnet_twin_noshuffle", "csv", {"shuffle": False},
                 "Adam 1e-3, no shuffling, clean labels: the bad-shard run's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, shard_steps)
            return ok, {**m, "spike_steps": shard_steps}

        fault("resnet_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], {"shuffle": False}, spikes,
              "No shuffling; training rows 640..703 have wrong labels (digit + 5), met at batches 21-22 of every epoch.",
              style="parquet", twin_name="resnet_twin_noshuffle", bad_shard=(640, 704))

    # One oversized batch: unshuffled, batch 30 of every epoch arrives at 16x16 instead of 8x8 (a shard exported at
    # twice the resolution; global average pooling accepts it). Its twin is the same unshuffled run. Added after
    # every threshold was set, to be scored once before any change informed by it.
    big_index = 30
    big_steps = [float(ep * per_epoch + big_index + 1) for ep in range(2, 10)
                 if ep * per_epoch + big_index + 1 <= BASE["max_steps"]]
    if want("resnet_oversized_images_noshuffle"):
        if "resnet_twin_noshuffle" not in runs.taps:
            twin_run("resnet_twin_noshuffle", "csv", {"shuffle": False},
                     "Adam 1e-3, no shuffling, clean labels: the bad-shard run's twin.")

        def big_spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, big_steps)
            return ok, {**m, "spike_steps": big_steps}

        fault("resnet_oversized_images_noshuffle", "oversized_batch", ["periodic-spikes"], {"shuffle": False}, big_spikes,
              "No shuffling; batch 30 of every epoch holds its 32 digits at 16x16 (twice the size the rest arrive at).",
              style="wandb", twin_name="resnet_twin_noshuffle", corrupt=oversized_images_at(big_index))

    # Slow loader: the same DataLoader, each image taking 1 ms to arrive (network storage, no workers).
    if want("resnet_slow_loader", "resnet_twin_fast_loader"):
        twin_run("resnet_twin_fast_loader", "mlflow", {"loader": "fast", "max_steps": 300},
                 "Adam 1e-3 through an in-memory DataLoader (no workers): the slow loader's twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("resnet_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.001, "max_steps": 300}, bottleneck,
              "Each image takes 1 ms to arrive (SlowIODataset) through a DataLoader with no workers.",
              style="csv", twin_name="resnet_twin_fast_loader")

    # Overfitting: 100 training digits, a twice-as-wide ResNet, 600 steps; its twin adds weight decay and dropout.
    small = {"n_train": 100, "width": 64, "max_steps": 600, "augment": None}
    if want("resnet_overfit_small_subset", "resnet_twin_overfit_reg"):
        twin_run("resnet_twin_overfit_reg", "csv", {**small, "optimizer": "adamw", "weight_decay": 0.1, "dropout": 0.5,
                                                     "augment": "shift1"},
                 "100 training digits, width-64 ResNet, random-shift augmentation, AdamW weight decay 0.1 and dropout 0.5: "
                 "the overfitting run's twin.",
                 log_every=2)
        fault("resnet_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              "100 training digits, a width-64 ResNet, Adam 1e-3 for 600 steps, no augmentation, weight decay or dropout.", style="mlflow",
              twin_name="resnet_twin_overfit_reg", log_every=2)

    healthy = [
        ("resnet_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 3e-3}, {},
         "Adam 3e-3, a tenth of warm-up then cosine decay."),
        ("resnet_step_decay_sgd", "mlflow", "mlflow", {**SGD, "lr": 0.1, "schedule": "step"}, {},
         "SGD momentum lr 0.1, weight decay 5e-4, step decay x0.3 every third of the run."),
        ("resnet_sgdr_restarts", "wandb", "wandb", {**SGD, "schedule": "sgdr"}, {},
         "SGD momentum lr 0.05 with cosine warm restarts every 100 steps."),
        ("resnet_onecycle_sgd", "parquet", "plain", {**SGD, "lr": 0.2, "schedule": "onecycle"}, {},
         "SGD momentum with a one-cycle LR peaking at 0.2."),
        ("resnet_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 3e-4}, {},
         "Batch 4 with Adam lr 3e-4."),
        ("resnet_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "Adam 1e-3; logs every 3rd step and validates every 100."),
        ("resnet_converged_idle", "wandb", "plain", {"max_steps": 900}, {"log_every": 3},
         "Adam 1e-3 for 900 steps: learns the digits in a few hundred, then idles."),
        ("resnet_early_stopping", "mlflow", "wandb", {"max_steps": 2000, "early_stop": 3}, {"log_every": 3},
         "Adam 1e-3 with early stopping (patience 3 epochs on the val loss), at most 2000 steps."),
        ("resnet_label_noise", "mlflow", "mlflow", {"label_noise": 0.3}, {},
         "30 % of the training labels re-drawn at random: a high plateau."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, cfg, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={}, description=desc)
    return runs.entries
