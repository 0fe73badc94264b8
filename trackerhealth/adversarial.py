"""Whether a run's training loss is one side of an adversarial pair (a GAN's generator or discriminator).

A GAN's two losses are a game, not a descent: the generator's loss commonly rises while the
discriminator learns (public log P501, a BEGAN whose generator loss went 0.009 -> 0.05 over a healthy
run), and a hinge discriminator's loss sits flat at its equilibrium (P463). The rules that read a
falling loss as learning — a loss that rose, never learned, crawls, or stands 10x its start — do not
apply to either side; what still does is a NaN, an exploding gradient and the other diagnoses.

Recognised by key names alone, and only as a pair: a loss key naming the generator (``G_loss``,
``loss_gen``, ``Generator loss``, ``errG``, ``lossG``, Keras' ``gan_loss``) with another naming the discriminator or critic
(``D_loss``, ``loss_dis``, ``critic_loss``, ``errD``), or the other way round. One key that happens to
end in ``_d`` is not a GAN.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# "gan": Keras' DCGAN recipe trains the generator through a combined model named "gan" (the discriminator frozen inside
# it), so its ``gan_loss`` is the generator's (public log P635, beside disc_real_loss and disc_fake_loss).
GENERATOR = frozenset({"g", "gen", "generator", "netg", "gan"})
DISCRIMINATOR = frozenset({"d", "dis", "disc", "discriminator", "critic", "netd"})
LOSS_WORDS = frozenset({"loss", "err", "error"})

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def _tokens(key: str) -> set[str]:
    """``lossD`` -> {"loss", "d"}; ``train/Gen Loss`` -> {"train", "gen", "loss"}.

    Not :func:`trackerhealth.roles.tokens`: that one keeps ``lossD`` and ``errG`` one word, and here the lone
    trailing capital is the whole point (DCGAN's ``errD``/``errG``, ``lossG``)."""
    return {t for t in _SEPARATORS.split(_CAMEL.sub(" ", key).lower()) if t}


def side(key: str) -> str | None:
    """``"generator"`` or ``"discriminator"`` when ``key`` names that side's loss, else None."""
    tokens = _tokens(key)
    if not tokens & LOSS_WORDS:
        return None
    gen, dis = bool(tokens & GENERATOR), bool(tokens & DISCRIMINATOR)
    if gen == dis:  # neither, or both ("lossG+lossD": the pair's sum is no one side)
        return None
    return "generator" if gen else "discriminator"


def counterpart(loss_key: str | None, keys: Iterable[str]) -> str | None:
    """The key of the other side's loss when ``loss_key`` is one side of an adversarial pair, else None."""
    if loss_key is None:
        return None
    mine = side(loss_key)
    if mine is None:
        return None
    return next((k for k in keys if k != loss_key and side(k) not in (None, mine)), None)
