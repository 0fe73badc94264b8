"""Benchmark: scanning a 50-run W&B project through the API, parallel vs a sequential loop.

The project is served by the contract server (tests/wandb/contract) in its own process, so the
client's threads and the server do not share one interpreter: ``--runs`` runs × ``--steps`` steps
× ``--metrics`` metrics (90 % in the parquet export, the rest live), plus system events.
``--latency`` adds a round trip to every answer, as between a CI runner and api.wandb.ai (the
figures are reported for 0 and for the given latency). Values are generated: a stress case for
size, not evidence for a diagnosis.

Measured in the same process, against the same server, best of ``--repeat``:
- baseline: the loop a user writes — ``for run in api.runs(path): list(run.scan_history(use_cache=False))``
  (the SDK's parquet cache off, as trackerhealth runs it; see adapters/wandb/_api.py);
- fetch: trackerhealth's adapter, ``--workers`` runs at a time (history and system metrics);
  goal: baseline / fetch >= 3; also the adapter one run at a time, to show what the parallelism
  alone gives (the rest is its larger history pages: 10,000 rows per request instead of 1,000);
- scan: the whole ``scan`` (list, fetch, analyze every run; nothing written), for reference;
- incremental: the same scan again with the history cache warm and nothing changed on the server:
  must fetch no history (0 points fetched), and its time as a fraction of the cold scan.

Run: python bench/bench_wandb_api.py [--runs 50 --steps 2000 --metrics 10 --latency 0.05 --workers 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

API_KEY = "7472616b65726865616c746820636f6e74726163"  # the contract server's key (tests/wandb/contract)


def start_server(args, latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.wandb.contract.serve", "--runs", str(args.runs), "--steps", str(args.steps),
         "--metrics", str(args.metrics), "--latency", str(latency)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit("the contract server did not start")
    return proc, url


def baseline(path: str) -> tuple[float, int]:
    import wandb

    started = time.perf_counter()
    api = wandb.Api(timeout=120)
    rows = 0
    for run in api.runs(path, per_page=100, filters={"state": {"$ne": f"x{time.time_ns()}"}}):  # no listing cache
        rows += sum(1 for _ in run.scan_history(use_cache=False))
    return time.perf_counter() - started, rows


def parallel_fetch(path: str, workers: int) -> tuple[float, int]:
    from trackerhealth.adapters.wandb import WandbApiAdapter

    started = time.perf_counter()
    adapter = WandbApiAdapter(path, cache_dir=None, workers=workers, incremental=False)
    runs = adapter.list_runs()
    with ThreadPoolExecutor(workers) as pool:
        points = sum(f.fetched_points for f in pool.map(adapter.fetch_history, runs))
    return time.perf_counter() - started, points


def full_scan(path: str, workers: int, cache_dir) -> tuple[float, dict]:
    from trackerhealth.adapters.wandb import WandbApiAdapter
    from trackerhealth.scan import scan

    started = time.perf_counter()
    adapter = WandbApiAdapter(path, cache_dir=cache_dir, workers=workers)
    result = scan(adapter, None, workers=workers)
    adapter.scan_complete()
    adapter.close()
    return time.perf_counter() - started, result.summary.to_dict()


def measure(args, latency: float) -> dict:
    proc, url = start_server(args, latency)
    os.environ.update(WANDB_BASE_URL=url, WANDB_API_KEY=API_KEY, WANDB_SILENT="true")
    path = "bench/project"
    try:
        base, par, one = [], [], []
        for _ in range(args.repeat):
            base.append(baseline(path))
            par.append(parallel_fetch(path, args.workers))
            one.append(parallel_fetch(path, 1))
        with tempfile.TemporaryDirectory() as tmp:
            cold_s, cold = full_scan(path, args.workers, Path(tmp))
            warm_s, warm = full_scan(path, args.workers, Path(tmp))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    b = min(t for t, _ in base)
    p = min(t for t, _ in par)
    return {
        "latency_s": latency,
        "baseline_s": round(b, 3), "baseline_rows": base[0][1],
        "parallel_fetch_s": round(p, 3), "parallel_points": par[0][1],
        "speedup": round(b / p, 2),
        # How much of it is the parallelism: the adapter with one run at a time.
        "adapter_one_at_a_time_s": round(min(t for t, _ in one), 3),
        "parallel_over_one_at_a_time": round(min(t for t, _ in one) / p, 2),
        "scan_cold_s": round(cold_s, 3), "scan_cold_fetched_points": cold["fetched_points"],
        "scan_incremental_s": round(warm_s, 3), "scan_incremental_fetched_points": warm["fetched_points"],
        "scan_incremental_cached_points": warm["cached_points"],
        "incremental_fraction": round(warm_s / cold_s, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--metrics", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args()
    results = {"config": vars(args) | {"out": str(args.out)},
               "rounds": [measure(args, latency) for latency in sorted({0.0, args.latency})]}
    for r in results["rounds"]:
        print(f"latency {r['latency_s'] * 1000:.0f} ms: sequential scan_history loop {r['baseline_s']:.2f}s "
              f"({r['baseline_rows']:,} rows), parallel fetch {r['parallel_fetch_s']:.2f}s = {r['speedup']:.1f}x "
              f"(goal >= 3; {r['parallel_over_one_at_a_time']:.1f}x over the adapter one run at a time); scan cold {r['scan_cold_s']:.2f}s, incremental {r['scan_incremental_s']:.2f}s "
              f"({r['incremental_fraction']:.1%}) fetching {r['scan_incremental_fetched_points']} points")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_wandb_api.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
