"""Training logs that a script printed as text: ``train.log``, ``stdout.txt``, a Slurm ``.out``.

What a training loop prints is not a format, but the lines that carry metrics share one shape: a
step counter and a loss, each a name followed by a number, on one line —

* nanoGPT: ``iter 100: loss 4.2345, time 123.45ms, mfu 12.34%`` and ``step 500: train loss 4.1, val loss 4.3``;
* Megatron-LM: ``iteration  100/ 500000 | ... | learning rate: 1.000E-04 | lm loss: 7.123E+00 |
  loss scale: 65536.0 | grad norm: 1.234 | ...`` and ``validation loss at iteration 1000 | lm loss value: 3.5E+00``;
* modded-nanogpt style: ``step:100/3000 train_loss:4.12 train_time:12345ms step_avg:123.45ms``;
* PyTorch tutorials: ``Epoch [1/10], Step [100/600], Loss: 0.2345``;
* Keras: an ``Epoch 3/10`` line, then ``100/100 [====] - 2s 20ms/step - loss: 0.51 - val_loss: 0.62``;
* HF Trainer's console: ``{'loss': 2.1234, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.02}``.

No library parses free text like this (``parse`` and friends need the exact template), so the
pairs are found with one regular expression: a name (words, which may hold spaces, ``/``, ``.``,
``-``, and a unit in brackets), a ``:``/``=``/space, a number (with ``nan``/``inf``), an optional
``/ total`` and an optional unit (``ms``, ``s``, ``%``). A line counts only when it names a step
(``iter``, ``iteration``, ``step``; else ``epoch``) and holds at least one loss; Keras' progress
lines borrow the step of the last ``Epoch N/M`` line. Times in milliseconds get a ``_ms`` suffix so
the roles read them in seconds. A line that opens with a validation word (``validation loss at
iteration 1000 | lm loss value: …``) puts its metrics under ``val/``. Every other line (banners,
config dumps, warnings, tracebacks) is ignored, and the run's notes say how many metric lines were read.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...roles import is_loss, tokens
from ...schema import RunHistory
from ._common import Origin, build_history
from ._errors import NotMetrics

TEXT_LOG_SUFFIXES = (".log", ".txt", ".out", ".err")

# A printed nan/inf ends its field ("loss: nan |", "loss nan,"): in "number of nan iterations: 0" it is a word.
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)(?=\s*(?:$|[,;|)\]}]|-\s))"
_PAIR = re.compile(
    r"(?<![\w.])(?P<name>[A-Za-z][\w./\-]*(?:[ \t]+\(?[A-Za-z][\w./\-]*\)?)*?)"  # words, maybe spaced
    r"(?:\s*[:=]\s*|\s+)"                                                       # separator
    r"\[?(?P<value>" + _NUMBER + r")"                                           # the number
    r"(?:\s*/\s*(?P<total>\d+)\]?|\]?)"                                         # 100/600 or [100/600]
    r"(?P<unit>ms|s|%)?(?![\w.])",
    re.IGNORECASE,
)
_STEP_WORDS = ("iteration", "iter", "iters", "step", "global_step", "it")
_EPOCH_WORDS = ("epoch", "ep")
_VAL_OPENERS = ("validation", "valid", "val", "eval", "evaluation", "test")
_KERAS_EPOCH = re.compile(r"^\s*Epoch\s+(?P<n>\d+)\s*/\s*\d+\s*$", re.IGNORECASE)
_UNIT_IN_NAME = re.compile(r"\s*\((ms|s|sec|seconds)\)\s*$", re.IGNORECASE)
_HF_DICT = re.compile(r"^\s*\{'[^']+':.*\}\s*$")
# A line longer than this is a dump (a config, a tensor), not a metrics line: skipped unread.
_MAX_LINE = 4000


def _key(name: str, unit: str | None) -> str:
    """``elapsed time per iteration (ms)`` -> ``elapsed_time_per_iteration_ms``; ``time`` + ms -> ``time_ms``."""
    name = name.strip()
    m = _UNIT_IN_NAME.search(name)
    if m:
        name, unit = name[: m.start()], m.group(1)
    key = re.sub(r"[\s\-]+", "_", name.lower()).strip("_")
    if unit and unit.lower() in ("ms", "s", "sec", "seconds"):
        key += "_ms" if unit.lower() == "ms" else "_s"
    return key


def _pairs(line: str) -> list[tuple[str, float, float | None, str | None]]:
    """(name, value, total, unit) of each name-number pair; total is the 600 of ``Step [100/600]``."""
    out = []
    for m in _PAIR.finditer(line):
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        total = float(m.group("total")) if m.group("total") else None
        out.append((m.group("name"), value, total, m.group("unit")))
    return out


def _hf_dict(line: str) -> dict[str, float] | None:
    """HF Trainer's printed log dict; ``literal_eval`` reads Python's own repr (``nan`` is a name there)."""
    if not _HF_DICT.match(line):
        return None
    try:
        parsed = ast.literal_eval(re.sub(r"\b(nan|inf)\b", r"'\1'", line.strip()))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(parsed, dict):
        return None
    out = {}
    for k, v in parsed.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[str(k)] = float(v)
        elif v in ("nan", "inf"):
            out[str(k)] = float(v)
    return out if any(is_loss(tokens(k)) for k in out) else None


class _Rows:
    """Long rows (step, key, value) as the lines give them; :meth:`timeline` makes the steps one timeline."""

    def __init__(self):
        self.steps: list[float] = []
        self.keys: list[str] = []
        self.values: list[float] = []
        self.line_of: list[int] = []  # per row, the metric line it came from
        self.within: list[tuple[float, float, float] | None] = []  # per line: (step, steps per epoch, epoch)
        self.lines = 0

    def add(self, step: float, metrics: dict[str, float], within: tuple[float, float, float] | None = None) -> None:
        for k, v in metrics.items():
            self.steps.append(step)
            self.keys.append(k)
            self.values.append(v)
            self.line_of.append(self.lines)
        self.within.append(within)
        self.lines += 1

    def timeline(self) -> tuple[np.ndarray, bool]:
        """The steps; where a ``Step [100/600]`` counter starts over each ``Epoch [2/5]``, the epochs before it are
        added (epoch x steps per epoch + step). Only then: ``epoch 2 step 1200/5000`` may count the whole run."""
        steps = np.asarray(self.steps, dtype=float)
        known = [(i, w) for i, w in enumerate(self.within) if w is not None]
        restarts = any(b[2] > a[2] and b[0] <= a[0] for (_, a), (_, b) in zip(known, known[1:]))
        if not restarts:
            return steps, False
        first_epoch = known[0][1][2]
        by_line = {i: (w[2] - first_epoch) * w[1] + w[0] for i, w in known}
        return np.asarray([by_line.get(line, s) for line, s in zip(self.line_of, steps)], dtype=float), True


def _line_metrics(line: str) -> tuple[tuple[float, float | None] | None, float | None, dict[str, float]]:
    """((step, steps per epoch or None), epoch, {key: value}) of one line; step or epoch is None when
    the line names neither."""
    step = epoch = None
    metrics: dict[str, float] = {}
    for name, value, total, unit in _pairs(line):
        last = name.lower().split()[-1]
        if last in _STEP_WORDS and step is None and value.is_integer():
            step = (value, total)
            continue
        if last in _EPOCH_WORDS and epoch is None:
            epoch = value
            continue
        metrics[_key(name, unit)] = value
    if metrics and line.lstrip().lower().startswith(_VAL_OPENERS):
        metrics = {k if k.startswith("val") else f"val/{k}": v for k, v in metrics.items()}
    return step, epoch, metrics


def parse_text_log(text: str) -> tuple[_Rows, str]:
    """The metric rows of a printed training log, and which counter its steps are (for the notes)."""
    rows = _Rows()
    keras_epoch: float | None = None
    counter = "step"
    hf_index = 0
    # split("\n"), not splitlines(): a progress bar's "\r" redraws stay on their line, and only the last counts.
    for raw in text.split("\n"):
        line = raw.rsplit("\r", 1)[-1].replace("\b", "")
        if not line.strip() or len(line) > _MAX_LINE:
            continue
        m = _KERAS_EPOCH.match(line)
        if m:
            keras_epoch = float(m.group("n"))
            continue
        hf = _hf_dict(line)
        if hf is not None:
            hf_index += 1
            rows.add(float(hf_index), hf)
            counter = "logged line (HF Trainer prints no step)"
            continue
        step, epoch, metrics = _line_metrics(line)
        if not any(is_loss(tokens(k)) for k in metrics):
            continue
        within = None
        if epoch is not None and (step is None or step[0] != epoch):
            metrics["epoch"] = epoch
        if step is not None:
            at = step[0]
            if step[1] is not None and epoch is not None:
                within = (step[0], step[1], epoch)
        elif epoch is not None:
            at, counter = epoch, "epoch"
        elif keras_epoch is not None:
            at, counter = keras_epoch, "epoch (Keras' Epoch N/M lines)"
        else:
            continue
        rows.add(at, metrics, within)
    return rows, counter


def read_text_log(path: Path) -> list[RunHistory]:
    """The run printed into ``path``; NotMetrics when no line carries a step and a loss."""
    text = path.read_bytes().decode("utf-8", errors="replace")  # not read_text: it would turn a bar's "\r" into lines
    rows, counter = parse_text_log(text)
    if not rows.lines:
        raise NotMetrics(path, "no line of this text file holds a step and a loss (such as 'iter 100: loss 4.23' or "
                               "'step 5 | lm loss: 3.1'); if it is a table, give it a .csv suffix")
    steps, per_epoch = rows.timeline()
    if per_epoch:
        counter = "step within each epoch, after the epochs before it (epoch x steps per epoch + step)"
    values = np.asarray(rows.values, dtype=float)
    notes = [f"read as a printed training log: {rows.lines} metric lines; steps are the {counter}"]
    nonfinite = int((~np.isfinite(values)).sum())
    if nonfinite:
        notes.append(f"{nonfinite} printed values are nan/inf")
    return [build_history(Origin.for_file(path), steps, pd.Categorical(rows.keys), values, None, notes)]


def looks_like_text_log(path: Path) -> bool:
    return path.name.lower().endswith(TEXT_LOG_SUFFIXES)
