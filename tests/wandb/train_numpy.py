"""A small numpy MLP really trained and logged with the real ``wandb`` SDK in offline mode.

Run as a script (the tests start it in a subprocess, so the SDK's global state and its
``wandb-core`` process stay out of the test process)::

    python train_numpy.py OUT_DIR --mode sgd|watch|diverge|wide|kill [--steps N]

Every value passed to ``wandb.log`` is also appended to ``OUT_DIR/truth.jsonl`` (one line per step,
flushed), the second, independent record of what was logged. Modes:

* ``sgd`` — SGD with a cosine learning rate; logs ``train/loss``, ``grad_norm``, ``lr``,
  ``grad_norm/<layer>`` (exact per-layer L2 norms), a nested ``opt`` dict, and ``val/loss`` every
  10 steps; sets tags, config and a summary value.
* ``watch`` — logs what ``wandb.watch`` logs for a torch model: per-layer histograms
  ``gradients/<layer>`` and ``parameters/<layer>`` (64 bins over [min, max] of the finite
  elements, one bin when all are equal — the torch hook's rule), and the exact norms under
  ``exact_grad_l2/<layer>`` / ``exact_weight_l2/<layer>`` to check the estimate against.
* ``diverge`` — the learning rate grows until the loss overflows to Inf and then NaN.
* ``wide`` — the training metrics plus 1,500 generated ``stress/k####`` values per step (a size
  stress case): records of ~50 KiB, each split across 32 KiB blocks (FIRST / MIDDLE / LAST chunks).
* ``kill`` — logs ``--steps`` steps, then SIGKILLs ``wandb-core`` and itself (a crash: nothing
  is flushed or closed), leaving a log that ends wherever the writer was.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import time
from pathlib import Path

import numpy as np

LAYERS = ("fc1", "fc2", "out")


def make_data(rng: np.random.Generator, n: int = 256, d: int = 8):
    x = rng.standard_normal((n, d))
    w_true = rng.standard_normal((d, 1))
    y = np.tanh(x @ w_true) + 0.1 * rng.standard_normal((n, 1))
    return x, y


def init_params(rng: np.random.Generator, d: int = 8, h: int = 16) -> dict[str, np.ndarray]:
    return {
        "fc1.weight": rng.standard_normal((d, h)) / math.sqrt(d),
        "fc1.bias": np.zeros(h),
        "fc2.weight": rng.standard_normal((h, h)) / math.sqrt(h),
        "fc2.bias": np.zeros(h),
        "out.weight": rng.standard_normal((h, 1)) / math.sqrt(h),
        "out.bias": np.zeros(1),
    }


def forward_backward(p: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray):
    with np.errstate(all="ignore"):  # a diverging run overflows on purpose
        a1 = np.tanh(x @ p["fc1.weight"] + p["fc1.bias"])
        a2 = np.tanh(a1 @ p["fc2.weight"] + p["fc2.bias"])
        pred = a2 @ p["out.weight"] + p["out.bias"]
        err = pred - y
        loss = float(np.mean(err**2))
        g = 2 * err / len(x)
        grads = {"out.weight": a2.T @ g, "out.bias": g.sum(0)}
        d2 = (g @ p["out.weight"].T) * (1 - a2**2)
        grads["fc2.weight"], grads["fc2.bias"] = a1.T @ d2, d2.sum(0)
        d1 = (d2 @ p["fc2.weight"].T) * (1 - a1**2)
        grads["fc1.weight"], grads["fc1.bias"] = x.T @ d1, d1.sum(0)
    return loss, grads


def layer_norm(arrays: dict[str, np.ndarray], layer: str) -> float:
    """The L2 norm of a layer's weight and bias together."""
    with np.errstate(all="ignore"):
        return float(np.sqrt(sum(np.sum(v.astype(np.float64) ** 2) for k, v in arrays.items()
                                 if k.startswith(layer + "."))))


def watch_histogram(tensor: np.ndarray, bins: int = 64):
    """(counts, edges) as wandb.watch's torch hook computes them (histc over [min, max])."""
    flat = tensor.reshape(-1).astype(np.float32)
    flat = flat[np.isfinite(flat)]
    lo, hi = float(flat.min()), float(flat.max())
    if lo == hi:
        return np.array([float(flat.size)]), np.array([lo, hi])
    counts, edges = np.histogram(flat, bins=bins, range=(lo, hi))
    return counts.astype(np.float64), edges


def kill_everything() -> None:
    """SIGKILL this process's children (wandb-core) and then this process: a hard crash."""
    me = os.getpid()
    children: list[int] = []
    for task in Path(f"/proc/{me}/task").iterdir():
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    for child in children:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.kill(me, signal.SIGKILL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--mode", choices=("sgd", "watch", "diverge", "wide", "kill"), default="sgd")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--sleep", type=float, default=0.002, help="seconds per step, so system stats interleave")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=str(args.out), WANDB_SILENT="true",
                      WANDB_DISABLE_GIT="true", WANDB_DISABLE_CODE="true", WANDB_ERROR_REPORTING="false")
    import wandb

    rng = np.random.default_rng({"sgd": 0, "watch": 1, "diverge": 2, "wide": 4, "kill": 3}[args.mode])
    x, y = make_data(rng)
    xv, yv = make_data(rng, n=64)
    params = init_params(rng)
    base_lr = 0.05
    config = {"lr": base_lr, "steps": args.steps, "model": {"hidden": 16, "layers": list(LAYERS)}}
    run = wandb.init(project="trackerhealth-tests", name=f"numpy-{args.mode}", config=config,
                     tags=["numpy", args.mode], settings=wandb.Settings(x_stats_sampling_interval=0.2))
    truth = (args.out / "truth.jsonl").open("w")
    truth.write(json.dumps({"run_id": run.id, "project": run.project, "name": run.name, "pid": os.getpid()}) + "\n")
    truth.flush()
    for step in range(args.steps):
        if args.mode == "diverge":
            lr = base_lr * 1.08**step
        else:
            lr = base_lr * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        loss, grads = forward_backward(params, x, y)
        with np.errstate(all="ignore"):
            total = float(np.sqrt(sum(np.sum(g**2) for g in grads.values())))
        row: dict = {"train/loss": loss, "grad_norm": total, "lr": lr}
        media: dict = {}
        if args.mode == "watch":
            for layer in LAYERS:
                for kind, arrays in (("gradients", grads), ("parameters", params)):
                    tensor = np.concatenate([arrays[f"{layer}.weight"].ravel(), arrays[f"{layer}.bias"].ravel()])
                    counts, edges = watch_histogram(tensor)
                    media[f"{kind}/{layer}"] = wandb.Histogram(np_histogram=(counts.tolist(), edges.tolist()))
                row[f"exact_grad_l2/{layer}"] = layer_norm(grads, layer)
                row[f"exact_weight_l2/{layer}"] = layer_norm(params, layer)
        else:
            for layer in LAYERS:
                row[f"grad_norm/{layer}"] = layer_norm(grads, layer)
        if args.mode == "wide":
            # A size stress case (generated values, not evidence): one record spans several blocks.
            row.update({f"stress/k{i:04d}": float(v) for i, v in enumerate(rng.standard_normal(1500))})
        if args.mode == "sgd":
            row["opt"] = {"momentum": 0.0, "lr_scale": lr / base_lr}
        if step % 10 == 0:
            row["val/loss"] = forward_backward(params, xv, yv)[0]
        run.log({**row, **media})
        truth.write(json.dumps({"step": step, "time": time.time(), "row": row}) + "\n")
        truth.flush()
        with np.errstate(all="ignore"):
            for k in params:
                params[k] = params[k] - lr * grads[k]
        time.sleep(args.sleep)
    if args.mode == "kill":
        time.sleep(0.5)  # let the SDK hand the rows to wandb-core; then crash without closing anything
        kill_everything()
    run.summary["final_loss"] = loss
    run.finish()


if __name__ == "__main__":
    main()
