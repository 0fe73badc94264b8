"""Input pipelines for the input-bottleneck runs: real ``torch.utils.data.DataLoader`` s over tabular tensors.

- ``fast``: the in-memory loader (the twin): a DataLoader over a TensorDataset, no per-item work.
- ``slow_io``: every item sleeps ``delay_s`` before it is returned, as a read from slow storage does.
- ``heavy``: every item goes through ``fft_rounds`` rounds of a real numpy FFT augmentation of a
  ``signal_len`` signal derived from the row (CPU work the training step waits for).
- ``heavy`` with ``num_workers`` 1 or 2: the same work in worker processes, too few to hide it.

Each returns ``batches(epoch)`` like :func:`.common.minibatches`, so :func:`.common.fit` measures the
wait for the next batch as data time.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

KINDS = ("fast", "slow_io", "heavy")


class SlowIODataset(Dataset):
    """Rows that take ``delay_s`` each to arrive (a sleep stands for the I/O wait: it costs no CPU)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, delay_s: float):
        self.x, self.y, self.delay_s = x, y, delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.delay_s)
        return self.x[i], self.y[i]


class HeavyPreprocessDataset(Dataset):
    """Rows augmented by repeated FFT filtering of a signal built from the row; the row returned is the
    original plus a jitter of ~1e-3 std taken from the filtered signal, so the work is real and used."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, fft_rounds: int, signal_len: int = 4096):
        self.x, self.y, self.fft_rounds, self.signal_len = x, y, fft_rounds, signal_len

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        row = self.x[i].numpy()
        signal = np.resize(row, self.signal_len).astype(np.float64)
        for _ in range(self.fft_rounds):
            spectrum = np.fft.rfft(signal)
            spectrum[len(spectrum) // 4:] = 0  # low-pass: a real augmentation step, not a no-op
            signal = np.fft.irfft(spectrum, n=self.signal_len)
        jitter = 1e-3 * (signal[: len(row)] - signal.mean()) / (signal.std() + 1e-12)
        return torch.as_tensor(row + jitter, dtype=self.x.dtype), self.y[i]


def loader_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int, kind: str = "fast", *,
                   num_workers: int = 0, delay_s: float = 0.0005, fft_rounds: int = 20, shuffle: bool = True):
    """``batches(epoch)`` through a DataLoader of the given kind; seeded per epoch like ``minibatches``."""
    if kind == "fast":
        dataset: Dataset = TensorDataset(x, y)
    elif kind == "slow_io":
        dataset = SlowIODataset(x, y, delay_s)
    elif kind == "heavy":
        dataset = HeavyPreprocessDataset(x, y, fft_rounds)
    else:
        raise ValueError(f"unknown loader kind {kind!r}; use one of {KINDS}")

    def batches(epoch: int):
        gen = torch.Generator().manual_seed(seed * 1000 + epoch)
        return iter(DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=gen, num_workers=num_workers))
    return batches
