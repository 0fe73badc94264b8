"""A very small numpy neural-network kit for the demo's trainings: MLP with hand-written backprop,
softmax cross-entropy, SGD with momentum, Adam, and two toy datasets.

Small on purpose (the demo must train several models in seconds on a laptop CPU), but real: the
gradients are computed and the parameters updated, so a fault in a demo run really happens.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


class MLP:
    """Fully connected net ``sizes=[d_in, h1, …, d_out]``; ``activation`` relu, tanh or sigmoid."""

    def __init__(self, sizes, rng, activation="relu"):
        self.sizes = list(sizes)
        self.activation = activation
        self.params: list[np.ndarray] = []
        for fan_in, fan_out in itertools.pairwise(sizes):
            gain = 2.0 / fan_in if activation == "relu" else 2.0 / (fan_in + fan_out)  # He / Xavier
            self.params += [rng.standard_normal((fan_in, fan_out)) * math.sqrt(gain), np.zeros(fan_out)]
        self._cache: list[tuple[np.ndarray, np.ndarray]] = []

    @property
    def n_layers(self) -> int:
        return len(self.sizes) - 1

    def _act(self, z):
        if self.activation == "relu":
            return np.maximum(z, 0.0)
        if self.activation == "tanh":
            return np.tanh(z)
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))

    def _act_grad(self, z, a):
        if self.activation == "relu":
            return (z > 0).astype(z.dtype)
        if self.activation == "tanh":
            return 1.0 - a * a
        return a * (1.0 - a)

    def forward(self, X):
        h, self._cache = X, []
        for i in range(self.n_layers):
            z = h @ self.params[2 * i] + self.params[2 * i + 1]
            a = z if i == self.n_layers - 1 else self._act(z)
            self._cache.append((h, z, a))
            h = a
        return h

    def backward(self, dout):
        grads: list[np.ndarray] = [np.empty(0)] * len(self.params)
        d = dout
        for i in reversed(range(self.n_layers)):
            h, z, a = self._cache[i]
            if i != self.n_layers - 1:
                d = d * self._act_grad(z, a)
            grads[2 * i], grads[2 * i + 1] = h.T @ d, d.sum(axis=0)
            d = d @ self.params[2 * i].T
        return grads


def softmax_ce(logits, y):
    """Mean cross-entropy and its gradient w.r.t. the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    n = len(y)
    loss = float(-np.log(p[np.arange(n), y] + 1e-300).mean())
    p[np.arange(n), y] -= 1.0
    return loss, p / n


def mse(pred, target):
    diff = pred - target
    return float((diff * diff).mean()), 2.0 * diff / diff.size


def global_norm(grads) -> float:
    return float(math.sqrt(sum(float((g * g).sum()) for g in grads)))


class SGD:
    def __init__(self, params, momentum=0.9):
        self.params, self.momentum = params, momentum
        self.v = [np.zeros_like(p) for p in params]

    def step(self, grads, lr):
        for p, g, v in zip(self.params, grads, self.v):
            v *= self.momentum
            v += g
            p -= lr * v


class Adam:
    def __init__(self, params, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.params, (self.b1, self.b2), self.eps, self.wd = params, betas, eps, weight_decay
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads, lr):
        self.t += 1
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            p -= lr * (m / c1 / (np.sqrt(v / c2) + self.eps) + self.wd * p)


def warmup_cosine(base_lr: float, warmup: int, total: int, floor: float = 0.02):
    def lr(step: int) -> float:
        if step < warmup:
            return base_lr * (step + 1) / warmup
        t = (step - warmup) / max(1, total - warmup)
        return base_lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))

    return lr


def spirals(n: int, rng, classes: int = 3, noise: float = 0.2):
    """Interleaved 2-D spirals, one arm per class: not linearly separable, learnable by a small MLP."""
    per = n // classes
    t = rng.uniform(0.25, 1.0, size=(classes, per))
    angle = 4.0 * t + (2 * np.pi / classes) * np.arange(classes)[:, None] + rng.normal(0, noise, size=t.shape)
    X = np.stack([t * np.cos(angle), t * np.sin(angle)], axis=-1).reshape(-1, 2) * 2.0
    y = np.repeat(np.arange(classes), per)
    order = rng.permutation(len(y))
    return X[order], y[order]


def blobs(n: int, rng, d: int = 16, classes: int = 4, sep: float = 1.5):
    """Gaussian class clusters in ``d`` dimensions."""
    centers = rng.normal(0, sep, size=(classes, d))
    y = rng.integers(0, classes, n)
    return centers[y] + rng.standard_normal((n, d)), y
