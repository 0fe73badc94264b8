"""Naming styles of the tools whose logs the corpus imitates, and small shared helpers."""

from __future__ import annotations

import numpy as np

# naming styles ---------------------------------------------------------------------------
WANDB = dict(loss="train/loss", val_loss="val/loss", lr="train/lr", grad_norm="grad_norm")
HF = dict(loss="loss", val_loss="eval_loss", lr="learning_rate", grad_norm="grad_norm", epoch="epoch")
PLAIN = dict(loss="train_loss", val_loss="valid_loss", lr="lr")
KERAS = dict(loss="loss", val_loss="val_loss", lr="lr")


def lightning(opt="Adam"):
    return dict(loss="train_loss_step", val_loss="val_loss", lr=f"lr-{opt}", grad_norm="grad_2.0_norm_total")


def rng_for(seed, k=0):
    return np.random.default_rng([seed, k])


def layer_keys(fmt, n):
    """The per-layer metric keys of an n-layer model in a given naming format."""
    return [fmt(i) for i in range(n)]
