"""What the framework callbacks measure themselves: step/data timing and per-layer gradient norms.

Both are opt-in and cheap. Timing is two ``time.perf_counter()`` calls per step. Gradient norms
are computed only on the steps that get logged, with one fused ``torch._foreach_norm`` over the
weight matrices and one device-to-host copy for all of them.
"""

from __future__ import annotations

import time
from typing import Any

# Keys the callbacks log; roles.py reads them as data_time / compute_time / step_time (seconds)
# and grad_norm/<layer> as per-layer gradient norms.
DATA_TIME, COMPUTE_TIME, STEP_TIME = "perf/data_time", "perf/compute_time", "perf/step_time"
LAYER_PREFIX = "grad_norm/"


class StepTimer:
    """Data time = from the end of one step to the start of the next; compute = the step itself.

    ``pause()`` marks time that is neither (evaluation, checkpointing, epoch boundaries): the next
    data time starts counting from the end of the pause.
    """

    def __init__(self) -> None:
        self._clock = time.perf_counter
        self._ready: float | None = None  # when the previous step (or a pause) ended
        self._began: float | None = None
        self._data = self._compute = 0.0
        self._n = 0

    def step_begin(self) -> None:
        now = self._clock()
        if self._ready is not None:  # the first step's data time is unknown: counted as 0
            self._data += now - self._ready
        self._began = now

    def step_end(self) -> None:
        now = self._clock()
        if self._began is not None:
            self._compute += now - self._began
            self._n += 1
        self._began = None
        self._ready = now

    def pause(self) -> None:
        self._ready = self._clock()

    def reset(self) -> None:
        self._ready = None

    def means(self) -> dict[str, float]:
        """Mean data / compute / step time per step since the last call (empty when no step)."""
        if self._n == 0:
            return {}
        data, compute = self._data / self._n, self._compute / self._n
        self._data = self._compute = 0.0
        self._n = 0
        return {DATA_TIME: data, COMPUTE_TIME: compute, STEP_TIME: data + compute}


def layer_grad_norms(named_parameters) -> dict[str, float]:
    """L2 norm of each weight matrix's gradient, keyed ``grad_norm/<module path>``, in model order."""
    import torch

    names, grads = [], []
    for name, p in named_parameters:
        if p.grad is None or p.ndim < 2:  # one entry per layer: its weight matrix, not the bias
            continue
        names.append(LAYER_PREFIX + name.removesuffix(".weight"))
        grads.append(p.grad.detach())
    if not grads:
        return {}
    if len({g.device for g in grads}) == 1 and hasattr(torch, "_foreach_norm"):
        norms = torch.stack(torch._foreach_norm(grads)).float().cpu().tolist()
    else:
        norms = [float(torch.linalg.vector_norm(g).float()) for g in grads]
    return dict(zip(names, norms))


def to_list(batch: Any) -> Any:
    """Batch indices as JSON-able data (numpy arrays, tensors, sequences, mappings)."""
    if hasattr(batch, "tolist"):
        return batch.tolist()
    if isinstance(batch, dict):
        return {str(k): to_list(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple, range)):
        return [to_list(x) for x in batch]
    return batch
