"""The pixelcnn family: a small PixelCNN (van den Oord et al. 2016), an autoregressive model of scikit-learn's 8x8
digits binarised.

The data: scikit-learn's 1797 bundled digits (64 pixels, intensities 0..16), binarised (a pixel is on when its value is
>= 8; 32 % of the pixels are, 20.7 +- 2.7 a digit); a seeded permutation keeps 1400 digits for training, in its order
(the stored order an unshuffled loader reads), and the other 397 for validation. The input is the binarised image, the
target the same 64 pixels; for the inputs-not-normalised run the input is the raw 0..16 intensities (the target stays
binary).

The **model** (``PixelCNN``): a 7x7 type-A masked convolution (each position sees only the pixels before it in raster
order) to 32 channels, 4 residual blocks ``h + 1x1(ReLU(3x3 type-B masked conv(ReLU(h))))``, ReLU, then 1x1 -> ReLU ->
1x1 to one logit per pixel. **Loss** = binary cross-entropy with logits per pixel, averaged over the 64 pixels and the
batch (nats per pixel; a model that says 0.5 everywhere scores 0.693, one that knows only each pixel's frequency 0.39).
Each val check logs the same on the 397 val digits (``val/loss``) and the bits per dimension (``val/bpd``, the same
divided by ln 2; 0.42 for the baseline). Variants: 64 channels x 6 blocks; a 12-layer stack of 1x1 sigmoid convolutions
(32 channels) between the last ReLU and the output layers, without/with residual connections (the vanishing pair); 64
channels x 6 blocks on the first 64 training digits, with/without dropout 0.5 in every block and AdamW weight decay 1.0
(the overfitting pair). The type-A convolution's, the first block's masked convolution's, the last block's 1x1 and the
output layer's gradient norms are logged (and the sigmoid stack's first and last layers where it has one). The
task-imbalance pair adds a second head (the last block's features average-pooled, then linear) regressing the digit's
ink count (its on pixels, 0..64), MSE, summed unweighted with the BCE; both terms are logged beside the total
(``train/loss_nll``, ``train/loss_ink``); the fault regresses the count raw, the twin z-scored.

Built blind to the detectors: nothing under ``trackerhealth/diagnoses/`` nor the scoring was read or run while building
it. Settings are a practitioner's (Adam 1e-3 constant, batch 32, 1000 steps, ~23 epochs; SGD momentum 0.9, clip 1.0,
constant, for the SGD faults at the LR a sweep of the SGD twin alone chose), picked by trials of the twins alone before
any fault ran (see the comment at :data:`BASE`); every fault run has a twin with the one setting put right (same seed
and data) and its label is what :mod:`.truth` confirms against it. Three fault settings were changed, each once, after
their truth checks (the comments at the runs say so): the Adam LR too high (lr 0.1 -> 1.0), the SGD LR too high (3.0 ->
10) and the bad shard (whole digits inverted -> the targets alone); no other. Moved for size after the first generation,
not informed by a result (the same trainings; the runs the changes did not touch logged the same training and val
losses, value for value, both times): the Adam twin, the eps run and the raw-ink run off W&B, and some MLflow and CSV
runs to Parquet; the slow loader's pair and the rare-val run to W&B.

Result (34 runs, 15 fault runs and 19 meant healthy, twins included): the twins confirm 11 of the 15 faults: SGD lr 10
with clip 1.0 (changed once, from 3.0; it collapses to ~0.63 nats per pixel, 2.28x the twin's level, steady, its level
9.9 % below its first loss; the cross-check adds ``nonfinite``: its gradient norm 520x the twin's median at step 8),
Adam lr 1e-6 (flat, fell 0.6 %: the ``one_of`` loss-oscillation / slow-convergence case), Adam eps 1.0 and init x1e-3
under SGD (slow: never reach the twin's quarter-run level while learning; the cross-check adds ``vanishing-gradients``
to the x1e-3 init, its type-A gradient 3e-7x the twin's), an LR spike x1000 at step 500 under SGD (the loss jumps to
2.6e6 at step 502 and never recovers; the gradient norm peaks at 7.5e10, 3.2e11x the twin's median, at step 534, no
NaN), a NaN pixel in one digit's input at step 500 (NaN from that step), SGD lr 10 unclipped (NaN from step 9), the
first 64 digits fitted by 64 channels x 6 blocks without dropout or weight decay (val 1.95 nats per pixel against the
regularised twin's 0.75), two batches an epoch with their targets inverted met unshuffled (changed once; 44 of 44 shard
steps >= 3x the twin, 4.6-7.9x), a 12-layer plain sigmoid 1x1 stack (the type-A convolution's gradient 3.4e-12 against
the residual twin's 0.15), a 2 ms/digit loader (throughput 0.11x). Not confirmed, kept but not scored: Adam lr 1.0
(changed once, from 0.1, which still learned: fell 44 %, 1.41x; at 1.0 it collapses like the SGD run, 2.26x the twin,
steady, but its level fell 10.2 % from its first loss, just over the 10 % the flat case allows), batch 1 at the twin's
Adam 1e-3 (it learns: 1.15x the twin's level, swing 4.4x), the raw 0..16 intensities as input under SGD (it learns
faster and lower than the twin, 0.19 against 0.28 nats per pixel, val 0.21 against 0.29: a grey level tells more about
its neighbours' binarised values than the binarised pixel does, so the raw context is the richer input here, not a
handicap), and the raw ink count beside the BCE (its BCE term fell 44 %, the z-scored twin's 55 %: the count's spread is
small, std 2.7, so once the head's bias reaches its mean of ~21, which clipped SGD does within the run, the raw MSE is
within an order of the z-scored one). 17 of the 19 runs meant healthy pass the healthy check (all 12 healthy variants:
warm-up + cosine peaking at 2e-3, step decay with SGD, one-cycle peaking at 3e-3, SGDR, early stopping at Adam 3e-3
(patience 3 epochs; it stops at step 1056), 15 % of the training target pixels flipped (a high plateau), batch 4 at Adam
3.5e-4 for 2000 steps, rare val, converged idle (2e-3, cosine to 1 % by step 500, then 1000 steps there), 64 channels x
6 blocks, HF, Lightning; 5 of 7 twins); the regularised overfit twin (it memorises the 64 digits too: val 116 % above
its best) and the z-scored ink twin (its val total ends 60 % above its best, the ink term jumping between checks under
SGD 0.1) are left out. Not built: one oversized batch, heavy preprocessing and too few workers (the slow loader alone
stands for the input bottleneck). Generated with ``--family pixelcnn``: into a scratch folder (401 s), then, after the
three changes, into the corpus (358 s, 6.0 minutes wall) on a two-core machine shared with other jobs; 6.2 MB (7.0 MB on
disk).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from . import truth
from .common import (NAMES, corrupt_nan_at, early_stopping, fit, lr_spike, make_optimizer, make_scheduler, seed_all,
                     shrink_init)
from .family_runs import (FamilyRuns, TwinChecks, batches_for, batches_per_epoch, describe_injections, shard_steps_for,
                          with_val_extras)
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .sinks import open_run

FAMILY = "pixelcnn"
SEED = 167
N_TRAIN = 1400
THRESHOLD = 8  # a pixel is on when its 0..16 intensity is >= 8
PIXELS = 64
DATASET = ("sklearn.load_digits binarised (pixel value >= 8 is on), a seeded 1400 train / 397 val split; "
           "each digit predicted pixel by pixel in raster order")


# --- The data. ---

@lru_cache(maxsize=1)
def digits() -> dict:
    """The seeded 1400 / 397 split: the raw 0..16 intensities and the binarised images, (N, 1, 8, 8) float32; the
    training digits in the permutation's order (the stored order an unshuffled loader reads)."""
    x = load_digits().data.astype(np.float32)
    order = np.random.default_rng(SEED).permutation(len(x))
    raw = torch.from_numpy(x[order]).view(-1, 1, 8, 8)
    binary = (raw >= THRESHOLD).float()
    return {"raw_t": raw[:N_TRAIN], "raw_v": raw[N_TRAIN:], "bin_t": binary[:N_TRAIN], "bin_v": binary[N_TRAIN:]}


def ink_stats() -> tuple[float, float]:
    """Mean and std of the training digits' ink count (the number of on pixels, 0..64)."""
    ink = digits()["bin_t"].flatten(1).sum(1)
    return float(ink.mean()), float(ink.std())


@lru_cache(maxsize=4)
def noisy_targets(flip: float) -> torch.Tensor:
    """The training targets with a seeded share of the pixels flipped (stored once: a noisy target); the inputs stay
    the clean images."""
    y = digits()["bin_t"].clone()
    g = torch.Generator().manual_seed(SEED + 3)
    mask = torch.rand(y.shape, generator=g) < flip
    y[mask] = 1.0 - y[mask]
    return y


def arrays(cfg: dict):
    """(xt, yt, xv, yv): inputs (N, 1, 8, 8) (the binarised images, or the raw 0..16 intensities for ``raw_inputs``)
    and targets (N, 65): the 64 binary pixels to predict and the auxiliary target (the ink count raw, z-scored, or
    0)."""
    d = digits()
    xt, xv = (d["raw_t"], d["raw_v"]) if cfg["raw_inputs"] else (d["bin_t"], d["bin_v"])
    tt = noisy_targets(cfg["label_noise"]) if cfg["label_noise"] else d["bin_t"]
    tv = d["bin_v"]
    at, av = d["bin_t"].flatten(1).sum(1), d["bin_v"].flatten(1).sum(1)
    if cfg["aux"] == "scaled":
        mu, sd = ink_stats()
        at, av = (at - mu) / sd, (av - mu) / sd
    elif cfg["aux"] is None:
        at, av = torch.zeros_like(at), torch.zeros_like(av)
    yt = torch.cat([tt.flatten(1), at[:, None]], dim=1)
    yv = torch.cat([tv.flatten(1), av[:, None]], dim=1)
    if cfg["n_train"]:
        xt, yt = xt[:cfg["n_train"]], yt[:cfg["n_train"]]
    return xt, yt, xv, yv


# --- The model. ---

class MaskedConv2d(nn.Conv2d):
    """A convolution whose kernel sees only the pixels before the centre in raster order (type A) or those and the
    centre (type B); one input colour, so no channel masking."""

    def __init__(self, c_in: int, c_out: int, k: int, mask_type: str):
        super().__init__(c_in, c_out, k, padding=k // 2)
        mask = torch.ones_like(self.weight)
        c = k // 2
        mask[:, :, c, c + (mask_type == "B"):] = 0
        mask[:, :, c + 1:, :] = 0
        self.register_buffer("mask", mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight * self.mask, self.bias, padding=self.padding)


class ResBlock(nn.Module):
    """h + 1x1(ReLU(masked 3x3 type B(ReLU(h)))), dropout on the inner activation."""

    def __init__(self, ch: int, dropout: float):
        super().__init__()
        self.conv = MaskedConv2d(ch, ch, 3, "B")
        self.proj = nn.Conv2d(ch, ch, 1)
        self.drop = nn.Dropout(dropout)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.proj(self.drop(F.relu(self.conv(F.relu(h)))))


class PixelCNN(nn.Module):
    """A 7x7 type-A masked convolution, ``blocks`` residual blocks of 3x3 type-B masked convolutions, ReLU, an
    optional stack of 1x1 sigmoid layers (``residual`` adds each layer's input to its output), then 1x1 -> ReLU -> 1x1
    to one logit per pixel. ``aux``: a second head (global average pool of the last block's features -> linear)
    regressing the digit's ink count."""

    def __init__(self, ch: int = 32, blocks: int = 4, dropout: float = 0.0, stack_layers: int = 0,
                 residual: bool = False, aux: bool = False):
        super().__init__()
        self.conv_a = MaskedConv2d(1, ch, 7, "A")
        self.res_blocks = nn.ModuleList([ResBlock(ch, dropout) for _ in range(blocks)])
        self.sigmoid_stack = nn.ModuleList([nn.Conv2d(ch, ch, 1) for _ in range(stack_layers)])
        self.residual = residual
        self.out1 = nn.Conv2d(ch, ch, 1)
        self.out2 = nn.Conv2d(ch, 1, 1)
        self.ink_head = nn.Linear(ch, 1) if aux else None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_a(x)
        for block in self.res_blocks:
            h = block(h)
        return F.relu(h)

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        for conv in self.sigmoid_stack:
            z = z + torch.sigmoid(conv(z)) if self.residual else torch.sigmoid(conv(z))
        return self.out2(F.relu(self.out1(z)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 1, 8, 8) logits; with the ink head, (N, 65): the 64 logits and the ink prediction last."""
        z = self.features(x)
        out = self.logits(z)
        if self.ink_head is None:
            return out
        return torch.cat([out.flatten(1), self.ink_head(z.mean((2, 3)))], dim=1)


def nll(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy with logits per pixel, averaged over the pixels and the batch (nats per pixel)."""
    return F.binary_cross_entropy_with_logits(out.flatten(1)[:, :PIXELS], y[:, :PIXELS])


def task_terms(out: torch.Tensor, y: torch.Tensor, aux: str | None) -> dict[str, torch.Tensor]:
    if aux is None:
        return {"nll": nll(out, y)}
    return {"nll": nll(out, y), "ink": F.mse_loss(out[:, PIXELS], y[:, PIXELS])}


BASE = {"optimizer": "adam", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "channels": 32, "blocks": 4, "dropout": 0.0, "stack_layers": 0, "residual": False, "aux": None,
        "raw_inputs": False, "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0,
        "clip": None, "max_steps": 1000, "n_train": None, "early_stop": None, "label_noise": 0.0, "bad_shard": None}
# The base recipe was tried alone before any fault ran (the twin only, batch 32, constant LR; the last val loss in nats
# per pixel, how far it ends above its best): at 600 steps Adam 3e-4 0.324 (0.3 %), 1e-3 0.309 (1.1 %), 2e-3 0.297, 3e-3
# 0.292, 5e-3 0.284, 1e-2 0.285 (2.0 %); at 1500 steps 1e-3 0.285 (0 %), 3e-3 0.283 (2.5 %, its best at step 1120); 1e-3
# at 1000 steps 0.292 (0 %, still falling) and at 2500 0.280. Adam 1e-3 (the usual default), 1000 steps (~23 epochs).
# (A marginal-only model, each pixel's training frequency, scores 0.39 nats per pixel; one that predicts 0.5, 0.693.)
# SGD momentum 0.9, constant, clip 1.0 for the SGD faults' twin, its lr picked by a sweep of that twin alone (1000
# steps): 0.01 0.332, 0.03 0.307, 0.1 0.288 (0 %), 0.3 0.283 (0.4 %), 1.0 0.282 (1.6 %), 3.0 collapsed (0.630, train
# 0.63).
# The 64-channel 6-block model on all digits (the wide variant, Adam 1e-3, 1000 steps): 0.273 (0 %). The overfitting
# pair's regularised twin alone (the first 64 digits, 64 channels x 6 blocks, AdamW 1e-3, 1000 steps; its last val loss
# and best): dropout 0.3 with weight decay 0.1 1.187 (best 0.349), dropout 0.5 with weight decay 0.1 1.156 (0.348),
# dropout 0.5 with weight decay 1.0 0.747 (0.347, kept): every one memorises 64 digits (train ~0.09-0.10).
SGD = {"optimizer": "sgd", "lr": 0.1, "weight_decay": 0.0, "schedule": "constant", "clip": 1.0}


def scheduler_for(opt, cfg: dict):
    """A cosine decay to 1 % over ``decay_steps`` that then idles there; else :func:`.common.make_scheduler`."""
    if cfg["schedule"] == "decay_then_idle":
        d = cfg["decay_steps"]
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * min(s, d) / d)))
    return make_scheduler(opt, cfg)


def model_name(cfg: dict) -> str:
    name = f"pixelcnn-{cfg['channels']}ch-{cfg['blocks']}resblocks"
    if cfg["dropout"]:
        name += f"-drop{cfg['dropout']:g}"
    if cfg["stack_layers"]:
        name += f"-sigmoid1x1stack{cfg['stack_layers']}" + ("-res" if cfg["residual"] else "-plain")
    if cfg["aux"]:
        name += "-inkhead"
    return name


def grad_layers(cfg: dict) -> tuple[str, ...]:
    last = cfg["blocks"] - 1
    names = ["conv_a.weight", "res_blocks.0.conv.weight", f"res_blocks.{last}.proj.weight"]
    k = cfg["stack_layers"]
    if k:
        names += ["sigmoid_stack.0.weight", f"sigmoid_stack.{k - 1}.weight"]
    names.append("out2.weight")
    if cfg["aux"]:
        names.append("ink_head.weight")
    return tuple(names)


def build_model(cfg: dict) -> PixelCNN:
    seed_all(cfg["seed"])
    model = PixelCNN(cfg["channels"], cfg["blocks"], cfg["dropout"], cfg["stack_layers"], cfg["residual"],
                     cfg["aux"] is not None)
    return shrink_init(model, cfg["init"])


def loss_label(cfg: dict) -> str:
    label = "binary cross-entropy with logits per pixel, mean over the 64 pixels and the batch (nats per pixel)"
    if cfg["aux"] == "raw":
        label += " + MSE of a head regressing the digit's ink count (on pixels, 0..64) in raw counts, weight 1"
    elif cfg["aux"] == "scaled":
        label += (" + MSE of a head regressing the digit's ink count z-scored with the training digits' statistics, "
                  "weight 1")
    if cfg["label_noise"]:
        label += f"; {cfg['label_noise']:.0%} of the training target pixels flipped (the inputs clean)"
    return label


def inverted_shard(batch_ids: tuple[int, ...]):
    """Those batch positions of every epoch hold digits whose stored targets are inverted (on <-> off); the inputs
    are right. (First the whole digits, inputs and targets, were inverted: see the bad-shard run in :func:`build`.)"""
    ids = set(batch_ids)

    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                if i in ids:
                    y = y.clone()
                    y[:, :PIXELS] = 1.0 - y[:, :PIXELS]
                yield x, y
        return batches
    return wrap


def val_fn_for(model: PixelCNN, cfg: dict, xv: torch.Tensor, yv: torch.Tensor, state: dict):
    aux = cfg["aux"]

    def fn() -> float:
        model.eval()
        with torch.no_grad():
            terms = task_terms(model(xv), yv, aux)
        model.train()
        state.update({k: float(v) for k, v in terms.items()})
        state["bpd"] = float(terms["nll"]) / math.log(2)
        return float(sum(terms.values()))
    return fn


def val_term_key(names: dict, term: str) -> str:
    task = names["task"].format(term)
    return "val/" + task.split("/", 1)[1] if "/" in task else "val_" + task


class Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, over: dict, *, before_step=None, corrupt=None,
              val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **over}
        xt, yt, xv, yv = arrays(cfg)
        model = build_model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for(xt, yt, cfg, 0.002)
        per_epoch = batches_per_epoch(cfg, len(xt))
        if cfg["bad_shard"]:
            batches = inverted_shard(cfg["bad_shard"])(batches, per_epoch)
        if corrupt is not None:
            batches = corrupt(batches, per_epoch)
        state: dict = {}
        val_fn = val_fn_for(model, cfg, xv, yv, state)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(xt), n_val=len(xv), loss=loss_label(cfg),
                      task="autoregressive density estimation of binarised digits (PixelCNN)",
                      inputs="raw 0..16 intensities (targets binarised)" if cfg["raw_inputs"] else "binarised 0/1")
        if cfg["aux"]:
            mu, sd = ink_stats()
            logged["aux_target"] = (f"ink count in raw counts (mean {mu:.1f}, std {sd:.1f})" if cfg["aux"] == "raw"
                                    else "ink count z-scored with the training digits' mean and std")
        if cfg["bad_shard"]:
            logged["bad_shard"] = (f"batches {list(cfg['bad_shard'])} of every epoch: the stored targets inverted "
                                   "(on <-> off), the inputs right")
        describe_injections(logged, corrupt=corrupt, before_step=before_step)
        log = open_run(style, self.root, name, logged)
        names = NAMES[naming]
        bpd_key = names["val_loss"].replace("loss", "bpd")
        extra_terms = ("nll", "ink") if cfg["aux"] else ()
        log.log = with_val_extras(log.log, names["val_loss"], lambda: {
            bpd_key: state["bpd"], **{val_term_key(names, t): state[t] for t in extra_terms}})
        aux = cfg["aux"]

        def loss_fn(m, batch):
            xb, yb = batch
            t = task_terms(m(xb), yb, aux)
            if aux is None:
                return t["nll"]
            return sum(t.values()), t

        res = fit(model, batches, loss_fn, opt, log, epochs=100_000, naming=naming, scheduler=scheduler_for(opt, cfg),
                  val_fn=val_fn, val_every=val_every, log_every=log_every, layer_grads=grad_layers(cfg),
                  clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = Runs(root)
    book = TwinChecks(runs, only, default_twin="pixelcnn_twin_adam")
    want, twin_run, fault = book.wanted, book.twin, book.fault
    W = NAMES[book.naming]
    key, val_key = book.key, book.val_key
    osc, slow, boom = book.oscillation, book.slowness, book.explosion
    lr0, sgd = BASE["lr"], SGD["lr"]

    twin_run("pixelcnn_twin_adam", "parquet", {},
             f"PixelCNN (a 7x7 type-A masked convolution, 4 residual blocks of 3x3 type-B masked convolutions, 32 "
             f"channels, ReLU, 1x1 output, one logit per pixel) on the binarised digits, BCE per pixel, batch 32, Adam "
             f"{lr0:g} constant, 1000 steps: the sane twin (and the family's baseline).")
    twin_run("pixelcnn_twin_sgd", "mlflow", SGD,
             f"The same model with SGD momentum 0.9 lr {sgd:g}, constant, clip 1.0: the SGD faults' twin.")

    # Changed once after its truth check: at lr 0.1 (100x) the run still learned (its level fell 44 %, ending 1.41x the
    # twin's, swing 0.71x), so not confirmed; now lr 1.0 (1000x). Still not confirmed, kept but not scored: it collapses
    # to ~0.63 nats per pixel (2.26x the twin's level, swing 0.26x), but its level fell 10.2 % from its first loss, just
    # over the 10 % the flat case allows.
    fault("pixelcnn_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 1000 * lr0}, osc,
          f"Adam at lr {1000 * lr0:g} (1000x the twin's {lr0:g}), constant.", style="parquet")
    # Changed once after its truth check: at lr 3.0 (30x; the SGD twin's sweep had shown 3.0 collapsing) it collapsed,
    # ending 2.27x the twin's level, steady (swing 0.26x), but its level had fallen 10.1 % from the first loss, just
    # over the 10 % the flat case allows, so not confirmed; now lr 10 (100x): it collapses the same way (2.28x, steady),
    # its level 9.9 % below its first loss, and is confirmed.
    fault("pixelcnn_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 100 * sgd}, osc,
          f"SGD momentum 0.9 at lr {100 * sgd:g} (100x the twin's {sgd:g}), clip 1.0.", style="csv",
          twin_name="pixelcnn_twin_sgd")
    # Not confirmed, kept but not scored, not changed: batch 1 (the smallest there is) at the twin's lr learns, ending
    # 1.15x the twin's level (swing 4.4x); 64 pixel targets a digit give even one digit a usable gradient.
    fault("pixelcnn_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 1}, osc,
          f"Batch 1 digit with Adam at the twin's lr {lr0:g}.", style="parquet")
    fault("pixelcnn_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": lr0 / 1000}, slow,
          f"Adam at lr {lr0 / 1000:g} (1000x below the twin).", style="parquet")
    fault("pixelcnn_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="parquet")
    fault("pixelcnn_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          f"Every weight and bias multiplied by 1e-3 at init, SGD momentum lr {sgd:g}, clip 1.0.", style="parquet",
          twin_name="pixelcnn_twin_sgd")
    # Not confirmed, kept but not scored, not changed: with the raw 0..16 intensities as input the model learns faster
    # and ends lower than the twin (0.19 against 0.28 nats per pixel, val 0.21 against 0.29): a grey level says more
    # about the neighbouring binarised pixels than a binarised pixel does, so the context is richer, and SGD with clip
    # 1.0 takes the larger input scale in its stride.
    fault("pixelcnn_raw_inputs_sgd", "features_not_normalised", ["slow-convergence"], {**SGD, "raw_inputs": True}, slow,
          "The network's input given as the raw 0..16 intensities instead of the binarised 0/1 pixels (the targets "
          f"stay binary); SGD momentum lr {sgd:g}, clip 1.0.", style="parquet", twin_name="pixelcnn_twin_sgd")
    fault("pixelcnn_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {sgd:g}, clip 1.0; at step 500 a restart multiplies the LR by 1000.", style="mlflow",
          twin_name="pixelcnn_twin_sgd", before_step=lr_spike(500, 1000))
    fault("pixelcnn_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          f"Adam {lr0:g}; one pixel of one digit's input in the batch read at step 500 is NaN.", style="mlflow",
          corrupt=corrupt_nan_at(500))
    fault("pixelcnn_gradient_explosion_noclip", "gradient_explosion", ["nonfinite"],
          {**SGD, "lr": 100 * sgd, "clip": None}, boom,
          f"SGD momentum lr {100 * sgd:g} (100x the twin's {sgd:g}), no gradient clipping.", style="parquet",
          twin_name="pixelcnn_twin_sgd")

    # Task imbalance: a second head (the last block's features average-pooled, then linear) regressing the digit's ink
    # count (its on pixels, 0..64; mean ~21, std ~2.7 over the training digits) in raw counts, MSE summed unweighted
    # with the BCE, SGD momentum with clip 1.0; the twin regresses the same count z-scored. The small task is the BCE.
    stalled = lambda tap, twin, *_: truth.confirm_task_stalled(tap, twin, W["task"].format("nll"))
    if want("pixelcnn_unscaled_aux_loss", "pixelcnn_twin_aux_scaled"):
        twin_run("pixelcnn_twin_aux_scaled", "csv", {**SGD, "aux": "scaled"},
                 "The PixelCNN with a second head regressing the digit's ink count z-scored (MSE, weight 1) beside the "
                 f"BCE, SGD momentum lr {sgd:g}, clip 1.0: the unscaled auxiliary loss's twin.")
        # Not confirmed, kept but not scored, not changed: the raw-count MSE starts at 430, but the count's spread is
        # small (std 2.7): once the head's bias reaches the mean (~21) the MSE is a few units, and the BCE term fell
        # 44 % (0.70 -> 0.39) against the twin's 55 % (-> 0.32).
        fault("pixelcnn_unscaled_aux_loss", "unscaled_aux_loss", ["task-imbalance"], {**SGD, "aux": "raw"}, stalled,
              "A second head regressing the digit's ink count (on pixels, 0..64) in raw counts with an MSE summed "
              f"unweighted with the BCE, both logged beside the total; SGD momentum lr {sgd:g}, clip 1.0.",
              style="csv", twin_name="pixelcnn_twin_aux_scaled")

    # Bad shard, unshuffled: batches 10 and 11 of each epoch (44 batches of 32 digits an epoch, so 1000 steps meet the
    # shard 44 times after the first epoch) hold digits whose stored targets are inverted (on <-> off), the inputs
    # right. Changed once after its truth check: first the whole digits were stored inverted, inputs and targets alike,
    # and the shard steps read only 1.67-2.19x the twin (0 of 44 >= 3x: an inverted digit's first pixels tell the model
    # it is inverted, and it predicts the rest so). Now only the targets are, the inputs read right.
    noshuf = {"shuffle": False}
    shard = (10, 11)
    if want("pixelcnn_bad_shard_noshuffle", "pixelcnn_twin_noshuffle"):
        steps = shard_steps_for({**BASE, **noshuf}, shard, N_TRAIN)
        twin_run("pixelcnn_twin_noshuffle", "csv", noshuf,
                 f"Adam {lr0:g}, batches of 32 digits in the stored order without shuffling, every digit stored right: "
                 "the bad shard's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, steps)
            return ok, {**m, "spike_steps": steps}

        fault("pixelcnn_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"],
              {**noshuf, "bad_shard": shard}, spikes,
              "No shuffling, batches of 32 digits; in batches 10 and 11 of each epoch (digits 320..383 of the stored "
              "order) the stored targets are inverted (every pixel on <-> off); the inputs are right.",
              style="parquet", twin_name="pixelcnn_twin_noshuffle")

    deep = {"stack_layers": 12}
    if want("pixelcnn_vanishing_sigmoid_stack12", "pixelcnn_twin_residual_stack12"):
        twin_run("pixelcnn_twin_residual_stack12", "parquet", {**deep, "residual": True},
                 "The PixelCNN with a 12-layer stack of 1x1 sigmoid convolutions (32 channels) with residual "
                 f"connections before the output layers, Adam {lr0:g}: the vanishing run's twin.")
        fault("pixelcnn_vanishing_sigmoid_stack12", "vanishing_gradients", ["vanishing-gradients"], deep,
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, W["layer_grad"].format("conv_a.weight")),
              "The PixelCNN with a 12-layer stack of plain 1x1 sigmoid convolutions (32 channels, no residual "
              f"connections) before the output layers, default init, Adam {lr0:g}.", style="csv",
              twin_name="pixelcnn_twin_residual_stack12")

    if want("pixelcnn_slow_loader", "pixelcnn_twin_fast_loader"):
        twin_run("pixelcnn_twin_fast_loader", "wandb", {"loader": "fast", "max_steps": 100},
                 f"Adam {lr0:g} through an in-memory DataLoader of digits (no workers), 100 steps: the slow loader's "
                 "twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("pixelcnn_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.002, "max_steps": 100}, bottleneck,
              "Each digit takes 2 ms to arrive (SlowIODataset) through a DataLoader with no workers, 100 steps.",
              style="wandb", twin_name="pixelcnn_twin_fast_loader")

    # Overfitting: the first 64 training digits, 64 channels x 6 blocks, AdamW 1e-3, 1000 steps (500 epochs), no
    # dropout or weight decay; the twin the same with dropout 0.5 in every block and AdamW weight decay 1.0.
    small = {"n_train": 64, "channels": 64, "blocks": 6}
    if want("pixelcnn_overfit_small_subset", "pixelcnn_twin_overfit_reg"):
        twin_run("pixelcnn_twin_overfit_reg", "csv",
                 {**small, "optimizer": "adamw", "dropout": 0.5, "weight_decay": 1.0},
                 f"The first 64 training digits, 64 channels x 6 blocks, AdamW {lr0:g} with weight decay 1.0 and "
                 "dropout 0.5 in every block, 1000 steps: the overfitting run's twin.")
        fault("pixelcnn_overfit_small_subset", "overfitting", ["overfitting"],
              {**small, "optimizer": "adamw", "dropout": 0.0, "weight_decay": 0.0},
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              f"The first 64 training digits, 64 channels x 6 blocks, AdamW {lr0:g} for 1000 steps, no dropout or "
              "weight decay.", style="mlflow", twin_name="pixelcnn_twin_overfit_reg")

    healthy = [
        ("pixelcnn_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 2e-3}, {},
         "Adam peaking at 2e-3, a tenth of warm-up then cosine decay."),
        ("pixelcnn_step_decay_sgd", "csv", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, step decay x0.3 every third of the run."),
        ("pixelcnn_onecycle", "parquet", "wandb", {"schedule": "onecycle", "lr": 3e-3}, {},
         "Adam with a one-cycle schedule peaking at 3e-3."),
        ("pixelcnn_sgdr_restarts", "parquet", "plain", {**SGD, "schedule": "sgdr"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, cosine warm restarts every quarter of the run (SGDR)."),
        ("pixelcnn_early_stopping", "mlflow", "wandb", {"lr": 3e-3, "max_steps": 3000, "early_stop": 3},
         {"log_every": 2},
         "Adam 3e-3, early stopping (patience 3 epochs of 44 steps on the val loss), at most 3000 steps."),
        ("pixelcnn_label_noise", "csv", "mlflow", {"label_noise": 0.15}, {},
         f"Adam {lr0:g}; 15 % of the training target pixels flipped (the inputs clean): a high plateau."),
        ("pixelcnn_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 3.5e-4, "max_steps": 2000},
         {"log_every": 2, "val_every": 50},
         "Batch 4 digits with Adam 3.5e-4 (the square-root rule from the twin's batch 32 and lr), 2000 steps."),
        ("pixelcnn_rare_val", "wandb", "wandb", {}, {"val_every": 100, "log_every": 3},
         f"Adam {lr0:g}; logs every 3rd step and validates every 100."),
        ("pixelcnn_converged_idle", "parquet", "plain", {"schedule": "decay_then_idle", "decay_steps": 500, "lr": 2e-3,
                                                        "max_steps": 1500}, {"log_every": 3, "val_every": 30},
         "Adam 2e-3, cosine decay to 1 % by step 500, then 1000 steps idling at that LR."),
        ("pixelcnn_wide_64ch_6blocks", "parquet", "wandb", {"channels": 64, "blocks": 6}, {},
         f"A wider and deeper PixelCNN: 64 channels, 6 residual blocks, Adam {lr0:g}."),
    ]
    for name, style, naming, over, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, over, **kw)
            runs.add_unlabelled(name, style, f, c, cause="healthy", description=desc)
    if want("pixelcnn_hf_warmup_cosine"):
        runs.entries.append(_hf_run(root))
    if want("pixelcnn_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


def _stock_config(cfg: dict) -> dict:
    return {"model": model_name(cfg), "dataset": DATASET, "seed": SEED, "loss": loss_label(cfg),
            "channels": cfg["channels"], "blocks": cfg["blocks"], "n_train": N_TRAIN, "n_val": 397,
            "inputs": "binarised 0/1"}


def _hf_run(root: Path) -> dict:
    """A healthy run through transformers.Trainer (AdamW, warm-up then cosine, its default clip 1.0)."""
    name = "pixelcnn_hf_warmup_cosine"
    cfg = {**BASE, "seed": SEED}
    model = build_model(cfg)
    xt, yt, xv, yv = arrays(cfg)
    args = {"learning_rate": 1e-3, "weight_decay": 0.0, "lr_scheduler_type": "cosine", "warmup_steps": 100,
            "max_steps": 1000, "per_device_train_batch_size": 32, "per_device_eval_batch_size": 397,
            "logging_steps": 2, "eval_steps": 20}
    f, _ = hf_trainer_run(root, name, model, nll, (xt, yt), (xv, yv), args, SEED)
    config = {**args, "optimizer": "adamw", "trainer": "hf", **_stock_config(cfg)}
    return {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": "hf_trainer",
            "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": config,
            "truth": {},
            "description": "transformers.Trainer: the PixelCNN (32 channels, 4 residual blocks) on the binarised "
                           "digits, batches of 32, AdamW 1e-3 with weight decay 0, 100 warm-up steps then cosine, 1000 "
                           "steps; loss = BCE per pixel; eval loss on the 397 val digits; trainer_state.json."}


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 1e-3, step decay x0.3 every 330 steps."""
    name = "pixelcnn_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    model = build_model(cfg)
    hp = {"optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "batch_size": 32, "schedule": "step",
          "step_size": 330, "gamma": 0.3, "max_epochs": 23, **_stock_config(cfg)}
    module = lightning_module(
        model, nll, lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp,
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    xt, yt, xv, yv = arrays(cfg)
    g = torch.Generator().manual_seed(SEED)
    tl = DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True, generator=g)
    vl = DataLoader(TensorDataset(xv, yv), batch_size=397)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: the PixelCNN (32 channels, 4 residual blocks) on the "
                           "binarised digits, batches of 32, Adam 1e-3, step decay x0.3 every 330 steps, 23 epochs "
                           "(1012 steps; validated once per epoch on the 397 val digits)."}
