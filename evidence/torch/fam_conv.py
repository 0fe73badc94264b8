"""The conv family: a causal dilated 1-D convolutional character language model on package text.

An architecture no other family has (WaveNet-style stacks of causal dilated convolutions, no recurrence,
no attention), added as a family held out from every threshold chosen before it was trained: its
first score is reported as measured. Every fault run has a twin with the one setting put right; labels
come from :mod:`.truth` against it.
"""

from __future__ import annotations

from pathlib import Path

import torch

from . import _text, truth
from .common import NAMES, fit, make_optimizer, make_scheduler, minibatches, seed_all, shrink_init
from .sinks import open_run

FAMILY = "conv"
SEED = 13


class CausalConvLM(torch.nn.Module):
    """Embedding, then ``layers`` causal convolutions with dilations 1, 2, 4, ... (left padding only, so a
    position never sees its future), then a linear head."""

    def __init__(self, vocab: int, channels: int = 64, layers: int = 4, kernel: int = 3, activation: str = "relu"):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, 32)
        self.convs = torch.nn.ModuleList()
        self.pads = []
        width = 32
        for i in range(layers):
            dilation = 2 ** i
            self.convs.append(torch.nn.Conv1d(width, channels, kernel, dilation=dilation))
            self.pads.append((kernel - 1) * dilation)
            width = channels
        self.act = torch.nn.Tanh() if activation == "tanh" else torch.nn.ReLU()
        self.head = torch.nn.Linear(channels, vocab)

    def forward(self, x):
        h = self.embed(x).transpose(1, 2)
        for conv, pad in zip(self.convs, self.pads):
            h = self.act(conv(torch.nn.functional.pad(h, (pad, 0))))
        return self.head(h.transpose(1, 2))


BASE = {"optimizer": "adam", "lr": 3e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "channels": 64, "layers": 4, "kernel": 3, "activation": "relu", "schedule": "constant", "shuffle": True,
        "num_workers": 0, "clip": 1.0, "max_steps": 300, "train_chars": None, "seq_len": _text.SEQ_LEN}
LAYERS = ("embed.weight", "convs.0.weight", "head.weight")


def _model(cfg: dict) -> CausalConvLM:
    seed_all(cfg["seed"])
    return shrink_init(CausalConvLM(_text.vocab().size, cfg["channels"], cfg["layers"], cfg["kernel"], cfg["activation"]),
                       cfg["init"])






class _Runs:
    """Trains runs and remembers what they logged, so a fault run finds its twin's."""

    def __init__(self, root: Path):
        self.root, self.taps, self.entries = root, {}, []

    def train(self, name: str, style: str, naming: str, cfg: dict, *, before_step=None,
              val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **cfg}
        (tx, ty), val = _text.splits(cfg["train_chars"], cfg.get("stride"))
        model = _model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        log = open_run(style, self.root, name, cfg)
        fit(model, minibatches(tx, ty, cfg["batch_size"], cfg["seed"], cfg["shuffle"]),
            lambda m, b: _text.lm_loss(m(b[0]), b[1]), opt, log, epochs=10_000, naming=naming,
            scheduler=make_scheduler(opt, cfg), val_fn=_text.val_loss_fn(model, val), val_every=val_every,
            log_every=log_every, layer_grads=LAYERS, clip=cfg["clip"], before_step=before_step,
            max_steps=cfg["max_steps"])
        file = log.close()
        self.taps[name] = log.logged
        return file, cfg

    def add(self, name, style, file, cfg, *, faults, intended, cause, twin, truth_measures, description, **extra):
        model = f"char-causalconv-c{cfg['channels']}x{cfg['layers']}-{cfg['activation']}"
        self.entries.append(_text.entry(FAMILY, name, model, style, file, faults=faults, intended=intended,
                                        cause=cause, twin=twin, seed=cfg["seed"], config=cfg, truth=truth_measures,
                                        description=description, **extra))


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda n: True) if only is None else (lambda n: n in only)
    L = NAMES

    f, c = runs.train("conv_twin_adam", "wandb", "wandb", {})
    runs.add("conv_twin_adam", "wandb", f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
             description="Causal dilated conv char LM, Adam 3e-3, batch 32, grad clip 1.0: the sane twin.")
    twin = runs.taps["conv_twin_adam"]
    key = L["wandb"]["loss"]

    def fault(name, cause, intended, cfg, check, description, style="wandb", **kw):
        # Metric names as the twin logs them (W&B's), whatever the file format: the truth compares like with like.
        if not want(name):
            return
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        ok, measures = check(runs.taps[name])
        got, also, measures = truth.labels_from_check(intended, ok, measures, runs.taps[name], twin, key)
        extra = {"also_acceptable": also} if also else {}
        runs.add(name, style, f, c, faults=got, intended=intended, cause=cause, twin="conv_twin_adam",
                 truth_measures=measures, description=description, **extra)

    osc = lambda tap: truth.confirm_oscillation(tap, twin, key)
    slow = lambda tap: truth.confirm_slow(tap, twin, key)
    fault("conv_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 1.0}, osc,
          "Adam at lr 1.0 (300x the twin's): the loss falls briefly, then bounces high.")
    fault("conv_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {"optimizer": "sgd", "lr": 10.0, "clip": None}, osc,
          "SGD momentum 0.9 at lr 10, unclipped.", style="csv")
    fault("conv_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.3}, osc,
          "Batch 2 with Adam lr 0.3: gradient noise keeps the loss bouncing high.", style="parquet")
    fault("conv_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-4}, slow,
          "Adam lr 1e-4 (30x below the twin): learns, very slowly.", style="mlflow")
    fault("conv_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8): the update collapses to a tiny SGD step.", style="csv")
    fault("conv_init_too_small", "init_too_small", ["slow-convergence"], {"init": "scaled:0.001", "optimizer": "sgd", "lr": 0.3},
          slow, "Every weight scaled by 1e-3 with SGD: gradients through the tiny weights barely move it.", style="wandb")

    spike_at = 150

    def restart_spike(step, opt):
        if step == spike_at:
            for g in opt.param_groups:
                g["lr"] = g["lr"] * 1000

    fault("conv_lr_spike_restart", "lr_spike", ["nonfinite"], {"clip": None, "restart_at": spike_at, "restart_lr_factor": 1000},
          lambda tap: truth.confirm_explosion(tap, twin, L["wandb"]["grad_norm"], key),
          "Unclipped; at step 150 a restart sets the LR 1000x: the loss blows up.", before_step=restart_spike)

    healthy = [
        ("conv_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 5e-3}, {}, "Warm-up then cosine decay."),
        ("conv_step_decay", "mlflow", "mlflow", {"schedule": "step"}, {}, "Step decay x0.3 every 100 steps."),
        ("conv_sgdr_restarts", "wandb", "wandb", {"schedule": "sgdr", "lr": 4e-3}, {}, "SGDR: cosine with warm restarts every 75 steps."),
        ("conv_onecycle_adamw", "parquet", "plain", {"schedule": "onecycle", "lr": 6e-3, "optimizer": "adamw", "weight_decay": 0.01},
         {}, "AdamW with a one-cycle LR."),
        ("conv_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 1e-3}, {}, "Batch 4 with a sane LR 1e-3: noisy, learning."),
        ("conv_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3}, "Logs every 3rd step and validates every 100."),
        ("conv_converged_idle", "wandb", "plain", {"lr": 5e-3, "max_steps": 600, "train_chars": 20_000}, {"log_every": 2},
         "A small train text learned early, then idles at its plateau."),
        ("conv_tanh_6layer", "mlflow", "mlflow", {"activation": "tanh", "layers": 6}, {}, "Six tanh conv layers (dilations to 32), Adam 3e-3."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, cfg, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={}, description=desc)
    return runs.entries
