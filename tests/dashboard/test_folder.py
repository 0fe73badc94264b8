"""A report folder of many dashboards holds one copy of plotly.js (issue 16 item 8: 5,000 runs wrote
9.3 GB because every page embedded it); every page loads it by a relative path and draws in
Chromium, and a page meant to travel alone still embeds it."""

from __future__ import annotations

import re

from dashboard_helpers import PANELS, open_page, plot_summary

from trackerhealth.writers.dashboard import render_run_html, write_report_dir, write_run_dashboard

BANNER = "* plotly.js v"  # the first lines of the bundle; once per copy


def _copies(folder) -> int:
    """Copies of plotly.js in the folder: the bundle as a file, or embedded (compressed) in a page."""
    n = 0
    for f in folder.rglob("*"):
        if f.is_file():
            text = f.read_text(encoding="utf-8", errors="replace")
            n += text.count(BANNER) + text.count('id="th-plotlyjs"')
    return n


def test_a_folder_of_dashboards_has_one_plotlyjs(tmp_path, watched, healthy_run, unhealthy_run, vanishing_run):
    runs = [healthy_run, unhealthy_run, vanishing_run]
    site = tmp_path / "site"
    written = write_report_dir(site, runs)
    assert _copies(site) == 1 and (site / "plotly.min.js").is_file()
    pages = [written[r.run.id] for _, r in runs]
    inline = len(render_run_html(*healthy_run).encode())
    for p in pages:
        html = p.read_text()
        assert re.findall(r'<script[^>]+src="([^"]+)"', html) == ["../plotly.min.js"]
        assert p.stat().st_size < inline / 10  # the 2 MB bundle is not in the page
    # the same folder written again is unchanged (the shared file too)
    before = {f: f.stat().st_mtime_ns for f in site.rglob("*") if f.is_file()}
    write_report_dir(site, runs)
    assert {f: f.stat().st_mtime_ns for f in site.rglob("*") if f.is_file()} == before

    page = watched.page
    shared = (site / "plotly.min.js").resolve().as_uri()
    for p in pages:
        watched.requests.clear()
        assert open_page(page, p) == "1", p
        charted = [panel for panel in PANELS if page.locator(f"#plot-{panel}").count()]
        assert "loss" in charted and "grad" in charted
        for panel in charted:  # a panel the run did not log says what to log instead
            drawn = plot_summary(page, panel)
            assert drawn is not None and drawn["svgPaths"] > 0, (p.name, panel)
        assert sorted(set(watched.requests)) == sorted({p.resolve().as_uri(), shared})  # nothing else fetched
    assert watched.console_errors == [] and watched.page_errors == []


def test_a_page_that_lost_its_folder_says_so(tmp_path, watched, healthy_run):
    written = write_report_dir(tmp_path / "site", [healthy_run])
    (tmp_path / "site" / "plotly.min.js").unlink()
    page = watched.page
    assert open_page(page, written[healthy_run[1].run.id]) == "error"
    assert "plotly.min.js was not found next to this page" in page.inner_text("#plot-loss")


def test_a_page_on_its_own_embeds_plotlyjs(tmp_path, watched, unhealthy_run):
    path = write_run_dashboard(tmp_path / "alone.html", *unhealthy_run)
    assert _copies(tmp_path) == 1 and not (tmp_path / "plotly.min.js").exists()
    assert "<script src" not in path.read_text() and 'id="th-plotlyjs"' in path.read_text()
    page = watched.page
    assert open_page(page, path) == "1"
    assert watched.external_requests(path) == []
