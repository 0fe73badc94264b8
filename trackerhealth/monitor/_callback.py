"""What the three framework callbacks share: one monitor, when to check, when to stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..schema import CRITICAL
from ._alerts import AUTO, logger
from ._monitor import NONFINITE, CheckResult, HealthCheckError, HealthMonitor
from ._timing import StepTimer
from ._values import is_metric


def require(module: str, extra: str, package: str):
    """Import a framework, or say what to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this trackerhealth callback needs {package}, which is not installed ({exc}): "
            f"pip install 'trackerhealth[{extra}]' (or pip install {package})"
        ) from None


class CoreResults:
    """What every framework callback exposes from its :class:`CallbackCore` (``self.core``)."""

    @property
    def final(self):
        """The final check, after training ended."""
        return self.core.final

    @property
    def stopped_by(self):
        """Why the callback stopped training, if it did."""
        return self.core.stopped_by


class CallbackCore:
    """A monitor plus the callback options; the framework classes only translate their hooks.

    Stopping is graceful: the callbacks set their framework's stop flag (the run ends, checkpoints
    and ``on_train_end`` hooks run) and record why in ``stopped_by`` — on a NaN/Inf loss
    (``stop_on_nonfinite``) or when ``fail_on`` is reached.
    """

    def __init__(self, monitor: HealthMonitor | None, *, alert: Any = AUTO, fail_on: Any = None,
                 stop_on_nonfinite: bool = False, save_batches: str | Path | None = None,
                 timing: bool = False, grad_norms: bool = False, check_every: int | None = None,
                 **monitor_options: Any):
        if monitor is None:
            monitor = HealthMonitor(alert=alert, fail_on=fail_on, stop_on_nonfinite="flag" if stop_on_nonfinite else False,
                                    save_batches=save_batches, **monitor_options)
        elif monitor_options or fail_on is not None or stop_on_nonfinite or save_batches is not None or alert != AUTO:
            raise ValueError("pass either a HealthMonitor or its options (alert, fail_on, ...), not both")
        if check_every is not None and check_every < 1:
            raise ValueError("check_every must be a positive number of steps, or None to check at each epoch end")
        self.monitor = monitor
        self.stop_on_nonfinite = bool(stop_on_nonfinite) or monitor.stop_mode is not None
        self.timer = StepTimer() if timing else None
        self.grad_norms = grad_norms
        self.check_every = check_every
        self.stopped_by: Any = None  # a HealthCheckError, or the NaN/Inf event dict
        self.results: list[CheckResult] = []
        self.final: CheckResult | None = None

    def log(self, metrics: dict[str, Any], step: float) -> bool:
        """Give the monitor the numbers among ``metrics``; True when training should stop.

        Numbers, numpy values and tensors go to the monitor, which converts them (tensors detached
        and read in one batch per check); flags, text and other entries of a log are left out.
        """
        numeric = {k: v for k, v in metrics.items() if is_metric(v)}
        if numeric:
            self.monitor.log(numeric, step)
        return self.should_stop()

    def check(self) -> bool:
        """An epoch-end (or every ``check_every`` steps) check; True when training should stop."""
        try:
            result = self.monitor.check()
        except HealthCheckError as exc:
            self.stopped_by = exc
            if exc.result is not None:
                self.results.append(exc.result)
            logger.error("trackerhealth stops training: %s", exc)
            return True
        self.results.append(result)
        if self.stop_on_nonfinite and self.stopped_by is None:
            dead = next((f for f in result.active if f.id == NONFINITE and f.level == CRITICAL), None)
            if dead is not None:
                self.stopped_by = {"finding": dead}
                logger.error("trackerhealth stops training: %s", dead.message)
                return True
        return self.should_stop()

    def should_stop(self) -> bool:
        if self.stopped_by is not None:
            return True
        if self.monitor.should_stop:
            self.stopped_by = self.monitor.nonfinite_event
            return True
        return False

    def close(self) -> CheckResult:
        self.final = self.monitor.close()
        return self.final
