"""Print per-metric numbers of a training log so a person can label it by eye.

Only parses (with the project's own readers, which also checks they can read the format);
it runs no diagnosis on purpose: labels must be blind to the detectors.

    python -m evidence.public.summarize PATH [--metrics REGEX] [--tenths]
"""

from __future__ import annotations

import argparse
import math
import re
import sys

import numpy as np

from trackerhealth.adapters.files import read_histories


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.4g}"


def summarize_series(name: str, steps: np.ndarray, values: np.ndarray, tenths: bool) -> str:
    values = np.asarray(values, dtype=float)
    steps = np.asarray(steps)
    finite = np.isfinite(values)
    n_nan = int(np.isnan(values).sum())
    n_inf = int(np.isinf(values).sum())
    parts = [f"{name}: n={len(values)} steps {steps[0] if len(steps) else '-'}..{steps[-1] if len(steps) else '-'}"]
    if n_nan or n_inf:
        first_bad = steps[~finite][0]
        parts.append(f"NaN={n_nan} Inf={n_inf} first_nonfinite_step={first_bad}")
    if finite.any():
        v, s = values[finite], steps[finite]
        parts.append(
            f"first={_fmt(v[0])} min={_fmt(v.min())}@{s[v.argmin()]} max={_fmt(v.max())}@{s[v.argmax()]} "
            f"last={_fmt(v[-1])} median={_fmt(float(np.median(v)))}"
        )
        if tenths and len(v) >= 10:
            # median per tenth of the run: shows the trend without the step noise
            chunks = np.array_split(v, 10)
            parts.append("tenths=" + " ".join(_fmt(float(np.median(c))) for c in chunks))
    return " | ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--metrics", default=None, help="regex: only metrics matching it")
    ap.add_argument("--tenths", action="store_true", help="median per tenth of the run")
    ap.add_argument("--step-column", default=None)
    args = ap.parse_args(argv)
    histories = read_histories(args.path, step_column=args.step_column)
    for h in histories:
        keys = sorted(h.keys())
        print(f"## run {h.ref}: {len(keys)} metrics" + (f" notes={list(h.notes)}" if h.notes else ""))
        for k in keys:
            if args.metrics and not re.search(args.metrics, k):
                continue
            s = h[k]
            print("  " + summarize_series(k, np.asarray(s.steps), np.asarray(s.values), args.tenths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
