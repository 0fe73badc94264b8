"""System metrics onto the step axis: W&B samples them by wall time, not by step.

Shared by the local-folder reader (:mod:`._records`) and the API reader (:mod:`._api_rows`), so
both place a run's system metrics the same way.
"""

from __future__ import annotations

import numpy as np

NO_ROWS_NOTE = "no history rows with a step and time: system metrics are placed at their sample index"
ONE_STEP_NOTE = "all history rows share one step: system metrics are placed at their sample index"


def place_on_steps(times, walls, steps) -> tuple[np.ndarray, str]:
    """Step positions for samples taken at wall ``times``, interpolated through the (wall time,
    step) pairs of the history rows in log order; with no usable row, the sample index (and a
    note saying so)."""
    times = np.asarray(times, dtype=np.float64)
    walls = np.asarray(walls, dtype=np.float64)
    steps = np.asarray(steps, dtype=np.float64)
    ok = np.isfinite(walls) & np.isfinite(steps)
    if not ok.any():
        return np.arange(len(times), dtype=np.float64), NO_ROWS_NOTE if len(times) else ""
    # Both axes only go forward; a clock step back must not fold the mapping over.
    t_axis = np.maximum.accumulate(walls[ok])
    s_axis = np.maximum.accumulate(steps[ok])
    if s_axis[0] == s_axis[-1] and len(times) > 1:
        # One step only (a sweep that logs once, at the end): interpolation would put every sample
        # on that step and all but the last would be dropped as duplicates.
        return np.arange(len(times), dtype=np.float64), ONE_STEP_NOTE
    return np.interp(times, t_axis, s_axis), ""


__all__ = ["NO_ROWS_NOTE", "ONE_STEP_NOTE", "place_on_steps"]
