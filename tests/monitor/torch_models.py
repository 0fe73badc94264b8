"""Tiny torch models and data for the framework-callback tests (CPU, seconds to train).

The fault is the corpus' ``nan_log0_custom_bce``: binary cross-entropy written by hand without an
epsilon. As the classifier grows confident, a float32 sigmoid rounds to exactly 1.0, ``0 *
log(0)`` is NaN, and the run is dead from that step on — after a dozen healthy epochs here. The
healthy twin computes the same loss stably (``binary_cross_entropy_with_logits``).
"""

from __future__ import annotations

import torch

N, D = 1024, 10


def blobs(seed: int = 0, n: int = N):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=g) > 0.5).float()
    x = torch.randn(n, D, generator=g) + (2 * y[:, None] - 1) * 1.5
    return x, y


def naive_bce(logits, y):
    p = torch.sigmoid(logits)
    return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean()


def stable_bce(logits, y):
    return torch.nn.functional.binary_cross_entropy_with_logits(logits, y)


class Classifier(torch.nn.Module):
    """Logistic regression (``hidden=0``), or a small MLP with two hidden layers (per-layer
    gradient norms then have layers to show)."""

    def __init__(self, loss=stable_bce, hidden: int = 0):
        super().__init__()
        if hidden:
            self.net = torch.nn.Sequential(torch.nn.Linear(D, hidden), torch.nn.ReLU(),
                                           torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                           torch.nn.Linear(hidden, 1))
        else:
            self.net = torch.nn.Sequential(torch.nn.Linear(D, 1))
        self.loss = loss

    def forward(self, x, labels=None, index=None):
        logits = self.net(x).squeeze(-1)
        if labels is None:
            return {"logits": logits}
        return {"loss": self.loss(logits, labels), "logits": logits}


class DictDataset(torch.utils.data.Dataset):
    """``{"x", "labels", "index"}`` items, the shape HF's Trainer passes to ``model(**batch)``."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i], "index": i}
