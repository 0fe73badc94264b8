"""The transaction-log walker on damaged copies of real SDK logs, folder discovery, errors, and the
histogram norm estimate."""

from __future__ import annotations

import re
import shutil
import struct
import sys
import zlib

import numpy as np
import pytest
from train_numpy import forward_backward, init_params, make_data, watch_histogram
from wandb_support import encode_log

from trackerhealth.adapters.wandb import (
    WandbFolderError,
    WandbMissing,
    find_run_folders,
    read_run,
    read_run_folder,
)
from trackerhealth.adapters.wandb._histogram import derived_key, l2_estimate
from trackerhealth.adapters.wandb._log import BLOCK_LEN, CHUNK_HEADER_LEN, FILE_HEADER_LEN, scan
from trackerhealth.adapters.wandb._records import import_proto

BLOCK = 32 * 1024


def copy_log(run, tmp_path, data: bytes, name: str = "cut"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / run.log.name).write_bytes(data)
    return folder


def assert_prefix(part, full, samples):
    """Every logged key of ``part`` holds the first points of the same key in ``full``; its system
    metrics are samples of the full log (``samples``: their wall times as logged)."""
    logged = [k for k in part.keys() if not k.startswith("system/")]
    for key in part.keys():
        if key.startswith("system/"):
            if not logged:  # no history row yet: samples are placed at their index
                continue
            # Placed by wall time among the rows read so far, so two samples after the last row
            # read can share a step (the later one kept) where the full read puts them apart, and
            # the reverse: compare with the samples as logged, not with the full read's survivors.
            assert set(part[key].wall_times) <= samples, key
            continue
        p, f = part[key], full[key]
        n = len(p)
        assert np.array_equal(p.steps, f.steps[:n]) and np.array_equal(p.values, f.values[:n], equal_nan=True), key


def logged_sample_times(folder) -> set[float]:
    """The wall time of every system-metric sample in the run's log, before any de-duplication."""
    return {float(t) for t in read_run(folder)._decoded.s_times}


def test_checksum_is_crc32_of_type_and_data(sdk_runs):
    """W&B's variant of the LevelDB log: plain CRC-32 (zlib) of the type byte and the data."""
    data = sdk_runs["sgd"].log.read_bytes()
    assert data[:7] == b":W&B\xe1\xbe\x00"
    crc = int.from_bytes(data[7:11], "little")
    length = int.from_bytes(data[11:13], "little")
    assert zlib.crc32(data[13:14] + data[14:14 + length]) == crc
    assert scan(data).complete


@pytest.mark.parametrize("mode", ["sgd", "wide"])
def test_records_re_encode_to_the_sdk_bytes(sdk_runs, mode):
    """Walking and re-writing the records gives the SDK's file byte for byte: block edges, padding
    and chunk splits are understood exactly as wandb-core writes them."""
    data = sdk_runs[mode].log.read_bytes()
    assert encode_log(scan(data).records) == data


def test_an_undecodable_record_is_skipped_and_told(sdk_runs, tmp_path):
    run = sdk_runs["sgd"]
    records = scan(run.log.read_bytes()).records
    damaged = records[:300] + [b"\xff\xff\xff\xff"] + records[300:]
    local = read_run(copy_log(run, tmp_path, encode_log(damaged)))
    assert local.complete and local.records == len(damaged)
    assert any("1 record(s) could not be decoded" in n for n in local.history.notes)
    full = read_run_folder(run.folder)
    assert local.history.keys() == full.keys() and local.history.n_points == full.n_points


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sgd", "wide"])
def test_truncated_anywhere_reads_a_prefix(sdk_runs, tmp_path, mode):
    """Cut at block edges, inside chunk headers, inside FIRST/MIDDLE/LAST chunks: the read stops at
    the last complete record, says so, and what it read is the start of the full run."""
    run = sdk_runs[mode]
    data = run.log.read_bytes()
    full = read_run_folder(run.folder)
    samples = logged_sample_times(run.folder)
    full_records = len(scan(data).records)
    spread, n_edges = (40, 6) if mode == "sgd" else (15, 3)  # a wide-run read costs ~80 ms
    cuts = set(range(600, len(data), max(len(data) // spread, 1)))
    edges = list(range(BLOCK, len(data), BLOCK))
    for edge in edges[:: max(len(edges) // n_edges, 1)]:
        cuts |= {edge - 8, edge - 7, edge - 1, edge, edge + 3, edge + 7, edge + 100}
    last_records = 0
    problems = set()
    for cut in sorted(c for c in cuts if 0 < c < len(data)):
        folder = copy_log(run, tmp_path, data[:cut], f"cut{cut}")
        try:
            local = read_run(folder)
        except WandbFolderError as exc:  # cut before the run record
            assert "no run record" in str(exc) or "header" in str(exc)
            continue
        assert local.records >= last_records and local.records < full_records
        last_records = local.records
        assert local.end <= cut and local.size == cut
        assert local.history.ref.state == "running"
        if not local.complete:
            assert f"read {local.records} records up to byte {local.end} of {cut}" in local.history.notes[0]
            why = re.search(r"of \d+ \((.*)\); the rest is ignored", local.history.notes[0]).group(1)
            problems.add(re.sub(r" \(.*|\s+at byte \d+", "", why))
        assert_prefix(local.history, full, samples)
        shutil.rmtree(folder)
    # The cuts met every way a log can end early.
    expected = {"ends inside a chunk header", "ends inside a chunk"}
    if mode == "wide":
        expected.add("ends between the chunks of a record split across blocks")
    assert expected <= problems, problems


def _payload_byte_after(data: bytes, at: int) -> int:
    """The middle byte of the first chunk payload past byte ``at``. A flipped byte there breaks only
    the checksum; the middle of the file can fall on a chunk header, whose length or type field breaks
    otherwise (a different message), and where it falls varies with what the SDK wrote this time."""
    pos = FILE_HEADER_LEN
    while True:
        left = BLOCK_LEN - pos % BLOCK_LEN
        if left < CHUNK_HEADER_LEN:
            pos += left
            continue
        _, length, _ = struct.unpack_from("<IHB", data, pos)
        start = pos + CHUNK_HEADER_LEN
        if start > at and length > 0:
            return start + length // 2
        pos = start + length


def test_bad_checksum_stops_at_the_last_good_record(sdk_runs, tmp_path):
    run = sdk_runs["sgd"]
    data = bytearray(run.log.read_bytes())
    good = scan(bytes(data))
    at = _payload_byte_after(bytes(data), len(data) // 2)
    data[at] ^= 0x40
    local = read_run(copy_log(run, tmp_path, bytes(data)))
    assert not local.complete and local.end <= at and local.records < len(good.records)
    assert "bad checksum in the chunk at byte" in local.history.notes[0]
    assert_prefix(local.history, read_run_folder(run.folder), logged_sample_times(run.folder))


def test_zero_filled_tail_is_the_end(sdk_runs, tmp_path):
    run = sdk_runs["sgd"]
    data = run.log.read_bytes()
    local = read_run(copy_log(run, tmp_path, data + bytes(5000)))
    assert local.records == len(scan(data).records)
    assert "zero-filled space" in local.history.notes[0]
    assert local.history.ref.state == "finished"


def test_find_run_folders(sdk_runs, tmp_path):
    root = sdk_runs["sgd"].folder.parents[1]  # holds wandb/ with offline-run-… and latest-run
    assert (root / "wandb" / "latest-run").is_symlink()
    assert find_run_folders(root) == [sdk_runs["sgd"].folder]
    assert find_run_folders(root / "wandb") == [sdk_runs["sgd"].folder]
    assert find_run_folders(sdk_runs["sgd"].folder) == [sdk_runs["sgd"].folder]
    assert find_run_folders(sdk_runs["sgd"].log) == [sdk_runs["sgd"].log]
    everything = find_run_folders(root.parent)
    assert sorted(everything) == sorted(r.folder for r in sdk_runs.values())
    # A .wandb file reads like its folder.
    assert read_run_folder(sdk_runs["sgd"].log).keys() == read_run_folder(sdk_runs["sgd"].folder).keys()


def test_errors_name_the_path_and_the_fix(tmp_path, sdk_runs):
    with pytest.raises(WandbFolderError, match="no such file"):
        find_run_folders(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(WandbFolderError, match=r"no run-<id>\.wandb file here"):
        read_run_folder(empty)
    other = tmp_path / "other" / "run-x.wandb"
    other.parent.mkdir()
    other.write_bytes(b"step,loss\n1,2\n")
    with pytest.raises(WandbFolderError, match="not a W&B transaction log"):
        read_run_folder(other)
    newer = tmp_path / "newer" / "run-x.wandb"
    newer.parent.mkdir()
    newer.write_bytes(b":W&B\xe1\xbe\x01" + sdk_runs["sgd"].log.read_bytes()[7:])
    with pytest.raises(WandbFolderError, match=r"version 1 is newer.*pip install -U 'trackerhealth\[wandb\]'"):
        read_run_folder(newer)
    fresh = tmp_path / "fresh" / "run-x.wandb"
    fresh.parent.mkdir()
    fresh.write_bytes(b":W&B")
    with pytest.raises(WandbFolderError, match="has not written its log header yet"):
        read_run_folder(fresh)


def test_missing_wandb_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb.proto.wandb_internal_pb2", None)
    with pytest.raises(WandbMissing, match=r"pip install 'trackerhealth\[wandb\]'"):
        import_proto()


def test_histogram_norm_estimate_is_within_its_bound():
    """On real gradients of the test MLP: the bin-centre estimate is within the proven bound."""
    rng = np.random.default_rng(7)
    x, y = make_data(rng)
    params = init_params(rng)
    for _ in range(30):
        _, grads = forward_backward(params, x, y)
        for name, g in grads.items():
            counts, edges = watch_histogram(g)
            est, bound = l2_estimate(counts, edges)
            true = float(np.linalg.norm(g.astype(np.float32).astype(np.float64)))
            assert abs(est - true) <= bound * (1 + 1e-9) + 1e-12, name
        for name in params:
            params[name] = params[name] - 0.1 * grads[name]
    # Every element equal: one bin [x, x], exact.
    assert l2_estimate([4.0], [0.5, 0.5]) == (1.0, 0.0)
    # Not a histogram: None.
    assert l2_estimate([1, 2], [0.0, 1.0]) is None
    assert l2_estimate([1, -2], [0.0, 1.0, 2.0]) is None


def test_histogram_keys():
    assert derived_key(("gradients", "fc1.weight")) == "grad_norm/fc1.weight"
    assert derived_key(("gradients/encoder.layer.0.weight",)) == "grad_norm/encoder.layer.0.weight"
    assert derived_key(("Gradients/inc.conv",)) == "grad_norm/inc.conv"
    assert derived_key(("parameters", "fc1.bias")) == "weight_norm/fc1.bias"
    assert derived_key(("activations", "fc1")) is None
    assert derived_key(("h",)) is None


def test_block_constant():
    assert BLOCK_LEN == BLOCK


def _log_once_at_the_end(tmp_path, n_samples: int):
    """A run that calls ``wandb.log`` once, after training (public repository Pranav335/Seq2SeqModel_CH22D031:
    79 sweep runs of one history row each, at step 0): ``n_samples`` system-metric samples, then the row."""
    pb = import_proto()
    records = []
    header = pb.Record()
    header.header.SetInParent()
    run = pb.Record()
    run.run.run_id, run.run.project = "once", "p"
    records += [header, run]
    for i in range(n_samples):
        stats = pb.Record()
        stats.stats.stats_type = pb.StatsRecord.SYSTEM
        stats.stats.timestamp.seconds = 900 + 10 * i
        item = stats.stats.item.add()
        item.key, item.value_json = "cpu", str(float(10 + i))
        records.append(stats)
    row = pb.Record()
    for key, value in (("training_loss", "0.75"), ("_step", "0"), ("_timestamp", "1500.0"), ("_runtime", "600.0")):
        item = row.history.item.add()
        item.key, item.value_json = key, value
    row.history.step.num = 0
    done = pb.Record()
    done.exit.exit_code = 0
    records += [row, done]
    folder = tmp_path / "run-20240101_000000-once"
    folder.mkdir()
    (folder / "run-once.wandb").write_bytes(encode_log([r.SerializeToString() for r in records]))
    return folder


def test_system_samples_of_a_run_whose_rows_share_one_step_are_all_kept(tmp_path):
    # Placed by interpolating wall time through the rows, every sample landed on step 0 and all but the last
    # were dropped as duplicates, without a word: 48 CPU samples read as 1.
    history = read_run_folder(_log_once_at_the_end(tmp_path, n_samples=6))
    assert len(history["training_loss"]) == 1
    assert list(history["system/cpu"].values) == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    assert any("share one step" in note for note in history.notes), history.notes
