"""Benchmark: reading a local W&B run folder into the schema vs just walking its transaction log.

The run is written by the real ``wandb`` SDK in offline mode, in a subprocess: ``--steps`` steps
× ``--metrics`` metrics (default 20,000 × 20 = 400,000 points), one ``wandb.log`` call per step.
Values are generated: a stress case for size, not evidence for a diagnosis.

Reported as a ratio to a baseline measured on the same file in the same process:
- baseline: read the ``.wandb`` file and walk every record with its CRC-32 checked
  (``trackerhealth.adapters.wandb._log.scan``), nothing decoded;
- read: ``read_run_folder`` — walk, decode every record, build the ``RunHistory``;
  goal: read time / baseline time <= 10.
Also reported, for reference: the same read with every history record decoded through the
protobuf message classes (``bulk=False``), the path the fast one is tested against.
Each timing is the best of ``--repeat`` runs.

Run: python bench/bench_wandb_local.py [--steps 20000 --metrics 20] [--out bench/out] [--fresh]
(the logged run is kept in --out and reused; --fresh logs it again)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trackerhealth.adapters.wandb import _records, find_run_folders, read_run_folder
from trackerhealth.adapters.wandb._log import scan

WRITER = textwrap.dedent('''
    import math, sys
    import numpy as np
    import wandb

    steps, metrics = int(sys.argv[1]), int(sys.argv[2])
    base = ["train/loss", "val/loss", "grad_norm", "lr", "train/step_time", "train/data_time"]
    layers = [f"grad_norm/layers.{i}.weight" for i in range(max(metrics - len(base), 0))]
    keys = (base + layers)[:metrics]
    rng = np.random.default_rng(0)
    run = wandb.init(project="bench", name=f"bench-{steps}x{metrics}", config={"steps": steps})
    for i in range(steps):
        x = i / steps
        row = {k: float(np.exp(rng.normal(-1, 0.3))) for k in keys}
        row["train/loss"] = 2.5 * math.exp(-3 * x) + 0.3 + 0.05 * float(rng.standard_normal())
        row["lr"] = 3e-4 * 0.5 * (1 + math.cos(math.pi * x))
        run.log(row)
    run.finish()
''')


def write_run(out: Path, steps: int, metrics: int) -> Path:
    target = out / f"wandb_{steps}x{metrics}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_DIR=str(target), WANDB_SILENT="true", WANDB_DISABLE_GIT="true",
               WANDB_DISABLE_CODE="true", WANDB_ERROR_REPORTING="false")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", WRITER, str(steps), str(metrics)], cwd=target, env=env, check=True)
    print(f"logged {steps} x {metrics} with the wandb SDK in {time.perf_counter() - t0:.1f}s")
    return target


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--metrics", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()

    target = args.out / f"wandb_{args.steps}x{args.metrics}"
    folders = find_run_folders(target) if target.exists() and not args.fresh else []
    if len(folders) != 1:
        folders = find_run_folders(write_run(args.out, args.steps, args.metrics))
    folder = folders[0]
    log = next(folder.glob("*.wandb"))
    _records.import_proto()  # the one-time import of wandb's protobuf module is not part of a read

    def walk():
        return scan(log.read_bytes())

    import trackerhealth.adapters.wandb as adapter

    records = len(walk().records)
    history = read_run_folder(folder)
    walk_s = best(walk, args.repeat)
    read_s = best(lambda: read_run_folder(folder), args.repeat)
    adapter.decode = lambda recs: _records.decode(recs, bulk=False)
    try:
        protobuf_s = best(lambda: read_run_folder(folder), max(args.repeat // 2, 1))
    finally:
        adapter.decode = _records.decode
    ratio = read_s / walk_s
    result = {
        "steps": args.steps,
        "metrics": args.metrics,
        "log_bytes": log.stat().st_size,
        "records": records,
        "points": history.n_points,
        "walk_s": round(walk_s, 4),
        "read_s": round(read_s, 4),
        "read_over_walk": round(ratio, 2),
        "goal_read_over_walk": 10.0,
        "points_per_s": round(history.n_points / read_s),
        "protobuf_path_s": round(protobuf_s, 4),
        "protobuf_path_over_walk": round(protobuf_s / walk_s, 2),
        "python": sys.version.split()[0],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_wandb_local.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"read / walk = {ratio:.2f} (goal <= 10): {'ok' if ratio <= 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
