"""Every kind of tracking URI reads the same histories: the server's REST API, its sqlite database
directly (read-only), the same database through SQLAlchemy (the postgresql/mysql path), and a
file store (MLflow 3 needs MLFLOW_ALLOW_FILE_STORE=true; the scan sets it)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from mlflow_support import corpus_history, json_out, log_history, scan_cli

from trackerhealth.adapters.mlflow import MlflowAdapter
from trackerhealth.adapters.mlflow._fetch import SqlAlchemyFetcher, SqliteFetcher
from trackerhealth.writers import mlflow_writer as mw

NONFINITE = "nan_lr_schedule_typo_deep"  # NaN and ±Inf, stored by MLflow as is_nan / ±1.797e308


def _histories(adapter):
    try:
        runs = adapter.list_runs()
        return {r.ref.name: adapter.fetch_history(r).history for r in runs}
    finally:
        adapter.close()


def _assert_same(a, b):
    keys = a.keys()
    assert keys == b.keys()
    for key in keys:
        for x, y in zip(a[key], b[key]):
            np.testing.assert_array_equal(x, y)


@pytest.mark.slow
def test_database_paths_read_exactly_what_rest_reads(mlflow_server, client, experiment):
    exp_id, exp_name = experiment
    names = [NONFINITE, "vanish_sigmoid15_wandb", "healthy_multitask_balanced"]
    for name in names:
        log_history(client, exp_id, corpus_history(name), name)
    rest = _histories(MlflowAdapter(mlflow_server.url, experiments=[exp_name], cache_dir=None))
    direct = _histories(MlflowAdapter(mlflow_server.db_uri, experiments=[exp_name], cache_dir=None))
    generic = MlflowAdapter(mlflow_server.db_uri, experiments=[exp_name], cache_dir=None)
    generic._fetcher = SqlAlchemyFetcher(mlflow_server.db_uri, 2)  # the postgresql/mysql code path
    through_sqlalchemy = _histories(generic)
    assert set(rest) == set(direct) == set(through_sqlalchemy) == set(names)
    for name in names:
        _assert_same(rest[name], direct[name])
        _assert_same(rest[name], through_sqlalchemy[name])
        # First-logged key order survives (per-layer gradient norms are in model order).
        assert rest[name].keys() == corpus_history(name).keys()
    fetched, logged = rest[NONFINITE], corpus_history(NONFINITE)
    values = np.concatenate([fetched[k].values for k in fetched.keys()])  # noqa: SIM118 - a RunHistory
    original = np.concatenate([logged[k].values for k in logged.keys()])  # noqa: SIM118
    assert np.isnan(values).sum() == np.isnan(original).sum() > 0
    assert np.isinf(values).sum() == np.isinf(original).sum()


@pytest.mark.slow
def test_direct_database_scan_matches_the_server_scan(mlflow_server, corpus_experiment, tmp_path):
    _, exp_name, runs = corpus_experiment
    args = ["-e", exp_name, "--dry-run", "--format", "json", "--fail-on", "never", "--full"]
    via_rest = scan_cli(["--mlflow-uri", mlflow_server.url, "--no-cache", *args])
    via_db = scan_cli(["--mlflow-uri", mlflow_server.db_uri, "--cache-dir", str(tmp_path / "c"),
                       "--mlflow-ui-url", mlflow_server.url, *args])
    assert via_rest.exit_code == via_db.exit_code == 0, via_db.output
    a, b = json_out(via_rest), json_out(via_db)
    assert a["runs"] == b["runs"] and len(a["runs"]) == len(runs)
    assert b["summary"]["fetched_points"] == a["summary"]["fetched_points"]


def test_sqlite_is_opened_read_only(mlflow_server):
    fetcher = SqliteFetcher(mlflow_server.db_path, 1)
    try:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            fetcher._con().execute("CREATE TABLE trackerhealth_was_here (x)")
    finally:
        fetcher.close()


def test_file_store_scan_and_write_back(tmp_path, monkeypatch):
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    writer = MlflowClient(str(store))
    exp_id = writer.create_experiment("files")
    rid = log_history(writer, exp_id, corpus_history("vanish_sigmoid10_small_init_jsonl"), "vanish")
    other = writer.create_run(exp_id, run_name="slashes").info.run_id
    writer.log_batch(other, metrics=[Metric(k, 1.0 / (s + 1), 1_750_000_000_000 + s, s)
                                     for s in range(50) for k in ("train/loss", "a/b/c/deep")])
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")  # the user has not set it; the scan must cope

    result = scan_cli(["--mlflow-uri", str(store), "-e", "files", "--format", "json",
                       "--cache-dir", str(tmp_path / "cache"), "--fail-on", "never"])
    assert result.exit_code == 0, result.output
    doc = json_out(result)
    by_name = {r["run"]["name"]: r for r in doc["runs"]}
    assert by_name["vanish"]["points"] == corpus_history("vanish_sigmoid10_small_init_jsonl").n_points
    assert by_name["slashes"]["points"] == 100
    assert writer.get_run(rid).data.tags[mw.STATUS] == by_name["vanish"]["status"]
    assert (store / exp_id / rid / "artifacts" / "trackerhealth" / "report.json").is_file()
    again = scan_cli(["--mlflow-uri", f"file://{store}", "-e", exp_id, "--format", "json",
                      "--cache-dir", str(tmp_path / "cache")])
    assert json_out(again)["summary"]["fetched_points"] == 0


def test_missing_sqlite_file_is_a_usage_error(tmp_path):
    result = scan_cli(["--mlflow-uri", f"sqlite:///{tmp_path}/nope.db", "-e", "x"])
    assert result.exit_code == 2
    assert "no MLflow database" in result.stderr and "four slashes" in result.stderr
    assert not (tmp_path / "nope.db").exists()  # never created by looking


def test_rest_fallbacks_read_the_same_rows(mlflow_server, client, experiment):
    """Past get-history-bulk's cap, and behind a gateway without /ajax-api/, the paginated
    get-history path gives the same rows."""
    from trackerhealth.adapters.mlflow._fetch import RestFetcher

    exp_id, exp_name = experiment
    log_history(client, exp_id, corpus_history(NONFINITE), "nf")
    adapter = MlflowAdapter(mlflow_server.url, experiments=[exp_name], cache_dir=None)
    try:
        (run,) = adapter.list_runs()
        wanted = [(k, None) for k in run.latest]
        direct = SqliteFetcher(mlflow_server.db_path, 1)
        expected = {k: rows for k, _, rows in direct.fetch(run, wanted)}
        direct.close()
        capped = RestFetcher(adapter.rest, 2)
        capped.history_cap = 50  # every key is longer: the bulk answer is cut, pages follow
        no_ajax = RestFetcher(adapter.rest, 2)
        no_ajax.bulk_history = False
        no_ajax.page_size = 100  # several pages per key: page tokens are followed
        for fetcher in (capped, no_ajax):
            got = {k: rows for k, _, rows in fetcher.fetch(run, wanted)}
            fetcher.close()
            for key, rows in expected.items():
                a = rows.sort_values(["timestamp", "step"], kind="stable").reset_index(drop=True)
                b = got[key].reset_index(drop=True)
                np.testing.assert_array_equal(a["step"], b["step"])
                np.testing.assert_array_equal(a["value"], b["value"])
                np.testing.assert_array_equal(a["timestamp"], b["timestamp"])
    finally:
        adapter.close()
