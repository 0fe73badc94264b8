"""A 1,000,000-step run with 64 layers: the page stays small and still shows every extreme.

Load time is measured by ``bench/bench_dashboard.py`` (a benchmark, not a timed test); here the
page must fit the size budget, open in Chromium, and keep the spike, the layer spike, the NaN
markers and the finding's range.
"""

from __future__ import annotations

import math

import pytest
from dashboard_helpers import million_step_history, open_page

from trackerhealth import analyze
from trackerhealth.writers.dashboard import write_run_dashboard

MAX_BYTES = 5_000_000

DRAWN_JS = """() => {
  const loss = document.getElementById('plot-loss')._fullData;
  const line = loss.find(t => t.name === 'train/loss');
  let max = -Infinity, at = null;
  for (let i = 0; i < line.y.length; i++) if (line.y[i] > max) { max = line.y[i]; at = line.x[i]; }
  const heat = document.getElementById('plot-grad')._fullData.find(t => t.type === 'heatmap' && t.meta && t.meta.layers);
  let zmax = -Infinity, row = null;
  heat.z.forEach((r, i) => r.forEach(z => { if (z > zmax) { zmax = z; row = i; } }));
  return {points: line.x.length, max: max, at: at, zmax: zmax, row: row, rows: heat.z.length,
          nan: loss.filter(t => t.meta && t.meta.nonfinite === 'NaN').map(t => [t.x[0], t.meta.count]),
          bands: loss.filter(t => t.meta && t.meta.finding).map(t => [t.meta.finding, t.meta.start])};
}"""


@pytest.mark.slow
def test_million_step_page_is_small_and_keeps_extremes(tmp_path, watched):
    history, placed = million_step_history()
    report = analyze(history)
    path = write_run_dashboard(tmp_path / "million.html", history, report)
    size = path.stat().st_size
    assert size <= MAX_BYTES, f"{size / 1e6:.2f} MB"
    page = watched.page
    assert open_page(page, path, timeout_ms=30_000) == "1"
    drawn = page.evaluate(DRAWN_JS)
    assert drawn["points"] < 10_000  # of 1,000,000
    assert drawn["max"] == 400.0 and drawn["at"] == placed["spike_step"]  # the one-step spike
    assert drawn["rows"] == 64 and drawn["row"] == placed["layer"] and math.isclose(drawn["zmax"], 3.0, abs_tol=1e-4)
    assert drawn["nan"] == [[placed["nan_from"], 5_000]]
    assert ["nonfinite", placed["nan_from"]] in drawn["bands"]
    assert watched.console_errors == [] and watched.page_errors == []
    assert watched.external_requests(path) == []
