"""Keras callback: the monitor on what ``model.fit`` already logs.

```python
from trackerhealth.monitor import KerasHealthCallback

model.fit(x, y, validation_split=0.2, epochs=50, callbacks=[KerasHealthCallback(stop_on_nonfinite=True)])
```

At each epoch end it gives the monitor the epoch's logs (``loss``, ``val_loss``, the compiled
metrics, plus ``lr`` read from the optimizer) at step = epoch — what ``History`` and
``CSVLogger`` record — and checks. Keras does not hand per-step losses or gradients to
callbacks, so there are no per-layer gradient norms here; ``timing=True`` adds the epoch's mean
``perf/data_time``, ``perf/compute_time`` and ``perf/step_time``. Every batch's running loss is
watched for NaN/Inf: with ``stop_on_nonfinite=True`` training stops (``model.stop_training``) at
the batch where it happens, not at the epoch end; ``save_batches`` records that epoch and batch
number (Keras does not hand sample indices to callbacks). Works with any Keras 3 backend.
"""

from __future__ import annotations

from typing import Any

from ._callback import CallbackCore, CoreResults, require

_keras = require("keras", "keras", "keras")


class KerasHealthCallback(CoreResults, _keras.callbacks.Callback):
    """A ``keras.callbacks.Callback`` that runs :class:`~trackerhealth.monitor.HealthMonitor`.

    Pass a ready ``monitor=HealthMonitor(...)`` or the monitor's options (``alert``, ``fail_on``,
    ``stop_on_nonfinite``, ``save_batches``, ``config``, ``cap``, …). After ``fit``,
    ``callback.final`` is the final check and ``callback.stopped_by`` says why it stopped
    training, if it did.
    """

    def __init__(self, monitor=None, *, timing: bool = False, **options: Any):
        super().__init__()
        self.core = CallbackCore(monitor, timing=timing, **options)
        self.monitor = self.core.monitor
        self._epoch = 0

    def _stop(self, stop: bool) -> None:
        if stop and self.model is not None:
            self.model.stop_training = True

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        if self.core.timer is not None:
            self.core.timer.pause()

    def on_train_batch_begin(self, batch, logs=None):
        if self.core.timer is not None:
            self.core.timer.step_begin()

    def on_train_batch_end(self, batch, logs=None):
        if self.core.timer is not None:
            self.core.timer.step_end()
        if logs and "loss" in logs:
            if self.monitor.save_dir is not None:
                self.monitor.remember_batch(self._epoch, {"epoch": self._epoch, "batch": batch})
            self.monitor.watch("loss", logs["loss"], self._epoch)
            self._stop(self.core.should_stop())

    def on_test_begin(self, logs=None):
        if self.core.timer is not None:
            self.core.timer.pause()

    def on_epoch_end(self, epoch, logs=None):
        metrics = dict(logs or {})
        if "lr" not in metrics and "learning_rate" not in metrics:
            lr = _learning_rate(self.model)
            if lr is not None:
                metrics["lr"] = lr
        if self.core.timer is not None:
            metrics.update(self.core.timer.means())
        stop = self.core.log(metrics, epoch)
        self._stop(self.core.check() or stop)

    def on_train_end(self, logs=None):
        self.core.close()


def _learning_rate(model) -> float | None:
    optimizer = getattr(model, "optimizer", None)
    lr = getattr(optimizer, "learning_rate", None)
    if lr is None:
        return None
    try:
        return float(_keras.ops.convert_to_numpy(lr))
    except Exception:  # noqa: BLE001 - a schedule or variable we cannot read: no lr key
        return None
