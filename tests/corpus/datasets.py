"""Synthetic but learnable datasets, generated with numpy from a seed."""

from __future__ import annotations

import numpy as np


def blobs(n, d=10, k=4, sep=2.5, noise=1.0, seed=0, priors=None):
    """Gaussian blobs: k class centres in d dims, isotropic noise. Returns X (n,d), y (n,).

    priors: optional class frequencies (imbalanced classes); uniform by default.
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * sep
    y = rng.choice(k, n, p=priors) if priors is not None else rng.integers(0, k, n)
    X = centres[y] + rng.standard_normal((n, d)) * noise
    return X, y


def spirals(n, k=3, noise=0.2, turns=1.0, d_extra=0, seed=0):
    """k interleaved 2-D spirals (+ optional pure-noise extra dims)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    r = rng.uniform(0.05, 1.0, n)
    theta = 2 * np.pi * turns * r + 2 * np.pi * y / k
    X = np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1) * 2.0
    X += rng.standard_normal(X.shape) * noise * r[:, None]
    if d_extra:
        X = np.concatenate([X, rng.standard_normal((n, d_extra)) * 0.5], axis=1)
    return X, y


def xor(n, d=2, noise=0.3, seed=0, pos_frac=None):
    """Sign-XOR of the first two coordinates; other dims are distractors. Labels in {0,1}.

    pos_frac: optional share of class 1 (imbalanced labels), by rejection sampling.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((4 * n if pos_frac else n, d))
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0)).astype(np.int64)
    if pos_frac:
        n1 = int(round(n * pos_frac))
        keep = np.concatenate([np.flatnonzero(y == 1)[:n1], np.flatnonzero(y == 0)[: n - n1]])
        keep = rng.permutation(keep)
        X, y = X[keep], y[keep]
    X = X + rng.standard_normal(X.shape) * noise
    return X, y


def linear_regression(n, d=8, noise=0.5, seed=0, feature_scale=1.0, feature_offset=0.0):
    """y = X_c w + b + noise where X_c are the centred features.

    feature_scale / feature_offset make *unnormalized* features (e.g. raw sensor
    readings around 1000) while the target only depends on their deviations.
    """
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    y = Z @ w + 0.5 + rng.standard_normal(n) * noise
    X = Z * feature_scale + feature_offset
    return X, y[:, None], w


def nonlinear_regression(n, d=4, noise=0.3, seed=0):
    """Smooth nonlinear target of the first inputs, with Gaussian noise."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    f = np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] ** 2 - 0.7 * X[:, 0] * X[:, min(2, d - 1)]
    y = f + rng.standard_normal(n) * noise
    return X, y[:, None]


def multitask(n, d=12, k=3, reg_scale=1.0, reg_offset=0.0, reg_noise=0.1, seed=0):
    """Inputs with a class label (blob-like) and a regression target.

    reg_scale / reg_offset let a scenario use an *unnormalized* target (e.g. box
    coordinates in pixels) next to the classification head.
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 1.2
    y = rng.integers(0, k, n)
    X = centres[y] + rng.standard_normal((n, d))
    w = rng.standard_normal(d) / np.sqrt(d)
    r = np.tanh(X @ w) + 0.3 * np.sin(X[:, 0])
    r = r + rng.standard_normal(n) * reg_noise
    return X, y, (r * reg_scale + reg_offset)[:, None]


def images(n, side=16, k=4, seed=0):
    """Tiny synthetic 'images': class-dependent oriented gratings plus noise, uint8 like a decoded file."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    yy, xx = np.mgrid[0:side, 0:side] / side
    out = np.empty((n, side, side), dtype=np.uint8)
    for i in range(n):
        ang = np.pi * y[i] / k + rng.normal(0, 0.1)
        g = np.sin(2 * np.pi * 3 * (np.cos(ang) * xx + np.sin(ang) * yy) + rng.uniform(0, 6.28))
        img = 128 + 80 * g + rng.normal(0, 30, (side, side))
        out[i] = np.clip(img, 0, 255).astype(np.uint8)
    return out, y


def split(X, *ys, n_train, n_val, seed=0):
    """Shuffle once and split into train/val. Returns ((X_tr, *ys_tr), (X_va, *ys_va))."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    tr, va = idx[:n_train], idx[n_train : n_train + n_val]
    return (X[tr], *[y[tr] for y in ys]), (X[va], *[y[va] for y in ys])


def standardize(X_train, *others):
    mu, sd = X_train.mean(axis=0), X_train.std(axis=0) + 1e-8
    return [(X_train - mu) / sd] + [(o - mu) / sd for o in others]


def multitask_xor(n, d=10, reg_scale=1.0, reg_offset=0.0, reg_noise=0.1, n_reg=1, seed=0):
    """Two tasks on the same inputs that need *different* features.

    Class label: XOR of the signs of x5 and x6 (not linearly separable, so the shared
    trunk has to learn features for it). Regression target(s): smooth function of
    x0..x4, optionally in raw units (reg_scale / reg_offset, e.g. pixels).
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = ((X[:, 5] > 0) ^ (X[:, 6] > 0)).astype(np.int64)
    W = rng.standard_normal((5, n_reg)) / np.sqrt(5)
    r = np.tanh(X[:, :5] @ W) + 0.3 * np.sin(2 * X[:, [0]]) + reg_noise * rng.standard_normal((n, n_reg))
    return X, y, r * reg_scale + reg_offset
