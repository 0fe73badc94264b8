"""Small numpy models with hand-written backprop, optimizers and LR schedules.

Everything here is deliberately plain: the corpus runs must be *real* training
(gradients computed, parameters updated) so the logged histories carry the real
dynamics of each fault, not a formula's idea of it.
"""

from __future__ import annotations

import math

import numpy as np

# --------------------------------------------------------------------------- activations


def _act(name: str, z: np.ndarray) -> np.ndarray:
    if name == "relu":
        return np.maximum(z, 0)
    if name == "leaky_relu":
        return np.where(z > 0, z, 0.01 * z)
    if name == "tanh":
        return np.tanh(z)
    if name == "sigmoid":
        # written as real code often is: exp overflow for very negative z gives 0, fine
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-z))
    if name == "linear":
        return z
    raise ValueError(f"unknown activation {name!r}")


def _act_grad(name: str, z: np.ndarray, a: np.ndarray) -> np.ndarray:
    if name == "relu":
        return (z > 0).astype(z.dtype)
    if name == "leaky_relu":
        return np.where(z > 0, 1.0, 0.01).astype(z.dtype)
    if name == "tanh":
        return 1.0 - a * a
    if name == "sigmoid":
        return a * (1.0 - a)
    if name == "linear":
        return np.ones_like(z)
    raise ValueError(f"unknown activation {name!r}")


# --------------------------------------------------------------------------- MLP


class MLP:
    """Fully connected net: ``sizes=[d_in, h1, ..., d_out]``.

    init: "he" (ReLU), "xavier" (tanh/sigmoid), "normal" (N(0, init_scale^2)),
    "lecun". ``residual=True`` adds identity skips around hidden layers whose
    input and output widths agree (a pre-activation-free "ResMLP").
    ``out_activation`` applies an activation to the last layer too (used for the
    shared trunk of multi-task models).
    Parameters are kept as a flat list ``[W0, b0, W1, b1, ...]``.
    """

    def __init__(
        self,
        sizes,
        activation="relu",
        init="he",
        init_scale=None,
        residual=False,
        out_activation="linear",
        dtype=np.float64,
        rng=None,
    ):
        rng = rng if rng is not None else np.random.default_rng(0)
        self.sizes = list(sizes)
        self.activation = activation
        self.out_activation = out_activation
        self.residual = residual
        self.dtype = dtype
        self.params: list[np.ndarray] = []
        n_layers = len(sizes) - 1
        for i in range(n_layers):
            fan_in, fan_out = sizes[i], sizes[i + 1]
            if init == "he":
                std = math.sqrt(2.0 / fan_in)
            elif init == "xavier":
                std = math.sqrt(2.0 / (fan_in + fan_out))
            elif init == "lecun":
                std = math.sqrt(1.0 / fan_in)
            elif init == "normal":
                std = float(init_scale)
            else:
                raise ValueError(init)
            if residual and self._is_res(i):
                std *= 0.2  # keep the residual stream from growing with depth
            self.params.append((rng.standard_normal((fan_in, fan_out)) * std).astype(dtype))
            self.params.append(np.zeros(fan_out, dtype=dtype))
        self._cache = None

    @property
    def n_layers(self) -> int:
        return len(self.sizes) - 1

    def _is_res(self, i: int) -> bool:
        return self.residual and 0 < i < self.n_layers - 1 and self.sizes[i] == self.sizes[i + 1]

    def _layer_act(self, i: int) -> str:
        return self.out_activation if i == self.n_layers - 1 else self.activation

    def forward(self, X: np.ndarray) -> np.ndarray:
        h = X.astype(self.dtype, copy=False)
        cache = []
        for i in range(self.n_layers):
            W, b = self.params[2 * i], self.params[2 * i + 1]
            z = h @ W + b
            a = _act(self._layer_act(i), z)
            out = h + a if self._is_res(i) else a
            cache.append((h, z, a))
            h = out
        self._cache = cache
        return h

    def backward(self, dout: np.ndarray):
        """Returns (grads aligned with params, d input)."""
        grads = [None] * len(self.params)
        dh = dout.astype(self.dtype, copy=False)
        for i in reversed(range(self.n_layers)):
            h, z, a = self._cache[i]
            W = self.params[2 * i]
            dz = dh * _act_grad(self._layer_act(i), z, a)
            grads[2 * i] = h.T @ dz
            grads[2 * i + 1] = dz.sum(axis=0)
            dh_in = dz @ W.T
            if self._is_res(i):
                dh_in = dh_in + dh
            dh = dh_in
        return grads, dh

    def weight_norms(self) -> list[float]:
        return [float(np.linalg.norm(self.params[2 * i])) for i in range(self.n_layers)]


class MultiTaskMLP:
    """Shared trunk + one small linear head per task."""

    def __init__(self, d_in, trunk, heads: dict, activation="relu", rng=None, dtype=np.float64):
        rng = rng if rng is not None else np.random.default_rng(0)
        self.trunk = MLP(
            [d_in, *trunk], activation=activation, init="he", out_activation=activation, rng=rng, dtype=dtype
        )
        self.heads = {
            name: MLP([trunk[-1], d_out], init="xavier", rng=rng, dtype=dtype) for name, d_out in heads.items()
        }
        self.params = list(self.trunk.params)
        self._slices = {}
        for name, head in self.heads.items():
            self._slices[name] = (len(self.params), len(self.params) + len(head.params))
            self.params.extend(head.params)

    def forward(self, X):
        h = self.trunk.forward(X)
        return {name: head.forward(h) for name, head in self.heads.items()}

    def backward(self, douts: dict):
        grads = [None] * len(self.params)
        dh_total = None
        for name, head in self.heads.items():
            g, dh = head.backward(douts[name])
            lo, hi = self._slices[name]
            grads[lo:hi] = g
            dh_total = dh if dh_total is None else dh_total + dh
        g_trunk, _ = self.trunk.backward(dh_total)
        grads[: len(g_trunk)] = g_trunk
        return grads


# --------------------------------------------------------------------------- losses


def softmax_ce(logits: np.ndarray, y: np.ndarray):
    """Mean cross-entropy with integer labels; numerically stable. Returns (loss, dlogits)."""
    z = logits - logits.max(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        ez = np.exp(z)
        p = ez / ez.sum(axis=1, keepdims=True)
        n = logits.shape[0]
        logp = z - np.log(ez.sum(axis=1, keepdims=True))
        loss = -float(np.mean(logp[np.arange(n), y]))
        d = p.copy()
        d[np.arange(n), y] -= 1.0
    return loss, d / n


def mse(pred: np.ndarray, target: np.ndarray):
    """Mean squared error over all elements. Returns (loss, dpred)."""
    pred = pred.reshape(target.shape) if pred.size == target.size else pred
    diff = pred - target
    with np.errstate(over="ignore", invalid="ignore"):
        loss = float(np.mean(diff * diff))
    return loss, (2.0 / diff.size) * diff


def bce_logits(logits: np.ndarray, y: np.ndarray):
    """Stable binary cross-entropy on logits (shape (n,1) or (n,))."""
    z = logits.reshape(-1)
    y = y.reshape(-1).astype(z.dtype)
    loss = float(np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))))
    p = 1.0 / (1.0 + np.exp(-z))
    return loss, ((p - y) / z.size).reshape(logits.shape)


def naive_bce(logits: np.ndarray, y: np.ndarray):
    """Hand-rolled BCE as people write it: sigmoid, then log(p) and log(1-p), no epsilon.

    In float32, once a logit passes ~17 the sigmoid rounds to exactly 1.0 and
    log(1 - p) = log(0) = -inf; the chain rule then multiplies 0 by inf -> NaN.
    """
    z = logits.reshape(-1)
    y = y.reshape(-1).astype(z.dtype)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        p = 1.0 / (1.0 + np.exp(-z))
        loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
        dp = -(y / p - (1 - y) / (1 - p)) / z.size
        dz = dp * p * (1 - p)
    return float(loss), dz.reshape(logits.shape)


def accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == y))


# --------------------------------------------------------------------------- optimizers


def global_norm(grads) -> float:
    with np.errstate(over="ignore", invalid="ignore"):
        return float(math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads)))


def clip_by_global_norm(grads, max_norm: float):
    n = global_norm(grads)
    if np.isfinite(n) and n > max_norm:
        s = max_norm / (n + 1e-12)
        grads = [g * s for g in grads]
    return grads, n


class SGD:
    def __init__(self, params, lr=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        self.params = params
        self.lr = lr
        self.momentum = momentum
        self.nesterov = nesterov
        self.weight_decay = weight_decay
        self.buf = [np.zeros_like(p) for p in params]

    def step(self, grads, lr=None):
        lr = self.lr if lr is None else lr
        with np.errstate(over="ignore", invalid="ignore"):
            for p, g, v in zip(self.params, grads, self.buf, strict=True):
                if self.weight_decay:
                    g = g + self.weight_decay * p
                if self.momentum:
                    v *= self.momentum
                    v += g
                    g = g + self.momentum * v if self.nesterov else v
                p -= (lr * g).astype(p.dtype)


class Adam:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled=True):
        self.params = params
        self.lr = lr
        self.b1, self.b2 = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.decoupled = decoupled
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads, lr=None):
        lr = self.lr if lr is None else lr
        self.t += 1
        c1 = 1 - self.b1**self.t
        c2 = 1 - self.b2**self.t
        with np.errstate(over="ignore", invalid="ignore"):
            for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
                if self.weight_decay and not self.decoupled:
                    g = g + self.weight_decay * p
                m *= self.b1
                m += (1 - self.b1) * g
                v *= self.b2
                v += (1 - self.b2) * g * g
                upd = (m / c1) / (np.sqrt(v / c2) + self.eps)
                if self.weight_decay and self.decoupled:
                    upd = upd + self.weight_decay * p
                p -= (lr * upd).astype(p.dtype)


# --------------------------------------------------------------------------- LR schedules


def constant(base_lr):
    return lambda step: base_lr


def linear_warmup(base_lr, warmup):
    return lambda step: base_lr * min(1.0, (step + 1) / warmup)


def warmup_cosine(base_lr, warmup, total, min_lr=0.0):
    def f(step):
        if step < warmup:
            return base_lr * (step + 1) / warmup
        t = min(1.0, (step - warmup) / max(1, total - warmup))
        return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * t))

    return f


def warmup_linear_decay(base_lr, warmup, total):
    """HF Trainer's default ``linear`` scheduler."""

    def f(step):
        if step < warmup:
            return base_lr * step / warmup
        return base_lr * max(0.0, (total - step) / max(1, total - warmup))

    return f


def cosine(base_lr, total, min_lr=0.0):
    return lambda step: min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * min(1.0, step / total)))


def sgdr(base_lr, t0, t_mult=1, min_lr=0.0):
    """Cosine annealing with warm restarts (Loshchilov & Hutter)."""

    def f(step):
        t_i, s = t0, step
        while s >= t_i:
            s -= t_i
            t_i *= t_mult
        return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * s / t_i))

    return f


def step_decay(base_lr, milestones, gamma=0.1):
    def f(step):
        return base_lr * gamma ** sum(step >= m for m in milestones)

    return f


def exponential(base_lr, rate):
    return lambda step: base_lr * rate**step
