"""Benchmark: what comparing runs with their group costs a scan.

The torch corpus (154 real runs, evidence/torch) logged into a sqlite MLflow store with each run's
model and data set as params (``evidence/cohort_mlflow.py``'s logger), then scanned through the CLI
(``trackerhealth scan`` as a subprocess, ``--dry-run --format json``), each configuration twice:

- baseline: no ``--group-by`` (no run has a parent, so nothing is grouped);
- grouped: ``--group-by params.model --group-by params.dataset`` (every run is in a group of two or
  more, so each is analysed twice: alone, then with its cohort).

Both with a warm history cache (a first scan fills it), so the figure is the analysis, not the
download. Reported: grouped / baseline wall time (perf_counter around the subprocess) and the
summary's elapsed_seconds, as ratios measured in the same run.

Run: PYTHONPATH=. python bench/bench_groups.py [--out bench/out]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _scan(uri: str, cache: Path, *extra: str) -> tuple[float, float]:
    cmd = [str(Path(sys.executable).with_name("trackerhealth")), "scan", "--mlflow-uri", uri, "-e", "torch-corpus",
           "--dry-run", "--format", "json", "--fail-on", "never", "--cache-dir", str(cache), "--reanalyze", *extra]
    began = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - began, json.loads(out.stdout)["summary"]["elapsed_seconds"]


def main() -> int:
    from evidence.cohort_mlflow import log_corpus

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="th-bench-groups-"))
    uri = f"sqlite:///{work / 'mlflow.db'}"
    runs = len(log_corpus(uri))
    cache = work / "cache"
    group = ("--group-by", "params.model", "--group-by", "params.dataset")
    _scan(uri, cache)  # fills the history cache: both configurations then read it
    base = [_scan(uri, cache) for _ in range(2)]
    grouped = [_scan(uri, cache, *group) for _ in range(2)]
    best = lambda xs, i: min(x[i] for x in xs)  # noqa: E731 - the less disturbed of two tries
    result = {"runs": runs, "baseline_wall_s": round(best(base, 0), 2), "grouped_wall_s": round(best(grouped, 0), 2),
              "baseline_scan_s": round(best(base, 1), 2), "grouped_scan_s": round(best(grouped, 1), 2)}
    result["wall_ratio"] = round(result["grouped_wall_s"] / result["baseline_wall_s"], 2)
    result["scan_ratio"] = round(result["grouped_scan_s"] / result["baseline_scan_s"], 2)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_groups.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
