"""The sgns family: word2vec skip-gram with negative sampling on the words of the package text (:mod:`._text`).

The data: the parts of the package text (scikit-learn's 14 dataset descriptions and the 10 packages' long descriptions,
each cleaned as ``_text.corpus_text`` cleans them), lower-cased and cut into word tokens (letters with inner
apostrophes, or digit runs); the last tenth of each part's tokens is validation (2383 tokens), the rest training
(21437). The vocabulary is the training words seen at least 3 times (1334, most frequent first) plus one UNK id for
every other word (2671 training tokens). The training pairs are precomputed once, seeded, as word2vec makes them: each
token kept with word2vec's subsampling probability ``(sqrt(f / t) + 1) t / f`` (t = 1e-3; 74 % of the tokens kept), each
kept position a centre with a window b drawn from 1..5, paired with each kept word within b of it in its part: 93,521
pairs, stored in text order (the order an unshuffled loader reads). Each batch draws 5 negatives per pair from a
100,000-entry unigram^0.75 table with a generator seeded per epoch. The val set is 2000 pairs drawn once (seeded) from
the val tokens, subsampled and windowed the same way, each with 5 fixed negatives, so every check of every run reads the
same pairs; each check logs the SGNS loss on them and the share of them whose context scores above all five of its
negatives (``val/acc`` under W&B names; ~0.40 for the baseline, 1/6 by chance).

The **model** (``SGNS``) is an input (centre) and an output (context) embedding table (1335 x 48 each), initialised as
word2vec's C code does (input rows uniform in +-0.5/d, output rows zero); the score of a candidate is the dot product of
the centre's input row with the candidate's output row, and the loss is ``-log s(u.v) - sum_k log s(-u.v_k)`` (the
summed logistic loss of the context, label 1, and its 5 negatives, label 0), averaged over the batch. Variants: CBOW
(the mean of the context bag's input rows scores the centre word); window 10 and d 64; a 12-layer sigmoid MLP stack (48
wide) between the input row and the dot product, without/with residual connections (the vanishing pair); d 256 with
dropout on the centre vector (the overfitting pair). The input table's and the output table's gradient norms are logged
(and the stack's first and last layers where it has one).

The task-imbalance pair adds a linear head (``aux``: d -> 1) on the centre vector regressing the centre word's count in
the training text, MSE, summed with the SGNS loss; both terms are logged beside the total (``train/loss_sgns``,
``train/loss_freq``).

Built blind to the detectors: nothing under ``trackerhealth/diagnoses/`` nor the scoring was read or run while building
it. Settings are a practitioner's (Adam 5e-3 constant, batch 256 pairs, 600 steps, ~1.6 epochs; SGD momentum 0.9, clip
1.0, constant, for the SGD faults at the LR a sweep of the SGD twin alone chose, see :data:`SGD`); every fault run has a
twin with the one setting put right (same seed and data) and its label is what :mod:`.truth` confirms against it. A
comment at a run says so where its setting was changed after its truth check (once at most).

Result (34 runs, 14 fault runs and 20 meant healthy, twins included): the twins confirm 12 of the 14 faults (Adam lr 0.5
(60x the twin's level, swing 3.3x), SGD lr 20 with clip 1.0 (57x, rising), batch 2 (1.96x, swing 1.65x), Adam lr 1e-5
and eps 1.0 (flat at 4.159 = 6 ln 2: the flat case, ``one_of`` loss-oscillation / slow-convergence), an LR spike x1000
at step 400 under SGD (gradient norm 3.4e3x the twin's median, no NaN), a NaN label at step 400, SGD lr 200 unclipped
(NaN from step 78), two label-inverted batches met unshuffled (3 of 6 shard steps >= 3x the twin, the other three
2.95-2.99x), a 12-layer plain sigmoid stack (the input table's gradient ~3e-13, the twin's ~0.05), a 0.25 ms/pair loader
(throughput 0.04x), the first 2000 tokens fitted at d 256 without dropout or weight decay (val 5.38 against the
regularised twin's 3.68)). Not confirmed, kept but not scored: init x1e-3 under SGD (1.6x slower, not 4x; not changed)
and the raw-count frequency head (its SGNS term stalled, 0.4 %, but its twin, with the count z-scored and, changed once,
the log count z-scored, was itself unstable at the SGD lr: 22 % and 13 %, short of the 30 % the check asks). 19 of the
20 runs meant healthy pass the healthy check; the frequency head's twin (its total rose) does not. Not built: one
oversized batch (a pair has no size), heavy preprocessing and too few workers (the slow loader alone stands for the
input bottleneck).
"""

from __future__ import annotations

import importlib.metadata
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from . import _text, truth
from ._pipeline import SlowIODataset
from .common import NAMES, early_stopping, fit, lr_spike, make_optimizer, make_scheduler, seed_all, shrink_init
from .family_runs import (FamilyRuns, TwinChecks, batches_per_epoch, describe_injections, shard_steps_for,
                          with_val_extras)
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .sinks import open_run

FAMILY = "sgns"
SEED = 97
TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)*|[0-9]+")
MIN_COUNT = 3
VAL_FRACTION = 0.1
SUBSAMPLE_T = 1e-3
NOISE_POWER = 0.75
TABLE_SIZE = 100_000
N_VAL_PAIRS = 2000
DATASET = ("pkg-text-words: lower-cased word tokens of the package text (_text.py), the last tenth of each part's "
           "tokens for validation; skip-gram (centre, context) pairs")


# --- The data: tokens, vocabulary, subsampling, the noise table, the stored pairs, the fixed val pairs. ---

@lru_cache(maxsize=1)
def text_parts() -> tuple[str, ...]:
    """The parts :func:`._text.corpus_text` joins (scikit-learn's dataset descriptions, then the packages' long
    descriptions), each cleaned as it cleans the whole."""
    import sklearn.datasets

    descr = Path(sklearn.datasets.__file__).parent / "descr"
    parts = [p.read_text(encoding="utf-8") for p in sorted(descr.glob("*.rst"))]
    for name in _text.PACKAGES:
        body = importlib.metadata.distribution(name).metadata.get_payload() or ""
        parts.append(body[:_text.MAX_CHARS_PER_PACKAGE])
    return tuple(_text._strip(p) for p in parts)


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower())


@lru_cache(maxsize=1)
def corpus() -> dict:
    """Per part, its first 90 % of tokens for training and the last 10 % for validation; the vocabulary of the training
    words seen at least ``MIN_COUNT`` times (most frequent first), every other word one UNK id (the last); the training
    counts per id, word2vec's subsampling keep-probabilities and the unigram^0.75 noise table."""
    parts = [tokens(p) for p in text_parts()]
    cuts = [len(p) - max(1, round(VAL_FRACTION * len(p))) for p in parts]
    train_words = [w for p, c in zip(parts, cuts) for w in p[:c]]
    counts: dict[str, int] = {}
    for w in train_words:
        counts[w] = counts.get(w, 0) + 1
    words = sorted((w for w, n in counts.items() if n >= MIN_COUNT), key=lambda w: (-counts[w], w))
    index = {w: i for i, w in enumerate(words)}
    unk = len(words)

    def encode(ws):
        return np.array([index.get(w, unk) for w in ws], dtype=np.int64)

    train = [encode(p[:c]) for p, c in zip(parts, cuts)]
    val = [encode(p[c:]) for p, c in zip(parts, cuts)]
    freq = np.bincount(np.concatenate(train), minlength=unk + 1).astype(np.float64)
    f = freq / freq.sum()
    keep = np.minimum(1.0, (np.sqrt(f / SUBSAMPLE_T) + 1) * SUBSAMPLE_T / np.maximum(f, 1e-12))
    noise = freq ** NOISE_POWER
    noise /= noise.sum()
    table = np.repeat(np.arange(unk + 1), np.round(noise * TABLE_SIZE).astype(np.int64))
    return {"words": words + ["<unk>"], "train": train, "val": val, "count": freq, "keep": keep,
            "table": torch.from_numpy(table), "vocab": unk + 1, "n_train_tokens": sum(len(t) for t in train),
            "n_val_tokens": sum(len(v) for v in val)}


def vocab_size() -> int:
    return corpus()["vocab"]


def skipgram_pairs(parts: list[np.ndarray], window: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """word2vec's pairs: each part subsampled (a word kept with its keep-probability), then every kept position a centre
    with a window b drawn uniformly from 1..``window``, paired with each kept word within b of it; in text order
    (the stored order), centre by centre."""
    keep = corpus()["keep"]
    cs, os_, pos = [], [], []
    base, slots = 0, 2 * window + 1
    for ids in parts:
        ids = ids[rng.random(len(ids)) < keep[ids]]
        b = rng.integers(1, window + 1, len(ids))
        n = len(ids)
        for o in range(1, window + 1):
            if o >= n:
                break
            fwd = np.flatnonzero(b[:n - o] >= o)  # centre i, context i + o
            bwd = np.flatnonzero(b[o:] >= o)  # centre i + o, context i
            cs += [ids[fwd], ids[bwd + o]]
            os_ += [ids[fwd + o], ids[bwd]]
            pos += [base + fwd * slots + (window + o), base + (bwd + o) * slots + (window - o)]
        base += n * slots
    order = np.argsort(np.concatenate(pos), kind="stable")
    return np.concatenate(cs)[order], np.concatenate(os_)[order]


def cbow_examples(parts: list[np.ndarray], window: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """CBOW's examples: (the kept words within b of each kept position, padded with the pad id, the word there)."""
    keep = corpus()["keep"]
    pad = vocab_size()
    bags, targets = [], []
    for ids in parts:
        ids = ids[rng.random(len(ids)) < keep[ids]]
        b = rng.integers(1, window + 1, len(ids))
        n = len(ids)
        bag = np.full((n, 2 * window), pad, dtype=np.int64)
        for o in range(1, window + 1):
            if o >= n:
                break
            left = np.arange(o, n)
            use = b[left] >= o
            bag[left[use], window - o] = ids[left[use] - o]
            right = np.arange(0, n - o)
            use = b[right] >= o
            bag[right[use], window + o - 1] = ids[right[use] + o]
        ok = (bag != pad).any(1)
        bags.append(bag[ok])
        targets.append(ids[ok])
    return np.concatenate(bags), np.concatenate(targets)


@lru_cache(maxsize=8)
def train_pairs(window: int, n_tokens: int | None, cbow: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The stored training examples (precomputed once, seeded): pairs of ids, or CBOW bags and targets. ``n_tokens``
    keeps only the first so many tokens of the training stream (a small slice of the text)."""
    parts = corpus()["train"]
    if n_tokens is not None:
        parts = [np.concatenate(parts)[:n_tokens]]
    rng = np.random.default_rng(SEED + 11 + window)
    a, b = (cbow_examples if cbow else skipgram_pairs)(parts, window, rng)
    return torch.from_numpy(a), torch.from_numpy(b)


def draw_negatives(n: int, k: int, g: torch.Generator) -> torch.Tensor:
    table = corpus()["table"]
    return table[torch.randint(len(table), (n, k), generator=g)]


@lru_cache(maxsize=4)
def val_set(window: int, cbow: bool, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed seeded draw of ``N_VAL_PAIRS`` examples of the val tokens (subsampled and windowed as the training
    ones), each with ``k`` fixed negatives from the noise table: (centres or bags, candidates [context, negatives])."""
    rng = np.random.default_rng(SEED + 1)
    a, b = (cbow_examples if cbow else skipgram_pairs)(corpus()["val"], window, rng)
    pick = np.sort(rng.choice(len(a), min(N_VAL_PAIRS, len(a)), replace=False))
    a, b = torch.from_numpy(a[pick]), torch.from_numpy(b[pick])
    negs = draw_negatives(len(a), k, torch.Generator().manual_seed(SEED + 2))
    return a, torch.cat([b[:, None], negs], dim=1)


# --- The model. ---

class SGNS(nn.Module):
    """An input (centre) and an output (context) embedding table, initialised as word2vec's C code does (input
    uniform in +-0.5/d, output zeros). A centre's vector is its input row (CBOW: the mean of its context bag's rows),
    optionally through a dropout and a deep MLP stack of sigmoid layers (``residual`` adds each layer's input to its
    output); the score of a candidate is the dot product with its output row. ``aux``: a linear head on the centre
    vector."""

    def __init__(self, vocab: int, d: int, stack_layers: int = 0, residual: bool = False, aux: bool = False,
                 cbow: bool = False, dropout: float = 0.0):
        super().__init__()
        self.cbow = cbow
        self.in_embed = nn.Embedding(vocab + (1 if cbow else 0), d, padding_idx=vocab if cbow else None)
        self.out_embed = nn.Embedding(vocab, d)
        with torch.no_grad():
            self.in_embed.weight.uniform_(-0.5 / d, 0.5 / d)
            if cbow:
                self.in_embed.weight[vocab].zero_()
            self.out_embed.weight.zero_()
        self.drop = nn.Dropout(dropout)
        self.stack = nn.ModuleList([nn.Linear(d, d) for _ in range(stack_layers)])
        self.residual = residual
        self.aux = nn.Linear(d, 1) if aux else None

    def centre(self, x: torch.Tensor) -> torch.Tensor:
        if self.cbow:
            mask = (x != self.in_embed.padding_idx).float()
            h = self.in_embed(x).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        else:
            h = self.in_embed(x)
        h = self.drop(h)
        for lin in self.stack:
            h = h + torch.sigmoid(lin(h)) if self.residual else torch.sigmoid(lin(h))
        return h

    def scores(self, h: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        return (self.out_embed(cands) * h[:, None, :]).sum(-1)

    def forward(self, x: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
        return self.scores(self.centre(x), cands)


def sgns_terms(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each example's SGNS loss: -log s(u.v) - sum_k log s(-u.v_k) as the summed logistic loss of its candidates
    against their labels (1 for the context, 0 for each negative)."""
    return F.binary_cross_entropy_with_logits(scores, labels, reduction="none").sum(1)


BASE = {"optimizer": "adam", "lr": 5e-3, "eps": 1e-8, "batch_size": 256, "weight_decay": 0.0, "init": "default",
        "d": 48, "window": 5, "negatives": 5, "arch": "skipgram", "stack_layers": 0, "residual": False,
        "dropout": 0.0, "aux": None, "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0,
        "clip": None, "max_steps": 600, "n_tokens": None, "early_stop": None, "label_noise": 0.0, "bad_shard": None}
# The base recipe was tried alone before any fault ran (the twin only; the last val loss): Adam at 500 steps 3e-3 2.515,
# 5e-3 2.417, 1e-2 2.450, 3e-2 2.889 (min 2.609: overfitting); at 600 steps 3e-3 2.464, 5e-3 2.395, 1e-2 2.460; d 32
# 2.434 and d 64 2.479 against d 48's 2.450 (1e-2, 500 steps). SGD momentum 0.9, constant, clip 1.0 for the SGD faults'
# twin, its lr picked by a sweep of that twin alone: at 500 steps 1.0 2.628, 3.0 2.495, 10 32.8 (rising), 30 395, 100
# 4245; at 600 steps 2.0 2.481, 3.0 2.500, 5.0 2.694. (The mean over the batch spreads each row's gradient over 256
# pairs: hence an SGD lr in units.)
SGD = {"optimizer": "sgd", "lr": 2.0, "weight_decay": 0.0, "schedule": "constant", "clip": 1.0}


def scheduler_for(opt, cfg: dict):
    """A cosine decay to 1 % over ``decay_steps`` that then idles there; else :func:`.common.make_scheduler`."""
    if cfg["schedule"] == "decay_then_idle":
        d = cfg["decay_steps"]
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * min(s, d) / d)))
    return make_scheduler(opt, cfg)


def model_name(cfg: dict) -> str:
    name = f"{'cbow' if cfg['arch'] == 'cbow' else 'sgns'}-w2v-d{cfg['d']}-win{cfg['window']}-neg{cfg['negatives']}"
    if cfg["stack_layers"]:
        name += f"-sigmoidstack{cfg['stack_layers']}" + ("-res" if cfg["residual"] else "-plain")
    if cfg["dropout"]:
        name += f"-drop{cfg['dropout']:g}"
    return name + ("-freqhead" if cfg["aux"] else "")


def grad_layers(cfg: dict) -> tuple[str, ...]:
    names = ["in_embed.weight"]
    k = cfg["stack_layers"]
    if k:
        names += ["stack.0.weight", f"stack.{k - 1}.weight"]
    names.append("out_embed.weight")
    if cfg["aux"]:
        names.append("aux.weight")
    return tuple(names)


def build_model(cfg: dict) -> SGNS:
    seed_all(cfg["seed"])
    model = SGNS(vocab_size(), cfg["d"], cfg["stack_layers"], cfg["residual"], cfg["aux"] is not None,
                 cfg["arch"] == "cbow", cfg["dropout"])
    return shrink_init(model, cfg["init"])


def epoch_order(n: int, cfg: dict, epoch: int) -> list[torch.Tensor]:
    """Index batches: shuffled each epoch, or the stored (text) order every epoch."""
    if cfg["shuffle"]:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(cfg["seed"] * 1000 + epoch))
    else:
        order = torch.arange(n)
    b = cfg["batch_size"]
    return [order[i:i + b] for i in range(0, n, b)]


def batches_for(data: tuple, aux_target: torch.Tensor, cfg: dict):
    """``batches(epoch)`` yielding (centres, candidates [context, k negatives], labels [1, 0 x k], aux targets): the
    negatives drawn from the noise table by a generator seeded per epoch, from memory or through a DataLoader of
    example ids (``fast`` / ``slow_io``). ``label_noise``: that share of the contexts replaced by uniformly random
    words. ``bad_shard``: those batch positions of every epoch were exported with the label column inverted."""
    centres, contexts = data
    n, k, v = len(centres), cfg["negatives"], vocab_size()
    shard = set(cfg["bad_shard"] or ())
    template = torch.tensor([1.0] + [0.0] * k)

    def collate(idx, j, g):
        ctx = contexts[idx]
        if cfg["label_noise"]:
            flip = torch.rand(len(idx), generator=g) < cfg["label_noise"]
            ctx = torch.where(flip, torch.randint(v, (len(idx),), generator=g), ctx)
        cands = torch.cat([ctx[:, None], draw_negatives(len(idx), k, g)], dim=1)
        labels = template.expand(len(idx), -1).clone()
        if j in shard:
            labels = 1.0 - labels
        return centres[idx], cands, labels, aux_target[idx]

    if cfg["loader"] == "memory":
        def batches(epoch):
            g = torch.Generator().manual_seed(cfg["seed"] * 7919 + epoch)
            for j, idx in enumerate(epoch_order(n, cfg, epoch)):
                yield collate(idx, j, g)
        return batches
    ids = torch.arange(n)
    dataset = TensorDataset(ids, ids) if cfg["loader"] == "fast" else SlowIODataset(ids, ids, cfg["io_delay_s"])

    def loader(epoch):
        g = torch.Generator().manual_seed(cfg["seed"] * 7919 + epoch)
        sampler = [idx.tolist() for idx in epoch_order(n, cfg, epoch)]
        for j, (got, _) in enumerate(DataLoader(dataset, batch_sampler=sampler, num_workers=cfg["num_workers"])):
            yield collate(got, j, g)
    return loader


def nan_label_at(step: int):
    """A corrupt record: the label of the context of the first pair in the batch met at ``step`` reads NaN (a corrupt
    row of the label column); every other batch is untouched."""
    def wrap(batches, n_per_epoch):
        def gen(epoch):
            for j, batch in enumerate(batches(epoch)):
                if epoch * n_per_epoch + j + 1 == step:
                    labels = batch[2].clone()
                    labels[0, 0] = float("nan")
                    batch = batch[:2] + (labels,) + batch[3:]
                yield batch
        return gen
    wrap.label = f"NaN label of one pair at step {step}"
    return wrap


def sgns_loss(cfg: dict):
    """``loss_fn`` for :func:`.common.fit`: the SGNS loss averaged over the batch, or with the frequency head (total,
    {"sgns", "freq"})."""
    def fn(model, batch):
        x, cands, labels, a = batch
        h = model.centre(x)
        loss = sgns_terms(model.scores(h, cands), labels).mean()
        if cfg["aux"] is None:
            return loss
        freq = F.mse_loss(model.aux(h).squeeze(-1), a)
        return loss + freq, {"sgns": loss, "freq": freq}
    return fn


def loss_label(cfg: dict) -> str:
    k = cfg["negatives"]
    label = f"SGNS: -log s(u.v) - sum of {k} log s(-u.v_k), batch mean"
    if cfg["arch"] == "cbow":
        label = f"CBOW with negative sampling: -log s(h.v) - sum of {k} log s(-h.v_k), h the mean of the context bag"
    if cfg["aux"] == "raw":
        label += " + frequency-head MSE (the centre word's raw training count, weight 1)"
    elif cfg["aux"] == "scaled":
        label += " + frequency-head MSE (the centre word's z-scored training count, weight 1)"
    elif cfg["aux"] == "scaled_log":
        label += " + frequency-head MSE (the centre word's z-scored log training count, weight 1)"
    if cfg["label_noise"]:
        label += f"; {cfg['label_noise']:.0%} of the contexts replaced by random words"
    return label


def val_fn_for(model: SGNS, cfg: dict, state: dict):
    """The SGNS loss on the fixed val pairs and their fixed negatives; ``state["acc"]``: the share of val pairs whose
    true context scores above all of its negatives."""
    x, cands = val_set(cfg["window"], cfg["arch"] == "cbow", cfg["negatives"])
    labels = torch.tensor([1.0] + [0.0] * cfg["negatives"]).expand(len(x), -1)

    def fn() -> float:
        model.eval()
        with torch.no_grad():
            s = model(x, cands)
            loss = float(sgns_terms(s, labels).mean())
            state["acc"] = float((s[:, 0:1] > s[:, 1:]).all(1).float().mean())
        model.train()
        return loss
    return fn


class Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, over: dict, *, before_step=None, corrupt=None,
              val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **over}
        c = corpus()
        x, y = train_pairs(cfg["window"], cfg["n_tokens"], cfg["arch"] == "cbow")
        centre_ids = y if cfg["arch"] == "cbow" else x
        count = torch.from_numpy(c["count"]).float()[centre_ids]
        log_count = torch.log1p(count)
        aux_target = {"scaled": (count - count.mean()) / count.std(), "raw": count,
                      "scaled_log": (log_count - log_count.mean()) / log_count.std()}.get(cfg["aux"], count)
        model = build_model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for((x, y), aux_target, cfg)
        if corrupt is not None:
            batches = corrupt(batches, batches_per_epoch(cfg, len(x)))
        state = {"acc": float("nan")}
        val_fn = val_fn_for(model, cfg, state)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(x), n_val=N_VAL_PAIRS,
                      loss=loss_label(cfg), task="word embeddings: word2vec skip-gram with negative sampling"
                      if cfg["arch"] != "cbow" else "word embeddings: word2vec CBOW with negative sampling",
                      vocab=vocab_size(), min_count=MIN_COUNT, subsample_t=SUBSAMPLE_T, noise_power=NOISE_POWER,
                      n_train_tokens=c["n_train_tokens"] if cfg["n_tokens"] is None else cfg["n_tokens"],
                      n_val_tokens=c["n_val_tokens"])
        if cfg["bad_shard"]:
            logged["bad_shard"] = (f"batches {list(cfg['bad_shard'])} of every epoch exported with the label column "
                                   "inverted (1 for the negatives, 0 for the context)")
        describe_injections(logged, corrupt=corrupt, before_step=before_step)
        log = open_run(style, self.root, name, logged)
        names = NAMES[naming]
        acc_key = names["val_loss"].replace("loss", "acc")
        log.log = with_val_extras(log.log, names["val_loss"], lambda: {acc_key: state["acc"]})
        res = fit(model, batches, sgns_loss(cfg), opt, log, epochs=100_000, naming=naming,
                  scheduler=scheduler_for(opt, cfg), val_fn=val_fn, val_every=val_every, log_every=log_every,
                  layer_grads=grad_layers(cfg), clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = Runs(root)
    book = TwinChecks(runs, only, default_twin="sgns_twin_adam")
    want, twin_run, fault = book.wanted, book.twin, book.fault
    W = NAMES[book.naming]
    key, val_key = book.key, book.val_key
    osc, slow, boom = book.oscillation, book.slowness, book.explosion
    lr0, sgd = BASE["lr"], SGD["lr"]

    twin_run("sgns_twin_adam", "wandb", {},
             f"word2vec skip-gram with negative sampling (d 48, input rows uniform +-0.5/d, output rows zero) on the "
             f"words of the package text, dynamic window up to 5, 5 negatives from the unigram^0.75 table, batch 256 "
             f"pairs, Adam {lr0:g} constant, 600 steps: the sane twin (and the family's baseline).")
    twin_run("sgns_twin_sgd", "mlflow", SGD,
             f"The same model with SGD momentum 0.9 lr {sgd:g}, constant, clip 1.0: the SGD faults' twin.")

    fault("sgns_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 100 * lr0}, osc,
          f"Adam at lr {100 * lr0:g} (100x the twin's {lr0:g}), constant.", style="parquet")
    fault("sgns_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 10 * sgd}, osc,
          f"SGD momentum 0.9 at lr {10 * sgd:g} (10x the twin's {sgd:g}), clip 1.0.", style="csv",
          twin_name="sgns_twin_sgd")
    fault("sgns_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2}, osc,
          f"Batch 2 pairs with Adam at the twin's lr {lr0:g}.", style="csv")
    fault("sgns_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          f"Adam at lr 1e-5 ({lr0 / 1e-5:g}x below the twin).", style="csv")
    fault("sgns_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    # Not confirmed, kept but not scored, not changed: under SGD the x1e-3 init reaches the twin's quarter-run level at
    # step 244 against the twin's 151 (1.6x): word2vec's own init is already tiny (output rows zero), and leaving the
    # saddle at zero takes a time logarithmic in the init scale, so a smaller factor would add ~90 steps per factor
    # 1000.
    fault("sgns_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          f"Every weight multiplied by 1e-3 at init (input rows uniform +-0.5e-3/d; the output rows are zero either "
          f"way), SGD momentum lr {sgd:g}, clip 1.0.", style="parquet", twin_name="sgns_twin_sgd")
    fault("sgns_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {sgd:g}, clip 1.0; at step 400 a restart multiplies the LR by 1000.", style="mlflow",
          twin_name="sgns_twin_sgd", before_step=lr_spike(400, 1000))
    fault("sgns_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          f"Adam {lr0:g}; the label of one pair in the batch read at step 400 is NaN.", style="mlflow",
          corrupt=nan_label_at(400))
    fault("sgns_gradient_explosion_noclip", "gradient_explosion", ["nonfinite"], {**SGD, "lr": 100 * sgd, "clip": None},
          boom, f"SGD momentum lr {100 * sgd:g} (100x the twin's {sgd:g}), no gradient clipping.", style="parquet",
          twin_name="sgns_twin_sgd")

    # Task imbalance: a linear head on the centre vector regressing the centre word's raw count in the training text
    # (mean ~97 per pair, std ~350: the UNK id's 2671), MSE summed unscaled (weight 1) with the SGNS loss, SGD momentum
    # with clip 1.0; the twin's target is the same count scaled. The small task is the SGNS term. Changed once after its
    # truth check, the twin only: with the count z-scored (UNK at z 7.3) the twin's total rose (5.2 -> 9.2) and its SGNS
    # term fell 22 % (the raw-count run's 0.4 %); the one change is the twin's target, the z-scored log(1 + count).
    # Still not confirmed: the head's MSE rose from 0.7 to ~10 and settled at ~3.5 (SGD lr 2, chosen for embedding rows
    # whose gradient is spread over the batch, is too high for the dense head; the clip binds every step), the SGNS term
    # fell 13 %. Kept, not scored.
    stalled = lambda tap, twin, *_: truth.confirm_task_stalled(tap, twin, W["task"].format("sgns"))
    if want("sgns_unscaled_aux_loss", "sgns_twin_aux_scaled"):
        twin_run("sgns_twin_aux_scaled", "csv", {**SGD, "aux": "scaled_log"},
                 f"SGNS plus a frequency head (the centre word's z-scored log training count, MSE, weight 1), SGD "
                 f"momentum lr {sgd:g}, clip 1.0: the unscaled auxiliary loss's twin.")
        fault("sgns_unscaled_aux_loss", "unscaled_aux_loss", ["task-imbalance"], {**SGD, "aux": "raw"}, stalled,
              "A linear head on the centre vector regressing the centre word's raw count in the training text "
              "(unscaled) beside the SGNS loss, weight 1, both logged beside the total; SGD momentum lr "
              f"{sgd:g}, clip 1.0.", style="wandb", twin_name="sgns_twin_aux_scaled")

    # Bad shard, unshuffled: batches 40 and 41 of each epoch (of 512 pairs: 183 batches an epoch, so 600 steps meet the
    # shard three times after the first epoch) were exported by a job that wrote the label column inverted (1 for the
    # negatives, 0 for the context).
    noshuf = {"shuffle": False, "batch_size": 512}
    shard = (40, 41)
    n_pairs = len(train_pairs(BASE["window"], None, False)[0])
    if want("sgns_bad_shard_noshuffle", "sgns_twin_noshuffle"):
        steps = shard_steps_for({**BASE, **noshuf}, shard, n_pairs)
        twin_run("sgns_twin_noshuffle", "csv", noshuf,
                 f"Adam {lr0:g}, batches of 512 pairs in the text's stored order without shuffling, every label right: "
                 "the bad shard's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, steps)
            return ok, {**m, "spike_steps": steps}

        fault("sgns_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"],
              {**noshuf, "bad_shard": shard}, spikes,
              "No shuffling, batches of 512 pairs; batches 40 and 41 of each epoch (pairs 20480..21503 of the stored "
              "order) were exported with the label column inverted (1 for the negatives, 0 for the context).",
              style="parquet", twin_name="sgns_twin_noshuffle")

    # Vanishing gradients: a 12-layer sigmoid MLP stack (48 wide) between the input embedding and the dot product,
    # without residual connections; its twin the same stack with residual connections.
    deep = {"stack_layers": 12}
    if want("sgns_vanishing_sigmoid_stack12", "sgns_twin_residual_stack12"):
        twin_run("sgns_twin_residual_stack12", "mlflow", {**deep, "residual": True},
                 f"SGNS with a 12-layer sigmoid MLP stack (48 wide) with residual connections between the input "
                 f"embedding and the dot product, Adam {lr0:g}: the vanishing run's twin.")
        fault("sgns_vanishing_sigmoid_stack12", "vanishing_gradients", ["vanishing-gradients"], deep,
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, W["layer_grad"].format("in_embed.weight")),
              f"SGNS with a 12-layer plain sigmoid MLP stack (48 wide, no residual connections) between the input "
              f"embedding and the dot product, default init, Adam {lr0:g}.", style="csv",
              twin_name="sgns_twin_residual_stack12")

    # Slow loader: a real DataLoader of pair ids whose dataset sleeps 0.25 ms per pair (slow storage), no workers.
    if want("sgns_slow_loader", "sgns_twin_fast_loader"):
        twin_run("sgns_twin_fast_loader", "parquet", {"loader": "fast", "max_steps": 150},
                 f"Adam {lr0:g} through an in-memory DataLoader of pair ids (no workers), 150 steps: the slow loader's "
                 "twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("sgns_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.00025, "max_steps": 150}, bottleneck,
              "Each pair takes 0.25 ms to arrive (SlowIODataset) through a DataLoader with no workers, 150 steps.",
              style="mlflow", twin_name="sgns_twin_fast_loader")

    # Overfitting: the first 2000 training tokens (7906 pairs), d 256, Adam, no dropout or weight decay; the twin is the
    # same run regularised (dropout 0.3 on the centre vector, weight decay 1e-3).
    small = {"n_tokens": 2000, "d": 256, "max_steps": 600}
    if want("sgns_overfit_small_subset", "sgns_twin_overfit_reg"):
        twin_run("sgns_twin_overfit_reg", "csv", {**small, "dropout": 0.3, "weight_decay": 1e-3},
                 f"The first 2000 training tokens, d 256, Adam {lr0:g} with weight decay 1e-3 and dropout 0.3 on the "
                 "centre vector, 600 steps: the overfitting run's twin.", log_every=2, val_every=30)
        fault("sgns_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              f"The first 2000 training tokens, d 256, Adam {lr0:g} for 600 steps, no dropout or weight decay.",
              style="mlflow", twin_name="sgns_twin_overfit_reg", log_every=2, val_every=30)

    healthy = [
        ("sgns_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 1e-2}, {},
         "Adam peaking at 1e-2, a tenth of warm-up then cosine decay."),
        ("sgns_step_decay_sgd", "csv", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, step decay x0.3 every third of the run."),
        ("sgns_onecycle", "parquet", "wandb", {"schedule": "onecycle", "lr": 1e-2}, {},
         "Adam with a one-cycle schedule peaking at 1e-2."),
        ("sgns_sgdr_restarts", "csv", "plain", {**SGD, "schedule": "sgdr"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, cosine warm restarts every quarter of the run (SGDR)."),
        ("sgns_early_stopping", "mlflow", "wandb",
         {"n_tokens": 6000, "max_steps": 3000, "early_stop": 2}, {"log_every": 3},
         f"The first 6000 training tokens, Adam {lr0:g}, early stopping (patience 2 epochs on the val loss), at most "
         "3000 steps."),
        ("sgns_label_noise", "csv", "mlflow", {"label_noise": 0.3}, {},
         f"Adam {lr0:g}; 30 % of the contexts replaced by uniformly random words: a high plateau."),
        ("sgns_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 8, "lr": 1e-3, "max_steps": 1500},
         {"log_every": 2, "val_every": 50},
         "Batch 8 pairs with Adam 1e-3 (the square-root rule from the twin's batch 256 and lr), 1500 steps."),
        ("sgns_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         f"Adam {lr0:g}; logs every 3rd step and validates every 100."),
        ("sgns_converged_idle", "parquet", "plain", {"schedule": "decay_then_idle", "decay_steps": 400,
                                                    "max_steps": 1200}, {"log_every": 3, "val_every": 30},
         f"Adam {lr0:g}, cosine decay to 1 % by step 400, then 800 steps idling at that LR."),
        ("sgns_cbow", "wandb", "wandb", {"arch": "cbow"}, {},
         f"The CBOW variant: the mean of the context bag's input rows scores the centre word against 5 negatives, Adam "
         f"{lr0:g}."),
        ("sgns_window10_d64", "parquet", "plain", {"window": 10, "d": 64}, {},
         f"A wider window (up to 10) and d 64, Adam {lr0:g}."),
    ]
    for name, style, naming, over, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, over, **kw)
            runs.add_unlabelled(name, style, f, c, cause="healthy", description=desc)
    if want("sgns_hf_warmup_cosine"):
        runs.entries.append(_hf_run(root))
    if want("sgns_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


class StockSGNS(nn.Module):
    """SGNS for the stock trainers: in training it reads (N, 2) rows (centre, context) and draws its negatives from the
    noise table itself (the global seeded RNG); in evaluation it reads (N, 2 + k) val rows (centre, context, the fixed
    negatives). Its output is each pair's SGNS loss, so the trainers' loss is their batch mean."""

    def __init__(self, model: SGNS, k: int):
        super().__init__()
        self.model, self.k = model, k

    def forward(self, x):
        x = x.long()
        if x.shape[1] == 2:
            negs = corpus()["table"][torch.randint(len(corpus()["table"]), (len(x), self.k))]
            cands = torch.cat([x[:, 1:2], negs], dim=1)
        else:
            cands = x[:, 1:]
        labels = torch.zeros(cands.shape)
        labels[:, 0] = 1.0
        return sgns_terms(self.model(x[:, 0], cands), labels)


def _pair_mean(out, y):
    return out.mean()


def _stock_data():
    c, o = train_pairs(BASE["window"], None, False)
    xt = torch.stack([c, o], dim=1)
    vx, vc = val_set(BASE["window"], False, BASE["negatives"])
    xv = torch.cat([vx[:, None], vc], dim=1)
    return (xt, torch.zeros(len(xt))), (xv, torch.zeros(len(xv)))


def _stock_config(cfg: dict) -> dict:
    return {"model": model_name(cfg), "dataset": DATASET, "seed": SEED, "loss": loss_label(cfg), "d": cfg["d"],
            "window": cfg["window"], "negatives": cfg["negatives"], "vocab": vocab_size(), "min_count": MIN_COUNT,
            "subsample_t": SUBSAMPLE_T, "noise_power": NOISE_POWER, "n_val": N_VAL_PAIRS}


def _hf_run(root: Path) -> dict:
    """A healthy run through transformers.Trainer (AdamW with weight decay 0, i.e. Adam; warm-up then cosine; its
    default clip 1.0)."""
    name = "sgns_hf_warmup_cosine"
    cfg = {**BASE, "seed": SEED}
    model = StockSGNS(build_model(cfg), cfg["negatives"])
    args = {"learning_rate": 5e-3, "weight_decay": 0.0, "lr_scheduler_type": "cosine", "warmup_steps": 60,
            "max_steps": 600, "per_device_train_batch_size": 256, "per_device_eval_batch_size": 1000,
            "logging_steps": 2, "eval_steps": 20}
    f, _ = hf_trainer_run(root, name, model, _pair_mean, *_stock_data(), args, SEED)
    config = {**args, "optimizer": "adamw", "trainer": "hf", **_stock_config(cfg)}
    return {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": "hf_trainer",
            "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": config,
            "truth": {}, "description": "transformers.Trainer: SGNS (d 48) on the stored skip-gram pairs, negatives "
                                        "drawn in the model's training forward, batches of 256, AdamW 5e-3 with weight "
                                        "decay 0, 60 warm-up steps then cosine, 600 steps; eval loss = the SGNS "
                                        "loss on the fixed val pairs and negatives; trainer_state.json."}


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 5e-3, step decay x0.3 every 300 steps."""
    name = "sgns_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    model = StockSGNS(build_model(cfg), cfg["negatives"])
    hp = {"optimizer": "adam", "lr": 5e-3, "weight_decay": 0.0, "batch_size": 256, "schedule": "step",
          "step_size": 300, "gamma": 0.3, "max_epochs": 3, **_stock_config(cfg)}
    module = lightning_module(
        model, _pair_mean, lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp,
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    (xt, yt), (xv, yv) = _stock_data()
    g = torch.Generator().manual_seed(SEED)
    tl = DataLoader(TensorDataset(xt, yt), batch_size=256, shuffle=True, generator=g)
    vl = DataLoader(TensorDataset(xv, yv), batch_size=1000)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: SGNS (d 48) on the stored skip-gram pairs, negatives "
                           "drawn in the model's training forward, batches of 256, Adam 5e-3, step decay x0.3 every "
                           "300 steps, 3 epochs (validated once per epoch on the fixed val pairs and negatives)."}
