"""The torch corpus' ground truth (evidence/torch/truth.py): what its twin checks read off the logged values."""

import numpy as np

from evidence.torch import truth
from evidence.torch.sinks import Logged


def _logged(values, key="train/loss"):
    tap = Logged()
    for step, value in enumerate(values):
        tap.add(key, float(step), float(value))
    return tap


def test_the_end_level_is_the_level_of_the_last_points_not_the_last_point():
    # The ftt family's batch-2 run: its last, 2-row batch logged 0.71 where the losses before it sat near 0.02. Padded at
    # the end with the last point, the running median returned that point (it filled the window's majority), so the run
    # was confirmed oscillating at 4.7x its twin's last point; its last points' level is 0.16x the twin's.
    rng = np.random.default_rng(0)
    noisy = np.r_[np.linspace(1.0, 0.02, 300), 0.02 + 0.005 * rng.random(99), 0.71]
    assert truth.level_at_end(_logged(noisy), "train/loss") < 0.03
    # The start stays the run's first point: a loss that blows up in its first steps started where it was initialised.
    blown = np.r_[2.3, np.full(399, 40.0)]
    assert truth._smooth(blown)[0] == 2.3


def test_a_fault_that_ends_above_its_twin_on_its_last_batch_alone_is_not_oscillating():
    rng = np.random.default_rng(1)
    twin = np.linspace(1.0, 0.1, 400) + 0.01 * rng.random(400)
    fault = np.linspace(1.0, 0.02, 400) * (1 + 2.0 * rng.random(400))
    fault[-1] = 5.0
    confirmed, measures = truth.confirm_oscillation(_logged(fault), _logged(twin), "train/loss")
    assert not confirmed and measures["end_ratio"] < 1.5, measures
