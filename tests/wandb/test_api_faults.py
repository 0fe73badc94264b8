"""The W&B API scan under faults and concurrent change: rate limits, server errors, dropped
connections, runs deleted mid-scan, training writing its summary while we write ours."""

from __future__ import annotations

import json

import pytest
from contract.corpus import CORPUS, load_into
from test_api_scan import ENTITY, expected_health, run_scan

NAMES = ("nan_corrupted_batch_hf", "healthy_autoencoder_adam", "overfit_spirals_wandb", "bottleneck_wandb_decode_ms",
         "vanish_sigmoid16_regression_lightning", "osc_softmax_sgd_lr_too_high")


def entries(names=NAMES) -> list[dict]:
    return [e for e in json.loads((CORPUS / "manifest.json").read_text()) if e["name"] in names]


def health_of(run) -> list[str]:
    return [t for t in run.tags if t.startswith("health:")]


def test_rate_limits_server_errors_drops_and_a_deleted_run_still_give_every_other_run(wandb_env, tmp_path):
    server = wandb_env
    project = "faults"
    runs = load_into(server.store, ENTITY, project, entries())
    doomed = server.store.add_run(ENTITY, project, "doomed", history=[{"_step": i, "loss": 1.0 / (i + 1)}
                                                                      for i in range(50)])
    server.hooks["RunHistoryKeys"] = lambda v: server.store.delete_run(ENTITY, project, "doomed") \
        if v.get("name") == doomed.name else None
    server.fail("Runs", status=429, times=2, retry_after=1)
    server.fail("RunParquetHistory", status=503, times=2)
    server.fail("HistoryPage", drop=True, times=2)
    server.fail("GET parquet", status=503, times=1)
    server.fail("UpsertBucket", status=503, times=1)
    server.fail("CreateRunFiles", status=429, times=1, retry_after=1)
    server.fail("NotifyScriptableRunAlert", drop=True, times=1)
    result, _ = run_scan(project, tmp_path / "cache")

    assert not result.errors, result.errors
    assert [s["run_id"] for s in result.skipped] == ["doomed"]
    assert result.skipped[0]["reason"] == "deleted during the scan"
    assert result.summary.scanned == len(NAMES)
    for entry in entries():
        want = expected_health(entry)
        run = runs[entry["name"]]
        assert health_of(run) == ([f"health:{f.id}" for f in want.problems] or ["health:ok"]), entry["name"]
        assert run.summary["trackerhealth/score"] == pytest.approx(round(want.score, 1))
        assert "trackerhealth/dashboard.html" in run.files
    assert all(f["left"] == 0 for f in server._faults), server._faults  # every fault really happened
    critical = sum(1 for r in result.reports for f in r.problems if f.level == "critical")
    project_alerts = [a for a in server.store.alerts if a["projectName"] == project]
    assert len(project_alerts) == critical  # a dropped alert was retried, never sent twice


def test_a_run_deleted_between_reading_and_writing_is_skipped_not_failed(wandb_env, tmp_path):
    server = wandb_env
    project = "deleted-before-write"
    load_into(server.store, ENTITY, project, entries(NAMES[:2]))
    victim = server.store.run(ENTITY, project, next(r.name for r in server.store.runs.values()
                                                     if r.project == project))
    # The writer reads the run fresh ("Run") before writing: delete it right then.
    server.hooks["Run"] = lambda v: server.store.delete_run(ENTITY, project, victim.name) \
        if v.get("name") == victim.name else None
    result, _ = run_scan(project, tmp_path / "cache")
    assert not result.errors
    assert [(s["run_id"], s["reason"]) for s in result.skipped] == [(victim.name, "deleted during the scan")]
    assert result.summary.scanned == 1


def test_only_health_tags_are_replaced_and_a_summary_written_meanwhile_is_kept(wandb_env, tmp_path):
    server = wandb_env
    project = "concurrent"
    (run,) = load_into(server.store, ENTITY, project, entries(("healthy_autoencoder_adam",))).values()
    run.tags = ["baseline", "health:overfitting", "health-review", "team:nlp"]
    reads = []

    def training_writes_its_summary(variables):
        reads.append(variables)
        if len(reads) == 1:  # after our first read, before our write
            run.summary = {**run.summary, "val/acc": 0.93}

    server.hooks["Run"] = training_writes_its_summary
    run_scan(project, tmp_path / "cache")
    assert run.tags == ["baseline", "health-review", "team:nlp", "health:ok"]
    assert run.summary["val/acc"] == 0.93 and run.summary["epoch"] == 0
    assert run.summary["trackerhealth/status"] == "ok"


def test_an_incremental_scan_fetches_only_the_new_steps_of_the_run_that_grew(wandb_env, tmp_path):
    server = wandb_env
    project = "incremental"
    runs = load_into(server.store, ENTITY, project, entries(NAMES[:3]))
    first, _ = run_scan(project, tmp_path / "cache")
    assert first.summary.fetched_points > 0 and first.summary.cached_points == 0
    grown = runs["healthy_autoencoder_adam"]
    last = grown.history[-1]
    new_rows = [{**last, "_step": last["_step"] + i, "_timestamp": last["_timestamp"] + i} for i in range(1, 41)]
    server.store.append_history(grown, new_rows)
    pages = []
    server.hooks["HistoryPage"] = lambda v: pages.append(v)
    server.reset_counts()
    second, _ = run_scan(project, tmp_path / "cache")
    assert server.count("RunHistoryKeys") == 1  # only the run that grew is read
    metrics = sum(1 for row in new_rows for k in row if not k.startswith("_"))
    assert second.summary.fetched_points - len(grown.events) == metrics
    assert pages and min(p["minStep"] for p in pages) == last["_step"] + 1
    assert second.summary.cached_points > 0
    report = next(r for r in second.reports if r.run.id == grown.name)
    assert report.n_points == first_points(first, grown.name) + metrics


def first_points(result, run_id: str) -> int:
    return next(r.n_points for r in result.reports if r.run.id == run_id)
