"""Benchmark: the in-training monitor's overhead on a 1,000,000-step run.

The stream: 1,000,000 steps, each ``monitor.log({"train/loss", "grad_norm", "lr"}, step=step)``
with Python floats (what ``loss.item()`` gives), and ``monitor.check()`` at every epoch end
(1,000 steps per epoch: 1,000 checks). Its values are generated (a stress case for size, not
evidence for a diagnosis).

Reported as a ratio to a baseline measured in the same process: the time of a minimal training
step — one forward/backward/SGD step of a 16-32-1 MLP on a batch of 32 with torch on one CPU
thread (numpy's equivalent when torch is not installed). Overhead per step = (time of the loop
with the monitor - time of the same loop without it) / steps. Goal: <= 1 % of the step.
Also reported: how many checks ran the diagnoses, the slowest check, the monitor's memory after
10^6 steps and (``--long``) after 10^7 steps with the default cap, which must not grow with the run.

Run: python bench/bench_monitor.py [--steps 1000000] [--epoch 1000] [--long] [--out bench/out]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from trackerhealth.monitor import HealthMonitor


def training_step_time(repeats: int = 5, steps: int = 2000) -> tuple[float, str]:
    """Median seconds of one minimal training step."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(1)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(32, 16), torch.randn(32, 1)

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()

        what = f"torch {torch.__version__} MLP 16-32-1, batch 32, SGD, 1 CPU thread"
    else:
        rng = np.random.default_rng(0)
        w1, w2 = rng.standard_normal((16, 32)) * 0.3, rng.standard_normal((32, 1)) * 0.3
        x, y = rng.standard_normal((32, 16)), rng.standard_normal((32, 1))

        def step():
            nonlocal w1, w2
            h = np.maximum(x @ w1, 0)
            err = h @ w2 - y
            g2 = h.T @ err / 32
            g1 = x.T @ ((err @ w2.T) * (h > 0)) / 32
            w1 -= 0.01 * g1
            w2 -= 0.01 * g2
            return float((err ** 2).mean())

        what = "numpy MLP 16-32-1, batch 32, SGD (torch not installed)"
    for _ in range(200):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) / steps)
    return float(np.median(times)), what


def stream(n: int, seed: int = 0) -> tuple[list[float], list[float], list[float]]:
    rng = np.random.default_rng(seed)
    s = np.arange(n) / n
    loss = 2.5 * np.exp(-3 * s) + 0.3 + 0.05 * rng.standard_normal(n)
    grad = 1.0 + 0.2 * rng.standard_normal(n) ** 2
    lr = 3e-4 * 0.5 * (1 + np.cos(np.pi * s))
    return loss.tolist(), grad.tolist(), lr.tolist()


def run_stream(n: int, epoch: int, monitor: HealthMonitor | None, values) -> dict:
    loss, grad, lr = values
    check_times = []
    analyses = 0
    gc.collect()
    t0 = time.perf_counter()
    if monitor is None:
        sink = []
        for i in range(n):
            sink.append({"train/loss": loss[i], "grad_norm": grad[i], "lr": lr[i]})  # the dict the loop builds anyway
            sink.clear()
            if i % epoch == epoch - 1:
                pass
    else:
        log, check = monitor.log, monitor.check
        for i in range(n):
            log({"train/loss": loss[i], "grad_norm": grad[i], "lr": lr[i]}, step=i)
            if i % epoch == epoch - 1:
                c0 = time.perf_counter()
                analyses += check().analyzed
                check_times.append(time.perf_counter() - c0)
    total = time.perf_counter() - t0
    return {"seconds": total, "analyses": analyses, "checks": len(check_times),
            "check_seconds": float(sum(check_times)), "slowest_check_seconds": max(check_times, default=0.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--epoch", type=int, default=1000)
    ap.add_argument("--long", action="store_true", help="also stream 10^7 steps and report the memory")
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args()
    logging.getLogger("trackerhealth").setLevel(logging.CRITICAL + 1)  # the stream is a formula: its findings are not the point

    step_s, what = training_step_time()
    values = stream(args.steps)
    bare = min(run_stream(args.steps, args.epoch, None, values)["seconds"] for _ in range(2))
    runs = []
    for _ in range(2):
        monitor = HealthMonitor(alert=None)
        r = run_stream(args.steps, args.epoch, monitor, values)
        c0 = time.perf_counter()
        final = monitor.close()
        r["final_check_seconds"] = time.perf_counter() - c0
        r["final"] = final.ids
        r["nbytes"] = monitor.nbytes
        runs.append(r)
    best = min(runs, key=lambda r: r["seconds"])
    overhead = (best["seconds"] - bare) / args.steps
    result = {
        "steps": args.steps,
        "epoch_steps": args.epoch,
        "keys_per_step": 3,
        "training_step": what,
        "training_step_us": step_s * 1e6,
        "monitor_overhead_us_per_step": overhead * 1e6,
        "overhead_share_of_step": overhead / step_s,
        "goal_share": 0.01,
        "log_only_us_per_step": (best["seconds"] - best["check_seconds"] - bare) / args.steps * 1e6,
        "checks": best["checks"],
        "checks_that_ran_the_diagnoses": best["analyses"],
        "all_checks_seconds": best["check_seconds"],
        "slowest_check_ms": best["slowest_check_seconds"] * 1e3,
        "final_check_ms": best["final_check_seconds"] * 1e3,
        "monitor_bytes_after_1e6": best["nbytes"],
        "final_findings": best["final"],
    }
    if args.long:
        monitor = HealthMonitor(alert=None)
        n = 10_000_000
        loss, grad, lr = values
        m = len(loss)
        t0 = time.perf_counter()
        for i in range(n):
            j = i % m
            monitor.log({"train/loss": loss[j], "grad_norm": grad[j], "lr": lr[j]}, step=i)
            if i % 100_000 == 99_999:
                monitor.check()
        result["long_steps"] = n
        result["long_seconds"] = time.perf_counter() - t0
        result["monitor_bytes_after_1e7"] = monitor.nbytes
        history = monitor.history()
        keys = history.keys()
        result["history_points_per_key_after_1e7"] = {k: len(history[k]) for k in keys}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_monitor.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    verdict = "OK" if result["overhead_share_of_step"] <= 0.01 else "OVER GOAL"
    print(f"monitor overhead {result['monitor_overhead_us_per_step']:.2f} us/step = "
          f"{100 * result['overhead_share_of_step']:.2f} % of a {result['training_step_us']:.0f} us training step "
          f"(goal <= 1 %): {verdict}")


if __name__ == "__main__":
    main()
