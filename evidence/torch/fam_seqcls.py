"""The seqcls family: a GRU classifier that reads each scikit-learn digit row by row (8 steps of 8 pixels).

A recurrent network on a classification task (the rnn family is a language model; the cnn family sees the
same digits as images). Added after the conv family's changes and scored once before any change informed
by it. Every fault run has a twin with the one setting put right; labels come from :mod:`.truth` against it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits

from . import truth
from .common import (NAMES, cross_entropy_val_fn, fit, long_sequences_at, lr_spike, make_optimizer, make_scheduler,
                     minibatches, seed_all, shrink_init)
from .sinks import open_run

FAMILY = "seqcls"
SEED = 17
DATASET = "sklearn.load_digits"
N_TRAIN = 1400


def digits(seed: int, n_train: int | None = None, label_noise: float = 0.0):
    """Seeded 1400/397 split as (n, 8 rows, 8 pixels), standardised with the training split's statistics;
    ``label_noise`` re-draws that fraction of the training labels uniformly (validation stays clean)."""
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:N_TRAIN], order[N_TRAIN:]
    if n_train is not None:
        tr = tr[:n_train]
    x = x.astype(np.float32)
    mu, sd = x[tr].mean(), x[tr].std()
    x = ((x - mu) / sd).reshape(-1, 8, 8)
    yt = y[tr].copy()
    if label_noise:
        rng = np.random.default_rng(seed + 1)
        flip = rng.permutation(len(tr))[: int(round(label_noise * len(tr)))]
        yt[flip] = rng.integers(0, 10, len(flip))
    f = lambda a: torch.tensor(a, dtype=torch.float32)
    i = lambda a: torch.tensor(a, dtype=torch.long)
    return f(x[tr]), i(yt), f(x[va]), i(y[va])


class RowGRU(torch.nn.Module):
    def __init__(self, hidden: int = 64, cell: str = "gru", dropout: float = 0.0):
        super().__init__()
        self.proj = torch.nn.Linear(8, 32)
        rnn = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
        self.rnn = rnn(32, hidden, batch_first=True)
        self.drop = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(hidden, 10)

    def forward(self, x):
        out, _ = self.rnn(torch.tanh(self.proj(x)))
        return self.head(self.drop(out[:, -1]))


BASE = {"optimizer": "adam", "lr": 3e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "cell": "gru", "hidden": 64, "dropout": 0.0, "schedule": "constant", "shuffle": True, "num_workers": 0,
        "clip": 1.0, "max_steps": 300, "n_train": None, "label_noise": 0.0}
LAYERS = ("proj.weight", "rnn.weight_ih_l0", "head.weight")


def _model(cfg: dict) -> RowGRU:
    seed_all(cfg["seed"])
    return shrink_init(RowGRU(cfg["hidden"], cfg["cell"], cfg["dropout"]), cfg["init"])






class _Runs:
    def __init__(self, root: Path):
        self.root, self.taps, self.entries = root, {}, []

    def train(self, name: str, style: str, naming: str, cfg: dict, *, before_step=None, corrupt=None, val_every: int = 20,
              log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **cfg}
        xt, yt, xv, yv = digits(cfg["seed"], cfg["n_train"], cfg["label_noise"])
        model = _model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = minibatches(xt, yt, cfg["batch_size"], cfg["seed"], cfg["shuffle"])
        if corrupt is not None:
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
            cfg = {**cfg, "corruption": corrupt.label}
        log = open_run(style, self.root, name, cfg)
        fit(model, batches,
            lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]), opt, log, epochs=10_000, naming=naming,
            scheduler=make_scheduler(opt, cfg), val_fn=cross_entropy_val_fn(model, xv, yv), val_every=val_every,
            log_every=log_every, layer_grads=LAYERS, clip=cfg["clip"], before_step=before_step,
            max_steps=cfg["max_steps"])
        file = log.close()
        self.taps[name] = log.logged
        return file, cfg

    def add(self, name, style, file, cfg, *, faults, intended, cause, twin, truth_measures, description, **extra):
        self.entries.append({
            "name": name, "family": FAMILY, "model": f"row-{cfg['cell']}-h{cfg['hidden']}", "dataset": DATASET,
            "style": style, "file": file, "faults": faults, "intended": intended, "cause": cause, "twin": twin,
            "seed": cfg["seed"], "config": cfg, "truth": truth_measures, "description": description, **extra})


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda n: True) if only is None else (lambda n: n in only)
    L = NAMES
    key, val_key, grad_key = L["wandb"]["loss"], L["wandb"]["val_loss"], L["wandb"]["grad_norm"]

    f, c = runs.train("seqcls_twin_adam", "wandb", "wandb", {})
    runs.add("seqcls_twin_adam", "wandb", f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
             description="GRU reading digit rows, Adam 3e-3, batch 32, clip 1.0: the sane twin.")
    twin = runs.taps["seqcls_twin_adam"]

    def fault(name, cause, intended, cfg, check, description, style="wandb", twin_name="seqcls_twin_adam", **kw):
        # Metric names as the twin logs them (W&B's), whatever the file format: the truth compares like with like.
        if not want(name):
            return
        f, c = runs.train(name, style, "wandb", cfg, **kw)
        ok, measures = check(runs.taps[name])
        got, also, measures = truth.labels_from_check(intended, ok, measures, runs.taps[name], twin, key)
        extra = {"also_acceptable": also} if also else {}
        runs.add(name, style, f, c, faults=got, intended=intended, cause=cause, twin=twin_name,
                 truth_measures=measures, description=description, **extra)

    osc = lambda tap: truth.confirm_oscillation(tap, twin, key)
    slow = lambda tap: truth.confirm_slow(tap, twin, key)
    fault("seqcls_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {"optimizer": "sgd", "lr": 3.0, "clip": None}, osc,
          "SGD momentum 0.9 at lr 3, unclipped.", style="csv")
    fault("seqcls_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 0.3}, osc,
          "Adam at lr 0.3 (100x the twin's).", style="parquet")
    fault("seqcls_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.05}, osc,
          "Batch 2 with Adam lr 0.05.", style="mlflow")
    fault("seqcls_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 3e-5}, slow,
          "Adam lr 3e-5 (100x below the twin).", style="csv")
    fault("seqcls_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    fault("seqcls_init_too_small", "init_too_small", ["slow-convergence"], {"init": "scaled:0.001", "optimizer": "sgd", "lr": 0.1},
          slow, "Every weight scaled by 1e-3, SGD lr 0.1.", style="parquet")
    fault("seqcls_lr_spike_restart", "lr_spike", ["nonfinite"], {"clip": None, "restart_at": 150, "restart_lr_factor": 1000},
          lambda tap: truth.confirm_explosion(tap, twin, grad_key, key),
          "Unclipped; at step 150 a restart sets the LR 1000x.", before_step=lr_spike(150, 1000))

    # Overfitting: 100 training digits, a wide GRU, 600 steps; its twin adds weight decay and dropout.
    small = {"n_train": 100, "hidden": 256, "max_steps": 600}
    if want("seqcls_overfit_small_subset") or want("seqcls_twin_overfit_reg"):
        f, c = runs.train("seqcls_twin_overfit_reg", "csv", "wandb", {**small, "weight_decay": 0.1, "dropout": 0.5,
                                                                       "optimizer": "adamw"})
        runs.add("seqcls_twin_overfit_reg", "csv", f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
                 description="100 training digits, wide GRU, AdamW weight decay 0.1 and dropout 0.5: the overfitting run's twin.")
        fault("seqcls_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap: truth.confirm_overfitting(tap, runs.taps["seqcls_twin_overfit_reg"], key, val_key),
              "100 training digits, a 256-unit GRU, 600 steps, no regularisation.", style="mlflow",
              twin_name="seqcls_twin_overfit_reg")

    # One batch with abnormal sequence length (added after every threshold was set, to be scored once before any
    # change informed by it): unshuffled, batch 30 of every epoch holds its digits at twice the height, so the GRU
    # reads 16 rows instead of 8. Its twin is the same unshuffled run.
    per_epoch = -(-N_TRAIN // BASE["batch_size"])
    long_steps = [float(ep * per_epoch + 31) for ep in range(2, 10) if ep * per_epoch + 31 <= BASE["max_steps"]]
    if want("seqcls_long_sequences_noshuffle") or want("seqcls_twin_noshuffle"):
        f, c = runs.train("seqcls_twin_noshuffle", "parquet", "wandb", {"shuffle": False})
        runs.add("seqcls_twin_noshuffle", "parquet", f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
                 description="GRU reading digit rows, Adam 3e-3, no shuffling: the long-sequence batch's twin.")

        def long_spikes(tap):
            ok, m = truth.confirm_spikes_at(tap, runs.taps["seqcls_twin_noshuffle"], key, long_steps)
            return ok, {**m, "spike_steps": long_steps}

        fault("seqcls_long_sequences_noshuffle", "oversized_batch", ["periodic-spikes"], {"shuffle": False}, long_spikes,
              "No shuffling; batch 30 of every epoch holds its digits at twice the height: 16 rows to read instead of 8.",
              style="mlflow", twin_name="seqcls_twin_noshuffle", corrupt=long_sequences_at(30))

    healthy = [
        ("seqcls_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 5e-3}, {}, "Warm-up then cosine decay."),
        ("seqcls_step_decay_lstm", "mlflow", "mlflow", {"schedule": "step", "cell": "lstm"}, {}, "LSTM, step decay x0.3 every 100 steps."),
        ("seqcls_sgdr_restarts", "wandb", "wandb", {"schedule": "sgdr", "lr": 4e-3}, {}, "SGDR: cosine with warm restarts every 75 steps."),
        ("seqcls_onecycle_sgd", "parquet", "plain", {"schedule": "onecycle", "optimizer": "sgd", "lr": 0.1}, {}, "SGD with a one-cycle LR."),
        ("seqcls_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 1e-3}, {}, "Batch 4 with a sane LR 1e-3."),
        ("seqcls_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3}, "Logs every 3rd step and validates every 100."),
        ("seqcls_converged_idle", "wandb", "plain", {"lr": 5e-3, "max_steps": 900}, {"log_every": 3},
         "Learns the digits in a few hundred steps, then idles."),
        ("seqcls_label_noise", "mlflow", "mlflow", {"label_noise": 0.3}, {}, "30 % of the training labels re-drawn at random: a high plateau."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, cfg, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={}, description=desc)
    return runs.entries
