"""Serve a generated W&B project from the contract server in its own process (for benchmarks):

    python -m tests.wandb.contract.serve --runs 50 --steps 2000 --metrics 10 [--latency 0.05]

Prints the server's URL on the first line of stdout and serves until killed. The histories are a
stress case for size (a formula), not evidence for a diagnosis. ``--latency`` adds a network
round trip to every answer, as between a CI runner and api.wandb.ai.
"""

from __future__ import annotations

import argparse
import math
import sys
import threading

from .server import ContractServer


def fill(server: ContractServer, entity: str, project: str, runs: int, steps: int, metrics: int) -> None:
    for r in range(runs):
        history = []
        for step in range(steps):
            row = {"_step": step, "_runtime": step * 0.1, "_timestamp": 1.7e9 + step * 0.1}
            for m in range(metrics):
                row[f"metric_{m:02d}"] = math.exp(-step / (500 + 37 * m)) + 0.01 * math.sin(step * (m + 1))
            history.append(row)
        events = [{"_timestamp": 1.7e9 + t * 15.0, "_runtime": t * 15.0, "system.gpu.0.gpu": 90.0}
                  for t in range(int(steps * 0.1 / 15) + 1)]
        run = server.store.add_run(entity, project, f"run{r:04d}", history=history, events=events)
        run.exported_rows = int(steps * 0.9)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entity", default="bench")
    ap.add_argument("--project", default="project")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.0)
    args = ap.parse_args()
    server = ContractServer(latency_s=args.latency)
    fill(server, args.entity, args.project, args.runs, args.steps, args.metrics)
    server.start()
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if server.violations:
            print("\n".join(server.violations), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
