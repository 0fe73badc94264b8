"""The dashboards in a real headless Chromium: drawn with data, no errors, no requests, working
controls, findings where they happened, hostile names left as text, and the overview page."""

from __future__ import annotations

import pytest
from dashboard_helpers import PANELS, open_page, plot_summary
from test_render import XSS, xss_history

from trackerhealth import analyze
from trackerhealth.writers.dashboard import (
    RunDashboard,
    write_report_dir,
    write_run_dashboard,
)

# Pixel position of a data point in a panel (x in steps, y as a fraction of the axis height).
POINT_JS = """([id, xv, frac, axis]) => { const gd = document.getElementById('plot-' + id); const fl = gd._fullLayout;
  const ya = fl[axis || 'yaxis']; const r = gd.getBoundingClientRect();
  return [r.left + fl._size.l + fl.xaxis.l2p(xv), r.top + ya._offset + ya._length * frac]; }"""
HOVER_TEXT_JS = "() => Array.from(document.querySelectorAll('.hoverlayer .hovertext')).map(e => e.textContent).join(' | ')"


def _assert_clean(w, path):
    assert w.console_errors == [], w.console_errors
    assert w.page_errors == [], w.page_errors
    assert w.dialogs == []
    assert w.external_requests(path) == [], w.external_requests(path)


def _hover(page, panel, step, frac, axis=None):
    page.locator(f"#plot-{panel}").scroll_into_view_if_needed()
    x, y = page.evaluate(POINT_JS, [panel, step, frac, axis])
    page.mouse.move(x, y)
    page.wait_for_function("() => document.querySelectorAll('.hoverlayer .hovertext').length > 0", timeout=3000)
    return page.evaluate(HOVER_TEXT_JS)


@pytest.mark.parametrize("which", ["healthy", "unhealthy"])
def test_four_panels_render_with_data(which, request, tmp_path, watched, artifacts):
    history, report = request.getfixturevalue(f"{which}_run")
    path = write_run_dashboard(tmp_path / f"{which}.html", history, report)
    page = watched.page
    assert open_page(page, path) == "1"
    for panel in PANELS:
        drawn = plot_summary(page, panel)
        assert drawn is not None, panel
        assert drawn["svgPaths"] > 0, panel  # real SVG lines, not an empty frame
        data = page.evaluate("(id) => document.getElementById('plot-' + id)._fullData.map(t => (t.x && t.x.length) || 0)", panel)
        assert max(data) > 100, (panel, data)
    grad = plot_summary(page, "grad")
    assert grad["heatmaps"] >= 1 and any(t["type"] == "heatmap" and (t["meta"] or {}).get("layers") == 4 for t in grad["traces"])
    assert page.locator("[data-missing]").count() == 0
    assert page.inner_text("#run-name") == history.ref.name
    assert page.locator(".dim").count() == 5
    page.screenshot(path=str(artifacts / f"dashboard-{which}.png"), full_page=True)
    _assert_clean(watched, path)


def test_log_toggle_changes_the_y_axis(tmp_path, watched, healthy_run):
    path = write_run_dashboard(tmp_path / "h.html", *healthy_run)
    page = watched.page
    open_page(page, path)
    axis_type = "() => document.getElementById('plot-loss')._fullLayout.yaxis.type"
    start = page.evaluate(axis_type)
    other = "linear" if start == "log" else "log"
    page.click(f"#panel-loss button[data-scale={other}]")
    page.wait_for_function(f"() => ({axis_type})() === '{other}'")
    assert page.get_attribute(f"#panel-loss button[data-scale={other}]", "aria-pressed") == "true"
    page.click(f"#panel-loss button[data-scale={start}]")
    page.wait_for_function(f"() => ({axis_type})() === '{start}'")
    _assert_clean(watched, path)


def test_finding_is_drawn_where_it_happened(tmp_path, watched, unhealthy_run):
    history, report = unhealthy_run
    finding = report.finding("nonfinite")
    first_nan = min(e.step_start for e in finding.evidence if e.code == "nonfinite_value")
    path = write_run_dashboard(tmp_path / "u.html", history, report)
    page = watched.page
    open_page(page, path)
    bands = page.evaluate("""() => Array.from(document.querySelectorAll('.plot')).flatMap(gd =>
        gd.data.filter(t => t.meta && t.meta.finding).map(t => ({panel: gd.id, ...t.meta, x: t.x})))""")
    loss_bands = [b for b in bands if b["panel"] == "plot-loss" and b["finding"] == "nonfinite"]
    assert any(b["start"] == first_nan and min(b["x"]) <= first_nan <= max(b["x"]) for b in loss_bands), bands
    assert any(b["panel"] == "plot-grad" for b in bands)  # the gradient spike before it, on the grad panel
    # the NaN points themselves are markers (a plot line would silently drop them)
    markers = page.evaluate("""() => document.getElementById('plot-loss').data
        .filter(t => t.meta && t.meta.nonfinite).map(t => t.meta)""")
    assert any(m["nonfinite"] == "NaN" and m["count"] > 100 for m in markers)
    # hovering inside the band names the finding and its message
    text = _hover(page, "loss", (first_nan + history.last_step) / 2, 0.15)
    assert "nonfinite" in text and "NaN" in text
    # "show steps" zooms every panel to the finding
    page.click("#finding-nonfinite button[data-zoom-start]")
    page.wait_for_function("() => document.getElementById('plot-system')._fullLayout.xaxis.range[0] > %f" % (first_nan / 2))
    ranges = page.evaluate("() => Array.from(document.querySelectorAll('.plot')).map(gd => gd._fullLayout.xaxis.range)")
    assert all(r == ranges[0] for r in ranges) and ranges[0][0] < first_nan < ranges[0][1]
    _assert_clean(watched, path)


def test_heatmap_cells_keep_their_hover(tmp_path, watched, healthy_run):
    history, report = healthy_run
    path = write_run_dashboard(tmp_path / "h.html", history, report)
    page = watched.page
    open_page(page, path)
    text = _hover(page, "grad", 400, 0.5, "yaxis2")
    assert "grad norm" in text and "step" in text


def test_hostile_names_stay_text(tmp_path, watched, healthy_run):
    evil = xss_history(healthy_run[0])
    path = write_run_dashboard(tmp_path / "x.html", evil, analyze(evil))
    page = watched.page
    assert open_page(page, path) == "1"
    assert page.inner_text("#run-name") == XSS
    assert page.locator("img").count() == 0 and page.locator("main svg[onload]").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    assert "<img src=x onerror=alert(4)>" in page.inner_text("#plot-grad")  # a layer label, as text
    assert "<script>alert(2)</script>" in page.inner_text("header")  # a tag, as text
    page.wait_for_timeout(200)
    _assert_clean(watched, path)


def test_overview_sorts_filters_and_links(tmp_path, watched, healthy_run, unhealthy_run, artifacts):
    evil = xss_history(healthy_run[0])
    written = write_report_dir(tmp_path, [healthy_run, unhealthy_run, (evil, analyze(evil))])
    page = watched.page
    assert open_page(page, written["index"]) == "1"
    rows = "() => Array.from(document.querySelectorAll('#runs tbody tr')).filter(r => !r.hidden).map(r => r.dataset.run)"
    assert len(page.evaluate(rows)) == 3
    page.screenshot(path=str(artifacts / "overview.png"), full_page=True)
    page.fill("#filter", "nonfinite")
    assert page.evaluate(rows) == [unhealthy_run[1].run.id]
    page.fill("#filter", "")
    page.select_option("#status-filter", "ok")
    assert unhealthy_run[1].run.id not in page.evaluate(rows)
    page.select_option("#status-filter", "")
    page.click("th:has-text('Score') button")  # was ascending: now descending
    scores = page.evaluate("() => Array.from(document.querySelectorAll('#runs tbody tr')).map(r => parseFloat(r.cells[3].dataset.v))")
    assert scores == sorted(scores, reverse=True)
    assert page.inner_text("#runs").count(XSS) == 1 and page.locator("img").count() == 0
    tracker = page.get_attribute(f"tr[data-run='{healthy_run[1].run.id}'] a[data-tracker]", "href")
    assert tracker == healthy_run[0].ref.url
    _assert_clean(watched, written["index"])
    page.click(f"tr[data-run='{unhealthy_run[1].run.id}'] a[data-dashboard]")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    assert page.inner_text("#run-name") == unhealthy_run[0].ref.name


def test_inline_in_a_sandboxed_frame(tmp_path, watched, unhealthy_run, artifacts):
    """As Jupyter shows ``_repr_html_`` and as the trackers' viewers embed an HTML file: inside a
    sandboxed iframe (scripts allowed, no same-origin), with nothing fetched."""
    host = tmp_path / "notebook.html"
    host.write_text("<!DOCTYPE html><html><body><h1>notebook</h1>" + RunDashboard(*unhealthy_run)._repr_html_() + "</body></html>")
    page = watched.page
    page.goto(host.resolve().as_uri())
    frame = page.frame_locator("iframe")
    frame.locator("body[data-ready='1']").wait_for(state="attached", timeout=20_000)
    assert frame.locator(".js-plotly-plot").count() == 4
    assert frame.locator("#finding-nonfinite").count() == 1
    _assert_clean(watched, host)


def test_in_mlflow_artifact_viewer_frame(tmp_path, watched, unhealthy_run):
    """As MLflow's artifact viewer shows an HTML artifact: the file's text as a blob: URL in an
    ``<iframe sandbox="allow-scripts">`` (opaque origin: no storage, no same-origin access)."""
    html = RunDashboard(*unhealthy_run).html
    page = watched.page
    page.set_content("<!DOCTYPE html><html><body><div id='viewer'></div></body></html>")
    page.evaluate("""(html) => {
        const frame = document.createElement('iframe');
        frame.setAttribute('sandbox', 'allow-scripts');
        frame.style.width = '1200px'; frame.style.height = '800px';
        frame.src = URL.createObjectURL(new Blob([html], {type: 'text/html'}));
        document.getElementById('viewer').appendChild(frame);
    }""", html)
    frame = page.frame_locator("iframe")
    frame.locator("body[data-ready='1']").wait_for(state="attached", timeout=20_000)
    assert frame.locator(".js-plotly-plot").count() == 4
    assert watched.console_errors == [] and watched.page_errors == [] and watched.dialogs == []
    assert [u for u in watched.requests if not u.startswith(("blob:", "about:"))] == []
