"""Which of a run's logged config values define its loss (and what it trains), so that a group compares
like with like.

A group (``--group-by``, a W&B group, an MLflow parent run) compares its runs' loss *levels*: how
long a run took to reach the baseline's loss, whether it ended worse. That is only meaningful when
the runs compute the same loss. Two NT-Xent runs at temperatures 0.1 and 0.5, a U-Net trained on
Dice alone beside one on BCE + Dice, a beta-VAE at beta 4 beside beta 1: each pair shares model and
data, and the first of each ends far lower because its loss is a different function, not because it
trained better (measured on the torch corpus: a temperature-0.1 baseline made every healthy
temperature-0.5 run of its group "slow"). The curves cannot tell this apart; the config can.

:func:`loss_setting` reads the config entries whose key names a loss setting (the loss function,
a temperature, a loss term's weight, label smoothing, a positive-class weight, a margin, a KL
beta); :mod:`trackerhealth.cohort` then compares a run only with the runs of its group that agree
on every such entry that differs within the group. Optimisation settings (learning rate, epsilon,
batch size, schedule, weight decay, init) are never part of it: comparing runs that differ in
them is what a group is for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config_facts import flatten, norm_key, number

# A key's last component (normalised by config_facts.norm_key) that names a loss setting.
LOSS_FUNCTION_KEYS = ("loss", "loss_fn", "loss_type", "loss_name", "loss_function", "criterion", "objective")
LOSS_PARAMETER_KEYS = ("temperature", "tau", "label_smoothing", "label_smoothing_factor", "pos_weight",
                       "class_weight", "class_weights", "margin", "beta", "kl_weight", "kl_beta", "focal_gamma",
                       # Mixup and CutMix mix the targets the train loss is computed on, so their strength sets
                       # its level as label smoothing does (timm's and DeiT's flags: --mixup 0.8 --cutmix 1.0
                       # --smoothing 0.1). Measured on the torch family mixup: alpha 1.0 ends its train loss
                       # 1.16 where alpha 0.4 ends at 0.80, both healthy.
                       "smoothing", "mixup", "mixup_alpha", "cutmix", "cutmix_alpha", "mixup_prob", "cutmix_prob")
# What is trained sets the loss a run can reach as much as what is minimised: a linear probe on a frozen
# backbone (or a LoRA adapter) plateaus above a full fine-tune of the same model on the same data, and is
# not slower for it. Measured on the torch family finetune: grouped with its full fine-tuning siblings,
# its healthy linear probe was "slow" against them. (Written after seeing that group: not held out.)
TRAINING_SCOPE_KEYS = ("freeze", "freeze_backbone", "freeze_encoder", "freeze_layers", "frozen_layers",
                       "linear_probe", "train_backbone", "trainable_layers", "use_lora", "lora_r", "lora_rank", "peft",
                       "peft_type")
# Loss-term weights by their usual spellings: w_dice, aux_loss_weight, lambda_kl, kl_coef.
LOSS_WEIGHT_PREFIXES = ("w_", "lambda_")
LOSS_WEIGHT_SUFFIXES = ("_weight", "_weights", "_lambda", "_coef", "_coeff")
# Names that match the patterns above and are not a loss setting (an fp16 scaler's loss scale is
# how the gradient is computed, not what is minimised).
NOT_LOSS_SETTINGS = ("loss_scale", "loss_scaling", "init_loss_scale", "initial_loss_scale", "sample_weight",
                     "init_weight", "ema_weight")

LossSetting = tuple[tuple[str, str], ...]


def is_loss_setting(key: str) -> bool:
    """Whether a config key (dotted when nested) names a loss setting."""
    name = norm_key(key.rsplit(".", 1)[-1])
    if name in NOT_LOSS_SETTINGS:
        return False
    return (name in LOSS_FUNCTION_KEYS or name in LOSS_PARAMETER_KEYS or name in TRAINING_SCOPE_KEYS
            or name.startswith(LOSS_WEIGHT_PREFIXES) or name.endswith(LOSS_WEIGHT_SUFFIXES))


def _canonical(value: Any) -> str:
    """One spelling per value: MLflow's ``"0.50"`` and W&B's ``0.5`` are one temperature."""
    x = number(value)
    return f"{x:g}" if x is not None else str(value).strip().lower()


def loss_setting(config: Mapping[str, Any] | None) -> LossSetting:
    """The run's loss-defining config entries, ``((key, value), …)`` sorted by key. A loss
    function's key holding a number (a logged loss value, not a function) is left out."""
    out: dict[str, str] = {}
    for key, value in flatten(config or {}):
        if value is None or not is_loss_setting(key):
            continue
        name = norm_key(key.rsplit(".", 1)[-1])
        if name in LOSS_FUNCTION_KEYS and number(value) is not None:
            continue
        out.setdefault(key, _canonical(value))
    return tuple(sorted(out.items()))


def split_by_setting(settings: Mapping[str, LossSetting]) -> dict[LossSetting, list[str]]:
    """The members of one group (run id → its :func:`loss_setting`), split by the loss entries
    that differ among them: ``{(the differing (key, value) pairs), …: [run ids]}``. A key a run
    did not log is the value ``(none)`` for it. When no entry differs, one part with key ``()``."""
    keys = sorted({k for s in settings.values() for k, _ in s})
    values = {run_id: dict(s) for run_id, s in settings.items()}
    differing = [k for k in keys if len({v.get(k, "(none)") for v in values.values()}) > 1]
    parts: dict[LossSetting, list[str]] = {}
    for run_id, v in values.items():
        parts.setdefault(tuple((k, v.get(k, "(none)")) for k in differing), []).append(run_id)
    return parts
