"""The W&B API scan end to end: the real ``wandb`` client against the strict contract server.

The project holds the corpus's 47 real training runs (history split between the parquet export
and the live tail, system metrics as W&B system events). A scan must write exactly the health the
core finds in the same runs' files, leave everything else on each run alone, alert once per
critical finding, keep one report, and a second scan must change and fetch nothing.
"""

from __future__ import annotations

import copy
import json

import pytest
from contract.corpus import CORPUS, load_into

from trackerhealth.adapters.files import read_histories
from trackerhealth.engine import analyze
from trackerhealth.scan import scan
from trackerhealth.trackers import writer_for
from trackerhealth.schema import CRITICAL

ENTITY = "health-team"


def manifest() -> list[dict]:
    return json.loads((CORPUS / "manifest.json").read_text())


def expected_health(entry: dict):
    (history,) = read_histories(CORPUS / entry["file"])
    return analyze(history)


def run_scan(project: str, cache_dir, **kw):
    from trackerhealth.adapters.wandb import WandbApiAdapter

    adapter = WandbApiAdapter(f"{ENTITY}/{project}", cache_dir=cache_dir, workers=kw.pop("workers", 4), **kw)
    try:  # the scan ends with the writer's project report and the adapter's scan_complete()
        result = scan(adapter, writer_for(adapter), workers=adapter.workers)
    finally:
        adapter.close()
    return result, list(result.notes)


def snapshot(store, project: str) -> dict:
    with store.lock:
        runs = {r.name: (list(r.tags), copy.deepcopy(r.summary), copy.deepcopy(r.config), r.state, r.display_name,
                         r.notes, r.description, dict(r.files), len(r.history))
                for r in store.runs.values() if r.project == project}
        views = {k: dict(v) for k, v in store.views.items() if v["projectName"] == project}
    return {"runs": runs, "views": views}


@pytest.fixture(scope="module")
def scanned(contract_server, tmp_path_factory):
    """The whole corpus as one project, scanned once (first scan) — shared by the tests below."""
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("wandb-api-scan")
    for key, value in {**contract_server.env(), "WANDB_SILENT": "true", "WANDB_DIR": str(tmp)}.items():
        mp.setenv(key, value)
    project = "corpus"
    entries = manifest()
    runs = load_into(contract_server.store, ENTITY, project, entries)
    before = snapshot(contract_server.store, project)
    n_alerts = len(contract_server.store.alerts)
    result, notes = run_scan(project, tmp / "cache")
    yield {"project": project, "entries": entries, "runs": runs, "before": before, "result": result,
           "notes": notes, "cache": tmp / "cache", "alerts": contract_server.store.alerts[n_alerts:]}
    mp.undo()


def test_every_corpus_run_gets_the_health_the_core_finds_in_its_file(scanned, contract_server):
    result = scanned["result"]
    assert not result.errors, result.errors
    assert result.summary.scanned == len(scanned["entries"]) == 47
    by_name = {r.run.name: r for r in result.reports}
    for entry in scanned["entries"]:
        want = expected_health(entry)
        got = by_name[entry["name"]]
        assert {f.id: f.level for f in got.problems} == {f.id: f.level for f in want.problems}, entry["name"]
        run = scanned["runs"][entry["name"]]
        health = [t for t in run.tags if t.startswith("health:")]
        # A run whose loss was too short to judge is health:unknown, never health:ok.
        assert health == ([f"health:{f.id}" for f in want.problems] or [f"health:{want.status}"]), entry["name"]
        assert "health:ok" not in health or want.status == "ok", entry["name"]
        assert run.summary["trackerhealth/score"] == pytest.approx(round(want.score, 1))
        assert run.summary["trackerhealth/status"] == want.status
        for name, score in want.scores.items():
            if score is None:
                assert f"trackerhealth/{name}" not in run.summary
            else:
                assert run.summary[f"trackerhealth/{name}"] == pytest.approx(round(score, 1))


def test_nothing_but_health_tags_summary_keys_and_the_dashboard_changes(scanned, contract_server):
    before, after = scanned["before"]["runs"], snapshot(contract_server.store, scanned["project"])["runs"]
    for name, (tags, summary, config, state, display, notes, description, files, lines) in after.items():
        b_tags, b_summary, b_config, b_state, b_display, b_notes, b_description, _files, b_lines = before[name]
        assert [t for t in tags if not t.startswith("health:")] == b_tags
        assert {k: v for k, v in summary.items() if not k.startswith("trackerhealth/")} == b_summary
        assert (config, state, display, notes, description, lines) == (b_config, b_state, b_display, b_notes,
                                                                       b_description, b_lines)
        assert set(files) == {"trackerhealth/dashboard.html"}
        html = files["trackerhealth/dashboard.html"].decode()
        assert html.lstrip().lower().startswith("<!doctype html") and "plotly" in html.lower()


def test_each_critical_finding_alerts_once_through_w_and_b(scanned):
    critical = {(r.run.id, f.id) for r in scanned["result"].reports for f in r.problems if f.level == CRITICAL}
    sent = [(a["runName"], a["title"].split(": ", 1)[1].split(" in ", 1)[0]) for a in scanned["alerts"]]
    assert sorted(sent) == sorted(critical) and len(critical) >= 20
    assert all(a["severity"] == "ERROR" and a["entityName"] == ENTITY for a in scanned["alerts"])
    first = scanned["alerts"][0]
    assert "Fix:" in first["text"] and f"/{ENTITY}/corpus/runs/{first['runName']}" in first["text"]
    for run in scanned["runs"].values():
        ids = {f.split(":", 1)[1] for f in run.tags if f.startswith("health:")}
        assert set(filter(None, run.summary["trackerhealth/alerted"].split(","))) <= ids


def test_the_project_gets_one_training_health_report_sorted_by_score(scanned, contract_server):
    views = snapshot(contract_server.store, scanned["project"])["views"]
    assert len(views) == 1
    (view,) = views.values()
    assert view["displayName"] == "Training health" and view["type"] == "runs"
    spec = json.loads(view["spec"])
    text = json.dumps(spec)
    assert "trackerhealth/score" in text and "health:" in text
    assert any("created" in n for n in scanned["notes"]), scanned["notes"]


def test_a_second_scan_changes_nothing_fetches_no_history_and_alerts_nothing(scanned, contract_server, monkeypatch):
    for key, value in contract_server.env().items():
        monkeypatch.setenv(key, value)
    before = snapshot(contract_server.store, scanned["project"])
    mutations = len(contract_server.store.mutations)
    alerts = len(contract_server.store.alerts)
    contract_server.reset_counts()
    result, notes = run_scan(scanned["project"], scanned["cache"])
    assert not result.errors
    assert snapshot(contract_server.store, scanned["project"]) == before
    assert contract_server.store.mutations[mutations:] == []
    assert len(contract_server.store.alerts) == alerts
    for op in ("RunHistoryKeys", "RunParquetHistory", "HistoryPage", "RunFullHistory"):
        assert contract_server.count(op) == 0, op
    assert result.summary.fetched_points == 0 and result.summary.cached_points == result.summary.points > 0
    assert any("up to date" in n for n in notes), notes
    # The same health as the first scan, now read from the cache.
    first = {r.run.id: (r.status, [f.id for f in r.problems]) for r in scanned["result"].reports}
    assert {r.run.id: (r.status, [f.id for f in r.problems]) for r in result.reports} == \
        {k: v for k, v in first.items() if k in {r.run.id for r in result.reports}}
