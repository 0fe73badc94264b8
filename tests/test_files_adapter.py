"""The local-file adapter: every supported format, bad input, and the real public logs.

Small inputs are written here (or live in tests/data/files/) the way the real tools write them;
the real logs in ../shared/realworld/ are asserted against numbers read from the raw files.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trackerhealth.adapters.files import InputError, collect_histories, read_histories
from trackerhealth.engine import analyze
from trackerhealth.roles import resolve

DATA = Path(__file__).resolve().parent / "data" / "files"
REALWORLD = Path(__file__).resolve().parents[2] / "shared" / "realworld"


def one(path, **kw):
    runs = read_histories(path, **kw)
    assert len(runs) == 1, [r.ref.name for r in runs]
    return runs[0]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def assert_input_error(path, *fragments, **kw) -> InputError:
    with pytest.raises(InputError) as info:
        read_histories(path, **kw)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return info.value


# -- long tables ---------------------------------------------------------------------------------
def test_long_csv_keeps_nonfinite_values_and_converts_ms_wall_times(tmp_path):
    p = write(tmp_path / "exp" / "metrics.csv", "step,key,value,timestamp\n"
              "1,loss,2.0,1700000000000\n1,lr,0.1,1700000000000\n2,loss,nan,1700000001000\n"
              "3,loss,inf,1700000002000\n2,lr,0.2,1700000001000\n")
    h = one(p)
    assert h.ref.tracker == "file" and h.ref.project == "exp" and h.ref.name == "exp"  # a generic file stem takes its folder's name
    assert h.keys() == ["loss", "lr"]
    np.testing.assert_array_equal(h["loss"].steps, [1, 2, 3])
    assert h["loss"].values[0] == 2.0 and math.isnan(h["loss"].values[1]) and h["loss"].values[2] == math.inf
    np.testing.assert_allclose(h["lr"].wall_times, [1.7e9, 1.7e9 + 1])
    assert one(p).ref.id == h.ref.id  # stable


def test_gzip_is_recognised_by_content_not_name(tmp_path):
    text = b"global_step,metric,value,wall_time\n0,train/loss,1.5,10\n1,train/loss,1.25,11\n"
    for name in ("m.csv.gz", "m.csv"):
        (tmp_path / name).write_bytes(gzip.compress(text))
        h = one(tmp_path / name)
        assert h.ref.name == "m"
        np.testing.assert_array_equal(h["train/loss"].values, [1.5, 1.25])
        np.testing.assert_array_equal(h["train/loss"].wall_times, [10, 11])


def test_run_column_splits_runs(tmp_path):
    p = write(tmp_path / "all.csv", "run,step,tag,value\na,0,loss,1\nb,0,loss,5\na,1,loss,0.5\nb,1,loss,4\n")
    runs = read_histories(p)
    assert [r.ref.name for r in runs] == ["a", "b"]
    assert len({r.ref.id for r in runs}) == 2
    np.testing.assert_array_equal(runs[1]["loss"].values, [5, 4])


def test_long_jsonl_with_python_nan_tokens(tmp_path):
    rows = [{"step": 1, "key": "loss", "value": 1.0}, {"step": 2, "key": "loss", "value": float("nan")},
            {"step": 3, "key": "loss", "value": float("-inf")}, {"step": 1, "key": "grad_norm", "value": 3}]
    p = write(tmp_path / "log.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    h = one(p)
    v = h["loss"].values
    assert v[0] == 1.0 and math.isnan(v[1]) and v[2] == -math.inf
    assert h["grad_norm"].values.tolist() == [3.0]


def test_long_parquet_uses_dictionary_keys(tmp_path):
    n = 200_000
    keys = np.tile(np.array(["loss", "val_loss", "lr", "grad_norm"], dtype=object), n // 4)
    steps = np.repeat(np.arange(n // 4), 4)
    values = np.linspace(1, 0, n)
    values[17] = np.nan
    table = pa.table({"step": steps, "metric": keys, "value": values, "wall_time": 1.7e12 + steps * 1000.0})
    pq.write_table(table, tmp_path / "big.parquet")
    h = one(tmp_path / "big.parquet")
    assert h.keys() == ["loss", "val_loss", "lr", "grad_norm"] and h.n_points == n
    assert np.isnan(h["val_loss"].values).sum() == 1  # row 17 = step 4, key index 1
    assert h["loss"].wall_times[1] == pytest.approx(1.7e9 + 1)


# -- wide tables ---------------------------------------------------------------------------------
def test_wide_csv_blank_is_not_logged_but_nan_is(tmp_path):
    p = write(tmp_path / "w.csv", "global_step,loss,acc,phase\n0,1.0,,train\n1,,0.5,eval\n2,nan,,train\n3,abc,0.7,x\n")
    h = one(p)
    assert h.keys() == ["loss", "acc"]
    np.testing.assert_array_equal(h["loss"].steps, [0, 2])  # blank at 1 is not a value, 'abc' is ignored
    assert math.isnan(h["loss"].values[1])
    np.testing.assert_array_equal(h["acc"].steps, [1, 3])
    assert any("1 non-numeric value(s) in column 'loss' ignored" in n and "abc" in n for n in h.notes)
    assert any("non-numeric column(s) ignored: phase" in n for n in h.notes)


def test_many_strings_in_a_numeric_column_are_counted(tmp_path):
    lines = ["step,loss"] + [f"{i},{'oops' if i % 10 == 0 else i}" for i in range(1, 121)]
    h = one(write(tmp_path / "s.csv", "\n".join(lines) + "\n"))
    assert len(h["loss"]) == 108
    assert any(n.startswith("12 non-numeric values") or n.startswith("12 non-numeric value(s)") for n in h.notes)


def test_wide_without_step_column_uses_row_number_and_step_column_option(tmp_path):
    p = write(tmp_path / "keras.tsv", "loss\tval_loss\tbatch\n1.0\t1.2\t5\n0.8\t1.1\t10\n")
    h = one(p)
    np.testing.assert_array_equal(h["loss"].steps, [0, 1])
    assert any("row number is used as the step" in n and "--step-column" in n for n in h.notes)
    h = one(p, step_column="batch")
    np.testing.assert_array_equal(h["val_loss"].steps, [5, 10])
    assert "batch" not in h
    assert_input_error(p, "'nope'", "not found", "loss, val_loss, batch", step_column="nope")


def test_pandas_index_column_is_the_step_not_a_metric(tmp_path):
    """pandas' to_csv writes the index as an unnamed first column (public logs P251, P254): it numbers the
    rows; it is neither a metric nor a reason to say no step was found."""
    import pandas as pd

    frame = pd.DataFrame({"Loss": [0.9, 0.7, 0.6], "ValLoss": [1.0, 0.8, 0.75]})
    frame.to_csv(tmp_path / "history.csv")  # pandas' defaults: the index is written, headed ""
    h = one(tmp_path / "history.csv")
    assert h.keys() == ["Loss", "ValLoss"]
    np.testing.assert_array_equal(h["ValLoss"].steps, [0, 1, 2])
    assert any("pandas' index" in n for n in h.notes) and not any("row number is used" in n for n in h.notes)
    # Re-read and re-written, the same column is headed "Unnamed: 0"; beside a named step it is dropped.
    pd.read_csv(tmp_path / "history.csv").assign(epoch=[1, 2, 3]).to_csv(tmp_path / "again.csv", index=False)
    h = one(tmp_path / "again.csv")
    assert h.keys() == ["Loss", "ValLoss"]
    np.testing.assert_array_equal(h["Loss"].steps, [1, 2, 3])
    # A column headed "" that does not count 0, 1, 2 is a value, and is kept.
    h = one(write(tmp_path / "odd.csv", ",loss\n5,1.0\n3,0.5\n"))
    assert "" in h.keys()


def test_a_pandas_index_alone_does_not_make_a_folder_file_a_log(tmp_path):
    import pandas as pd

    pd.DataFrame({"feature_a": [1, 2], "feature_b": [3, 4]}).to_csv(tmp_path / "dataset.csv")
    pd.DataFrame({"step": [1, 2], "loss": [1.0, 0.5]}).to_csv(tmp_path / "train.csv")
    runs, errors = collect_histories(tmp_path)
    assert len(runs) == 1 and not errors  # dataset.csv is no log: a pandas index is no step
    assert runs[0].keys() == ["loss"]


def test_epoch_is_the_step_only_without_a_step_column(tmp_path):
    h = one(write(tmp_path / "k.csv", "epoch,loss,val_loss\n0,1.0,1.5\n1,0.5,1.4\n"))
    np.testing.assert_array_equal(h["val_loss"].steps, [0, 1])
    assert "epoch" not in h
    h = one(DATA / "lightning_metrics.csv")
    assert "epoch" in h and h.keys()[0] == "epoch"


def test_wall_clock_vs_duration_time_column(tmp_path):
    h = one(write(tmp_path / "a.csv", "step,time,loss\n1,1700000000,1\n2,1700000005,0.5\n"))
    assert "time" not in h and h["loss"].wall_times.tolist() == [1700000000, 1700000005]
    h = one(write(tmp_path / "b.csv", "step,time,loss\n1,0.41,1\n2,0.43,0.5\n"))
    assert h["time"].values.tolist() == [0.41, 0.43] and np.isnan(h["loss"].wall_times).all()


def test_wide_parquet_and_jsonl(tmp_path):
    pq.write_table(pa.table({"step": [1, 2, 3], "loss": pa.array([1.0, None, float("nan")]),
                             "lr": [0.1, 0.1, 0.2]}), tmp_path / "w.parquet")
    h = one(tmp_path / "w.parquet")
    np.testing.assert_array_equal(h["loss"].steps, [1, 3])
    assert math.isnan(h["loss"].values[-1])
    p = write(tmp_path / "w.ndjson", '{"_step": 0, "loss": 2}\n{"_step": 1, "loss": 1.5, "mode": "val"}\n'
              '{"_step": 2, "loss": NaN, "nested": {"a": 1}}\n')
    h = one(p)
    assert h.keys() == ["loss", "nested.a"] and len(h["loss"]) == 3 and math.isnan(h["loss"].values[-1])
    assert list(h["nested.a"].steps) == [2]  # a nested object is read as name.key metrics


def test_json_documents_records_and_keras_history(tmp_path):
    h = one(write(tmp_path / "records.json", json.dumps([{"iter": 1, "loss": 1.0}, {"iter": 2, "loss": 0.5}])))
    np.testing.assert_array_equal(h["loss"].steps, [1, 2])
    h = one(write(tmp_path / "history.json", json.dumps({"loss": [1.0, 0.8, 0.7], "val_loss": [1.2, 1.1]})))
    assert len(h["loss"]) == 3 and len(h["val_loss"]) == 2


def test_long_table_without_step_counts_per_key(tmp_path):
    h = one(write(tmp_path / "l.csv", "key,value\nloss,1\nacc,0.1\nloss,0.5\nacc,0.2\nloss,0.25\n"))
    np.testing.assert_array_equal(h["loss"].steps, [0, 1, 2])
    np.testing.assert_array_equal(h["acc"].steps, [0, 1])
    assert any("value count" in n for n in h.notes)


def test_tensorboard_csv_download(tmp_path):
    p = write(tmp_path / "run-train-tag-loss.csv", "Wall time,Step,Value\n1700000000.5,0,2.5\n1700000001.5,1,2.0\n")
    h = one(p)
    assert h.keys() == ["run-train-tag-loss"] and h["run-train-tag-loss"].wall_times[0] == 1700000000.5


# -- HF Trainer, Lightning, detectron2 --------------------------------------------------------------
def test_hf_trainer_state_nan_tokens_and_summary_entry():
    h = one(DATA / "hf_trainer_state.json")
    assert h.ref.name == "hf_trainer_state" and h.ref.config["max_steps"] == 30
    assert "log_history" not in h.ref.config and "stateful_callbacks" not in h.ref.config
    loss = h["loss"]
    np.testing.assert_array_equal(loss.steps, [10, 20, 30])
    assert loss.values[1] == math.inf and math.isnan(loss.values[2])
    assert math.isnan(h["grad_norm"].values[1]) and h["grad_norm"].values[2] == -math.inf
    assert h["eval_loss"].values.tolist() == [2.25] and h["train_runtime"].values.tolist() == [12.5]
    assert "remaining_time" not in h and any("remaining_time" in n for n in h.notes)
    assert h["epoch"].values.tolist() == [0.1, 0.2, 0.3]


def test_hf_log_history_without_steps_uses_position(tmp_path):
    doc = {"log_history": [{"loss": 1.0}, {"loss": 0.5}, {"loss": 0.25}], "global_step": 3}
    h = one(write(tmp_path / "trainer_state.json", json.dumps(doc)))
    np.testing.assert_array_equal(h["loss"].steps, [0, 1, 2])
    assert any("position" in n for n in h.notes)
    empty = one(write(tmp_path / "e" / "trainer_state.json", '{"log_history": []}'))
    assert len(empty) == 0 and empty.notes


def test_lightning_blank_cells_are_not_values():
    h = one(DATA / "lightning_metrics.csv")
    assert h.ref.project == "files"
    np.testing.assert_array_equal(h["val_loss"].steps, [99, 199])
    assert h["val_loss"].values[0] == 1.98 and math.isnan(h["val_loss"].values[1])
    tl = h["train_loss_step"]
    np.testing.assert_array_equal(tl.steps, [49, 99, 149, 199])
    assert math.isnan(tl.values[2]) and tl.values[3] == math.inf
    assert math.isnan(h["train_loss_epoch"].values[1])


def test_detectron2_concatenated_runs_split_where_iteration_starts_over():
    runs = read_histories(DATA / "detectron2_metrics.json")
    assert [r.ref.name for r in runs] == ["detectron2_metrics", "detectron2_metrics#2"]
    first, second = runs
    assert first["total_loss"].values.tolist() == [7.5, 7.1]
    assert math.isnan(first["bbox/APs"].values[0]) and "bbox/AP" not in second
    assert second["total_loss"].values[-1] == math.inf and second["time"].values.tolist() == [0.44, 0.42, 0.40]
    assert second.ref.id == first.ref.id + "#2"


# -- MLflow file store ---------------------------------------------------------------------------
def mlflow_run(root: Path, exp: str, run_id: str, metrics: dict[str, str], **meta) -> Path:
    run = root / exp / run_id
    fields = {"run_id": run_id, "run_uuid": run_id, "experiment_id": f"'{exp}'", "status": 3,
              "end_time": 1700000100000, "lifecycle_stage": "active", "tags": "[]", **meta}
    write(run / "meta.yaml", "".join(f"{k}: {v}\n" for k, v in fields.items()))
    for key, text in metrics.items():
        write(run / "metrics" / key, text)
    write(run / "params" / "lr", "0.001")
    write(run / "params" / "optim" / "name", "adam")
    write(run / "tags" / "mlflow.runName", "brave-fox")
    write(run / "tags" / "team", "vision")
    return run


def test_mlflow_run_folder(tmp_path):
    run = mlflow_run(tmp_path / "mlruns", "7", "abc123", {
        "train/loss": "1700000000000 1.5 0\n1700000001000 nan 1\n1700000002000 0.5 2\n",
        "lr": "1700000000000 0.1 0\n1700000001000 0.2 1\n"}, run_name="brave-fox")
    write(tmp_path / "mlruns" / "7" / "meta.yaml", "experiment_id: '7'\nname: segmentation\n")
    h = one(run)
    assert (h.ref.id, h.ref.name, h.ref.project, h.ref.state) == ("abc123", "brave-fox", "segmentation", "finished")
    assert h.ref.config == {"lr": "0.001", "optim/name": "adam"} and h.ref.tags == ("team=vision",)
    assert h.ref.updated_at == 1700000100.0
    assert h.keys() == ["lr", "train/loss"] and math.isnan(h["train/loss"].values[1])
    np.testing.assert_allclose(h["train/loss"].wall_times, [1.7e9, 1.7e9 + 1, 1.7e9 + 2])


def test_mlflow_root_with_experiments_and_old_two_field_lines(tmp_path):
    root = tmp_path / "mlruns"
    mlflow_run(root, "0", "r1", {"loss": "1 3.0\n2 2.0\n3 1.0\n"}, status="1", end_time="null")
    mlflow_run(root, "1", "r2", {"loss": "1 3.0 0\ngarbage\n2 2.0 1\n"})
    write(root / ".trash" / "r3" / "meta.yaml", "run_id: r3\n")
    write(root / "1" / "r2" / "outputs" / "m-1" / "meta.yaml", "source_id: m-1\n")
    runs = {r.ref.id: r for r in read_histories(root)}
    assert set(runs) == {"r1", "r2"}
    assert runs["r1"].ref.state == "running" and runs["r1"]["loss"].steps.tolist() == [0, 1, 2]
    assert any("without a step" in n for n in runs["r1"].notes)
    assert runs["r2"]["loss"].values.tolist() == [3.0, 2.0] and any("unreadable" in n for n in runs["r2"].notes)


# -- TensorBoard ---------------------------------------------------------------------------------
def write_events(logdir: Path, scalars: list[tuple[int, str, float]], tensor: bool = False) -> None:
    tb = pytest.importorskip("tensorboard")
    del tb
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(logdir))
    for step, tag, value in scalars:
        if tensor:
            plugin = summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
            tensor_proto = tensor_util.make_tensor_proto(np.float32(value))
            meta = summary_pb2.SummaryMetadata(plugin_data=plugin)
            v = summary_pb2.Summary.Value(tag=tag, tensor=tensor_proto, metadata=meta)
        else:
            v = summary_pb2.Summary.Value(tag=tag, simple_value=value)
        writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary_pb2.Summary(value=[v])))
    histo = summary_pb2.Summary.Value(tag="weights", histo=summary_pb2.HistogramProto(min=0, max=1, num=3))
    writer.add_event(event_pb2.Event(step=0, wall_time=1.7e9, summary=summary_pb2.Summary(value=[histo])))
    writer.close()


def test_tensorboard_scalars_simple_and_tensor(tmp_path):
    write_events(tmp_path / "run1", [(0, "loss", 2.0), (1, "loss", float("nan")), (2, "loss", float("inf"))])
    write_events(tmp_path / "run2", [(0, "epoch_loss", 1.5), (5, "epoch_loss", 0.5)], tensor=True)
    file = next((tmp_path / "run1").glob("events.out.tfevents.*"))
    h = one(file)
    assert h.ref.name == "run1" and h.keys() == ["loss"]
    assert math.isnan(h["loss"].values[1]) and h["loss"].values[2] == math.inf
    assert any("non-scalar" in n for n in h.notes)
    runs = {r.ref.name: r for r in read_histories(tmp_path)}
    assert runs["run2"]["epoch_loss"].values.tolist() == [1.5, 0.5]
    assert runs["run2"]["epoch_loss"].wall_times.tolist() == [1.7e9, 1.7e9 + 5]


def test_keras_train_and_validation_folders_are_one_run(tmp_path):
    write_events(tmp_path / "fit" / "train", [(0, "epoch_loss", 1.0), (1, "epoch_loss", 0.8)], tensor=True)
    write_events(tmp_path / "fit" / "validation", [(0, "epoch_loss", 1.1), (1, "epoch_loss", 0.9)], tensor=True)
    h = one(tmp_path)
    assert h.ref.name == "fit" and sorted(h.keys()) == ["train/epoch_loss", "validation/epoch_loss"]


def test_add_scalars_folders_are_one_run_with_their_parent(tmp_path):
    """torch's SummaryWriter.add_scalars writes <run>/<tag>_<name>/ folders, one tag each: one run's curves."""
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    writer = torch_tb.SummaryWriter(str(tmp_path / "runs" / "simple_lr"))
    for epoch in range(30):
        train = 1.0 / (epoch + 1)
        writer.add_scalars("loss", {"training": train, "validation": train + 0.01 * epoch}, epoch)
        writer.add_scalars("Accuracy/top1", {"train": 1 - train}, epoch)  # one name: still this run's
    writer.close()
    for root in (tmp_path, tmp_path / "runs" / "simple_lr"):  # the runs folder, or the run folder itself
        h = one(root)
        assert h.ref.name == "simple_lr"
        assert sorted(h.keys()) == ["Accuracy/top1/train", "loss/training", "loss/validation"]
        view = resolve(h)
        assert (view.key("train_loss"), view.key("val_loss")) == ("loss/training", "loss/validation")
    assert "overfitting" in {f.id for f in analyze(one(tmp_path)).problems}  # the val loss rises as train falls


def test_add_scalars_folders_without_their_parent_file_and_hparams_runs(tmp_path):
    # The parent's own (empty) event file lost: two folders named by their one tag still make one run.
    write_events(tmp_path / "exp" / "Loss_train", [(0, "Loss", 2.0), (1, "Loss", 1.0)])
    write_events(tmp_path / "exp" / "Loss_val", [(0, "Loss", 2.1), (1, "Loss", 1.2)])
    # An HParams search: the root's file and one folder per run, each with its own tags, stay runs of their own;
    # so does a lone folder whose tag happens to name it, with no parent run.
    write_events(tmp_path / "hp", [(0, "hparams_summary", 0.0)])
    write_events(tmp_path / "hp" / "run_0", [(0, "loss", 1.0), (0, "accuracy", 0.5)])
    write_events(tmp_path / "solo" / "loss_a", [(0, "loss", 1.0)])
    runs = {r.ref.name: r for r in read_histories(tmp_path)}
    assert sorted(runs) == ["exp", "hp", "loss_a", "run_0"]
    assert sorted(runs["exp"].keys()) == ["Loss/train", "Loss/val"]
    assert runs["exp"]["Loss/val"].values.tolist() == pytest.approx([2.1, 1.2])
    assert sorted(runs["run_0"].keys()) == ["accuracy", "loss"] and runs["hp"].keys() == ["hparams_summary"]


def test_a_headerless_numeric_file_is_data_named_after_the_file(tmp_path):
    losses = np.array([2.3, 1.7, 1.2, 0.9, 0.7])
    np.savetxt(tmp_path / "loss.txt", losses)  # numpy writes no header: the first line is the first loss
    h = one(tmp_path / "loss.txt")
    assert h.keys() == ["loss"] and h["loss"].values.tolist() == pytest.approx(losses.tolist())
    assert any("no header row" in n for n in h.notes)
    assert resolve(h).key("train_loss") == "loss"
    import pandas as pd

    pd.DataFrame(losses).to_csv(tmp_path / "frame.csv", index=False)  # pandas names the column "0": a header
    assert one(tmp_path / "frame.csv")["0"].values.tolist() == pytest.approx(losses.tolist())
    np.savetxt(tmp_path / "curves.csv", np.c_[losses, losses + 0.1], delimiter=",")
    h = one(tmp_path / "curves.csv")
    assert h.keys() == ["column_1", "column_2"] and len(h["column_1"]) == 5
    assert any("add a header row" in n for n in h.notes)


def test_a_json_list_of_numbers_is_one_metric_named_after_the_file(tmp_path):
    (tmp_path / "train_losses.json").write_text(json.dumps([2.3, 1.7, None, 0.9]))
    h = one(tmp_path / "train_losses.json")
    assert h.keys() == ["train_losses"] and h["train_losses"].steps.tolist() == [0, 1, 2, 3]
    assert math.isnan(h["train_losses"].values[2])  # every entry was logged: a null is a NaN strict JSON could not write
    # A Python list printed into a .txt (str(losses), public log P536) reads the same way.
    (tmp_path / "train.txt").write_text(str([7.58, 6.23, 5.569]))
    assert one(tmp_path / "train.txt")["train"].values.tolist() == [7.58, 6.23, 5.569]
    (tmp_path / "mixed.json").write_text(json.dumps([1.0, "x"]))
    assert_input_error(tmp_path / "mixed.json", "a list of numbers")


DVCLIVE = Path(__file__).resolve().parent / "data" / "dvclive" / "overfit"  # written by the real DVCLive: record.py there


def test_a_dvclive_folder_is_one_run_with_its_params(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(DVCLIVE, project / "dvclive")
    write(project / "dvc.yaml", "metrics:\n- dvclive/metrics.json\n")
    write(project / "data" / "features.csv", "a,b\n1,2\n")  # the project's data: not a log
    for root in (project, project / "dvclive"):
        h = one(root)
        assert h.ref.name == "dvclive" and h.ref.project == "project"
        assert sorted(h.keys()) == ["eval/acc", "eval/loss", "train/loss"]
        assert h.ref.config["lr"] == 0.003 and h.ref.config["optimizer"] == "adam"
        assert len(h["train/loss"]) == 60 and h["eval/loss"].steps.tolist() == list(range(60))
    view = resolve(one(project))
    assert (view.key("train_loss"), view.key("val_loss")) == ("train/loss", "eval/loss")
    found = {f.id: f for f in analyze(one(project)).problems}
    assert "overfitting" in found  # the eval loss climbs from epoch 5 while the train loss falls to ~0


def test_dvclive_2_timestamps_nan_and_a_damaged_metric(tmp_path):
    metrics = tmp_path / "dvclive" / "plots" / "metrics"
    write(metrics / "loss.tsv", "timestamp\tstep\tloss\n1700000000000\t0\t2.0\n1700000060000\t1\tnan\n")
    write(metrics / "val" / "loss.tsv", "timestamp\tstep\tval/loss\n1700000000000\t0\t2.1\n")  # whole name: not val/val/loss
    write(metrics / "lr.tsv", "")
    h = one(tmp_path)
    assert sorted(h.keys()) == ["loss", "val/loss"]
    assert h["loss"].wall_times.tolist() == [1.7e9, 1.7e9 + 60] and math.isnan(h["loss"].values[1])
    assert any(n.startswith("lr.tsv: not read") for n in h.notes)
    write(metrics / "loss.tsv", "")
    write(metrics / "val" / "loss.tsv", "")
    assert_input_error(tmp_path, "DVCLive folder", "hold no metric history")


def test_tensorboard_missing_says_what_to_install(tmp_path, monkeypatch):
    write_events(tmp_path, [(0, "loss", 1.0)])
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    assert_input_error(next(tmp_path.glob("events*")), "pip install 'trackerhealth[tensorboard]'")


# -- folders ---------------------------------------------------------------------------------------
def test_folder_reads_every_supported_file_and_ignores_the_rest(tmp_path):
    shutil.copy(DATA / "hf_trainer_state.json", tmp_path / "trainer_state.json")
    write(tmp_path / "sub" / "long.csv", "step,key,value\n1,loss,1\n")
    write(tmp_path / "sub" / "dataset.csv", "feature_a,feature_b\n1,2\n")  # not a log: no step column
    write(tmp_path / "config.json", '{"hidden": 128}')
    write(tmp_path / "manifest.json", json.dumps([{"name": "a", "seed": 1}, {"name": "b", "seed": 2}]))
    write(tmp_path / "empty.csv", "")
    write(tmp_path / "notes.txt", "hello")
    write(tmp_path / ".hidden" / "x.csv", "step,loss\n1,1\n")
    (tmp_path / "wandb" / "run-1").mkdir(parents=True)
    (tmp_path / "wandb" / "run-1" / "run-1.wandb").write_bytes(b"\x00\x01")
    runs, errors = collect_histories(tmp_path)
    assert sorted(r.ref.name for r in runs) == sorted(["long", tmp_path.name])  # trainer_state.json: its folder
    # A damaged W&B log is an error of its own, not a reason to drop the other runs.
    assert [str(e) for e in errors] == [
        f"{tmp_path / 'wandb' / 'run-1' / 'run-1.wandb'}: not a W&B transaction log (too short for its 7-byte header)"]


def test_the_sample_folder_reads_as_four_runs():
    runs = read_histories(DATA)
    assert sorted(r.ref.name for r in runs) == ["detectron2_metrics", "detectron2_metrics#2", "hf_trainer_state",
                                                 "lightning_metrics"]


def test_hf_checkpoints_are_read_once(tmp_path):
    for n in (10, 20, 30):
        shutil.copy(DATA / "hf_trainer_state.json", write(tmp_path / f"checkpoint-{n}" / "x", ""))
        (tmp_path / f"checkpoint-{n}" / "x").rename(tmp_path / f"checkpoint-{n}" / "trainer_state.json")
    assert [r.ref.project for r in read_histories(tmp_path)] == ["checkpoint-30"]


def test_folder_with_nothing_supported(tmp_path):
    write(tmp_path / "readme.md", "nothing")
    write(tmp_path / "data.csv", "a,b\nx,y\n")
    assert_input_error(tmp_path, "no supported metrics files found", "trainer_state.json", "TensorBoard", "MLflow")
    (tmp_path / "wandb" / "run-x").mkdir(parents=True)
    (tmp_path / "wandb" / "run-x" / "run-x.wandb").write_bytes(b"")
    assert_input_error(tmp_path, "run-x.wandb", "has not written its log header yet")


def test_collect_keeps_good_runs_and_reports_broken_files(tmp_path):
    write(tmp_path / "good.csv", "step,loss\n1,1.0\n")
    write(tmp_path / "trainer_state.json", '{"log_history": [{"loss": 1.0, "step": 1}')
    runs, errors = collect_histories(tmp_path)
    assert [r.ref.name for r in runs] == ["good"] and len(errors) == 1
    assert "trainer_state.json" in str(errors[0]) and "truncated" in str(errors[0])
    assert_input_error(tmp_path, "truncated")


# -- bad input -------------------------------------------------------------------------------------
def _flipped(data: bytes) -> bytes:
    return data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) + data[len(data) // 2 + 1:]


@pytest.mark.parametrize("name, content, fragments", [
    ("empty.csv", b"", ("empty",)),
    ("blank.jsonl", b"\n\n  \n", ("empty",)),
    ("trainer_state.json", b'{"log_history": [{"loss": 1.0, "step": 1}, {"lo', ("not valid JSON", "truncated")),
    ("text.csv", b"name,comment\nfoo,bar\nbaz,qux\n", ("no numeric metric columns", "step,key,value",
                                                        "--step-column")),
    ("values.csv", b"step,key,value\n1,loss,abc\n", ("holds no numbers",)),
    ("blob.bin", bytes(range(256)) * 4, ("binary",)),
    # (a gzip file cut short is read up to the cut, with a note: tests/test_files_hostile.py)
    ("corrupt.csv.gz", _flipped(gzip.compress(b"step,loss\n" + "".join(f"{i},{i ** 0.5}\n" for i in range(5000)).encode(),
                                              mtime=0)), ("gzip", "corrupt")),
    ("cut.parquet", b"PAR1" + b"\x00" * 50, ("Parquet",)),
    ("config.json", b'{"hidden_size": 128, "layers": 2}', ("not a metrics log",)),
    ("events.out.tfevents.1.host", b"not an event file at all", ("TensorBoard",)),
], ids=lambda x: x if isinstance(x, str) else None)
def test_bad_input_is_an_input_error_that_says_why(tmp_path, name, content, fragments):
    if "tfevents" in name:
        pytest.importorskip("tensorboard")
    (tmp_path / name).write_bytes(content)
    err = assert_input_error(tmp_path / name, name, *fragments)
    assert isinstance(err, ValueError)


def test_missing_path(tmp_path):
    assert_input_error(tmp_path / "nope.csv", "no such file")


def test_header_only_is_an_empty_history_with_a_note(tmp_path):
    h = one(write(tmp_path / "h.csv", "step,loss,val_loss\n"))
    assert len(h) == 0 and "header but no rows" in h.notes[0]


def test_duplicate_unsorted_and_restarted_steps(tmp_path):
    h = one(write(tmp_path / "d.csv", "step,loss\n3,0.3\n1,0.9\n2,0.5\n2,0.4\n"))
    np.testing.assert_array_equal(h["loss"].steps, [1, 2, 3])
    assert h["loss"].values.tolist() == [0.9, 0.4, 0.3]  # the last value logged for step 2 wins
    rows = "".join(f"{s},{v}\n" for s, v in [(0, 1.0), (1, 0.9), (2, 0.8), (0, 0.7), (1, 0.6), (2, 0.5)])
    h = one(write(tmp_path / "r.csv", "step,loss\n" + rows))
    assert len(h["loss"]) == 6 and h["loss"].values.tolist() == [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]
    assert any("restarted" in n for n in h.notes)


def test_single_point_malformed_rows_truncated_jsonl_and_latin1(tmp_path):
    assert one(write(tmp_path / "one.csv", "step,loss\n5,1.0\n"))["loss"].steps.tolist() == [5]
    h = one(write(tmp_path / "ragged.csv", "step,loss,acc\n1,1.0,0.1\n2,0.9\n3,0.8,0.3\n4,0.7,0.4,extra\n"))
    # A row short of the header lacks only trailing fields (read, acc not logged); one too long is skipped.
    assert h["loss"].steps.tolist() == [1, 2, 3] and h["acc"].steps.tolist() == [1, 3]
    assert any("malformed row" in n for n in h.notes) and any("fewer fields than the header" in n for n in h.notes)
    h = one(write(tmp_path / "cut.jsonl", '{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 0.5}\n{"step": 3, "lo'))
    assert h["loss"].steps.tolist() == [1, 2] and any("unreadable line" in n for n in h.notes)
    (tmp_path / "latin.csv").write_bytes("step,pérte\n1,0.5\n".encode("latin-1"))
    h = one(tmp_path / "latin.csv")
    assert h.keys() == ["pérte"] and any("Latin-1" in n for n in h.notes)
    h = one(write(tmp_path / "nostep.csv", "step,loss\n1,1.0\n,0.5\nx,0.4\n2,0.3\n"))
    assert h["loss"].steps.tolist() == [1, 2] and any("2 row(s) without a usable value" in n for n in h.notes)


# -- real public logs (../shared/realworld) ----------------------------------------------------------
needs_realworld = pytest.mark.skipif(not REALWORLD.is_dir(), reason="../shared/realworld not present")


def _real(rel: str) -> Path:
    return REALWORLD / rel


@needs_realworld
def test_realworld_every_entry_parses():
    # The set shared/realworld/README.md lists; `more/` holds logs collected later for the public-log
    # evaluation (evidence/public), asserted there.
    runs, errors = [], []
    for folder in sorted(p for p in REALWORLD.iterdir() if p.is_dir() and p.name != "more"):
        found, failed = collect_histories(folder)
        runs.extend(found)
        errors.extend(failed)
    try:
        import tensorboard  # noqa: F401
    except ImportError:  # without the extra, the one event file is an error that names the fix
        assert [("tfevents" in str(e.path), "trackerhealth[tensorboard]" in str(e)) for e in errors] == [(True, True)]
        runs.append(None)
    else:
        assert not errors
    # 1 Lightning + 3 detectron2 + 4 HF + 6 MLflow + 1 TensorBoard + 4 W&B
    assert len(runs) == 19
    assert sorted(r.ref.id for r in runs if r is not None and r.ref.tracker == "wandb") == [
        "33ty6yge", "txfvknmi", "ugaeu18w", "xinacahi"]
    runs = [r for r in runs if r is not None]
    assert all(r.n_points > 0 for r in runs)
    # Every run says which file or folder it was read from (W&B folders too, read by their adapter).
    assert all(r.ref.source and Path(r.ref.source).exists() for r in runs)
    assert all(Path(r.ref.source).is_relative_to(REALWORLD) for r in runs)


@needs_realworld
def test_realworld_lightning_metrics_csv():
    h = one(_real("0Xero7__slm_training/lightning_logs/version_0/metrics.csv"))
    assert len(h) == 10 and h.ref.project == "version_0"
    assert len(h["val_loss"]) == 10 and h["val_loss"].steps[-1] == 140739
    assert len(h["train_loss_step"]) == 2814 and h["val_loss"].values[-1] == pytest.approx(3.570486, rel=1e-6)


@needs_realworld
def test_realworld_detectron2_three_runs():
    runs = read_histories(_real("BUAAZhangHaonan__mgm_mask2former/output/metrics.json"))
    assert [r.ref.name for r in runs] == ["BUAAZhangHaonan__mgm_mask2former", "BUAAZhangHaonan__mgm_mask2former#2", "BUAAZhangHaonan__mgm_mask2former#3"]
    assert [len(r["total_loss"]) for r in runs] == [100, 25, 200]
    assert [r["total_loss"].steps[-1] for r in runs] == [1999, 492, 3999]
    assert [int(np.isnan(r["bbox/APs"].values).sum()) if "bbox/APs" in r else 0 for r in runs] == [1, 0, 1]
    assert "time" in runs[0] and np.isnan(runs[0]["time"].wall_times).all()  # seconds/iteration, not a clock


@needs_realworld
def test_realworld_hf_trainer_states():
    kg = one(_real("ChenguangYang96UCR__KG-LLM/outputs/trainer_state.json"))
    assert len(kg["loss"]) == 120 and int(np.isnan(kg["grad_norm"].values).sum()) == 3  # 3 bare NaN tokens
    assert kg["train_runtime"].values.tolist() == [2304.296] and kg.ref.config["max_steps"] == 120
    star = one(_real("HangerYang__Star/trainer_state.json"))
    assert len(star) == 18 and len(star["loss"]) == 2000 and star["loss"].steps[-1] == 40000
    assert all(np.isfinite(star[k].values).all() for k in star.keys())  # no NaN in this one
    assert any("remaining_time" in n for n in star.notes)
    viettel = one(_real("TheUn4given123jkbkjs__Viettel_Race_2026/trainer_state.json"))
    assert viettel.keys() == ["epoch", "grad_norm", "learning_rate", "loss"] and viettel.n_points == 4 * 1028
    dllm = one(_real("ijinyu1113__Learned-Remasking-Policy-for-dLLM/pretrained_checkpoints/checkpoint-2000"))
    assert len(dllm) == 24 and len(dllm["loss"]) == 2000 and len(dllm["reward"]) == 1000


@needs_realworld
def test_realworld_mlflow_runs():
    seg = one(_real("GhadeerElmkaiel__SegFormer/mlruns/2/f67368c47c034f66a565105fb0eb7697"))
    assert seg.ref.id == "f67368c47c034f66a565105fb0eb7697" and seg.ref.state == "finished"
    assert len(seg["train/loss"]) == 15960 and seg["train/loss"].steps[[0, -1]].tolist() == [10, 159990]
    assert len(seg["learning_rate"]) == 16000 and seg["train/loss"].wall_times[0] == pytest.approx(1633449182.5, abs=5)
    brain = one(_real("Chizuchizu__brain2/src/mlruns/4"))
    assert len(brain["training-rmse"]) == 1001 and brain.ref.config["learning_rate"] == "0.05"
    assert brain.ref.name == (_real("Chizuchizu__brain2/src/mlruns/4/01a70b4f795c42f89d78105c3d170528/tags/"
                                    "mlflow.runName").read_text())
    har = {r.ref.name: r for r in read_histories(_real("Mehmet1700__mlp-har-activity/logs/mlruns"))}
    assert set(har) == {"indecisive-midge-171", "luxuriant-kite-744", "Trial_248", "clean-shad-302"}
    # Steps restart at 0 inside these runs (one segment per Optuna trial): re-based, nothing lost.
    clean = har["clean-shad-302"]
    assert len(clean["train_loss"]) == 1060 and clean["train_loss"].steps[-1] == 1059
    assert any(n.startswith("train_loss: step counter restarted 16 time(s)") for n in clean.notes)
    assert len(har["indecisive-midge-171"]["epoch_val_loss"]) == 2490
    assert har["luxuriant-kite-744"].ref.state == "running" and len(har["luxuriant-kite-744"]["val_f1"]) == 1110
    trial = har["Trial_248"]
    assert trial.ref.config["batch_size"] == "32" and "trial_group=Optuna_Loop_2025-06-26_16-27" in trial.ref.tags
    assert len(trial["train_loss"]) == 101  # 100 epochs, then a re-logged step 0 (duplicates collapse)


@needs_realworld
def test_realworld_tensorboard_gan():
    pytest.importorskip("tensorboard")
    h = one(_real("BozzoloLu__GAN/logs/GAN/20221120-124645"))
    assert h.ref.name == "20221120-124645" and h.ref.project == "GAN"
    assert sorted(h.keys()) == ["Discriminator loss", "Generator loss"]
    assert len(h["Generator loss"]) == 810 and h["Generator loss"].steps[-1] == 809  # 3 x steps 0..269
    assert h["Generator loss"].wall_times[0] == pytest.approx(1668944811.8, abs=1)


def test_nested_json_lines_are_read_as_name_dot_key_metrics(tmp_path):
    # A hand-written per-epoch log: {"train": {"loss": ...}, "val": {"loss": ...}}. Its losses must be
    # found (a run whose losses were dropped would read as one with no loss at all), through Arrow's
    # reader and through the line-by-line one that a mixed-type line sends the file to.
    lines = [{"epoch": e, "train": {"loss": 2.0 / (e + 1)}, "val": {"loss": 2.2 / (e + 1), "top1": e}} for e in range(6)]
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    mixed = tmp_path / "mixed.jsonl"
    lines[3]["val"]["top1"] = "n/a"
    del lines[4]["val"]
    mixed.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    for path in (clean, mixed):
        (h,) = read_histories(path)
        assert {"train.loss", "val.loss", "val.top1"} <= set(h.keys()), path.name
        assert any("nested object(s) read as <name>.<key> columns: train, val" in n for n in h.notes), h.notes
        assert analyze(h).findings and resolve(h).key("train_loss") == "train.loss"
        assert resolve(h).key("val_loss") == "val.loss"
    (h,) = read_histories(mixed)
    assert list(h["val.loss"].steps) == [0, 1, 2, 3, 5]  # the line without "val" logged no val loss: absent, not NaN


def test_an_epoch_column_with_a_row_per_batch_keeps_every_row(tmp_path):
    # Public log P45: `Epoch,Batch,Gen Loss,Disc Loss`, 21 rows per epoch. Read as re-logged steps, each
    # epoch kept its last batch: 20 of 420 rows, silently.
    rows = ["Epoch,Batch,Gen Loss,Disc Loss"] + [f"{e},{b},{1 + e + b / 100:.4f},0.5" for e in range(4) for b in range(3)]
    h = one(write(tmp_path / "training_log.csv", "\n".join(rows) + "\n"))
    gen = h["Gen Loss"]
    assert len(gen) == 12 and gen.values.tolist() == [1 + e + b / 100 for e in range(4) for b in range(3)]
    assert gen.steps.tolist() == pytest.approx([e + b / 3 for e in range(4) for b in range(3)])
    assert any("each epoch's rows are spread evenly" in n for n in h.notes)
    # One row per epoch (Keras' CSVLogger) is left as it is, without a note.
    keras = one(write(tmp_path / "keras.csv", "epoch,loss,val_loss\n0,2.0,2.1\n1,1.5,1.7\n2,1.2,1.5\n"))
    assert keras["loss"].steps.tolist() == [0, 1, 2] and not any("spread" in n for n in keras.notes)


def test_trainings_appended_to_one_keras_csv_are_read_as_separate_runs(tmp_path):
    # Public logs P166 and P167 (batch 13): Keras' CSVLogger(append=True) writes every new training under the
    # last one, its epoch counting from 0 again: 19 and 4 trainings in one file. Read as one run, each epoch's
    # rows from different trainings were spread over one timeline, and every restart looked like the loss
    # jumping back to its start.
    first = [f"{e},{2.0 - 0.1 * e:.2f},{2.1 - 0.1 * e:.2f}" for e in range(5)]
    second = [f"{e},{1.0 - 0.1 * e:.2f},{1.2 - 0.1 * e:.2f}" for e in range(3)]
    path = write(tmp_path / "training_log.csv", "\n".join(["epoch,loss,val_loss", *first, *second]) + "\n")
    runs = read_histories(path)
    assert len(runs) == 2 and runs[0].ref.id != runs[1].ref.id
    assert runs[0]["loss"].steps.tolist() == [0, 1, 2, 3, 4] and runs[0]["loss"].values.tolist() == pytest.approx([2.0, 1.9, 1.8, 1.7, 1.6])
    assert runs[1]["loss"].steps.tolist() == [0, 1, 2] and runs[1]["val_loss"].values.tolist() == pytest.approx([1.2, 1.1, 1.0])
    assert any("starts over 1 time(s): read as 2 runs" in n for n in runs[0].notes)
    # A training resumed from a later epoch (5 after 9) is the same run: its counter does not fall back to its start.
    resumed = [f"{e},{2.0 - 0.05 * e:.3f}" for e in [*range(10), *range(5, 12)]]
    assert len(read_histories(write(tmp_path / "resumed.csv", "\n".join(["epoch,loss", *resumed]) + "\n"))) == 1
