"""A grouped run's dashboard: the baseline's curves drawn faintly in each panel where the baseline
logged that metric, the group named under the header; the baseline's own page draws no copy of itself."""

import numpy as np

from trackerhealth.cohort import analyze_groups
from trackerhealth.roles import resolve
from trackerhealth.schema import RunHistory, RunRef, Series
from trackerhealth.writers.dashboard import render_run_html
from trackerhealth.writers.dashboard.panels import BASELINE_LINE, build_panels

STEPS = np.arange(1, 601, dtype=float)


def _run(name: str, tau: float, seed: int) -> RunHistory:
    rng = np.random.default_rng(seed)
    loss = 0.05 + 2.25 * np.exp(-STEPS / tau) * (1 + 0.01 * rng.standard_normal(len(STEPS)))
    walls = 1.7e9 + STEPS * 0.2
    every = STEPS[::30]
    return RunHistory.from_series(RunRef("files", "team", name), {
        "train/loss": Series(STEPS, loss, walls),
        "val/loss": Series(every, loss[::30] * 1.1, walls[::30]),
        "grad_norm": Series(STEPS, 1 + 0.1 * rng.standard_normal(len(STEPS)), walls),
        "lr": Series(STEPS, np.full(len(STEPS), 1e-3), walls),
        "step_time": Series(STEPS, 0.2 + 0.01 * rng.standard_normal(len(STEPS)), walls),
    })


def _reports():
    team = [_run("sane-a", 40, 1), _run("sane-b", 45, 2), _run("slow", 200, 3)]
    reports = analyze_groups(team, None, lambda h: (("config.model", "mlp"),))
    return {r.run.name: (h, r) for h, r in zip(team, reports)}


def _baseline_traces(panel) -> list[dict]:
    return [t for t in panel.figure["data"] if t.get("meta", {}).get("baseline")] if panel.figure else []


def test_the_baseline_is_drawn_faintly_in_every_panel_that_has_its_metric():
    runs = _reports()
    history, report = runs["slow"]
    base = report.group["baseline_name"]
    panels = {p.id: p for p in build_panels(resolve(history), report)}
    drawn = {p: sorted(t["meta"]["role"] for t in _baseline_traces(panels[p])) for p in panels}
    assert drawn == {"loss": ["train_loss", "val_loss"], "grad": ["grad_norm"], "optim": ["lr"], "system": ["step_time"]}
    for p in panels.values():
        for t in _baseline_traces(p):
            assert t["line"]["color"] == BASELINE_LINE and t["meta"]["baseline"] == base
            # Behind the run's own curves: drawn before them.
            assert p.figure["data"].index(t) < next(i for i, x in enumerate(p.figure["data"]) if not x.get("meta", {}).get("baseline"))
    html = render_run_html(history, report)
    assert 'id="run-group"' in html and f"compared with the baseline <strong>{base}</strong>" in html


def test_the_baselines_own_page_names_it_and_draws_no_copy_of_itself():
    runs = _reports()
    base = runs["slow"][1].group["baseline_name"]
    history, report = runs[base]
    assert all(not _baseline_traces(p) for p in build_panels(resolve(history), report))
    assert "this run is the group&#x27;s baseline" in render_run_html(history, report) or \
        "this run is the group's baseline" in render_run_html(history, report)


def test_the_short_json_leaves_the_curves_out_and_the_full_json_keeps_them():
    _, report = _reports()["slow"]
    assert "baseline_curves" not in report.to_dict()["group"]
    assert set(report.to_dict(full=True)["group"]["baseline_curves"]) >= {"train_loss", "val_loss", "grad_norm"}


def test_the_overview_lists_runs_group_by_group_with_the_baseline_marked_and_the_sweeps():
    from trackerhealth.sweeps import Association, SweepSummary
    from trackerhealth.writers.dashboard import render_overview_html

    runs = _reports()
    reports = [r for _, r in runs.values()]
    sweep = SweepSummary("config.model=mlp", 12, (Association("params.lr", "loss-oscillation", ">=", "0.3", 3, 3, 0, 9),))
    html = render_overview_html(reports, sweeps=[sweep])
    assert ">Group</button>" in html and html.count('title="the group') == 1
    assert "every run with params.lr ≥ 0.3 has loss-oscillation (3 of 3; 0 of 9 others)" in html
    # Runs analysed alone keep the overview as it was: no Group column.
    from trackerhealth.engine import analyze
    alone = render_overview_html([analyze(h) for h, _ in runs.values()])
    assert ">Group</button>" not in alone
