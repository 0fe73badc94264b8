"""Real training runs for the dashboard tests, and small helpers for the browser checks.

:func:`train` really trains a small ReLU MLP (numpy, float16 matmuls on float32 weights, SGD with momentum, warm-up + cosine LR) on a
three-arm spiral and logs what a well-instrumented training loop logs: train loss every step, val
loss every 25 steps, the total and per-layer gradient norms, lr and momentum, and per-step timings
measured with ``perf_counter`` (data, compute, step). ``gpu_util`` is the compute device's busy
share, compute time over step time, as a GPU's utilization counter measures it — the device here
being the CPU running numpy. With ``lr_spike_at`` the schedule has a typo that multiplies the LR
for a few steps: the gradients really explode, float16 activations overflow and the loss really
becomes NaN (as in mixed-precision training without a loss scaler).
"""

from __future__ import annotations

import time

import numpy as np

from trackerhealth.schema import RunHistory, RunRef

LAYERS = ("embed", "block1", "block2", "head")


def spirals(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    k = 3
    y = rng.integers(0, k, n)
    r = rng.random(n)
    theta = y * (2 * np.pi / k) + 4.0 * r + 0.25 * rng.standard_normal(n)
    X = np.column_stack([r * np.cos(theta), r * np.sin(theta)])
    return X.astype(np.float64), y


def _forward(params, X):
    # Mixed precision as autocast does it: matmuls in float16 on float32 master weights. Without a
    # loss scaler, an activation beyond float16's 65,504 becomes inf, and inf - inf is NaN.
    acts = [X]
    h = X
    for i, (W, b) in enumerate(params):
        z = (h.astype(np.float16) @ W.astype(np.float16)).astype(np.float32) + b
        h = z if i == len(params) - 1 else np.maximum(z, 0.0)
        acts.append(h)
    return acts


def _loss_and_grads(params, X, y):
    acts = _forward(params, X)
    logits = acts[-1].astype(np.float16)  # the fp16 softmax a missing autocast exclusion leaves
    logits = (logits - logits.max(axis=1, keepdims=True)).astype(np.float64)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    n = len(y)
    loss = float(-np.log(p[np.arange(n), y] + 1e-300).mean())
    d = p
    d[np.arange(n), y] -= 1
    d /= n
    grads = [None] * len(params)
    for i in range(len(params) - 1, -1, -1):
        W, _ = params[i]
        grads[i] = (acts[i].T @ d, d.sum(axis=0))
        if i:
            d = (d @ W.T) * (acts[i] > 0)
    return loss, grads


def train(name: str, *, steps: int = 800, seed: int = 0, lr_spike_at: int | None = None, batch: int = 64,
          tracker: str = "wandb", project: str = "dashboard-tests", url: str | None = None,
          tags: tuple[str, ...] = (), config: dict | None = None) -> RunHistory:
    rng = np.random.default_rng(seed)
    X, y = spirals(3000, rng)
    Xv, yv = spirals(600, rng)
    sizes = (2, 32, 32, 32, 3)
    params = [(rng.standard_normal((a, b)) * np.sqrt(2.0 / a), np.zeros(b)) for a, b in zip(sizes[:-1], sizes[1:])]
    velocity = [(np.zeros_like(W), np.zeros_like(b)) for W, b in params]
    base_lr, beta, warmup = 0.1, 0.9, 50
    rows: dict[str, tuple[list, list]] = {}

    def log(step, **values):
        for k, v in values.items():
            s, vals = rows.setdefault(k, ([], []))
            s.append(step)
            vals.append(float(v))

    with np.errstate(all="ignore"):
        for step in range(steps):
            t0 = time.perf_counter()
            idx = rng.integers(0, len(X), batch)
            xb, yb = X[idx] + 0.01 * rng.standard_normal((batch, 2)), y[idx]  # jitter: real input work
            t1 = time.perf_counter()
            lr = base_lr * min(1.0, (step + 1) / warmup) * 0.5 * (1 + np.cos(np.pi * step / steps))
            if lr_spike_at is not None and lr_spike_at <= step < lr_spike_at + 5:
                lr *= 100.0  # the schedule typo
            loss, grads = _loss_and_grads(params, xb, yb)
            norms = [float(np.sqrt((gW ** 2).sum() + (gb ** 2).sum())) for gW, gb in grads]
            for i, ((W, b), (gW, gb), (vW, vb)) in enumerate(zip(params, grads, velocity)):
                vW *= beta
                vW += gW
                vb *= beta
                vb += gb
                W -= lr * vW
                b -= lr * vb
            t2 = time.perf_counter()
            data_t, compute_t = t1 - t0, t2 - t1
            log(step, **{"train/loss": loss, "grad_norm": float(np.sqrt(sum(n * n for n in norms))), "lr": lr,
                         "momentum": beta, "data_time": data_t, "compute_time": compute_t,
                         "step_time": data_t + compute_t, "gpu_util": 100.0 * compute_t / (data_t + compute_t)})
            log(step, **{f"grad_norm/{layer}": n for layer, n in zip(LAYERS, norms)})
            if step % 25 == 24 or step == steps - 1:
                vloss, _ = _loss_and_grads(params, Xv, yv)
                log(step, **{"val/loss": vloss})
    ref = RunRef(tracker, project, f"{name}-{seed}", name=name, url=url, tags=tags, config=config or {})
    return RunHistory.from_series(ref, {k: (np.array(s), np.array(v)) for k, (s, v) in rows.items()})


# -- browser helpers ----------------------------------------------------------------------------
PANELS = ("loss", "grad", "optim", "system")


def open_page(page, path, timeout_ms: int = 20_000):
    """Navigate to a written page and wait until its charts are drawn (or failed)."""
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready]", timeout=timeout_ms, state="attached")
    return page.get_attribute("body", "data-ready")


def plot_summary(page, panel: str) -> dict:
    """What Plotly actually drew in one panel: traces, points, findings, axis types."""
    return page.evaluate(
        """(id) => {
        const gd = document.getElementById('plot-' + id);
        if (!gd || !gd.data) return null;
        const len = (a) => (a && a.length !== undefined) ? a.length : 0;
        return {
          traces: gd.data.map(t => ({type: t.type, name: t.name, meta: t.meta || null, x: len(t.x), y: len(t.y),
                                     z: t.z ? len(t.z) : 0, visible: t.visible})),
          yaxisType: gd._fullLayout.yaxis.type,
          svgPaths: gd.querySelectorAll('.scatterlayer .trace path.js-line').length,
          heatmaps: gd.querySelectorAll('.heatmaplayer image, .hm image').length,
        };
    }""",
        panel,
    )


def million_step_history(steps: int = 1_000_000, layers: int = 64, seed: int = 0) -> tuple[RunHistory, dict]:
    """A stress case for size (the benchmark's shape, built in memory for speed): 10 scalars every
    step and ``layers`` per-layer gradient norms every 10 steps, with a one-step loss spike, a
    one-point layer spike and a NaN tail placed on it. Generated values: never diagnosis evidence."""
    from trackerhealth.schema import Series

    rng = np.random.default_rng(seed)
    s = np.arange(steps, dtype=np.float64)
    x = s / steps
    nan_wall = np.full(steps, np.nan)
    cols = {
        "train/loss": 2.5 * np.exp(-3 * x) + 0.3 + 0.05 * rng.standard_normal(steps),
        "val/loss": 2.5 * np.exp(-3 * x) + 0.35 + 0.01 * rng.standard_normal(steps),
        "grad_norm": 1.0 + 0.2 * rng.standard_normal(steps) ** 2,
        "lr": 3e-4 * 0.5 * (1 + np.cos(np.pi * x)),
        "momentum": np.full(steps, 0.9),
        "gpu_util": np.clip(92 + 3 * rng.standard_normal(steps), 0, 100),
        "data_time": 0.004 + 0.001 * rng.random(steps),
        "compute_time": 0.05 + 0.002 * rng.random(steps),
        "step_time": 0.055 + 0.002 * rng.random(steps),
        "throughput": 2000 + 50 * rng.standard_normal(steps),
    }
    placed = {"spike_step": 654_321.0, "nan_from": 995_000.0, "layer": 40, "layer_spike_step": 333_330.0}
    cols["train/loss"][654_321] = 400.0
    cols["train/loss"][995_000:] = np.nan
    series = {k: Series(s, v, nan_wall) for k, v in cols.items()}
    ls = s[::10]
    depth = np.arange(layers)
    g = 0.05 * (1 + depth / layers)[:, None] * np.exp(0.3 * rng.standard_normal((layers, len(ls))))
    g[placed["layer"], 33_333] = 1e3
    wall = np.full(len(ls), np.nan)
    for i in range(layers):
        series[f"grad_norm/layers.{i}.weight"] = Series(ls, g[i], wall)
    return RunHistory(RunRef("wandb", "stress", "million", name="million-step-stress"), series), placed
