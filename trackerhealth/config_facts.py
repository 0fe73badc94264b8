"""What a run's logged config says about its optimizer, and how that corroborates a finding.

:func:`facts` reads ``RunRef.config`` as each tracker or framework writes it — MLflow params (every
value a string: ``"0.001"``, ``"Adam"``), W&B config (nested dicts, ``{"value": …}`` wrappers as
the W&B API returns them), HF ``TrainingArguments`` names, Lightning ``hparams`` and the usual
aliases — into one :class:`ConfigFacts`. Each fact keeps the key it came from, so evidence can
name it.

:func:`corroborate` adds that evidence to a problem finding when the config points at the
finding's likely cause (slow convergence with Adam ``eps=1.0``, a loss that bounces with an LR of
0.1 for Adam, a NaN without gradient clipping). It never creates, removes or re-levels a finding:
a config can be stale or lie (a param logged before an override), so it only sharpens what the
curves already showed. The one exception is :func:`promote`: slow-convergence's back-loaded note (a
shape the curve shows but cannot judge alone) becomes a warning when the config names the setting
that would slow it. Every number it decides on is a field of :class:`Thresholds`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .diagnoses import slow_convergence
from .diagnoses._thresholds import knob
from .schema import Evidence, Finding

ID = "config"  # the section name in ``[thresholds.config]``


class Fact(NamedTuple):
    value: Any  # float, int, bool or str (the optimizer's lower-case name)
    key: str  # the config key it was read from (dotted when nested; "a×b" when combined)


@dataclass(frozen=True)
class ConfigFacts:
    optimizer: Fact | None = None
    lr: Fact | None = None
    adam_epsilon: Fact | None = None
    batch_size: Fact | None = None  # per optimizer step: per-device batch × gradient accumulation
    weight_decay: Fact | None = None
    max_grad_norm: Fact | None = None  # value 0.0: the key is present and says "no clipping"
    fp16: Fact | None = None
    bf16: Fact | None = None
    warmup: Fact | None = None  # steps (int) or a ratio of the run (float < 1), as the key says

    @property
    def optimizer_family(self) -> str | None:
        """``adam`` (Adam, AdamW, NAdam, RAdam, Adamax, LAMB …), ``sgd`` or None when unknown."""
        if self.optimizer is None:
            # HF TrainingArguments without `optim` train with AdamW; an adam_epsilon says Adam too.
            return "adam" if self.adam_epsilon is not None and "adam" in self.adam_epsilon.key.lower() else None
        name = str(self.optimizer.value)
        if "adam" in name or "lamb" in name or "lion" in name:
            return "adam" if "lion" not in name else None
        if "sgd" in name or "momentum" in name or "nesterov" in name:
            return "sgd"
        return None


# Aliases per fact, most specific first; matched on a key's last component, case- and
# separator-insensitively ("Learning-Rate", "trainer/learning_rate", "optimizer.lr" all match).
ALIASES: dict[str, tuple[str, ...]] = {
    "optimizer": ("optimizer_name", "optimizer", "optim", "opt", "optimizer_type", "optimizer_class"),
    "lr": ("learning_rate", "lr", "base_lr", "max_lr", "initial_lr", "init_lr"),
    "adam_epsilon": ("adam_epsilon", "adam_eps", "eps", "epsilon", "optimizer_eps"),
    "weight_decay": ("weight_decay", "wd", "l2"),
    "max_grad_norm": ("max_grad_norm", "gradient_clip_val", "grad_clip", "clip_grad_norm", "grad_clip_norm", "clip_norm"),
    "fp16": ("fp16", "half_precision", "amp"),
    "bf16": ("bf16",),
    "warmup_steps": ("warmup_steps", "num_warmup_steps", "lr_warmup_steps", "warmup_iters"),
    "warmup_ratio": ("warmup_ratio", "warmup_fraction"),
    "per_device": ("per_device_train_batch_size", "train_batch_size", "batch_size", "bs", "train_bs",
                   "micro_batch_size", "per_gpu_train_batch_size"),
    "accumulation": ("gradient_accumulation_steps", "accumulate_grad_batches", "grad_accum_steps", "accumulation_steps"),
    "precision": ("precision",),  # Lightning: "16-mixed", "bf16-mixed", 16, 32
}
# Nested optimizer sections name the optimizer in one of these (Hydra's _target_, Lightning CLI's class_path).
_NAME_KEYS = ("name", "type", "_target_", "class_path", "cls")
_NONE = {"none", "null", "nil", ""}
# Lightning's `precision` values (old ints and the 2.x strings); others (32, "64-true") are full precision.
_PRECISIONS = {"16": "fp16", "16.0": "fp16", "16-mixed": "fp16", "16-true": "fp16",
               "bf16": "bf16", "bf16-mixed": "bf16", "bf16-true": "bf16"}
_TRUE, _FALSE = {"true", "yes", "on"}, {"false", "no", "off"}


def norm_key(key: str) -> str:
    """A key compared case- and separator-insensitively: "Learning-Rate" and "learning_rate" are one."""
    return re.sub(r"[\s\-]+", "_", key.strip().lower())


def unwrap(value: Any) -> Any:
    """W&B's API returns each config entry as ``{"value": x, "desc": …}``."""
    while isinstance(value, Mapping) and "value" in value and set(value) <= {"value", "desc"}:
        value = value["value"]
    return value


def flatten(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, leaf value)`` pairs, shallow keys first (a top-level ``lr`` wins over a nested one)."""
    out, nested = [], []
    for k, v in config.items():
        if str(k).startswith("_wandb"):  # W&B's own bookkeeping, not the user's config
            continue
        key = f"{prefix}{k}"
        v = unwrap(v)
        if isinstance(v, Mapping):
            nested.append((key, v))
        else:
            out.append((key, v))
    for key, v in nested:
        out.extend(flatten(v, key + "."))
    return out


def number(value: Any) -> float | None:
    """A finite number from a config value (a number, or a string that reads as one); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, str):
        try:
            x = float(value.strip())
        except ValueError:
            return None
        return x if math.isfinite(x) else None
    return None


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        return True if v in _TRUE else False if v in _FALSE else None
    return None


def _optimizer_name(value: Any) -> str | None:
    """``"torch.optim.AdamW"``, ``"OptimizerNames.ADAMW_TORCH"``, ``"adamw_torch"`` → ``adamw…``
    (lower case, without the module path)."""
    if isinstance(value, Mapping):
        for k in _NAME_KEYS:
            if k in value:
                return _optimizer_name(unwrap(value[k]))
        return None
    if not isinstance(value, str) or value.strip().lower() in _NONE:
        return None
    name = value.strip().rsplit(".", 1)[-1].lower()
    name = re.sub(r"[<>'\"()\s]", "", name)
    return name or None


def facts(config: Mapping[str, Any] | None) -> ConfigFacts:
    """The optimizer facts a run's config states; a fact it does not state is None."""
    if not config:
        return ConfigFacts()
    pairs = flatten(config)
    by_alias: dict[str, list[tuple[str, Any]]] = {}
    for key, value in pairs:
        by_alias.setdefault(norm_key(key.rsplit(".", 1)[-1]), []).append((key, value))

    def find(fact: str, parse):
        for alias in ALIASES[fact]:
            for key, value in by_alias.get(alias, ()):
                parsed = parse(value)
                if parsed is not None:
                    return Fact(parsed, key)
        return None

    optimizer = find("optimizer", _optimizer_name)
    if optimizer is None:  # {"optimizer": {"name": "adam", "lr": …}} was flattened to optimizer.name
        for key, value in pairs:
            head, _, leaf = key.rpartition(".")
            if norm_key(head.rsplit(".", 1)[-1]) in ALIASES["optimizer"] and leaf in _NAME_KEYS:
                name = _optimizer_name(value)
                if name:
                    optimizer = Fact(name, key)
                    break
    lr = find("lr", _positive)
    eps = find("adam_epsilon", _positive)
    batch = _batch_size(find("per_device", _positive_int), find("accumulation", _positive_int))
    clip = find("max_grad_norm", _clip_value)
    fp16 = find("fp16", _bool)
    bf16 = find("bf16", _bool)
    precision = find("precision", lambda v: str(v).strip().lower() if str(v).strip().lower() in _PRECISIONS else None)
    if precision is not None:
        if fp16 is None and _PRECISIONS[precision.value] == "fp16":
            fp16 = Fact(True, precision.key)
        if bf16 is None and _PRECISIONS[precision.value] == "bf16":
            bf16 = Fact(True, precision.key)
    warmup = find("warmup_steps", _positive) or find("warmup_ratio", _positive)
    return ConfigFacts(optimizer, lr, eps, batch, find("weight_decay", _non_negative), clip, fp16, bf16, warmup)


def _clip_value(value: Any) -> float | None:
    """The clip norm; 0.0 when the key says "no clipping" (0, None, "None" — HF and Lightning's off)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NONE):
        return 0.0
    x = number(value)
    if x is None:
        return None
    return max(x, 0.0)


def _positive(value: Any) -> float | None:
    x = number(value)
    return x if x is not None and x > 0 else None


def _non_negative(value: Any) -> float | None:
    x = number(value)
    return x if x is not None and x >= 0 else None


def _positive_int(value: Any) -> int | None:
    x = number(value)
    return int(x) if x is not None and x >= 1 and float(x).is_integer() else None


def _batch_size(per_device: Fact | None, accumulation: Fact | None) -> Fact | None:
    if per_device is None:
        return None
    if accumulation is None or accumulation.value == 1:
        return per_device
    return Fact(per_device.value * accumulation.value, f"{per_device.key}×{accumulation.key}")


# -- corroboration ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Thresholds:
    adam_eps_large: float = knob(1e-4, "slow-convergence: an Adam epsilon at or above this damps every update (Adam's usual is 1e-8)")
    adam_eps_swamping: float = knob(1e-2, "slow-convergence: an Adam epsilon at or above this outweighs sqrt(v) for almost every weight (gradient RMS is typically 1e-4 to 1e-2), so Adam steps like SGD at LR x (1 - beta1) / epsilon; with the loss still falling at the end, the run is slow")
    adam_eps_usual: float = knob(1e-8, "Adam's default epsilon, the yardstick a large one is compared with in the message")
    lr_small_adam: float = knob(1e-5, "slow-convergence: an Adam-family LR at or below this is very small")
    lr_small_sgd: float = knob(1e-4, "slow-convergence: an SGD LR at or below this is very small")
    lr_high_adam: float = knob(1e-2, "loss-oscillation/nonfinite: an Adam-family LR at or above this is high")
    lr_high_sgd: float = knob(0.5, "loss-oscillation/nonfinite: an SGD LR at or above this is high")
    small_batch: int = knob(4, "loss-oscillation: a batch (per optimizer step) of at most this many samples makes noisy gradients")


DEFAULTS = Thresholds()


def _lr_limits(family: str | None, t: Thresholds) -> tuple[float, float]:
    """(very small, high) LR for the optimizer family; unknown: only what holds for both."""
    if family == "adam":
        return t.lr_small_adam, t.lr_high_adam
    if family == "sgd":
        return t.lr_small_sgd, t.lr_high_sgd
    return min(t.lr_small_adam, t.lr_small_sgd), max(t.lr_high_adam, t.lr_high_sgd)


def _g(x: float) -> str:
    return f"{x:.3g}"


def _times(ratio: float) -> str:
    """``10^8`` for a power of ten (how far off an epsilon is reads best so), else 3 digits."""
    exponent = math.log10(ratio) if ratio > 0 else 0.0
    return f"10^{int(exponent)}" if exponent > 1 and exponent.is_integer() else _g(ratio)


def _family_words(cf: ConfigFacts) -> str:
    return cf.optimizer.value if cf.optimizer is not None else {"adam": "Adam (the HF default)"}.get(cf.optimizer_family, "an unknown optimizer")


def _optimizer_evidence(cf: ConfigFacts) -> list[Evidence]:
    if cf.optimizer is None:
        return []
    return [Evidence(f"config:{cf.optimizer.key}", None, code="config_optimizer",
                     detail=f"optimizer {cf.optimizer.value} ({cf.optimizer_family or 'unknown'} family): sets which LR counts as small or high")]


def _slow(cf: ConfigFacts, t: Thresholds) -> list[tuple[Evidence, str]]:
    out = []
    family = cf.optimizer_family
    if _adam_epsilon_at_least(cf, t.adam_eps_large):
        eps = cf.adam_epsilon.value
        ratio = eps / t.adam_eps_usual
        out.append((Evidence(f"config:{cf.adam_epsilon.key}", eps, t.adam_eps_large, code="config_adam_epsilon",
                             detail="Adam divides each update by sqrt(v) + epsilon"),
                    f"The config sets Adam epsilon to {_g(eps)}, {_times(ratio)} × the usual {_g(t.adam_eps_usual)}: "
                    "the update is divided by it."))
    small, _ = _lr_limits(family, t)
    if cf.lr is not None and cf.lr.value <= small:
        out.append((Evidence(f"config:{cf.lr.key}", cf.lr.value, small, code="config_lr",
                             detail=f"very small for {_family_words(cf)}"),
                    f"The config sets the learning rate to {_g(cf.lr.value)}, very small for {_family_words(cf)}."))
    return out


def _oscillation(cf: ConfigFacts, t: Thresholds) -> list[tuple[Evidence, str]]:
    out = []
    _, high = _lr_limits(cf.optimizer_family, t)
    if cf.lr is not None and cf.lr.value >= high:
        out.append((Evidence(f"config:{cf.lr.key}", cf.lr.value, high, code="config_lr",
                             detail=f"high for {_family_words(cf)}"),
                    f"The config sets the learning rate to {_g(cf.lr.value)}, high for {_family_words(cf)}."))
    if cf.batch_size is not None and cf.batch_size.value <= t.small_batch:
        out.append((Evidence(f"config:{cf.batch_size.key}", float(cf.batch_size.value), float(t.small_batch),
                             code="config_batch_size", detail="samples per optimizer step"),
                    f"The config sets a batch of {cf.batch_size.value} sample(s) per step: its gradient is mostly noise."))
    return out


def _nonfinite(cf: ConfigFacts, t: Thresholds) -> list[tuple[Evidence, str]]:
    out = []
    if cf.max_grad_norm is not None and cf.max_grad_norm.value == 0:
        out.append((Evidence(f"config:{cf.max_grad_norm.key}", 0.0, None, code="config_grad_clipping",
                             detail="no gradient clipping configured"),
                    "The config turns gradient clipping off, so one large gradient reaches the weights whole."))
    if cf.fp16 is not None and cf.fp16.value is True:
        out.append((Evidence(f"config:{cf.fp16.key}", 1.0, None, code="config_fp16",
                             detail="fp16 overflows above 65504"),
                    "The run trains in fp16, whose range ends at 65504: without a working loss scaler a large "
                    "activation or gradient becomes Inf."))
    _, high = _lr_limits(cf.optimizer_family, t)
    if cf.lr is not None and cf.lr.value >= high:
        out.append((Evidence(f"config:{cf.lr.key}", cf.lr.value, high, code="config_lr",
                             detail=f"high for {_family_words(cf)}"),
                    f"The config sets the learning rate to {_g(cf.lr.value)}, high for {_family_words(cf)}."))
    return out


# Which config facts can point at each diagnosis' likely cause.
CORROBORATORS = {
    "slow-convergence": _slow,
    "loss-oscillation": _oscillation,
    "nonfinite": _nonfinite,
}


def corroborate(findings: Sequence[Finding], cf: ConfigFacts, thresholds: Thresholds = DEFAULTS) -> tuple[Finding, ...]:
    """The findings, each problem whose cause the config supports with that config evidence and
    one sentence per fact added to its message. Levels and the set of findings are unchanged."""
    out = []
    for f in findings:
        rule = CORROBORATORS.get(f.id)
        if f.is_problem and rule is not None:
            found = rule(cf, thresholds)
            if found:
                evidence = [e for e, _ in found]
                if any(e.code == "config_lr" for e in evidence):
                    evidence += _optimizer_evidence(cf)
                message = " ".join([f.message, *(sentence for _, sentence in found)])
                f = dataclasses.replace(f, message=message, evidence=f.evidence + tuple(evidence))
        out.append(f)
    return tuple(out)


def promote(findings: Sequence[Finding], cf: ConfigFacts, thresholds: Thresholds = DEFAULTS) -> tuple[Finding, ...]:
    """The one place a config changes a level: slow-convergence's back-loaded note (a fall at an almost constant
    rate, an ``ok`` finding) becomes a warning when the config names a setting that slows every step — the Adam
    epsilon or the LR that :func:`corroborate` would cite for a slow run. The shape alone does not tell a slow run
    from one stopped mid-descent, and a config alone can be stale; the two agreeing can (torch corpus: every
    back-loaded run with such a config is a confirmed slow run; no healthy run has one). And any loss still falling
    significantly at its end becomes a warning when the logged Adam epsilon swamps the gradients (``adam_eps_swamping``):
    then the fall's shape does not matter, since every step was damped. Run it before
    :func:`explain.explain`, so that a stronger finding still explains the promoted one, and before
    :func:`corroborate`, which then adds the config's evidence and sentences."""
    return tuple(_promoted(f, cf, thresholds) for f in findings)


def _promoted(f: Finding, cf: ConfigFacts, t: Thresholds) -> Finding:
    if slow_convergence.is_back_loaded_note(f) and _slow(cf, t):
        return slow_convergence.confirmed_by_config(f)
    if slow_convergence.is_still_falling_note(f) and _epsilon_swamps(cf, t):
        return slow_convergence.slowed_by_epsilon(f)
    return f


def _epsilon_swamps(cf: ConfigFacts, t: Thresholds) -> bool:
    """``adam_eps_swamping`` or more: no healthy run of the torch corpus or the public logs has one (every torch run
    with epsilon 1.0 is slow by its twin)."""
    return _adam_epsilon_at_least(cf, t.adam_eps_swamping)


def _adam_epsilon_at_least(cf: ConfigFacts, bound: float) -> bool:
    """An Adam-family (or unnamed) optimizer whose logged epsilon is at least ``bound``; SGD has no epsilon."""
    return cf.adam_epsilon is not None and cf.optimizer_family != "sgd" and cf.adam_epsilon.value >= bound


# The corroboration rules in words, for docs/design.md (a test keeps the two the same).
RULES_TEXT = (
    ("slow-convergence", "`config_adam_epsilon`", "an Adam-family (or unnamed) optimizer's epsilon ≥ `adam_eps_large`"),
    ("slow-convergence", "`config_lr` (+ `config_optimizer`)", "LR ≤ `lr_small_adam` (Adam family) / `lr_small_sgd` (SGD); "
     "an unnamed optimizer must pass both"),
    ("loss-oscillation", "`config_lr` (+ `config_optimizer`)", "LR ≥ `lr_high_adam` (Adam family) / `lr_high_sgd` (SGD); "
     "an unnamed optimizer must pass both"),
    ("loss-oscillation", "`config_batch_size`", "samples per optimizer step (per-device batch × accumulation) ≤ `small_batch`"),
    ("nonfinite", "`config_grad_clipping`", "gradient clipping is configured off (`max_grad_norm` 0 or None, "
     "`gradient_clip_val` 0)"),
    ("nonfinite", "`config_fp16`", "fp16 training (`fp16`, Lightning `precision` 16)"),
    ("nonfinite", "`config_lr` (+ `config_optimizer`)", "LR ≥ the high LR for its family, as for loss-oscillation"),
)


def rules_markdown() -> str:
    rows = ["| finding | evidence code | when the config says |", "|---|---|---|"]
    rows += [f"| `{d}` | {code} | {when} |" for d, code, when in RULES_TEXT]
    return "\n".join(rows)
