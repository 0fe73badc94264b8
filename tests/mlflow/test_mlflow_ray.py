"""Ray as the engine, on a real two-node cluster (``ray start`` processes on 127.0.0.1) against
the session's real MLflow server: the same health as one process, re-scans that never reach the
cluster, a worker killed mid-scan, alerts exactly once, and the key never written down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow_support import WebhookReceiver, corpus_history, json_out, log_history, manifest, scan_cli

from trackerhealth.writers import mlflow_writer as mw

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _runs(client, exp_id, count: int) -> dict[str, str]:
    names = [e["name"] for e in manifest()][:count]
    return {name: log_history(client, exp_id, corpus_history(name), name) for name in names}


def _health(doc) -> dict:
    return {r["run"]["id"]: (r["status"], r["score"], sorted((f["id"], f["level"]) for f in r["findings"]))
            for r in doc["runs"]}


def _ours(client, run_id) -> dict:
    tags = client.get_run(run_id).data.tags
    return {k: v for k, v in tags.items() if k.startswith("trackerhealth.") and k != mw.SCANNED_AT}


def test_a_ray_scan_gives_what_one_process_gives_and_a_rescan_reuses_every_run(
        ray_cluster, mlflow_server, client, experiment, cache_dir, tmp_path):
    exp_id, exp_name = experiment
    ids = _runs(client, exp_id, 6)
    base = ["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--format", "json", "--full", "--fail-on", "never"]

    on_ray = scan_cli([*base, "--cache-dir", str(cache_dir), "--ray", ray_cluster.address, "--workers", "3"])
    assert on_ray.exit_code == 0, on_ray.output
    ray_doc = json_out(on_ray)
    assert ray_doc["summary"]["analyzed"] == 6 and not ray_doc["errors"]
    written = {rid: _ours(client, rid) for rid in ids.values()}
    artifacts = {rid: sorted(a.path for a in client.list_artifacts(rid, "trackerhealth")) for rid in ids.values()}
    assert all(written.values()) and all(artifacts.values())

    # One process, writing again over what the cluster wrote: the same reports, tags and artifacts.
    local = scan_cli([*base, "--cache-dir", str(tmp_path / "other-cache")])
    assert local.exit_code == 0, local.output
    local_doc = json_out(local)
    assert _health(local_doc) == _health(ray_doc)
    assert [r["run"]["id"] for r in local_doc["runs"]] == [r["run"]["id"] for r in ray_doc["runs"]]
    assert {rid: _ours(client, rid) for rid in ids.values()} == written
    assert {rid: sorted(a.path for a in client.list_artifacts(rid, "trackerhealth")) for rid in ids.values()} == artifacts

    # Nothing changed: every run reused, nothing fetched, and the cluster is not even joined.
    again = scan_cli([*base, "--cache-dir", str(cache_dir), "--ray", "127.0.0.1:1"])
    assert again.exit_code == 0, again.output
    s = json_out(again)["summary"]
    assert (s["reused"], s["analyzed"], s["fetched_points"], s["written"]) == (6, 0, 0, 0)
    assert _health(json_out(again)) == _health(ray_doc)


def test_a_worker_killed_mid_scan_loses_no_run_alerts_once_and_leaves_no_key_behind(ray_cluster, mlflow_server, client, experiment,
                                                               cache_dir, tmp_path):
    exp_id, exp_name = experiment
    ids = _runs(client, exp_id, 10)
    secret = "tok-" + os.urandom(8).hex()  # the server ignores it; the workers must get it unseen
    with WebhookReceiver() as hook:
        env = {**os.environ, "TRACKERHEALTH_CACHE_DIR": str(cache_dir), "PYTHONUNBUFFERED": "1",
               "MLFLOW_TRACKING_TOKEN": secret}
        out, err = tmp_path / "out.json", tmp_path / "err.txt"
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("trackerhealth")), "scan", "--mlflow-uri", mlflow_server.url, "-e", exp_name,
                 "--format", "json", "--fail-on", "never", "--ray", ray_cluster.address, "--workers", "2",
                 "--alert-webhook", hook.url], stdout=stdout, stderr=stderr, env=env)
            killed = []
            deadline = time.monotonic() + 240
            while proc.poll() is None and time.monotonic() < deadline:
                if not killed:
                    busy = ray_cluster.workers("trackerhealth_run")
                    if busy:
                        os.kill(busy[0].pid, signal.SIGKILL)
                        killed.append(busy[0].pid)
                time.sleep(0.02)
            assert proc.wait(timeout=60) == 0, err.read_text()[-3000:]
        assert killed, "no worker was seen running a run: nothing was killed"
        doc = json.loads(out.read_text())
        assert sorted(r["run"]["id"] for r in doc["runs"]) == sorted(ids.values())  # each run once
        assert not doc["errors"], doc["errors"]
        critical = {(r["run"]["id"], f["id"]) for r in doc["runs"] for f in r["findings"] if f["level"] == "critical"}
        assert critical, "the corpus runs include critical ones"
        sent = [(p["trackerhealth"]["run"]["id"], p["trackerhealth"]["finding"]["id"]) for p in hook.payloads]
        assert sorted(sent) == sorted(critical)  # exactly once each, retried task or not
    # Neither the token nor the webhook's secret path was written into the cluster's files (Ray
    # writes a task's runtime_env into its logs: trackerhealth puts no secret there).
    assert secret not in out.read_text() + err.read_text()
    hook_secret = hook.url.rsplit("/", 1)[-1]
    leaks = []
    for folder, _, files in os.walk(ray_cluster.temp_dir):
        for name in files:
            try:
                with open(os.path.join(folder, name), "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if secret.encode() in data or f"/B000/{hook_secret}".encode() in data:
                leaks.append(os.path.join(folder, name))
    assert not leaks, f"a credential was written into the cluster's files: {leaks}"


def test_credentials_inside_the_uri_are_refused_before_anything_is_sent(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    _runs(client, exp_id, 1)
    with_password = mlflow_server.url.replace("http://", "http://alice:hunter2@")
    # The address is never joined: the scan stops before any task is submitted.
    result = scan_cli(["--mlflow-uri", with_password, "-e", exp_name, "--cache-dir", str(cache_dir), "--ray",
                       "127.0.0.1:1"])
    assert result.exit_code == 2
    assert "credentials inside the URI" in result.output and "MLFLOW_TRACKING_USERNAME" in result.output
    assert "hunter2" not in result.output


def test_ray_local_on_a_database_store_matches_one_process_and_rescans_for_free(ray_cluster, tmp_path):
    """The issue's own check: ``scan --mlflow-uri sqlite:///… -e E --ray local --format json``; the
    rescan goes to the session's cluster (a second local Ray would cost another ~25 s to start)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = MlflowClient(uri)
    exp = store.create_experiment("fleet")
    ids = _runs(store, exp, 3)
    exe = str(Path(sys.executable).with_name("trackerhealth"))

    def scan(cache: str, *extra) -> dict:
        done = subprocess.run([exe, "scan", "--mlflow-uri", uri, "-e", "fleet", "--format", "json", "--fail-on", "never",
                               "--cache-dir", str(tmp_path / cache), *extra], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    alone = scan("one-process", "--dry-run")
    on_ray = scan("ray", "--ray", "local")
    assert _health(on_ray) == _health(alone) and len(on_ray["runs"]) == len(ids)
    again = scan("ray", "--ray", ray_cluster.address)
    s = again["summary"]
    assert (s["reused"], s["analyzed"], s["fetched_points"]) == (len(ids), 0, 0)
    assert _health(again) == _health(on_ray)


def test_a_grouped_scan_on_ray_gives_what_one_process_gives(ray_cluster, mlflow_server, client, experiment, cache_dir,
                                                            tmp_path):
    """Both passes over a group run as Ray tasks (the first only analyses and profiles; the baseline's
    profile travels to the second): the same groups, baselines and findings as one process."""
    from evidence import lofo
    from evidence.torch import manifest as torch_manifest
    from trackerhealth.adapters.files import read_histories

    exp_id, exp_name = experiment
    slow = "rnn_lr_too_low"
    for name in (slow, "rnn_twin_adam", "rnn_warmup_cosine", "rnn_sgdr_restarts"):
        entry = next(e for e in torch_manifest.load() if e["name"] == name)
        (history,) = read_histories(lofo.TORCH / entry["file"])
        log_history(client, exp_id, history, name, params={"model": entry["model"], "dataset": entry["dataset"]})
    base = ["--mlflow-uri", mlflow_server.url, "-e", exp_name, "--format", "json", "--full", "--fail-on", "never",
            "--dry-run", "--group-by", "params.model", "--group-by", "params.dataset"]
    on_ray = scan_cli([*base, "--cache-dir", str(cache_dir), "--ray", ray_cluster.address, "--workers", "2"])
    local = scan_cli([*base, "--cache-dir", str(tmp_path / "other-cache")])
    assert on_ray.exit_code == 0 and local.exit_code == 0, (on_ray.output, local.output)
    ray_doc, local_doc = json_out(on_ray), json_out(local)
    assert _health(ray_doc) == _health(local_doc)
    groups = {r["run"]["name"]: {k: v for k, v in r["group"].items() if k != "baseline_curves"} for r in ray_doc["runs"]}
    assert groups == {r["run"]["name"]: {k: v for k, v in r["group"].items() if k != "baseline_curves"}
                      for r in local_doc["runs"]}
    slow_run = next(r for r in ray_doc["runs"] if r["run"]["name"] == slow)
    assert [f["level"] for f in slow_run["findings"] if f["id"] == "slow-convergence"] == ["warning"]
