"""The diffusion family: a tiny DDPM-style denoising diffusion model on scikit-learn's 8x8 digits.

Each digit is flattened to 64 pixels scaled to [-1, 1] (raw 0..16 divided by 8, minus 1; seeded 1400/397 split).
The forward process is DDPM's: T = 1000 steps, betas linear from 1e-4 to 0.02, x_t = sqrt(abar_t) x_0 +
sqrt(1 - abar_t) eps. The model predicts eps from (x_t, t): a small MLP (``EpsNet``) whose input layer
(``layers.0``: 64 -> 128) is added to a time embedding (32 sinusoidal features of t through ``temb``, 32 -> 128 ->
128, SiLU), then three hidden layers of 128 (SiLU, each a residual block: h + act(W h)), then a linear output layer
back to 64. The training loss is the mean squared error between the predicted and the true noise, with one t drawn
uniformly per sample and fresh noise for every batch (the torch generator, seeded per run). The validation loss is
the same MSE on the 397 held-out digits with one fixed draw of (t, eps) per digit (a fixed-seed generator), so every
evaluation is comparable with the others. Module names put the input layer first in name order (``layers.0`` <
``layers.4`` < ``temb``); the logged per-layer gradient norms are the input, a middle and the output layer.

The task-imbalance pair adds an auxiliary head (``aux``, 128 -> 1 from the last hidden layer) that regresses the
timestep from x_t; its MSE is logged beside the eps MSE through :func:`.common.fit`'s task terms
(``train/loss_eps`` and ``train/loss_tpred`` under W&B names), the total being their sum.

Built blind to the detectors: settings are a practitioner's, and every fault run has a twin with the one setting put
right (same seed and data); the label is what :mod:`.truth` confirms against it. Two settings were changed once each
after seeing a truth result, said in a comment at the run: the explosion run's twin (first the same lr-5 run clipped,
which did not learn either; then the sane SGD twin, the LR being what puts it right) and the overfitting pair (first 50
digits for 1500 steps, neither run memorised; then 20 digits for 5000 steps, the twin also shifting the digits). That
pair is the family's slowest: ~95 s each on a loaded two-core machine (the rest take 1-10 s).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F

from . import truth
from .common import NAMES, early_stopping, fit, lr_spike, make_optimizer, make_scheduler, nan_pixel_at, seed_all
from .common import shrink_init
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .family_runs import FamilyRuns, batches_for, describe_injections
from .sinks import open_run

FAMILY = "diffusion"
SEED = 43
DATASET = "sklearn.load_digits"
N_TRAIN = 1400
N_PIXELS = 64
T_STEPS = 1000
TEMB = 32


def noise_schedule(kind: str = "linear") -> tuple[torch.Tensor, torch.Tensor]:
    """(sqrt(abar_t), sqrt(1 - abar_t)) for t = 0..T-1: DDPM's linear betas 1e-4..0.02, or the cosine schedule of
    Nichol & Dhariwal (s = 0.008, betas clipped at 0.999)."""
    if kind == "linear":
        betas = torch.linspace(1e-4, 0.02, T_STEPS, dtype=torch.float64)
    elif kind == "cosine":
        s = 0.008
        steps = torch.arange(T_STEPS + 1, dtype=torch.float64) / T_STEPS
        f = torch.cos((steps + s) / (1 + s) * math.pi / 2) ** 2
        betas = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    else:
        raise ValueError(f"unknown noise schedule {kind!r}")
    abar = torch.cumprod(1 - betas, 0)
    return abar.sqrt().float(), (1 - abar).sqrt().float()


def digit_rows(seed: int, n_train: int | None = None, raw_rows: tuple[int, int] | None = None):
    """(train, val) as (n, 64) float rows in [-1, 1]. ``raw_rows`` [lo, hi) leaves that contiguous block of training
    rows in the raw 0..16 pixel units (a shard exported before the scaling step). Validation stays clean."""
    raw = load_digits().data.astype(np.float32)
    perm = np.random.default_rng(seed).permutation(len(raw))
    train_idx, val_idx = perm[:N_TRAIN], perm[N_TRAIN:]
    if n_train is not None:
        train_idx = train_idx[:n_train]
    scaled = raw / 8.0 - 1.0
    train = scaled[train_idx].copy()
    if raw_rows is not None:
        lo, hi = raw_rows
        train[lo:hi] = raw[train_idx[lo:hi]]
    return torch.from_numpy(train), torch.from_numpy(scaled[val_idx].copy())


def timestep_features(t: torch.Tensor, dim: int = TEMB) -> torch.Tensor:
    """The transformer's sinusoidal position features of the integer timestep (dim/2 sines, dim/2 cosines)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=torch.float32) / half)
    angles = t.float()[:, None] * freqs[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


ACTS = {"silu": nn.SiLU, "relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


class EpsNet(nn.Module):
    """``layers.0`` (64 -> width) plus the time embedding, ``depth`` hidden layers (residual blocks h + act(W h) when
    ``residual``), a linear output layer to 64; ``aux`` adds a 1-unit head on the last hidden layer."""

    def __init__(self, width: int = 128, depth: int = 3, activation: str = "silu", residual: bool = True,
                 dropout: float = 0.0, aux: bool = False):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(N_PIXELS, width)] + [nn.Linear(width, width) for _ in range(depth)]
                                    + [nn.Linear(width, N_PIXELS)])
        self.temb = nn.Sequential(nn.Linear(TEMB, width), nn.SiLU(), nn.Linear(width, width))
        self.act, self.residual, self.drop = ACTS[activation](), residual, nn.Dropout(dropout)
        self.aux = nn.Linear(width, 1) if aux else None

    def trunk(self, x, t):
        h = self.act(self.layers[0](x) + self.temb(timestep_features(t)))
        for layer in self.layers[1:-1]:
            z = self.drop(self.act(layer(h)))
            h = h + z if self.residual else z
        return h

    def forward(self, x, t):
        return self.layers[-1](self.trunk(x, t))

    def forward_aux(self, x, t):
        h = self.trunk(x, t)
        return self.layers[-1](h), self.aux(h).squeeze(1)


BASE = {"optimizer": "adam", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "width": 128, "depth": 3, "activation": "silu", "residual": True, "dropout": 0.0, "noise_schedule": "linear",
        "aux_target": None, "aux_weight": 1.0, "augment": None, "schedule": "constant", "shuffle": True, "loader": "memory",
        "num_workers": 0, "clip": None, "max_steps": 400, "n_train": None, "early_stop": None}
# SGD momentum 0.9 for the SGD faults' twin; lr picked by training the twin alone before any fault was run (400 steps,
# final train level: lr 0.01 0.56, 0.03 0.22, 0.1 0.19, 0.3 0.18, 1.0 0.27; Adam 1e-3 0.20). Since lr 1.0 trained
# stably unclipped, the SGD LR-too-high and explosion runs were set above it (20x and 50x) before either was run.
SGD = {"optimizer": "sgd", "lr": 0.1}


def model_name(cfg: dict) -> str:
    kind = "res" if cfg["residual"] else "plain"
    name = f"ddpm-epsmlp-{cfg['width']}x{cfg['depth']}-{kind}-{cfg['activation']}"
    return name + (f"-drop{cfg['dropout']:g}" if cfg["dropout"] else "") + ("-auxt" if cfg["aux_target"] else "")


def grad_layers(cfg: dict) -> tuple[str, ...]:
    """The input layer, a middle hidden layer and the output layer (model order)."""
    n = cfg["depth"] + 1
    return tuple(dict.fromkeys(f"layers.{i}.weight" for i in (0, (n + 1) // 2, n)))


def build_model(cfg: dict) -> EpsNet:
    seed_all(cfg["seed"])
    model = EpsNet(cfg["width"], cfg["depth"], cfg["activation"], cfg["residual"], cfg["dropout"],
                   aux=cfg["aux_target"] is not None)
    if cfg["init"] == "he" or cfg["init"].startswith("normal:"):
        for m in model.modules():
            if isinstance(m, nn.Linear):
                if cfg["init"] == "he":
                    nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                else:  # "normal:S": every Linear weight drawn from N(0, S^2) whatever its fan-in
                    nn.init.normal_(m.weight, std=float(cfg["init"].split(":")[1]))
                nn.init.zeros_(m.bias)
    return shrink_init(model, cfg["init"])


def diffuse(x0: torch.Tensor, t: torch.Tensor, eps: torch.Tensor, schedule) -> torch.Tensor:
    a, b = schedule
    return a[t][:, None] * x0 + b[t][:, None] * eps


def diffusion_loss(cfg: dict):
    """``loss_fn`` for :func:`.common.fit`: the eps MSE at one uniform t per sample (torch's global generator); with
    an auxiliary timestep head, (eps MSE + weight * aux MSE, {"eps", "tpred"}). The aux target is t / T
    (``aux_target`` "scaled") or t itself, 0..999 (``raw``)."""
    schedule = noise_schedule(cfg["noise_schedule"])

    def fn(model, batch):
        x0 = batch[0]
        t = torch.randint(0, T_STEPS, (len(x0),))
        eps = torch.randn_like(x0)
        xt = diffuse(x0, t, eps, schedule)
        if cfg["aux_target"] is None:
            return F.mse_loss(model(xt, t), eps)
        pred, t_hat = model.forward_aux(xt, t)
        target = t.float() / T_STEPS if cfg["aux_target"] == "scaled" else t.float()
        eps_loss, aux_loss = F.mse_loss(pred, eps), F.mse_loss(t_hat, target)
        return eps_loss + cfg["aux_weight"] * aux_loss, {"eps": eps_loss, "tpred": aux_loss}
    return fn


def fixed_val_draw(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One (t, eps) per held-out digit, from a fixed-seed generator: every evaluation uses the same draw."""
    g = torch.Generator().manual_seed(seed + 97)
    t = torch.randint(0, T_STEPS, (n,), generator=g)
    return t, torch.randn(n, N_PIXELS, generator=g)


def val_fn_for(model: EpsNet, xv: torch.Tensor, cfg: dict):
    """The eps MSE on the held-out digits at the fixed (t, eps) draw, in eval mode."""
    schedule = noise_schedule(cfg["noise_schedule"])
    t, eps = fixed_val_draw(len(xv), cfg["seed"])
    xt = diffuse(xv, t, eps, schedule)

    def fn() -> float:
        model.eval()
        with torch.no_grad():
            loss = F.mse_loss(model(xt, t), eps).item()
        model.train()
        return loss
    return fn


def shifted(batches, seed: int):
    """Each digit of every training batch moved by a random whole pixel in each direction (-1, 0 or +1), the pixels
    it uncovers set to the background (-1); drawn per batch from a generator seeded per epoch."""
    def gen(epoch):
        g = torch.Generator().manual_seed(seed * 7919 + epoch)
        for x, y in batches(epoch):
            img = F.pad(x.view(-1, 8, 8), (1, 1, 1, 1), value=-1.0)
            dy, dx = torch.randint(0, 3, (2, len(x)), generator=g)
            out = torch.stack([img[i, dy[i]:dy[i] + 8, dx[i]:dx[i] + 8] for i in range(len(x))])
            yield out.reshape(len(x), N_PIXELS), y
    return gen


class Runs(FamilyRuns):
    """Trains runs, keeps their in-memory taps and fit results, and collects manifest entries."""

    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, over: dict, *, before_step=None, corrupt=None,
              raw_rows: tuple[int, int] | None = None, val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **over}
        xt, xv = digit_rows(cfg["seed"], cfg["n_train"], raw_rows)
        model = build_model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for(xt, xt, cfg, default_delay_s=0.001)
        if cfg["augment"] == "shift1":
            batches = shifted(batches, cfg["seed"])
        if corrupt is not None:
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
        val_fn = val_fn_for(model, xv, cfg)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        loss = "eps_mse" + ({"raw": "+tpred_mse(t in 0..999)", "scaled": "+tpred_mse(t/T)"}[cfg["aux_target"]]
                            if cfg["aux_target"] else "")
        logged = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(xt), loss=loss, diffusion_steps=T_STEPS)
        describe_injections(logged, corrupt=corrupt, before_step=before_step, raw_unit_rows=raw_rows)
        log = open_run(style, self.root, name, logged)
        res = fit(model, batches, diffusion_loss(cfg), opt, log, epochs=100_000, naming=naming,
                  scheduler=make_scheduler(opt, cfg), val_fn=val_fn, val_every=val_every, log_every=log_every,
                  layer_grads=grad_layers(cfg), clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = Runs(root)
    want = (lambda *n: True) if only is None else (lambda *n: any(x in only for x in n))
    W = NAMES["wandb"]
    key, val_key, grad_key = W["loss"], W["val_loss"], W["grad_norm"]

    def twin_run(name, style, over, description, **kw):
        f, c = runs.train(name, style, "wandb", over, **kw)
        runs.add(name, style, f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
                 description=description)

    twin_run("diffusion_twin_adam", "wandb", {},
             "DDPM eps-prediction MLP (128 wide, 3 residual SiLU blocks, sinusoidal time embedding), Adam 1e-3, "
             "batch 32: the sane twin.")
    twin_run("diffusion_twin_sgd", "mlflow", SGD,
             f"The same eps-prediction MLP with SGD momentum 0.9 lr {SGD['lr']:g}, batch 32: the SGD faults' twin.")

    def fault(name, cause, intended, over, check, description, style="wandb", twin_name="diffusion_twin_adam", **kw):
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

    fault("diffusion_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 0.1}, osc,
          "Adam at lr 0.1 (100x the twin's).", style="parquet")
    fault("diffusion_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 20 * SGD["lr"]}, osc,
          f"SGD momentum 0.9 at lr {20 * SGD['lr']:g} (20x the twin's {SGD['lr']:g}).", style="csv",
          twin_name="diffusion_twin_sgd")
    fault("diffusion_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.01}, osc,
          "Batch 2 (two digits, two timesteps per step) with Adam lr 0.01.", style="mlflow")
    fault("diffusion_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          "Adam lr 1e-5 (100x below the twin).", style="csv")
    fault("diffusion_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    fault("diffusion_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          f"Every weight and bias multiplied by 1e-3 at init, SGD momentum lr {SGD['lr']:g}.", style="parquet",
          twin_name="diffusion_twin_sgd")
    fault("diffusion_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {SGD['lr']:g}, unclipped; at step 200 a restart multiplies the LR by 1000.", style="wandb",
          twin_name="diffusion_twin_sgd", before_step=lr_spike(200, 1000))
    fault("diffusion_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          "Adam 1e-3; one pixel of one digit in the batch at step 250 is NaN.", style="mlflow",
          corrupt=nan_pixel_at(250))

    # Gradient explosion: SGD momentum at 50x the twin's LR, no clipping (nor does the twin clip): the loss and the
    # gradient norm run away to NaN. Changed once after seeing the truth: its twin was first the same lr-5 run with the
    # gradient norm clipped at 1.0 (the NaN confirmed the explosion at step 14, but that clipped twin did not learn: a
    # blow-up to ~1e5 then flat at 1.03, the predict-zero level, against the lr-0.1 twin's 0.18; a sweep of clipped
    # twins alone at lr 2, 3, 4 ended flat at ~1.0 too, and a too-large N(0, 0.15^2) init that clipping would tame gave
    # a clipped twin whose own first gradients reach 180x its median). Clipping is not what puts this run right here;
    # the LR is, so the twin is the sane SGD run and the clipped lr-5 run is not kept.
    fault("diffusion_gradient_explosion_high_lr", "gradient_explosion", ["nonfinite"], {**SGD, "lr": 50 * SGD["lr"]},
          boom, f"SGD momentum lr {50 * SGD['lr']:g} (50x the twin's {SGD['lr']:g}), no gradient clipping: the loss "
          "and the gradient norm run away.", style="wandb", twin_name="diffusion_twin_sgd")

    # Task imbalance: an auxiliary head regresses the timestep, its target left as the raw t in 0..999 (MSE ~3e5 at
    # start) instead of t / T, beside the eps MSE (~1); SGD momentum with the usual clip at norm 1.0, so the clipped
    # step is all timestep regression. The twin regresses t / T under the same SGD and clip.
    imb = {**SGD, "clip": 1.0}
    if want("diffusion_unscaled_aux_loss", "diffusion_twin_aux_scaled"):
        twin_run("diffusion_twin_aux_scaled", "csv", {**imb, "aux_target": "scaled"},
                 f"Eps MSE + an auxiliary timestep head regressing t / T, SGD momentum lr {SGD['lr']:g}, clip 1.0: "
                 "the unscaled auxiliary loss's twin.")

        def stalled(tap, twin, *_):
            return truth.confirm_task_stalled(tap, twin, W["task"].format("eps"))

        fault("diffusion_unscaled_aux_loss", "unscaled_aux_loss", ["task-imbalance"], {**imb, "aux_target": "raw"},
              stalled, "An auxiliary timestep head regressing the raw t (0..999, not t / T) beside the eps MSE, both "
              f"logged beside the total; SGD momentum lr {SGD['lr']:g}, clip 1.0.", style="parquet",
              twin_name="diffusion_twin_aux_scaled")

    # Bad shard, unshuffled: training rows 640..703 were exported before the scaling step (raw 0..16 pixel units, not
    # [-1, 1]); without shuffling they are batches 21-22 (1-based) of every 44-batch epoch. Its twin is the same
    # unshuffled run on clean digits.
    per_epoch = -(-N_TRAIN // BASE["batch_size"])
    shard = (640, 704)
    shard_steps = [float(ep * per_epoch + k + 1) for ep in range(1, 10) for k in (20, 21)
                   if ep * per_epoch + k + 1 <= BASE["max_steps"]]
    if want("diffusion_bad_shard_noshuffle", "diffusion_twin_noshuffle"):
        twin_run("diffusion_twin_noshuffle", "csv", {"shuffle": False},
                 "Adam 1e-3, no shuffling, every digit scaled: the bad shard's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, shard_steps)
            return ok, {**m, "spike_steps": shard_steps}

        fault("diffusion_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], {"shuffle": False}, spikes,
              "No shuffling; training rows 640..703 were left in raw 0..16 pixel units (never scaled to [-1, 1]), met "
              "at batches 21-22 of every epoch.", style="parquet", twin_name="diffusion_twin_noshuffle", raw_rows=shard)

    # Vanishing gradients: 12 Linear layers (input, 10 hidden, output), sigmoid between them, default init, no
    # residual connections; its twin is the family's own block at the same depth (SiLU residual blocks).
    deep = {"depth": 10}
    if want("diffusion_vanishing_sigmoid12", "diffusion_twin_residual12"):
        twin_run("diffusion_twin_residual12", "mlflow", deep,
                 "The eps-prediction MLP with 10 residual SiLU blocks (12 Linear layers), Adam 1e-3: the vanishing "
                 "run's twin.")
        fault("diffusion_vanishing_sigmoid12", "vanishing_gradients", ["vanishing-gradients"],
              {**deep, "activation": "sigmoid", "residual": False},
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, W["layer_grad"].format("layers.0.weight")),
              "A 12-layer plain sigmoid stack (no residual connections), default init, Adam 1e-3.",
              style="csv", twin_name="diffusion_twin_residual12")

    # Slow loader: a real DataLoader whose dataset sleeps 1 ms per digit (slow storage), no workers.
    if want("diffusion_slow_loader", "diffusion_twin_fast_loader"):
        twin_run("diffusion_twin_fast_loader", "mlflow", {"loader": "fast", "max_steps": 300},
                 "Adam 1e-3 through an in-memory DataLoader (no workers): the slow loader's twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("diffusion_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.001, "max_steps": 300}, bottleneck,
              "Each digit takes 1 ms to arrive (SlowIODataset) through a DataLoader with no workers.",
              style="csv", twin_name="diffusion_twin_fast_loader")

    # Overfitting: 20 training digits, a wider and deeper eps-net (512 wide, 4 blocks), Adam 1e-3 for 5000 steps, no
    # regularisation; its twin adds AdamW weight decay 0.1, dropout 0.3 and random 1-pixel shifts of each digit (the
    # augmentation small-data diffusion training uses). Changed once after seeing the truth: 50 digits for 1500 steps
    # first, the twin without shifts (neither memorised: both val losses ended at 0.174, the fault's still falling),
    # then 20 digits for 5000 steps, the twin with the shifts.
    small = {"n_train": 20, "width": 512, "depth": 4, "max_steps": 5000}
    if want("diffusion_overfit_small_subset", "diffusion_twin_overfit_reg"):
        twin_run("diffusion_twin_overfit_reg", "csv", {**small, "optimizer": "adamw", "weight_decay": 0.1,
                                                       "dropout": 0.3, "augment": "shift1"},
                 "20 training digits, the 512-wide 4-block eps-net, AdamW weight decay 0.1, dropout 0.3, random 1-pixel "
                 "shifts: the overfitting run's twin.", log_every=5, val_every=50)
        fault("diffusion_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              "20 training digits, a 512-wide 4-block eps-net, Adam 1e-3 for 5000 steps, no weight decay, dropout or "
              "augmentation.", style="mlflow", twin_name="diffusion_twin_overfit_reg", log_every=5, val_every=50)

    healthy = [
        ("diffusion_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 3e-3}, {},
         "Adam 3e-3, a tenth of warm-up then cosine decay."),
        ("diffusion_step_decay_sgd", "mlflow", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {SGD['lr']:g}, step decay x0.3 every third of the run."),
        ("diffusion_sgdr_restarts", "wandb", "wandb", {"lr": 3e-3, "schedule": "sgdr"}, {},
         "Adam 3e-3 with cosine warm restarts every 100 steps."),
        ("diffusion_onecycle_sgd", "parquet", "plain", {**SGD, "lr": 2 * SGD["lr"], "schedule": "onecycle"}, {},
         f"SGD momentum with a one-cycle LR peaking at {2 * SGD['lr']:g}."),
        ("diffusion_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 3e-4}, {},
         "Batch 4 with Adam lr 3e-4."),
        ("diffusion_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "Adam 1e-3; logs every 3rd step and validates every 100."),
        ("diffusion_converged_idle", "wandb", "plain", {"max_steps": 1500}, {"log_every": 3},
         "Adam 1e-3 for 1500 steps: most of the fall comes in a few hundred, then it idles."),
        ("diffusion_early_stopping", "mlflow", "wandb", {"max_steps": 3000, "early_stop": 3}, {"log_every": 3},
         "Adam 1e-3 with early stopping (patience 3 epochs on the val loss), at most 3000 steps."),
        ("diffusion_cosine_noise_schedule", "wandb", "mlflow", {"noise_schedule": "cosine"}, {},
         "Adam 1e-3 with the cosine noise schedule (Nichol & Dhariwal) instead of DDPM's linear betas: another loss "
         "level by design."),
    ]
    for name, style, naming, over, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, over, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={},
                     description=desc)
    if want("diffusion_hf_warmup_cosine"):
        runs.entries.append(_hf_run(root))
    if want("diffusion_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


class _Noised(nn.Module):
    """The eps-net for trainers that call ``loss(model(x), y)``: a (N, 64) batch of digits is noised here at one
    uniform t per sample (torch's global generator, which the trainer seeds); a (N, 129) batch carries its own fixed
    eps and t after the pixels (the validation draw). Returns the predicted and the true noise side by side."""

    def __init__(self, net: EpsNet, schedule):
        super().__init__()
        self.net = net
        self.register_buffer("a", schedule[0])
        self.register_buffer("b", schedule[1])

    def forward(self, x):
        if x.shape[1] == N_PIXELS:
            x0 = x
            t = torch.randint(0, T_STEPS, (len(x0),))
            eps = torch.randn_like(x0)
        else:
            x0, eps, t = x[:, :N_PIXELS], x[:, N_PIXELS:2 * N_PIXELS], x[:, -1].long()
        xt = self.a[t][:, None] * x0 + self.b[t][:, None] * eps
        return torch.cat([self.net(xt, t), eps], dim=1)


def _packed_mse(out, _y=None):
    return F.mse_loss(out[:, :N_PIXELS], out[:, N_PIXELS:])


def _val_rows(xv: torch.Tensor) -> torch.Tensor:
    t, eps = fixed_val_draw(len(xv), SEED)
    return torch.cat([xv, eps, t.float()[:, None]], dim=1)


def _hf_run(root: Path) -> dict:
    """A healthy run through transformers.Trainer (AdamW, linear warm-up then cosine, its default clip 1.0)."""
    name = "diffusion_hf_warmup_cosine"
    cfg = {**BASE, "seed": SEED}
    xt, xv = digit_rows(SEED)
    model = _Noised(build_model(cfg), noise_schedule("linear"))
    args = {"learning_rate": 3e-3, "weight_decay": 0.0, "lr_scheduler_type": "cosine", "warmup_steps": 40,
            "max_steps": 400, "per_device_train_batch_size": 32, "per_device_eval_batch_size": 400, "logging_steps": 2,
            "eval_steps": 20}
    zeros = lambda n: torch.zeros(n)
    f, _ = hf_trainer_run(root, name, model, _packed_mse, (xt, zeros(len(xt))), (_val_rows(xv), zeros(len(xv))),
                          args, SEED)
    config = {**args, "optimizer": "adamw", "model": model_name(cfg), "dataset": DATASET, "seed": SEED,
              "trainer": "hf", "loss": "eps_mse", "diffusion_steps": T_STEPS, "noise_schedule": "linear"}
    return {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": "hf_trainer",
            "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": config,
            "truth": {}, "description": "transformers.Trainer: AdamW 3e-3, 40 warm-up steps then cosine, 400 steps; "
                                        "eval loss on a fixed (t, eps) draw; trainer_state.json."}


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 1e-3, step decay x0.3 every 150 steps."""
    name = "diffusion_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    xt, xv = digit_rows(SEED)
    model = _Noised(build_model(cfg), noise_schedule("linear"))
    hp = {"optimizer": "adam", "lr": 1e-3, "batch_size": 32, "schedule": "step", "step_size": 150, "gamma": 0.3,
          "max_epochs": 10, "model": model_name(cfg), "dataset": DATASET, "seed": SEED, "loss": "eps_mse",
          "diffusion_steps": T_STEPS, "noise_schedule": "linear"}
    module = lightning_module(model, _packed_mse, lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp,
                              lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    g = torch.Generator().manual_seed(SEED)
    zeros = lambda n: torch.zeros(n)
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, zeros(len(xt))), batch_size=32, shuffle=True,
                                     generator=g)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(_val_rows(xv), zeros(len(xv))), batch_size=400)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: Adam 1e-3, step decay x0.3 every 150 steps, 10 epochs "
                           "(validated once per epoch on a fixed (t, eps) draw)."}
