"""Hostile and damaged local files: each class of break is one bad file's own error or note, never
a traceback, never the end of the whole ``analyze``, and never a silent all-clear.

Files are written by the real libraries (pandas, pyarrow, tensorboard's event writer, HF Trainer's
trainer_state.json from tests/data) and then damaged the way disks, editors and killed jobs do.
"""

from __future__ import annotations

import builtins
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from trackerhealth.adapters import files as files_adapter
from trackerhealth.adapters.files import read_paths
from trackerhealth.cli import main

DATA = Path(__file__).resolve().parent / "data" / "files"
HF_STATE = DATA / "hf_trainer_state.json"


def analyze_json(*paths, extra=()):
    res = CliRunner().invoke(main, ["analyze", *map(str, paths), "--format", "json", *extra])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    return res.exit_code, json.loads(res.stdout)  # errors also go to stderr


def decaying_loss(n=200, nan_from=None):
    steps = np.arange(n)
    loss = 2.0 * np.exp(-steps / 40) + 0.1
    if nan_from is not None:
        loss[nan_from:] = np.nan
    return steps, loss


@pytest.fixture
def good_csv(tmp_path):
    steps, loss = decaying_loss()
    path = tmp_path / "good" / "good.csv"
    path.parent.mkdir()
    pd.DataFrame({"step": steps, "loss": loss}).to_csv(path, index=False)
    return path


def _by_name(doc):
    return {r["run"]["name"]: r for r in doc["runs"]}


def _errors(doc):
    return {Path(e["source"]).name: e["message"] for e in doc["errors"]}


# -- 1. one bad file never ends the whole analyze ----------------------------------------------
def test_deeply_nested_json_is_that_files_error_and_the_good_file_is_analysed(tmp_path, good_csv):
    state = tmp_path / "deep" / "trainer_state.json"
    state.parent.mkdir()
    state.write_text('{"log_history": [' + '{"a": ' * 1200 + "1" + "}" * 1200 + "]}")
    records = tmp_path / "records.json"
    records.write_text("[" * 5000 + "]" * 5000)
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": ' + "[" * 5000 + "]" * 5000 + "}\n")

    code, doc = analyze_json(good_csv, state, records, lines)

    assert code == 2, doc  # a file could not be read: a usage error, not "a finding"
    assert list(_by_name(doc)) == ["good"] + ["lines"] * ("lines" in _by_name(doc))
    errors = _errors(doc)
    assert "nested too deeply" in errors["trainer_state.json"] and "re-export" in errors["trainer_state.json"]
    assert "nested too deeply" in errors["records.json"]
    if "lines.jsonl" in errors:
        assert "nested too deeply" in errors["lines.jsonl"]
    else:  # JSON lines: the one bad line is skipped with a note, the rest read
        assert any("unreadable line" in n for n in _by_name(doc)["lines"]["notes"])


def test_an_integer_beyond_float64_reads_as_inf_in_every_json_shape(tmp_path, good_csv):
    huge = "1" + "0" * 400
    state = json.loads(HF_STATE.read_text())
    state["log_history"][3]["loss"] = "HUGE"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "trainer_state.json").write_text(json.dumps(state).replace('"HUGE"', huge))
    (tmp_path / "records.json").write_text(f'[{{"step": 1, "loss": 0.5}}, {{"step": 2, "loss": -{huge}}}]')
    (tmp_path / "keras.json").write_text(f'{{"loss": [0.9, 0.5, {huge}]}}')

    code, doc = analyze_json(good_csv, tmp_path / "run" / "trainer_state.json", tmp_path / "records.json",
                             tmp_path / "keras.json")

    assert doc["errors"] == [] and code == 1  # read, and a +/-Inf loss is a critical finding
    runs = _by_name(doc)
    assert runs["good"]["status"] == "ok"
    for name in ("run", "records", "keras"):
        assert runs[name]["status"] == "critical", runs[name]
        assert [f["id"] for f in runs[name]["findings"]] == ["nonfinite"]
        assert any("too large for a float" in n for n in runs[name]["notes"]), runs[name]["notes"]


def test_a_reader_failure_nobody_foresaw_is_that_files_error(tmp_path, good_csv, monkeypatch):
    bad = tmp_path / "bad.csv"
    shutil.copy(good_csv, bad)
    real = files_adapter.read_csv

    def read_csv(path, sniffed):
        if path.name == "bad.csv":
            raise KeyError("a bug in a reader")
        return real(path, sniffed)

    monkeypatch.setattr(files_adapter, "read_csv", read_csv)
    histories, errors = read_paths([bad, good_csv])
    assert [h.ref.name for h in histories] == ["good"]
    assert len(errors) == 1 and errors[0]["source"] == str(bad)
    assert "KeyError" in errors[0]["message"] and "report" in errors[0]["message"]


def test_a_folder_with_one_broken_file_keeps_the_others(tmp_path, good_csv):
    folder = good_csv.parent
    (folder / "deep.json").write_text("[" * 3000 + "]" * 3000)
    (folder / "cut.parquet").write_bytes(b"PAR1" + os.urandom(300))
    histories, errors = read_paths([folder])
    assert [h.ref.name for h in histories] == ["good"]
    assert sorted(Path(e["source"]).name for e in errors) == ["cut.parquet", "deep.json"]


# -- 2. damaged files written by the real libraries -------------------------------------------
def _real_files(folder: Path) -> dict[str, Path]:
    steps, loss = decaying_loss()
    wide = pd.DataFrame({"step": steps, "loss": loss, "lr": 1e-3})
    long = wide.melt(id_vars="step", var_name="key", value_name="value")
    out = {
        "wide.csv": folder / "wide.csv", "wide.parquet": folder / "wide.parquet",
        "long.parquet": folder / "long.parquet", "wide.jsonl": folder / "wide.jsonl",
        "trainer_state.json": folder / "trainer_state.json",
    }
    wide.to_csv(out["wide.csv"], index=False)
    wide.to_parquet(out["wide.parquet"])
    long.to_parquet(out["long.parquet"])
    wide.to_json(out["wide.jsonl"], orient="records", lines=True)
    shutil.copy(HF_STATE, out["trainer_state.json"])
    return out


DAMAGES = {
    "cut in half": lambda b, rng: b[: len(b) // 2],
    "cut to 10 bytes": lambda b, rng: b[:10],
    "bytes flipped": lambda b, rng: bytes(x ^ 0xFF if rng.random() < 0.02 else x for x in b),
    "a block zeroed": lambda b, rng: b[: len(b) // 3] + b"\0" * 64 + b[len(b) // 3 + 64:],
    "huge numbers": lambda b, rng: b.replace(b"0.1", b"9" * 400, 3),
    "replaced by junk": lambda b, rng: bytes(rng.integers(0, 256, 2000, dtype=np.uint8)),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_real_files_are_read_or_refused_never_raised(tmp_path, damage):
    rng = np.random.default_rng(7)
    for name, path in _real_files(tmp_path).items():
        path.write_bytes(DAMAGES[damage](path.read_bytes(), rng))
        histories, errors = read_paths([path])  # never raises
        assert len(histories) + len(errors) >= 1, name
        for e in errors:
            assert e["source"] == str(path) and e["message"].strip(), (name, e)
            assert "Traceback" not in e["message"]


def test_a_cut_parquet_file_names_the_damage(tmp_path):
    path = _real_files(tmp_path)["wide.parquet"]
    path.write_bytes(path.read_bytes()[:-40])
    histories, errors = read_paths([path])
    assert histories == [] and "not a readable Parquet file" in errors[0]["message"]
    assert "truncated" in errors[0]["message"]


@pytest.mark.parametrize("name", ["wide.csv", "wide.jsonl"])
def test_a_table_cut_mid_row_says_so(tmp_path, name):
    path = _real_files(tmp_path)[name]
    text = path.read_text()
    [whole], _ = read_paths([path])
    assert whole.notes == ()
    path.write_text(text[: text.rindex("\n", 0, len(text) // 2) + 25])  # ends inside a row
    [history], errors = read_paths([path])
    assert errors == [] and any("no line end" in n and "cut short" in n for n in history.notes)


@pytest.mark.parametrize("name", ["run.csv.gz", "run.jsonl.gz"])
def test_a_cut_gzip_file_is_read_to_the_cut_and_a_corrupt_one_refused(tmp_path, name):
    steps, loss = decaying_loss(5000)
    frame = pd.DataFrame({"step": steps, "loss": loss})
    path = tmp_path / name
    if name.endswith(".csv.gz"):
        frame.to_csv(path, index=False)  # pandas infers gzip from the name
    else:
        frame.to_json(path, orient="records", lines=True)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    [history], errors = read_paths([path])
    assert errors == [] and 1000 < len(history["loss"]) < 5000
    np.testing.assert_allclose(history["loss"].values, loss[: len(history["loss"])])  # nothing invented
    [note] = history.notes
    assert "cut short" in note and "missing" in note

    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # deflate may decode garbage up to the final CRC: refused, not read
    path.write_bytes(bytes(flipped))
    histories, errors = read_paths([path])
    assert histories == [] and "corrupt" in errors[0]["message"] and "re-export" in errors[0]["message"]


# -- 3. files that are not what their name says ------------------------------------------------
def test_empty_binary_folder_and_unreadable_files_are_each_an_error(tmp_path, good_csv, monkeypatch):
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "junk.csv").write_bytes(bytes(range(256)) * 20)
    (tmp_path / "folder.csv").mkdir()
    locked = tmp_path / "locked.csv"
    shutil.copy(good_csv, locked)
    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):  # tests run as root, where chmod 000 still reads
        if str(file) == str(locked):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    paths = [tmp_path / n for n in ("empty.csv", "junk.csv", "folder.csv", "locked.csv")]
    histories, errors = read_paths(paths + [good_csv])

    assert [h.ref.name for h in histories] == ["good"]
    msg = {Path(e["source"]).name: e["message"] for e in errors}
    assert "empty" in msg["empty.csv"] and "flushed" in msg["empty.csv"]
    assert "binary content" in msg["junk.csv"] and "Supported" in msg["junk.csv"]
    assert "no supported metrics files" in msg["folder.csv"]
    assert "Permission denied" in msg["locked.csv"]


def test_a_folder_that_cannot_be_listed_is_an_error_not_a_silent_skip(tmp_path, good_csv, monkeypatch):
    hidden = good_csv.parent / "locked"
    hidden.mkdir()
    shutil.copy(good_csv, hidden / "other.csv")
    real_scandir = os.scandir

    def scandir(path="."):  # tests run as root, where chmod 000 still lists
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    histories, errors = read_paths([good_csv.parent])
    assert [h.ref.name for h in histories] == ["good"]
    assert [(e["source"], "Permission denied" in e["message"]) for e in errors] == [(str(hidden), True)]


def test_utf16_and_latin1_csvs_are_read(tmp_path):
    steps, loss = decaying_loss()
    frame = pd.DataFrame({"step": steps, "loss": loss})
    frame.to_csv(tmp_path / "utf16.csv", index=False, encoding="utf-16")  # Excel's "Unicode text"
    frame.rename(columns={"loss": "pérte"}).to_csv(tmp_path / "latin.csv", index=False, encoding="latin-1")
    histories, errors = read_paths([tmp_path / "utf16.csv", tmp_path / "latin.csv"])
    assert errors == []
    utf16, latin = histories
    assert utf16.keys() == ["loss"] and len(utf16["loss"]) == 200
    assert latin.keys() == ["pérte"] and any("Latin-1" in n for n in latin.notes)


# -- 4. a damaged TensorBoard file: read to the damage, with a note ---------------------------
@pytest.fixture(scope="module")
def event_file(tmp_path_factory) -> Path:
    """A real event file, written by tensorboard's EventFileWriter (what torch's SummaryWriter
    writes through, so no torch is needed): the loss goes NaN at step 200 of 300."""
    import time

    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder = tmp_path_factory.mktemp("tb") / "run"
    writer = EventFileWriter(str(folder))
    for step in range(300):
        value = 2.0 * math.exp(-step / 50) + 0.1 if step < 200 else math.nan
        scalar = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="train/loss", simple_value=value)])
        writer.add_event(event_pb2.Event(step=step, wall_time=time.time(), summary=scalar))
    writer.close()
    return next(folder.glob("events.out.tfevents.*"))


def _damaged_run(tmp_path, event_file, data: bytes, name="run") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / event_file.name).write_bytes(data)
    return folder


def test_a_cut_event_file_is_read_to_the_cut_with_a_note(tmp_path, event_file):
    data = event_file.read_bytes()
    folder = _damaged_run(tmp_path, event_file, data[: len(data) // 2])
    code, doc = analyze_json(folder)
    [run] = doc["runs"]
    assert 0 < run["points"] < 300
    [note] = [n for n in run["notes"] if "damaged or still being written" in n]
    assert f"of {len(data) // 2}" in note and "cut short" in note and "missing" in note
    assert doc["errors"] == []

    intact = _damaged_run(tmp_path, event_file, data, name="intact")
    _, doc = analyze_json(intact)
    assert doc["runs"][0]["notes"] == [] and doc["runs"][0]["status"] == "critical"  # the NaN at step 200


def test_a_flipped_byte_in_an_event_file_stops_reading_there_with_a_note(tmp_path, event_file):
    data = bytearray(event_file.read_bytes())
    at = len(data) // 3
    data[at] ^= 0xFF
    [history], errors = read_paths([_damaged_run(tmp_path, event_file, bytes(data))])
    assert errors == []
    assert 0 < len(history["train/loss"]) < 300
    [note] = history.notes
    assert "CRC check" in note and "missing" in note
    stopped = int(note.split("up to byte ")[1].split()[0])
    assert stopped <= at < stopped + 200  # it stopped at the record holding the flipped byte


def test_the_other_event_files_of_a_run_are_still_read(tmp_path, event_file):
    data = event_file.read_bytes()
    folder = _damaged_run(tmp_path, event_file, data[: len(data) // 4])
    [cut], _ = read_paths([folder])
    later = event_file.name.replace("tfevents.", "tfevents.9", 1)  # a later file of the same run
    shutil.copy(event_file, folder / later)
    [history], errors = read_paths([folder])
    assert errors == [] and len(history["train/loss"]) == len(cut["train/loss"]) + 300
    assert [n for n in history.notes if "damaged" in n] == [n for n in history.notes if event_file.name in n] != []


def test_an_event_file_damaged_from_its_first_record_is_an_error(tmp_path, event_file):
    data = bytearray(event_file.read_bytes())
    data[5] ^= 0xFF
    histories, errors = read_paths([_damaged_run(tmp_path, event_file, bytes(data))])
    assert histories == [] and "no TensorBoard events could be read" in errors[0]["message"]
    assert "CRC" in errors[0]["message"]


# -- 5. NaN in a long table arrives as null or an empty cell: it is a logged NaN -------------
def _long_frame(nan_from=150):
    steps, loss = decaying_loss(nan_from=nan_from)
    rows = pd.DataFrame({"step": np.repeat(steps, 2), "key": ["loss", "lr"] * len(steps),
                         "value": np.ravel(np.c_[loss, np.full(len(steps), 1e-3)])})
    return rows


@pytest.mark.parametrize("writer", ["to_parquet", "to_csv", "to_json"])
def test_a_nan_loss_written_long_with_pandas_defaults_is_critical(tmp_path, writer):
    path = tmp_path / {"to_parquet": "run.parquet", "to_csv": "run.csv", "to_json": "run.jsonl"}[writer]
    frame = _long_frame()
    if writer == "to_parquet":
        frame.to_parquet(path)
    elif writer == "to_csv":
        frame.to_csv(path, index=False)  # NaN -> an empty cell
    else:
        frame.to_json(path, orient="records", lines=True)  # NaN -> null
    code, doc = analyze_json(path)
    [run] = doc["runs"]
    assert code == 1 and run["status"] == "critical"
    [finding] = run["findings"]
    assert finding["id"] == "nonfinite" and "step 150" in finding["message"]
    assert any("empty value read as NaN" in n for n in run["notes"])


def test_a_blank_in_a_wide_table_stays_not_logged(tmp_path):
    steps, loss = decaying_loss()
    val = np.where(steps % 10 == 0, loss * 1.05, np.nan)  # validation every 10 steps
    pd.DataFrame({"step": steps, "loss": loss, "val_loss": val}).to_parquet(tmp_path / "wide.parquet")
    code, doc = analyze_json(tmp_path / "wide.parquet")
    [run] = doc["runs"]
    assert run["status"] == "ok" and run["findings"] == [] and code == 0
    assert run["points"] == 200 + 20


# -- 6. separators, names and where a run came from -------------------------------------------
def test_a_semicolon_csv_with_decimal_commas_is_read_and_said_so(tmp_path):
    steps, loss = decaying_loss()
    pd.DataFrame({"step": steps, "train loss": loss}).to_csv(tmp_path / "excel.csv", sep=";", decimal=",", index=False)
    [history], errors = read_paths([tmp_path / "excel.csv"])
    assert errors == [] and history.keys() == ["train loss"]
    np.testing.assert_allclose(history["train loss"].values, loss)  # 2,05 read as 2.05
    assert any("';' as separator and ',' as decimal mark" in n for n in history.notes)


def test_a_wide_loss_that_stops_being_logged_for_good_gets_a_note(tmp_path):
    steps, loss = decaying_loss(nan_from=120)
    pd.DataFrame({"step": steps, "loss": loss}).to_csv(tmp_path / "wide.csv", index=False)  # NaN -> blank
    [history], _ = read_paths([tmp_path / "wide.csv"])
    assert len(history["loss"]) == 120  # a wide blank stays "not logged"...
    [note] = history.notes  # ...but the run says what it may hide
    assert "'loss' is blank in every row from row 121 of 200" in note and "na_rep='nan'" in note
    steps, loss = decaying_loss()
    val = np.where(steps % 10 == 0, loss, np.nan)
    pd.DataFrame({"step": steps, "loss": loss, "val_loss": val}).to_csv(tmp_path / "sparse.csv", index=False)
    assert read_paths([tmp_path / "sparse.csv"])[0][0].notes == ()  # logged every 10 rows: no note


def test_an_unusable_semicolon_csv_names_its_separator(tmp_path):
    (tmp_path / "names.csv").write_text("step;label\n1;cat\n2;dog\n")
    _, errors = read_paths([tmp_path / "names.csv"])
    assert "this file uses ';' as separator" in errors[0]["message"]


def test_runs_are_named_by_their_folder_and_carry_their_source(tmp_path, monkeypatch):
    for folder in ("logs", "out/checkpoint-500", "exp/lightning_logs/version_3"):
        (tmp_path / folder).mkdir(parents=True)
    shutil.copy(HF_STATE, tmp_path / "logs" / "trainer_state.json")
    shutil.copy(HF_STATE, tmp_path / "out" / "checkpoint-500" / "trainer_state.json")
    shutil.copy(DATA / "lightning_metrics.csv", tmp_path / "exp" / "lightning_logs" / "version_3" / "metrics.csv")
    monkeypatch.chdir(tmp_path)
    _, doc = analyze_json("./logs/trainer_state.json", "out/checkpoint-500/trainer_state.json", "exp")
    refs = {r["run"]["name"]: r["run"] for r in doc["runs"]}
    assert set(refs) == {"logs", "out/checkpoint-500", "exp/version_3"}, refs
    assert refs["logs"]["source"] == str(Path("logs/trainer_state.json"))
    assert refs["out/checkpoint-500"]["source"] == str(Path("out/checkpoint-500/trainer_state.json"))
    assert refs["exp/version_3"]["source"] == str(Path("exp/lightning_logs/version_3/metrics.csv"))


def test_a_git_lfs_pointer_is_named_as_one_and_a_folder_with_one_keeps_its_real_logs(tmp_path, good_csv):
    # Observer-18/nlp (seen while collecting public logs) commits trainer_state.json through Git LFS: a clone
    # without `git lfs pull` holds a three-line stub, which used to read as "no numeric metric columns".
    stub = good_csv.parent / "trainer_state.json"
    stub.write_text("version https://git-lfs.github.com/spec/v1\n"
                    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 18342\n")
    result = CliRunner().invoke(main, ["analyze", str(stub)])
    assert result.exit_code != 0 and "Git LFS pointer" in result.output and "git lfs pull" in result.output, result.output
    # In a folder walk the pointer is that file's error (it may stand for a log: the user must hear it was
    # not read), never skipped like a dataset CSV; its neighbour is still read.
    histories, errors = read_paths([good_csv.parent])
    assert [h.ref.name for h in histories] == ["good"]
    assert [e["source"] for e in errors] == [str(stub)] and "git lfs pull" in errors[0]["message"], errors


def test_rows_shorter_than_the_header_are_read_with_their_trailing_fields_not_logged(tmp_path):
    # A results log (IsomorphicAlgo/Histopathologic-Cancer-Detection-Deep-Model) whose header gained summary
    # columns after the per-epoch rows were written: those rows stop two fields short, and Arrow's parser
    # refused 87 of 90 of them, leaving only the summary rows ("step column 'epoch' holds no numbers").
    path = tmp_path / "training_performance.csv"
    lines = ["version,epoch,train_loss,val_loss,best_val_loss,kaggle_auc"]
    lines += [f"V4,{e},{2.0 / e:.4f},{2.2 / e:.4f}," for e in range(1, 13)]  # 5 of 6 fields
    lines += ["V4,,,,0.1833,0.91", "V4,13,0.15,0.17,0.1833,0.91,unexpected"]  # a summary row; one row too long
    path.write_text("\n".join(lines) + "\n")
    histories, errors = read_paths([path])
    assert errors == [] and len(histories) == 1
    history = histories[0]
    assert list(history["train_loss"].steps) == list(range(1, 13)), history.notes
    assert any("12 row(s) have fewer fields than the header" in n for n in history.notes), history.notes
    assert any("1 malformed row(s) skipped" in n for n in history.notes), history.notes
