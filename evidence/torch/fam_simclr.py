"""The simclr family: contrastive self-supervised learning (SimCLR-style) on scikit-learn's 8x8 digits.

Each digit (pixels scaled to [0, 1], seeded 1400/397 split) is seen twice per batch through two independent random
augmentations: a shift by up to one pixel each way (zero padding), Gaussian pixel noise (std 0.1) and, with
probability one half, a 2x2 patch erased to zero. A small convnet encoder (conv 1->16, conv 16->32, ReLU, global
average pool) feeds a projection head (32->32->16); the loss is NT-Xent (InfoNCE) at temperature 0.5 over the
2N views of a batch of N = 64 digits, so it starts near ln(2N - 1) = 4.84 and falls as the views of one digit are
told apart from the others. Validation is the same NT-Xent on the 397 held-out digits, viewed through augmentations
drawn once from a fixed seed, in batches of 64. Parameter names put the layer nearest the input first
(``encoder.0`` before ``head.*``).

Built blind to the detectors: settings are what a practitioner would configure, and every fault run has a twin
with the one setting put right (same seed and data); the label is what :mod:`.truth` confirms against it.
The projection head carries a BatchNorm (as SimCLR's does): without it SGD collapsed every view onto one point
(loss ln 127 from the first step) at every LR tried, so the SGD twin could not be sane. Four runs were changed once
each after seeing the truth (see the comments at each): both LR-too-high runs and init too small moved, with twins of
their own, to temperature 0.1 (at 0.5 the loss cannot end 1.5x above a twin; both LR-too-high runs stay
unconfirmed there too), and LR too low went from 1e-5 to 1e-4. Batch too small, the LR spike and the bad shard are
unconfirmed and were not changed (the comments say why no single setting could confirm them): kept, not scored.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

from . import truth
from .common import (NAMES, corrupt_nan_at, early_stopping, fit, lr_spike, make_optimizer, make_scheduler,
                     seed_all, shrink_init)
from .integrations import lightning_module, lightning_run
from .family_runs import FamilyRuns, batches_for, describe_injections
from .sinks import open_run

FAMILY = "simclr"
SEED = 37
DATASET = "sklearn.load_digits"
N_TRAIN = 1400


def digits(seed: int, n_train: int | None = None, bad_shard: tuple[int, int] | None = None):
    """Seeded 1400/397 split as (n, 1, 8, 8) images in [0, 1] (raw 0..16 divided by 16). ``bad_shard`` [lo, hi)
    replaces a contiguous block of training rows by uniform noise images (a shard that was never digits).
    Validation stays clean."""
    x, _ = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:N_TRAIN], order[N_TRAIN:]
    if n_train is not None:
        tr = tr[:n_train]
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    xt = x[tr].copy()
    if bad_shard is not None:
        lo, hi = bad_shard
        xt[lo:hi] = np.random.default_rng(seed + 2).random((hi - lo, 1, 8, 8), dtype=np.float32)
    return torch.tensor(xt), torch.tensor(x[va])


def augment(x: torch.Tensor, g: torch.Generator | None, shift: bool = True, erase: bool = True,
            noise: float = 0.1) -> torch.Tensor:
    """One random view of each image of (N, 1, 8, 8): shift by up to one pixel each way with zero padding, a 2x2
    patch erased with probability 0.5, Gaussian pixel noise of std ``noise``."""
    n = len(x)
    ar = torch.arange(8)
    if shift:
        padded = nn.functional.pad(x, (1, 1, 1, 1))
        dy, dx = torch.randint(0, 3, (n,), generator=g), torch.randint(0, 3, (n,), generator=g)
        rows, cols = dy[:, None] + ar, dx[:, None] + ar
        x = padded[torch.arange(n)[:, None, None], 0, rows[:, :, None], cols[:, None, :]].unsqueeze(1)
    if erase:
        ey, ex = torch.randint(0, 7, (n,), generator=g), torch.randint(0, 7, (n,), generator=g)
        on = torch.rand(n, generator=g) < 0.5
        r = (ar[None, :] >= ey[:, None]) & (ar[None, :] < ey[:, None] + 2)
        c = (ar[None, :] >= ex[:, None]) & (ar[None, :] < ex[:, None] + 2)
        patch = r[:, :, None] & c[:, None, :] & on[:, None, None]
        x = x.masked_fill(patch.unsqueeze(1), 0.0)
    if noise:
        x = x + noise * torch.randn(x.shape, generator=g)
    return x


def two_views(batches, seed: int, aug: dict):
    """``batches(epoch)`` of (view_a, view_b): two independent augmentations of each image, seeded per epoch."""
    def views(epoch):
        g = torch.Generator().manual_seed(seed * 7919 + epoch)
        for x, _ in batches(epoch):
            yield augment(x, g, **aug), augment(x, g, **aug)
    return views


def nt_xent(z: torch.Tensor, temperature: float) -> torch.Tensor:
    """NT-Xent over 2N projections (the first N views, then their N partners): each view's positive is its partner,
    the other 2N - 2 views are its negatives; cosine similarity over ``temperature``."""
    n = len(z) // 2
    z = nn.functional.normalize(z, dim=1)
    sim = z @ z.T / temperature
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return nn.functional.cross_entropy(sim, target)


class ConvEncoder(nn.Module):
    """conv3x3 1->w/2, ReLU, conv3x3 w/2->w, ReLU, global average pool; projection head w -> w -> 16."""

    def __init__(self, width: int = 32, proj: int = 16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, width // 2, 3, 1, 1), nn.ReLU(), nn.Conv2d(width // 2, width, 3, 1, 1), nn.ReLU())
        # SimCLR's projection head: Linear-BN-ReLU-Linear (head.1 is the BatchNorm).
        self.head = nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Linear(width, proj))

    def forward(self, x):
        return self.head(self.encoder(x).mean((2, 3)))


ACTS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid}


class MLPEncoder(nn.Module):
    """A deep fully connected encoder on the flattened digit (``depth`` Linear layers of ``hidden`` units, the
    activation after each, no residuals), then the same projection head."""

    def __init__(self, depth: int = 12, hidden: int = 64, activation: str = "sigmoid", init: str = "default", proj: int = 16):
        super().__init__()
        layers = []
        for i in range(depth):
            layers += [nn.Linear(64 if i == 0 else hidden, hidden), ACTS[activation]()]
        self.encoder = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, proj))
        if init == "he":
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.head(self.encoder(x.flatten(1)))


BASE = {"optimizer": "adam", "lr": 1e-3, "eps": 1e-8, "batch_size": 64, "weight_decay": 0.0, "init": "default",
        "encoder": "conv", "width": 32, "activation": "relu", "depth": 12, "temperature": 0.5, "augment": "full",
        "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0, "clip": None, "max_steps": 400,
        "n_train": None, "early_stop": None}
# SGD with momentum 0.9 for the SGD faults and variants (lr chosen by a short sweep of the twin alone).
SGD = {"optimizer": "sgd", "lr": 0.1}
AUGS = {"full": {}, "noise_only": {"shift": False, "erase": False}}
VAL_SEED = 4242


def model_name(cfg: dict) -> str:
    if cfg["encoder"] == "mlp":
        return f"simclr-mlp{cfg['depth']}x64-{cfg['activation']}"
    return f"simclr-conv-w{cfg['width']}"


def _layers(cfg: dict) -> tuple[str, ...]:
    """Input layer, last encoder layer, both head Linear layers (model order)."""
    if cfg["encoder"] == "mlp":
        return ("encoder.0.weight", f"encoder.{2 * (cfg['depth'] - 1)}.weight", "head.0.weight", "head.2.weight")
    return ("encoder.0.weight", "encoder.2.weight", "head.0.weight", "head.3.weight")


def _model(cfg: dict) -> nn.Module:
    seed_all(cfg["seed"])
    if cfg["encoder"] == "mlp":
        init = "he" if cfg["init"] == "he" else "default"
        model = MLPEncoder(cfg["depth"], 64, cfg["activation"], init)
    else:
        model = ConvEncoder(cfg["width"])
    return shrink_init(model, cfg["init"])


def _val_views(xv: torch.Tensor, aug: dict):
    g = torch.Generator().manual_seed(VAL_SEED)
    return augment(xv, g, **aug), augment(xv, g, **aug)


def _val_loss_fn(model: nn.Module, xv: torch.Tensor, temperature: float, batch_size: int = 64):
    """NT-Xent on the held-out digits' fixed views, in batches of 64 (the training batch), averaged over the digits
    (the last, short batch weighted by its size)."""
    va, vb = _val_views(xv, {})

    def fn() -> float:
        model.eval()
        total = 0.0
        with torch.no_grad():
            for i in range(0, len(xv), batch_size):
                a, b = va[i:i + batch_size], vb[i:i + batch_size]
                total += nt_xent(model(torch.cat([a, b])), temperature).item() * len(a)
        model.train()
        return total / len(xv)
    return fn


def _loss_fn(temperature: float):
    def fn(model, batch):
        a, b = batch
        return nt_xent(model(torch.cat([a, b])), temperature)
    return fn


class _Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, cfg: dict, *, before_step=None, corrupt=None,
              bad_shard: tuple[int, int] | None = None, val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **cfg}
        xt, xv = digits(cfg["seed"], cfg["n_train"], bad_shard)
        idx = torch.arange(len(xt))
        model = _model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for(xt, idx, cfg, default_delay_s=0.0005)
        if corrupt is not None:  # the corrupt record is in the stored digit, so both of its views carry it
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
        batches = two_views(batches, cfg["seed"], AUGS[cfg["augment"]])
        val_fn = _val_loss_fn(model, xv, cfg["temperature"])
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged_cfg = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(xt), loss="nt_xent")
        describe_injections(logged_cfg, corrupt=corrupt, before_step=before_step, bad_shard_rows=bad_shard)
        log = open_run(style, self.root, name, logged_cfg)
        res = fit(model, batches, _loss_fn(cfg["temperature"]), opt, log,
                  epochs=10_000, naming=naming, scheduler=make_scheduler(opt, cfg), val_fn=val_fn, val_every=val_every,
                  log_every=log_every, layer_grads=_layers(cfg), clip=cfg["clip"], before_step=before_step,
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

    twin_run("simclr_twin_adam", "wandb", {},
             "SimCLR convnet (conv 1-16-32, pool, head 32-32-16), NT-Xent at temperature 0.5, Adam 1e-3, batch 64: the sane twin.")
    twin_run("simclr_twin_sgd", "mlflow", SGD,
             f"The same SimCLR convnet, SGD momentum 0.9 lr {SGD['lr']:g}, batch 64: the SGD faults' twin.")

    def fault(name, cause, intended, cfg, check, description, style="wandb", twin_name="simclr_twin_adam", **kw):
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
    # Changed once after seeing the truth: at temperature 0.5 NT-Xent over 128 views lies between ~2.9 (every view
    # told apart) and ln 127 = 4.84 (collapsed), and the twins end at ~3.46, so no run can end 1.5x above them. First
    # Adam lr 0.3 (ended 1.03x above the twin, swing 1.09x, fell 22 %) and SGD lr 20 (1.12x, swing 1.43x, fell 15 %);
    # then both LR-too-high runs at temperature 0.1 against twins at temperature 0.1 (the same recipe otherwise). Still
    # unconfirmed: Adam lr 0.3 ended 1.12x above its twin (swing 0.87x, fell 57 %: the BatchNorm head keeps it
    # learning), SGD lr 20 ended 1.95x above its twin but steadier (swing 0.20x) and fell 21 %. Kept, not scored.
    T01 = {"temperature": 0.1}
    if want("simclr_lr_too_high_adam", "simclr_twin_adam_t01"):
        twin_run("simclr_twin_adam_t01", "parquet", T01,
                 "The SimCLR convnet at NT-Xent temperature 0.1, Adam 1e-3, batch 64: the LR-too-high Adam run's twin.")
        fault("simclr_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {**T01, "lr": 0.3}, osc,
              "Adam at lr 0.3 (300x the twin's), NT-Xent temperature 0.1.", style="parquet", twin_name="simclr_twin_adam_t01")
    need_sgd_t01 = want("simclr_lr_too_high_sgd", "simclr_init_too_small", "simclr_twin_sgd_t01")
    if need_sgd_t01:
        twin_run("simclr_twin_sgd_t01", "parquet", {**SGD, **T01},
                 f"The SimCLR convnet at NT-Xent temperature 0.1, SGD momentum 0.9 lr {SGD['lr']:g}: the twin of the SGD "
                 "LR-too-high and init-too-small runs.")
    fault("simclr_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, **T01, "lr": 20.0}, osc,
          f"SGD momentum 0.9 at lr 20 ({20.0 / SGD['lr']:g}x the twin's), NT-Xent temperature 0.1.", style="csv",
          twin_name="simclr_twin_sgd_t01")
    # Not changed: a batch of 2 digits has 4 views, so its NT-Xent is at most ln 3 = 1.1 (collapsed), below the batch-64
    # twin's 3.46 at any temperature; it ended 0.32x the twin's level (swing 69x). Kept, not scored.
    fault("simclr_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.01}, osc,
          "Batch 2 (4 views: each view has 2 negatives) with Adam lr 0.01.", style="mlflow")
    # Changed once after seeing the truth: lr 1e-5 first (fell only 3.6 % in 400 steps: neither learning nor flat
    # enough, 1.27x above the twin), then lr 1e-4 (confirmed: never reaches the twin's quarter-run level).
    fault("simclr_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-4}, slow,
          "Adam lr 1e-4 (10x below the twin).", style="csv")
    fault("simclr_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    # Changed once after seeing the truth: at temperature 0.5 against simclr_twin_sgd it sat collapsed at ln 127 = 4.84
    # for the whole run (fell 0 %), only 1.38x above the twin (the most that temperature allows); then both it and
    # its twin at temperature 0.1, where it stays collapsed (fell 0 %) 2.05x above the twin: the flat case of
    # loss-oscillation, slow-convergence also accepted (truth.labels_from_check).
    fault("simclr_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, **T01, "init": "scaled:0.001"}, slow,
          f"Every weight and bias multiplied by 1e-3 at init, SGD momentum lr {SGD['lr']:g}, NT-Xent temperature 0.1.",
          style="parquet", twin_name="simclr_twin_sgd_t01")
    # Not changed: with BatchNorm in the head and the projections normalised, the network is nearly scale-invariant, so
    # the 1000x LR only grows the weights (whose gradients then shrink): no NaN, gradient peak 6x the twin's median.
    # Kept, not scored.
    fault("simclr_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {SGD['lr']:g}, unclipped; at step 200 a restart sets the LR 1000x.", style="wandb",
          twin_name="simclr_twin_sgd", before_step=lr_spike(200, 1000))
    fault("simclr_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          "Adam 1e-3; one pixel of one stored digit in the batch at step 250 is NaN (both its views carry it).",
          style="mlflow", corrupt=corrupt_nan_at(250))

    # Bad shard without shuffling: training rows 640..703 are uniform noise images and, unshuffled, are batch 11
    # (1-based) of every 22-batch epoch. Its twin is the same unshuffled run on clean digits.
    per_epoch = -(-N_TRAIN // BASE["batch_size"])
    shard_index = 640 // BASE["batch_size"]
    shard_steps = [float(ep * per_epoch + shard_index + 1) for ep in range(2, 40)
                   if ep * per_epoch + shard_index + 1 <= BASE["max_steps"]]
    shard_cfg = {"shuffle": False}
    # Not changed: NT-Xent at temperature 0.5 cannot reach 3x the twin's level (the noise batch sits near ln 127 = 4.84,
    # ~1.2x the twin's ~3.5-4 there), nor at 0.1 (4.84 over a twin at ~2), so no setting of the temperature confirms
    # it. Kept, not scored.
    if want("simclr_bad_shard_noshuffle", "simclr_twin_noshuffle"):
        twin_run("simclr_twin_noshuffle", "csv", shard_cfg,
                 "Adam 1e-3, no shuffling, clean digits: the bad-shard run's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, shard_steps)
            return ok, {**m, "spike_steps": shard_steps}

        fault("simclr_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], shard_cfg, spikes,
              "No shuffling; training rows 640..703 are uniform noise images, met at batch 11 of every epoch.",
              style="parquet", twin_name="simclr_twin_noshuffle", bad_shard=(640, 704))

    # Vanishing gradients: a 12-layer sigmoid MLP encoder (64 units, default init, no residuals); its twin is the same
    # stack with ReLU and He init.
    deep = {"encoder": "mlp", "depth": 12}
    if want("simclr_vanishing_sigmoid12", "simclr_twin_relu12"):
        twin_run("simclr_twin_relu12", "mlflow", {**deep, "activation": "relu", "init": "he"},
                 "12-layer MLP encoder with ReLU and He init, Adam 1e-3: the vanishing-sigmoid twin.")
        fault("simclr_vanishing_sigmoid12", "vanishing_gradients", ["vanishing-gradients"], {**deep, "activation": "sigmoid"},
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, L["wandb"]["layer_grad"].format("encoder.0.weight")),
              "A 12-layer sigmoid MLP encoder without residuals, default init, Adam 1e-3: the first layer's gradient vanishes.",
              style="csv", twin_name="simclr_twin_relu12")

    # Slow loader: the same DataLoader, each digit taking 1 ms to arrive (network storage, no workers).
    if want("simclr_slow_loader", "simclr_twin_fast_loader"):
        twin_run("simclr_twin_fast_loader", "mlflow", {"loader": "fast", "max_steps": 200},
                 "Adam 1e-3 through an in-memory DataLoader (no workers): the slow loader's twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("simclr_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.001, "max_steps": 200}, bottleneck,
              "Each digit takes 1 ms to arrive (SlowIODataset) through a DataLoader with no workers.",
              style="csv", twin_name="simclr_twin_fast_loader")

    # Overfitting: 64 training digits (one batch), a 4x wider encoder, 800 steps, views that differ only by pixel noise;
    # its twin is the same with the full augmentation and weight decay.
    small = {"n_train": 64, "width": 128, "max_steps": 800, "augment": "noise_only"}
    if want("simclr_overfit_small_subset", "simclr_twin_overfit_reg"):
        twin_run("simclr_twin_overfit_reg", "csv", {**small, "augment": "full", "optimizer": "adamw", "weight_decay": 0.1},
                 "64 training digits, width-128 encoder, full augmentation (shift, erase, noise), AdamW weight decay 0.1: "
                 "the overfitting run's twin.", log_every=2)
        fault("simclr_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              "64 training digits, a width-128 encoder, Adam 1e-3 for 800 steps, views differing only by pixel noise, "
              "no weight decay.", style="mlflow", twin_name="simclr_twin_overfit_reg", log_every=2)

    healthy = [
        ("simclr_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 3e-3}, {},
         "Adam 3e-3, a tenth of warm-up then cosine decay."),
        ("simclr_step_decay_sgd", "mlflow", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {SGD['lr']:g}, step decay x0.3 every third of the run."),
        ("simclr_sgdr_restarts", "wandb", "wandb", {**SGD, "schedule": "sgdr"}, {},
         f"SGD momentum lr {SGD['lr']:g} with cosine warm restarts every 100 steps."),
        ("simclr_onecycle_sgd", "parquet", "plain", {**SGD, "lr": 2 * SGD["lr"], "schedule": "onecycle"}, {},
         f"SGD momentum with a one-cycle LR peaking at {2 * SGD['lr']:g}."),
        ("simclr_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 3e-4}, {},
         "Batch 4 (8 views) with Adam lr 3e-4."),
        ("simclr_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "Adam 1e-3; logs every 3rd step and validates every 100."),
        ("simclr_converged_idle", "wandb", "plain", {"max_steps": 1200}, {"log_every": 3},
         "Adam 1e-3 for 1200 steps: learns the views within a few hundred, then idles."),
        ("simclr_early_stopping", "mlflow", "wandb", {"max_steps": 2000, "early_stop": 3}, {"log_every": 3},
         "Adam 1e-3 with early stopping (patience 3 epochs on the val loss), at most 2000 steps."),
        ("simclr_temperature_01", "parquet", "wandb", {"temperature": 0.1}, {},
         "NT-Xent at temperature 0.1 (sharper: a lower loss), Adam 1e-3."),
        ("simclr_long_plateau", "csv", "mlflow", {"max_steps": 1500, "lr": 3e-4}, {"log_every": 3},
         "Adam 3e-4 for 1500 steps: falls, then plateaus near the loss floor the batch allows."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, cfg, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={}, description=desc)
    if want("simclr_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


class _ViewPairs(torch.utils.data.Dataset):
    """Each item: the two views of one digit, stacked (2, 1, 8, 8), augmented on the fly (global torch RNG, seeded)."""

    def __init__(self, x: torch.Tensor):
        self.x = x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        img = self.x[i:i + 1]
        return torch.cat([augment(img, None), augment(img, None)]), 0


class _PairModel(nn.Module):
    """(N, 2, 1, 8, 8) view pairs -> the 2N projections, first views then second, as :func:`nt_xent` expects."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, pairs):
        return self.model(torch.cat([pairs[:, 0], pairs[:, 1]]))


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 1e-3, step decay x0.3 every 150 steps."""
    name = "simclr_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    xt, xv = digits(SEED)
    model = _PairModel(_model(cfg))
    hp = {"optimizer": "adam", "lr": 1e-3, "batch_size": 64, "schedule": "step", "step_size": 150, "gamma": 0.3,
          "max_epochs": 20, "temperature": 0.5, "model": model_name(cfg), "dataset": DATASET, "seed": SEED, "loss": "nt_xent"}
    loss = lambda z, _y: nt_xent(z, hp["temperature"])
    module = lightning_module(model, loss, lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp,
                              lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    va, vb = _val_views(xv, {})
    g = torch.Generator().manual_seed(SEED)
    tl = torch.utils.data.DataLoader(_ViewPairs(xt), batch_size=64, shuffle=True, generator=g, drop_last=True)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.stack([va, vb], 1), torch.zeros(len(xv))),
                                     batch_size=64)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: Adam 1e-3, step decay x0.3 every 150 steps, 20 epochs of "
                           "21 batches (validated once per epoch), views augmented on the fly."}
