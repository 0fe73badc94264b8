"""Lightning callback: the monitor on what the ``Trainer`` already logs.

```python
from trackerhealth.monitor import LightningHealthCallback

trainer = L.Trainer(max_epochs=20, callbacks=[LightningHealthCallback(alert=["mlflow", "log"])])
trainer.fit(model, datamodule)
```

At ``on_fit_start`` the callback adds a small logger of its own to ``trainer.loggers``, so the
monitor receives exactly what your loggers receive (``self.log`` values at each
``log_every_n_steps``, epoch aggregates, ``epoch``) — the rows of Lightning's ``metrics.csv``. It
checks at each training epoch end (or every ``check_every`` steps) and makes the final check at
``on_fit_end``. ``timing=True`` logs ``perf/data_time``, ``perf/compute_time`` and
``perf/step_time`` (means since the last logged step); ``grad_norms=True`` logs
``grad_norm/<layer>`` on logged steps. Both go through ``pl_module.log``, so every logger (and a
later scan) sees them. ``stop_on_nonfinite=True`` and ``fail_on`` set ``trainer.should_stop``.

Uses ``lightning`` (``lightning.pytorch``) when installed, else ``pytorch_lightning``.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._callback import CallbackCore, CoreResults, require
from ._timing import layer_grad_norms

try:
    _pl = importlib.import_module("lightning.pytorch")
except ImportError:
    _pl = require("pytorch_lightning", "lightning", "lightning")

_INDEX_KEYS = ("index", "indices", "idx", "sample_id", "sample_ids", "id", "ids")


class _MonitorLogger(_pl.loggers.Logger):
    """Forwards what Lightning logs to the callback (on global rank zero)."""

    def __init__(self, callback: LightningHealthCallback):
        super().__init__()
        self._callback = callback

    @property
    def name(self) -> str:
        return "trackerhealth"

    @property
    def version(self) -> str:
        return "monitor"

    @property
    def save_dir(self) -> None:
        return None

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self._callback._receive(metrics, step)


class LightningHealthCallback(CoreResults, _pl.Callback):
    """A Lightning ``Callback`` that runs :class:`~trackerhealth.monitor.HealthMonitor`.

    Pass a ready ``monitor=HealthMonitor(...)`` or the monitor's options (``alert``, ``fail_on``,
    ``stop_on_nonfinite``, ``save_batches``, ``config``, ``cap``, …). With ``save_batches``, a
    batch that is a mapping with an ``index``/``idx``/``ids`` entry has those sample ids saved;
    otherwise its epoch and ``batch_idx``. After ``fit``, ``callback.final`` is the final check and
    ``callback.stopped_by`` says why it stopped training, if it did.
    """

    def __init__(self, monitor=None, *, timing: bool = False, grad_norms: bool = False,
                 check_every: int | None = None, **options: Any):
        self.core = CallbackCore(monitor, timing=timing, grad_norms=grad_norms, check_every=check_every, **options)
        self.monitor = self.core.monitor
        self._logger = _MonitorLogger(self)
        self._trainer = None

    def _receive(self, metrics: dict[str, float], step: int | None) -> None:
        trainer = self._trainer
        if trainer is None or not trainer.is_global_zero:
            return
        step = trainer.global_step if step is None else step
        if self.core.log(metrics, step):
            trainer.should_stop = True

    def _logs_now(self, trainer) -> bool:
        connector = getattr(trainer, "_logger_connector", None)
        return bool(getattr(connector, "should_update_logs", True))

    def _stop(self, trainer, stop: bool) -> None:
        if stop:
            trainer.should_stop = True

    # -- hooks ----------------------------------------------------------------------------------
    def on_fit_start(self, trainer, pl_module) -> None:
        self._trainer = trainer
        if self._logger not in trainer.loggers:
            trainer.loggers = [*trainer.loggers, self._logger]

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self.core.timer is not None:
            self.core.timer.pause()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.core.timer is not None:
            self.core.timer.step_begin()
        if self.monitor.save_dir is not None:
            self.monitor.remember_batch(trainer.global_step, _batch_ids(batch, trainer.current_epoch, batch_idx))

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if self.core.grad_norms and trainer.is_global_zero and self._logs_now(trainer):
            norms = layer_grad_norms(pl_module.named_parameters())
            if norms:
                pl_module.log_dict(norms, on_step=True, on_epoch=False, sync_dist=False)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        timer = self.core.timer
        if timer is not None:
            timer.step_end()
            if self._logs_now(trainer):
                means = timer.means()
                if means:
                    pl_module.log_dict(means, on_step=True, on_epoch=False)
        every = self.core.check_every
        if every and trainer.is_global_zero and (trainer.global_step % every == 0):
            self._stop(trainer, self.core.check())

    def on_validation_end(self, trainer, pl_module) -> None:
        if self.core.timer is not None:
            self.core.timer.pause()  # validation is not data-loading time

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            self._stop(trainer, self.core.check())

    def on_fit_end(self, trainer, pl_module) -> None:
        if trainer.is_global_zero:
            self.core.close()
        if self._logger in trainer.loggers:
            trainer.loggers = [lg for lg in trainer.loggers if lg is not self._logger]


def _batch_ids(batch: Any, epoch: int, batch_idx: int) -> Any:
    if isinstance(batch, dict):
        for key in _INDEX_KEYS:
            if key in batch:
                return batch[key]
    return {"epoch": epoch, "batch_idx": batch_idx}
