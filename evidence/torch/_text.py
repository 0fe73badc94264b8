"""Character-level text the installed packages ship: the data the rnn and transformer families train on.

The text is sklearn's dataset descriptions (``sklearn/datasets/descr/*.rst``) plus the long descriptions
(dist-info METADATA bodies) of a fixed, sorted list of packages, so the corpus is the same on every
machine with these packages. Markup is stripped only where it is pure noise (URLs, runs of
punctuation used as rules); the rest is prose as written.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from .family_runs import manifest_entry

# Fixed and sorted: which packages' long descriptions are read (present in the project's venv).
PACKAGES = ("click", "mlflow", "pandas", "prettytable", "rich", "sympy", "threadpoolctl", "torch", "tqdm", "typer")
MAX_CHARS_PER_PACKAGE = 20_000
SEQ_LEN = 64
UNKNOWN = "\x00"  # rare characters fold into one symbol, so the vocabulary stays small
MIN_COUNT = 20


def _strip(text: str) -> str:
    text = re.sub(r"https?://\S+", "", text)
    text = re.sub(r"^[=\-~^*#`+_]{4,}\s*$", "", text, flags=re.M)  # rst/markdown rules and underlines
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n{3,}", "\n\n", text)


@lru_cache(maxsize=1)
def corpus_text() -> str:
    import sklearn.datasets

    descr = Path(sklearn.datasets.__file__).parent / "descr"
    parts = [p.read_text(encoding="utf-8") for p in sorted(descr.glob("*.rst"))]
    for name in PACKAGES:
        body = importlib.metadata.distribution(name).metadata.get_payload() or ""
        parts.append(body[:MAX_CHARS_PER_PACKAGE])
    return _strip("\n\n".join(parts))


@dataclass(frozen=True)
class Vocab:
    chars: str

    @property
    def size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        index = {c: i for i, c in enumerate(self.chars)}
        unk = index[UNKNOWN]
        return torch.tensor([index.get(c, unk) for c in text], dtype=torch.long)

    def rare(self, n: int) -> list[int]:
        """The ``n`` least frequent symbols (the vocabulary is ordered by frequency)."""
        return list(range(self.size - n, self.size))


@lru_cache(maxsize=1)
def vocab() -> Vocab:
    counts = Counter(corpus_text())
    kept = [c for c, n in counts.most_common() if n >= MIN_COUNT]
    return Vocab("".join(kept) + UNKNOWN)


def windows(ids: torch.Tensor, seq_len: int = SEQ_LEN, stride: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-character targets of fixed-length windows (non-overlapping unless ``stride``)."""
    stride = stride or seq_len
    starts = torch.arange(0, len(ids) - seq_len - 1, stride)
    x = torch.stack([ids[s:s + seq_len] for s in starts])
    y = torch.stack([ids[s + 1:s + seq_len + 1] for s in starts])
    return x, y


def splits(train_chars: int | None = None, stride: int | None = None, seq_len: int = SEQ_LEN):
    """(train x, train y), (val x, val y): the last 10 % of the text is validation; ``train_chars``
    keeps only the first so many characters for training (a tiny train set, to overfit)."""
    ids = vocab().encode(corpus_text())
    cut = int(len(ids) * 0.9)
    train_ids, val_ids = ids[:cut], ids[cut:]
    if train_chars is not None:
        train_ids = train_ids[:train_chars]
    return windows(train_ids, seq_len, stride), windows(val_ids, seq_len)


def raw_train_text(train_chars: int | None = None) -> str:
    """The training text as characters (for loaders that tokenise on the fly)."""
    text = corpus_text()
    text = text[: int(len(text) * 0.9)]
    return text if train_chars is None else text[:train_chars]


# --- What the two language-model families share: the loss, the val loss, the manifest entry. ---

def lm_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def val_loss_fn(model: torch.nn.Module, val: tuple[torch.Tensor, torch.Tensor], limit: int = 128):
    """Mean val cross-entropy on the first ``limit`` val windows (a fixed subset: cheap, comparable)."""
    x, y = val[0][:limit], val[1][:limit]

    def fn() -> float:
        model.eval()
        with torch.no_grad():
            value = float(lm_loss(model(x), y))
        model.train()
        return value
    return fn


def entry(family: str, name: str, model: str, style: str, file: str, **fields) -> dict:
    """A text family's manifest entry (:func:`evidence.torch.family_runs.manifest_entry` on the package text)."""
    return manifest_entry(family, name, model, "pkg-text-chars", style, file, **fields)
