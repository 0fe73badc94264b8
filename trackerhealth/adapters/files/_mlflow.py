"""MLflow file-store run folders (``mlruns/<experiment>/<run>/``), read as plain files.

A run folder holds ``meta.yaml``, ``metrics/<key>`` (lines ``timestamp_ms value step``; a key
with ``/`` is a nested path), ``params/<name>`` and ``tags/<name>`` (one value per file). mlflow
itself is not needed; for servers and databases use the mlflow adapter.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ...schema import RunHistory
from ._common import Origin, build_history, categorical
from ._errors import InputError

_STATUS = {"1": "running", "2": "scheduled", "3": "finished", "4": "failed", "5": "killed"}


def read_meta(path: Path) -> dict[str, str | None]:
    """Top-level ``key: value`` scalars of an MLflow ``meta.yaml`` (enough for the fields we use)."""
    out: dict[str, str | None] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        if not line or line[0] in " \t#-" or ":" not in line:
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[key.strip()] = None if value in ("null", "~", "") else value
    return out


def is_run_folder(folder: Path) -> bool:
    meta = folder / "meta.yaml"
    if not meta.is_file():
        return False
    fields = read_meta(meta)
    if "run_id" in fields or "run_uuid" in fields:
        return True
    return (folder / "metrics").is_dir() and "model_id" not in fields


def _read_values(folder: Path) -> dict[str, str]:
    """``params/`` or ``tags/``: file path (``/`` for nesting) -> file content."""
    out = {}
    if not folder.is_dir():
        return out
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        try:
            out[f.relative_to(folder).as_posix()] = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return out


def _ms(value: str | None) -> float | None:
    try:
        return float(value) / 1000.0 if value is not None else None
    except ValueError:
        return None


def read_run(folder: Path) -> RunHistory:
    meta = read_meta(folder / "meta.yaml")
    run_id = meta.get("run_id") or meta.get("run_uuid") or folder.name
    tags = _read_values(folder / "tags")
    params = _read_values(folder / "params")
    experiment = read_meta(folder.parent / "meta.yaml")
    project = experiment.get("name") if "run_id" not in experiment else None
    status = meta.get("status")
    status = _STATUS.get(status or "", (status or "").lower() or None)
    user_tags = tuple(f"{k}={v}" for k, v in tags.items() if not k.startswith("mlflow."))
    origin = Origin(
        path=folder,
        project=project or folder.parent.name,
        id=run_id,
        name=meta.get("run_name") or tags.get("mlflow.runName") or meta.get("name") or run_id,
        state=status,
        updated_at=_ms(meta.get("end_time")),
        config=params,
        tags=user_tags,
    )
    metrics_dir = folder / "metrics"
    files = sorted(p for p in metrics_dir.rglob("*") if p.is_file()) if metrics_dir.is_dir() else []
    if not files:
        return RunHistory(origin.ref(), {}, ("the MLflow run logged no metrics",))
    steps, values, walls, codes, names, notes = [], [], [], [], [], []
    for code, f in enumerate(files):
        key = f.relative_to(metrics_dir).as_posix()
        ts, v, s, note = _parse_metric_file(f, key)
        if note:
            notes.append(note)
        names.append(key)
        steps.append(s)
        values.append(v)
        walls.append(ts / 1000.0)
        codes.append(np.full(len(s), code, dtype=np.int32))
    wall = np.concatenate(walls)
    if origin.updated_at is None and np.isfinite(wall).any():
        origin = replace(origin, updated_at=float(np.nanmax(wall)))
    return build_history(origin, np.concatenate(steps), categorical(np.concatenate(codes), names),
                         np.concatenate(values), wall, notes)


def _parse_metric_file(path: Path, key: str):
    """(timestamps_ms, values, steps, note) of one metric file."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    lines = [line for line in data.splitlines() if line.strip()]
    tokens = data.split()
    if lines and len(tokens) == 3 * len(lines):
        try:
            arr = np.array(tokens).reshape(-1, 3).astype(np.float64)
            return arr[:, 0], arr[:, 1], arr[:, 2], ""
        except ValueError:
            pass
    ts, vals, steps = [], [], []
    bad = no_step = 0
    # MLflow before 1.0 wrote 'timestamp value' lines; in a file of 3-field lines a short one is a cut.
    old_format = not any(len(line.split()) == 3 for line in lines)
    for index, line in enumerate(lines):
        try:
            numbers = [float(p) for p in line.split()]
        except ValueError:
            numbers = []
        if len(numbers) == 3:
            ts.append(numbers[0]), vals.append(numbers[1]), steps.append(numbers[2])
        elif len(numbers) == 2 and old_format:  # keep the logging order as the step
            ts.append(numbers[0]), vals.append(numbers[1]), steps.append(float(index))
            no_step += 1
        else:
            bad += 1
    notes = []
    if bad:
        notes.append(f"{key}: {bad} unreadable line(s) skipped (expected 'timestamp value step')")
    if no_step:
        notes.append(f"{key}: {no_step} line(s) without a step; the line number is used as the step")
    f = lambda xs: np.asarray(xs, dtype=np.float64)  # noqa: E731
    return f(ts), f(vals), f(steps), "; ".join(notes)
