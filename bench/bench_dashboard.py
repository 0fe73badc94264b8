"""Benchmark: the run dashboard of a 1,000,000-step run with 64 layers.

The run is the long Parquet of ``bench_analyze.make_run`` (10 scalars every step, 64 per-layer
gradient norms every 10 steps: 16.4 M points), with a stress case placed on top so the downsampling
has something to lose: a one-step train-loss spike, a one-point layer-gradient spike, and NaN from
step 990,000 on (train loss and grad norm). Values are generated: a stress case for size, not
evidence for a diagnosis.

Reported:
- the HTML file size (goal <= 5 MB) and the points drawn vs the points logged;
- the load time in Chromium (Debian's, headless, fresh profile; the flags the tests use), from
  navigation to every chart drawn — absolute (goal <= 3 s) and as a ratio to a baseline page in the
  same browser: a run that logged nothing, i.e. loading the embedded plotly.js alone;
- that the spike, the layer spike, the NaN markers and the finding's range are in the drawn page.

Run: python bench/bench_dashboard.py [--steps 1000000] [--out bench/out] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import make_run

from trackerhealth import analyze
from trackerhealth.adapters.files import read_histories
from trackerhealth.schema import RunHistory, RunRef, Series
from trackerhealth.writers.dashboard import render_run_html

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
SPIKE_STEP, LAYER_SPIKE_STEP, NAN_FROM = 777_777, 555_550, 990_000


def stressed(history: RunHistory) -> tuple[RunHistory, dict]:
    """The run with a one-step spike, a one-point layer spike and a NaN tail placed on it."""
    series = {k: history[k] for k in history.keys()}
    loss = series["train/loss"]
    v = loss.values.copy()
    i = int(np.searchsorted(loss.steps, SPIKE_STEP))
    v[i] = float(np.nanmax(v)) * 20
    tail = loss.steps >= NAN_FROM
    v[tail] = np.nan
    series["train/loss"] = Series(loss.steps, v, loss.wall_times)
    g = series["grad_norm"]
    gv = g.values.copy()
    gv[g.steps >= NAN_FROM] = np.nan
    series["grad_norm"] = Series(g.steps, gv, g.wall_times)
    layer = "grad_norm/layers.40.weight"
    lv = series[layer].values.copy()
    j = int(np.searchsorted(series[layer].steps, LAYER_SPIKE_STEP))
    lv[j] = 1e3
    series[layer] = Series(series[layer].steps, lv, series[layer].wall_times)
    placed = {"spike_value": float(v[i]), "spike_step": float(loss.steps[i]), "layer_spike_step": float(series[layer].steps[j]),
              "nan_points": int(tail.sum())}
    return RunHistory(history.ref, series, history.notes), placed


CHECK_JS = """() => {
  const loss = document.getElementById('plot-loss')._fullData;
  const line = loss.find(t => t.name === 'train/loss');
  let max = -Infinity, at = null;
  for (let i = 0; i < line.y.length; i++) if (line.y[i] > max) { max = line.y[i]; at = line.x[i]; }
  const nan = loss.filter(t => t.meta && t.meta.nonfinite === 'NaN').map(t => [t.x[0], t.meta.count]);
  const bands = Array.from(document.querySelectorAll('.plot')).flatMap(gd =>
      gd.data.filter(t => t.meta && t.meta.finding).map(t => [gd.id, t.meta.finding, t.meta.start, t.meta.end]));
  const heat = document.getElementById('plot-grad')._fullData.find(t => t.type === 'heatmap' && t.meta && t.meta.layers);
  let zmax = -Infinity, zrow = null;
  heat.z.forEach((row, r) => row.forEach(z => { if (z > zmax) { zmax = z; zrow = r; } }));
  return {loss_max: max, loss_max_step: at, nan_markers: nan, bands: bands, heat_zmax_log10: zmax, heat_zmax_row: zrow,
          ready_ms: performance.getEntriesByName('th-ready')[0].startTime};
}"""


def load_times(paths: list[Path], repeat: int) -> tuple[dict, dict]:
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="th-bench-chromium-")
    out: dict[str, list[float]] = {p.name: [] for p in paths}
    checks = {}
    try:
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                        viewport={"width": 1366, "height": 900})
            requests: list[str] = []
            ctx.on("request", lambda r: requests.append(r.url))
            for rnd in range(repeat + 1):  # round 0 warms the browser up and is not counted
                for path in paths:
                    page = ctx.new_page()
                    t0 = time.perf_counter()
                    page.goto(path.resolve().as_uri())
                    page.wait_for_selector("body[data-ready='1']", state="attached", timeout=60_000)
                    wall = time.perf_counter() - t0
                    if rnd:
                        out[path.name].append(wall)
                    if rnd == repeat and path is paths[0]:
                        checks = page.evaluate(CHECK_JS)
                    page.close()
            ctx.close()
            external = [u for u in requests if not u.startswith("file://")]
            checks["external_requests"] = external
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return out, checks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=Path("bench/out"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    parquet = args.out / f"run_{args.steps}.parquet"
    if not parquet.exists():
        t = time.perf_counter()
        rows = make_run(parquet, args.steps)
        print(f"generated {rows:,} points in {time.perf_counter() - t:.1f}s -> {parquet}")
    history, placed = stressed(read_histories(parquet)[0])
    report = analyze(history)
    t = time.perf_counter()
    html = render_run_html(history, report)
    render_s = time.perf_counter() - t
    page = args.out / f"dashboard_{args.steps}.html"
    page.write_text(html, encoding="utf-8")
    empty = RunHistory(RunRef("file", "bench", "empty", name="empty"), {})
    baseline = args.out / "dashboard_baseline_empty.html"
    baseline.write_text(render_run_html(empty, analyze(empty)), encoding="utf-8")

    logged = sum(int(x) for x in re.findall(r'data-points-logged="(\d+)"', html))
    shown = sum(int(x) for x in re.findall(r'data-points-shown="(\d+)"', html))
    times, checks = load_times([page, baseline], args.repeat)
    med = statistics.median(times[page.name])
    base = statistics.median(times[baseline.name])
    result = {
        "points_logged": history.n_points,
        "points_charted_logged": logged,
        "points_drawn": shown,
        "drawn_share": round(shown / logged, 5),
        "file_mb": round(page.stat().st_size / 1e6, 2),
        "baseline_file_mb": round(baseline.stat().st_size / 1e6, 2),
        "render_s": round(render_s, 2),
        "load_s_median": round(med, 2),
        "load_s_max": round(max(times[page.name]), 2),
        "load_s_all": [round(x, 2) for x in times[page.name]],
        "ready_ms_after_navigation_last": round(checks.get("ready_ms", float("nan"))),
        "baseline_load_s_median": round(base, 2),
        "load_ratio_to_baseline": round(med / base, 2),
        "findings": [f.id for f in report.problems],
        "kept": {
            "loss_spike": checks.get("loss_max") == np.float32(placed["spike_value"]) and checks.get("loss_max_step") == placed["spike_step"],
            "layer_spike": checks.get("heat_zmax_row") == 40 and abs(checks.get("heat_zmax_log10", 0) - 3.0) < 1e-3,
            "nan_markers": checks.get("nan_markers"),
            "finding_bands": checks.get("bands"),
        },
        "external_requests": checks.get("external_requests"),
        "goals": {"file_mb": 5.0, "load_s": 3.0},
    }
    print(json.dumps(result, indent=2))
    (args.out / "bench_dashboard.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
