"""Training logs that a script printed as text: ``train.log``, ``stdout.txt``, a Slurm ``.out``.

What a training loop prints is not a format, but the lines that carry metrics share one shape: a
step counter and a loss, each a name followed by a number, on one line —

* nanoGPT: ``iter 100: loss 4.2345, time 123.45ms, mfu 12.34%`` and ``step 500: train loss 4.1, val loss 4.3``;
* Megatron-LM: ``iteration  100/ 500000 | ... | learning rate: 1.000E-04 | lm loss: 7.123E+00 |
  loss scale: 65536.0 | grad norm: 1.234 | ...`` and ``validation loss at iteration 1000 | lm loss value: 3.5E+00``;
* modded-nanogpt style: ``step:100/3000 train_loss:4.12 train_time:12345ms step_avg:123.45ms``;
* PyTorch tutorials: ``Epoch [1/10], Step [100/600], Loss: 0.2345``;
* Keras: an ``Epoch 3/10`` line, then ``100/100 [====] - 2s 20ms/step - loss: 0.51 - val_loss: 0.62``;
* HF Trainer's console: ``{'loss': 2.1234, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.02}``;
* Chinese scripts: ``当前Batch：10/6035 | 当前epoch:0/50 | 当前损失值：10.113``, ``第3轮 训练损失：0.52`` — their
  metric words and full-width punctuation are put in the words above first (:mod:`._chinese`), and a
  file that is not UTF-8 is read as GB18030 (GBK) when it is that, or as UTF-16 after its byte-order mark (:mod:`._encoding`).

No library parses free text like this (``parse`` and friends need the exact template), so the
pairs are found with one regular expression: a name (words, which may hold spaces, ``/``, ``.``,
``-``, and a unit in brackets), a ``:``/``=``/space, a number (with ``nan``/``inf``), an optional
``/ total`` and an optional unit (``ms``, ``s``, ``%``). A line counts only when it names a step
(``iter``, ``iteration``, ``step``; else ``epoch``) and holds at least one loss (where no line of the
log names a loss, as pytorch-CycleGAN-and-pix2pix's ``D_A: 0.23 G_A: 0.45 cycle_A: 1.2`` does not, the lines
with a step and metrics are read, and the notes ask the user to name the loss); Keras' progress
lines borrow the step of the last ``Epoch N/M`` line, and so do lines that name no counter under a section
header that names only an epoch (st-gcn and the skeleton-action codebases built on its ``torchlight`` IO print
``Training epoch: 3`` then ``mean_loss: 1.23`` on a line of its own; under ``Eval epoch: 5`` the metrics are
``val/``). Where such headers count from their first epoch again (a script started anew, appending to its
log), each start is a run of its own. A header that names only a step does the same for the lines under it: OLMo's
trainer prints ``[step=5/2500,epoch=0]`` after its logging prefix, then one ``train/CrossEntropyLoss=10.35`` per line. Times in milliseconds get a ``_ms`` suffix so
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

from ...roles import _CAMEL_BOUNDARY, is_loss, tokens
from ...schema import RunHistory
from ._chinese import in_reader_words
from ._common import Origin, build_history
from ._encoding import decode
from ._errors import NotMetrics
from ._tables import _spread_within_epochs

TEXT_LOG_SUFFIXES = (".log", ".txt", ".out", ".err")

# A printed nan/inf ends its field ("loss: nan |", "loss nan,"): in "number of nan iterations: 0" it is a word.
# "31,187" (OLMo prints "train/Perplexity=31,187"): thousands separators, groups of exactly three digits, so that
# "loss: 0.5, acc: 0.9" and "epoch 1,2" stay apart.
_NUMBER = (r"[-+]?\d{1,3}(?:,\d{3})+(?![\d.,])(?:\.\d+)?|"
           r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)(?=\s*(?:$|[,;|)\]}]|-\s))")
_PAIR = re.compile(
    r"(?<![\w.])(?P<name>[A-Za-z][\w./\-]*(?:[ \t]+\(?[A-Za-z][\w./\-]*\)?)*?)"  # words, maybe spaced
    r"(?:\s*[:=]\s*|\s+)"                                                       # separator
    r"(?:\[\s*)?(?P<value>" + _NUMBER + r")"                                    # the number
    r"(?:\s*/\s*(?P<total>\d+)(?:\s*\])?|(?:\s*\])?)"                             # 100/600, [ 100/600], [100]
    r"(?:\s?(?P<unit>ms|sec|secs|s|%))?(?![\w.])",
    re.IGNORECASE,
)
_STEP_WORDS = ("iteration", "iter", "iters", "step", "global_step", "it")
_EPOCH_WORDS = ("epoch", "ep")
# Counters within an epoch, read as steps only with their total ("Batch: 920/ 1330"): "batch 32" is a size.
_WITHIN_EPOCH_WORDS = ("batch", "batches", "iter_in_epoch")
_VAL_OPENERS = ("validation", "valid", "val", "eval", "evaluation", "test")
_SPLIT_WORDS = {"train", "training", "trn", *_VAL_OPENERS}
_KERAS_EPOCH = re.compile(r"^\s*Epoch\s+(?P<n>\d+)\s*/\s*\d+\s*$", re.IGNORECASE)
_UNIT_IN_NAME = re.compile(r"\s*\((ms|s|sec|seconds)\)\s*$", re.IGNORECASE)
# "Training Loss (avg over last 100): 2.44": a bracketed qualifier between a name and its separator says how
# the value was taken, and its number is not the value. A unit in brackets stays (_UNIT_IN_NAME reads it).
_QUALIFIER = re.compile(r"\s*\((?!\s*(?:ms|s|sec|secs|seconds)\s*\))[^()]*\)(?=\s*[:=])", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.\s+")
# What a logging call puts before the message: "INFO:root:", "2024-11-05 23:17:05,224 - INFO - ", "[INFO] ",
# "... | INFO     | ". Hand-written: the logging module's format is the script's own, and no parser reads it back.
# Upper case only, as logging and loguru print a level: "Model info: val ..." is a message, not a prefix.
_LOG_PREFIX = re.compile(r"^.{0,40}?\b(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\b\]?(?::[\w.<>-]+:|\s*[-:|]\s*|\s+)")
# A prefix of tab-separated fields ending in the level (OLMo: "2025-12-11 00:28:29.343<TAB>host-02:0<TAB>olmo.train:979
# <TAB>INFO<TAB>"): its host and "module:line" fields are no metrics. Tabs bound it, so it is cut from every line.
_TAB_LOG_PREFIX = re.compile(r"^(?:[^\t\n]*\t){1,6}(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\t")
# Under a step-only header, a metric line is one indented ``name=value`` and nothing else.
_ONE_PAIR = re.compile(r"^\s+[A-Za-z][\w./\-]*\s*=\s*\S+\s*$")
# YOLOv5/v7/v8's console: a header of column names opening with "Epoch", then per epoch a row whose
# first cell is "12/299" (redrawn by a progress bar). Its box/obj/cls/dfl/seg columns are losses even
# where the name lacks the word (v5/v7); "total" is their sum.
_TABLE_HEADER = re.compile(r"^\s*Epoch(?:\s+[A-Za-z_][\w.@:-]*){3,}\s*$")
_TABLE_ROW = re.compile(r"^\s*(?P<epoch>\d+)/(?P<of>\d+)\s+(?P<cells>.*)$")
_YOLO_TERMS = {"box", "obj", "cls", "dfl", "seg", "kobj", "kpt", "pose"}
# "Loss 7.5117 (5.1709)": a batch's value, then the running average so far in brackets.
_RUNNING_AVERAGE = re.compile(r"(?P<value>" + _NUMBER + r")\s*\(\s*(?P<avg>" + _NUMBER + r")\s*\)")
_HF_DICT = re.compile(r"^\s*\{'[^']+':.*\}\s*$")
# A line longer than this is a dump (a config, a tensor), not a metrics line: skipped unread.
_MAX_LINE = 4000
# Where no line names a loss (pytorch-CycleGAN-and-pix2pix prints ``(epoch: 1, iters: 100, time: 0.12, data: 0.01)
# D_A: 0.23 G_A: 0.45 cycle_A: 1.2 ...``: losses every one, none called one), the lines that name a counter and
# metrics are the run, the user names its loss (--loss-key). This many such lines, so that a stray config line
# ("epoch: 10, lr: 0.001") in a file that is no log is not read as a run of one point.
_MIN_UNNAMED_LINES = 5


def _key(name: str, unit: str | None) -> str:
    """``elapsed time per iteration (ms)`` -> ``elapsed_time_per_iteration_ms``; ``time`` + ms -> ``time_ms``."""
    name = name.strip()
    m = _UNIT_IN_NAME.search(name)
    if m:
        name, unit = name[: m.start()], m.group(1)
    # CamelCase words apart first (OLMo's "CrossEntropyLoss" -> cross_entropy_loss): lower-cased whole, a name hides its
    # loss word from the roles.
    key = re.sub(r"[\s\-]+", "_", _CAMEL_BOUNDARY.sub("_", name).lower()).strip("_")
    if unit and unit.lower() in ("ms", "s", "sec", "secs", "seconds"):
        key += "_ms" if unit.lower() == "ms" else "_s"
    return key


def _pairs(line: str) -> list[tuple[str, float, float | None, str | None]]:
    """(name, value, total, unit) of each name-number pair; total is the 600 of ``Step [100/600]``."""
    out = []
    for m in _PAIR.finditer(_QUALIFIER.sub("", line)):
        try:
            value = float(m.group("value").replace(",", ""))
        except ValueError:
            continue
        total = float(m.group("total")) if m.group("total") else None
        # "Epoch 1 completed. Average Training Loss: 4.68": the name is what follows the sentence's end.
        name = _SENTENCE_END.split(m.group("name"))[-1]
        out.append((name, value, total, m.group("unit")))
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
    """Long rows (key, value) and the metric line each came from; :meth:`timeline` gives each row its step."""

    def __init__(self):
        self.keys: list[str] = []
        self.values: list[float] = []
        self.line_of: list[int] = []  # per row, the metric line it came from
        self.line_at: list[float] = []  # per line, its step as printed
        self.within: list[tuple[float, float | None, float] | None] = []  # per line: (step, steps per epoch if printed, epoch)
        self.by_epoch: list[bool] = []  # per line: its step is its epoch (the line names no step)
        self.bar: list[bool] = []  # per line: it is a progress bar's last frame (tqdm's redraws on one line)

    @property
    def lines(self) -> int:
        return len(self.line_at)

    def add(self, step: float, metrics: dict[str, float], within: tuple[float, float, float] | None = None,
            by_epoch: bool = False, bar: bool = False) -> None:
        for k, v in metrics.items():
            self.keys.append(k)
            self.values.append(v)
            self.line_of.append(self.lines)
        self.within.append(within)
        self.by_epoch.append(by_epoch)
        self.bar.append(bar)
        self.line_at.append(step)

    def bar_keys(self) -> list[str]:
        """Each row's key, a progress bar's own where a line of the log's own also gives that key: a bar's last
        frame shows one batch's value (or a running one) in its postfix (``CE=0.040``), and the epoch's summary
        line (``Train - CE: 0.0731``) the epoch's. Under one key they alternate, a sawtooth that reads as a spike
        every epoch (public log P525, a healthy run called periodic-spikes); apart, the summary is the curve. Only
        a key that another line gives at the same printed step as a bar is kept apart: Keras redraws its bar for
        some epochs and not others, each epoch's line its only one."""
        from_bar = [self.bar[line] for line in self.line_of]
        at = [self.line_at[line] for line in self.line_of]
        plain = {(k, a) for k, b, a in zip(self.keys, from_bar, at) if not b}
        twice = {k for k, b, a in zip(self.keys, from_bar, at) if b and (k, a) in plain and k != "epoch"}
        return [f"{k}_bar" if b and k in twice else k for k, b in zip(self.keys, from_bar)]

    def timeline(self) -> tuple[np.ndarray, str, np.ndarray]:
        """Each row's step, how the lines were made one timeline ("" when as printed), and which rows
        came from an epoch's summary line among batch lines (their keys are the epoch's aggregates):

        * where a ``Step [100/600]`` counter starts over each ``Epoch [2/5]``, the epochs before it are
          added (epoch x steps per epoch + step) — only then: ``epoch 2 step 1200/5000`` may count the run;
        * lines that name only their epoch (``Epoch 1 - Batch loss: 12.13``, hundreds per epoch) are
          spread evenly over it in file order, as the table reader spreads a repeating epoch column.
        """
        at = np.asarray(self.line_at, dtype=float)
        how = []
        known = [(i, w) for i, w in enumerate(self.within) if w is not None]
        by_epoch = np.flatnonzero(self.by_epoch)
        summary_lines = np.zeros(self.lines, dtype=bool)
        if any(b[2] > a[2] and b[0] <= a[0] for (_, a), (_, b) in zip(known, known[1:])):
            # An epoch's length is the counter's total where the lines print one (``Step [100/600]``), else the
            # largest value the counter reached: pytorch-CycleGAN-and-pix2pix prints ``(epoch: 3, iters: 3648, …)``,
            # its iters counting the epoch's samples from 0 again each epoch (public logs P906, P907, P909: read as
            # the step, every epoch's lines fell on the first epoch's, and a log of one line per epoch became one point).
            first_epoch = known[0][1][2]
            per_epoch = known[-1][1][1] if known[-1][1][1] is not None else max(w[0] for _, w in known)
            for i, (step, steps_per_epoch, epoch) in known:
                at[i] = (epoch - first_epoch) * (per_epoch if steps_per_epoch is None else steps_per_epoch) + step
            how.append("step within each epoch, after the epochs before it (epoch x steps per epoch + step)")
            if len(by_epoch):
                # An epoch's summary line (``Epoch 16 完成 | 训练损失: 4.61``, public log P61) closes that
                # epoch on the batches' axis: it goes where the epoch's last batch is, not at step 16.
                at[by_epoch] = (at[by_epoch] - first_epoch + 1) * per_epoch
                summary_lines[by_epoch] = True
                how.append("an epoch's summary line at the end of that epoch, its metrics named ..._epoch")
                by_epoch = by_epoch[:0]
        spread, epochs = _spread_within_epochs(at[by_epoch]) if len(by_epoch) else (None, 0)
        if epochs:
            at[by_epoch] = spread
            how.append("epoch, its lines spread evenly over it in file order")
        line_of = np.asarray(self.line_of, dtype=int)
        return at[line_of], "; ".join(how), summary_lines[line_of]


def _table_row(header: list[str], line: str) -> tuple[float, dict[str, float]] | None:
    """(epoch, {loss key: value}) of a YOLO-style table row under ``header``, or None."""
    m = _TABLE_ROW.match(line)
    if m is None:
        return None
    cells = m.group("cells").split()
    metrics = {}
    for name, cell in zip(header[1:], cells):
        try:
            value = float(cell.rstrip(":"))
        except ValueError:
            continue  # "11G" of gpu_mem, a progress bar
        low = name.lower()
        if low == "total":
            metrics["train/loss"] = value
        elif low in _YOLO_TERMS:
            metrics[f"train/{low}_loss"] = value
        elif is_loss(tokens(low)):
            metrics[f"train/{low}"] = value
    return (float(m.group("epoch")), metrics) if metrics else None


def _line_metrics(line: str) -> tuple[tuple[float, float | None] | None, float | None, dict[str, float]]:
    """((step, steps per epoch or None), epoch, {key: value}) of one line; step or epoch is None when
    the line names neither."""
    step = epoch = None
    metrics: dict[str, float] = {}
    first_name = None  # the line's first metric name, which may name the split for the whole line
    for name, value, total, unit in _pairs(line):
        last = name.lower().split()[-1]
        if last in _VAL_OPENERS and total and not metrics:
            continue  # "Test: [10/242]": the evaluation pass's own batch counter, neither a metric nor the run's step
        if last in _STEP_WORDS or (last in _WITHIN_EPOCH_WORDS and total):
            if step is None and value.is_integer():
                step = (value, total)
            continue  # a second counter on the line ("Saving state, iter: 2000") is no metric
        if "/" in name and name.strip().endswith((".py", ".cc", ".cpp", ".h")):
            continue  # a warning's "path/to/file.py:238:" on the line is a source line number, not a metric
        if last in _EPOCH_WORDS and epoch is None:
            epoch = value
            continue
        first_name = first_name if first_name is not None else name
        metrics[_key(name, unit)] = value
    if metrics and _opens_with_val(line):
        metrics = {k if k.startswith("val") else f"val/{k}": v for k, v in metrics.items()}
    elif metrics and first_name is not None and first_name.lower().split()[0] in _VAL_OPENERS:
        # "[Epoch: 05] Valid acc: 0.2988 | loss: 2.0462": the split is named once, by the line's first metric, and the
        # bare names after it are that split's (public logs P537-P539: each epoch's val loss had gone into the train
        # loss's series every fifth epoch). A name that says its own split keeps it.
        metrics = {k if set(tokens(k)) & _SPLIT_WORDS else f"val/{k}": v for k, v in metrics.items()}
    return step, epoch, metrics


def parse_text_log(text: str) -> tuple[_Rows, str, bool]:
    """The metric rows of a printed training log, which counter its steps are (for the notes), and whether
    no line named a loss and the lines with a counter and metrics were read instead."""
    rows = _Rows()
    unnamed = _Rows()  # lines with a counter and metrics but no loss word: read only when no line names one
    keras_epoch: float | None = None
    section: tuple[float, bool] | None = None  # (epoch, is validation) of the last epoch-only header line
    header: list[str] | None = None
    counter = "step"
    hf_index = 0
    last_train: tuple[float, tuple[float, float, float] | None, bool] | None = None  # where training had got to
    pass_so_far: dict[str, float] = {}  # an evaluation pass's running averages, not yet added
    # split("\n"), not splitlines(): a progress bar's "\r" redraws stay on their line, and only the last counts.
    for raw in _fold_step_headers(text.split("\n")):
        line = raw.rstrip("\r").rsplit("\r", 1)[-1].replace("\b", "")  # a Windows "\r\n" is no redraw
        line = _TAB_LOG_PREFIX.sub("", line, count=1)
        bar = "\r" in raw.rstrip("\r")
        if not line.strip() or len(line) > _MAX_LINE:
            continue
        m = _KERAS_EPOCH.match(line)
        if m:
            # The latest header names the epoch: a settings banner's "- Epoch: 1000" (an epoch-only header) above
            # Keras' "Epoch 1/1000" lines must not hold every progress bar at epoch 1000 (public log P533).
            keras_epoch, section = float(m.group("n")), None
            continue
        if _TABLE_HEADER.match(line):
            header = line.split()
            continue
        row = _table_row(header, line) if header else None
        if row is not None:
            rows.add(row[0], row[1])
            counter = "epoch (a column table: YOLO's console)"
            continue
        hf = _hf_dict(line)
        if hf is not None:
            hf_index += 1
            rows.add(float(hf_index), hf)
            counter = "logged line (HF Trainer prints no step)"
            continue
        step, epoch, metrics = _line_metrics(line)
        if step is None and epoch is None and last_train is not None and _opens_with_val(line):
            # An evaluation pass's line with no counter of the run's own ("Test: [10/242]  Loss 7.51 (5.17)", the
            # PyTorch ImageNet example's style, public log P412) was evaluated where training had got to: the
            # last training line's position. Its running average (in brackets) is the pass's loss so far: the
            # pass's last line gives the whole pass's, one point per pass, added when training goes on.
            _, _, averaged = _line_metrics(_RUNNING_AVERAGE.sub(r"\g<avg>", line))
            pass_so_far = {k: v for k, v in averaged.items() if is_loss(tokens(k))} or pass_so_far
            continue
        header_epoch = _section_header(line, step, epoch, metrics)
        if header_epoch is not None:
            section, keras_epoch = header_epoch, None
            continue
        if step is None and epoch is None and section is not None and metrics:
            epoch = section[0]
            if section[1]:
                metrics = {k if k.startswith("val") else f"val/{k}": v for k, v in metrics.items()}
        if not metrics:
            continue
        named = any(is_loss(tokens(k)) for k in metrics)
        within, by_epoch = None, False
        if epoch is not None and (step is None or step[0] != epoch):
            metrics["epoch"] = epoch
        if step is not None:
            at = step[0]
            if epoch is not None:
                within = (step[0], step[1], epoch)
        elif epoch is not None:
            at, counter, by_epoch = epoch, "epoch", True
        elif keras_epoch is not None:
            at, counter, by_epoch = keras_epoch, "epoch (Keras' Epoch N/M lines)", True
        else:
            continue
        if not named:
            unnamed.add(at, metrics, within, by_epoch, bar)
            continue
        if pass_so_far and last_train is not None:
            rows.add(last_train[0], pass_so_far, last_train[1], last_train[2])
            pass_so_far = {}
        rows.add(at, metrics, within, by_epoch, bar)
        if not any(k.startswith("val") for k in metrics):
            last_train = (at, within, by_epoch)
    if pass_so_far and last_train is not None:
        rows.add(last_train[0], pass_so_far, last_train[1], last_train[2])
    if not rows.lines and unnamed.lines >= _MIN_UNNAMED_LINES:
        return unnamed, counter, True
    return rows, counter, False


def _fold_step_headers(lines: list[str]) -> list[str]:
    """The lines with each header that names only its step (OLMo's ``[step=5/2500,epoch=0]``, after its logging prefix)
    joined with the indented ``name=value`` lines under it, one metric each (``    train/CrossEntropyLoss=10.35``), into
    one line: ``[step=5/2500,epoch=0] train/CrossEntropyLoss=10.35 | optim/total_grad_norm=7.712``. Each metric line
    alone names no step, and a grad-norm line no loss (public logs P584, P585: every OLMo metric had been dropped)."""
    # Where the run of one-pair lines starting at each index ends, from the back: one pass, however long the run (a
    # scan forward from each line would be quadratic in a long block of indented key=value lines).
    run_end = [len(lines)] * (len(lines) + 1)
    for j in range(len(lines) - 1, -1, -1):
        run_end[j] = run_end[j + 1] if _ONE_PAIR.match(lines[j].rstrip("\r")) else j
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        pairs_after = run_end[i + 1]
        if pairs_after > i + 1:
            head = _TAB_LOG_PREFIX.sub("", line.rstrip("\r"), count=1)
            step, _, metrics = _line_metrics(head)
            if step is not None and not metrics:
                out.append(" | ".join([head.rstrip(), *(p.strip() for p in lines[i + 1:pairs_after])]))
                i = pairs_after
                continue
        out.append(line)
        i += 1
    return out


def _opens_with_val(line: str) -> bool:
    """The line opens with a validation word (``validation loss at iteration 1000 | …``, ``Test: [10/242] …``),
    after the logging module's prefix if it has one (``INFO:root:Evaluation Epoch 0 - Average Loss: 3.95``)."""
    return _LOG_PREFIX.sub("", line, count=1).lstrip().lower().startswith(_VAL_OPENERS)


def _section_header(line: str, step, epoch: float | None, metrics: dict[str, float]) -> tuple[float, bool] | None:
    """(epoch, is validation) of a line that names only an epoch (``[time] Training epoch: 3``, ``Eval epoch: 5``),
    else None."""
    if step is not None or epoch is None or metrics:
        return None
    pairs = _pairs(line)
    words = pairs[0][0].lower().split() if len(pairs) == 1 else []
    return (epoch, bool(words) and words[0] in _VAL_OPENERS) if words else None


def _trainings(text: str) -> list[str]:
    """The text cut where a training section header counts from its first epoch again: a script started anew
    and appended to the log (st-gcn's ``log.txt`` holds one start after another). Without such headers, where
    a training line's own epoch counter does and its loss starts over too (``Epoch 1/20, Train Loss: 0.098`` after
    ``Epoch 20/20``, back nearer the log's first loss than where the last session left it: public log P529, eleven
    sessions appended, whose every fresh start read as the loss jumping back up). A counter that starts over
    with the loss going on from where it was is a resumed run, one training (P411, resumed twice). One piece when
    nothing starts over."""
    lines = text.split("\n")
    headers, marks = [], []  # (line index, epoch, None) of each training section header; (.., epoch, loss) of each training line
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r").rsplit("\r", 1)[-1]
        if "epoch" not in line.lower() or len(line) > _MAX_LINE:
            continue  # cheap: only a line naming an epoch can be a header
        step, epoch, metrics = _line_metrics(line)
        header = _section_header(line, step, epoch, metrics)
        if header is not None and not header[1]:
            headers.append((i, header[0], None))
        elif header is None and epoch is not None and metrics and not _opens_with_val(line):
            loss = next((v for k, v in metrics.items() if is_loss(tokens(k))), None)
            if loss is not None:
                marks.append((i, epoch, loss))
    cuts = _restarts(headers) or _restarts(marks)
    bounds = [0, *cuts, len(lines)]
    return ["\n".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]


def _restarts(marks: list[tuple[int, float, float | None]]) -> list[int]:
    """The line indices where an epoch counter comes back to its first value after having passed it — and, where
    the marks carry a loss, that loss is back nearer the piece's first loss than the last one before it."""
    cuts, first, last, start_loss, last_loss = [], None, None, None, None
    for i, epoch, loss in marks:
        if first is None:
            first, start_loss = epoch, loss
        elif epoch == first and last is not None and last > first:
            fresh = loss is None or start_loss is None or last_loss is None or abs(loss - start_loss) < abs(loss - last_loss)
            if fresh:
                cuts.append(i)
                start_loss = loss
        last, last_loss = epoch, loss
    return cuts


def _elapsed_clocks(keys: list[str], steps: np.ndarray, values: np.ndarray) -> list[str]:
    """``Time: 266.5s`` that grows line after line (and may start over each epoch) is the time since
    a start, not a step's time: renamed ``elapsed_time_s`` so the roles never read it as the step
    time. A step's own time goes up and down from one line to the next."""
    frame = pd.DataFrame({"key": keys, "step": steps, "value": values})
    clocks = set()
    for key, rows in frame.groupby("key", sort=False):
        if "time" not in tokens(key) or len(rows) < 3:
            continue
        v = rows.sort_values("step", kind="stable")["value"].to_numpy()
        v = v[np.isfinite(v)]
        if len(v) >= 3 and np.mean(np.diff(v) > 0) >= 0.9:
            clocks.add(key)
    return [f"elapsed_{k}" if k in clocks else k for k in keys]


def read_text_log(path: Path) -> list[RunHistory]:
    """The run printed into ``path``; NotMetrics when no line carries a step and a loss."""
    text, encoding = decode(path.read_bytes())  # not read_text: it would turn a bar's "\r" into lines
    text = in_reader_words(text)  # once for the whole text: both passes below read the English words
    pieces = _trainings(text)
    histories = []
    for n, piece in enumerate(pieces):
        rows, counter, unnamed = parse_text_log(piece)
        if not rows.lines:
            continue  # a start that crashed before its first metric line
        origin = Origin.for_file(path).part(n + 1)
        extra = [f"training {n + 1} of {len(pieces)} appended to this log (its epochs count from the start again)"] if len(pieces) > 1 else []
        if unnamed:
            names = ", ".join(dict.fromkeys(k for k in rows.keys if k != "epoch"))
            extra.append(f"no metric on its lines is named a loss; read the lines that name a step and metrics ({names}): "
                         "name the training loss with --loss-key KEY")
        if encoding != "utf-8":
            extra.append(f"decoded as {encoding.upper()} (the file is not UTF-8)")
        histories.append(_history(rows, counter, origin, extra))
    if not histories:
        raise NotMetrics(path, "no line of this text file holds a step and a loss (such as 'iter 100: loss 4.23' or "
                               "'step 5 | lm loss: 3.1'); if it is a table, give it a .csv suffix")
    return histories


def _history(rows: _Rows, counter: str, origin: Origin, extra_notes: list[str]) -> RunHistory:
    steps, how, from_summary = rows.timeline()
    counter = how or counter
    values = np.asarray(rows.values, dtype=float)
    notes = [f"read as a printed training log: {rows.lines} metric lines; steps are the {counter}", *extra_notes]
    # An epoch's summary (its mean train loss, its val loss) beside the batch lines is that epoch's
    # aggregate, named as Lightning names one (``train_loss_epoch``): the batches' loss stays the curve the
    # roles read first, and the summary's 15 points do not stand in for 1,900 (public log P61).
    keys = [f"{k}_epoch" if summary and k != "epoch" else k for k, summary in zip(rows.bar_keys(), from_summary)]
    keys = _elapsed_clocks(keys, steps, values)
    nonfinite = int((~np.isfinite(values)).sum())
    if nonfinite:
        notes.append(f"{nonfinite} printed values are nan/inf")
    return build_history(origin, steps, pd.Categorical(keys), values, None, notes)


def looks_like_text_log(path: Path) -> bool:
    return path.name.lower().endswith(TEXT_LOG_SUFFIXES)
