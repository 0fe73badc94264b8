"""The flow family: a RealNVP-style normalizing flow fitted by maximum likelihood to scikit-learn's 8x8 digits.

The data: scikit-learn's 1797 bundled digits (64 pixels, 17 grey levels 0..16); a seeded permutation keeps 1400 for
training and the other 397 for validation. Each pixel is **dequantised** with uniform noise (``v = x + u``, ``u ~ U[0,
1)``, a fresh draw per training batch; one fixed seeded draw for the val digits), so ``v`` lives in ``[0, 17)^64``, then
standardised with the training split's per-pixel statistics of ``v`` (mean ``E x + 1/2``, std ``sqrt(Var x + 1/12)``,
so the pixels that are always 0 keep the noise's std). The flow models the standardised ``z``; the change of
variables adds the standardisation's log-determinant back, so the loss is the density of ``v``.

The **model** (``RealNVP``) is ``n_couplings`` (6) affine coupling layers with alternating checkerboard masks over the
8x8 image: each keeps its masked half ``z_a``, and maps the other half as ``z_b * exp(s) + t`` with ``(s, t)`` from a
small MLP conditioner on ``z_a`` (``couplings.i.net``: 64 -> 128 -> 128 -> 2 x 64, ReLU; its output layer zero-initialised
so the flow starts as the identity, as Glow and most RealNVP implementations do), ``s = scale * tanh(s_raw)`` with a
learned per-pixel ``scale`` (RealNVP's stabilisation), over a standard normal base. Variants: 10 couplings, 12-layer
sigmoid conditioners without/with residual connections (the vanishing pair), 256-wide conditioners with dropout.

The **loss** is the negative log-likelihood in **bits per dimension** of the dequantised 17-level pixels (the density of
``v`` on ``[0, 17)^64`` divided by ``64 ln 2``) -- the unit flow papers report on 8-bit images, here with the digits'
17 levels in place of 256. Uniform dequantisation makes it an upper bound on the discrete data's code length, so it is
never below 0 in expectation (a model that spreads mass uniformly over the 17 levels scores log2 17 = 4.09; the baseline
reaches ~2.4). It is not shifted. The raw-feature fault models ``v`` itself (no standardisation), so its loss is in the
same unit. Each val check logs the same on the 397 val digits (one fixed dequantisation draw). The first conditioner
layer of every coupling layer logs its gradient norm (``grad_norm/couplings.i.net.layers.0.weight``).

The task-imbalance pair adds an L2 penalty on the coupling layers' log-scales ``s`` (mean of ``s^2``) times a
coefficient, logged beside the NLL as a second term (``train/loss_nll`` and ``train/loss_logscale_l2``, the penalty with
its coefficient).

Built blind to the detectors: nothing under ``trackerhealth/diagnoses/`` nor the scoring was read or run while
building it. Settings are a practitioner's (Adam 1e-3, batch 64, 400 steps, val every 20; SGD momentum 0.9 at the LR a
sweep of the SGD twin alone chose, clip 1.0, see :data:`SGD`); every fault run has a twin with the one setting put right
(same seed and data) and its label is what :mod:`.truth` confirms against it. A comment at a run says so where its
setting was changed after its truth check (once at most).

Why bits/dim of the 17-level pixels: the ratio criteria of :mod:`.truth` (ends >= 1.5x the twin, falls >= 3x as much,
val within 10 % of its best) assume a positive loss. The same NLL in nats/dim of the pixels scaled to [0, 1) would start
at about -0.55 and end near -1.2, where those ratios mean nothing; bits/dim of the dequantised pixels is positive by
construction. It keeps an offset, though: a flow that never learns sits at the standardised Gaussian's ~3.4 bits/dim,
only ~1.49x the twin's final ~2.3, so the flat case's 1.5x bar falls right at "did not learn at all".

Result (34 runs, 15 fault runs and 19 meant healthy, twins included): the twins confirm 12 of the 15 faults (Adam lr 0.1
(1.52x the twin's level, flat; its gradient norm 5.6e3x the twin's median), SGD lr 3.0 with clip 1.0 (2.03x, swing
1.88x), batch 2 at Adam 0.03 (1.53x, swing 3.97x), Adam lr 1e-4 (never reaches the twin's quarter-run level), Adam eps
1.0 (the flat case, 1.51x, ``one_of`` loss-oscillation / slow-convergence), an LR spike x1000 at step 250 (NaN at step
252), a NaN pixel at step 250, SGD lr 10 unclipped (NaN from step 4), two raw-unit batches met unshuffled (8 of 34 shard
steps >= 3x the twin), 12-layer plain sigmoid conditioners (the first conditioner layer's gradient ~5e-12), a 1 ms/digit
loader (throughput 0.10x), 50 digits fitted by 256-wide conditioners without dropout or weight decay (val 45.7 bits/dim
against the regularised twin's 12.7)). Not confirmed, kept but not scored: init x1e-2 with SGD (after x1e-3; stuck at the
zero saddle, the flat case at 1.485x), raw 0..17 pixels (Adam: 2.0x later; SGD: 1.12x later), the log-scale penalty at
1e3 (the NLL term still fell 12.6 %, the twin's 32.9 %). 17 of the 19 runs meant healthy pass the healthy check; the
converged-idle run (1500 steps, val 11.6 % above its best) and the regularised overfit twin (its val ends 3x its best)
do not. Not built: one oversized batch (flat 64-pixel inputs take no other size), heavy preprocessing and too few
workers (the slow loader alone stands for the input bottleneck).
"""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from . import truth
from .common import NAMES, early_stopping, fit, lr_spike, make_optimizer, make_scheduler, nan_pixel_at, seed_all, shrink_init
from .family_runs import (FamilyRuns, TwinChecks, batches_for, batches_per_epoch, describe_injections, shard_steps_for)
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .sinks import open_run

FAMILY = "flow"
SEED = 79
DATASET = "sklearn.load_digits (uniformly dequantised, standardised pixels)"
N_TRAIN = 1400
D = 64
LEVELS = 17
BITS = D * math.log(2)


def digits(seed: int):
    """(x_train, x_val): the seeded 1400/397 split of the integer pixels 0..16, as float32."""
    x = load_digits().data.astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    return torch.from_numpy(x[order[:N_TRAIN]]), torch.from_numpy(x[order[N_TRAIN:]])


def standardiser(xt: torch.Tensor, raw: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) of the dequantised training pixels ``x + U[0, 1)``; (0, 1) when the pixels are left raw."""
    if raw:
        return torch.zeros(D), torch.ones(D)
    return xt.mean(0) + 0.5, (xt.var(0, unbiased=False) + 1 / 12).sqrt()


def dequantised(batches, mean: torch.Tensor, std: torch.Tensor, seed: int):
    """The batch stream with each pixel dequantised (a fresh seeded uniform draw per batch) and standardised."""
    def gen(epoch):
        g = torch.Generator().manual_seed(seed * 7919 + epoch)
        for x, y in batches(epoch):
            yield (x + torch.rand(x.shape, generator=g) - mean) / std, y
    return gen


def val_points(xv: torch.Tensor, seed: int) -> torch.Tensor:
    """The val digits with one fixed seeded dequantisation draw (in pixel units)."""
    return xv + torch.rand(xv.shape, generator=torch.Generator().manual_seed(seed + 1))


ACTS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


def checkerboard(parity: int) -> torch.Tensor:
    return torch.tensor([float((i // 8 + i % 8) % 2 == parity) for i in range(D)])


class Conditioner(nn.Module):
    """An MLP 64 -> hidden ... hidden -> 2 x 64 (``depth`` Linear layers), the activation after each hidden one;
    ``residual`` adds each hidden -> hidden layer's input to its output; dropout after each hidden layer. The output
    layer starts at zero (the coupling starts as the identity)."""

    def __init__(self, hidden: int, depth: int, activation: str, residual: bool, dropout: float):
        super().__init__()
        dims = [D] + [hidden] * (depth - 1) + [2 * D]
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in pairwise(dims)])
        nn.init.zeros_(self.layers[-1].weight)
        nn.init.zeros_(self.layers[-1].bias)
        self.act, self.residual, self.drop = ACTS[activation](), residual, nn.Dropout(dropout)

    def forward(self, x):
        h = self.drop(self.act(self.layers[0](x)))
        for layer in self.layers[1:-1]:
            z = self.drop(self.act(layer(h)))
            h = h + z if self.residual else z
        return self.layers[-1](h)


class Coupling(nn.Module):
    """An affine coupling layer: the masked pixels pass unchanged and condition ``(s, t)`` for the others."""

    def __init__(self, mask: torch.Tensor, hidden: int, depth: int, activation: str, residual: bool, dropout: float):
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = Conditioner(hidden, depth, activation, residual, dropout)
        self.scale = nn.Parameter(torch.ones(D))

    def forward(self, z):
        s, t = self.net(z * self.mask).chunk(2, dim=-1)
        free = 1 - self.mask
        s = self.scale * torch.tanh(s) * free
        return z * self.mask + free * (z * torch.exp(s) + t), s


class RealNVP(nn.Module):
    """Affine couplings with alternating checkerboard masks over a standard normal base. ``forward(z)`` returns each
    sample's negative log-density of ``z`` in nats; after each forward ``log_scales`` holds every coupling's ``s``."""

    def __init__(self, n_couplings: int = 6, hidden: int = 128, depth: int = 3, activation: str = "relu",
                 residual: bool = False, dropout: float = 0.0):
        super().__init__()
        self.couplings = nn.ModuleList([Coupling(checkerboard(i % 2), hidden, depth, activation, residual, dropout)
                                        for i in range(n_couplings)])
        self.log_scales = []

    def forward(self, z):
        log_det = z.new_zeros(len(z))
        self.log_scales = []
        for coupling in self.couplings:
            z, s = coupling(z)
            log_det = log_det + s.sum(-1)
            self.log_scales.append(s)
        log_base = -0.5 * (z ** 2).sum(-1) - 0.5 * D * math.log(2 * math.pi)
        return -(log_base + log_det)


class BitsPerDim(nn.Module):
    """A flow on standardised pixels read as a density of the dequantised pixels ``v``: per sample, bits per dimension
    (the standardisation's log-determinant added back). ``dequantise``: add ``U[0, 1)`` noise to integer pixels in
    training (for the stock trainers, whose val set arrives already dequantised)."""

    def __init__(self, flow: RealNVP, mean: torch.Tensor, std: torch.Tensor, dequantise: bool = False):
        super().__init__()
        self.flow, self.dequantise = flow, dequantise
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.log_det_std = float(torch.log(std).sum())

    def forward(self, x):
        if self.dequantise and self.training:
            x = x + torch.rand_like(x)
        return self.bits(self.flow((x - self.mean) / self.std) if self.dequantise else self.flow(x))

    def bits(self, nll_z: torch.Tensor) -> torch.Tensor:
        return (nll_z + self.log_det_std) / BITS


BASE = {"optimizer": "adam", "lr": 1e-3, "eps": 1e-8, "batch_size": 64, "weight_decay": 0.0, "init": "default",
        "n_couplings": 6, "hidden": 128, "depth": 3, "activation": "relu", "residual": False, "dropout": 0.0,
        "logscale_l2": 0.0, "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0,
        "clip": None, "max_steps": 400, "n_train": None, "early_stop": None, "raw_inputs": False}
# The base recipe was tried alone before any fault ran (the twin only): Adam 1e-3 ends at val 2.45 bits/dim at its best
# and still falling slowly; 3e-3 ends at 2.48, 1.5 % above its best. SGD momentum 0.9 for the SGD faults' twin, its lr
# picked by a sweep of that twin alone (400 steps, batch 64; last val bits/dim, and how far it ends above its best): lr
# 0.01 2.98 (0 %), 0.03 2.68 (0 %), 0.1 2.46 (0 %), 0.3 2.47 (1.5 %), 1.0 NaN by step 60. lr 0.1 is the twin, with the
# gradient clipping at 1.0 a practitioner adds to a flow trained by SGD.
SGD = {"optimizer": "sgd", "lr": 0.1, "clip": 1.0}


def model_name(cfg: dict) -> str:
    kind = ("-res" if cfg["residual"] else "-plain") if cfg["depth"] > 3 else ""
    cond = f"mlp{cfg['hidden']}x{cfg['depth']}{kind}-{cfg['activation']}"
    drop = f"-drop{cfg['dropout']:g}" if cfg["dropout"] else ""
    return f"realnvp-{cfg['n_couplings']}coupling-checkerboard-{cond}{drop}"


def grad_layers(cfg: dict) -> tuple[str, ...]:
    return tuple(f"couplings.{i}.net.layers.0.weight" for i in range(cfg["n_couplings"]))


def build_model(cfg: dict) -> RealNVP:
    seed_all(cfg["seed"])
    model = RealNVP(cfg["n_couplings"], cfg["hidden"], cfg["depth"], cfg["activation"], cfg["residual"], cfg["dropout"])
    return shrink_init(model, cfg["init"])


def flow_loss(cfg: dict, bits: BitsPerDim):
    """``loss_fn`` for :func:`.common.fit`: the mean bits/dim, or with a log-scale penalty (nll + coef * mean s^2,
    {"nll", "logscale_l2"}, the penalty with its coefficient)."""
    def fn(model, batch):
        nll = bits.bits(model(batch[0])).mean()
        if not cfg["logscale_l2"]:
            return nll
        penalty = cfg["logscale_l2"] * torch.stack([(s ** 2).mean() for s in model.log_scales]).mean()
        return nll + penalty, {"nll": nll, "logscale_l2": penalty}
    return fn


def loss_label(cfg: dict) -> str:
    label = "negative log-likelihood, bits/dim of the dequantised 17-level pixels"
    if cfg["logscale_l2"]:
        label += f" + {cfg['logscale_l2']:g} * mean(log_scale^2)"
    return label


def raw_shard(batch_ids: tuple[int, ...], mean: torch.Tensor, std: torch.Tensor):
    """A bad shard: the batches at these positions of each epoch were exported before the standardisation, so their
    (dequantised) pixels arrive in raw 0..17 units."""
    def wrap(batches, n_per_epoch):
        def gen(epoch):
            for k, (z, y) in enumerate(batches(epoch)):
                yield (z * std + mean if k in batch_ids else z), y
        return gen
    wrap.label = f"batches {list(batch_ids)} of every epoch in raw 0..16 pixel units (not standardised)"
    return wrap


def val_fn_for(model: RealNVP, zv: torch.Tensor, bits: BitsPerDim):
    def fn() -> float:
        model.eval()
        with torch.no_grad():
            loss = float(bits.bits(model(zv)).mean())
        model.train()
        return loss
    return fn


class Runs(FamilyRuns):
    """Trains runs, keeps their in-memory taps and fit results, and collects manifest entries."""

    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, over: dict, *, before_step=None, corrupt=None,
              val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **over}
        xt, xv = digits(cfg["seed"])
        if cfg["n_train"]:
            xt = xt[:cfg["n_train"]]
        mean, std = standardiser(xt, cfg["raw_inputs"])
        model = build_model(cfg)
        bits = BitsPerDim(model, mean, std)
        opt = make_optimizer(model.parameters(), cfg)
        batches = dequantised(batches_for(xt, torch.zeros(len(xt)), cfg, 0.001), mean, std, cfg["seed"])
        if corrupt is not None:
            batches = corrupt(batches, batches_per_epoch(cfg, len(xt)))
        val_fn = val_fn_for(model, (val_points(xv, cfg["seed"]) - mean) / std, bits)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(xt), n_val=len(xv), loss=loss_label(cfg),
                      task="density estimation (maximum likelihood)", loss_unit="bits/dim",
                      dequantisation="uniform U[0,1) per pixel, fresh per batch",
                      preprocessing="none (raw 0..17)" if cfg["raw_inputs"] else "per-pixel standardisation (train split)")
        describe_injections(logged, corrupt=corrupt, before_step=before_step)
        log = open_run(style, self.root, name, logged)
        res = fit(model, batches, flow_loss(cfg, bits), opt, log, epochs=100_000, naming=naming,
                  scheduler=make_scheduler(opt, cfg), val_fn=val_fn, val_every=val_every, log_every=log_every,
                  layer_grads=grad_layers(cfg), clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = Runs(root)
    book = TwinChecks(runs, only, default_twin="flow_twin_adam")
    want, twin_run, fault = book.wanted, book.twin, book.fault
    W = NAMES[book.naming]
    key, val_key = book.key, book.val_key
    osc, slow, boom = book.oscillation, book.slowness, book.explosion
    lr0, sgd = BASE["lr"], SGD["lr"]

    twin_run("flow_twin_adam", "wandb", {},
             f"A RealNVP flow (6 affine couplings, checkerboard masks, 64-128-128-128 ReLU conditioners) fitted by "
             f"maximum likelihood to the dequantised, standardised digits, batch 64, Adam {lr0:g}, 400 steps; loss in "
             "bits/dim: the sane twin (and the family's baseline).")
    twin_run("flow_twin_sgd", "mlflow", SGD,
             f"The same flow with SGD momentum 0.9 lr {sgd:g}, gradient clipping 1.0: the SGD faults' twin.")

    fault("flow_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 100 * lr0}, osc,
          f"Adam at lr {100 * lr0:g} (100x the twin's {lr0:g}).", style="parquet")
    fault("flow_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 30 * sgd}, osc,
          f"SGD momentum 0.9 at lr {30 * sgd:g} (30x the twin's {sgd:g}), clip 1.0.", style="csv",
          twin_name="flow_twin_sgd")
    fault("flow_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.03}, osc,
          "Batch 2 digits with Adam lr 0.03.", style="mlflow")
    # Changed once after its truth check: at Adam 1e-5 the zero-initialised output layers barely moved in 400 steps, so it
    # did not learn at all (fell 0.2 %), and the flat case's "ends >= 1.5x the twin" read 1.487x (a flow that never learns
    # sits at the standardised Gaussian's ~3.4 bits/dim, 1.49x the twin's 2.3). 1e-4 is the one change.
    fault("flow_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-4}, slow,
          f"Adam lr 1e-4 ({lr0 / 1e-4:g}x below the twin).", style="csv")
    fault("flow_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    # Changed once after its truth check: x1e-3 sat at the zero saddle for the whole run (fell -1.6 %; the flat case read
    # 1.485x the twin, short of 1.5x). x1e-2 is the one change, still unconfirmed: it too sat at the saddle (the zero
    # output layers get a gradient only through hidden units 1e-2 x 1e-2 of their size; the first conditioner layer's
    # gradient ~1e-7) and read the same 1.485x. Kept, not scored.
    fault("flow_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.01"}, slow,
          f"Every weight, bias and log-scale multiplier multiplied by 1e-2 at init, SGD momentum lr {sgd:g}, clip 1.0.",
          style="parquet", twin_name="flow_twin_sgd")
    fault("flow_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {sgd:g}, clip 1.0; at step 250 a restart multiplies the LR by 1000.", style="wandb",
          twin_name="flow_twin_sgd", before_step=lr_spike(250, 1000))
    fault("flow_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          f"Adam {lr0:g}; one pixel of one digit in the batch read at step 250 is NaN.", style="parquet",
          corrupt=nan_pixel_at(250))
    fault("flow_gradient_explosion_noclip", "gradient_explosion", ["nonfinite"], {**SGD, "lr": 100 * sgd, "clip": None},
          boom, f"SGD momentum lr {100 * sgd:g} (100x the twin's {sgd:g}), no gradient clipping.", style="wandb",
          twin_name="flow_twin_sgd")
    # Changed once after its truth check: with Adam 1e-3 against flow_twin_adam the raw pixels reached the twin's
    # quarter-run level 2.0x later (step 192 vs 96) and ended 1.08x above it (Adam's per-parameter scaling absorbs much of
    # the input scale). The one change is the same pixels under SGD momentum lr 0.1, clip 1.0, against the SGD twin,
    # still unconfirmed: 1.12x later (step 113 vs 101), ending 1.04x above it. Kept, not scored.
    fault("flow_raw_features", "features_not_normalised", ["slow-convergence"], {**SGD, "raw_inputs": True}, slow,
          f"Pixels dequantised but left in raw 0..17 units (never standardised), SGD momentum lr {sgd:g}, clip 1.0.",
          style="mlflow", twin_name="flow_twin_sgd")

    # Task imbalance, the flow way: the L2 penalty on the coupling layers' log-scales (RealNVP regularises its scales
    # with a coefficient of 5e-5) weighted 1e3, both terms logged beside the total, Adam. The small task is the NLL; the
    # twin is the same run with the coefficient 5e-5. Not confirmed and not changed: the penalty pins s near 0, which
    # leaves a volume-preserving (NICE-like) flow whose shifts still lower the NLL term 12.6 % (the twin's 32.9 %); no
    # larger coefficient takes the shifts away. Kept, not scored.
    stalled = lambda tap, twin, *_: truth.confirm_task_stalled(tap, twin, W["task"].format("nll"))
    if want("flow_logscale_penalty_too_large", "flow_twin_logscale_l2"):
        twin_run("flow_twin_logscale_l2", "csv", {"logscale_l2": 5e-5},
                 f"The flow with an L2 penalty of 5e-5 on its log-scales beside the NLL (both logged), Adam {lr0:g}: "
                 "the oversized penalty's twin.")
        fault("flow_logscale_penalty_too_large", "unscaled_aux_loss", ["task-imbalance"], {"logscale_l2": 1e3},
              stalled, "An L2 penalty on the coupling layers' log-scales weighted 1e3 (RealNVP's is 5e-5) beside the "
              f"NLL, both logged beside the total; Adam {lr0:g}.", style="parquet", twin_name="flow_twin_logscale_l2")

    # Bad shard, unshuffled: batches 8 and 9 of each epoch (digits 512..639 of the stored order) were exported before
    # the standardisation, in raw pixel units.
    shard = (8, 9)
    noshuf = {"shuffle": False}
    if want("flow_bad_shard_noshuffle", "flow_twin_noshuffle"):
        steps = shard_steps_for({**BASE, **noshuf}, shard, N_TRAIN)
        twin_run("flow_twin_noshuffle", "csv", noshuf,
                 f"Adam {lr0:g}, the digits in the stored order without shuffling, every pixel standardised: the bad "
                 "shard's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, steps)
            return ok, {**m, "spike_steps": steps}

        mean, std = standardiser(digits(SEED)[0], False)
        fault("flow_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], noshuf, spikes,
              "No shuffling; batches 8 and 9 of each epoch (digits 512..639 of the stored order) were exported in raw "
              "pixel units (never standardised).", style="parquet", twin_name="flow_twin_noshuffle",
              corrupt=raw_shard(shard, mean, std))

    # Vanishing gradients: each coupling's conditioner a 12-layer sigmoid MLP (64 wide) without residual connections;
    # its twin the same depth with residual connections around every hidden -> hidden layer.
    deep = {"depth": 12, "hidden": 64, "activation": "sigmoid"}
    if want("flow_vanishing_sigmoid_cond12", "flow_twin_residual_cond12"):
        twin_run("flow_twin_residual_cond12", "csv", {**deep, "residual": True},
                 f"Six couplings whose conditioners are 12-layer sigmoid MLPs (64 wide) with residual connections, Adam "
                 f"{lr0:g}: the vanishing run's twin.")
        fault("flow_vanishing_sigmoid_cond12", "vanishing_gradients", ["vanishing-gradients"], deep,
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin,
                                                            W["layer_grad"].format("couplings.0.net.layers.0.weight")),
              f"Six couplings whose conditioners are 12-layer plain sigmoid MLPs (64 wide, no residual connections), "
              f"default init, Adam {lr0:g}.", style="csv", twin_name="flow_twin_residual_cond12")

    # Slow loader: a real DataLoader whose dataset sleeps 1 ms per digit (slow storage), no workers.
    if want("flow_slow_loader", "flow_twin_fast_loader"):
        twin_run("flow_twin_fast_loader", "parquet", {"loader": "fast", "max_steps": 150},
                 f"Adam {lr0:g} through an in-memory DataLoader (TensorDataset, no workers): the slow loader's twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("flow_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.001, "max_steps": 150}, bottleneck,
              "Each digit takes 1 ms to arrive (SlowIODataset) through a DataLoader with no workers.", style="csv",
              twin_name="flow_twin_fast_loader")

    # Overfitting: 50 training digits, 256-wide conditioners, batches of 25, Adam for 1000 steps, no weight decay or
    # dropout; its twin is the same run regularised (dropout 0.3 in the conditioners, weight decay 1e-3).
    small = {"n_train": 50, "hidden": 256, "max_steps": 1000, "batch_size": 25}
    if want("flow_overfit_small_subset", "flow_twin_overfit_reg"):
        twin_run("flow_twin_overfit_reg", "csv", {**small, "dropout": 0.3, "weight_decay": 1e-3},
                 f"50 training digits, 256-wide conditioners, Adam {lr0:g} with weight decay 1e-3 and dropout 0.3, 1000 "
                 "steps: the overfitting run's twin.", log_every=2, val_every=50)
        fault("flow_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              f"50 training digits, 256-wide conditioners, Adam {lr0:g} for 1000 steps, no dropout or weight decay.",
              style="mlflow", twin_name="flow_twin_overfit_reg", log_every=2, val_every=50)

    healthy = [
        ("flow_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 2e-3}, {},
         "Adam 2e-3, a tenth of warm-up then cosine decay."),
        ("flow_step_decay_sgd", "mlflow", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, step decay x0.3 every third of the run."),
        ("flow_onecycle", "parquet", "wandb", {"schedule": "onecycle", "lr": 2e-3}, {},
         "Adam with a one-cycle schedule peaking at 2e-3."),
        ("flow_sgdr_restarts", "csv", "plain", {**SGD, "schedule": "sgdr"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, with cosine warm restarts every quarter of the run (SGDR)."),
        ("flow_early_stopping", "csv", "wandb", {"max_steps": 3000, "early_stop": 3}, {"log_every": 3},
         f"Adam {lr0:g} with early stopping (patience 3 epochs on the val bits/dim), at most 3000 steps."),
        ("flow_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 2.5e-4}, {},
         "Batch 4 digits with Adam lr 2.5e-4 (the twin's 1e-3 scaled by the square root of the batch ratio)."),
        ("flow_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         f"Adam {lr0:g}; logs every 3rd step and validates every 100."),
        ("flow_converged_idle", "parquet", "plain", {"max_steps": 1500}, {"log_every": 3, "val_every": 50},
         f"Adam {lr0:g} for 1500 steps: most of the fall comes in the first few hundred, then it idles."),
        ("flow_deep_10_couplings", "csv", "mlflow", {"n_couplings": 10}, {},
         f"A deeper flow: 10 affine couplings instead of 6, Adam {lr0:g}."),
        ("flow_wide_dropout", "parquet", "plain", {"hidden": 256, "dropout": 0.1}, {},
         f"256-wide conditioners with dropout 0.1, Adam {lr0:g}."),
    ]
    for name, style, naming, over, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, over, **kw)
            runs.add_unlabelled(name, style, f, c, cause="healthy", description=desc)
    if want("flow_hf_warmup_cosine"):
        runs.entries.append(_hf_run(root))
    if want("flow_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


def _mean_bits(out, y):
    return out.mean()


def _stock(cfg: dict):
    """(the flow wrapped to read integer pixels and dequantise them in training, (train, val) pairs): the val digits
    arrive with their fixed dequantisation draw; the targets are dummies (the loss needs none)."""
    xt, xv = digits(SEED)
    mean, std = standardiser(xt, False)
    model = BitsPerDim(build_model(cfg), mean, std, dequantise=True)
    vv = val_points(xv, SEED)
    return model, (xt, torch.zeros(len(xt))), (vv, torch.zeros(len(vv)))


def _hf_run(root: Path) -> dict:
    """A healthy run through transformers.Trainer (AdamW, linear warm-up then cosine, its default clip 1.0)."""
    name = "flow_hf_warmup_cosine"
    cfg = {**BASE, "seed": SEED}
    model, train, val = _stock(cfg)
    args = {"learning_rate": 1e-3, "weight_decay": 0.0, "lr_scheduler_type": "cosine", "warmup_steps": 40,
            "max_steps": 400, "per_device_train_batch_size": 64, "per_device_eval_batch_size": 400, "logging_steps": 2,
            "eval_steps": 20}
    f, _ = hf_trainer_run(root, name, model, _mean_bits, train, val, args, SEED)
    config = {**args, "optimizer": "adamw", "model": model_name(cfg), "dataset": DATASET, "seed": SEED,
              "trainer": "hf", "loss": loss_label(cfg), "loss_unit": "bits/dim", "n_couplings": cfg["n_couplings"]}
    return {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": "hf_trainer",
            "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": config,
            "truth": {}, "description": "transformers.Trainer: the 6-coupling RealNVP on the dequantised, standardised "
                                        "digits, batches of 64, AdamW 1e-3, 40 warm-up steps then cosine, 400 steps; "
                                        "loss = NLL in bits/dim; eval loss = the same on the 397 val digits; "
                                        "trainer_state.json."}


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 1e-3, step decay x0.3 every 150 steps."""
    name = "flow_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    model, (xt, yt), (xv, yv) = _stock(cfg)
    hp = {"optimizer": "adam", "lr": 1e-3, "batch_size": 64, "schedule": "step", "step_size": 150, "gamma": 0.3,
          "max_epochs": 18, "model": model_name(cfg), "dataset": DATASET, "seed": SEED, "loss": loss_label(cfg),
          "loss_unit": "bits/dim", "n_couplings": cfg["n_couplings"]}
    module = lightning_module(model, _mean_bits, lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp,
                              lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    g = torch.Generator().manual_seed(SEED)
    tl = DataLoader(TensorDataset(xt, yt), batch_size=64, shuffle=True, generator=g)
    vl = DataLoader(TensorDataset(xv, yv), batch_size=400)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: the 6-coupling RealNVP on the dequantised, standardised "
                           "digits, batches of 64, Adam 1e-3, step decay x0.3 every 150 steps, 18 epochs (validated "
                           "once per epoch: bits/dim on the 397 val digits); loss = NLL in bits/dim."}
