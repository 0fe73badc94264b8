"""HFHealthCallback in real ``Trainer.train()`` runs of a tiny torch classifier on CPU."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.extra_hf


def _train(tmp_path, loss, callback, *, epochs=20, nan_filter=True, lr=0.03, hidden=0):
    import torch
    from torch_models import Classifier, DictDataset, blobs
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)  # the model's initial weights, whatever ran before in this process

    x, y = blobs(0)
    xv, yv = blobs(1, n=256)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), num_train_epochs=epochs, per_device_train_batch_size=32,
        learning_rate=lr, lr_scheduler_type="constant", logging_steps=4, eval_strategy="epoch",
        save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, seed=0, data_seed=0,
        logging_nan_inf_filter=nan_filter, dataloader_num_workers=0)
    trainer = Trainer(model=Classifier(loss, hidden), args=args, train_dataset=DictDataset(x, y),
                      eval_dataset=DictDataset(xv, yv), callbacks=[callback])
    trainer.train()
    state_file = tmp_path / "trainer_state.json"
    trainer.state.save_to_json(str(state_file))
    return trainer, state_file


def _first_nonfinite(log_history, keys):
    return next(e["step"] for e in log_history if any(k in e and not math.isfinite(e[k]) for k in keys))


def _scan(state_file):
    from trackerhealth.adapters.files import read_histories
    from trackerhealth.engine import analyze

    (history,) = read_histories(state_file)
    return {f.id for f in analyze(history).problems}


def test_hf_nan_run_is_caught_at_the_first_epoch_end_after_it(tmp_path):
    from torch_models import naive_bce

    from trackerhealth.monitor import HFHealthCallback

    callback = HFHealthCallback(alert="log", name="hf-nan")
    trainer, state_file = _train(tmp_path, naive_bce, callback, nan_filter=False)
    dead = _first_nonfinite(trainer.state.log_history, ("loss", "eval_loss", "grad_norm"))
    checks = callback.core.results
    assert len(checks) == 20, "one check per epoch"
    before = [c for c in checks if c.step < dead]
    after = [c for c in checks if c.step >= dead]
    assert len(before) >= 3 and after
    assert all(not c.active for c in before), [(c.step, [(f.id, f.message) for f in c.active]) for c in before if c.active]
    assert [f.id for f in after[0].new] == ["nonfinite"] and after[0].new[0].level == "critical"
    assert after[0].step - dead < 32, "within the epoch it happened in"
    assert callback.final.ids == ["nonfinite"] == sorted(_scan(state_file))


def test_hf_stop_on_nonfinite_stops_the_trainer(tmp_path):
    from torch_models import naive_bce

    from trackerhealth.monitor import HFHealthCallback

    callback = HFHealthCallback(alert="log", stop_on_nonfinite=True)
    trainer, _ = _train(tmp_path, naive_bce, callback, nan_filter=False)
    dead = _first_nonfinite(trainer.state.log_history, ("loss", "eval_loss"))
    assert trainer.state.global_step == dead, "stopped at the logged step where a loss went NaN"
    assert trainer.state.global_step < 20 * 32
    assert callback.stopped_by["key"] in ("loss", "eval_loss") and callback.stopped_by["step"] == dead
    assert callback.final.ids == ["nonfinite"]


def test_hf_healthy_run_with_timing_and_layer_norms(tmp_path):
    from torch_models import stable_bce

    from trackerhealth.monitor import HFHealthCallback

    callback = HFHealthCallback(alert="log", timing=True, grad_norms=True)
    trainer, state_file = _train(tmp_path, stable_bce, callback, epochs=8, lr=0.01, hidden=16)
    assert all(not c.active for c in callback.core.results)
    assert callback.final.ids == [] and callback.stopped_by is None
    entry = next(e for e in trainer.state.log_history if "loss" in e)
    layers = [k for k in entry if k.startswith("grad_norm/")]
    assert layers == ["grad_norm/net.0", "grad_norm/net.2", "grad_norm/net.4"]
    assert entry["perf/step_time"] >= entry["perf/compute_time"] > 0 and entry["perf/data_time"] >= 0
    report = callback.monitor.report
    from trackerhealth.roles import resolve

    view = resolve(callback.monitor.history())
    assert [k for _, k in view.roles.group("layer_grad_norms")] == layers
    assert view.key("data_time") == "perf/data_time" and view.key("compute_time") == "perf/compute_time"
    assert report.finding("vanishing-gradients").level == "ok"
    assert report.finding("input-bottleneck").level == "ok"
    assert _scan(state_file) == set(), "trainer_state.json holds the same extra keys; the scan agrees"
