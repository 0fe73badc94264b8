"""The rnn family: a small GRU/LSTM character language model on package text (:mod:`._text`).

Every fault run has a twin with the one setting put right; labels come from :mod:`.truth` against it.
"""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path

import torch

from . import _text, truth
from .common import NAMES, fit, make_optimizer, make_scheduler, minibatches, seed_all, shrink_init
from .sinks import open_run

FAMILY = "rnn"
SEED = 7


class CharRNN(torch.nn.Module):
    def __init__(self, vocab: int, hidden: int = 96, layers: int = 1, cell: str = "gru", dropout: float = 0.0):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, 32)
        rnn = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
        self.rnn = rnn(32, hidden, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.drop = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, x):
        out, _ = self.rnn(self.embed(x))
        return self.head(self.drop(out))


BASE = {"optimizer": "adam", "lr": 3e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.0, "init": "default",
        "cell": "gru", "hidden": 96, "layers": 1, "dropout": 0.0, "schedule": "constant", "shuffle": True,
        "num_workers": 0, "clip": 1.0, "max_steps": 300, "train_chars": None, "seq_len": _text.SEQ_LEN}
LAYERS = ("embed.weight", "rnn.weight_ih_l0", "head.weight")


def _model(cfg: dict) -> CharRNN:
    seed_all(cfg["seed"])
    return shrink_init(CharRNN(_text.vocab().size, cfg["hidden"], cfg["layers"], cfg["cell"], cfg["dropout"]), cfg["init"])






class _Runs:
    """Trains runs and remembers their taps, so a fault run finds its twin's."""

    def __init__(self, root: Path):
        self.root, self.taps, self.speed, self.entries = root, {}, {}, []

    def train(self, name: str, style: str, naming: str, cfg: dict, *, batches=None, before_step=None,
              val_every: int = 20, log_every: int = 1, train_override=None):
        cfg = {**BASE, "seed": SEED, **cfg}
        (tx, ty), val = _text.splits(cfg["train_chars"], cfg.get("stride"))
        if train_override is not None:
            tx, ty = train_override
        model = _model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        log = open_run(style, self.root, name, cfg)
        result = fit(model, batches or minibatches(tx, ty, cfg["batch_size"], cfg["seed"], cfg["shuffle"]),
                     lambda m, b: _text.lm_loss(m(b[0]), b[1]), opt, log, epochs=10_000, naming=naming,
                     scheduler=make_scheduler(opt, cfg), val_fn=_text.val_loss_fn(model, val), val_every=val_every,
                     log_every=log_every, layer_grads=LAYERS, clip=cfg["clip"], before_step=before_step,
                     max_steps=cfg["max_steps"])
        file = log.close()
        self.taps[name], self.speed[name] = log.logged, result.samples_per_s
        return file, cfg, result

    def add(self, name, style, file, cfg, *, faults, intended, cause, twin, truth_measures, description, **extra):
        model = f"char-{cfg['cell']}-h{cfg['hidden']}x{cfg['layers']}"
        self.entries.append(_text.entry(FAMILY, name, model, style, file, faults=faults, intended=intended,
                                        cause=cause, twin=twin, seed=cfg["seed"], config=cfg, truth=truth_measures,
                                        description=description, **extra))


def _garbage_shard(tx, ty, start: int, count: int, seed: int):
    """Windows [start, start+count) replaced by uniformly random rare symbols: a corrupt shard."""
    gen = torch.Generator().manual_seed(seed)
    rare = torch.tensor(_text.vocab().rare(30))
    bx, by = tx.clone(), ty.clone()
    bx[start:start + count] = rare[torch.randint(len(rare), (count, tx.shape[1]), generator=gen)]
    by[start:start + count] = rare[torch.randint(len(rare), (count, ty.shape[1]), generator=gen)]
    return bx, by


def _heavy_loader(text: str, cfg: dict, seed: int):
    """Tokenises each window on the fly: NFKC-normalises the raw text and rebuilds the index per sample,
    several passes, as a careless per-sample transform does (the cost is real Python work, measured)."""
    seq, bs = cfg["seq_len"], cfg["batch_size"]
    starts = torch.arange(0, len(text) - seq - 1, seq)

    def encode_slow(chunk: str) -> torch.Tensor:
        for _ in range(cfg["passes"]):
            chunk = unicodedata.normalize("NFKC", unicodedata.normalize("NFKD", chunk))
            ids = _text.Vocab(_text.vocab().chars).encode(chunk)
        return ids

    def batches(epoch: int):
        order = torch.randperm(len(starts), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
        for i in range(0, len(order), bs):
            rows = [encode_slow(text[int(starts[j]):int(starts[j]) + seq + 1]) for j in order[i:i + bs]]
            rows = [r for r in rows if len(r) == seq + 1]
            block = torch.stack(rows)
            yield block[:, :-1], block[:, 1:]
    return batches


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda n: True) if only is None else (lambda n: n in only)
    L = NAMES

    # The twin most faults compare with: Adam 3e-3, clipped, shuffled.
    f, c, _ = runs.train("rnn_twin_adam", "wandb", "wandb", {})
    runs.add("rnn_twin_adam", "wandb", f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
             description="GRU char LM, Adam 3e-3, batch 32, grad clip 1.0: the sane twin.")
    twin = runs.taps["rnn_twin_adam"]
    key = L["wandb"]["loss"]

    def fault(name, cause, intended, cfg, check, description, style="wandb", **kw):
        if not want(name):
            return
        f, c, res = runs.train(name, style, "wandb", cfg, **kw)
        ok, measures = check(runs.taps[name])
        got = intended if ok else []
        if ok and measures.get("fault_learns") is False and "slow-convergence" in intended:
            got = ["loss-oscillation"]
        runs.add(name, style, f, c, faults=got, intended=intended, cause=cause,
                 twin="rnn_twin_adam", truth_measures=measures, description=description)

    osc = lambda tap: truth.confirm_oscillation(tap, twin, key)
    def slow(tap):
        # A run meant to be slow that does not learn at all is the flat case of loss-oscillation (corpus brief).
        ok, measures = truth.confirm_slow(tap, twin, key)
        if ok:
            return ok, measures
        flat, flat_measures = truth.confirm_oscillation(tap, twin, key)
        return flat, {**measures, **flat_measures}
    fault("rnn_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 0.3}, osc,
          "Adam at lr 0.3 (100x the twin's): the loss bounces and ends far above the twin.")
    fault("rnn_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {"optimizer": "sgd", "lr": 8.0, "clip": None}, osc,
          "SGD momentum 0.9 at lr 8, unclipped: the loss does not settle.", style="parquet")
    fault("rnn_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.06}, osc,
          "Batch 2 with Adam lr 0.06: gradient noise keeps the loss bouncing high.", style="csv")
    fault("rnn_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1.5e-4}, slow,
          "Adam lr 1.5e-4 (20x below the twin): learns, very slowly.", style="mlflow")
    fault("rnn_adam_eps_one", "adam_eps", ["slow-convergence"], {"eps": 1.0}, slow,
          "Adam eps=1.0: the update collapses to a tiny SGD step.", style="csv")
    fault("rnn_init_too_small", "init_too_small", ["slow-convergence"], {"init": "scaled:0.001", "optimizer": "sgd", "lr": 0.5},
          slow, "Every weight scaled by 1e-3 with SGD: gradients through the tiny weights barely move it.", style="parquet")

    # Explosion: no clipping and an LR spike at a warm restart (the restart multiplies the LR by 1000).
    spike_at = 150

    def restart_spike(step, opt):
        if step == spike_at:
            for g in opt.param_groups:
                g["lr"] = g["lr"] * 1000

    fault("rnn_lr_spike_restart", "lr_spike", ["nonfinite"], {"clip": None, "restart_at": spike_at, "restart_lr_factor": 1000},
          lambda tap: truth.confirm_explosion(tap, twin, L["wandb"]["grad_norm"], key),
          "Unclipped; at step 150 a restart sets the LR 1000x: the loss explodes.", before_step=restart_spike)

    # Bad shard, no shuffling: windows 800-831 (batch 26 of each 70-batch epoch) are random rare symbols.
    clean_noshuffle = {"shuffle": False, "max_steps": 350}
    if want("rnn_bad_shard_noshuffle") or want("rnn_twin_noshuffle"):
        f, c, _ = runs.train("rnn_twin_noshuffle", "parquet", "plain", clean_noshuffle)
        runs.add("rnn_twin_noshuffle", "parquet", f, c, faults=[], intended=[], cause="twin", twin=None, truth_measures={},
                 description="GRU char LM without shuffling, clean data: the bad shard's twin.")
        (tx, ty), _ = _text.splits()
        spe = math.ceil(len(tx) / BASE["batch_size"])
        spikes = [float(e * spe + 800 // BASE["batch_size"] + 1) for e in range(350 // spe + 1) if e * spe + 26 <= 350]
        name = "rnn_bad_shard_noshuffle"
        f, c, _ = runs.train(name, "parquet", "plain", {**clean_noshuffle, "bad_shard": [800, 832]},
                             train_override=_garbage_shard(tx, ty, 800, 32, SEED))
        ok, m = truth.confirm_spikes_at(runs.taps[name], runs.taps["rnn_twin_noshuffle"], L["plain"]["loss"], spikes)
        runs.add(name, "parquet", f, c, faults=["periodic-spikes"] if ok else [], intended=["periodic-spikes"],
                 cause="bad_shard", twin="rnn_twin_noshuffle", truth_measures={**m, "spike_steps": spikes},
                 description="No shuffling; a block of 32 random-symbol windows is met at the same step every epoch.")

    # Heavy per-sample preprocessing in the loader; the twin reads the same windows pre-tokenised.
    name = "rnn_heavy_preprocess"
    if want(name):
        cfg = {"passes": 150, "preprocess": "per-sample NFKD/NFKC + re-index x150"}
        f, c, _ = runs.train(name, "mlflow", "mlflow", cfg,
                             batches=_heavy_loader(_text.raw_train_text(), {**BASE, **cfg}, SEED))
        ok, m = truth.confirm_bottleneck(runs.speed[name], runs.speed["rnn_twin_adam"])
        runs.add(name, "mlflow", f, c, faults=["input-bottleneck"] if ok else [], intended=["input-bottleneck"],
                 cause="heavy_preprocessing", twin="rnn_twin_adam", truth_measures=m,
                 description="The loader tokenises every window on the fly with an expensive normalisation; measured data vs compute time.")

    # Healthy variants: schedules, rare val logging, converge early and idle.
    healthy = [
        ("rnn_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 5e-3}, {}, "Warm-up then cosine decay."),
        ("rnn_step_decay_lstm", "mlflow", "mlflow", {"schedule": "step", "cell": "lstm"}, {}, "LSTM with step decay x0.3 every 100 steps."),
        ("rnn_sgdr_restarts", "wandb", "wandb", {"schedule": "sgdr", "lr": 4e-3}, {}, "SGDR: cosine with warm restarts every 75 steps."),
        ("rnn_onecycle_2layer", "parquet", "plain", {"schedule": "onecycle", "lr": 6e-3, "layers": 2, "hidden": 64}, {}, "Two-layer GRU, one-cycle LR."),
        ("rnn_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3}, "Logs every 3rd step and validates every 100."),
        ("rnn_converged_idle", "wandb", "plain", {"lr": 5e-3, "max_steps": 600, "train_chars": 20_000}, {"log_every": 2},
         "A small train text learned by step ~200, then idles at its plateau."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c, _ = runs.train(name, style, naming, cfg, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, truth_measures={}, description=desc)
    return runs.entries
