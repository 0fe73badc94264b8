"""The seq2seq family: a character-level GRU encoder-decoder with attention that reverses words.

The data: the distinct lower-case words of 3-10 letters in the package text (:mod:`._text`), 2935 of them; a seeded
permutation fixes the split (400 validation words, the rest for training). The task is transduction: read a word's
letters, write them reversed, then an end-of-word symbol (``python`` -> ``nohtyp``). Symbols: pad 0, start 1, end 2,
``a``-``z`` 3..28. The **model** (``Seq2Seq``) is Luong's: an embedding (32) and a GRU encoder (96 hidden; a stack of
``n_layers`` single-layer RNNs, optionally residual), a GRU decoder initialised from the encoder's hidden state at each
word's last letter, dot-product (Luong "general") or additive (Bahdanau) attention over the encoder's outputs (padding
masked), ``tanh(W [context; h])`` and a linear output over the 29 symbols. Training is by teacher forcing: the decoder
reads the start symbol and the target shifted right. The loss is the per-token cross-entropy with padding masked, as
the batch's float mask weighs it (``sum(ce * mask) / sum(mask)``). Each val check logs the same loss on the 400 val
words (teacher forced), the token accuracy of those teacher-forced predictions and the exact-match word accuracy of
greedy decoding (``val/token_acc``, ``val/word_acc`` under W&B names, on the row that holds the val loss). The
encoder's embedding, the first (and for a deep stack the last) encoder layer's input weights and the output layer's
gradient norms are logged.

The task-imbalance pair adds an auxiliary head (``aux``: hidden -> 1) on the encoder's final hidden state regressing
how often the word occurs in the text, logged as a second term (``freq``) beside the reversal term (``ce``).

Built blind to the detectors: nothing under ``trackerhealth/diagnoses/`` nor the scoring was read or run while
building it. Settings are a practitioner's (Adam 3e-3, gradient clipping 1.0, embedding 32, hidden 96, batch 32, 600
steps; SGD momentum 0.9 with clip 1.0 for the SGD faults at the LR a sweep of the SGD twin alone chose, see
:data:`SGD`); every fault run has a twin with the one setting put right (same seed and data) and its label is what
:mod:`.truth` confirms against it. A comment at a run says so where its setting was changed after its truth check
(once at most).

Result (34 runs, 15 fault runs and 19 meant healthy, twins included): the twins confirm 14 of the 15 faults (Adam lr
1.0 and SGD lr 3.0 far above their twins, batch 2 at Adam 0.1, LR 1e-5 and Adam eps 1.0 (both flat: the ``one_of``
loss-oscillation / slow-convergence case), init x1e-3 with SGD (slow), an LR spike x1000 at step 250 and SGD at 100x
unclipped (gradient norm 2.6e3x and 4.1e4x the twin's median), a NaN in the stored loss mask at step 300, batches 20-21
of a misaligned shard and one batch of three words run together met unshuffled (10 of 10 and 5 of 5 spike steps >= 3x
the twin), an 8-layer plain tanh RNN encoder (first-layer gradient 0.09 % of the residual twin's), a 1 ms/word loader
(throughput 0.20x), 60 training words memorised by a 128-wide model (val loss 75 % above the regularised twin's)).
Not confirmed, kept but not scored: the unscaled frequency head (the reversal CE still fell 15 %, the twin's 97 %). 14
of the 19 runs meant healthy pass the healthy check; at a constant LR the val loss of a fitted model creeps back or
jumps above its best in five (converged idle 82 %, early stopping 236 %, and the scaled-aux, fast-loader and
regularised-overfit twins), which are left out of the scoring. Changed after seeing a truth result, once each: Adam LR
too high (0.1 -> 1.0), batch too small (Adam 0.03 -> 0.1 at batch 2), the frequency head's raw unit (counts -> per
million words, still unconfirmed). The SGD twin's lr 0.3 came from a sweep of the twin alone before any fault ran (lr
0.1: val loss ended 91 % above its best; 0.3: sits on a plateau near 0.45 until the attention "clicks" at ~400 steps,
val at its best at the end; 1.0: never learns). Not built: heavy preprocessing and too few workers (the slow loader
alone stands for the input bottleneck).
"""

from __future__ import annotations

import re
from collections import Counter
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

FAMILY = "seq2seq"
SEED = 61
DATASET = "pkg-text words (3-10 letters), reversed"
PAD, SOS, EOS = 0, 1, 2
LETTERS = "abcdefghijklmnopqrstuvwxyz"
VOCAB = 3 + len(LETTERS)
MIN_LEN, MAX_LEN = 3, 10
N_VAL = 400


@lru_cache(maxsize=1)
def word_counts() -> Counter:
    words = re.findall(r"[a-z]+", _text.corpus_text().lower())
    return Counter(w for w in words if MIN_LEN <= len(w) <= MAX_LEN)


def word_split(seed: int) -> tuple[list[str], list[str]]:
    """(train words, val words): the distinct words in a seeded order, the first 400 for validation."""
    words = sorted(word_counts())
    order = np.random.default_rng(seed).permutation(len(words))
    words = [words[i] for i in order]
    return words[N_VAL:], words[:N_VAL]


def encode(word: str) -> list[int]:
    return [3 + LETTERS.index(c) for c in word]


def decode_ids(ids) -> str:
    return "".join(LETTERS[i - 3] for i in ids if i >= 3)


def scramble(words: list[str], fraction: float, seed: int) -> list[str]:
    """Targets for ``words`` (each reversed) with ``fraction`` of them scrambled: their letters in a seeded random
    order instead (annotation noise)."""
    rng = np.random.default_rng(seed + 1)
    out = []
    for w in words:
        t = w[::-1]
        if rng.random() < fraction:
            t = "".join(rng.permutation(list(t)))
        out.append(t)
    return out


def tensors(words: list[str], targets: list[str], aux: str | None = None):
    """(src, tgt_in, tgt_out, mask, aux_target): the padded letters, the decoder's teacher-forced input (start +
    target), the target + end symbol, its float mask (1 on real tokens, 0 on padding) and the auxiliary target (the
    word's frequency: raw, per million words of the text, or log1p(count) / log1p(max count) when "scaled"; zeros
    without a head)."""
    s_len = max(len(w) for w in words)
    t_len = max(len(t) for t in targets) + 1
    src = torch.full((len(words), s_len), PAD, dtype=torch.long)
    tin = torch.full((len(words), t_len), PAD, dtype=torch.long)
    tout = torch.full((len(words), t_len), PAD, dtype=torch.long)
    for i, (w, t) in enumerate(zip(words, targets)):
        src[i, :len(w)] = torch.tensor(encode(w))
        ids = encode(t)
        tin[i, :len(ids) + 1] = torch.tensor([SOS] + ids)
        tout[i, :len(ids) + 1] = torch.tensor(ids + [EOS])
    mask = (tout != PAD).float()
    counts = word_counts()
    if aux == "raw":  # occurrences per million words of the text, the unit frequency lists use
        total = sum(counts.values())
        a = torch.tensor([1e6 * counts[w] / total for w in words])
    elif aux == "scaled":
        top = np.log1p(max(counts.values()))
        a = torch.tensor([float(np.log1p(counts[w]) / top) for w in words])
    else:
        a = torch.zeros(len(words))
    return src, tin, tout, mask, a


class Encoder(nn.Module):
    """An embedding and a stack of single-layer RNNs (``cell`` gru, lstm or tanh); ``residual`` adds each layer's
    input to its output from the second layer on."""

    def __init__(self, emb: int, hidden: int, n_layers: int, cell: str, residual: bool):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, emb, padding_idx=PAD)
        make = {"gru": lambda a: nn.GRU(a, hidden, batch_first=True), "lstm": lambda a: nn.LSTM(a, hidden, batch_first=True),
                "tanh": lambda a: nn.RNN(a, hidden, nonlinearity="tanh", batch_first=True)}[cell]
        self.rnn = nn.ModuleList([make(emb if i == 0 else hidden) for i in range(n_layers)])
        self.residual, self.cell = residual, cell

    def forward(self, src):
        h = self.embed(src)
        for i, layer in enumerate(self.rnn):
            out, _ = layer(h)
            h = h + out if self.residual and i > 0 else out
        lengths = (src != PAD).sum(1).clamp(min=1)
        last = h[torch.arange(len(src)), lengths - 1]
        return h, last


class Seq2Seq(nn.Module):
    def __init__(self, emb: int = 32, hidden: int = 96, n_layers: int = 1, cell: str = "gru", residual: bool = False,
                 attention: str = "dot", dropout: float = 0.0, aux: bool = False):
        super().__init__()
        self.encoder = Encoder(emb, hidden, n_layers, cell, residual)
        self.dec_cell = "lstm" if cell == "lstm" else "gru"
        self.decoder = nn.Module()
        self.decoder.embed = nn.Embedding(VOCAB, emb, padding_idx=PAD)
        self.decoder.rnn = (nn.LSTM if self.dec_cell == "lstm" else nn.GRU)(emb, hidden, batch_first=True)
        self.attention = attention
        if attention == "dot":
            self.attn = nn.Linear(hidden, hidden, bias=False)
        else:
            self.attn_enc, self.attn_dec = nn.Linear(hidden, hidden, bias=False), nn.Linear(hidden, hidden)
            self.attn_v = nn.Linear(hidden, 1, bias=False)
        self.combine = nn.Linear(2 * hidden, hidden)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, VOCAB)
        self.aux = nn.Linear(hidden, 1) if aux else None
        self.enc_last = None

    def _init_state(self, last):
        h0 = last.unsqueeze(0).contiguous()
        return (h0, torch.zeros_like(h0)) if self.dec_cell == "lstm" else h0

    def _attend(self, dec, enc, src_mask):
        if self.attention == "dot":
            scores = dec @ self.attn(enc).transpose(1, 2)
        else:
            scores = self.attn_v(torch.tanh(self.attn_enc(enc)[:, None] + self.attn_dec(dec)[:, :, None])).squeeze(-1)
        scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
        ctx = torch.softmax(scores, -1) @ enc
        return self.out(self.drop(torch.tanh(self.combine(torch.cat([ctx, dec], -1)))))

    def forward(self, src, tgt_in):
        enc, last = self.encoder(src)
        self.enc_last = last
        dec, _ = self.decoder.rnn(self.drop(self.decoder.embed(tgt_in)), self._init_state(last))
        return self._attend(dec, enc, src != PAD)

    @torch.no_grad()
    def greedy(self, src, max_len: int):
        enc, last = self.encoder(src)
        state, tok, outs = self._init_state(last), torch.full((len(src), 1), SOS, dtype=torch.long), []
        for _ in range(max_len):
            dec, state = self.decoder.rnn(self.decoder.embed(tok), state)
            tok = self._attend(dec, enc, src != PAD).argmax(-1)
            outs.append(tok)
        return torch.cat(outs, 1)


def masked_ce(logits, tout, mask):
    ce = F.cross_entropy(logits.reshape(-1, VOCAB), tout.reshape(-1), reduction="none").reshape(tout.shape)
    return (ce * mask).sum() / mask.sum()


BASE = {"optimizer": "adam", "lr": 3e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "emb": 32, "hidden": 64, "n_layers": 1, "cell": "gru", "residual": False, "attention": "dot", "dropout": 0.0,
        "aux": None, "aux_weight": 1.0, "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0,
        "clip": 1.0, "max_steps": 500, "n_train": None, "early_stop": None, "label_noise": 0.0}
# SGD momentum 0.9 (clip 1.0) for the SGD faults' twin; lr picked by training the twin alone before any fault was run
# (500 steps; smoothed train loss at the end / last val loss, and how far that val loss ends above its best): lr 0.1
# 0.094 / 0.164 (91 %), 0.3 0.132 / 0.336 (0 %: on a plateau near 0.45 until ~400 steps), 1.0 2.24 / 2.28 (never
# learns). lr 0.3 is the twin; the SGD LR-too-high and explosion runs were then set at 10x (past the failing 1.0) and
# 100x unclipped before either was run.
SGD = {"optimizer": "sgd", "lr": 0.3}


def model_name(cfg: dict) -> str:
    kind = "res" if cfg["residual"] else "plain"
    name = (f"seq2seq-{cfg['cell']}{cfg['n_layers']}x{cfg['hidden']}-{kind}-emb{cfg['emb']}-{cfg['attention']}attn")
    return name + (f"-drop{cfg['dropout']:g}" if cfg["dropout"] else "") + ("-freq" if cfg["aux"] else "")


def grad_layers(cfg: dict) -> tuple[str, ...]:
    n = cfg["n_layers"]
    names = ["encoder.embed.weight", "encoder.rnn.0.weight_ih_l0"]
    if n > 1:
        names.append(f"encoder.rnn.{n - 1}.weight_ih_l0")
    return tuple(names + ["out.weight"])


def build_model(cfg: dict) -> Seq2Seq:
    seed_all(cfg["seed"])
    model = Seq2Seq(cfg["emb"], cfg["hidden"], cfg["n_layers"], cfg["cell"], cfg["residual"], cfg["attention"],
                    cfg["dropout"], aux=cfg["aux"] is not None)
    return shrink_init(model, cfg["init"])


def epoch_order(n: int, cfg: dict, epoch: int) -> list[np.ndarray]:
    if cfg["shuffle"]:
        g = torch.Generator().manual_seed(cfg["seed"] * 1000 + epoch)
        order = torch.randperm(n, generator=g).numpy()
    else:
        order = np.arange(n)
    b = cfg["batch_size"]
    return [order[i:i + b] for i in range(0, n, b)]


def batches_for(data: tuple, cfg: dict):
    """``batches(epoch)`` of (src, tgt_in, tgt_out, mask, aux_target), trimmed to the batch's longest word: in memory,
    or the word ids through a real DataLoader (``fast``: a TensorDataset; ``slow_io``: each word takes ``io_delay_s``
    to arrive) with the same batches as its batch sampler."""
    n = len(data[0])

    def make(idx):
        src, tin, tout, mask, a = (t[idx] for t in data)
        s = int((src != PAD).sum(1).max())
        t = int((tout != PAD).sum(1).max())
        return src[:, :s], tin[:, :t], tout[:, :t], mask[:, :t], a

    if cfg["loader"] == "memory":
        def batches(epoch):
            for idx in epoch_order(n, cfg, epoch):
                yield make(torch.from_numpy(idx))
        return batches
    ids = torch.arange(n)
    dataset = TensorDataset(ids, ids) if cfg["loader"] == "fast" else SlowIODataset(ids, ids, cfg["io_delay_s"])

    def loader(epoch):
        sampler = [list(map(int, b)) for b in epoch_order(n, cfg, epoch)]
        for got, _ in DataLoader(dataset, batch_sampler=sampler, num_workers=cfg["num_workers"]):
            yield make(got)
    return loader


def mask_nan_at(step: int):
    """A corrupt record: the stored loss mask of one token of one word in the batch met at ``step`` reads NaN (a
    corrupt row in the shard the batch was read from); every other batch is untouched."""
    def wrap(batches, n_per_epoch):
        def gen(epoch):
            for k, batch in enumerate(batches(epoch)):
                if epoch * n_per_epoch + k + 1 == step:
                    mask = batch[3].clone()
                    mask[0, 1] = float("nan")
                    batch = batch[:3] + (mask,) + batch[4:]
                yield batch
        return gen
    wrap.label = f"NaN in the loss mask of one word at step {step}"
    return wrap


def misaligned_shard(batch_ids: tuple[int, ...]):
    """A bad shard: in the batches at these positions of each epoch, every word is paired with the next word's
    target (a join that slipped by one row), so their targets are another word's letters."""
    def wrap(batches, n_per_epoch):
        def gen(epoch):
            for k, batch in enumerate(batches(epoch)):
                if k in batch_ids:
                    src, tin, tout, mask, a = batch
                    batch = (src, tin.roll(1, 0), tout.roll(1, 0), mask.roll(1, 0), a)
                yield batch
        return gen
    wrap.label = f"batches {list(batch_ids)} of every epoch with each word paired with another word's target"
    return wrap


def run_together_at(batch_index: int, n_words: int = 3):
    """One oversized batch: the batch at ``batch_index`` of every epoch holds records of ``n_words`` words run
    together (a shard whose word splitting failed: sources and reversed targets 9-30 letters long instead of 3-10)."""
    def wrap(batches, n_per_epoch):
        def gen(epoch):
            for k, batch in enumerate(batches(epoch)):
                if k == batch_index:
                    src = batch[0]
                    words = [decode_ids(row.tolist()) for row in src]
                    joined = ["".join(words[(i + j) % len(words)] for j in range(n_words)) for i in range(len(words))]
                    batch = tensors(joined, [w[::-1] for w in joined])[:4] + (batch[4],)
                yield batch
        return gen
    wrap.label = f"batch {batch_index} of every epoch with {n_words} words run together per record"
    return wrap


def seq_loss(cfg: dict):
    """``loss_fn`` for :func:`.common.fit`: the masked per-token cross-entropy; with the frequency head,
    (ce + weight * freq MSE, {"ce", "freq"})."""
    def fn(model, batch):
        src, tin, tout, mask, a = batch
        loss = masked_ce(model(src, tin), tout, mask)
        if cfg["aux"] is None:
            return loss
        freq = F.mse_loss(model.aux(model.enc_last).squeeze(-1), a)
        return loss + cfg["aux_weight"] * freq, {"ce": loss, "freq": freq}
    return fn


def loss_label(cfg: dict) -> str:
    label = "masked per-token cross_entropy"
    if cfg["aux"] is not None:
        label += "+freq_mse" + ("(raw, per million words of the text)" if cfg["aux"] == "raw" else "(log1p count / log1p max)")
    return label


def val_fn_for(model: Seq2Seq, val: tuple, state: dict):
    """The teacher-forced masked cross-entropy on the val words (eval mode); the token accuracy of those predictions
    and the greedy exact-match word accuracy are kept in ``state`` for the same row."""
    src, tin, tout, mask, _ = val

    def fn() -> float:
        model.eval()
        with torch.no_grad():
            logits = model(src, tin)
            loss = float(masked_ce(logits, tout, mask))
            real = mask > 0
            state["token_acc"] = float((logits.argmax(-1) == tout)[real].float().mean())
            pred = model.greedy(src, tout.shape[1])
            state["word_acc"] = float(((pred == tout) | ~real).all(1).float().mean())
        model.train()
        return loss
    return fn


class Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, over: dict, *, before_step=None, corrupt=None,
              val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **over}
        train_w, val_w = word_split(cfg["seed"])
        if cfg["n_train"]:
            train_w = train_w[:cfg["n_train"]]
        data = tensors(train_w, scramble(train_w, cfg["label_noise"], cfg["seed"]), cfg["aux"])
        val = tensors(val_w, [w[::-1] for w in val_w], cfg["aux"])
        model = build_model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for(data, cfg)
        if corrupt is not None:
            batches = corrupt(batches, batches_per_epoch(cfg, len(train_w)))
        state = {"token_acc": float("nan"), "word_acc": float("nan")}
        val_fn = val_fn_for(model, val, state)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged = dict(cfg, model=model_name(cfg), dataset=DATASET, n_train=len(train_w), n_val=N_VAL,
                      loss=loss_label(cfg), task="reverse each word", vocab=VOCAB, teacher_forcing=1.0)
        describe_injections(logged, corrupt=corrupt, before_step=before_step)
        log = open_run(style, self.root, name, logged)
        names = NAMES[naming]
        tok_key, word_key = (names["val_loss"].replace("loss", k) for k in ("token_acc", "word_acc"))
        log.log = with_val_extras(log.log, names["val_loss"],
                                  lambda: {tok_key: state["token_acc"], word_key: state["word_acc"]})
        res = fit(model, batches, seq_loss(cfg), opt, log, epochs=100_000, naming=naming,
                  scheduler=make_scheduler(opt, cfg), val_fn=val_fn, val_every=val_every, log_every=log_every,
                  layer_grads=grad_layers(cfg), clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = Runs(root)
    book = TwinChecks(runs, only, default_twin="seq2seq_twin_adam")
    want, twin_run, fault = book.wanted, book.twin, book.fault
    W = NAMES[book.naming]
    key, val_key = book.key, book.val_key
    osc, slow, boom = book.oscillation, book.slowness, book.explosion
    n_train = len(word_split(SEED)[0])

    twin_run("seq2seq_twin_adam", "wandb", {},
             "A GRU encoder-decoder (embedding 32, hidden 64, dot-product attention) reversing words, teacher forcing, "
             "batch 32, Adam 3e-3, gradient clipping 1.0, 500 steps: the sane twin (and the family's baseline).")
    twin_run("seq2seq_twin_sgd", "mlflow", SGD,
             f"The same encoder-decoder with SGD momentum 0.9 lr {SGD['lr']:g}, clip 1.0: the SGD faults' twin.")

    # Changed once after its truth check: Adam lr 0.1 ended 97x the twin's level but fell 26 % (to the letter-frequency
    # plateau) with a smaller swing (0.10x); lr 1.0 is the one change.
    fault("seq2seq_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 1.0}, osc,
          "Adam at lr 1.0 (333x the twin's 3e-3), clip 1.0.", style="parquet")
    fault("seq2seq_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 10 * SGD["lr"]}, osc,
          f"SGD momentum 0.9 at lr {10 * SGD['lr']:g} (10x the twin's {SGD['lr']:g}), clip 1.0.", style="csv",
          twin_name="seq2seq_twin_sgd")
    # Changed once after its truth check: batch 2 at Adam lr 0.03 ended 97x the twin's level but fell 25 % with a
    # smaller swing (0.37x); lr 0.1 is the one change.
    fault("seq2seq_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.1}, osc,
          "Batch 2 words with Adam lr 0.1, clip 1.0.", style="mlflow")
    fault("seq2seq_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-5}, slow,
          "Adam lr 1e-5 (300x below the twin).", style="csv")
    fault("seq2seq_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0 (a typo for 1e-8).", style="wandb")
    fault("seq2seq_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          f"Every weight and bias multiplied by 1e-3 at init, SGD momentum lr {SGD['lr']:g}, clip 1.0.",
          style="parquet", twin_name="seq2seq_twin_sgd")
    fault("seq2seq_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {SGD['lr']:g}, clip 1.0; at step 250 a restart multiplies the LR by 1000.", style="wandb",
          twin_name="seq2seq_twin_sgd", before_step=lr_spike(250, 1000))
    fault("seq2seq_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          "Adam 3e-3; the stored loss mask of one token of one word in the batch read at step 300 is NaN.",
          style="mlflow", corrupt=mask_nan_at(300))
    fault("seq2seq_gradient_explosion_noclip", "gradient_explosion", ["nonfinite"],
          {**SGD, "lr": 100 * SGD["lr"], "clip": None}, boom,
          f"SGD momentum lr {100 * SGD['lr']:g} (100x the twin's {SGD['lr']:g}), no gradient clipping.",
          style="wandb", twin_name="seq2seq_twin_sgd")

    # Task imbalance: an auxiliary head on the encoder's final hidden state regressing how often the word occurs in the
    # text, its target the raw frequency per million words (57..~50700) instead of log1p(count) / log1p(max count) in
    # [0, 1], weight 1, SGD momentum with the usual clip at 1.0: the clipped step is mostly frequency regression. The
    # small task is the reversal. The twin's target is the scaled log count. Changed once after its truth check: the raw
    # count (1..882) let the reversal CE fall 41 % (the twin's 97 %); occurrences per million words is the one change.
    imb = SGD
    stalled = lambda tap, twin, *_: truth.confirm_task_stalled(tap, twin, W["task"].format("ce"))
    if want("seq2seq_unscaled_aux_loss", "seq2seq_twin_aux_scaled"):
        twin_run("seq2seq_twin_aux_scaled", "csv", {**imb, "aux": "scaled"},
                 f"The encoder-decoder plus a word-frequency head (log1p(count) / log1p(max count), MSE, weight 1), SGD "
                 f"momentum lr {SGD['lr']:g}, clip 1.0: the unscaled auxiliary loss's twin.")
        fault("seq2seq_unscaled_aux_loss", "unscaled_aux_loss", ["task-imbalance"], {**imb, "aux": "raw"}, stalled,
              "A frequency head on the encoder's final state regressing each word's raw frequency per million words "
              f"of the text (57..~50700) beside the reversal cross-entropy, weight 1, both logged beside the total; SGD momentum lr "
              f"{SGD['lr']:g}, clip 1.0.", style="parquet", twin_name="seq2seq_twin_aux_scaled")

    # Bad shard and one oversized batch, unshuffled: the words come in the split's order every epoch. Batches 20 and 21
    # of each epoch come from a shard whose join slipped by one row (each word paired with another word's target);
    # batch 50 of each epoch from a shard whose word splitting failed (three words run together per record).
    noshuf = {"shuffle": False}
    shard, oversized = (20, 21), 50
    if want("seq2seq_bad_shard_noshuffle", "seq2seq_oversized_batch_noshuffle", "seq2seq_twin_noshuffle"):
        twin_run("seq2seq_twin_noshuffle", "csv", noshuf,
                 "Adam 3e-3, clip 1.0, the words in the split's order without shuffling, every record clean: the bad "
                 "shard's and the oversized batch's twin.")

        def spikes_at(steps):
            def check(tap, twin, *_):
                ok, m = truth.confirm_spikes_at(tap, twin, key, steps)
                return ok, {**m, "spike_steps": steps}
            return check

        fault("seq2seq_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], noshuf,
              spikes_at(shard_steps_for({**BASE, **noshuf}, shard, n_train)),
              "No shuffling; batches 20 and 21 of each epoch come from a shard whose join slipped by one row: each "
              "word is paired with another word's reversed letters.", style="parquet",
              twin_name="seq2seq_twin_noshuffle", corrupt=misaligned_shard(shard))
        fault("seq2seq_oversized_batch_noshuffle", "oversized_batch", ["periodic-spikes"], noshuf,
              spikes_at(shard_steps_for({**BASE, **noshuf}, (oversized,), n_train)),
              "No shuffling; batch 50 of each epoch comes from a shard whose word splitting failed: each record is "
              "three words run together (9-30 letters instead of 3-10).", style="mlflow",
              twin_name="seq2seq_twin_noshuffle", corrupt=run_together_at(oversized))

    # Vanishing gradients: an 8-layer stacked tanh RNN encoder, default init, no residual connections; its twin is the
    # same depth with residual connections between the layers.
    deep = {"n_layers": 8, "cell": "tanh"}
    if want("seq2seq_vanishing_tanh8", "seq2seq_twin_residual8"):
        twin_run("seq2seq_twin_residual8", "mlflow", {**deep, "residual": True},
                 "An 8-layer stacked tanh RNN encoder with residual connections, a GRU decoder, Adam 3e-3, clip 1.0: the "
                 "vanishing run's twin.")
        fault("seq2seq_vanishing_tanh8", "vanishing_gradients", ["vanishing-gradients"], deep,
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, W["layer_grad"].format("encoder.rnn.0.weight_ih_l0")),
              "An 8-layer stacked tanh RNN encoder without residual connections, default init, a GRU decoder, Adam "
              "3e-3, clip 1.0.", style="csv", twin_name="seq2seq_twin_residual8")

    # Slow loader: a real DataLoader of word ids (the same batches as its batch sampler) whose dataset sleeps 1 ms per
    # word (slow storage), no workers.
    if want("seq2seq_slow_loader", "seq2seq_twin_fast_loader"):
        twin_run("seq2seq_twin_fast_loader", "mlflow", {"loader": "fast", "max_steps": 300},
                 "Adam 3e-3 through an in-memory DataLoader of word ids (no workers): the slow loader's twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("seq2seq_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.001, "max_steps": 300}, bottleneck,
              "Each word takes 1 ms to arrive (SlowIODataset) through a DataLoader with no workers.",
              style="csv", twin_name="seq2seq_twin_fast_loader")

    # Overfitting: 60 training words, a 128-wide model, batches of 20, Adam 1e-3 for 800 steps, no dropout or weight
    # decay; its twin is the same run regularised (dropout 0.3, weight decay 1e-4).
    small = {"n_train": 60, "hidden": 128, "max_steps": 800, "batch_size": 20, "lr": 1e-3}
    if want("seq2seq_overfit_small_subset", "seq2seq_twin_overfit_reg"):
        twin_run("seq2seq_twin_overfit_reg", "csv", {**small, "dropout": 0.3, "weight_decay": 1e-4},
                 "60 training words, a 128-wide encoder-decoder, Adam 1e-3 with weight decay 1e-4 and dropout 0.3, 800 "
                 "steps: the overfitting run's twin.", log_every=4, val_every=40)
        fault("seq2seq_overfit_small_subset", "overfitting", ["overfitting"], small,
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              "60 training words, a 128-wide encoder-decoder, Adam 1e-3 for 800 steps, no dropout or weight decay.",
              style="mlflow", twin_name="seq2seq_twin_overfit_reg", log_every=4, val_every=40)

    healthy = [
        ("seq2seq_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine"}, {},
         "Adam 3e-3, clip 1.0, a tenth of warm-up then cosine decay."),
        ("seq2seq_step_decay_sgd", "mlflow", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {SGD['lr']:g}, clip 1.0, step decay x0.3 every third of the run."),
        ("seq2seq_onecycle", "parquet", "wandb", {"schedule": "onecycle"}, {},
         "Adam with a one-cycle schedule peaking at 3e-3, clip 1.0."),
        ("seq2seq_sgdr_restarts", "csv", "plain", {**SGD, "schedule": "sgdr"}, {},
         f"SGD momentum lr {SGD['lr']:g}, clip 1.0, cosine warm restarts every quarter of the run (SGDR)."),
        ("seq2seq_early_stopping", "mlflow", "wandb", {"max_steps": 3000, "early_stop": 2}, {"log_every": 3},
         "Adam 3e-3, clip 1.0, early stopping (patience 2 epochs on the val loss), at most 3000 steps."),
        ("seq2seq_label_noise", "csv", "mlflow", {"label_noise": 0.2}, {},
         "Adam 3e-3, clip 1.0; 20 % of the training words' targets scrambled (their letters in a random order)."),
        ("seq2seq_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 4, "lr": 5e-4}, {},
         "Batch 4 words with Adam lr 5e-4, clip 1.0."),
        ("seq2seq_rare_val", "csv", "wandb", {}, {"val_every": 125, "log_every": 3},
         "Adam 3e-3, clip 1.0; logs every 3rd step and validates every 125."),
        ("seq2seq_converged_idle", "parquet", "plain", {"max_steps": 1200}, {"log_every": 3, "val_every": 40},
         "Adam 3e-3, clip 1.0, for 1200 steps: most of the fall comes in the first few hundred, then it idles."),
        ("seq2seq_lstm_additive", "parquet", "plain", {"cell": "lstm", "attention": "additive"}, {},
         "An LSTM encoder-decoder with additive (Bahdanau) attention instead of the GRU with dot-product attention, "
         "Adam 3e-3, clip 1.0."),
    ]
    for name, style, naming, over, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, over, **kw)
            runs.add_unlabelled(name, style, f, c, cause="healthy", description=desc)
    if want("seq2seq_hf_warmup_cosine"):
        runs.entries.append(_hf_run(root))
    if want("seq2seq_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


class OnPairs(nn.Module):
    """A stock trainer's view of the encoder-decoder: ``forward(x)`` takes the padded source letters and the
    teacher-forced decoder input side by side (``x = [src | tgt_in]``) and returns the logits."""

    def __init__(self, model: Seq2Seq, src_len: int):
        super().__init__()
        self.model, self.src_len = model, src_len

    def forward(self, x):
        return self.model(x[:, :self.src_len], x[:, self.src_len:])


def _ce(out, y):
    return F.cross_entropy(out.reshape(-1, VOCAB), y.reshape(-1).long(), ignore_index=PAD)


def _pair_data():
    train_w, val_w = word_split(SEED)
    out = []
    for words in (train_w, val_w):
        src, tin, tout, _, _ = tensors(words, [w[::-1] for w in words])
        src = F.pad(src, (0, MAX_LEN - src.shape[1]), value=PAD)
        tin = F.pad(tin, (0, MAX_LEN + 1 - tin.shape[1]), value=PAD)
        tout = F.pad(tout, (0, MAX_LEN + 1 - tout.shape[1]), value=PAD)
        out.append((torch.cat([src, tin], 1), tout))
    return out


def _hf_run(root: Path) -> dict:
    """A healthy run through transformers.Trainer (AdamW, linear warm-up then cosine, its default clip 1.0)."""
    name = "seq2seq_hf_warmup_cosine"
    cfg = {**BASE, "seed": SEED}
    model = OnPairs(build_model(cfg), MAX_LEN)
    args = {"learning_rate": 3e-3, "weight_decay": 0.0, "lr_scheduler_type": "cosine", "warmup_steps": 50,
            "max_steps": 500, "per_device_train_batch_size": 32, "per_device_eval_batch_size": 400, "logging_steps": 2,
            "eval_steps": 20}
    f, _ = hf_trainer_run(root, name, model, _ce, *_pair_data(), args, SEED)
    config = {**args, "optimizer": "adamw", "model": model_name(cfg), "dataset": DATASET, "seed": SEED,
              "trainer": "hf", "loss": "per-token cross_entropy (padding ignored)", "task": "reverse each word"}
    return {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": "hf_trainer",
            "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": config,
            "truth": {}, "description": "transformers.Trainer: the GRU encoder-decoder with dot-product attention "
                                        "reversing words (teacher forcing), batches of 32 words, AdamW 3e-3, 50 warm-up "
                                        "steps then cosine, 500 steps; eval loss = the per-token cross-entropy on the "
                                        "400 val words; trainer_state.json."}


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 3e-3, clip 1.0, step decay x0.3 every 200 steps."""
    name = "seq2seq_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    model = OnPairs(build_model(cfg), MAX_LEN)
    hp = {"optimizer": "adam", "lr": 3e-3, "batch_size": 32, "schedule": "step", "step_size": 200, "gamma": 0.3,
          "gradient_clip_val": 1.0, "max_epochs": 7, "model": model_name(cfg), "dataset": DATASET, "seed": SEED,
          "loss": "per-token cross_entropy (padding ignored)", "task": "reverse each word"}
    module = lightning_module(model, _ce, lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp,
                              lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    (xt, yt), (xv, yv) = _pair_data()
    g = torch.Generator().manual_seed(SEED)
    tl = DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True, generator=g)
    vl = DataLoader(TensorDataset(xv, yv), batch_size=400)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1,
                                                      "gradient_clip_val": 1.0})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": {},
            "description": "lightning.Trainer with CSVLogger: the GRU encoder-decoder with dot-product attention "
                           "reversing words (teacher forcing), batches of 32 words, Adam 3e-3, gradient clipping 1.0, "
                           "step decay x0.3 every 200 steps, 7 epochs (validated once per epoch: the per-token "
                           "cross-entropy on the 400 val words)."}
