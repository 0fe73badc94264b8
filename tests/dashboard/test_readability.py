"""What a person reads on the pages, checked in a real headless Chromium (issue 13 item 5):
log-axis tick labels as Plotly rendered them in the SVG, a label on every finding band, the
heatmap rows a finding outlines, the link back to the overview, and wording that does not
contradict itself."""

from __future__ import annotations

import math
import re

from dashboard_helpers import open_page

from trackerhealth.writers.dashboard import write_report_dir, write_run_dashboard

TICKS_JS = """([id, axis]) => Array.from(document.getElementById('plot-' + id)
  .querySelectorAll('.' + axis + 'tick text')).map(e => e.textContent)"""
RANGE_JS = "([id, axis]) => document.getElementById('plot-' + id)._fullLayout[axis].range.slice()"


def _number(label: str) -> float:
    return float(label.replace("\u2212", "-"))  # Plotly writes a real minus sign


def _log_ticks(page, panel: str, axis: str = "y") -> tuple[list[float], list[float]]:
    labels = page.evaluate(TICKS_JS, [panel, axis])
    return [_number(t) for t in labels], page.evaluate(RANGE_JS, [panel, "yaxis" + axis[1:]])


def _is_power_of_ten(v: float) -> bool:
    return v > 0 and abs(math.log10(v) - round(math.log10(v))) < 1e-9


def test_log_axes_label_only_powers_of_ten(tmp_path, watched, healthy_run):
    path = write_run_dashboard(tmp_path / "h.html", *healthy_run)
    page = watched.page
    assert open_page(page, path) == "1"
    for panel in ("loss", "grad"):  # both start on a log axis: the curves span 3+ decades
        assert page.evaluate("(id) => document.getElementById('plot-' + id)._fullLayout.yaxis.type", panel) == "log"
        ticks, (lo, hi) = _log_ticks(page, panel)
        assert hi - lo >= 2 and len(ticks) >= 2, (panel, ticks)
        assert all(_is_power_of_ten(v) for v in ticks), (panel, ticks)  # no bare "2", "5" between decades
    # Zoomed to 1.5 decades, the ticks between the powers of ten are labelled in full, every label a
    # value inside the axis (Plotly's minor labels, "2" and "5" on 0.01–0.3, would be outside it).
    page.evaluate("() => Plotly.relayout(document.getElementById('plot-loss'), {'yaxis.range': [-2, -0.5]})")
    page.wait_for_function("() => document.getElementById('plot-loss')._fullLayout.yaxis.minorloglabels === 'complete'")
    ticks, (lo, hi) = _log_ticks(page, "loss")
    assert len(ticks) >= 3 and all(10 ** lo <= v <= 10 ** hi for v in ticks), ticks
    assert any(not _is_power_of_ten(v) for v in ticks), ticks
    # back to the whole run, and through the linear/log toggle: powers of ten only again
    page.click("#panel-loss button[data-scale=linear]")
    page.wait_for_function("() => document.getElementById('plot-loss')._fullLayout.yaxis.type === 'linear'")
    page.evaluate("() => Plotly.relayout(document.getElementById('plot-loss'), {'yaxis.autorange': true})")
    page.click("#panel-loss button[data-scale=log]")
    page.wait_for_function("() => document.getElementById('plot-loss')._fullLayout.yaxis.minorloglabels === 'none'")
    ticks, _ = _log_ticks(page, "loss")
    assert len(ticks) >= 2 and all(_is_power_of_ten(v) for v in ticks), ticks
    assert watched.page_errors == [] and watched.console_errors == []


def test_every_finding_band_is_labelled(tmp_path, watched, unhealthy_run):
    history, report = unhealthy_run
    path = write_run_dashboard(tmp_path / "u.html", history, report)
    page = watched.page
    assert open_page(page, path) == "1"
    labels = page.evaluate("""() => Array.from(document.querySelectorAll('.plot')).map(gd => ({panel: gd.id,
        bands: gd.data.filter(t => t.meta && t.meta.finding && !t.meta.outline).length,
        text: Array.from(gd.querySelectorAll('.annotation-text')).map(e => e.textContent)}))""")
    drawn = [x for x in labels if x["bands"]]
    assert drawn, labels
    for x in drawn:  # as many labels (rendered SVG text) as bands, each naming its finding
        assert len(x["text"]) >= x["bands"] and set(x["text"]) <= {f.id for f in report.problems}, x
    assert "nonfinite" in next(x for x in labels if x["panel"] == "plot-loss")["text"]
    # hovering the label tells which finding it is, in words
    label = page.locator("#plot-loss .annotation").first
    label.scroll_into_view_if_needed()
    label.hover()
    page.wait_for_function("() => document.querySelectorAll('.hoverlayer .hovertext').length > 0", timeout=3000)
    hover = page.evaluate("() => Array.from(document.querySelectorAll('.hoverlayer .hovertext')).map(e => e.textContent).join(' ')")
    finding = report.finding("nonfinite")
    assert finding.title in hover and "CRITICAL" in hover and "NaN" in hover


def test_heatmap_outlines_exactly_the_layers_the_evidence_names(tmp_path, watched, vanishing_run, artifacts):
    history, report = vanishing_run
    finding = report.finding("vanishing-gradients")
    assert finding.level == "critical" and "first 4 of 14 layers" in finding.message
    named = {e.metric for e in finding.evidence}
    early = {e.metric for e in finding.evidence if e.code == "early_layers_tiny"}
    assert len(early) == 4  # the message's "first 4" are each named
    path = write_run_dashboard(tmp_path / "v.html", history, report)
    page = watched.page
    assert open_page(page, path) == "1"
    # Which heatmap rows lie inside the finding's outlines, measured in pixels on the drawn chart.
    inside = page.evaluate("""() => {
      const gd = document.getElementById('plot-grad'), fl = gd._fullLayout;
      const heat = gd._fullData.find(t => t.type === 'heatmap' && t.meta && t.meta.layers);
      const ya = fl['yaxis' + heat.yaxis.slice(1)];
      const centres = ya._categories.map((c, i) => [c, ya.l2p(i)]);
      const out = new Set();
      gd._fullData.filter(t => t.meta && t.meta.outline && t.meta.finding === 'vanishing-gradients').forEach(t => {
        const ov = fl['yaxis' + t.yaxis.slice(1)];
        const px = t.y.map(v => ov.l2p(v)), top = Math.min(...px), bottom = Math.max(...px);
        centres.forEach(([c, y]) => { if (y > top && y < bottom) out.add(c); });
      });
      return {rows: Array.from(out), all: ya._categories.length};
    }""")
    assert inside["all"] == 14
    assert set(inside["rows"]) == {m.split("/", 1)[1] for m in named}, inside  # layer_0..3 and the late reference
    assert {m.split("/", 1)[1] for m in early} <= set(inside["rows"]) and "layer_4" not in inside["rows"]
    text = page.evaluate("() => Array.from(document.querySelectorAll('#plot-grad .annotation-text')).map(e => e.textContent)")
    assert "vanishing-gradients" in text
    page.locator("#panel-grad").screenshot(path=str(artifacts / "heatmap-vanishing.png"))
    # a critical run with low dimension scores: each low score shows the numbers behind it on its tile
    low = [d for d in report.dimensions if d.score is not None and d.score < 75]
    assert low
    for d in low:
        basis = page.inner_text(f".dim[data-dimension='{d.name}'] .basis")
        assert all(k in basis for k in d.basis), (d.name, basis)
    assert watched.page_errors == [] and watched.console_errors == []


def test_run_page_links_back_to_the_overview(tmp_path, watched, healthy_run, unhealthy_run):
    written = write_report_dir(tmp_path / "site", [healthy_run, unhealthy_run])
    page = watched.page
    assert open_page(page, written[unhealthy_run[1].run.id]) == "1"
    page.click("#back-to-overview")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    assert page.url == written["index"].resolve().as_uri()
    assert page.locator("#runs tbody tr").count() == 2
    # a page written alone has no overview, so no link that would lead nowhere
    alone = write_run_dashboard(tmp_path / "alone.html", *healthy_run)
    assert open_page(page, alone) == "1"
    assert page.locator("#back-to-overview").count() == 0


def test_check_counts_agree_and_scores_are_explained(tmp_path, watched, healthy_run):
    history, report = healthy_run
    path = write_run_dashboard(tmp_path / "h.html", history, report)
    page = watched.page
    assert open_page(page, path) == "1"
    levels = [f.level for f in report.findings]
    passed, skipped = levels.count("ok"), levels.count("skipped")
    assert report.status == "ok" and passed and skipped
    headline = page.inner_text("#no-findings")
    summary = page.inner_text("#other-checks summary")
    assert f"{passed} check(s) that ran" in headline and f"{skipped} skipped" in headline
    numbers = [int(n) for n in re.findall(r"(\d+) (?:passed|skipped|could not run)", summary)]
    assert f"({len(report.findings)})" in summary and numbers == [passed, skipped, 0] and sum(numbers) == len(report.findings)
    # every dimension says what it measures; a score below "good" shows its numbers on the tile
    hint = page.inner_text("#score-hint")
    assert "status comes from the findings" in hint and "low score next to ok" in hint
    for d in report.dimensions:
        tip = page.get_attribute(f".dim[data-dimension='{d.name}']", "title")
        assert len(tip) > 40, (d.name, tip)
        if d.score is not None and d.score < 75:
            assert page.locator(f".dim[data-dimension='{d.name}'] .basis").count() == 1
