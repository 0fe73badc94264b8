"""Collects what a training loop logs and writes it in the formats real tools use.

A scenario calls ``log.log(step, {key: value, ...})`` the way it would call
``wandb.log`` / ``mlflow.log_metrics`` / ``self.log``; each call is one *record*
(kept for the formats that group values per call: HF ``log_history``, Lightning
``metrics.csv``) and one long row per key.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import time
from pathlib import Path


def _fmt(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.8g}"


class RunLog:
    def __init__(self, name: str):
        self.name = name
        self.records: list[tuple[int, dict, float]] = []
        self.meta: dict = {}

    def log(self, step: int, values: dict, wall_time: float | None = None):
        wt = time.time() if wall_time is None else wall_time
        self.records.append((int(step), {k: float(v) for k, v in values.items()}, wt))

    # ------------------------------------------------------------------ views
    def rows(self):
        for step, vals, wt in self.records:
            for k, v in vals.items():
                yield step, k, v, wt

    def series(self, key: str):
        """(steps, values) for one key, in logging order."""
        s, v = [], []
        for step, vals, _ in self.records:
            if key in vals:
                s.append(step)
                v.append(vals[key])
        return s, v

    def keys(self) -> list[str]:
        seen = {}
        for _, vals, _ in self.records:
            for k in vals:
                seen.setdefault(k, None)
        return list(seen)

    # ------------------------------------------------------------------ writers
    def write(self, path: Path, fmt: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "long-csv":
            self._write_long_csv(path)
        elif fmt == "long-jsonl":
            self._write_jsonl(path)
        elif fmt == "wide-csv":
            self._write_wide_csv(path)
        elif fmt == "lightning-csv":
            self._write_lightning(path)
        elif fmt == "hf-trainer-state":
            self._write_hf(path)
        else:
            raise ValueError(fmt)

    def _write_long_csv(self, path: Path):
        buf = io.StringIO()
        buf.write("step,key,value,wall_time\n")
        for step, k, v, wt in self.rows():
            buf.write(f"{step},{k},{_fmt(v)},{wt:.3f}\n")
        # mtime=0 keeps the gzip header free of the generation time
        with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) as gz:
            gz.write(buf.getvalue().encode())

    def _write_jsonl(self, path: Path):
        with open(path, "w") as fh:
            for step, k, v, wt in self.rows():
                # json.dumps writes NaN/Infinity tokens, as Python loggers do
                fh.write(
                    json.dumps(
                        {
                            "step": step,
                            "key": k,
                            "value": float(f"{v:.8g}") if math.isfinite(v) else v,
                            "wall_time": round(wt, 3),
                        }
                    )
                    + "\n"
                )

    def _write_wide_csv(self, path: Path):
        cols = self.keys()
        by_step: dict[int, dict] = {}
        for step, vals, _ in self.records:
            by_step.setdefault(step, {}).update(vals)
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["step", *cols])
            for step in sorted(by_step):
                vals = by_step[step]
                w.writerow([step, *[_fmt(vals[c]) if c in vals else "" for c in cols]])

    def _write_lightning(self, path: Path):
        # Lightning's CSVLogger: one line per logging call, header = sorted union of keys
        cols = sorted(set(self.keys()) | {"step"})
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(cols)
            for step, vals, _ in self.records:
                row = dict(vals)
                row["step"] = step
                out = []
                for c in cols:
                    if c not in row:
                        out.append("")
                    elif c in ("step", "epoch"):
                        out.append(str(int(row[c])))
                    else:
                        v = row[c]
                        out.append(repr(float(v)) if math.isfinite(v) else ("nan" if math.isnan(v) else _fmt(v)))
                w.writerow(out)

    def _write_hf(self, path: Path):
        hist = []
        for step, vals, _ in self.records:
            entry = {}
            for k in sorted(vals):
                v = vals[k]
                if k == "step":
                    continue
                entry[k] = v
            entry["step"] = step
            hist.append(entry)
        last_step = max(s for s, _, _ in self.records)
        last_epoch = max((v["epoch"] for _, v, _ in self.records if "epoch" in v), default=0.0)
        state = {
            "best_global_step": None,
            "best_metric": None,
            "best_model_checkpoint": None,
            "epoch": last_epoch,
            "eval_steps": self.meta.get("eval_steps", 500),
            "global_step": last_step,
            "is_hyper_param_search": False,
            "is_local_process_zero": True,
            "is_world_process_zero": True,
            "log_history": hist,
            "logging_steps": self.meta.get("logging_steps", 10),
            "max_steps": self.meta.get("max_steps", last_step),
            "num_input_tokens_seen": 0,
            "num_train_epochs": self.meta.get("num_train_epochs", 1),
            "save_steps": 500,
            "total_flos": 0.0,
            "train_batch_size": self.meta.get("train_batch_size", 8),
            "trial_name": None,
            "trial_params": None,
        }
        # HF writes json.dumps(..., indent=2): NaN / Infinity appear as bare tokens
        path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
