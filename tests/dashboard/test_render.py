"""The generated pages as text: self-contained, escaped, deterministic; the overview, Markdown,
the Jupyter object and the ``report`` command. The browser tests check what these pages do."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from trackerhealth import RunHistory, RunRef, analyze
from trackerhealth.writers import formats
from trackerhealth.writers.dashboard import (
    DashboardDependencyError,
    RunDashboard,
    dashboard_filename,
    render_overview_html,
    render_overview_markdown,
    render_run_html,
    write_report_dir,
    write_run_dashboard,
)

XSS = "<img src=x onerror=alert(1)>"
EVIL = ("<img src", "<script>alert", "<svg onload", "javascript:", "onerror=alert(1)>")


def xss_history(history: RunHistory) -> RunHistory:
    """The same metrics under hostile names: run name, tags, config, metric keys, tracker URL."""
    rename = {"train/loss": "train/loss<svg onload=alert(5)>", "grad_norm/embed": "grad_norm/<img src=x onerror=alert(4)>",
              "lr": "lr</script><script>alert(7)</script>"}
    series = {rename.get(k, k): history[k] for k in history.keys()}
    ref = RunRef("wandb", "<b>proj</b>", "x\"y'z", name=XSS, url="javascript:alert(6)",
                 tags=("<script>alert(2)</script>",), config={"note": "</script><script>alert(3)</script>", XSS: XSS})
    return RunHistory(ref, series)


def test_page_is_self_contained(healthy_run):
    history, report = healthy_run
    page = render_run_html(history, report)
    assert page.startswith("<!DOCTYPE html>")
    assert page.count('id="th-plotlyjs"') == 1  # plotly.js embedded exactly once
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"<script[^>]+src=", page) and "<link" not in page and "@import" not in page
    assert "cdn.plot.ly" not in page and "cdn.jsdelivr" not in page
    urls = re.findall(r'(?:src|href)="([^"#][^"]*)"', page)
    assert urls == [history.ref.url]  # the only link: the run in its tracker (opened by a click)
    for panel in ("loss", "grad", "optim", "system"):
        assert f'id="plot-{panel}"' in page
    assert 'data-missing' not in page


def test_untrusted_text_is_escaped(healthy_run):
    history, _ = healthy_run
    evil = xss_history(history)
    report = analyze(evil)
    page = render_run_html(evil, report)
    for bad in EVIL:
        assert bad not in page, bad
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "</script><script>" not in page
    island = page[page.index('id="th-data">'):]
    island = island[: island.index("</script>")]
    assert "<" not in island[len('id="th-data">'):]  # nothing in the data can close the script


def test_panels_say_what_to_log():
    steps = np.arange(200.0)
    h = RunHistory.from_series(RunRef("file", "p", "only-loss"), {"loss": (steps, 1 / (1 + steps))})
    page = render_run_html(h, analyze(h))
    assert 'id="plot-loss"' in page
    for panel, hint in (("grad", "clip_grad_norm_"), ("optim", "get_last_lr"), ("system", "system metrics")):
        assert f'data-missing="{panel}"' in page
        section = page[page.index(f'id="panel-{panel}"'):]
        assert hint in section[: section.index("</section>")]
    assert "Validation loss not logged" in page

    empty = RunHistory(RunRef("file", "p", "nothing"), {})
    page = render_run_html(empty, analyze(empty))
    assert page.count("data-missing=") == 4 and "Log the training loss every step" in page


def test_rendering_is_deterministic_and_writes_are_idempotent(tmp_path, unhealthy_run):
    history, report = unhealthy_run
    assert render_run_html(history, report) == render_run_html(history, report)
    path = write_run_dashboard(tmp_path / "run.html", history, report)
    before = path.stat().st_mtime_ns
    write_run_dashboard(path, history, report)
    assert path.stat().st_mtime_ns == before  # unchanged run, unchanged file


def test_missing_plotly_names_the_install(monkeypatch, healthy_run):
    for mod in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "plotly", None)
    with pytest.raises(DashboardDependencyError, match=r"pip install 'trackerhealth\[dashboard\]'"):
        render_run_html(*healthy_run)


def test_finding_ranges_are_in_the_page(unhealthy_run):
    history, report = unhealthy_run
    nonfinite = report.finding("nonfinite")
    assert nonfinite is not None and nonfinite.level == "critical"
    page = render_run_html(history, report)
    assert 'data-finding="nonfinite"' in page and "data-zoom-start=" in page


def test_overview_escapes_sorts_and_links(healthy_run, unhealthy_run):
    evil = xss_history(healthy_run[0])
    reports = [healthy_run[1], unhealthy_run[1], analyze(evil)]
    links = {r.run.id: f"runs/{dashboard_filename(r.run)}" for r in reports}
    links[evil.ref.id] = "javascript:alert(8)"
    page = render_overview_html(reports, links)
    for bad in EVIL:
        assert bad not in page, bad
    assert 'href="https://wandb.ai/acme/dashboard-tests/runs/healthy-spirals-mlp-0"' in page
    assert f'href="{links[healthy_run[1].run.id]}"' in page
    rows = re.findall(r'<tr data-status="(\w+)"', page)
    assert len(rows) == 3 and rows[0] == "critical"  # worst score first
    assert 'id="filter"' in page and 'data-sort="num"' in page


def test_markdown_summary_has_dashboards_and_is_escaped(healthy_run, unhealthy_run):
    evil = analyze(xss_history(healthy_run[0]))
    md_reports = [healthy_run[1], unhealthy_run[1], evil]
    links = {r.run.id: f"runs/{dashboard_filename(r.run)}" for r in md_reports}
    md = render_overview_markdown(md_reports, links)
    assert md == formats.to_markdown(md_reports, dashboard_links=links)  # one implementation
    assert "| dashboard |" in md and f"[dashboard]({links[unhealthy_run[1].run.id]})" in md
    assert "<img" not in md and "javascript:" not in md and "&lt;img src=x onerror=alert\\(1\\)&gt;" not in md
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "[healthy-spirals-mlp](https://wandb.ai/acme/dashboard-tests/runs/healthy-spirals-mlp-0)" in md
    assert "| dashboard |" not in formats.to_markdown(md_reports)  # unchanged without links


def test_run_dashboard_object(tmp_path, healthy_run):
    history, report = healthy_run
    dash = RunDashboard(history, report)
    frame = dash._repr_html_()
    assert frame.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts' in frame
    assert "<script" not in frame  # the page is inside the attribute, escaped
    assert dash.save(tmp_path / "d.html").read_text() == render_run_html(history, report)
    assert RunDashboard(history).report.score == report.score  # analyzes when given no report
    assert "healthy-spirals-mlp" in repr(dash)


def test_report_dir_layout(tmp_path, healthy_run, unhealthy_run):
    written = write_report_dir(tmp_path, [healthy_run, unhealthy_run])
    assert written["index"].exists() and written["summary"].exists()
    pages = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert pages == sorted(dashboard_filename(r.run) for _, r in (healthy_run, unhealthy_run))
    index = written["index"].read_text()
    for name in pages:
        assert f'href="runs/{name}"' in index


def _write_long_csv(path, history: RunHistory):
    frame = history.to_frame()
    frame.to_csv(path, index=False, na_rep="nan")  # as loggers write it; a blank cell means "not logged"
    return path


def test_report_command(tmp_path, healthy_run, unhealthy_run):
    from trackerhealth.report_cli import report

    a = _write_long_csv(tmp_path / "healthy.csv", healthy_run[0])
    b = _write_long_csv(tmp_path / "unhealthy.csv", unhealthy_run[0])
    runner = CliRunner()
    one = runner.invoke(report, [str(a), "--html", str(tmp_path / "one.html")])
    assert one.exit_code == 0, one.output
    assert (tmp_path / "one.html").read_text().count('id="th-plotlyjs"') == 1

    many = runner.invoke(report, [str(a), str(b), "--html", str(tmp_path / "site"), "--markdown", str(tmp_path / "s.md")])
    assert many.exit_code == 1, many.output  # the unhealthy run is critical: report --fail-on critical
    assert (tmp_path / "site" / "index.html").exists() and len(list((tmp_path / "site" / "runs").iterdir())) == 2
    assert "nonfinite" in (tmp_path / "s.md").read_text() and "[dashboard](runs/" in (tmp_path / "s.md").read_text()

    clash = runner.invoke(report, [str(a), str(b), "--html", str(tmp_path / "two.html")])
    assert clash.exit_code == 2 and "give a folder instead" in clash.output

    missing = runner.invoke(report, [str(tmp_path / "nope.csv"), "--html", str(tmp_path / "x.html")])
    assert missing.exit_code == 2 and "no such file" in missing.output

    partial = runner.invoke(report, [str(a), str(tmp_path / "nope.csv"), "--html", str(tmp_path / "p.html")])
    assert partial.exit_code == 2 and (tmp_path / "p.html").exists()  # the readable run still gets its page
