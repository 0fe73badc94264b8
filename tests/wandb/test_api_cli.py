"""``trackerhealth scan --project ENTITY/PROJECT`` and ``--wandb-dir`` as a user runs them, and
the contract itself: what the pinned SDK sends still matches what was recorded from it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from contract.corpus import load_into
from test_api_faults import entries
from test_api_scan import ENTITY

from trackerhealth.adapters.wandb import read_run_folder
from trackerhealth.cli import main
from trackerhealth.engine import analyze


def invoke(args, env=None):
    return CliRunner().invoke(main, ["scan", *args], env=env, catch_exceptions=False)


@pytest.fixture
def project(wandb_env):
    name = "cli"
    if not any(r.project == name for r in wandb_env.store.runs.values()):
        load_into(wandb_env.store, ENTITY, name, entries(("nan_corrupted_batch_hf", "healthy_autoencoder_adam")))
    return f"{ENTITY}/{name}"


def test_help_shows_the_w_and_b_options_with_examples():
    out = invoke(["--help"]).output
    for option in ("--project", "--wandb-project", "--wandb-dir", "--state", "--tag", "--all-runs",
                   "--no-wandb-alerts", "--no-report"):
        assert option in out
    assert "trackerhealth scan --project my-team/llm-pretrain" in out and "health:overfitting" in out


def test_scan_project_prints_json_and_exits_1_on_a_critical_run(project, wandb_env, tmp_path):
    out = invoke(["--project", project, "--format", "json", "--cache-dir", str(tmp_path), "--all-runs"])
    assert out.exit_code == 1, out.output
    doc = json.loads(out.stdout)
    assert {r["run"]["name"]: bool(r["findings"]) for r in doc["runs"]} == {
        "nan_corrupted_batch_hf": True, "healthy_autoencoder_adam": False}
    assert doc["runs"][0]["run"]["tracker"] == "wandb" and doc["runs"][0]["run"]["project"] == project
    assert "scanned 2 of 2 runs" in out.stderr and "report 'Training health'" in out.stderr


def test_dry_run_writes_nothing_and_says_what_it_would_do(project, wandb_env, tmp_path):
    mutations = len(wandb_env.store.mutations)
    out = invoke(["--wandb-project", project, "--dry-run", "--fail-on", "never", "--cache-dir", str(tmp_path),
                  "--all-runs"])
    assert out.exit_code == 0, out.output
    assert wandb_env.store.mutations[mutations:] == []
    assert "dry run: nothing written" in out.stderr


@pytest.mark.parametrize("args, message", [
    (["--filter", "state = finished"], "W&B's filter JSON"),
    (["--state", "done"], "is not a W&B run state"),
    (["--experiment", "x"], "MLflow options"),
])
def test_bad_selections_exit_2_and_name_the_fix(project, args, message, tmp_path):
    out = invoke(["--project", project, "--cache-dir", str(tmp_path), *args])
    assert out.exit_code == 2 and message in out.stderr, out.output


def test_an_unknown_project_and_a_rejected_key_exit_2(wandb_env, tmp_path):
    out = invoke(["--project", f"{ENTITY}/no-such-project", "--cache-dir", str(tmp_path)])
    assert out.exit_code == 2 and "not found" in out.stderr, out.output
    out = invoke(["--project", f"{ENTITY}/cli", "--cache-dir", str(tmp_path)],
                 env={"WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567"})
    assert out.exit_code == 2 and "did not accept the API key" in out.stderr, out.output


def test_an_unreachable_server_exits_3_and_says_what_to_check(wandb_env, tmp_path):
    out = invoke(["--project", f"{ENTITY}/cli", "--cache-dir", str(tmp_path)],
                 env={"WANDB_BASE_URL": "http://127.0.0.1:9"})
    assert out.exit_code == 3 and "WANDB_BASE_URL" in out.stderr, out.output


def test_scan_wandb_dir_reads_local_folders_with_no_network(sdk_runs, tmp_path):
    root = sdk_runs["diverge"].folder.parent
    out = invoke(["--wandb-dir", str(root), "--format", "json"], env={"WANDB_BASE_URL": "http://127.0.0.1:9"})
    assert out.exit_code == 1, out.output
    doc = json.loads(out.stdout)
    (run,) = doc["runs"]
    want = analyze(read_run_folder(sdk_runs["diverge"].folder))
    assert [(f["id"], f["level"]) for f in run["findings"]] == [(f.id, f.level) for f in want.problems]
    assert ("nonfinite", "critical") in [(f["id"], f["level"]) for f in run["findings"]]
    assert "nothing is written back" in out.stderr and "read only: nothing written" in out.stderr


def test_what_the_sdk_sends_is_what_was_recorded_from_it(tmp_path, monkeypatch):
    """Re-run the recording exercise and compare: an SDK upgrade that changes a request fails here."""
    from contract.record import exercise, signatures
    from contract.server import ContractServer, known_operations

    with ContractServer(strict_operations=False) as server:
        exercise(server, tmp_path)
        assert not server.violations, server.violations
        sent = signatures(server)
    recorded = known_operations()
    assert sent == recorded, json.dumps({"sent_not_recorded": {k: v for k, v in sent.items() if recorded.get(k) != v},
                                         "recorded_not_sent": sorted(set(recorded) - set(sent))}, indent=1)
    assert {"Viewer", "Runs", "RunHistoryKeys", "RunParquetHistory", "HistoryPage", "RunFullHistory",
            "RunSampledHistory", "Run", "UpsertBucket", "NotifyScriptableRunAlert", "CreateRunFiles",
            "upsertView"} <= set(sent)


def test_a_server_answering_503_to_the_viewer_query_is_unreachable_not_a_bad_key(project, wandb_env, tmp_path):
    wandb_env.fail("GetDefaultEntity", status=503, times=1000)
    try:
        out = invoke(["--project", project, "--cache-dir", str(tmp_path), "--timeout", "3"],
                     env={"TRACKERHEALTH_HTTP_RETRIES": "1", "TRACKERHEALTH_HTTP_BACKOFF": "0.01"})
    finally:
        wandb_env._faults.clear()
    assert out.exit_code == 3, out.output
    assert "did not accept the API key" not in out.stderr
    assert f"W&B at {wandb_env.url} did not answer the viewer query" in out.stderr  # wandb-core retried the 503s


def test_wandb_dir_without_runs_exits_2_naming_what_it_looked_for(tmp_path):
    (tmp_path / "wandb" / "logs").mkdir(parents=True)
    out = invoke(["--wandb-dir", str(tmp_path / "wandb")])
    assert out.exit_code == 2
    assert "no W&B runs here" in out.stderr and "run-<id>.wandb" in out.stderr
