"""W&B fleets: --entity, re-scans that reuse every unchanged run, and Ray as the engine (a real
two-node cluster) against the strict contract server — the same health, a bounded number of
requests in flight cluster-wide, and the API key never written into the cluster's files."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from click.testing import CliRunner
from contract.corpus import load_into
from test_api_faults import entries

from trackerhealth.cli import main

RUNS = ("nan_corrupted_batch_hf", "healthy_autoencoder_adam", "bottleneck_wandb_decode_ms", "overfit_spirals_wandb",
        "healthy_fast_plateau_wandb", "vanish_sigmoid15_wandb")


def invoke(args):
    return CliRunner().invoke(main, ["scan", *args], catch_exceptions=False)


def _health(doc) -> dict:
    return {r["run"]["name"]: (r["status"], r["score"], sorted((f["id"], f["level"]) for f in r["findings"]))
            for r in doc["runs"]}


@pytest.fixture()
def entity(wandb_env):
    """An entity of its own with two projects holding the same runs."""
    name = f"fleet-{uuid.uuid4().hex[:6]}"
    for project in ("alpha", "beta"):
        load_into(wandb_env.store, name, project, entries(RUNS))
    return name


def test_an_entity_is_scanned_project_by_project_and_a_rescan_reuses_every_run(entity, wandb_env, tmp_path):
    args = ["--entity", entity, "--format", "json", "--fail-on", "never", "--cache-dir", str(tmp_path), "--all-runs"]
    first = invoke(args)
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert [p["project"] for p in doc["summary"]["projects"]] == [f"wandb:{entity}/alpha", f"wandb:{entity}/beta"]
    assert doc["summary"]["analyzed"] == 2 * len(RUNS) and doc["summary"]["reused"] == 0
    by_project = {}
    for r in doc["runs"]:
        by_project.setdefault(r["run"]["project"], {})[r["run"]["name"]] = r["status"]
    assert by_project[f"{entity}/alpha"] == by_project[f"{entity}/beta"]

    wandb_env.reset_counts()
    mutations = len(wandb_env.store.mutations)
    second = invoke(args)
    assert second.exit_code == 0, second.output
    s = json.loads(second.stdout)["summary"]
    assert (s["reused"], s["analyzed"], s["fetched_points"], s["written"]) == (2 * len(RUNS), 0, 0, 0)
    assert _health(json.loads(second.stdout)) == _health(doc)
    for op in ("RunHistoryKeys", "RunParquetHistory", "HistoryPage", "RunFullHistory", "UpsertBucket",
               "NotifyScriptableRunAlert", "CreateRunFiles"):
        assert wandb_env.count(op) == 0, op
    assert wandb_env.store.mutations[mutations:] == []


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_scan_gives_the_same_health_with_bounded_requests_and_no_key_on_disk(entity, wandb_env, ray_cluster,
                                                                                  tmp_path):
    base = ["--format", "json", "--fail-on", "never", "--all-runs"]
    here = invoke(["--project", f"{entity}/alpha", *base, "--cache-dir", str(tmp_path / "here")])
    assert here.exit_code == 0, here.output
    wandb_env.reset_in_flight()
    on_ray = invoke(["--project", f"{entity}/beta", *base, "--cache-dir", str(tmp_path / "ray"), "--ray",
                     ray_cluster.address, "--workers", "2"])
    assert on_ray.exit_code == 0, on_ray.output
    doc = json.loads(on_ray.stdout)
    assert not doc["errors"] and doc["summary"]["analyzed"] == len(RUNS)
    assert _health(doc) == _health(json.loads(here.stdout))
    # Two runs in flight, each one request at a time: never more than two requests at the server.
    assert 1 <= wandb_env.max_in_flight <= 2, wandb_env.max_in_flight
    key = wandb_env.API_KEY.encode()
    leaks = []
    for folder, _, files in os.walk(ray_cluster.temp_dir):
        for name in files:
            try:
                with open(os.path.join(folder, name), "rb") as fh:
                    if key in fh.read():
                        leaks.append(os.path.join(folder, name))
            except OSError:
                pass
    assert not leaks, leaks
