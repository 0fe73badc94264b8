"""LightningHealthCallback in real ``Trainer.fit()`` runs of a tiny torch classifier on CPU."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.extra_lightning


def _module(loss_name: str, lr: float, hidden: int):
    import lightning.pytorch as L
    import torch
    import torch_models

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.model = torch_models.Classifier(getattr(torch_models, loss_name), hidden)

        def training_step(self, batch, batch_idx):
            loss = self.model(batch["x"], batch["labels"])["loss"]
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", self.model(batch["x"], batch["labels"])["loss"], on_epoch=True)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=lr)

    return Module()


def _fit(tmp_path, callback, *, loss="naive_bce", lr=0.05, hidden=0, epochs=20):
    import lightning.pytorch as L
    import torch
    from lightning.pytorch.loggers import CSVLogger
    from torch_models import DictDataset, blobs

    x, y = blobs(0)
    xv, yv = blobs(1, n=256)
    g = torch.Generator().manual_seed(0)
    train = torch.utils.data.DataLoader(DictDataset(x, y), batch_size=32, shuffle=True, generator=g)
    val = torch.utils.data.DataLoader(DictDataset(xv, yv), batch_size=256)
    logger = CSVLogger(str(tmp_path), name="run")
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=logger, log_every_n_steps=4,
                        callbacks=[callback], enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, deterministic=True)
    trainer.fit(_module(loss, lr, hidden), train, val)
    return trainer, tmp_path / "run" / "version_0" / "metrics.csv"


def _scan(metrics_csv):
    from trackerhealth.adapters.files import read_histories
    from trackerhealth.engine import analyze

    (history,) = read_histories(metrics_csv)
    return history, {f.id for f in analyze(history).problems}


def test_lightning_nan_run_is_caught_and_stopped(tmp_path):
    from trackerhealth.monitor import LightningHealthCallback

    callback = LightningHealthCallback(alert="log", stop_on_nonfinite=True, save_batches=tmp_path / "bad")
    trainer, metrics_csv = _fit(tmp_path, callback)
    history, scanned = _scan(metrics_csv)
    loss = history["train_loss_step"]
    dead = float(loss.steps[~(abs(loss.values) < math.inf)][0])
    assert trainer.should_stop and trainer.current_epoch < 19, "stopped early"
    assert callback.stopped_by["key"] == "train_loss_step" and callback.stopped_by["step"] == dead
    assert all(not c.active for c in callback.core.results if c.step < dead)
    assert callback.final.ids == ["nonfinite"] and scanned == {"nonfinite"}
    saved = callback.stopped_by["saved"]
    assert saved is not None and '"indices"' in saved.read_text(), "the batch's sample indices were saved"


def test_lightning_healthy_run_with_timing_and_layer_norms_agrees_with_metrics_csv(tmp_path):
    from trackerhealth.monitor import LightningHealthCallback

    callback = LightningHealthCallback(alert="log", timing=True, grad_norms=True)
    trainer, metrics_csv = _fit(tmp_path, callback, loss="stable_bce", lr=0.01, hidden=16, epochs=8)
    history, scanned = _scan(metrics_csv)
    assert len(callback.core.results) == 8 and all(not c.active for c in callback.core.results)
    assert callback.final.ids == [] and scanned == set()
    # The monitor saw exactly what Lightning's CSVLogger wrote, including what the callback logged.
    monitored = callback.monitor.history()
    keys = history.keys()
    assert set(monitored.keys()) == set(keys)
    for key in keys:
        assert list(monitored[key].steps) == list(history[key].steps), key
    assert {"grad_norm/model.net.0", "grad_norm/model.net.2", "grad_norm/model.net.4",
            "perf/data_time", "perf/compute_time", "perf/step_time"} <= set(history.keys())
    assert callback.monitor.report.finding("vanishing-gradients").level == "ok"
    assert callback._logger not in trainer.loggers, "the callback's logger is removed after fit"
