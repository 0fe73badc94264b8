"""The unet family: semantic segmentation of scikit-learn's digits with a small U-Net.

Each 8x8 digit is scaled to [0, 1] (raw 0..16 divided by 16) and upsampled bilinearly to 16x16; seeded 1400/397
split. The target is the clean digit's foreground mask (upsampled image > 0.5), one label per pixel. The input is the
digit with Gaussian noise (sigma 0.3) and one random 4x4 patch erased to 0 (an occlusion): drawn afresh for every
training batch (seeded per epoch) and once, with a fixed seed, for the validation images.

The U-Net has two down levels: ``down1`` (1->16, two conv3x3-BN-ReLU at 16x16), max-pool, ``down2`` (16->32 at 8x8),
max-pool, ``mid`` (32->64 at 4x4), then ``up2`` (a 2x2 transposed conv 64->32, concatenated with ``down2``'s output,
two convs back to 32), ``up1`` (32->16, concatenated with ``down1``'s, two convs to 16) and ``head``, a 1x1 conv to one
logit per pixel. The loss is BCE-with-logits (averaged over pixels) + the soft Dice loss (per image, averaged), both
logged unweighted beside their (weighted) sum through :func:`.common.fit`'s task terms (``train/loss_bce`` and
``train/loss_dice`` under W&B names). The validation loss is the same sum on the 397 held-out images; its two terms
are logged beside it (``val/loss_bce``, ``val/loss_dice`` under W&B names).

Built blind to the detectors: settings are a practitioner's, and every fault run has a twin with the one setting put
right (same seed and data); the label is what :mod:`.truth` confirms against it. What was changed after seeing a truth
result is said in a comment at the run: SGD LR too high went from lr 5 to lr 20 (confirmed); Adam LR too high, batch
too small and overfitting stayed unconfirmed after their one change, and the unscaled Dice weight could not stall the
BCE (both terms score the same mask): those four are left out of a full build (see ``build``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F

from . import truth
from .common import (NAMES, corrupt_nan_at, early_stopping, fit, lr_spike, make_optimizer, make_scheduler,
                     seed_all, shrink_init)
from .integrations import lightning_module, lightning_run
from .family_runs import FamilyRuns, batches_for, describe_injections
from .sinks import open_run

FAMILY = "unet"
SEED = 41
DATASET = "sklearn.load_digits"
N_TRAIN = 1400
SIZE = 16
NOISE_SIGMA = 0.3
PATCH = 4


def digit_masks(seed: int, n_train: int | None = None, bad_shard: tuple[int, int] | None = None):
    """(clean train images, train masks, noisy val images, val masks), images (n, 1, 16, 16) in [0, 1].
    ``bad_shard`` [lo, hi) replaces the masks of that contiguous block of training rows with random masks (each pixel
    foreground with probability 1/2: a shard whose label files were never masks). Validation stays clean."""
    x = load_digits().data.astype(np.float32).reshape(-1, 1, 8, 8) / 16.0
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:N_TRAIN], order[N_TRAIN:]
    if n_train is not None:
        tr = tr[:n_train]
    big = F.interpolate(torch.from_numpy(x), size=(SIZE, SIZE), mode="bilinear", align_corners=False).clamp(0, 1)
    masks = (big > 0.5).float()
    xt, mt, xv, mv = big[tr].clone(), masks[tr].clone(), big[va].clone(), masks[va].clone()
    if bad_shard is not None:
        lo, hi = bad_shard
        g = torch.Generator().manual_seed(seed + 5)
        mt[lo:hi] = (torch.rand(hi - lo, 1, SIZE, SIZE, generator=g) < 0.5).float()
    return xt, mt, corrupt_inputs(xv, torch.Generator().manual_seed(seed + 97)), mv


def corrupt_inputs(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Gaussian noise (sigma 0.3) and one 4x4 patch per image set to 0, at a random place."""
    out = x + NOISE_SIGMA * torch.randn(x.shape, generator=g)
    n = len(x)
    r = torch.randint(0, SIZE - PATCH + 1, (n,), generator=g).tolist()
    c = torch.randint(0, SIZE - PATCH + 1, (n,), generator=g).tolist()
    for i in range(n):
        out[i, :, r[i]:r[i] + PATCH, c[i]:c[i] + PATCH] = 0.0
    return out


def noisy_batches(batches, seed: int):
    """Fresh noise and occlusion for every training batch, seeded per epoch."""
    def gen(epoch):
        g = torch.Generator().manual_seed(seed * 7919 + epoch)
        for x, m in batches(epoch):
            yield corrupt_inputs(x, g), m
    return gen


def _block(c_in: int, c_out: int, bn: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a in (c_in, c_out):
        layers += [nn.Conv2d(a, c_out, 3, padding=1, bias=not bn)] + ([nn.BatchNorm2d(c_out)] if bn else []) + [nn.ReLU()]
    return nn.Sequential(*layers)


class UNet(nn.Module):
    """Two down levels (16x16 -> 8x8 -> 4x4), skips by concatenation, a 1x1 conv to one logit per pixel."""

    def __init__(self, width: int = 16, dropout: float = 0.0):
        super().__init__()
        w1, w2, w3 = width, 2 * width, 4 * width
        self.down1 = _block(1, w1)
        self.down2 = _block(w1, w2)
        self.mid = _block(w2, w3)
        self.up2_t = nn.ConvTranspose2d(w3, w2, 2, stride=2)
        self.up2 = _block(2 * w2, w2)
        self.up1_t = nn.ConvTranspose2d(w2, w1, 2, stride=2)
        self.up1 = _block(2 * w1, w1)
        self.drop = nn.Dropout2d(dropout)
        self.head = nn.Conv2d(w1, 1, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        m = self.drop(self.mid(F.max_pool2d(d2, 2)))
        u2 = self.up2(torch.cat([self.up2_t(m), d2], 1))
        u1 = self.up1(torch.cat([self.up1_t(u2), d1], 1))
        return self.head(u1)


class PlainEncoderDecoder(nn.Module):
    """12 conv layers, no skips: six down (two with stride 2: 16 -> 8 -> 4), six up (two 2x2 transposed convs back to
    16x16), the last a 1x1 conv to the logit. ``sigmoid``: sigmoid between layers, default init, no BatchNorm;
    ``relu_bn``: BatchNorm + ReLU between layers, He init (the twin of the same depth)."""

    def __init__(self, kind: str = "sigmoid"):
        super().__init__()
        specs = [(1, 16, 1), (16, 16, 2), (16, 32, 1), (32, 32, 2), (32, 32, 1), (32, 32, 1),
                 (32, 32, "up"), (32, 32, 1), (32, 16, "up"), (16, 16, 1), (16, 16, 1), (16, 1, "head")]
        convs = []
        for a, b, s in specs:
            if s == "up":
                convs.append(nn.ConvTranspose2d(a, b, 2, stride=2))
            elif s == "head":
                convs.append(nn.Conv2d(a, b, 1))
            else:
                convs.append(nn.Conv2d(a, b, 3, stride=s, padding=1))
        self.layers = nn.ModuleList(convs)
        self.norms = nn.ModuleList(nn.BatchNorm2d(b) if kind == "relu_bn" else nn.Identity() for _, b, _ in specs[:-1])
        self.act = nn.ReLU() if kind == "relu_bn" else nn.Sigmoid()
        if kind == "relu_bn":
            for conv in self.layers:
                nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
                nn.init.zeros_(conv.bias)

    def forward(self, x):
        for i, conv in enumerate(self.layers):
            x = conv(x)
            if i < len(self.layers) - 1:
                x = self.act(self.norms[i](x))
        return x


def soft_dice(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """1 - (2 |p t| + 1) / (|p| + |t| + 1) per image, averaged over the batch."""
    p = torch.sigmoid(logits).flatten(1)
    t = target.flatten(1)
    return (1 - (2 * (p * t).sum(1) + 1) / (p.sum(1) + t.sum(1) + 1)).mean()


def seg_terms(logits, target, cfg):
    pos = torch.tensor(cfg["pos_weight"]) if cfg["pos_weight"] != 1.0 else None
    bce = F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos)
    dice = soft_dice(logits, target)
    return cfg["w_bce"] * bce + cfg["w_dice"] * dice, bce, dice


BASE = {"optimizer": "adam", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "arch": "unet", "width": 16, "dropout": 0.0, "w_bce": 1.0, "w_dice": 1.0, "pos_weight": 1.0,
        "noise": "fresh", "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0, "clip": None,
        "max_steps": 400, "n_train": None, "early_stop": None}
# SGD momentum 0.9 for the SGD faults' twin; lr picked by training the twin alone before any fault was run.
SGD = {"optimizer": "sgd", "lr": 0.05}
LAYERS = ("down1.0.weight", "mid.0.weight", "up1.0.weight", "head.weight")
PLAIN_LAYERS = ("layers.0.weight", "layers.5.weight", "layers.11.weight")
VAL_TERMS = {"wandb": "val/loss_{}", "plain": "val_loss_{}", "mlflow": "val_{}_loss"}


def model_name(cfg: dict) -> str:
    if cfg["arch"] == "unet":
        w = cfg["width"]
        return f"unet2-{w}-{2 * w}-{4 * w}-bn" + (f"-drop{cfg['dropout']:g}" if cfg["dropout"] else "")
    return f"plain-encdec12-{cfg['arch']}"


def build_model(cfg: dict) -> nn.Module:
    seed_all(cfg["seed"])
    model = UNet(cfg["width"], cfg["dropout"]) if cfg["arch"] == "unet" else PlainEncoderDecoder(cfg["arch"])
    return shrink_init(model, cfg["init"])


class _WithValTerms:
    """Wraps a run's log: where a row carries the val loss, the val loss's two terms go beside it."""

    def __init__(self, log, naming: str, last: dict):
        self.inner, self.val_key, self.fmt, self.last = log, NAMES[naming]["val_loss"], VAL_TERMS[naming], last
        self.logged = log.logged

    def log(self, metrics, step):
        if self.val_key in metrics:
            metrics = {**metrics, **{self.fmt.format(k): v for k, v in self.last.items()}}
        self.inner.log(metrics, step)


class Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, over: dict, *, before_step=None, corrupt=None,
              bad_shard: tuple[int, int] | None = None, val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **over}
        xt, mt, xv, mv = digit_masks(cfg["seed"], cfg["n_train"], bad_shard)
        model = build_model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        if cfg["noise"] == "fixed":  # one noisy copy of each training image, the same every epoch
            xt = corrupt_inputs(xt, torch.Generator().manual_seed(cfg["seed"] + 3))
        batches = batches_for(xt, mt, cfg, default_delay_s=0.001)
        if cfg["noise"] == "fresh":
            batches = noisy_batches(batches, cfg["seed"])
        if corrupt is not None:
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
        last: dict[str, float] = {}

        def val_fn() -> float:
            model.eval()
            with torch.no_grad():
                total, bce, dice = seg_terms(model(xv), mv, cfg)
            model.train()
            last.update(bce=float(bce), dice=float(dice))
            return float(total)

        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(xt),
                      loss=f"{cfg['w_bce']:g}*bce(pos_weight={cfg['pos_weight']:g})+{cfg['w_dice']:g}*soft_dice")
        describe_injections(logged, corrupt=corrupt, before_step=before_step, bad_shard_rows=bad_shard)
        log = open_run(style, self.root, name, logged)

        def loss_fn(m, batch):
            total, bce, dice = seg_terms(m(batch[0]), batch[1], cfg)
            return total, {"bce": bce, "dice": dice}

        res = fit(model, batches, loss_fn, opt, _WithValTerms(log, naming, last), epochs=100_000, naming=naming,
                  scheduler=make_scheduler(opt, cfg), val_fn=val_fn, val_every=val_every, log_every=log_every,
                  layer_grads=LAYERS if cfg["arch"] == "unet" else PLAIN_LAYERS, clip=cfg["clip"],
                  before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = Runs(root)
    # A full build leaves out the fault runs the twins did not confirm after one change of setting (and the twins only
    # they use); ``--only NAME`` still trains them. Their measures (first setting; second setting):
    # - unet_lr_too_high_adam: lr 0.3 ended 1.09x the twin, swing 1.09x (it recovered); lr 3.0 ended 2.63x, swing 0.75x,
    #   fell 48 % (oscillation asks >= 1.5x above with a >= 1.5x swing, or no learning).
    # - unet_batch_too_small: batch 2 at Adam 0.05 ended 1.15x the twin (swing 3.9x); at lr 0.3, 1.37x (swing 4.4x).
    # - unet_overfit_small_subset: its val loss ended 18 % BELOW the fresh-noise + AdamW 0.1 twin's (the twin's own val
    #   loss rose 56 % from its best: 48 images memorised whatever the noise); with dropout 0.5 added to the twin, still
    #   11 % below. The fixed-noise run is not the worse one here.
    # - unet_unscaled_dice_weight (no change tried): the BCE, the small term, still fell 46 % (twin 83 %); the two terms
    #   score the same mask, so optimising the Dice alone lowers the BCE too (an Adam probe with Dice x1000 took the BCE
    #   from ~0.7 to 0.21), and the stalled-task check cannot hold.
    left_out = {"unet_lr_too_high_adam", "unet_batch_too_small", "unet_overfit_small_subset", "unet_twin_overfit_reg",
                "unet_unscaled_dice_weight", "unet_twin_sgd_clip"}
    want = (lambda *n: not set(n) <= left_out) if only is None else (lambda *n: any(x in only for x in n))
    W = NAMES["wandb"]
    key, val_key, grad_key = W["loss"], W["val_loss"], W["grad_norm"]

    def twin_run(name, style, over, description, **kw):
        f, c = runs.train(name, style, "wandb", over, **kw)
        runs.add(name, style, f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
                 description=description)

    twin_run("unet_twin_adam", "wandb", {}, "U-Net 16-32-64 with BatchNorm, BCE + Dice, Adam 1e-3, batch 32: the sane twin.")
    twin_run("unet_twin_sgd", "mlflow", SGD,
             f"The same U-Net with SGD momentum 0.9 lr {SGD['lr']:g}, batch 32: the SGD faults' twin.")

    def fault(name, cause, intended, over, check, description, style="wandb", twin_name="unet_twin_adam", **kw):
        # W&B metric names whatever the file format, as the twins log them: the truth compares like with like.
        if not want(name):
            return
        f, c = runs.train(name, style, "wandb", over, **kw)
        twin = runs.taps[twin_name]
        ok, measures = check(runs.taps[name], twin, name, twin_name)
        got, also, measures = truth.labels_from_check(intended, ok, measures, runs.taps[name], twin, key)
        extra = {"also_acceptable": also} if also else {}
        runs.add(name, style, f, c, faults=got, intended=intended, cause=cause, twin=twin_name,
                 truth_measures=measures, description=description, **extra)

    osc = lambda tap, twin, *_: truth.confirm_oscillation(tap, twin, key)
    slow = lambda tap, twin, *_: truth.confirm_slow(tap, twin, key)
    boom = lambda tap, twin, *_: truth.confirm_explosion(tap, twin, grad_key, key)

    # Changed once after seeing the truth: lr 0.3 first (ended 1.09x the twin, swing 1.09x), then lr 3.0 (unconfirmed:
    # 2.63x, swing 0.75x; left out of a full build).
    fault("unet_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 3.0}, osc,
          "Adam at lr 3 (3000x the twin's).", style="parquet")
    # Changed once after seeing the truth: lr 5 first (100x the twin's; ended 3.1x above the twin but no noisier, swing
    # 1.04x, and it fell 44 %), then lr 20.
    fault("unet_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 20.0}, osc,
          f"SGD momentum 0.9 at lr 20 ({20.0 / SGD['lr']:.0f}x the twin's {SGD['lr']:g}).", style="csv",
          twin_name="unet_twin_sgd")
    # Changed once after seeing the truth: Adam lr 0.05 first (1.15x the twin), then lr 0.3 (1.37x; left out).
    fault("unet_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.3}, osc,
          "Batch 2 (BatchNorm statistics over two images) with Adam lr 0.3.", style="mlflow")
    fault("unet_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          "Adam lr 1e-5 (100x below the twin).", style="csv")
    fault("unet_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    fault("unet_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          f"Every weight (BatchNorm scales included) multiplied by 1e-3 at init, SGD momentum lr {SGD['lr']:g}.",
          style="parquet", twin_name="unet_twin_sgd")
    fault("unet_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {SGD['lr']:g}, unclipped; at step 200 a restart multiplies the LR by 1000.", style="wandb",
          twin_name="unet_twin_sgd", before_step=lr_spike(200, 1000))
    fault("unet_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          "Adam 1e-3; one pixel of one input image in the batch at step 250 is NaN.", style="mlflow",
          corrupt=corrupt_nan_at(250))

    # Task imbalance: the Dice weight typed 1e3 for 1.0, SGD momentum with the usual clip at norm 1.0, so the
    # clipped step is all Dice. The twin weighs the two terms 1:1 under the same SGD and clip.
    imb = {**SGD, "clip": 1.0}
    if want("unet_unscaled_dice_weight", "unet_twin_sgd_clip"):
        twin_run("unet_twin_sgd_clip", "csv", imb,
                 f"U-Net, BCE + Dice 1:1, SGD momentum lr {SGD['lr']:g}, clip 1.0: the unscaled-Dice run's twin.")

        def stalled(tap, twin, *_):
            return truth.confirm_task_stalled(tap, twin, W["task"].format("bce"))

        fault("unet_unscaled_dice_weight", "unscaled_aux_loss", ["task-imbalance"], {**imb, "w_dice": 1000.0}, stalled,
              f"The Dice term weighted 1000 (a 1.0 typed 1e3) beside the BCE; SGD momentum lr {SGD['lr']:g}, clip 1.0.",
              style="parquet", twin_name="unet_twin_sgd_clip")

    # Bad shard, unshuffled: training rows 640..703 carry random masks; without shuffling they are batches 21-22
    # (1-based) of every 44-batch epoch. Its twin is the same unshuffled run on clean masks.
    per_epoch = -(-N_TRAIN // BASE["batch_size"])
    shard = (640, 704)
    shard_steps = [float(ep * per_epoch + k + 1) for ep in range(1, 10) for k in (20, 21)
                   if ep * per_epoch + k + 1 <= BASE["max_steps"]]
    if want("unet_bad_shard_noshuffle", "unet_twin_noshuffle"):
        twin_run("unet_twin_noshuffle", "csv", {"shuffle": False}, "Adam 1e-3, no shuffling, clean masks: the bad shard's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, shard_steps)
            return ok, {**m, "spike_steps": shard_steps}

        fault("unet_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], {"shuffle": False}, spikes,
              "No shuffling; training rows 640..703 carry random masks (each pixel foreground with probability 1/2), "
              "met at batches 21-22 of every epoch.", style="parquet", twin_name="unet_twin_noshuffle", bad_shard=shard)

    # Vanishing gradients: a plain 12-layer encoder-decoder, sigmoid between layers, default init, no skips or
    # BatchNorm; its twin is the same depth with BatchNorm, ReLU and He init.
    if want("unet_vanishing_sigmoid12", "unet_twin_plain_relu_bn12"):
        twin_run("unet_twin_plain_relu_bn12", "mlflow", {"arch": "relu_bn"},
                 "A plain 12-layer conv encoder-decoder (no skips) with BatchNorm, ReLU and He init, Adam 1e-3: the "
                 "vanishing run's twin.")
        fault("unet_vanishing_sigmoid12", "vanishing_gradients", ["vanishing-gradients"], {"arch": "sigmoid"},
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, W["layer_grad"].format("layers.0.weight")),
              "A plain 12-layer conv encoder-decoder, sigmoid between layers, default init, no skips or BatchNorm, Adam 1e-3.",
              style="csv", twin_name="unet_twin_plain_relu_bn12")

    # Slow loader: a real DataLoader whose dataset sleeps 2 ms per image (slow storage), no workers.
    if want("unet_slow_loader", "unet_twin_fast_loader"):
        twin_run("unet_twin_fast_loader", "mlflow", {"loader": "fast", "max_steps": 300},
                 "Adam 1e-3 through an in-memory DataLoader (no workers): the slow loader's twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        # Changed once after seeing the truth: 1 ms per image first (throughput 0.41x the twin's on a loaded machine,
        # 0.53x on a quiet one, short of the check's 0.5x), then 2 ms.
        fault("unet_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.002, "max_steps": 300}, bottleneck,
              "Each image takes 2 ms to arrive (SlowIODataset) through a DataLoader with no workers.",
              style="csv", twin_name="unet_twin_fast_loader")

    # Overfitting: 48 training images, a U-Net twice as wide, 800 steps, the same fixed noisy copy of each image every
    # epoch; its twin draws fresh noise and occlusion for every batch and adds weight decay.
    small = {"n_train": 48, "width": 32, "max_steps": 800, "noise": "fixed"}
    if want("unet_overfit_small_subset", "unet_twin_overfit_reg"):
        # Changed once after seeing the truth: the twin without dropout first, then dropout 0.5 added (still unconfirmed).
        twin_run("unet_twin_overfit_reg", "csv", {**small, "noise": "fresh", "optimizer": "adamw", "weight_decay": 0.1,
                                                  "dropout": 0.5},
                 "48 training images, the width-32 U-Net, fresh noise and occlusion every batch, AdamW weight decay 0.1, "
                 "dropout 0.5: "
                 "the overfitting run's twin.", log_every=2)
        fault("unet_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              "48 training images, a width-32 U-Net, Adam 1e-3 for 800 steps, one fixed noisy copy of each image, "
              "no weight decay.", style="mlflow", twin_name="unet_twin_overfit_reg", log_every=2)

    healthy = [
        ("unet_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 3e-3}, {},
         "Adam 3e-3, a tenth of warm-up then cosine decay."),
        ("unet_step_decay_sgd", "mlflow", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {SGD['lr']:g}, step decay x0.3 every third of the run."),
        ("unet_sgdr_restarts", "wandb", "wandb", {"lr": 3e-3, "schedule": "sgdr"}, {"log_every": 2},
         "Adam 3e-3 with cosine warm restarts every 100 steps."),
        ("unet_onecycle_sgd", "parquet", "plain", {**SGD, "lr": 2 * SGD["lr"], "schedule": "onecycle"}, {},
         f"SGD momentum with a one-cycle LR peaking at {2 * SGD['lr']:g}."),
        ("unet_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 3e-4}, {},
         "Batch 4 with Adam lr 3e-4."),
        ("unet_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "Adam 1e-3; logs every 3rd step and validates every 100."),
        ("unet_converged_idle", "wandb", "plain", {"max_steps": 1200}, {"log_every": 3},
         "Adam 1e-3 for 1200 steps: the masks are learned in a few hundred, then it idles."),
        ("unet_early_stopping", "mlflow", "wandb", {"max_steps": 2000, "early_stop": 3}, {"log_every": 3},
         "Adam 1e-3 with early stopping (patience 3 epochs on the val loss), at most 2000 steps."),
        ("unet_dice_only", "wandb", "wandb", {"w_bce": 0.0}, {"log_every": 2},
         "Adam 1e-3 on the soft Dice loss alone (the BCE logged, weighted 0)."),
        ("unet_bce_pos_weight3", "parquet", "wandb", {"pos_weight": 3.0}, {},
         "Adam 1e-3, BCE with a positive-class weight of 3 (foreground pixels count 3x) + Dice: a higher loss by design."),
        ("unet_long_plateau", "csv", "mlflow", {"lr": 3e-4, "max_steps": 1000}, {"log_every": 2},
         "Adam 3e-4 for 1000 steps: falls, then flattens on the noise's floor."),
    ]
    for name, style, naming, over, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, over, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={}, description=desc)
    if want("unet_lightning_adam"):
        runs.entries.append(_lightning(root))
    return runs.entries


class _NoisyDigits(torch.utils.data.Dataset):
    """Clean images and masks; each item gets fresh noise and occlusion (torch's global generator, seeded)."""

    def __init__(self, x: torch.Tensor, m: torch.Tensor):
        self.x, self.m = x, m

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return corrupt_inputs(self.x[i:i + 1], None)[0], self.m[i]


def _lightning(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 1e-3, batch 32, 10 epochs (the total loss only:
    the shared LightningModule logs the loss it is given, not its terms)."""
    name = "unet_lightning_adam"
    cfg = {**BASE, "seed": SEED}
    xt, mt, xv, mv = digit_masks(SEED)
    model = build_model(cfg)
    hp = {"optimizer": "adam", "lr": 1e-3, "batch_size": 32, "schedule": "constant", "max_epochs": 10,
          "model": model_name(cfg), "dataset": DATASET, "seed": SEED, "loss": "bce+soft_dice"}
    module = lightning_module(model, lambda out, y: seg_terms(out, y, cfg)[0], lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp)
    g = torch.Generator().manual_seed(SEED)
    tl = torch.utils.data.DataLoader(_NoisyDigits(xt, mt), batch_size=32, shuffle=True, generator=g)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, mv), batch_size=400)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: Adam 1e-3, batch 32, 10 epochs (validated once per epoch)."}
