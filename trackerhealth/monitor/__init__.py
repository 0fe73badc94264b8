"""In-training health monitor: the scan's diagnoses at every epoch end, alerting from inside the run.

```python
from trackerhealth.monitor import HealthMonitor

monitor = HealthMonitor(alert=["wandb", "mlflow", "log"], fail_on=None)   # or a Slack webhook URL
for step, batch in enumerate(loader):
    ...
    monitor.log({"train/loss": loss, "grad_norm": gn, "lr": lr}, step=step)  # tensors as they are
    if end_of_epoch:
        result = monitor.check()          # print(result): one line; result.new: raised at this check
        if not result:                    # false while a warning or critical finding is active
            ...
monitor.close()                           # the final check: what a later scan of the run reports
```

``log()`` takes torch tensors (any device, with grad: detached at once, read in one batch per
check), numpy and Python scalars; see :mod:`._values`.

Framework callbacks (each imports its framework only when used):
``HFHealthCallback`` (Hugging Face ``TrainerCallback``), ``LightningHealthCallback`` (Lightning
``Callback``), ``KerasHealthCallback`` (Keras ``Callback``).
"""

from __future__ import annotations

import importlib

from ._monitor import (
    CheckResult,
    HealthCheckError,
    HealthMonitor,
    HealthMonitorError,
    NonFiniteLossError,
)

_CALLBACKS = {
    "HFHealthCallback": "hf",
    "LightningHealthCallback": "lightning",
    "KerasHealthCallback": "keras",
}

__all__ = [
    "CheckResult",
    "HFHealthCallback",
    "HealthCheckError",
    "HealthMonitor",
    "HealthMonitorError",
    "KerasHealthCallback",
    "LightningHealthCallback",
    "NonFiniteLossError",
]


def __getattr__(name: str):
    # The callbacks subclass their framework's base class: import it only when asked for.
    module = _CALLBACKS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
