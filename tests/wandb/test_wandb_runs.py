"""Runs written by the real W&B SDK (offline) read back: every logged value, checked two ways.

The first check is the training script's own record of what it passed to ``wandb.log``
(``truth.jsonl``); the second is the SDK's Go reader (``wandb leet inspect --json``).
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
from wandb_support import dotted, leet_history, leet_records, leet_stats, same

from trackerhealth.adapters.wandb import _records, read_run, read_run_folder

pytest.importorskip("wandb.proto.wandb_internal_pb2", reason="the wandb extra is not installed")


def assert_matches_truth(history, rows, *, skip=()):
    """Every value the script logged is in the history at its step, bit for bit."""
    for r in rows:
        for key, value in r["row"].items():
            if key.startswith(skip):
                continue
            s = history[key]
            at = np.searchsorted(s.steps, r["step"])
            assert at < len(s) and s.steps[at] == r["step"], (key, r["step"])
            assert same(s.values[at], value), (key, r["step"], s.values[at], value)
            # W&B's _timestamp is taken when the row is logged, just before the script's own clock.
            assert abs(s.wall_times[at] - r["time"]) < 5.0
    logged = {k for r in rows for k in r["row"] if not k.startswith(skip)}
    expected_points = sum(1 for r in rows for k in r["row"] if k in logged)
    assert sum(len(history[k]) for k in logged) == expected_points


def test_sgd_run_reads_every_logged_value(sdk_runs):
    run = sdk_runs["sgd"]
    local = read_run(run.folder)
    h = local.history
    assert_matches_truth(h, run.rows)
    assert local.complete and local.exit_code == 0 and local.sdk_version == "0.31.0"
    ref = h.ref
    assert (ref.tracker, ref.project, ref.id, ref.name) == (
        "wandb", run.header["project"], run.header["run_id"], run.header["name"])
    assert ref.state == "finished" and ref.tags == ("numpy", "sgd")
    assert ref.config == {"lr": 0.05, "steps": 200, "model": {"hidden": 16, "layers": ["fc1", "fc2", "out"]}}
    # Nested dicts are joined with '/'; W&B's own keys are not metrics.
    assert "opt/lr_scale" in h and not any(k.startswith("_") for k in h.keys())
    assert h["val/loss"].steps.tolist() == list(range(0, 200, 10))
    # The summary: run.summary writes and the last logged values.
    summary = local.summary
    last = run.rows[-1]["row"]
    assert summary["final_loss"] == last["train/loss"] == summary["train/loss"]
    assert summary["opt"]["lr_scale"] == last["opt/lr_scale"]
    assert not h.notes


def test_system_metrics_are_placed_by_wall_time(sdk_runs):
    h = read_run_folder(sdk_runs["sgd"].folder)
    system = [k for k in h.keys() if k.startswith("system/")]
    assert {"system/cpu", "system/memory_percent", "system/proc.memory.rssMB"} <= set(system)
    assert h.keys()[-len(system):] == system  # logged metrics first
    loss = h["train/loss"]
    cpu = h["system/cpu"]
    assert len(cpu) >= 2
    for step, wall in zip(cpu.steps, cpu.wall_times):
        # Between the steps of the history rows logged just before and just after the sample.
        before = loss.steps[loss.wall_times <= wall]
        after = loss.steps[loss.wall_times >= wall]
        lo = before[-1] if len(before) else loss.steps[0]
        hi = after[0] if len(after) else loss.steps[-1]
        assert lo <= step <= hi, (step, wall, lo, hi)


def test_diverging_run_keeps_inf_and_nan(sdk_runs):
    run = sdk_runs["diverge"]
    h = read_run_folder(run.folder)
    assert_matches_truth(h, run.rows)
    loss = h["train/loss"].values
    first_bad = int(np.flatnonzero(~np.isfinite(loss))[0])
    assert 0 < first_bad < len(loss) - 1 and np.isnan(loss[-1])
    assert np.isinf(h["grad_norm"].values).any() or np.isnan(h["grad_norm"].values).any()


def test_watch_histograms_become_layer_norm_estimates(sdk_runs):
    run = sdk_runs["watch"]
    h = read_run_folder(run.folder)
    assert_matches_truth(h, run.rows)
    hist_by_step = {}
    for rec in leet_records(str(run.log)):
        if rec["type"] == "history":
            item = rec["history"]["item"]
            hist_by_step[item["_step"]] = item
    for layer in ("fc1", "fc2", "out"):
        for derived, exact, kind in ((f"grad_norm/{layer}", f"exact_grad_l2/{layer}", "gradients"),
                                     (f"weight_norm/{layer}", f"exact_weight_l2/{layer}", "parameters")):
            est, true = h[derived], h[exact]
            assert est.steps.tolist() == true.steps.tolist()
            for step, e, t in zip(est.steps, est.values, true.values):
                item = hist_by_step[int(step)]
                counts = np.asarray(item[f"{kind}/{layer}.values"], dtype=float)
                edges = np.asarray(item[f"{kind}/{layer}.bins"], dtype=float)
                half = np.diff(edges) / 2
                bound = math.sqrt(float(np.dot(counts, half * half)))
                # The histogram of float32 elements; the exact norm is of float64 ones.
                assert abs(e - t) <= bound + 1e-6 * t, (derived, step, e, t, bound)
                assert abs(e - t) <= 0.05 * t, (derived, step, e, t)
    assert any("L2 estimates from logged histograms" in n for n in h.notes)


def test_logged_layer_norms_win_over_histogram_estimates(sdk_runs):
    # The sgd run logs grad_norm/<layer> itself; nothing there is derived.
    h = read_run_folder(sdk_runs["sgd"].folder)
    assert not any("estimates" in n for n in h.notes)


def test_multi_block_records(sdk_runs):
    run = sdk_runs["wide"]
    local = read_run(run.folder)
    assert local.complete and local.size > 4 * 32768
    assert_matches_truth(local.history, run.rows)
    assert len([k for k in local.history.keys() if k.startswith("stress/")]) == 1500
    # Natural, stable key order for wandb-core logs (which store keys in random order).
    stress = [k for k in local.history.keys() if k.startswith("stress/")]
    assert stress == sorted(stress)


def test_killed_run_reads_up_to_the_last_complete_record(sdk_runs):
    run = sdk_runs["kill"]
    local = read_run(run.folder)
    h = local.history
    n = len(h["train/loss"])
    assert 0 < n < len(run.rows), "the crash should lose the rows still buffered"
    assert_matches_truth(h, run.rows[:n])
    if local.complete:
        # The SIGKILL landed just after a record that filled its 32 KiB block: nothing is cut, only
        # the block's padding (< 7 bytes, too short for a record header) follows. Rare, but real.
        assert local.size - local.end < 7 and local.size % 32768 == 0
        assert not any(x.startswith("run still writing or truncated") for x in h.notes)
    else:
        assert local.end < local.size
        note = next(x for x in h.notes if x.startswith("run still writing or truncated"))
        assert f"read {local.records} records up to byte {local.end} of {local.size}" in note
    assert any("no exit record" in x for x in h.notes)
    assert h.ref.state == "running" and local.exit_code is None
    # The SDK's own reader stops at the same record.
    assert len(leet_records(str(run.log))) == local.records
    # Long untouched, the same log is from a process that died.
    old = time.time() - 3600
    os.utime(run.log, (old, old))
    assert read_run_folder(run.folder).ref.state == "crashed"


def test_fast_path_gives_what_protobuf_gives(sdk_runs, monkeypatch):
    import trackerhealth.adapters.wandb as adapter

    for run in sdk_runs.values():
        fast = read_run_folder(run.folder)
        monkeypatch.setattr(adapter, "decode", lambda recs: _records.decode(recs, bulk=False))
        slow = read_run_folder(run.folder)
        monkeypatch.undo()
        assert fast.keys() == slow.keys()
        for k in fast.keys():
            for a, b in zip(fast[k], slow[k]):
                assert np.array_equal(a, b, equal_nan=True), (run.mode, k)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sgd", "watch", "diverge", "wide", "kill"])
def test_values_match_the_sdk_reader(sdk_runs, mode):
    run = sdk_runs[mode]
    local = read_run(run.folder)
    check_against_leet(local.history, run.log, local.estimated)


def check_against_leet(h, log_path, derived=frozenset()):
    """Both directions: every value of ours is leet's at that step; every numeric leet value of a
    logged key is ours. System metrics: every sample leet reads within the logged steps is ours."""
    by_dotted = {dotted(k): k for k in h.keys() if not k.startswith("system/")}
    seen: dict[str, int] = {}
    for step, _, values in leet_history(log_path):
        for key, value in values.items():
            ours = by_dotted.get(dotted(key))
            if ours is None or ours in derived:
                # Only a derived key may shadow (it never replaces a logged one).
                assert ours is None, key
                continue
            s = h[ours]
            at = np.searchsorted(s.steps, step)
            assert s.steps[at] == step and same(s.values[at], value), (key, step, s.values[at], value)
            seen[ours] = seen.get(ours, 0) + 1
    logged = [k for k in by_dotted.values() if k not in derived]
    assert seen == {k: len(h[k]) for k in logged}
    # System metrics: leet's samples (timestamps as RFC 3339 text) against ours.
    samples = leet_stats(log_path)
    if not samples:
        return
    for key in {k for _, items in samples for k in items}:
        ours = h.get("system/" + key)
        assert ours is not None, key
        leet_values = [items[key] for _, items in samples if key in items]
        # Samples that fall before the first / after the last history row share its step; the
        # last of them is kept. Every other sample is there, in order.
        assert len(ours) <= len(leet_values)
        it = iter(leet_values)
        assert all(any(same(v, w) for w in it) for v in ours.values), key
