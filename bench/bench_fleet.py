"""Benchmark: fleet scans through the CLI (``trackerhealth scan`` as a subprocess), with and without Ray.

Every figure is a ratio to a baseline measured in the same invocation, on the same data:

1. Re-scan cost (reuse): a second scan right after a cold one, same ``--cache-dir``, nothing
   changed: second.elapsed_seconds / cold.elapsed_seconds (issue target <= 0.05), plus the second
   scan's ``reused`` and ``fetched_points``. MLflow sqlite store (runs x 2,000 steps x 3 metrics,
   loss decaying with noise) without Ray and with ``--ray local``; a W&B contract-server project
   without Ray. Scans write (no --dry-run), as a scheduled scan does.
2. Latency-bound scaling: a contract server answering every request 50 ms late, runs spread over
   10 projects of one entity, tiny histories (~100 steps): ``--entity ENT --dry-run --no-cache``,
   one process ``--workers 1`` (baseline) vs ``--ray local --workers 2`` and ``--workers 4``.
   Wall time (perf_counter around the subprocess) and summary.elapsed_seconds; speed-up and
   efficiency = speed-up / workers (issue aims >= 0.8). ``--ray local`` pays Ray's start-up in
   every command: it is measured in the same run as wall(``--ray local`` scan of a 1-run project)
   - wall(the same scan without Ray), and the figures are also given with it subtracted.
3. CPU-bound: MLflow sqlite runs of 100,000 steps, ``--dry-run --no-cache``,
   ``--ray local --workers 1`` vs ``--workers 2``.
4. Driver memory: peak RSS of the driver process only (psutil, polled every 50 ms; Ray's workers,
   raylet and GCS are separate processes and not counted) for a ``--ray local --dry-run --no-cache``
   W&B scan of N vs 10 N tiny runs (no latency): ratio of peaks (flat is ~1.0).

SCALED DOWN (a 2-core machine, ~12 minutes of bench in all): the issue asks 2,000 runs for (2),
200 runs for (3) and 200 vs 2,000 runs for (4). Defaults here: (1) 40 runs, (2) 100 runs (10 per
project; a --workers 1 scan costs ~0.6 s per run at 50 ms a request, so 2,000 would take ~20 min
per configuration), (3) 12 runs x 100,000 steps x 2 metrics, (4) 100 vs 1,000 runs (a --ray local
scan of tiny runs costs ~0.15 s per run here); ``--quick`` shrinks all of them further (see QUICK).
The MLflow stores are written with MlflowClient (experiment, runs, last step via log_batch, end
state) plus one bulk INSERT into MLflow's metrics table for the other steps, to keep logging
seconds rather than minutes. ``--ray local`` gives its Ray one CPU slot per run in flight (the
scan waits on the network more than it computes), but this machine still has 2 cores for the
driver, Ray's own processes and the workers: ``--workers 4`` is bounded by them here. Values are generated: a stress case for size and latency, not
evidence for a diagnosis. The contract server runs in this process (threads); the MLflow store is
read directly (sqlite:///).

Run: python bench/bench_fleet.py [--quick] [--only reuse,latency,cpu,memory] [--out bench/out]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLI = str(ROOT / ".venv" / "bin" / "trackerhealth")
if not Path(CLI).exists():
    CLI = str(Path(sys.executable).with_name("trackerhealth"))

os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")

FULL = dict(reuse_runs=40, reuse_steps=2000, lat_projects=10, lat_runs=10, lat_steps=100, latency=0.05,
            cpu_runs=12, cpu_steps=100_000, cpu_metrics=2, mem_small=100, mem_large=1000)
QUICK = dict(reuse_runs=10, reuse_steps=500, lat_projects=4, lat_runs=5, lat_steps=50, latency=0.05,
             cpu_runs=3, cpu_steps=20_000, cpu_metrics=2, mem_small=20, mem_large=200)

BASE_ENV = {**os.environ, "WANDB_SILENT": "true", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1"}


class CliError(RuntimeError):
    pass


def run_cli(args: list[str], env: dict, label: str) -> dict:
    """Run ``trackerhealth scan ARGS --format json``; wall time, the driver's peak RSS, the summary."""
    cmd = [CLI, "scan", *args, "--format", "json", "--no-progress"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env={**BASE_ENV, **env}, cwd=ROOT)
        ps = psutil.Process(proc.pid)
        peak = 0
        while proc.poll() is None:
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.05)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode not in (0, 1):  # 1: a run at or above --fail-on, a finding, not a failure
        raise CliError(f"{label}: exit {proc.returncode}\n$ {' '.join(cmd)}\n{stderr[-3000:]}")
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise CliError(f"{label}: stdout is not JSON ({exc})\n$ {' '.join(cmd)}\n{stdout[-1500:]}\n{stderr[-1500:]}")
    s = doc["summary"]
    errors = s.get("errors") or []
    result = {"label": label, "wall_s": round(wall, 3), "elapsed_s": round(s["elapsed_seconds"], 3),
              "analyzed": s.get("analyzed"), "reused": s.get("reused"), "fetched_points": s.get("fetched_points"),
              "runs": len(doc.get("runs", [])), "peak_rss_mb": round(peak / 2**20, 1), "rc": proc.returncode,
              "summary_errors": errors if isinstance(errors, int) else len(errors)}
    print(f"  {label}: wall {wall:.2f}s elapsed {s['elapsed_seconds']:.2f}s analyzed {result['analyzed']} "
          f"reused {result['reused']} fetched {result['fetched_points']} rss {result['peak_rss_mb']} MB", flush=True)
    return result


# -- data ---------------------------------------------------------------------------------------

def mlflow_store(db: Path, artifacts: Path, runs: int, steps: int, metrics: int) -> str:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.create_experiment("bench", artifact_location=artifacts.as_uri())
    keys = ["train/loss", "val/loss", "grad_norm"][:metrics]
    t0 = 1_750_000_000_000
    for r in range(runs):
        rng = np.random.default_rng(r)
        run_id = client.create_run(exp, run_name=f"bench-{r}", start_time=t0).info.run_id
        x = np.arange(steps) / steps
        series = {"train/loss": 2.5 * np.exp(-3 * x) + 0.3 + 0.05 * rng.standard_normal(steps),
                  "val/loss": 2.5 * np.exp(-3 * x) + 0.35 + 0.01 * rng.standard_normal(steps),
                  "grad_norm": 1.0 + 0.2 * rng.standard_normal(steps) ** 2}
        # Steps 0..N-2 in one executemany into MLflow's own metrics table (log_batch takes 1,000
        # points per call: ~7k points/s here, minutes for the CPU-bound case); the last step through
        # log_batch, so MLflow itself maintains latest_metrics (what search_runs lists).
        rows = [(key, float(series[key][i]), t0 + i * 55, run_id, i) for key in keys for i in range(steps - 1)]
        with sqlite3.connect(db) as con:
            con.executemany("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                            "VALUES (?, ?, ?, ?, ?, 0)", rows)
        i = steps - 1
        client.log_batch(run_id, metrics=[Metric(key, float(series[key][i]), t0 + i * 55, i) for key in keys])
        client.set_terminated(run_id, "FINISHED", end_time=t0 + steps * 55)
    return exp


def wandb_fill(server, entity: str, project: str, runs: int, steps: int, metrics: int = 3) -> None:
    """Like tests.wandb.contract.serve.fill, with a loss that decays with noise."""
    for r in range(runs):
        rng = np.random.default_rng(r)
        noise = rng.standard_normal((steps, metrics))
        history = []
        for step in range(steps):
            row = {"_step": step, "_runtime": step * 0.1, "_timestamp": 1.7e9 + step * 0.1}
            for m in range(metrics):
                name = "loss" if m == 0 else f"metric_{m:02d}"
                row[name] = math.exp(-step / (steps / 3 + 37 * m)) + 0.3 + 0.02 * float(noise[step, m])
            history.append(row)
        events = [{"_timestamp": 1.7e9 + t * 15.0, "_runtime": t * 15.0, "system.gpu.0.gpu": 90.0}
                  for t in range(int(steps * 0.1 / 15) + 1)]
        run = server.store.add_run(entity, project, f"run{r:04d}", history=history, events=events)
        run.exported_rows = int(steps * 0.9)


def contract_server(latency: float):
    from tests.wandb.contract.server import ContractServer

    return ContractServer(latency_s=latency)


# -- the four measurements ----------------------------------------------------------------------

def bench_reuse(cfg: dict, tmp: Path) -> dict:
    print(f"[1] re-scan cost: {cfg['reuse_runs']} runs x {cfg['reuse_steps']} steps x 3 metrics", flush=True)
    db, art = tmp / "reuse.db", tmp / "reuse-artifacts"
    art.mkdir()
    t = time.perf_counter()
    mlflow_store(db, art, cfg["reuse_runs"], cfg["reuse_steps"], 3)
    print(f"  logged the MLflow store in {time.perf_counter() - t:.0f}s", flush=True)
    out = {}
    for name, extra in (("mlflow", []), ("mlflow_ray_local", ["--ray", "local"])):
        cache = tmp / f"cache-{name}"
        args = ["--mlflow-uri", f"sqlite:///{db}", "-e", "bench", "--cache-dir", str(cache), *extra]
        try:
            cold = run_cli(args, {}, f"{name} cold")
            second = run_cli(args, {}, f"{name} second")
        except CliError as exc:
            out[name] = {"error": str(exc)}
            print(f"  ERROR {exc}", flush=True)
            continue
        out[name] = _reuse_row(cold, second)
    server = contract_server(0.0)
    wandb_fill(server, "bench", "reuse", cfg["reuse_runs"], cfg["reuse_steps"])
    with server:
        cache = tmp / "cache-wandb"
        args = ["--project", "bench/reuse", "--cache-dir", str(cache)]
        try:
            cold = run_cli(args, server.env(), "wandb cold")
            second = run_cli(args, server.env(), "wandb second")
            out["wandb"] = _reuse_row(cold, second)
        except CliError as exc:
            out["wandb"] = {"error": str(exc)}
            print(f"  ERROR {exc}", flush=True)
    return out


def _reuse_row(cold: dict, second: dict) -> dict:
    return {"cold": cold, "second": second,
            "ratio_elapsed": round(second["elapsed_s"] / cold["elapsed_s"], 3),
            "ratio_wall": round(second["wall_s"] / cold["wall_s"], 3),
            "second_reused": second["reused"], "second_fetched_points": second["fetched_points"]}


def bench_latency(cfg: dict) -> dict:
    n = cfg["lat_projects"] * cfg["lat_runs"]
    print(f"[2] latency-bound: {n} runs ({cfg['lat_projects']} projects x {cfg['lat_runs']}) x "
          f"{cfg['lat_steps']} steps, {cfg['latency'] * 1000:.0f} ms per request", flush=True)
    server = contract_server(cfg["latency"])
    for p in range(cfg["lat_projects"]):
        wandb_fill(server, "fleet", f"proj{p:02d}", cfg["lat_runs"], cfg["lat_steps"])
    wandb_fill(server, "solo", "one", 1, cfg["lat_steps"])
    out = {"runs": n}
    with server:
        env = server.env()
        common = ["--entity", "fleet", "--dry-run", "--no-cache"]
        solo = ["--project", "solo/one", "--dry-run", "--no-cache"]
        try:
            s_plain = run_cli([*solo, "--workers", "1"], env, "1-run project, no Ray")
            s_ray = run_cli([*solo, "--ray", "local", "--workers", "1"], env, "1-run project, --ray local")
            startup = max(0.0, s_ray["wall_s"] - s_plain["wall_s"])
            out["ray_startup_s"] = round(startup, 2)
            out["solo"] = {"no_ray": s_plain, "ray_local": s_ray}
            base = run_cli([*common, "--workers", "1"], env, "baseline: one process --workers 1")
            out["baseline"] = base
            for w in (2, 4):
                r = run_cli([*common, "--ray", "local", "--workers", str(w)], env, f"--ray local --workers {w}")
                speed = base["wall_s"] / r["wall_s"]
                net = max(r["wall_s"] - startup, 1e-3)
                out[f"ray_workers_{w}"] = {
                    **r, "speedup_wall": round(speed, 2), "efficiency_wall": round(speed / w, 2),
                    "speedup_elapsed": round(base["elapsed_s"] / r["elapsed_s"], 2),
                    "wall_minus_startup_s": round(net, 2),
                    "speedup_minus_startup": round(base["wall_s"] / net, 2),
                    "efficiency_minus_startup": round(base["wall_s"] / net / w, 2)}
        except CliError as exc:
            out["error"] = str(exc)
            print(f"  ERROR {exc}", flush=True)
    return out


def bench_cpu(cfg: dict, tmp: Path) -> dict:
    print(f"[3] CPU-bound: {cfg['cpu_runs']} runs x {cfg['cpu_steps']:,} steps x {cfg['cpu_metrics']} metrics", flush=True)
    db, art = tmp / "cpu.db", tmp / "cpu-artifacts"
    art.mkdir()
    t = time.perf_counter()
    mlflow_store(db, art, cfg["cpu_runs"], cfg["cpu_steps"], cfg["cpu_metrics"])
    print(f"  logged the MLflow store in {time.perf_counter() - t:.0f}s", flush=True)
    args = ["--mlflow-uri", f"sqlite:///{db}", "-e", "bench", "--dry-run", "--no-cache", "--ray", "local"]
    out = {"runs": cfg["cpu_runs"], "steps": cfg["cpu_steps"]}
    try:
        one = run_cli([*args, "--workers", "1"], {}, "--ray local --workers 1")
        two = run_cli([*args, "--workers", "2"], {}, "--ray local --workers 2")
        out.update(workers_1=one, workers_2=two, speedup_wall=round(one["wall_s"] / two["wall_s"], 2),
                   speedup_elapsed=round(one["elapsed_s"] / two["elapsed_s"], 2))
    except CliError as exc:
        out["error"] = str(exc)
        print(f"  ERROR {exc}", flush=True)
    return out


def bench_memory(cfg: dict) -> dict:
    small, large = cfg["mem_small"], cfg["mem_large"]
    print(f"[4] driver memory: --ray local W&B scan of {small} vs {large} tiny runs", flush=True)
    out = {}
    server = contract_server(0.0)
    wandb_fill(server, "mem", "small", small, 20)
    wandb_fill(server, "mem", "large", large, 20)
    with server:
        try:
            for name, n in (("small", small), ("large", large)):
                out[name] = run_cli(["--project", f"mem/{name}", "--ray", "local", "--dry-run", "--no-cache",
                                     "--workers", "2"], server.env(), f"{n} runs")
            out["rss_ratio"] = round(out["large"]["peak_rss_mb"] / out["small"]["peak_rss_mb"], 2)
        except CliError as exc:
            out["error"] = str(exc)
            print(f"  ERROR {exc}", flush=True)
    return out


# -- report -------------------------------------------------------------------------------------

def table(res: dict) -> str:
    lines = ["", "figure                                              value    (baseline, same run)"]

    def row(name, value, note=""):
        lines.append(f"{name:<50}  {value:>7}  {note}")

    for name, r in res.get("reuse", {}).items():
        if "error" in r:
            row(f"[1] re-scan {name}", "ERROR", r["error"].splitlines()[0])
            continue
        row(f"[1] re-scan {name}: second/cold elapsed", r["ratio_elapsed"],
            f"(cold {r['cold']['elapsed_s']}s, second {r['second']['elapsed_s']}s; target <= 0.05)")
        row(f"    second/cold wall", r["ratio_wall"], f"(second: reused {r['second_reused']}, "
            f"fetched_points {r['second_fetched_points']})")
    lat = res.get("latency")
    if lat:
        if "error" in lat:
            row("[2] latency-bound", "ERROR", lat["error"].splitlines()[0])
        if "baseline" in lat:
            b = lat["baseline"]
            row(f"[2] {lat['runs']} runs @50ms, baseline --workers 1", f"{b['wall_s']}s", f"(elapsed {b['elapsed_s']}s)")
            row("    Ray start-up (1-run: ray - no ray)", f"{lat['ray_startup_s']}s")
            for w in (2, 4):
                r = lat.get(f"ray_workers_{w}")
                if r:
                    row(f"    --ray local --workers {w}: speed-up (wall)", r["speedup_wall"],
                        f"(wall {r['wall_s']}s, efficiency {r['efficiency_wall']}; elapsed speed-up {r['speedup_elapsed']})")
                    row(f"      minus Ray start-up: speed-up", r["speedup_minus_startup"],
                        f"(efficiency {r['efficiency_minus_startup']}; issue aims >= 0.8)")
    cpu = res.get("cpu")
    if cpu:
        if "error" in cpu:
            row("[3] CPU-bound", "ERROR", cpu["error"].splitlines()[0])
        else:
            row(f"[3] CPU-bound {cpu['runs']} x {cpu['steps']:,} steps: w2 vs w1 (wall)", cpu["speedup_wall"],
                f"(w1 {cpu['workers_1']['wall_s']}s, w2 {cpu['workers_2']['wall_s']}s; elapsed speed-up "
                f"{cpu['speedup_elapsed']})")
    mem = res.get("memory")
    if mem:
        if "error" in mem:
            row("[4] driver memory", "ERROR", mem["error"].splitlines()[0])
        else:
            row(f"[4] driver peak RSS {res['config']['mem_large']} / {res['config']['mem_small']} runs",
                mem["rss_ratio"], f"({mem['large']['peak_rss_mb']} MB / {mem['small']['peak_rss_mb']} MB; flat ~1.0)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="much smaller sizes (a smoke run, about 2 minutes)")
    ap.add_argument("--only", default="reuse,latency,cpu,memory", help="comma-separated subset")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args()
    cfg = dict(QUICK if args.quick else FULL)
    only = set(args.only.split(","))
    res = {"config": {**cfg, "quick": args.quick, "cpus": os.cpu_count()}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        tmp = Path(tmp)
        if "reuse" in only:
            res["reuse"] = bench_reuse(cfg, tmp)
        if "latency" in only:
            res["latency"] = bench_latency(cfg)
        if "cpu" in only:
            res["cpu"] = bench_cpu(cfg, tmp)
        if "memory" in only:
            res["memory"] = bench_memory(cfg)
    res["bench_seconds"] = round(time.perf_counter() - started, 1)
    text = table(res)
    print(text)
    print(f"\nbench took {res['bench_seconds']}s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "bench_fleet_quick.json" if args.quick else "bench_fleet.json"
    (args.out / name).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
