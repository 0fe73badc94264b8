"""What ``log()`` takes from a real torch loop: tensors with their graph, numpy and Python scalars.

The README's monitor example runs here verbatim, in a real (small, CPU) torch training; other
tests hold the monitor to its promises on the values people pass: no autograd graph kept alive,
host reads batched (one per check, not one per step), every value type read right or skipped
with a note, and never an exception into the loop.
"""

from __future__ import annotations

import gc
import logging
import math
import re
import weakref
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from trackerhealth.monitor import CheckResult, HealthMonitor, NonFiniteLossError, _values
from trackerhealth.monitor._callback import CallbackCore

try:
    import torch
    from torch.overrides import TorchFunctionMode
except ImportError:  # the extra_torch marker skips these tests (in CI: fails them)
    torch = None
    TorchFunctionMode = object

pytestmark = pytest.mark.extra_torch

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_monitor_example() -> str:
    text = README.read_text()
    section = text.split("## Inside training: the health monitor", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return code


def training_namespace(epochs=6, seed=0, corrupt_sample=None):
    """What the README's example leaves to the reader: a model, its data, loss and optimizer."""
    from torch_models import D, blobs

    torch.manual_seed(seed)
    x, y = blobs(seed)
    if corrupt_sample is not None:
        x[corrupt_sample, 0] = float("nan")  # a bad row, as a broken CSV gives
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y.long()), batch_size=32, shuffle=True)
    model = torch.nn.Sequential(torch.nn.Linear(D, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    return {"torch": torch, "loader": loader, "model": model, "loss_fn": torch.nn.CrossEntropyLoss(),
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), "epochs": epochs}


def test_the_readme_example_runs_verbatim_in_a_real_torch_training(capsys, caplog):
    pytest.importorskip("mlflow")  # the example names alert="mlflow"
    code = readme_monitor_example()
    assert "monitor.log({\"train/loss\": loss" in code, "the example logs the loss tensor itself"
    ns = training_namespace()
    with caplog.at_level(logging.INFO, logger="trackerhealth"):
        exec(compile(code, "README.md", "exec"), ns)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == ns["epochs"], printed  # one line per check
    assert all(line.startswith("check at step ") and "score" in line for line in printed), printed
    monitor = ns["monitor"]
    history = monitor.history()
    loss = history["train/loss"].values
    assert len(loss) == ns["step"] == ns["epochs"] * len(ns["loader"])
    assert np.isfinite(loss).all() and loss[-16:].mean() < 0.8 * loss[:16].mean(), "it really trained"
    assert len(history["grad_norm"].values) == len(loss) and history["lr"].values[0] == 0.05
    no_run = [r for r in caplog.records if "no active MLflow run" in r.getMessage()]
    assert len(no_run) == 1 and no_run[0].levelno == logging.WARNING, "said once, as a warning"
    assert monitor.skipped == {}


def test_the_readme_example_stops_a_run_whose_loss_goes_nan():
    ns = training_namespace(epochs=3, corrupt_sample=700)
    with pytest.raises(NonFiniteLossError) as info:
        exec(compile(readme_monitor_example().replace('"mlflow"', '"log"'), "README.md", "exec"), ns)
    exc = info.value
    assert exc.key == "train/loss" and not math.isfinite(exc.value)
    assert exc.step == ns["step"], "stopped at the step whose loss was not finite"
    assert exc.result is not None and [f.id for f in exc.result.new] == ["nonfinite"]


def _graph(seed=0):
    """A loss with a graph that saves a 1 MB activation; a weak reference to that activation."""
    g = torch.Generator().manual_seed(seed)
    w = torch.nn.Parameter(torch.randn(512, 512, generator=g))
    hidden = torch.randn(512, 512, generator=g) @ w
    ref = weakref.ref(hidden)
    loss = (hidden * hidden).mean()  # mul saves hidden for backward: the graph keeps it alive
    return loss, ref


def test_log_keeps_no_autograd_graph_alive():
    loss, ref = _graph()
    kept = [loss]
    del loss
    gc.collect()
    assert ref() is not None, "control: while the loss tensor is referenced, its graph (and activation) lives"
    kept.clear()

    monitor = HealthMonitor(alert=None)
    refs = []
    for step in range(50):
        loss, ref = _graph(step)
        refs.append(ref)
        monitor.log({"train/loss": loss}, step=step)
        del loss
    gc.collect()
    assert all(r() is None for r in refs), "every graph was freed although its loss was logged"
    values = monitor.history()["train/loss"].values
    assert len(values) == 50 and np.isfinite(values).all()


def test_a_view_into_a_big_tensor_does_not_pin_it():
    big = torch.randn(1000, 1000)
    held = _values.detached(big[3, 4])
    assert held.untyped_storage().nbytes() == held.element_size(), "a copy of the one value, not the 4 MB"
    assert float(held) == float(big[3, 4])


class HostReads(TorchFunctionMode):
    """Counts the tensor operations that copy values to the host (each one a device sync on a GPU)."""

    READS = {"item", "cpu", "tolist", "__float__", "numpy", "__bool__", "__int__"}

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in self.READS:
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_tensors_are_read_in_one_batch_per_check_not_at_every_step():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 4), torch.randn(256, 1)
    monitor = HealthMonitor(alert=None)
    steps, every = 3000, 500
    with HostReads() as reads:
        for step in range(steps):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
            monitor.log({"train/loss": loss, "grad_norm": gn}, step=step)
            if step % every == every - 1:
                monitor.check()
    # Per check: one read per (device, dtype) group; between checks, one per 1,024 held tensors.
    bound = steps // every + (2 * steps) // 1024 + 1
    assert reads.count <= bound, (reads.count, bound)
    assert reads.count < steps / 100, "not one host read per step"
    loss_values = monitor.history()["train/loss"].values
    assert len(loss_values) == steps and loss_values[-1] < loss_values[0]


def test_on_an_accelerator_the_nan_watch_reads_at_the_check_and_names_the_step(monkeypatch, tmp_path):
    # CPU tensors are cheap to read, so the watch reads them at once; here the CPU is treated as an
    # accelerator would be (reading costs a sync) to run the deferred path on this machine.
    monkeypatch.setattr(_values, "EAGER_DEVICES", ())
    monitor = HealthMonitor(alert=None, stop_on_nonfinite=True, save_batches=tmp_path, keep_batches=3)
    bad_step = 137
    with HostReads() as reads:
        for step in range(bad_step + 40):
            value = torch.tensor(float("nan") if step == bad_step else 1.0 / (step + 1), requires_grad=True) * 1.0
            monitor.log({"train/loss": value}, step=step, batch=[step * 10, step * 10 + 1])
    assert reads.count == 0, "no host read at any log() call"
    with pytest.raises(NonFiniteLossError) as info:
        monitor.check()
    exc = info.value
    assert exc.step == bad_step and exc.key == "train/loss" and math.isnan(exc.value)
    import json

    doc = json.loads(exc.saved.read_text())
    assert [b["step"] for b in doc["batches"]] == [bad_step - 2, bad_step - 1, bad_step], \
        "the batches up to the NaN step, not the ones logged after it"


def test_every_kind_of_value_is_read_or_skipped_with_a_note(caplog):
    monitor = HealthMonitor(alert=None)
    cases = {
        "t/float32_grad": (torch.tensor(2.5, requires_grad=True) * 1.0, 2.5),
        "t/float16": (torch.tensor(0.5, dtype=torch.float16), 0.5),
        "t/bfloat16": (torch.tensor(1.5, dtype=torch.bfloat16), 1.5),
        "t/float64": (torch.tensor(1 / 3, dtype=torch.float64), 1 / 3),
        "t/one_element": (torch.tensor([[4.0]]), 4.0),
        "t/int64": (torch.tensor(7), 7.0),
        "t/parameter": (torch.nn.Parameter(torch.tensor(-1.25)), -1.25),
        "np/float32": (np.float32(0.25), 0.25),
        "np/int64": (np.int64(3), 3.0),
        "np/0d": (np.array(6.5), 6.5),
        "np/one_element": (np.array([8.0]), 8.0),
        "py/int": (5, 5.0),
        "py/float": (0.125, 0.125),
        "py/bool": (True, 1.0),
        "py/fraction": (Fraction(1, 4), 0.25),
    }
    skipped = {
        "none": None,
        "text": "fast",
        "complex": 1 + 2j,
        "t/vector": torch.ones(3),
        "np/vector": np.ones(2),
        "t/complex": torch.tensor(1 + 1j),
        "object": object(),
    }
    with caplog.at_level(logging.WARNING, logger="trackerhealth"):
        for step in range(3):
            monitor.log({**{k: v for k, (v, _) in cases.items()}, **skipped}, step=step)
    history = monitor.history()
    for key, (_, expected) in cases.items():
        assert history[key].values.tolist() == [expected] * 3, key
    assert not any(key in history for key in skipped)
    assert set(monitor.skipped) == set(skipped) - {"none"}, "None is 'not logged', the rest get a note"
    assert "log a scalar" in monitor.skipped["t/vector"] and "not a number" in monitor.skipped["text"]
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == len(skipped) - 1, "one note per key, not one per step"


def test_a_tensor_read_that_fails_drops_those_values_and_goes_on(monkeypatch, caplog):
    def device_lost(self):
        self.tensors, self.slots = [], []
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monitor = HealthMonitor(alert=None)
    for step in range(10):
        monitor.log({"train/loss": torch.tensor(1.0 / (step + 1)), "lr": 0.1}, step=step)
    monkeypatch.setattr(_values.TensorBuffer, "read", device_lost)
    with caplog.at_level(logging.WARNING, logger="trackerhealth"):
        result = monitor.check()
    assert "10 logged tensor value(s) could not be read" in caplog.text and "illegal memory access" in caplog.text
    history = monitor.history()
    assert "train/loss" not in history, "dropped, not recorded as NaN (which would claim the loss went NaN)"
    assert history["lr"].values.tolist() == [0.1] * 10 and result.analyzed


def test_log_never_raises_into_the_loop(caplog):
    class BrokenNumber(float):
        pass

    class Unreadable:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("device lost")

    class BadReal(Fraction):
        def __float__(self):
            raise OverflowError("too big")

    monitor = HealthMonitor(alert=None)
    with caplog.at_level(logging.WARNING, logger="trackerhealth"):
        for step in range(40):  # enough loss points for the trend diagnoses to judge (30)
            monitor.log({"train/loss": 1.0 / (step + 1), "a": Unreadable(), "b": BadReal(1),
                         "c": BrokenNumber(2.0)}, step=step)
        result = monitor.check()
    assert result.healthy
    assert monitor.history()["c"].values.tolist() == [2.0] * 40, "a float subclass is a float"
    assert set(monitor.skipped) == {"a", "b"}
    assert "device lost" in monitor.skipped["a"] and "too big" in monitor.skipped["b"]


def test_a_check_result_prints_one_line_and_its_truth_value_is_healthy():
    monitor = HealthMonitor(alert=None)
    for step in range(200):
        loss = float("nan") if step >= 120 else 1.0 / (step + 1)
        monitor.log({"train/loss": torch.tensor(loss), "grad_norm": np.float32(1.0)}, step=step)
        if step % 50 == 49:
            result = monitor.check()
            if step == 49:
                assert result and result.healthy and result.status == "ok"
                assert str(result).startswith("check at step 49: ok, score ")
            if step == 149:
                raised = result
            if step == 199:
                again = result
    assert not raised, "a check that finds a critical problem is false"
    assert [f.id for f in raised.new] == ["nonfinite"]
    line = str(raised)
    assert "\n" not in line and len(line) < 200, line
    assert "critical" in line and "new: nonfinite (critical)" in line and "score" in line
    assert "\n" not in repr(raised) and len(repr(raised)) < 220
    # The bug this fixes: with nothing new, a result whose run is dead was "false" by accident of
    # `new` being empty; now it is false because the run is unhealthy, and says so.
    assert not again.new and not again and again.status == "critical"
    assert "still active: nonfinite" in str(again)
    full = raised.to_dict()
    assert full["status"] == "critical" and full["new"][0]["evidence"], "the full record stays available"
    assert isinstance(raised, CheckResult) and raised.score == full["score"]


def test_a_tracker_channel_without_a_run_says_so_once(caplog):
    pytest.importorskip("mlflow")
    monitor = HealthMonitor(alert=["mlflow"])
    with caplog.at_level(logging.INFO, logger="trackerhealth"):
        for step in range(400):
            monitor.log({"train/loss": 1.0 / (step + 1)}, step=step)
            if step % 40 == 39:
                monitor.check(force=True)
        monitor.close()
    said = [r for r in caplog.records if "no active MLflow run" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    assert "mlflow.start_run" in said[0].getMessage()


def test_framework_callbacks_pass_tensors_and_numpy_through_the_same_reading():
    core = CallbackCore(None, alert=None)
    for step in range(3):
        loss = torch.tensor(0.5, requires_grad=True) * 2.0
        core.log({"loss": loss, "grad_norm": np.float64(0.3), "epoch": 0.1 * step, "is_best": True,
                  "model_name": "mlp", "lr": torch.tensor(1e-3, dtype=torch.float64)}, step)
    history = core.monitor.history()
    assert history["loss"].values.tolist() == [1.0] * 3
    assert history["grad_norm"].values.tolist() == [0.3] * 3 and history["lr"].values.tolist() == [1e-3] * 3
    assert "is_best" not in history and "model_name" not in history, "flags and text of a log entry are left out"
    assert core.monitor.skipped == {}, "silently: they are not metrics"


def test_steps_may_be_tensors_or_numpy_and_keys_need_not_be_text(caplog):
    monitor = HealthMonitor(alert=None, stop_on_nonfinite=True)
    with caplog.at_level(logging.WARNING, logger="trackerhealth"):
        for i in range(4):
            monitor.log({"train/loss": 1.0 / (i + 1), 7: 0.5}, step=torch.tensor(10 * i))
        monitor.log({"train/loss": 0.1}, step=np.int64(50))
        monitor.log({"train/loss": 0.1}, step="later")  # not a step: counted on from the last
    history = monitor.history()
    assert history["train/loss"].steps.tolist() == [0.0, 10.0, 20.0, 30.0, 50.0, 51.0]
    assert history["7"].values.tolist() == [0.5] * 4
    assert "not a step number" in monitor.skipped["<step>"] and len(caplog.records) == 1
    with pytest.raises(TypeError, match=r"a mapping of metric names to values, e\.g\. monitor\.log\(\{'train/loss'"):
        monitor.log([("train/loss", 1.0)])


def test_a_check_whose_analysis_fails_goes_on_and_is_not_healthy(monkeypatch, caplog):
    from trackerhealth.monitor import _monitor

    monitor = HealthMonitor(alert=None)
    for step in range(200):
        monitor.log({"train/loss": 1.0 / (step + 1)}, step=step)
        if step == 99:
            assert monitor.check().analyzed

    def broken(history, config):
        raise ZeroDivisionError("a bug in a diagnosis")

    monkeypatch.setattr(_monitor, "analyze", broken)
    with caplog.at_level(logging.ERROR, logger="trackerhealth"):
        result = monitor.check()
    assert not result and not result.healthy and result.error == "ZeroDivisionError: a bug in a diagnosis"
    assert "the check failed" in str(result) and result.to_dict()["error"] == result.error
    assert any("training goes on" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()
    monitor.log({"train/loss": 0.001}, step=200)  # not 10 % more data: due only because the last one failed
    again = monitor.check()
    assert again.analyzed and again.error is None and again.healthy, "the next check tries again"
