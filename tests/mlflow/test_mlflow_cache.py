"""Incremental scans: the history cache, new steps only, --since, and a cache that lies."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from mlflow_support import (
    as_logged,
    corpus_history,
    json_out,
    log_rows,
    logged_rows,
    scan_cli,
)

from trackerhealth.adapters.mlflow import MlflowAdapter
from trackerhealth.adapters.mlflow._cache import HistoryCache, last_points, merge
from trackerhealth.engine import analyze
from trackerhealth.schema import RunRef


def _scan(server, exp_name, cache_dir, *extra):
    # --reanalyze: these tests are about the history cache, so no run may keep its last report.
    result = scan_cli(["--mlflow-uri", server.url, "-e", exp_name, "--format", "json", "--full",
                       "--cache-dir", str(cache_dir), "--fail-on", "never", "--reanalyze", *extra])
    assert result.exit_code == 0, result.output
    return json_out(result)


def _store_folder(cache_dir):
    (store,) = (cache_dir / "mlflow").iterdir()
    return store


def test_running_run_fetches_only_new_steps(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    history = corpus_history("overfit_spirals_wandb")
    rows = logged_rows(history)
    half = rows[rows["step"] <= rows["step"].median()]
    rest = rows[rows["step"] > rows["step"].median()]
    rid = client.create_run(exp_id, run_name="live", start_time=int(rows["timestamp"].min())).info.run_id
    log_rows(client, rid, half)

    first = _scan(mlflow_server, exp_name, cache_dir)
    assert first["summary"]["fetched_points"] == len(half)
    store = _store_folder(cache_dir)
    assert (store / "runs" / f"{rid}.parquet").is_file()
    index = json.loads((store / "index.json").read_text())
    assert index["runs"][rid]["points"] == len(half)
    assert index["runs"][rid]["status"] == "RUNNING"

    log_rows(client, rid, rest)  # the run goes on logging
    second = _scan(mlflow_server, exp_name, cache_dir)
    assert second["summary"]["fetched_points"] == len(rest)
    assert second["summary"]["cached_points"] == len(half)
    expected = analyze(as_logged(history, RunRef("mlflow", exp_name, rid, "live")))
    (got,) = second["runs"]
    assert got["points"] == history.n_points
    assert got["score"] == expected.score
    assert [(f["id"], f["level"], f["message"]) for f in got["findings"]] == \
        [(f.id, f.level, f.message) for f in expected.findings]

    third = _scan(mlflow_server, exp_name, cache_dir)
    assert third["summary"]["fetched_points"] == 0 and third["runs"][0]["score"] == expected.score


def test_new_keys_relogged_steps_and_the_bulk_cap(mlflow_server, client, experiment, cache_dir):
    from mlflow.entities import Metric

    exp_id, exp_name = experiment
    rid = client.create_run(exp_id, run_name="odd").info.run_id
    t0 = 1_750_000_000_000

    def log(key, steps, value=lambda s: 1.0 / (1 + s), dt=0):
        ms = [Metric(key, float(value(s)), t0 + s * 10 + dt, int(s)) for s in steps]
        for i in range(0, len(ms), 1000):
            client.log_batch(rid, metrics=ms[i:i + 1000])

    log("train/loss", range(100))
    _scan(mlflow_server, exp_name, cache_dir)
    log("train/loss", range(100, 3100))  # 3,000 new steps: over get-history-bulk-interval's 2,500 cap
    log("val/loss", range(0, 3100, 100))  # a key that appears later
    second = _scan(mlflow_server, exp_name, cache_dir)
    assert second["runs"][0]["points"] == 3100 + 31
    # The capped key was taken whole (3,100), the new one whole (31): nothing sampled, nothing lost.
    assert second["summary"]["fetched_points"] == 3100 + 31
    log("val/loss", [3000], value=lambda s: 9.0, dt=5)  # re-logged at its last step, later timestamp
    log("train/loss", range(3100, 3200))
    third = _scan(mlflow_server, exp_name, cache_dir)
    assert third["summary"]["fetched_points"] == 100 + 32  # train/loss: new steps; val/loss: whole key
    assert third["runs"][0]["points"] == 3200 + 31  # the re-logged step replaces the old value

    adapter = MlflowAdapter(mlflow_server.url, experiments=[exp_name], cache_dir=None)
    try:
        (run,) = adapter.list_runs()
        fresh = adapter.fetch_history(run).history
    finally:
        adapter.close()
    adapter = MlflowAdapter(mlflow_server.url, experiments=[exp_name], cache_dir=cache_dir)
    try:
        (run,) = adapter.list_runs()
        fetched = adapter.fetch_history(run)
    finally:
        adapter.close()
    assert fetched.fetched_points == 0
    assert fetched.history.keys() == fresh.keys() == ["train/loss", "val/loss"]
    for key in fresh.keys():  # noqa: SIM118 - a RunHistory, not a dict
        for a, b in zip(fresh[key], fetched.history[key]):
            np.testing.assert_array_equal(a, b)
    assert fresh["val/loss"].values[-1] == 9.0


def test_a_cache_that_does_not_match_is_refetched(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    from mlflow_support import log_history

    rid = log_history(client, exp_id, corpus_history("healthy_fast_plateau_wandb"), "r")
    n = corpus_history("healthy_fast_plateau_wandb").n_points
    assert _scan(mlflow_server, exp_name, cache_dir)["summary"]["fetched_points"] == n
    parquet = _store_folder(cache_dir) / "runs" / f"{rid}.parquet"
    parquet.write_bytes(parquet.read_bytes()[: parquet.stat().st_size // 2])  # cut short
    assert _scan(mlflow_server, exp_name, cache_dir)["summary"]["fetched_points"] == n
    (_store_folder(cache_dir) / "index.json").write_text("{not json")
    assert _scan(mlflow_server, exp_name, cache_dir)["summary"]["fetched_points"] == n
    assert _scan(mlflow_server, exp_name, cache_dir)["summary"]["fetched_points"] == 0
    no_cache = tmp = cache_dir.parent / "unused"
    doc = _scan(mlflow_server, exp_name, tmp, "--no-cache")
    assert doc["summary"]["fetched_points"] == n and not no_cache.exists()


def test_since_selects_new_ended_and_running_runs(mlflow_server, client, experiment, cache_dir):
    from mlflow.entities import Metric

    exp_id, exp_name = experiment
    old = 1_600_000_000_000
    ids = {}
    for name, start, end in (("ancient", old, old + 1000), ("ended-recently", old, None), ("new", None, None),
                             ("crashed-running", old, "running")):
        run = client.create_run(exp_id, run_name=name, start_time=start)
        rid = ids[name] = run.info.run_id
        client.log_batch(rid, metrics=[Metric("loss", 1.0 / (i + 1), old + i, i) for i in range(30)])
        if end == "running":
            continue
        client.set_terminated(rid, "FINISHED", end_time=end)  # None: ends now
    doc = _scan(mlflow_server, exp_name, cache_dir, "--since", "1h")
    assert {r["run"]["name"] for r in doc["runs"]} == {"ended-recently", "new", "crashed-running"}
    doc = _scan(mlflow_server, exp_name, cache_dir, "--since", "1h", "--filter", "attributes.status = 'RUNNING'")
    assert {r["run"]["name"] for r in doc["runs"]} == {"crashed-running"}


def test_merge_keeps_first_logged_key_order_and_last_points():
    def rows(key, steps, t=0):
        return pd.DataFrame({"key": [key] * len(steps), "step": np.asarray(steps, np.int64),
                             "value": np.arange(len(steps), dtype=float), "timestamp": np.asarray(steps, np.int64) + t})

    cached = pd.concat([rows("grad/layer.0", [0, 1]), rows("grad/layer.1", [0, 1])], ignore_index=True)
    merged = merge(cached, [("grad/layer.0", None, rows("grad/layer.0", [0, 1, 2])),
                            ("grad/layer.1", 1, rows("grad/layer.1", [2])), ("new", None, rows("new", [5]))],
                   ["grad/layer.0", "grad/layer.1", "new"])
    assert list(pd.unique(merged["key"])) == ["grad/layer.0", "grad/layer.1", "new"]
    assert len(merged) == 3 + 3 + 1
    assert last_points(merged) == {"grad/layer.0": (2, 2), "grad/layer.1": (2, 2), "new": (5, 5)}
    cache = HistoryCache(None, "x")
    plan = cache.plan("r", {"a": (1, 1)})
    assert plan.fetch == [("a", None)] and plan.cached_points == 0
