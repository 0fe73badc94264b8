"""Runs trained by the frameworks' own trainers, logging the way those trainers do.

- :func:`hf_trainer_run`: ``transformers.Trainer`` with ``report_to=[]``; its ``TrainerState`` is saved
  with ``state.save_to_json`` as ``runs/<name>/trainer_state.json`` (the file HF writes into every
  checkpoint), plus the training arguments as ``training_args.json``.
- :func:`lightning_run`: ``lightning.Trainer`` with a ``CSVLogger`` and ``LearningRateMonitor``:
  ``runs/<name>/lightning_logs/version_0/metrics.csv`` and ``hparams.yaml``.

Both return ``(relative path, Logged)``, the tap read back from what the trainer wrote.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from .sinks import Logged


class _HFModule(torch.nn.Module):
    """Adapts ``model(x) -> output`` and ``loss_fn(output, y)`` to HF's ``forward(**batch) -> {"loss"}``."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, x, labels=None):
        out = self.model(x)
        return {"loss": self.loss_fn(out, labels), "logits": out}


class _Pairs(torch.utils.data.Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": self.y[i]}


def hf_trainer_run(root: Path, name: str, model: torch.nn.Module, loss_fn: Callable, train: tuple, val: tuple,
                   args: Mapping[str, Any], seed: int) -> tuple[str, Logged]:
    """Train with ``transformers.Trainer``; ``args`` are ``TrainingArguments`` fields (learning_rate,
    per_device_train_batch_size, num_train_epochs or max_steps, logging_steps, eval_steps, ...)."""
    from transformers import Trainer, TrainingArguments

    folder = root / "runs" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        targs = TrainingArguments(output_dir=scratch, report_to=[], save_strategy="no", eval_strategy="steps",
                                  disable_tqdm=True, use_cpu=True, dataloader_num_workers=0, seed=seed,
                                  data_seed=seed, **dict(args))
        trainer = Trainer(model=_HFModule(model, loss_fn), args=targs, train_dataset=_Pairs(*train), eval_dataset=_Pairs(*val))
        trainer.train()
        trainer.state.save_to_json(str(folder / "trainer_state.json"))
        (folder / "training_args.json").write_text(targs.to_json_string())
    logged = Logged()
    for entry in trainer.state.log_history:
        for key, value in entry.items():
            if key not in ("step", "epoch") and isinstance(value, (int, float)):
                logged.add(key, entry["step"], float(value))
    return str((folder / "trainer_state.json").relative_to(root)), logged


def lightning_module(model: torch.nn.Module, loss_fn: Callable, make_optimizer: Callable, hparams: Mapping[str, Any],
                     make_scheduler: Callable | None = None):
    """A LightningModule that logs ``train_loss`` per step and epoch, ``val_loss`` per epoch and the total ``grad_norm``."""
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model
            self.save_hyperparameters(dict(hparams))

        def training_step(self, batch, _):
            x, y = batch
            loss = loss_fn(self.model(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=True, prog_bar=False)
            return loss

        def on_before_optimizer_step(self, optimizer):
            norms = [p.grad.detach().norm() for p in self.parameters() if p.grad is not None]
            if norms:
                self.log("grad_norm", torch.linalg.vector_norm(torch.stack(norms)), on_step=True, on_epoch=False)

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_loss", loss_fn(self.model(x), y), on_step=False, on_epoch=True)

        def configure_optimizers(self):
            opt = make_optimizer(self.parameters())
            if make_scheduler is None:
                return opt
            return {"optimizer": opt, "lr_scheduler": {"scheduler": make_scheduler(opt), "interval": "step"}}

    return Module()


def lightning_run(root: Path, name: str, module, train_loader, val_loader, trainer_args: Mapping[str, Any]) -> tuple[str, Logged]:
    """Train with ``lightning.Trainer`` and a ``CSVLogger``; ``trainer_args`` e.g. max_epochs, log_every_n_steps."""
    import lightning as L
    from lightning.pytorch.callbacks import LearningRateMonitor
    from lightning.pytorch.loggers import CSVLogger

    folder = root / "runs" / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    logger = CSVLogger(save_dir=str(folder), name="lightning_logs", version=0)
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=logger, callbacks=[LearningRateMonitor("step")],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, **dict(trainer_args))
    trainer.fit(module, train_loader, val_loader)
    metrics = folder / "lightning_logs" / "version_0" / "metrics.csv"
    import pandas as pd

    frame = pd.read_csv(metrics)
    logged = Logged()
    # Lightning leaves a cell blank where a key was not logged on that line, and pandas reads a blank
    # and a logged NaN alike; the tap skips both (runs that go NaN take their truth from their own tap).
    for key in frame.columns:
        if key in ("step", "epoch"):
            continue
        for step, value in zip(frame["step"], frame[key]):
            if not pd.isna(value):
                logged.add(key, float(step), float(value))
    return str(metrics.relative_to(root)), logged


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, default=float))
