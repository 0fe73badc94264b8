"""What ``HealthMonitor.log()`` accepts, turned into plain numbers.

People pass what their training loop has: Python numbers, numpy scalars and 0-d arrays, and — most
often — the framework's own tensors (``loss``, the ``clip_grad_norm_`` result), on the GPU and
with the autograd graph attached. Each is read as follows:

* ``float``/``int`` (the fast path), other ``numbers.Real`` (``bool`` as 0/1, ``Fraction``, numpy
  scalars) and numpy arrays of one element: ``float()`` at once.
* torch tensors of one element: ``detach()`` at once — so no graph is kept alive — and held in a
  small :class:`TensorBuffer` until the next check (or until it holds ``limit`` tensors). Reading
  a GPU tensor synchronises the device, so the buffer reads all it holds in one go: one
  ``torch.stack(...).cpu()`` per device and dtype, instead of a device sync per value per step.
* other objects that implement the numpy array protocol (``__array__``: JAX, TensorFlow): read at
  once through ``np.asarray``.
* ``None``: "not logged at this step", skipped.
* anything else (strings, complex numbers, tensors/arrays of several elements): skipped with a
  reason, which the monitor reports once per key.

torch is never imported here: a value is a tensor only when its type comes from a ``torch`` module
and torch, already imported by the caller, says it is a ``torch.Tensor``.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any

import numpy as np

PLAIN = (float, int)  # exact types: the no-conversion path (bool is not among them)
EAGER_DEVICES = ("cpu",)  # where reading a tensor costs no device synchronisation


class Skipped:
    """A value that is not recorded, and why (the monitor notes the reason once per key)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


SKIP_NONE = Skipped("")  # None: nothing to note


def is_tensor(value: Any) -> bool:
    """True for a torch tensor, without importing torch (a tensor's caller has imported it)."""
    if not type(value).__module__.startswith("torch"):
        return False
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def is_metric(value: Any) -> bool:
    """Whether a framework's log entry is a metric to record: numbers (not bools), numpy values, tensors."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return False
    return isinstance(value, (numbers.Real, np.ndarray, np.generic)) or is_tensor(value)


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '…' if len(text) > 40 else text}"


def read_now(value: Any) -> float | Skipped:
    """A non-tensor value as a float, or why it is skipped (tensors: :meth:`TensorBuffer.add`)."""
    if value is None:
        return SKIP_NONE
    if isinstance(value, numbers.Real):  # bool, numpy scalars, Fraction, Decimal-like
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError) as exc:
            return Skipped(f"{_describe(value)} cannot be read as a float ({exc})")
    if isinstance(value, (str, bytes)):
        return Skipped(f"{_describe(value)} is not a number")
    if isinstance(value, np.ndarray) or hasattr(type(value), "__array__"):
        try:
            arr = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - a foreign array type that cannot be read: skipped
            return Skipped(f"{_describe(value)} cannot be read as an array ({type(exc).__name__}: {exc})")
        if arr.size != 1:
            return Skipped(f"an array of shape {arr.shape} is not one number; log a scalar (e.g. its mean)")
        if arr.dtype.kind not in "biuf":
            return Skipped(f"an array of dtype {arr.dtype} is not a real number")
        return float(arr.reshape(()))
    return Skipped(f"{_describe(value)} is not a number")


def check_tensor(t: Any) -> str | None:
    """Why tensor ``t`` cannot be recorded, or None when it can (one real element)."""
    if t.numel() != 1:
        return f"a tensor of shape {tuple(t.shape)} is not one number; log a scalar (e.g. its mean())"
    if t.is_complex():
        return f"a tensor of dtype {t.dtype} is not a real number"
    return None


def detached(t: Any) -> Any:
    """``t`` without its autograd graph, as a 0-d tensor that pins no larger storage."""
    t = t.detach()
    if t.dim():  # a loss is 0-d already: reshape costs more than the detach
        t = t.reshape(())
    # A view into a bigger tensor (``logits[0, 0]``) would keep all of it alive until the check.
    if t.untyped_storage().nbytes() > t.element_size():
        t = t.clone()
    return t


class TensorBuffer:
    """Detached 0-d tensors waiting to be read, with the position each one's value goes to.

    Bounded: at ``limit`` tensors the owner reads them (:meth:`full`), so memory stays small and
    a device is synchronised at most once per ``limit`` values between checks.
    """

    def __init__(self, limit: int = 1024):
        if limit < 1:
            raise ValueError("the tensor buffer needs room for at least one tensor")
        self.limit = limit
        self.tensors: list[Any] = []
        self.slots: list[int] = []

    def __len__(self) -> int:
        return len(self.tensors)

    def add(self, tensor: Any, slot: int) -> bool:
        """Hold ``tensor`` (detached) for ``slot``; True when the buffer is now full."""
        self.tensors.append(tensor)
        self.slots.append(slot)
        return len(self.tensors) >= self.limit

    def read(self) -> tuple[list[int], list[float]]:
        """Empty the buffer: ``(slots, values)``, one host transfer per device and dtype."""
        tensors, slots = self.tensors, self.slots
        self.tensors, self.slots = [], []
        if not tensors:
            return [], []
        import torch  # a tensor is held, so torch is imported

        groups: dict[tuple, list[int]] = {}
        for i, t in enumerate(tensors):
            groups.setdefault((t.device, t.dtype), []).append(i)
        values: list[float] = [0.0] * len(tensors)
        for idx in groups.values():
            host = torch.stack([tensors[i] for i in idx]).cpu()
            if not host.is_floating_point():
                host = host.double()  # ints and bools as floats
            for i, x in zip(idx, host.tolist()):
                values[i] = float(x)
        return slots, values
