"""The finetune family: transfer learning on scikit-learn's digits, as most users' runs are.

A small CNN (conv3x3 1->32, ReLU, conv3x3 32->64, ReLU, 2x2 max-pool, a 1024->128 linear, ReLU: the
``backbone``) is pretrained once, seeded, inside :func:`build` on the digits 0-4 (standardised with that
pretraining split's mean and standard deviation, AdamW 1e-3, 400 steps, a 128->5 head); that run is logged as
one healthy run (``finetune_pretrain_digits04``) and its state dict is kept in memory. Every fine-tuning run
loads that checkpoint (saved, as a DistributedDataParallel job saves it, with a ``module.`` prefix that the
loader strips), puts a NEW 128->5 ``head`` on it for the digits 5-9 (relabelled 0-4), and trains on a seeded
500-image split of the 5-9 digits, validated on the held-out rest (~400 images, plain cross-entropy). Inputs are
standardised with the *pretraining* statistics, as a fine-tuning pipeline reuses its backbone's preprocessing.

The sane recipe (the twin): AdamW lr 1e-3, weight decay 0.05, dropout 0.3 before the head, random-shift
augmentation (a layer of the model, so every trainer applies it), batch 32, a tenth of linear warm-up then linear
decay to zero (HF's ``linear`` schedule, :func:`make_schedule`), 300 steps, validation every 20 steps, the gradient
norms of ``backbone.conv1``, ``backbone.conv2``, ``backbone.fc1`` and ``head`` logged.

The base recipe was changed once, after the first generation and before any fault's truth was acted on: it was
AdamW weight decay 0.01, no dropout, no augmentation, 700 fine-tuning images (~200 validating). Then 8 of the 14 runs
meant healthy failed the healthy check (a val loss of ~0.05 on 200 digits, ending 11-36 % above its best as the
model grew more confident); the recipe above (tried on four healthy configurations, not on any fault) was adopted.

Result (24 runs): the twins confirm 5 fault runs (LR too low, flat, so loss-oscillation with slow-convergence also
accepted; Adam eps 1.0 through HF Trainer; the LR spike; the NaN record; overfitting on 40 images); 11 of the 14 runs
meant healthy pass the healthy check (the HF twin, step decay and the overfitting twin end 13-38 % above their best
val loss). Kept but not scored: every LR-too-high run (ours, HF's, batch 2, the backbone at a from-scratch LR) once
driven hard enough sits flat at ln 5, 11-49x above its twin, but the new head's first loss lies above ln 5 so it
"fell" 13-39 %, more than the flat case allows; raw 0..16 inputs (AdamW absorbs the scale); the backbone silently not
loaded (a probe on random conv features learns as fast as one on the 0-4 features).

Built blind to the detectors: nothing under ``trackerhealth/`` (nor the scoring) was read or run while building it.
Settings are a practitioner's, every fault run has a twin with the one setting put right (same seed and data), and
the label is what :mod:`.truth` confirms against it. A comment at a run says so where its setting was changed after
its truth check (once at most).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.nn import functional as F

from . import truth
from .common import NAMES, corrupt_nan_at, cross_entropy_val_fn, early_stopping, fit, lr_spike, make_scheduler, seed_all
from .family_runs import FamilyRuns, batches_for, describe_injections
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .sinks import open_run

FAMILY = "finetune"
SEED = 61
PRETRAIN_SEED = 67
DATASET = "sklearn.load_digits"
N_PRETRAIN = 760  # of the ~900 digits 0-4; the rest validate the pretraining run
N_TRAIN = 500  # of the ~900 digits 5-9; the rest validate every fine-tuning run


class Backbone(nn.Module):
    def __init__(self, width: int = 32, hidden: int = 128):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1)
        self.fc1 = nn.Linear(2 * width * 16, hidden)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.conv2(torch.relu(self.conv1(x)))), 2)
        return torch.relu(self.fc1(h.flatten(1)))


class RandomShift(nn.Module):
    """Random-shift augmentation as a layer (as Keras' RandomTranslation or torchvision's v2 transforms on the batch):
    in training mode each image is padded by one pixel of background and cropped back to 8x8 at a random offset (up
    to one pixel each way, from torch's seeded global generator); in eval mode, and when ``enabled`` is False, the
    identity. Being part of the model, it applies whichever trainer (our loop, HF Trainer, Lightning) runs it."""

    def __init__(self, enabled: bool, background: float):
        super().__init__()
        self.enabled, self.background = enabled, background

    def forward(self, x):
        if not (self.training and self.enabled):
            return x
        n = len(x)
        padded = F.pad(x, (1, 1, 1, 1), value=self.background)
        dy, dx = torch.randint(0, 3, (n,)).tolist(), torch.randint(0, 3, (n,)).tolist()
        return torch.stack([padded[i, :, dy[i]:dy[i] + 8, dx[i]:dx[i] + 8] for i in range(n)])


class FineTuneNet(nn.Module):
    """Random-shift augmentation (training mode only, when enabled), the backbone, dropout (0 unless a run sets it) and
    a linear head."""

    def __init__(self, n_classes: int = 5, dropout: float = 0.0, augment: bool = False, background: float = 0.0):
        super().__init__()
        self.augment = RandomShift(augment, background)
        self.backbone = Backbone()
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(128, n_classes)

    def forward(self, x):
        return self.head(self.drop(self.backbone(self.augment(x))))


LAYERS = ("backbone.conv1.weight", "backbone.conv2.weight", "backbone.fc1.weight", "head.weight")


def _split(classes, seed: int, n_train: int):
    x, y = load_digits(return_X_y=True)
    keep = np.flatnonzero(np.isin(y, classes))
    order = np.random.default_rng(seed).permutation(keep)
    return x.astype(np.float32), y, order[:n_train], order[n_train:]


def pretrain_stats() -> tuple[float, float]:
    """The mean and standard deviation of the pretraining split's pixels (digits 0-4)."""
    x, _, tr, _ = _split((0, 1, 2, 3, 4), PRETRAIN_SEED, N_PRETRAIN)
    return float(x[tr].mean()), float(x[tr].std())


def _tensors(x, y, tr, va, offset: int, standardise: bool, label_noise: float, seed: int, n_train: int | None):
    if n_train is not None:
        tr = tr[:n_train]
    if standardise:
        mu, sd = pretrain_stats()
        x = (x - mu) / sd
    x = x.reshape(-1, 1, 8, 8)
    yt = y[tr] - offset
    if label_noise:
        rng = np.random.default_rng(seed + 1)
        flip = rng.permutation(len(tr))[: int(round(label_noise * len(tr)))]
        yt[flip] = rng.integers(0, 5, len(flip))
    f = lambda a: torch.tensor(a, dtype=torch.float32)
    i = lambda a: torch.tensor(a, dtype=torch.long)
    return f(x[tr]), i(yt), f(x[va]), i(y[va] - offset)


def pretrain_digits():
    x, y, tr, va = _split((0, 1, 2, 3, 4), PRETRAIN_SEED, N_PRETRAIN)
    return _tensors(x, y, tr, va, 0, True, 0.0, PRETRAIN_SEED, None)


def finetune_digits(seed: int, n_train: int | None = None, label_noise: float = 0.0, standardise: bool = True):
    """Seeded 500/rest split of the digits 5-9 relabelled 0-4, as (n, 1, 8, 8) images standardised with the
    pretraining statistics (``standardise`` False: raw 0..16 pixels); ``label_noise`` re-draws that fraction of the
    training labels uniformly. Validation stays clean."""
    x, y, tr, va = _split((5, 6, 7, 8, 9), seed, N_TRAIN)
    return _tensors(x, y, tr, va, 5, standardise, label_noise, seed, n_train)


def make_schedule(opt: torch.optim.Optimizer, cfg: dict):
    """``warmup_linear`` (HF's default ``linear``: a tenth of linear warm-up, then linear decay to zero), else
    :func:`.common.make_scheduler`."""
    if cfg["schedule"] == "warmup_linear":
        steps = cfg["max_steps"]
        warm = max(1, steps // 10)
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (steps - s) / (steps - warm)))
    return make_scheduler(opt, cfg)


def _ce(model, batch):
    return F.cross_entropy(model(batch[0]), batch[1])


BASE = {"optimizer": "adamw", "lr": 1e-3, "backbone_lr": None, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.05,
        "dropout": 0.3, "schedule": "warmup_linear", "shuffle": True, "loader": "memory", "num_workers": 0,
        "clip": None, "max_steps": 300, "n_train": None, "label_noise": 0.0, "early_stop": None, "freeze_backbone": False,
        "standardise": True, "load": "strip_prefix", "augment": "shift1"}
PRETRAIN = {"optimizer": "adamw", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.01, "dropout": 0.0,
            "schedule": "warmup_cosine", "max_steps": 400, "seed": PRETRAIN_SEED}


def _optimizer(model: FineTuneNet, cfg: dict) -> torch.optim.Optimizer:
    """AdamW (or SGD momentum 0.9) over the trainable parameters; ``backbone_lr`` gives the backbone its own LR."""
    head = [p for p in model.head.parameters()]
    back = [p for p in model.backbone.parameters() if p.requires_grad]
    if cfg["backbone_lr"] is None:
        groups = [{"params": back + head}] if back else [{"params": head}]
    else:
        groups = [{"params": back, "lr": cfg["backbone_lr"]}, {"params": head}]
    if cfg["optimizer"] == "sgd":
        return torch.optim.SGD(groups, lr=cfg["lr"], momentum=0.9, weight_decay=cfg["weight_decay"])
    return torch.optim.AdamW(groups, lr=cfg["lr"], eps=cfg["eps"], weight_decay=cfg["weight_decay"])


def _checkpoint(state: dict) -> dict:
    """The pretrained backbone as a DistributedDataParallel job saved it: every key under ``module.``."""
    return {f"module.{k}": v.clone() for k, v in state.items() if k.startswith("backbone.")}


def _finetune_model(cfg: dict, checkpoint: dict) -> FineTuneNet:
    """The pretrained backbone and a fresh (seeded) head. ``load`` "strip_prefix": the ``module.`` prefix is
    stripped before loading (the right way); "strict_false": ``load_state_dict(checkpoint, strict=False)`` as saved,
    which matches no key and silently loads nothing (the backbone stays at its random init)."""
    seed_all(cfg["seed"])
    background = 0.0 if not cfg["standardise"] else -pretrain_stats()[0] / pretrain_stats()[1]
    model = FineTuneNet(5, cfg["dropout"], cfg["augment"] == "shift1", background)
    if cfg["load"] == "strip_prefix":
        missing, unexpected = model.load_state_dict({k.removeprefix("module."): v for k, v in checkpoint.items()},
                                                    strict=False)
        assert not unexpected and all(k.startswith("head.") for k in missing), (missing, unexpected)
    else:
        model.load_state_dict(checkpoint, strict=False)
    if cfg["freeze_backbone"]:
        for p in model.backbone.parameters():
            p.requires_grad_(False)
    return model


class _Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def __init__(self, root: Path):
        super().__init__(root)
        self.checkpoint: dict | None = None

    def pretrain(self, log_it: bool) -> None:
        """Train the backbone once on the digits 0-4 (a 5-way head); keep its checkpoint; log the run if asked."""
        cfg = dict(PRETRAIN)
        xt, yt, xv, yv = pretrain_digits()
        seed_all(cfg["seed"])
        model = FineTuneNet(5, 0.0)
        opt = _optimizer(model, {**BASE, **cfg})
        # Logged as the pretraining it is (its own model and data names): grouped by model and data set, it must
        # not join the mixup family's CNN of the same shape trained on all ten digits.
        logged_cfg = dict(cfg, model="cnn2-w32-h128-pretrain", dataset=f"{DATASET}[0-4]", classes="0-4", n_train=len(xt),
                          batch_size=32, stage="pretraining")
        style = "csv"
        log = open_run(style, self.root, "finetune_pretrain_digits04", logged_cfg)
        res = fit(model, batches_for(xt, yt, {**BASE, **cfg}, 0.0), _ce, opt, log, epochs=10_000, naming="plain",
                  scheduler=make_schedule(opt, {**BASE, **cfg}), val_fn=cross_entropy_val_fn(model, xv, yv), val_every=20,
                  layer_grads=LAYERS, max_steps=cfg["max_steps"])
        file = self.keep("finetune_pretrain_digits04", log, res)
        self.checkpoint = _checkpoint(model.state_dict())
        if log_it:
            self.add("finetune_pretrain_digits04", style, file, logged_cfg, faults=[], intended=[], cause="healthy",
                     twin=None, truth_measures={},
                     description="The pretraining run every fine-tune starts from: the small CNN on the digits 0-4 "
                                 "(standardised), AdamW 1e-3, weight decay 0.01, warm-up + cosine, 400 steps.")

    def train(self, name: str, style: str, naming: str, cfg: dict, *, before_step=None, corrupt=None,
              val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **cfg}
        xt, yt, xv, yv = finetune_digits(cfg["seed"], cfg["n_train"], cfg["label_noise"], cfg["standardise"])
        model = _finetune_model(cfg, self.checkpoint)
        opt = _optimizer(model, cfg)
        batches = batches_for(xt, yt, cfg, default_delay_s=0.0005)
        if corrupt is not None:
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
        val_fn = cross_entropy_val_fn(model, xv, yv)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged_cfg = dict(cfg, model="cnn2-w32-h128-pretrained04", dataset=DATASET, classes="5-9", n_train=len(xt))
        describe_injections(logged_cfg, corrupt=corrupt, before_step=before_step)
        log = open_run(style, self.root, name, logged_cfg)
        res = fit(model, batches, _ce, opt, log, epochs=10_000, naming=naming, scheduler=make_schedule(opt, cfg),
                  val_fn=val_fn, val_every=val_every, log_every=log_every, layer_grads=LAYERS, clip=cfg["clip"],
                  before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged_cfg

    def hf(self, name: str, args: dict, cfg: dict | None = None):
        """A fine-tune through transformers.Trainer (AdamW, its default grad clip 1.0); the tap holds HF's keys."""
        cfg = {**BASE, "seed": SEED, **(cfg or {})}
        xt, yt, xv, yv = finetune_digits(SEED)
        model = _finetune_model(cfg, self.checkpoint)
        full = {"learning_rate": 1e-3, "weight_decay": 0.05, "lr_scheduler_type": "linear", "warmup_steps": 30,
                "max_steps": 300, "per_device_train_batch_size": 32, "per_device_eval_batch_size": 512,
                "logging_steps": 2, "eval_steps": 20, **args}
        f, logged = hf_trainer_run(self.root, name, model, F.cross_entropy, (xt, yt), (xv, yv), full, SEED)
        self.taps[name] = logged
        config = {**full, "optimizer": "adamw", "model": "cnn2-w32-h128-pretrained04", "dataset": DATASET,
                  "classes": "5-9", "seed": SEED, "trainer": "hf"}
        return f, config


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda *n: True) if only is None else (lambda *n: any(x in only for x in n))
    runs.pretrain(log_it=want("finetune_pretrain_digits04"))
    L = NAMES
    key, val_key, grad_key = L["wandb"]["loss"], L["wandb"]["val_loss"], L["wandb"]["grad_norm"]

    def twin_run(name, style, cfg, description, **kw):
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        runs.add_unlabelled(name, style, f, c, cause="twin", description=description)

    twin_run("finetune_twin_adamw", "wandb", {},
             "Pretrained CNN (digits 0-4) with a new head for the digits 5-9: AdamW 1e-3, weight decay 0.05, dropout 0.3, "
             "random-shift augmentation, batch 32, a tenth of linear warm-up then linear decay, 300 steps: the sane twin.")

    def fault(name, cause, intended, cfg, check, description, style="wandb", twin_name="finetune_twin_adamw", **kw):
        # Metric names as the twins log them (W&B's), whatever the file format: the truth compares like with like.
        if not want(name):
            return
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        twin = runs.taps[twin_name]
        if intended is None:  # whichever of the two the twin confirms (see the raw-pixel run)
            ok_o, m_o = truth.confirm_oscillation(runs.taps[name], twin, key)
            ok_s, m_s = truth.confirm_slow(runs.taps[name], twin, key)
            intended = ["loss-oscillation"] if ok_o or not ok_s else ["slow-convergence"]
            ok, measures = (ok_o, {**m_s, **m_o}) if intended == ["loss-oscillation"] else (ok_s, {**m_o, **m_s})
        else:
            ok, measures = check(runs.taps[name], twin)
        runs.add_checked(name, style, f, c, intended=intended, ok=ok, measures=measures, cause=cause, twin=twin_name,
                         loss_key=key, description=description)

    osc = lambda tap, twin: truth.confirm_oscillation(tap, twin, key)
    slow = lambda tap, twin: truth.confirm_slow(tap, twin, key)
    boom = lambda tap, twin: truth.confirm_explosion(tap, twin, grad_key, key)
    overfit = lambda tap, twin: truth.confirm_overfitting(tap, twin, key, val_key)

    # Changed after its truth check: at lr 0.1 it ended 4.2x above the twin but had learned (fell 68 %) and swung less
    # (0.37x) as the LR decayed to zero; lr 1.0 is the one change. Still unconfirmed: it sits flat at ln 5 (11.4x the twin,
    # swing 0.04x) but "fell" 13 % from the new head's first loss (~1.85), just over the 10 % the flat case allows:
    # kept, not scored.
    fault("finetune_lr_too_high", "lr_too_high", ["loss-oscillation"], {"lr": 1.0}, osc,
          "Fine-tuning with AdamW at lr 1.0 (1000x the twin's), warm-up + linear decay as the twin.", style="csv")
    fault("finetune_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          "Fine-tuning with AdamW at lr 1e-5 (100x below the twin).", style="mlflow")
    # Changed after its truth check: at lr 0.01 batch 2 swung 3.4x the twin but ended far *below* it (0.03x: many more
    # updates, annealed to zero); lr 0.1 is the one change. Still unconfirmed: flat near ln 5 (11.4x the twin, swing 0.08x),
    # fell 39 % from its first steps' level: kept, not scored.
    fault("finetune_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.1}, osc,
          "Batch 2 with AdamW lr 0.1.", style="parquet")
    fault("finetune_lr_spike_restart", "lr_spike", ["nonfinite"], {}, boom,
          "AdamW 1e-3; at step 200 a restart sets the LR 1000x for a step.", style="wandb",
          before_step=lr_spike(200, 1000))
    fault("finetune_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          "AdamW 1e-3; one pixel of one image in the batch at step 150 is NaN.", style="mlflow",
          corrupt=corrupt_nan_at(150))
    # Inputs not standardised the way the backbone was pretrained: raw 0..16 pixels (train and val alike). What the
    # twin confirms is the label: oscillation if it does, else slow convergence (intended is set to the one checked).
    # Unconfirmed at its first check (ends 1.06x the twin, slow ratio 1.0: AdamW fine-tuning absorbs the input scale);
    # left as it was, kept but not scored.
    fault("finetune_unstandardised_inputs", "input_not_normalized", None, {"standardise": False}, None,
          "Raw 0..16 pixels fed to a backbone pretrained on standardised digits (mean 0, std 1), AdamW 1e-3.",
          style="csv")
    # A backbone LR equal to a from-scratch LR: the backbone in its own param group, the head at the twin's 1e-3.
    # Changed after its truth check: at 3e-2 it ended 0.05x the twin's loss (the digits need little of the pretrained
    # features, so re-learning them cost nothing); 0.3 (an SGD from-scratch LR given to AdamW) is the one change. Still
    # unconfirmed: flat at ln 5 (11.4x the twin, swing 0.01x), fell 13 % from the new head's first loss: kept, not scored.
    fault("finetune_backbone_lr_from_scratch", "backbone_lr_too_high", ["loss-oscillation"], {"backbone_lr": 0.3}, osc,
          "The backbone's param group at lr 0.3 (a from-scratch SGD LR given to AdamW, 300x the twin's), the new head "
          "at 1e-3.",
          style="parquet")
    # Pretrained weights silently not loaded: the checkpoint's keys carry DDP's "module." prefix and
    # load_state_dict(strict=False) matches none of them, so the "fine-tune" trains from a random init.
    # Changed after its truth check: fully fine-tuned against the twin it learned as fast (slow ratio 0.9: the digits
    # 5-9 are learned from scratch as fast as from the 0-4 features); the one change makes it a linear probe (frozen
    # backbone, AdamW 1e-2), whose twin is finetune_linear_probe (the same probe on the loaded backbone). Still
    # unconfirmed: the probe on random features learns faster (slow ratio 0.70) and ends lower (0.87x) than the probe
    # on the 0-4 features: kept, not scored.

    # Overfitting: 40 fine-tuning images, backbone unfrozen, no weight decay, dropout or augmentation, 1000 steps; its
    # twin regularises the same run (weight decay 0.1, dropout 0.5 before the head, the base's random shifts).
    small = {"n_train": 40, "max_steps": 1000, "weight_decay": 0.0, "dropout": 0.0, "augment": None}
    if want("finetune_overfit_small_subset", "finetune_twin_overfit_reg"):
        twin_run("finetune_twin_overfit_reg", "csv", {**small, "weight_decay": 0.1, "dropout": 0.5, "augment": "shift1"},
                 "40 fine-tuning images, backbone unfrozen, AdamW 1e-3 with weight decay 0.1, dropout 0.5 before the "
                 "head and random-shift augmentation, 1000 steps: the overfitting run's twin.", log_every=2)
        fault("finetune_overfit_small_subset", "overfitting", ["overfitting"], small, overfit,
              "40 fine-tuning images, backbone unfrozen, AdamW 1e-3 without weight decay, dropout or augmentation, "
              "1000 steps.",
              style="mlflow", twin_name="finetune_twin_overfit_reg", log_every=2)

    healthy = [
        ("finetune_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine"}, {},
         "AdamW 1e-3, a tenth of warm-up then cosine decay."),
        ("finetune_step_decay", "mlflow", "mlflow", {"schedule": "step"}, {},
         "AdamW 1e-3, step decay x0.3 every third of the run."),
        ("finetune_linear_probe", "parquet", "wandb", {"freeze_backbone": True, "lr": 1e-2}, {},
         "Frozen backbone (linear probe): only the new head trains, AdamW 1e-2; the loss plateaus higher."),
        ("finetune_early_stopping", "wandb", "wandb", {"max_steps": 2000, "early_stop": 3}, {"log_every": 3},
         "AdamW 1e-3, warm-up + linear decay over at most 2000 steps, early stopping (patience 3 epochs on the val loss)."),
        ("finetune_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "Logs every 3rd step and validates every 100."),
        ("finetune_label_noise", "mlflow", "mlflow", {"label_noise": 0.2}, {},
         "20 % of the fine-tuning labels re-drawn at random: a high plateau."),
        ("finetune_converged_idle", "parquet", "plain", {"max_steps": 1200}, {"log_every": 3},
         "AdamW 1e-3 over 1200 steps: fits the new digits within a couple of hundred, then idles."),
        ("finetune_small_batch_sane_lr", "wandb", "mlflow", {"batch_size": 4, "lr": 2e-4}, {},
         "Batch 4 with AdamW lr 2e-4."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name) or (name == "finetune_linear_probe" and want("finetune_pretrained_not_loaded")):
            f, c = runs.train(name, style, naming, cfg, **kw)
            runs.add_unlabelled(name, style, f, c, cause="healthy", description=desc)

    probe = {"freeze_backbone": True, "lr": 1e-2}
    fault("finetune_pretrained_not_loaded", "pretrained_not_loaded", ["slow-convergence"], {**probe, "load": "strict_false"},
          slow, "Linear probe (frozen backbone, AdamW 1e-2) after load_state_dict(strict=False) with a 'module.'-prefixed "
          "checkpoint: no key matches, so the frozen backbone is its random init.", style="wandb",
          twin_name="finetune_linear_probe")

    # Through transformers.Trainer (its own keys: loss, eval_loss, grad_norm): a healthy HF-default run (linear
    # warm-up + decay), which is also the twin of two faults run the same way.
    hf_names = ("finetune_hf_linear_warmup", "finetune_hf_adam_eps_large", "finetune_hf_lr_too_high")
    if want(*hf_names):
        f, c = runs.hf("finetune_hf_linear_warmup", {})
        runs.add_unlabelled("finetune_hf_linear_warmup", "hf_trainer", f, c, cause="healthy", description=(
                     "transformers.Trainer: AdamW 1e-3, weight decay 0.05, dropout 0.3, random shifts, 30 warm-up steps (a tenth) then linear decay (HF's "
                     "default schedule), 300 steps; trainer_state.json. Also the HF faults' twin."))

        def hf_fault(name, cause, intended, args, check, description):
            f, c = runs.hf(name, args)
            ok, measures = check(runs.taps[name], runs.taps["finetune_hf_linear_warmup"])
            runs.add_checked(name, "hf_trainer", f, c, intended=intended, ok=ok, measures=measures, cause=cause,
                             twin="finetune_hf_linear_warmup", loss_key="loss", description=description)

        hf_fault("finetune_hf_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"adam_epsilon": 1.0},
                 lambda tap, twin: truth.confirm_slow(tap, twin, "loss"),
                 "transformers.Trainer with adam_epsilon=1.0 (a typo for 1e-8), otherwise the HF twin.")
        # Changed after its truth check: at learning_rate 0.05 it ended 1.01x the twin (HF's clip and the decay to zero
        # let it recover); 1.0 is the one change. Still unconfirmed: flat near ln 5 (49x the twin, swing 0.02x) but it
        # fell 24 % from its first logged (two-step averaged) level: kept, not scored.
        hf_fault("finetune_hf_lr_too_high", "lr_too_high", ["loss-oscillation"], {"learning_rate": 1.0},
                 lambda tap, twin: truth.confirm_oscillation(tap, twin, "loss"),
                 "transformers.Trainer at learning_rate 1.0 (1000x the HF twin's), its default clip 1.0.")
    if want("finetune_lightning_step_decay"):
        runs.entries.append(_lightning_run(root, runs.checkpoint))
    return runs.entries


def _lightning_run(root: Path, checkpoint: dict) -> dict:
    """A healthy fine-tune through lightning.Trainer with a CSVLogger: AdamW 1e-3, step decay x0.3 every 100 steps."""
    name = "finetune_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    xt, yt, xv, yv = finetune_digits(SEED)
    model = _finetune_model(cfg, checkpoint)
    hp = {"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.05, "batch_size": 32, "schedule": "step",
          "step_size": 100, "gamma": 0.3, "max_epochs": 14, "model": "cnn2-w32-h128-pretrained04", "dataset": DATASET,
          "classes": "5-9", "seed": SEED}
    module = lightning_module(model, F.cross_entropy,
                              lambda p: torch.optim.AdamW(p, lr=hp["lr"], weight_decay=hp["weight_decay"]), hp,
                              lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    g = torch.Generator().manual_seed(SEED)
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt), batch_size=32, shuffle=True, generator=g)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, yv), batch_size=512)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: the pretrained CNN fine-tuned on the digits 5-9, AdamW 1e-3, "
                           "step decay x0.3 every 100 steps, 14 epochs (validated once per epoch)."}
