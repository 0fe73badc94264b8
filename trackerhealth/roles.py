"""Map raw metric keys to the roles the diagnoses need, with units made canonical.

Teams log the same quantity under many names: ``train/loss`` (W&B), ``loss`` (HF Trainer, Keras),
``train_loss_step`` (Lightning), ``system/gpu_0_utilization_percentage`` (MLflow system metrics),
``system.gpu.0.gpu`` (W&B system metrics). :func:`resolve` looks at the keys a run logged and
picks one key per role (a tuple of keys for per-layer and per-task roles). A user mapping from the
configuration always wins. Canonical units: times in seconds, utilization in percent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from . import stats
from .baseline import Cohort
from .schema import RunHistory, Series

SCALAR_ROLES = (
    "train_loss",
    "val_loss",
    "grad_norm",
    "lr",
    "momentum",
    "gpu_util",
    "step_time",
    "data_time",
    "compute_time",
    "throughput",
    "epoch",
)
GROUP_ROLES = ("layer_grad_norms", "layer_weight_norms", "task_losses", "quality_metrics", "error_metrics")
ROLES = SCALAR_ROLES + GROUP_ROLES
TIME_ROLES = ("step_time", "data_time", "compute_time")

_VAL = {"val", "valid", "validation", "eval", "evaluation", "test", "dev", "holdout"}
_TRAIN = {"train", "training", "tr", "trn"}
_NOT_LOSS = {"acc", "accuracy", "perplexity", "ppl", "f1", "auc", "precision", "recall", "best", "min", "lr",
             # a duration is not a loss term: `loss_computation_time` (public log P41) times the loss
             "time", "runtime", "duration", "seconds",
             # fp16's dynamic loss scale (Megatron's `loss scale`, DeepSpeed's `loss_scale`) multiplies the loss
             "scale", "scaler"}
_AGGREGATE = {"epoch", "avg", "mean", "ema", "smoothed", "running", "final", "best", "min"}
# Quality metrics where higher is better and 0 means not one right answer: accuracy, F1, detection mAP,
# AUROC, exact match. Only a run-level key counts: every word of it must be a stage, an aggregate or
# one of these (``val/accuracy``, ``metrics/mAP50-95(B)``, ``eval_f1``), so a per-class score
# (``eval_T184_f1``, a class that may rightly never be predicted) is not one.
_QUALITY = {"acc", "accuracy", "f1", "map", "map50", "map75", "auc", "auroc", "precision", "recall", "top1", "top5",
            "exact", "match", "em", "iou", "miou", "dice", "bleu", "rouge1", "rouge2", "rougel"}
_QUALITY_QUALIFIERS = {"metrics", "metric", "step", "epoch", "avg", "mean", "macro", "micro", "weighted", "b", "m",
                       "seq", "token", "char", "overall", "score"}
# Error rates, the mirror image: lower is better, 0 is perfect, and one value at every evaluation is a model whose
# output never changed (public log P669: an ASR fine-tune at word error rate exactly 1.0 at all six evaluations).
# Speech and translation rates by name (word, character, phone, translation edit rate), or "error rate" spelled out.
_ERROR_RATES = {"wer", "cer", "per", "ter"}


# A lower-case letter followed by a capitalised word starts a new word: ``ValLoss``, ``trainLoss`` (Keras-
# and custom-log style, public log P254). An upper-case run stays whole, so ``mAP50`` and ``LR`` are one word.
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z][a-z])")


def tokens(key: str) -> list[str]:
    """Lower-case words of a key: ``train/loss_step`` -> ``['train', 'loss', 'step']``, ``ValLoss`` -> ``['val', 'loss']``."""
    return [t for t in re.split(r"[^a-z0-9]+", _CAMEL_BOUNDARY.sub("_", key).lower()) if t]


def _natural(text: str) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


@dataclass(frozen=True)
class Roles:
    """Which key plays which role in one run, and how to scale it to canonical units."""

    keys: Mapping[str, str] = field(default_factory=dict)  # scalar role -> key
    groups: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)  # role -> ((label, key), …)
    scale: Mapping[str, float] = field(default_factory=dict)  # key -> factor to canonical unit

    def key(self, role: str) -> str | None:
        return self.keys.get(role)

    def group(self, role: str) -> tuple[tuple[str, str], ...]:
        return self.groups.get(role, ())

    def describe(self) -> dict[str, object]:
        out: dict[str, object] = dict(self.keys)
        for role, members in self.groups.items():
            out[role] = [k for _, k in members]
        return out


class RoleView:
    """A run's history seen through its roles: what every diagnosis receives.

    ``view.series("train_loss")`` gives the train-loss :class:`Series` in canonical units, or None
    when the run did not log one. ``view.cohort`` is the run's group and its baseline when the run is
    analysed with its group (:mod:`trackerhealth.cohort`), else None.
    """

    def __init__(self, history: RunHistory, roles: Roles, cohort: Cohort | None = None):
        self.history = history
        self.roles = roles
        self.cohort = cohort

    @property
    def ref(self):
        return self.history.ref

    def key(self, role: str) -> str | None:
        return self.roles.key(role)

    def series(self, role: str) -> Series | None:
        key = self.roles.key(role)
        if key is None:
            return None
        s = self.history.get(key)
        if s is None or len(s) == 0:
            return None
        return s.scaled(self.roles.scale.get(key, 1.0))

    def group(self, role: str) -> list[tuple[str, str, Series]]:
        """``[(label, key, series), …]`` in model / task order."""
        out = []
        for label, key in self.roles.group(role):
            s = self.history.get(key)
            if s is not None and len(s):
                out.append((label, key, s.scaled(self.roles.scale.get(key, 1.0))))
        return out

    def missing(self, *roles: str) -> list[str]:
        """Roles among ``roles`` that this run did not log."""
        gone = []
        for role in roles:
            if role in GROUP_ROLES:
                if not self.group(role):
                    gone.append(role)
            elif self.series(role) is None:
                gone.append(role)
        return gone


# -- matching -----------------------------------------------------------------------------------
_LOSS_WORDS = {"loss", "losses", "rmse", "nll"}
# Words that name a loss only when nothing is called one: Keras and many scripts log `loss` beside
# `mse`/`mae` *metrics*, which must not become the loss or its "task terms"; a script that logs only
# `train/ce` and `val/ce` (or `train_mse`) has no other name for its loss.
_METRIC_LOSS_WORDS = {"mse", "mae", "ce", "xent", "bce", "crossentropy"}


def is_loss(tok: list[str]) -> bool:
    """Whether a key's words (:func:`tokens`) name a loss: shared by role resolution and the monitor."""
    return bool(_LOSS_WORDS & set(tok)) and not (_NOT_LOSS & set(tok))


def _is_metric_loss(tok: list[str]) -> bool:
    words = set(tok)
    return bool(_METRIC_LOSS_WORDS & words or {"cross", "entropy"} <= words) and not (_NOT_LOSS & words)


def _is_quality(tok: list[str]) -> bool:
    """A run-level higher-is-better quality metric: a quality word, and no word that is not a stage,
    a qualifier, a number (``mAP50-95``) or another quality word."""
    words = set(tok)
    return bool(words & _QUALITY) and not (words & (_LOSS_WORDS | {"err", "error", "best", "lr"})) and all(
        t in _QUALITY or t in _QUALITY_QUALIFIERS or t in _VAL or t in _TRAIN or t.isdigit() for t in words)


def _is_error_rate(tok: list[str]) -> bool:
    """A run-level lower-is-better error rate (``eval_wer``, ``val/cer``, ``error_rate``): an error-rate word (or
    "error" with "rate"), and no word that is not a stage, a qualifier or a number."""
    words = set(tok)
    named = bool(words & _ERROR_RATES) or {"error", "rate"} <= words
    return named and all(t in _ERROR_RATES or t in {"error", "rate"} or t in _QUALITY_QUALIFIERS or t in _VAL
                         or t in _TRAIN or t.isdigit() for t in words)


def _is_val(tok: list[str]) -> bool:
    return bool(_VAL & set(tok))


def _extra_words(tok: list[str]) -> list[str]:
    """A loss key's words beyond train/loss/total/step/aggregate: what names one term of it."""
    return [t for t in tok if t not in _TRAIN and t not in _AGGREGATE and t not in _LOSS_WORDS
            and t not in _METRIC_LOSS_WORDS and t not in {"step", "total", "cross", "entropy"}]


def _loss_rank(key: str, tok: list[str], points: int) -> tuple:
    """Lower sorts first: a plain per-step training loss beats epoch aggregates, and any total beats
    the sub-terms it sums (``mean_loss`` over ``Dielectric_Air_loss`` and three other terms)."""
    extra = _extra_words(tok)
    return (
        points < 3,  # an end-of-training summary (HF's one-point `train_loss`) is not a curve
        len(extra),  # `loss` beats `loss_cls`; an aggregate of the whole loss beats a term of it
        bool(_AGGREGATE & set(tok)),  # then epoch means come second
        "total" not in tok,
        not (_TRAIN & set(tok)),
        len(key),
    )


def _val_loss_rank(key: str, tok: list[str], points: int) -> tuple:
    """As :func:`_loss_rank`, except that a per-batch val loss (Lightning's ``val_loss_step``) comes after any
    other: a validation pass is one measurement, its per-epoch aggregate; its batches, on a counter of their
    own, are noise a thousand times apart (public log P316: ``val_loss_step`` 6.6e-05 to 1.7)."""
    return ("step" in tok, *_loss_rank(key, tok, points))


_GRAD = {"grad", "grads", "gradient", "gradients"}
_NORM = {"norm", "l2"}
_LAYER_PREFIX = re.compile(
    r"^(?:grad_norm|grad_2\.0_norm|grad_norms|gradient_norm|grad|grads|gradients|grad_l2)[/._-](?P<layer>.+)$",
    re.I,
)
_LAYER_SUFFIX = re.compile(r"^(?P<layer>.+?)[/._-](?:grad_norm|grad|gradient_norm|grad_l2)$", re.I)
_WEIGHT_PREFIX = re.compile(
    r"^(?:weight_norm|weight_norms|param_norm|params_norm|weights?|parameters?)[/._-](?P<layer>.+?)(?:[/._-]norm)?$",
    re.I,
)
_GPU_UTIL = re.compile(
    r"^(?:system[/.])?(?:gpu[_.](?P<i>\d+)[_.](?:gpu|utilization_percentage|util(?:ization)?)"
    r"|gpu_util(?:ization)?(?:_percent(?:age)?)?|gpu/util(?:ization)?|gpu_utilization_percentage)$",
    re.I,
)
# Utilisation keys whose tracker defines them in percent (W&B's ``system.gpu.N.gpu``, MLflow's
# ``..._utilization_percentage``, any ``..._percent``): never guessed to be a fraction. A GPU the run
# barely used reads 0.07 there, and the guess made it 7 % (public log P398).
_PERCENT_BY_NAME = re.compile(r"^(?:system[/.])?gpu[_.](?:process[_.])?\d+[_.]gpu$|percent(?:age)?$", re.I)
# W&B marks the GPUs its process holds as ``system.gpu.process.N.*``. On a shared machine the other
# GPUs, gpu.0 included, may be idle or running someone else's job (public log P261: gpu.0 at 0 % for a
# whole fine-tune whose own gpu.2 was 96 % busy), so the process's GPU is the one to read.
_GPU_PROCESS_UTIL = re.compile(r"^(?:system[/.])?gpu[_.]process[_.](?P<i>\d+)[_.]gpu$", re.I)
_STEP_TIME = {"step_time", "elapsed_time_per_iteration", "steptime", "batch_time", "iter_time", "iteration_time", "time_step", "time_per_step", "time", "train_step_time", "time_iter", "time_batch"}
_DATA_TIME = {"data_time", "data_load_time", "dataloader_time", "data_loading_time", "time_data", "data_wait", "data_wait_time", "load_time", "fetch_time", "data_fetch_time"}
_COMPUTE_TIME = {"compute_time", "gpu_compute_time", "forward_backward_time", "fwd_bwd_time", "model_time", "time_compute", "train_compute_time", "compute"}
_THROUGHPUT = {"throughput", "samples_per_sec", "samples_per_second", "examples_per_sec", "examples_per_second", "tokens_per_sec", "tokens_per_second", "images_per_sec", "it_per_sec", "samples_s", "train_samples_per_second"}
_UNIT_SUFFIX = re.compile(r"[_/. -]?(\(?(ms|msec|millis|milliseconds|s|sec|secs|seconds)\)?)$", re.I)


def _strip_namespace(key: str) -> str:
    k = key.lower()
    for prefix in ("train/", "training/", "perf/", "timing/", "time/", "trainer/", "system/", "throughput/"):
        if k.startswith(prefix) and k != prefix:
            rest = k[len(prefix):]
            if prefix == "time/":
                rest = "time_" + rest
            return rest
    return k


def _time_unit(key: str) -> tuple[str, float | None]:
    """The key without its unit suffix, and the factor to seconds when the name says it."""
    m = _UNIT_SUFFIX.search(key)
    if m and m.group(2):
        unit = m.group(2).lower()
        base = key[: m.start()]
        if base:
            return base, (1e-3 if unit.startswith("m") else 1.0)
    return key, None


def _norm_name(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def _guess_time_scale(values: np.ndarray) -> float:
    """Seconds vs milliseconds when the name does not say: steps slower than 20 units are ms."""
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return 1.0
    return 1e-3 if _typical(finite) > 20 else 1.0


def _typical(values: np.ndarray) -> float:
    # roles.py stays free of the stats module; a strided median is plenty to tell ms from s.
    return float(np.median(values[:: max(1, len(values) // 20_000)]))


def _layer_groups(keys: list[str], pattern: re.Pattern) -> tuple[tuple[str, str], ...]:
    found = []
    for k in keys:
        m = pattern.match(k)
        if not m:
            continue
        layer = m.group("layer")
        if layer.lower() in {"total", "all", "global", "norm", "norm_total", "clipped", "before_clip", "after_clip"}:
            continue
        if pattern is _LAYER_PREFIX and layer.lower().startswith(("total", "norm")):
            continue
        found.append((layer, k))
    # Keys keep first-logged order, which is the model's parameter order; keep it -- unless the store
    # lost it: an MLflow file store (mlruns/) keeps one file per metric and no log order, so its keys
    # come back sorted by name, and so do a table sorted by key. Sorted names put `head` before `hidden.0`
    # and `hidden.10` before `hidden.2`.
    if len(found) >= 3 and [k for _, k in found] == sorted(k for _, k in found):
        found.sort(key=lambda pair: _model_order(pair[0]))
    return tuple(found)


# Where a parameter's module sits when the names are all there is: the input side (embeddings, the
# stem), the output side (the head), or the numbered body between them. Judged on the first word of
# the name that is not a wrapper (``model.``, ``module.``), so an attention block's ``out_proj`` stays
# in its block.
_WRAPPERS = frozenset({"model", "module", "net", "network", "base", "transformer", "gradients", "parameters"})
_INPUT_SIDE = frozenset({"embed", "embeds", "embedding", "embeddings", "wte", "wpe", "inp", "input", "stem", "patch", "tok"})
_OUTPUT_SIDE = frozenset({"head", "heads", "lm", "classifier", "fc", "out", "output", "outc", "final", "logits"})


def _model_order(layer: str) -> tuple:
    words = [w for w in tokens(layer) if w not in _WRAPPERS] or tokens(layer)
    first = words[0] if words else ""
    side = 0 if first in _INPUT_SIDE else 2 if first in _OUTPUT_SIDE else 1
    return (side, _natural(layer.lower()))


_ADVERSARIAL = {"generator", "discriminator", "gen", "disc", "critic", "adversarial", "adv", "g", "d"}


# A term of a logged total is at most a few times the total (a mean over four terms: 4x), unless the
# total weighs it by less than 1/_TERM_OVER_TOTAL, and then it hardly trains anything. A "loss"-named
# key far above the total is a metric on another scale (an RMSE in the target's units beside the
# normalised loss that was minimised), and would read as a task holding 100% of the sum.
_TERM_OVER_TOTAL = 100.0


def _level(series: Series) -> float:
    """Median absolute finite value: a series' typical size."""
    return stats.median(np.abs(series.values[np.isfinite(series.values)]))


def _numbered_copy(key: str, candidates: list[str]) -> bool:
    """An auxiliary copy of another candidate: ``loss_ce_0`` … ``loss_ce_8`` beside ``loss_ce`` (DETR's decoder layers)."""
    return bool(re.search(r"[_.]\d+$", key)) and re.sub(r"[_.]\d+$", "", key) in candidates


def _terms(history: RunHistory, candidates: list[str]) -> list[str]:
    """The per-step loss terms among ``candidates``: no epoch aggregates, no numbered auxiliary copies."""
    out = []
    for k in candidates:
        if _AGGREGATE & set(tokens(k)) or len(history[k]) < 3:
            continue
        if _numbered_copy(k, candidates):
            continue
        out.append(k)
    return out


def _total_of_terms(history: RunHistory, candidates: list[str], best: str) -> tuple[str, Series | None] | None:
    """When the best-named loss is only a term (``train/box_loss`` beside ``train/cls_loss`` and
    ``train/dfl_loss``, as Ultralytics YOLO's results.csv logs them, with no total), the loss that was
    minimised is their sum: ``(its key, the summed series)``. A logged term that already is the sum of
    the others (an ELBO beside its KL and reconstruction terms) is the total: ``(its key, None)``.
    None when the best-named loss is a total, or the terms are not logged at the same steps."""
    if _AGGREGATE & set(tokens(best)):
        return None  # `mean_loss`, `train_loss_epoch`: a total was logged
    terms = _terms(history, candidates)
    if len(terms) < 2 or best not in terms:
        return None
    # Words every term shares name the namespace (`forget_train/it_train_loss` beside
    # `forget_train/it_coarse_loss`), not a term: a best loss with no word of its own is the total.
    words = {k: set(_extra_words(tokens(k))) for k in terms}
    shared = set.intersection(*words.values())
    if not words[best] - shared:
        return None
    if _ADVERSARIAL & set().union(*words.values()):
        return None  # a GAN's generator and discriminator losses belong to two models: their sum means nothing
    common = history[terms[0]].steps
    for k in terms[1:]:
        common = np.intersect1d(common, history[k].steps)
    if len(common) < 3 or len(common) < 0.8 * min(len(history[k]) for k in terms):
        return None
    at = {k: history[k].values[np.searchsorted(history[k].steps, common)] for k in terms}
    summed = np.sum([at[k] for k in terms], axis=0)
    for k in terms:
        rest = summed - at[k]
        close = np.isfinite(at[k]) & np.isfinite(rest) & (np.abs(at[k]) > 0)
        if close.sum() >= 3 and np.median(np.abs(at[k][close] - rest[close]) / np.abs(at[k][close])) < 0.01:
            return k, None
    first = history[terms[0]]
    walls = first.wall_times[np.searchsorted(first.steps, common)]
    return "+".join(terms), Series(common.astype(float), summed, walls)


def resolve(history: RunHistory, overrides: Mapping[str, object] | None = None, units: Mapping[str, str] | None = None) -> RoleView:
    """Find each role's key in ``history``; ``overrides`` (role -> key or keys) win."""
    overrides = dict(overrides or {})
    units = dict(units or {})
    keys = [k for k in history.keys() if len(history[k])]
    chosen: dict[str, str] = {}
    groups: dict[str, tuple[tuple[str, str], ...]] = {}
    scale: dict[str, float] = {}

    # Losses.
    # Keys called a loss; only when there is none, `train/ce`, `val/ce`, `train_mse` are the loss.
    for named in (is_loss, _is_metric_loss):
        train_c, val_c = [], []
        for k in keys:
            tok = tokens(k)
            if named(tok):
                (val_c if _is_val(tok) else train_c).append(k)
        if train_c or val_c:
            break
    metric_named = named is _is_metric_loss
    derived: dict[str, Series] = {}
    for role, cands in (("train_loss", train_c), ("val_loss", val_c)):
        if not cands:
            continue
        rank = _loss_rank if role == "train_loss" else _val_loss_rank
        chosen[role] = min(cands, key=lambda k: rank(k, tokens(k), len(history[k])))
        if not metric_named:
            total = _total_of_terms(history, cands, chosen[role])
            if total is not None:
                chosen[role] = total[0]
                if total[1] is not None:
                    derived[total[0]] = total[1]
    if derived:
        history = RunHistory(history.ref, {**{k: history[k] for k in history.keys()}, **derived}, history.notes + tuple(
            f"no total loss was logged: {k} is the sum of its {k.count('+') + 1} logged terms" for k in derived))

    # Per-task losses: the other loss terms of the training side, one per task (not metrics such
    # as `train_mse` beside `train_mae`: those measure one output twice).
    if train_c and not metric_named:
        main = chosen["train_loss"]
        main_tok = set(tokens(main)) if main not in derived else set()  # a sum's terms are all tasks
        tasks = []
        for k in train_c:
            tok = tokens(k)
            if k == main or _AGGREGATE & set(tok) or set(tok) <= main_tok | {"step"}:
                continue
            if _numbered_copy(k, train_c):
                continue
            if main not in derived and _level(history[k]) > _TERM_OVER_TOTAL * _level(history[main]):
                continue  # RMSE 410 beside a logged train_loss of 0.017: a metric on another scale, not a term of it
            label = "_".join(t for t in tok if t not in {"loss", "train", "training", "step"}) or k
            tasks.append((label, k))
        if len(tasks) >= 2:
            groups["task_losses"] = tuple(tasks)

    # Quality metrics (higher is better), in log order.
    quality = tuple((k, k) for k in keys if _is_quality(tokens(k)))
    if quality:
        groups["quality_metrics"] = quality
    errors = tuple((k, k) for k in keys if _is_error_rate(tokens(k)))
    if errors:
        groups["error_metrics"] = errors

    # Gradient and weight norms.
    grad_total = []
    for k in keys:
        tok = set(tokens(k))
        if tok & _GRAD and (tok & _NORM or "2" in tok) and (
            "total" in tok or "global" in tok or _norm_name(k) in {"grad_norm", "train_grad_norm", "gradient_norm", "grad_l2_norm", "optimizer_grad_norm", "grad_norm_before_clip"}
        ):
            grad_total.append(k)
    if grad_total:
        chosen["grad_norm"] = min(grad_total, key=lambda k: ("clip" in k and "before" not in k, len(k)))
    layer_grads = _layer_groups(keys, _LAYER_PREFIX) or _layer_groups(keys, _LAYER_SUFFIX)
    layer_grads = tuple(p for p in layer_grads if p[1] != chosen.get("grad_norm"))
    if layer_grads:
        groups["layer_grad_norms"] = layer_grads
    weight_norms = _layer_groups(keys, _WEIGHT_PREFIX)
    if weight_norms:
        groups["layer_weight_norms"] = weight_norms

    # Optimizer.
    lr_c, mom_c = [], []
    for k in keys:
        tok = tokens(k)
        name = _norm_name(k)
        if "momentum" in tok or "beta1" in tok:
            mom_c.append(k)
        elif "lr" in tok or "learning_rate" in name or ("learning" in tok and "rate" in tok):
            if not (_VAL & set(tok)) and "scale" not in tok:
                lr_c.append(k)
    if lr_c:
        chosen["lr"] = min(lr_c, key=lambda k: (len(tokens(k)), len(k)))
    if mom_c:
        chosen["momentum"] = min(mom_c, key=len)

    # System and timing.
    gpu = [k for k in keys if _GPU_PROCESS_UTIL.match(k)] or [k for k in keys if _GPU_UTIL.match(k)]
    if gpu:
        chosen["gpu_util"] = sorted(gpu, key=_natural)[0]
    for k in keys:
        base, unit_scale = _time_unit(_strip_namespace(k))
        name = _norm_name(base)
        for role, names in (("data_time", _DATA_TIME), ("compute_time", _COMPUTE_TIME), ("step_time", _STEP_TIME)):
            if name in names and role not in chosen:
                chosen[role] = k
                if unit_scale is not None:
                    scale[k] = unit_scale
                break
        else:
            if name in _THROUGHPUT and "throughput" not in chosen:
                chosen["throughput"] = k
    for k in keys:
        if _norm_name(k) in {"epoch", "train_epoch", "trainer_epoch", "epochs"} and "epoch" not in chosen:
            chosen["epoch"] = k

    # User overrides win over every guess.
    for role, value in overrides.items():
        if role in GROUP_ROLES:
            members = [value] if isinstance(value, str) else list(value)  # type: ignore[arg-type]
            groups[role] = tuple((m, m) for m in members if m in history)
        else:
            chosen[role] = str(value)

    # Units: times to seconds, utilization to percent.
    time_keys = [chosen[r] for r in TIME_ROLES if r in chosen]
    for role in TIME_ROLES:
        k = chosen.get(role)
        if k is None:
            continue
        if role in units:
            scale[k] = {"ms": 1e-3, "s": 1.0, "us": 1e-6}[units[role]]
        elif k not in scale:
            # Unnamed units: guess once from the step time (or whichever timing exists) and apply
            # the same factor to all timing keys, so data vs compute comparisons stay consistent.
            ref_key = chosen.get("step_time") or time_keys[0]
            named = [scale[t] for t in time_keys if t in scale]
            scale[k] = named[0] if named else _guess_time_scale(history[ref_key].values)
    k = chosen.get("gpu_util")
    if k is not None:
        if units.get("gpu_util") == "fraction":
            scale[k] = 100.0
        elif "gpu_util" not in units and not _PERCENT_BY_NAME.search(k):
            vals = history[k].values
            finite = vals[np.isfinite(vals)]
            if len(finite) and finite.max() <= 1.0:
                scale[k] = 100.0

    return RoleView(history, Roles(chosen, groups, scale))
