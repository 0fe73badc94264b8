"""The transformer family: a small causal character-level transformer on package text (:mod:`._text`).

Every fault run has a twin with the one setting put right; labels come from :mod:`.truth` against it.
Every twin and every run meant to be healthy is checked with :func:`.truth.confirm_healthy`.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from . import _text, truth
from ._pipeline import loader_batches
from .common import NAMES, fit, make_scheduler, minibatches, seed_all
from .integrations import hf_trainer_run
from .sinks import open_run

FAMILY = "transformer"
SEED = 11
SGD_LR = 0.5


class CharTransformer(torch.nn.Module):
    """Token + learned position embedding, a pre-LN causal TransformerEncoder, final LayerNorm, linear head."""

    def __init__(self, vocab: int, d_model: int = 48, layers: int = 2, heads: int = 4, ff: int = 128,
                 dropout: float = 0.0, seq_len: int = _text.SEQ_LEN):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Embedding(seq_len, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, ff, dropout, batch_first=True, norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(d_model)
        self.drop = torch.nn.Dropout(dropout)
        self.head = torch.nn.Linear(d_model, vocab)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, x):
        t = x.shape[1]
        h = self.drop(self.embed(x) + self.pos(torch.arange(t, device=x.device)))
        h = self.encoder(h, mask=self.mask[:t, :t], is_causal=True)
        return self.head(self.norm(h))


BASE = {"optimizer": "adamw", "lr": 3e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 0.01, "init": "default",
        "d_model": 48, "layers": 2, "heads": 4, "ff": 128, "dropout": 0.0, "schedule": "constant", "shuffle": True,
        "num_workers": 0, "clip": 1.0, "max_steps": 300, "train_chars": None, "seq_len": _text.SEQ_LEN}
# First and last layers (embedding, first attention, last feed-forward, head): their gradient norms are logged.
LAYERS = ("embed.weight", "encoder.layers.0.self_attn.in_proj_weight", "encoder.layers.1.linear2.weight", "head.weight")


def _model(cfg: dict) -> CharTransformer:
    seed_all(cfg["seed"])
    model = CharTransformer(_text.vocab().size, cfg["d_model"], cfg["layers"], cfg["heads"], cfg["ff"], cfg["dropout"],
                            cfg["seq_len"])
    if cfg["init"].startswith("scaled:"):  # every weight shrunk by this factor: "init far too small"
        factor = float(cfg["init"].split(":")[1])
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(factor)
    return model


def _optimizer(params, cfg: dict):
    if cfg["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=0.9, weight_decay=cfg["weight_decay"])
    if cfg["optimizer"] == "adam":
        return torch.optim.Adam(params, lr=cfg["lr"], eps=cfg["eps"], weight_decay=cfg["weight_decay"])
    return torch.optim.AdamW(params, lr=cfg["lr"], eps=cfg["eps"], weight_decay=cfg["weight_decay"])


def _scheduler(opt, cfg: dict):
    """The shared schedules (:func:`.common.make_scheduler`), but SGDR with a floor of 2 % of the LR, and a
    cosine decay to 1 % that then idles (a converged run)."""
    kind, steps = cfg["schedule"], cfg["max_steps"]
    if kind == "sgdr":
        return torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=steps // 4, eta_min=cfg["lr"] * 0.02)
    if kind == "decay_then_idle":  # cosine to 1 % over the first `decay_steps`, then flat: converged, idling
        d = cfg["decay_steps"]
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * min(s, d) / d)))
    return make_scheduler(opt, cfg)


class _Runs:
    """Trains runs and remembers their taps, so a fault run finds its twin's (logging every 2nd step by
    default, to keep the family's files small; the bad shard and its twin log every step)."""

    def __init__(self, root: Path):
        self.root, self.taps, self.speed, self.entries = root, {}, {}, []

    def train(self, name: str, style: str, naming: str, cfg: dict, *, batches=None, before_step=None,
              val_every: int = 20, log_every: int = 2, train_override=None):
        cfg = {**BASE, "seed": SEED, **cfg}
        (tx, ty), val = _text.splits(cfg["train_chars"], cfg.get("stride"))
        if train_override is not None:
            tx, ty = train_override
        model = _model(cfg)
        opt = _optimizer(model.parameters(), cfg)
        log = open_run(style, self.root, name, cfg)
        if callable(batches) and getattr(batches, "needs_data", False):
            batches = batches(tx, ty, cfg)
        result = fit(model, batches or minibatches(tx, ty, cfg["batch_size"], cfg["seed"], cfg["shuffle"]),
                     lambda m, b: _text.lm_loss(m(b[0]), b[1]), opt, log, epochs=10_000, naming=naming,
                     scheduler=_scheduler(opt, cfg), val_fn=_text.val_loss_fn(model, val), val_every=val_every,
                     log_every=log_every, layer_grads=LAYERS, clip=cfg["clip"], before_step=before_step,
                     max_steps=cfg["max_steps"])
        file = log.close()
        self.taps[name], self.speed[name] = log.logged, result.samples_per_s
        return file, cfg, result

    def add(self, name, style, file, cfg, *, faults, intended, cause, twin, truth_measures, description, **extra):
        model = f"char-transformer-d{cfg['d_model']}x{cfg['layers']}h{cfg['heads']}"
        self.entries.append(_text.entry(FAMILY, name, model, style, file, faults=faults, intended=intended,
                                        cause=cause, twin=twin, seed=cfg["seed"], config=cfg, truth=truth_measures,
                                        description=description, **extra))

    def healthy(self, name, naming, **kw):
        """confirm_healthy on a run meant to be healthy (or a twin): its measures and the verdict."""
        ok, m = truth.confirm_healthy(self.taps[name], NAMES[naming]["loss"], NAMES[naming]["val_loss"])
        return {"truth_measures": m, "healthy_confirmed": ok, **kw}


def _garbage_shard(tx, ty, start: int, count: int, seed: int, n_rare: int, targets_only: bool = False):
    """Windows [start, start+count) replaced by uniformly random rare symbols: a corrupt shard (with
    ``targets_only`` the inputs stay text and only the next-character targets are garbage)."""
    gen = torch.Generator().manual_seed(seed)
    rare = torch.tensor(_text.vocab().rare(n_rare))
    bx, by = tx.clone(), ty.clone()
    garbage_x = rare[torch.randint(len(rare), (count, tx.shape[1]), generator=gen)]
    if not targets_only:
        bx[start:start + count] = garbage_x
    by[start:start + count] = rare[torch.randint(len(rare), (count, ty.shape[1]), generator=gen)]
    return bx, by


def _slow_loader(delay_s: float):
    """A real DataLoader whose dataset sleeps ``delay_s`` per window (slow storage), see :mod:`._pipeline`."""
    def make(tx, ty, cfg):
        return loader_batches(tx, ty, cfg["batch_size"], cfg["seed"], "slow_io", delay_s=delay_s)
    make.needs_data = True
    return make


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root)
    want = (lambda n: True) if only is None else (lambda n: n in only)
    L = NAMES

    # The twin most faults compare with: AdamW 3e-3, clipped, shuffled.
    f, c, _ = runs.train("transformer_twin_adamw", "wandb", "wandb", {})
    runs.add("transformer_twin_adamw", "wandb", f, c, faults=[], intended=[], cause="twin", twin=None,
             description="Causal char transformer (d48, 2 layers, 4 heads), AdamW 3e-3, batch 32, clip 1.0: the sane twin.",
             **runs.healthy("transformer_twin_adamw", "wandb"))
    twin = runs.taps["transformer_twin_adamw"]
    key = L["wandb"]["loss"]

    def fault(name, cause, intended, cfg, check, description, style="wandb", naming="wandb", slow=False, **kw):
        if not want(name):
            return
        f, c, res = runs.train(name, style, naming, cfg, **kw)
        ok, measures = check(runs.taps[name])
        extra = {}
        if slow:
            got, also = truth.flat_or_slow_labels(intended, measures.pop("_flat"))
            got = got if ok else []
            if ok and also:
                extra["also_acceptable"] = also
        else:
            got = intended if ok else []
        runs.add(name, style, f, c, faults=got, intended=intended, cause=cause, twin="transformer_twin_adamw",
                 truth_measures=measures, description=description, **extra)

    osc = lambda tap: truth.confirm_oscillation(tap, twin, key)

    def slow(tap):
        # A run meant to be slow that does not learn at all is the flat case of loss-oscillation (corpus brief).
        ok, measures = truth.confirm_slow(tap, twin, key)
        if ok:
            return ok, {**measures, "_flat": False}
        flat, flat_measures = truth.confirm_oscillation(tap, twin, key)
        return flat, {**measures, **flat_measures, "_flat": flat}

    fault("transformer_lr_too_high", "lr_too_high", ["loss-oscillation"], {"lr": 0.6}, osc,
          "AdamW at lr 0.6 (200x the twin's): the loss falls briefly, then stalls near the unigram level and bounces.")
    fault("transformer_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 2, "lr": 0.15}, osc,
          "Batch 2 with AdamW lr 0.15: gradient noise keeps the loss bouncing high.", style="csv")
    fault("transformer_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": 1e-4}, slow,
          "AdamW lr 1e-4 (30x below the twin): learns, very slowly.", style="mlflow", naming="wandb", slow=True)
    fault("transformer_adam_eps_one", "adam_eps", ["slow-convergence"], {"eps": 1.0}, slow,
          "AdamW eps=1.0: the update collapses to a tiny SGD step.", style="parquet", slow=True)
    # Init far too small: AdamW rescales its steps (and LayerNorm renormalises), so a tiny init costs it only a
    # few dozen steps; the fault is shown with SGD momentum, against an SGD twin with the default init.
    if want("transformer_init_too_small") or want("transformer_twin_sgd"):
        sgd = {"optimizer": "sgd", "lr": SGD_LR, "weight_decay": 0.0}
        f, c, _ = runs.train("transformer_twin_sgd", "csv", "plain", sgd)
        runs.add("transformer_twin_sgd", "csv", f, c, faults=[], intended=[], cause="twin", twin=None,
                 description=f"Char transformer, SGD momentum 0.9 lr {SGD_LR}, default init, clip 1.0: the init fault's twin.",
                 **runs.healthy("transformer_twin_sgd", "plain"))
        name = "transformer_init_too_small"
        f, c, _ = runs.train(name, "csv", "plain", {**sgd, "init": "scaled:0.001"})
        sgd_key = L["plain"]["loss"]
        ok, m = truth.confirm_slow(runs.taps[name], runs.taps["transformer_twin_sgd"], sgd_key)
        flat = False
        if not ok:
            flat, fm = truth.confirm_oscillation(runs.taps[name], runs.taps["transformer_twin_sgd"], sgd_key)
            m, ok = {**m, **fm}, flat
        got, also = truth.flat_or_slow_labels(["slow-convergence"], flat)
        runs.add(name, "csv", f, c, faults=got if ok else [], intended=["slow-convergence"], cause="init_too_small",
                 twin="transformer_twin_sgd", truth_measures=m,
                 description="SGD momentum; every parameter (LayerNorm gains included) scaled by 1e-3 at init: "
                             "signal and gradients start near zero.", **({"also_acceptable": also} if ok and also else {}))

    # Explosion: no clipping and an LR spike at a warm restart (the restart multiplies the LR by 1000).
    spike_at = 150

    def restart_spike(step, opt):
        if step == spike_at:
            for g in opt.param_groups:
                g["lr"] = g["lr"] * 1000

    fault("transformer_lr_spike_restart", "lr_spike", ["nonfinite"],
          {"clip": None, "restart_at": spike_at, "restart_lr_factor": 1000},
          lambda tap: truth.confirm_explosion(tap, twin, L["wandb"]["grad_norm"], key),
          "Unclipped; at step 150 a restart sets the LR 1000x: the loss and gradients explode.", before_step=restart_spike)

    # Bad shard, no shuffling: one batch's worth of windows late in each epoch is random rare symbols.
    clean_noshuffle = {"shuffle": False, "max_steps": 350}
    shard_batch, n_rare = 60, 30
    if want("transformer_bad_shard_noshuffle") or want("transformer_twin_noshuffle"):
        f, c, _ = runs.train("transformer_twin_noshuffle", "parquet", "plain", clean_noshuffle, log_every=1)
        runs.add("transformer_twin_noshuffle", "parquet", f, c, faults=[], intended=[], cause="twin", twin=None,
                 description="Char transformer without shuffling, clean data: the bad shard's twin.",
                 **runs.healthy("transformer_twin_noshuffle", "plain"))
        (tx, ty), _ = _text.splits()
        bs = BASE["batch_size"]
        spe = math.ceil(len(tx) / bs)
        lo = shard_batch * bs
        spikes = [float(e * spe + shard_batch + 1) for e in range(350 // spe + 1) if e * spe + shard_batch + 1 <= 350]
        name = "transformer_bad_shard_noshuffle"
        f, c, _ = runs.train(name, "parquet", "plain", {**clean_noshuffle, "bad_shard": [lo, lo + bs]},
                             train_override=_garbage_shard(tx, ty, lo, bs, SEED, n_rare), log_every=1)
        ok, m = truth.confirm_spikes_at(runs.taps[name], runs.taps["transformer_twin_noshuffle"], L["plain"]["loss"], spikes)
        runs.add(name, "parquet", f, c, faults=["periodic-spikes"] if ok else [], intended=["periodic-spikes"],
                 cause="bad_shard", twin="transformer_twin_noshuffle", truth_measures={**m, "spike_steps": spikes},
                 description=f"No shuffling; windows {lo}-{lo + bs - 1} (batch {shard_batch} of every epoch) are random "
                             f"symbols from the {n_rare} rarest.")

    # Overfitting: a tiny train text, no dropout and no weight decay; the twin adds dropout and weight decay.
    tiny = {"train_chars": 6000, "stride": 16, "max_steps": 400, "lr": 3e-3}
    if want("transformer_overfit_tiny") or want("transformer_twin_overfit_reg"):
        f, c, _ = runs.train("transformer_twin_overfit_reg", "mlflow", "mlflow", {**tiny, "dropout": 0.3, "weight_decay": 0.3})
        runs.add("transformer_twin_overfit_reg", "mlflow", f, c, faults=[], intended=[], cause="twin", twin=None,
                 description="The tiny train text with dropout 0.3 and weight decay 0.3: the overfitting run's twin.",
                 **runs.healthy("transformer_twin_overfit_reg", "mlflow"))
        name = "transformer_overfit_tiny"
        f, c, _ = runs.train(name, "mlflow", "mlflow", {**tiny, "dropout": 0.0, "weight_decay": 0.0})
        ok, m = truth.confirm_overfitting(runs.taps[name], runs.taps["transformer_twin_overfit_reg"],
                                          L["mlflow"]["loss"], L["mlflow"]["val_loss"])
        _, wn = runs.taps[name].get(L["mlflow"]["weight_norm"])
        m.update(weight_norm_first=float(wn[0]), weight_norm_last=float(wn[-1]))
        runs.add(name, "mlflow", f, c, faults=["overfitting"] if ok else [], intended=["overfitting"], cause="overfitting",
                 twin="transformer_twin_overfit_reg", truth_measures=m,
                 description="6000 train characters (stride-16 windows), no dropout, no weight decay, 400 steps: "
                             "train loss keeps falling, val rises, weight norm grows.")

    # A slow data loader: a DataLoader whose dataset sleeps per window; the twin reads the same windows in memory.
    name = "transformer_slow_loader"
    if want(name):
        delay = 0.005
        f, c, _ = runs.train(name, "csv", "mlflow", {"loader": "slow_io", "delay_s": delay, "max_steps": 80},
                             batches=_slow_loader(delay))
        ok, m = truth.confirm_bottleneck(runs.speed[name], runs.speed["transformer_twin_adamw"])
        runs.add(name, "csv", f, c, faults=["input-bottleneck"] if ok else [], intended=["input-bottleneck"],
                 cause="slow_loader", twin="transformer_twin_adamw", truth_measures=m,
                 description=f"A DataLoader whose dataset sleeps {delay * 1000:.0f} ms per window (slow storage); "
                             "measured data vs compute time.")

    # Healthy variants: schedules, rare val logging, converge early and idle, tiny batch.
    healthy = [
        ("transformer_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 5e-3}, {}, "Warm-up then cosine decay."),
        ("transformer_step_decay", "mlflow", "mlflow", {"schedule": "step"}, {}, "Step decay x0.3 every 100 steps."),
        ("transformer_sgdr_restarts", "wandb", "wandb", {"schedule": "sgdr", "lr": 4e-3}, {},
         "SGDR: cosine with warm restarts every 75 steps."),
        ("transformer_onecycle", "parquet", "plain", {"schedule": "onecycle", "lr": 6e-3, "heads": 2}, {},
         "Two heads, one-cycle LR."),
        ("transformer_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         "Logs every 3rd step and validates every 100."),
        ("transformer_converged_idle", "wandb", "plain",
         {"lr": 5e-3, "schedule": "decay_then_idle", "decay_steps": 120, "max_steps": 400}, {"log_every": 4},
         "LR decays to 1 % by step 120; the loss has converged and idles at its plateau for the rest."),
        ("transformer_tiny_batch_sane_lr", "parquet", "mlflow", {"batch_size": 8, "lr": 1e-3}, {},
         "Batch 8 with a sane small AdamW LR 1e-3: noisy but learning."),
    ]
    for name, style, naming, cfg, kw, desc in healthy:
        if want(name):
            f, c, _ = runs.train(name, style, naming, cfg, **kw)
            runs.add(name, style, f, c, faults=[], intended=[], cause="healthy", twin=None, description=desc,
                     **runs.healthy(name, naming))

    name = "transformer_hf_trainer"
    if want(name):
        cfg = {**BASE, "seed": SEED, "trainer": "hf", "lr": 3e-3, "max_steps": 200, "schedule": "linear"}
        (tx, ty), (vx, vy) = _text.splits()
        model = _model(cfg)
        args = {"learning_rate": cfg["lr"], "per_device_train_batch_size": 32, "per_device_eval_batch_size": 128,
                "max_steps": cfg["max_steps"], "logging_steps": 5, "eval_steps": 40, "weight_decay": 0.01,
                "max_grad_norm": 1.0, "warmup_steps": 20}
        f, logged = hf_trainer_run(root, name, model, _text.lm_loss, (tx, ty), (vx[:128], vy[:128]), args, SEED)
        runs.taps[name] = logged
        ok, m = truth.confirm_healthy(logged, "loss", "eval_loss")
        runs.add(name, "hf_trainer", f, cfg, faults=[], intended=[], cause="healthy", twin=None, truth_measures=m,
                 healthy_confirmed=ok, description="transformers.Trainer, linear decay with warm-up; trainer_state.json.")
    return runs.entries
