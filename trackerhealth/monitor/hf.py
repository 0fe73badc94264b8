"""Hugging Face ``Trainer`` callback: the monitor on what the Trainer already logs.

```python
from trackerhealth.monitor import HFHealthCallback

trainer = Trainer(model, args, train_dataset=..., callbacks=[HFHealthCallback(alert=["wandb", "log"])])
trainer.train()
```

It reads every ``on_log`` entry (``loss``, ``grad_norm``, ``learning_rate``, ``epoch``,
``eval_loss``, …) at ``state.global_step`` — the entries of ``trainer_state.json`` — checks at each
epoch end, once that epoch's evaluation is logged (or every ``check_every`` steps), and makes the
final check at ``on_train_end``.
Options: ``timing=True`` measures data/compute/step time per step; ``grad_norms=True`` computes
per-layer gradient norms on the steps that are logged (the gradients the optimizer steps with,
after the Trainer's clipping). Both are added to the Trainer's log entry
(so ``trainer_state.json`` and the callbacks after this one see them) and to the monitor.
``stop_on_nonfinite=True`` and ``fail_on`` stop training with ``control.should_training_stop``.
The Trainer does not hand batches to callbacks, so ``save_batches`` records the step only.

The Trainer replaces a NaN/Inf loss by the running mean before logging it
(``logging_nan_inf_filter=True``, its default); the dead run then shows as a gradient norm that
stays NaN, which the ``nonfinite`` diagnosis reports at the next check. Set
``logging_nan_inf_filter=False`` to see the loss itself go NaN at the logged step.
"""

from __future__ import annotations

from typing import Any

from ._callback import CallbackCore, CoreResults, require
from ._timing import layer_grad_norms

_transformers = require("transformers", "hf", "transformers")


class HFHealthCallback(CoreResults, _transformers.TrainerCallback):
    """A ``transformers.TrainerCallback`` that runs :class:`~trackerhealth.monitor.HealthMonitor`.

    Pass a ready ``monitor=HealthMonitor(...)`` or the monitor's options (``alert``, ``fail_on``,
    ``stop_on_nonfinite``, ``config``, ``cap``, …). ``check_every`` (steps) adds checks within an
    epoch. After training, ``callback.final`` is the final check and ``callback.stopped_by`` says
    why it stopped training, if it did.
    """

    def __init__(self, monitor=None, *, timing: bool = False, grad_norms: bool = False,
                 check_every: int | None = None, **options: Any):
        self.core = CallbackCore(monitor, timing=timing, grad_norms=grad_norms, check_every=check_every, **options)
        self.monitor = self.core.monitor
        self._extra: dict[str, float] = {}
        self._epoch_ended = False  # the epoch-end check waits for that epoch's evaluation

    def _stop(self, control, stop: bool):
        if stop:
            control.should_training_stop = True
        return control

    # -- measuring ------------------------------------------------------------------------------
    def on_step_begin(self, args, state, control, **kwargs):
        stop = self._epoch_check(state)  # an epoch that ended without an evaluation
        if self.core.timer is not None:
            self.core.timer.step_begin()
        return self._stop(control, stop)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if not self.core.grad_norms or model is None or not state.is_world_process_zero:
            return
        every = state.logging_steps if getattr(args, "logging_strategy", "steps") == "steps" else 1
        if every and (state.global_step + 1) % int(every) == 0:  # the step about to be logged
            self._extra.update(layer_grad_norms(model.named_parameters()))

    def on_step_end(self, args, state, control, **kwargs):
        if self.core.timer is not None:
            self.core.timer.step_end()
        if self.core.check_every and state.is_world_process_zero and state.global_step % self.core.check_every == 0:
            return self._stop(control, self.core.check())

    def on_evaluate(self, args, state, control, **kwargs):
        if self.core.timer is not None:
            self.core.timer.pause()  # evaluation is not data-loading time
        return self._stop(control, self._epoch_check(state))

    def on_save(self, args, state, control, **kwargs):
        if self.core.timer is not None:
            self.core.timer.pause()

    # -- reading and checking ----------------------------------------------------------------------
    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if "loss" in logs:  # a training entry: attach what this callback measured
            extra = dict(self._extra)
            self._extra.clear()
            if self.core.timer is not None:
                extra.update(self.core.timer.means())
            if extra:
                logs.update(extra)
                last = state.log_history[-1] if state.log_history else None
                if last is not None and last.get("step") == state.global_step:
                    last.update(extra)
        stop = self.core.log(logs, state.global_step)
        if self.core.timer is not None:
            self.core.timer.pause()
        return self._stop(control, stop)

    def on_epoch_end(self, args, state, control, **kwargs):
        # The Trainer evaluates an epoch after on_epoch_end: check once its eval_loss is logged
        # (on_evaluate), else at the next step's start or the end of training.
        self._epoch_ended = True

    def _epoch_check(self, state) -> bool:
        if not self._epoch_ended:
            return False
        self._epoch_ended = False
        return state.is_world_process_zero and self.core.check()

    def on_train_end(self, args, state, control, **kwargs):
        self._epoch_ended = False
        if state.is_world_process_zero:
            self.core.close()
