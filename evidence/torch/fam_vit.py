"""The vit family: a tiny Vision Transformer on scikit-learn's 8x8 digits.

Each image is cut into four 4x4 patches (a strided convolution, ``embeddings.patch_embeddings.projection``), a
learned CLS token and learned position embeddings are added, four pre-LayerNorm encoder blocks (multi-head
self-attention and a GELU MLP, each with its residual) follow, then a final LayerNorm and a linear head on the
CLS token. Parameters are named as Hugging Face names a ViT (``embeddings``, ``encoder.layer.N``, ``layernorm``)
with the classifier called ``head``, so name order is model order for the layers whose gradient norms are logged.
Weights start as timm starts a ViT (truncated normal, std 0.02). The recipe is the usual one for a ViT: AdamW
lr 1e-3, weight decay 0.05, a tenth of linear warm-up then cosine decay, batch 32.

Added after the resnet family and built blind to the detectors: settings are what a practitioner would configure,
and every fault run has a twin with the one setting put right (same seed and data); the label is what
:mod:`.truth` confirms against it. Scored once, held out.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

from . import truth
from .common import (NAMES, corrupt_nan_at, early_stopping, fit, lr_spike, make_optimizer, make_scheduler,
                     seed_all, shrink_init)
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .family_runs import FamilyRuns, batches_for, describe_injections
from .sinks import open_run

FAMILY = "vit"
SEED = 31
DATASET = "sklearn.load_digits"
N_TRAIN = 1400


def digits(seed: int, n_train: int | None = None, label_noise: float = 0.0, bad_shard: tuple[int, int] | None = None,
           raw: bool = False, ink: str | None = None):
    """Seeded 1400/397 split as (n, 1, 8, 8) images, standardised with the training split's pixel mean and std
    unless ``raw`` (the 0..16 pixel counts as the dataset ships them). ``label_noise`` re-draws that fraction of
    the training labels uniformly; ``bad_shard`` [lo, hi) shifts the labels of a contiguous block of training rows
    by 5 (a shard written with the wrong label map). ``ink`` adds a second target, each image's total ink (the sum
    of its raw pixels): "raw" in pixel units (~100-500), "std" standardised on the training split; the targets
    are then [digit, ink] float columns. Validation stays clean."""
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:N_TRAIN], order[N_TRAIN:]
    if n_train is not None:
        tr = tr[:n_train]
    x = x.astype(np.float32)
    total_ink = x.sum(1)
    if not raw:
        mu, sd = x[tr].mean(), x[tr].std()
        x = (x - mu) / sd
    x = x.reshape(-1, 1, 8, 8)
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
    if ink is None:
        return f(x[tr]), i(yt), f(x[va]), i(y[va])
    rt, rv = total_ink[tr], total_ink[va]
    if ink == "std":
        mu, sd = rt.mean(), rt.std()
        rt, rv = (rt - mu) / sd, (rv - mu) / sd
    return f(x[tr]), f(np.stack([yt, rt], 1)), f(x[va]), f(np.stack([y[va], rv], 1))


class PatchEmbeddings(nn.Module):
    """Non-overlapping ``patch`` x ``patch`` patches, each projected to ``dim`` (a strided convolution)."""

    def __init__(self, patch: int, dim: int):
        super().__init__()
        self.projection = nn.Conv2d(1, dim, patch, patch)

    def forward(self, x):
        return self.projection(x).flatten(2).transpose(1, 2)


class Embeddings(nn.Module):
    """Patch embeddings with a learned CLS token in front and learned position embeddings added."""

    def __init__(self, patch: int, dim: int, dropout: float):
        super().__init__()
        self.patch_embeddings = PatchEmbeddings(patch, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.position_embeddings = nn.Parameter(torch.zeros(1, (8 // patch) ** 2 + 1, dim))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        h = self.patch_embeddings(x)
        h = torch.cat([self.cls_token.expand(len(h), -1, -1), h], 1) + self.position_embeddings
        return self.dropout(h)


class Attention(nn.Module):
    """Multi-head self-attention: one fused query/key/value projection, scaled dot product, output projection."""

    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), -1)
        return self.dropout(self.proj((attn @ v).transpose(1, 2).reshape(b, n, d)))


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int, act: type[nn.Module], dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = act()
        self.fc2 = nn.Linear(hidden, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.fc2(self.dropout(self.act(self.fc1(x)))))


class Block(nn.Module):
    """A pre-LayerNorm encoder block (x + attn(LN(x)), then x + mlp(LN(x))); ``plain`` drops the LayerNorms and the
    residuals (x = attn(x), then x = mlp(x)): the block as a plain feed-forward stack."""

    def __init__(self, dim: int, heads: int, hidden: int, act: type[nn.Module], dropout: float, plain: bool = False):
        super().__init__()
        self.layernorm_before = nn.Identity() if plain else nn.LayerNorm(dim)
        self.attention = Attention(dim, heads, dropout)
        self.layernorm_after = nn.Identity() if plain else nn.LayerNorm(dim)
        self.mlp = MLP(dim, hidden, act, dropout)
        self.residual = not plain

    def forward(self, x):
        a = self.attention(self.layernorm_before(x))
        x = x + a if self.residual else a
        m = self.mlp(self.layernorm_after(x))
        return x + m if self.residual else m


class Encoder(nn.Module):
    def __init__(self, depth: int, *args, **kw):
        super().__init__()
        self.layer = nn.ModuleList(Block(*args, **kw) for _ in range(depth))

    def forward(self, x):
        for block in self.layer:
            x = block(x)
        return x


ACTS = {"gelu": nn.GELU, "sigmoid": nn.Sigmoid}


class TinyViT(nn.Module):
    """Patch + CLS + position embeddings, ``depth`` encoder blocks, final LayerNorm, a linear head on the CLS token;
    ``ink`` adds a second head beside it that regresses the image's total ink."""

    def __init__(self, patch: int = 4, dim: int = 64, depth: int = 4, heads: int = 4, mlp_dim: int = 128,
                 dropout: float = 0.0, block: str = "pre_ln", ink: bool = False):
        super().__init__()
        plain = block == "plain_sigmoid"
        self.embeddings = Embeddings(patch, dim, dropout)
        self.encoder = Encoder(depth, dim, heads, mlp_dim, ACTS["sigmoid" if plain else "gelu"], dropout, plain)
        self.layernorm = nn.Identity() if plain else nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)
        self.ink_head = nn.Linear(dim, 1) if ink else None
        # timm's ViT init: truncated normal (std 0.02) for every Linear and the position embeddings, zero biases,
        # a near-zero CLS token; the patch projection keeps PyTorch's default.
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        nn.init.trunc_normal_(self.embeddings.position_embeddings, std=0.02)
        nn.init.normal_(self.embeddings.cls_token, std=1e-6)

    def forward(self, x):
        cls = self.layernorm(self.encoder(self.embeddings(x)))[:, 0]
        if self.ink_head is None:
            return self.head(cls)
        return self.head(cls), self.ink_head(cls).squeeze(1)


BASE = {"optimizer": "adamw", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.05, "init": "default",
        "patch": 4, "dim": 64, "depth": 4, "heads": 4, "mlp_dim": 128, "dropout": 0.0, "block": "pre_ln",
        "schedule": "warmup_cosine", "shuffle": True, "loader": "memory", "num_workers": 0, "clip": None,
        "max_steps": 400, "n_train": None, "label_noise": 0.0, "early_stop": None, "raw_pixels": False, "ink": None}
SGD = {"optimizer": "sgd", "lr": 0.05, "weight_decay": 5e-4, "schedule": "constant"}


def layers(depth: int) -> tuple[str, ...]:
    """Patch projection, first attention, last MLP, head: model order (and name order puts the patch projection
    first, as the recheck expects)."""
    return ("embeddings.patch_embeddings.projection.weight", "encoder.layer.0.attention.qkv.weight",
            f"encoder.layer.{depth - 1}.mlp.fc2.weight", "head.weight")


def model_name(cfg: dict) -> str:
    name = f"vit-p{cfg['patch']}-d{cfg['dim']}x{cfg['depth']}h{cfg['heads']}"
    if cfg["block"] != "pre_ln":
        name += "-" + cfg["block"].replace("_", "-")
    return name + ("+ink" if cfg["ink"] else "")


def _model(cfg: dict) -> TinyViT:
    seed_all(cfg["seed"])
    model = TinyViT(cfg["patch"], cfg["dim"], cfg["depth"], cfg["heads"], cfg["mlp_dim"], cfg["dropout"], cfg["block"],
                    ink=cfg["ink"] is not None)
    return shrink_init(model, cfg["init"])


def _terms(model: nn.Module, x: torch.Tensor, y: torch.Tensor, ink: bool):
    """(total loss, per-task losses or None): cross-entropy, plus the ink head's MSE when it has one."""
    if not ink:
        return nn.functional.cross_entropy(model(x), y), None
    logits, pred = model(x)
    parts = {"digit": nn.functional.cross_entropy(logits, y[:, 0].long()), "ink": nn.functional.mse_loss(pred, y[:, 1])}
    return parts["digit"] + parts["ink"], parts


def _val_loss_fn(model: nn.Module, xv: torch.Tensor, yv: torch.Tensor, ink: bool):
    def fn() -> float:
        model.eval()
        with torch.no_grad():
            loss = _terms(model, xv, yv, ink)[0].item()
        model.train()
        return loss
    return fn


class _Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, cfg: dict, *, before_step=None, corrupt=None,
              bad_shard: tuple[int, int] | None = None, val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **cfg}
        ink = cfg["ink"] is not None
        xt, yt, xv, yv = digits(cfg["seed"], cfg["n_train"], cfg["label_noise"], bad_shard, cfg["raw_pixels"], cfg["ink"])
        model = _model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for(xt, yt, cfg, default_delay_s=0.0005)
        if corrupt is not None:
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
        val_fn = _val_loss_fn(model, xv, yv, ink)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged_cfg = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(xt))
        if ink:
            logged_cfg["tasks"] = ["digit", "ink"]
        describe_injections(logged_cfg, corrupt=corrupt, before_step=before_step, bad_shard_rows=bad_shard)

        def loss_fn(m, b):
            total, parts = _terms(m, b[0], b[1], ink)
            return total if parts is None else (total, parts)

        log = open_run(style, self.root, name, logged_cfg)
        res = fit(model, batches, loss_fn, opt, log, epochs=10_000, naming=naming, scheduler=make_scheduler(opt, cfg),
                  val_fn=val_fn, val_every=val_every, log_every=log_every, layer_grads=layers(cfg["depth"]),
                  clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        logged_cfg["steps_trained"] = res.steps
        return file, logged_cfg


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda *n: True) if only is None else (lambda *n: any(x in only for x in n))
    W = NAMES["wandb"]
    key, val_key, grad_key = W["loss"], W["val_loss"], W["grad_norm"]

    def twin_run(name, style, cfg, description, **kw):
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        runs.add(name, style, f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
                 description=description)

    twin_run("vit_twin_adamw", "wandb", {},
             "Tiny ViT (4x4 patches, d64, 4 pre-LN blocks, 4 heads), AdamW 1e-3, weight decay 0.05, warm-up + cosine, "
             "batch 32: the sane twin.")
    twin_run("vit_twin_sgd", "mlflow", SGD,
             "Tiny ViT, SGD momentum 0.9 lr 0.05 (constant), weight decay 5e-4, batch 32: the SGD faults' twin.")

    def fault(name, cause, intended, cfg, check, description, style="wandb", twin_name="vit_twin_adamw", always=False,
              **kw):
        # Metric names as the twins log them (W&B's), whatever the file format: the truth compares like with like.
        if not (always or want(name)):
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

    def bottleneck(tap, twin, name, twin_name):
        return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

    # Strengthened once after the twin did not confirm the first setting (lr 0.1 ended 20x above the twin, but
    # recovered 70 % from its start as the cosine annealed, no noisier than the twin).
    fault("vit_lr_too_high_adamw", "lr_too_high", ["loss-oscillation"], {"lr": 1.0}, osc,
          "AdamW at peak lr 1 (1000x the twin's 1e-3, an SGD-sized LR), same warm-up + cosine.", style="parquet")
    fault("vit_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 2.0}, osc,
          "SGD momentum 0.9 at lr 2 (40x the twin's 0.05), weight decay 5e-4.", style="csv", twin_name="vit_twin_sgd")
    # Strengthened once after the twin did not confirm the first setting (batch 2 ended 17x above the twin, with a
    # swing 1.4x the twin's).
    fault("vit_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 1}, osc,
          "Batch 1 (twin: 32) at the twin's AdamW lr 1e-3 with warm-up + cosine.", style="mlflow")
    fault("vit_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          "AdamW peak lr 1e-5 (100x below the twin), same warm-up + cosine.", style="csv")
    fault("vit_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "AdamW eps=1.0 (a typo for 1e-8): the update shrinks to ~lr*grad.", style="wandb")
    fault("vit_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          "Every parameter (LayerNorm gains, CLS token and position embeddings included) multiplied by 1e-3 at init, "
          "SGD momentum lr 0.05.", style="parquet", twin_name="vit_twin_sgd")
    fault("vit_raw_pixels_sgd", "features_not_normalised", ["slow-convergence"], {**SGD, "raw_pixels": True}, slow,
          "Raw 0..16 pixel counts into the patch projection (the twin standardises them), SGD momentum lr 0.05.",
          style="mlflow", twin_name="vit_twin_sgd")
    fault("vit_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          "SGD momentum lr 0.05; at step 200 a restart sets the LR 1000x (50).", style="wandb",
          twin_name="vit_twin_sgd", before_step=lr_spike(200, 1000))
    fault("vit_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          "AdamW 1e-3; one pixel of one image in the batch at step 250 is NaN.", style="mlflow",
          corrupt=corrupt_nan_at(250))
    fault("vit_vanishing_sigmoid_plain", "vanishing_gradients", ["vanishing-gradients"], {"block": "plain_sigmoid"},
          lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, W["layer_grad"].format(layers(BASE["depth"])[0])),
          "The same four blocks as a plain stack: no residuals, no LayerNorms, sigmoid in the MLPs (the twin: pre-LN "
          "residual blocks with GELU); AdamW 1e-3 with warm-up + cosine.", style="parquet")

    # Overfitting: 100 training digits, no weight decay or dropout, 600 steps; its twin adds weight decay and dropout.
    small = {"n_train": 100, "weight_decay": 0.0, "max_steps": 600}
    if want("vit_overfit_small_subset", "vit_twin_overfit_reg"):
        twin_run("vit_twin_overfit_reg", "csv", {**small, "weight_decay": 0.3, "dropout": 0.3},
                 "100 training digits, AdamW weight decay 0.3 and dropout 0.3, 600 steps: the overfitting run's twin.",
                 log_every=2)
        fault("vit_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              "100 training digits, AdamW 1e-3 with warm-up + cosine for 600 steps, no weight decay, no dropout.",
              style="mlflow", twin_name="vit_twin_overfit_reg", log_every=2)

    # Task imbalance: a second head regresses each image's total ink in raw pixel units (MSE ~1e4-1e5) beside the
    # digit cross-entropy (~2); SGD momentum with the usual global grad-norm clip 1.0, so the raw MSE's gradient
    # fills the clipped step. The twin standardises the ink target.
    imb = {**SGD, "clip": 1.0}
    if want("vit_imbalance_raw_ink", "vit_twin_ink_std"):
        twin_run("vit_twin_ink_std", "csv", {**imb, "ink": "std"},
                 "Tiny ViT with a digit head and an ink-regression head (ink standardised), SGD momentum lr 0.05, "
                 "clip 1.0: the imbalance run's twin.")
        digit_key, ink_key = W["task"].format("digit"), W["task"].format("ink")

        def stalled(tap, twin, *_):
            ok, m = truth.confirm_task_stalled(tap, twin, digit_key)
            fd, fi = tap.get(digit_key)[1], tap.get(ink_key)[1]
            m["ink_over_digit_loss_median"] = float(np.nanmedian(fi) / max(float(np.nanmedian(fd)), 1e-12))
            return ok, m

        fault("vit_imbalance_raw_ink", "unscaled_aux_loss", ["task-imbalance"], {**imb, "ink": "raw"}, stalled,
              "A second head regresses the total ink in raw pixel sums (MSE ~1e4-1e5) beside the digit cross-entropy; "
              "SGD momentum lr 0.05, clip 1.0: the clipped step is all ink.", twin_name="vit_twin_ink_std")

    # Streaming block, 2x2: no shuffling through a DataLoader, clean labels or a bad shard (rows 640..703 carry labels
    # shifted by 5: batches 21-22 of every 44-batch epoch) x a fast loader or one whose images take 1 ms each to arrive.
    stream = {"shuffle": False, "loader": "fast"}
    slow_io = {"shuffle": False, "loader": "slow_io", "io_delay_s": 0.001}
    shard = (640, 704)
    per_epoch = -(-N_TRAIN // BASE["batch_size"])
    shard_steps = [float(ep * per_epoch + k + 1) for ep in range(2, 10) for k in (20, 21)
                   if ep * per_epoch + k + 1 <= BASE["max_steps"]]

    def spikes(tap, twin, *_):
        ok, m = truth.confirm_spikes_at(tap, twin, key, shard_steps)
        return ok, {**m, "spike_steps": shard_steps}

    block = ("vit_twin_stream", "vit_bad_shard_noshuffle", "vit_slow_loader", "vit_bad_shard_slow_loader")
    if want(*block):
        twin_run("vit_twin_stream", "csv", stream,
                 "AdamW 1e-3 through an in-memory DataLoader, no shuffling, clean labels: the streaming block's twin.")
        fault("vit_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], stream, spikes,
              "No shuffling; training rows 640..703 have wrong labels (digit + 5), met at batches 21-22 of every epoch.",
              style="parquet", twin_name="vit_twin_stream", bad_shard=shard, always=True)
        fault("vit_slow_loader", "slow_loader", ["input-bottleneck"], slow_io, bottleneck,
              "No shuffling; each image takes 1 ms to arrive (SlowIODataset) through a DataLoader with no workers.",
              style="csv", twin_name="vit_twin_stream", always=True)
        # Two faults, each confirmed by the run with only that one put right (the block's runs are trained together).
        name = "vit_bad_shard_slow_loader"
        f, c = runs.train(name, "mlflow", "wandb", slow_io, bad_shard=shard)
        twins = {"periodic-spikes": ("vit_slow_loader", spikes), "input-bottleneck": ("vit_bad_shard_noshuffle", bottleneck)}
        faults, measures = [], {}
        for fault_name, (twin_name, check) in twins.items():
            ok, m = check(runs.taps[name], runs.taps[twin_name], name, twin_name)
            measures[fault_name] = {**m, "twin": twin_name}
            if ok:
                faults.append(fault_name)
        runs.add(name, "mlflow", f, c, faults=sorted(faults), intended=sorted(twins), cause="bad_shard_noshuffle+slow_loader",
                 twin="vit_slow_loader", truth_measures=measures, twins={k: t for k, (t, _) in twins.items()},
                 description="Two faults: no shuffling with rows 640..703 mislabelled (batches 21-22 of every epoch spike), "
                             "and each image takes 1 ms to arrive through a DataLoader with no workers.")

    healthy = [
        ("vit_onecycle", "parquet", "plain", {"schedule": "onecycle", "lr": 2e-3}, {},
         "AdamW with a one-cycle LR peaking at 2e-3."),
        ("vit_sgdr_restarts", "wandb", "wandb", {"schedule": "sgdr"}, {},
         "AdamW lr 1e-3 with cosine warm restarts every 100 steps."),
        ("vit_early_stopping", "mlflow", "wandb", {"max_steps": 2000, "early_stop": 3}, {"log_every": 3},
         "AdamW 1e-3, warm-up + cosine over at most 2000 steps, early stopping (patience 3 epochs on the val loss)."),
        ("vit_label_noise", "mlflow", "mlflow", {"label_noise": 0.3}, {},
         "30 % of the training labels re-drawn at random: a high plateau."),
        ("vit_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "AdamW 1e-3, warm-up + cosine; logs every 3rd step and validates every 100."),
        ("vit_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 2e-4, "max_steps": 1200}, {"log_every": 3},
         "Batch 4 with AdamW lr 2e-4, warm-up + cosine over 1200 steps."),
        ("vit_converged_idle", "wandb", "plain", {"max_steps": 900}, {"log_every": 3},
         "AdamW 1e-3, warm-up + cosine over 900 steps: learns the digits in a few hundred, then idles."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, cfg, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={}, description=desc)
    if want("vit_hf_warmup_cosine"):
        runs.entries.append(_hf_run(root))
    if want("vit_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


def _hf_run(root: Path) -> dict:
    """A healthy run through transformers.Trainer (AdamW, linear warm-up then cosine, its default clip 1.0)."""
    name = "vit_hf_warmup_cosine"
    cfg = {**BASE, "seed": SEED}
    xt, yt, xv, yv = digits(SEED)
    model = _model(cfg)
    args = {"learning_rate": 1e-3, "weight_decay": 0.05, "lr_scheduler_type": "cosine", "warmup_steps": 40,
            "max_steps": 400, "per_device_train_batch_size": 32, "per_device_eval_batch_size": 400, "logging_steps": 2,
            "eval_steps": 20}
    f, _ = hf_trainer_run(root, name, model, nn.functional.cross_entropy, (xt, yt), (xv, yv), args, SEED)
    config = {**args, "optimizer": "adamw", "model": model_name(cfg), "dataset": DATASET, "seed": SEED, "trainer": "hf"}
    return {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": "hf_trainer",
            "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": config,
            "truth": {}, "description": "transformers.Trainer: AdamW 1e-3, weight decay 0.05, 40 warm-up steps then "
                                        "cosine, 400 steps; trainer_state.json."}


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: AdamW 1e-3, step decay x0.3 every 150 steps."""
    name = "vit_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    xt, yt, xv, yv = digits(SEED)
    model = _model(cfg)
    hp = {"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.05, "batch_size": 32, "schedule": "step",
          "step_size": 150, "gamma": 0.3, "max_epochs": 10, "model": model_name(cfg), "dataset": DATASET, "seed": SEED}
    module = lightning_module(model, nn.functional.cross_entropy,
                              lambda p: torch.optim.AdamW(p, lr=hp["lr"], weight_decay=hp["weight_decay"]), hp,
                              lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    g = torch.Generator().manual_seed(SEED)
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt), batch_size=32, shuffle=True, generator=g)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, yv), batch_size=400)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: AdamW 1e-3, step decay x0.3 every 150 steps, 10 epochs "
                           "(validated once per epoch)."}
