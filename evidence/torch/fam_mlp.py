"""The mlp family: deep fully connected classifiers on scikit-learn's bundled breast-cancer data
(569 tumours, 30 features whose raw units range from ~0.001 to ~2,500), cross-entropy loss.

A seeded 450/119 split; features standardised with the training split's statistics unless the fault is
raw units. Every Linear weight's gradient norm is logged (first layer first) with the total grad norm.
Every fault run has a twin with the one setting put right; labels come from :mod:`.truth` against it,
and every twin and healthy run is itself checked with :func:`.truth.confirm_healthy`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_breast_cancer
from torch import nn

from . import truth
from ._pipeline import loader_batches
from .common import NAMES, fit, lr_spike, minibatches, seed_all
from .integrations import lightning_module, lightning_run
from .sinks import open_run

FAMILY = "mlp"
SEED = 23
DATASET = "sklearn.load_breast_cancer"
N_TRAIN = 450


def cancer(seed: int, raw: bool = False, n_train: int | None = None, label_noise: float = 0.0):
    """Seeded 450/119 split; standardised with the training split's statistics unless ``raw``.
    ``label_noise`` flips that fraction of the training labels (seeded); validation labels stay clean."""
    x, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:N_TRAIN], order[N_TRAIN:]
    if n_train is not None:
        tr = tr[:n_train]
    x = x.astype(np.float32)
    if not raw:
        mu, sd = x[tr].mean(0), x[tr].std(0)
        x = (x - mu) / sd
    yt = y[tr].copy()
    if label_noise:
        flip = np.random.default_rng(seed + 1).permutation(len(tr))[: int(round(label_noise * len(tr)))]
        yt[flip] = 1 - yt[flip]
    f = lambda a: torch.tensor(a, dtype=torch.float32)
    i = lambda a: torch.tensor(a, dtype=torch.long)
    return f(x[tr]), i(yt), f(x[va]), i(y[va])


ACTS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}


class MLP(nn.Module):
    """``depth`` Linear layers in all: input layer, ``depth - 2`` hidden layers (residual if asked), head."""

    def __init__(self, depth: int = 4, width: int = 64, act: str = "relu", residual: bool = False,
                 dropout: float = 0.0, n_in: int = 30, n_out: int = 2):
        super().__init__()
        self.inp = nn.Linear(n_in, width)
        self.hidden = nn.ModuleList(nn.Linear(width, width) for _ in range(depth - 2))
        self.head = nn.Linear(width, n_out)
        self.act, self.residual, self.drop = ACTS[act](), residual, nn.Dropout(dropout)

    def forward(self, x):
        h = self.act(self.inp(x))
        for layer in self.hidden:
            z = self.act(layer(h))
            h = h + z if self.residual else z
        return self.head(self.drop(h))


def _init(net: nn.Module, init: str, std: float) -> None:
    with torch.no_grad():
        for m in net.modules():
            if not isinstance(m, nn.Linear):
                continue
            if init == "he":
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif init == "normal":
                nn.init.normal_(m.weight, std=std)
                nn.init.zeros_(m.bias)
            elif init == "scaled":  # default init, every parameter shrunk by ``std``: "init far too small"
                m.weight.mul_(std)
                m.bias.mul_(std)


def weight_names(net: nn.Module) -> list[str]:
    return [n for n, _ in net.named_parameters() if n.endswith("weight")]


def _sched(opt, kind: str, steps: int):
    if kind == "constant":
        return None
    if kind == "warmup_cosine":
        warm = max(1, steps // 10)
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warm) / max(1, steps - warm)))))
    if kind == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=max(1, steps // 3), gamma=0.3)
    if kind == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=opt.param_groups[0]["lr"], total_steps=steps + 1)
    raise ValueError(kind)


BASE = dict(optimizer="adam", lr=1e-3, eps=1e-8, momentum=0.9, batch_size=32, weight_decay=1e-2, depth=4, width=64,
            activation="relu", residual=False, init="default", init_std=0.0, dropout=0.0, schedule="constant",
            shuffle=True, num_workers=0, loader="memory", fft_rounds=0, raw_features=False, n_train=None,
            label_noise=0.0, max_steps=300, val_every=15, log_every=1, early_stop=0, clip=None)


class _Runs:
    """Trains runs, keeps their taps and throughput so a fault run finds its twin's."""

    def __init__(self, root: Path, only: set[str] | None):
        self.root, self.only = root, only
        self.done: dict[str, tuple] = {}  # name -> (file, logged, result, config, style, naming)
        self.entries: list[dict] = []

    def train(self, name: str, style: str, naming: str, over: dict, *, corrupt=None, before_step=None) -> tuple:
        if name in self.done:
            return self.done[name]
        cfg = {**BASE, "seed": SEED, **over}
        seed_all(cfg["seed"])
        xt, yt, xv, yv = cancer(cfg["seed"], cfg["raw_features"], cfg["n_train"], cfg["label_noise"])
        torch.manual_seed(cfg["seed"])
        net = MLP(cfg["depth"], cfg["width"], cfg["activation"], cfg["residual"], cfg["dropout"])
        _init(net, cfg["init"], cfg["init_std"])
        if cfg["optimizer"] == "sgd":
            opt = torch.optim.SGD(net.parameters(), lr=cfg["lr"], momentum=cfg["momentum"], weight_decay=cfg["weight_decay"])
        elif cfg["optimizer"] == "adamw":
            opt = torch.optim.AdamW(net.parameters(), lr=cfg["lr"], eps=cfg["eps"], weight_decay=cfg["weight_decay"])
        else:
            opt = torch.optim.Adam(net.parameters(), lr=cfg["lr"], eps=cfg["eps"], weight_decay=cfg["weight_decay"])
        if cfg["loader"] == "memory":
            batches = minibatches(xt, yt, cfg["batch_size"], cfg["seed"], cfg["shuffle"])
        else:  # a real DataLoader: "fast" (TensorDataset) or "heavy" (per-row FFT augmentation)
            batches = loader_batches(xt, yt, cfg["batch_size"], cfg["seed"], cfg["loader"], num_workers=cfg["num_workers"],
                                     shuffle=cfg["shuffle"], fft_rounds=cfg["fft_rounds"])
        if corrupt is not None:
            batches = corrupt(batches, -(-len(xt) // cfg["batch_size"]))
        ce = nn.functional.cross_entropy

        def val_fn():
            net.eval()
            with torch.no_grad():
                return float(ce(net(xv), yv))

        if cfg["early_stop"]:
            # Early stopping on the val loss, checked at each epoch boundary (patience ``early_stop`` epochs).
            inner, best = batches, {"val": float("inf"), "bad": 0}

            def batches(epoch):  # noqa: F811
                if best["bad"] < cfg["early_stop"]:
                    v = val_fn()
                    if v < best["val"] - 1e-4:
                        best.update(val=v, bad=0)
                    else:
                        best["bad"] += 1
                return iter(()) if best["bad"] >= cfg["early_stop"] else inner(epoch)

        config = {k: v for k, v in cfg.items()}
        config.update(model=self.model_name(cfg), dataset=DATASET)
        if corrupt is not None:
            config["corruption"] = getattr(corrupt, "label", "corrupt batch")
        if before_step is not None:
            config["lr_spike"] = getattr(before_step, "label", True)
        log = open_run(style, self.root, name, config)
        layers = weight_names(net)
        res = fit(net, batches, lambda m, b: ce(m(b[0]), b[1]), opt, log, epochs=20_000, naming=naming,
                  scheduler=_sched(opt, cfg["schedule"], cfg["max_steps"]), val_fn=val_fn, val_every=cfg["val_every"],
                  log_every=cfg["log_every"], layer_grads=layers, clip=cfg["clip"], before_step=before_step,
                  max_steps=cfg["max_steps"])
        file = log.close()
        config["steps_trained"] = res.steps
        self.done[name] = (file, log.logged, res, config, style, naming, layers)
        return self.done[name]

    @staticmethod
    def model_name(cfg: dict) -> str:
        res = "res" if cfg["residual"] else ""
        return f"mlp{cfg['depth']}x{cfg['width']}_{cfg['activation']}{res}"

    def add(self, name: str, *, faults, intended, cause, twin, measures, description, also=None, **extra) -> dict:
        file, logged, res, config, style, naming, _ = self.done[name]
        e = {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET, "style": style, "file": file,
             "faults": sorted(faults), "intended": sorted(intended), "cause": cause, "twin": twin, "seed": config["seed"],
             "config": config, "truth": measures, "description": description, **extra}
        if also:
            e["also_acceptable"] = sorted(also)
        self.entries.append(e)
        return e

    def healthy_check(self, name: str) -> tuple[bool, dict]:
        _, logged, res, _, _, naming, _ = self.done[name]
        k = NAMES[naming]
        ok, m = truth.confirm_healthy(logged, k["loss"], k["val_loss"], (k["grad_norm"],))
        return ok, {**m, "steps": res.steps, "samples_per_s": res.samples_per_s}

    def add_clean(self, name: str, cause: str, description: str) -> None:
        """A twin or healthy run: its entry carries confirm_healthy's verdict."""
        if any(e["name"] == name for e in self.entries):
            return
        ok, m = self.healthy_check(name)
        self.add(name, faults=[], intended=[], cause=cause, twin=None, measures=m, description=description,
                 healthy_confirmed=ok)


def corrupt_nan_at(step: int):
    """One record of the batch met at ``step`` gets a NaN feature (no other batch touched)."""
    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                if epoch * per_epoch + i + 1 == step:
                    x = x.clone()
                    x[0, 3] = float("nan")
                yield x, y
        return batches
    wrap.label = f"NaN in feature 3 of one record at step {step}"
    return wrap


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = _Runs(root, only)
    want = (lambda *n: True) if only is None else (lambda *n: any(x in only for x in n))

    def keyset(name):
        return NAMES[runs.done[name][5]]

    def twin_run(name, style, naming, over, description, **kw):
        runs.train(name, style, naming, over, **kw)
        return name

    def fault(name, twin, style, _naming, over, cause, intended, check, description, **kw):
        """Train ``name`` (its twin already trained) with the twin's key names (the criteria compare one key)
        and label it with what ``check`` confirms."""
        if not want(name, twin):
            return
        runs.train(name, style, runs.done[twin][5], over, **kw)
        ok, measures, got, also = check(runs.done[name][1], runs.done[twin][1], name, twin)
        runs.add(name, faults=got if ok else [], intended=intended, cause=cause, twin=twin, measures=measures,
                 description=description, also=also if ok else None)

    # --- checks: (fault_logged, twin_logged, name, twin) -> (ok, measures, faults, also)
    def osc(f, t, name, twin):
        k = keyset(name)
        bad, nm = truth.has_nonfinite(f, (k["loss"], k["grad_norm"]))
        if bad:
            ok, m = truth.confirm_explosion(f, t, k["grad_norm"], k["loss"])
            return ok, {**m, **nm}, ["nonfinite"], None
        ok, m = truth.confirm_oscillation(f, t, k["loss"])
        return ok, m, ["loss-oscillation"], None

    def slow(f, t, name, twin):
        # A run meant to be slow that does not learn at all is the flat case of loss-oscillation.
        k = keyset(name)
        ok, m = truth.confirm_slow(f, t, k["loss"])
        flat = False
        if not ok:
            ok, m2 = truth.confirm_oscillation(f, t, k["loss"])
            m = {**m, **{f"osc_{a}": b for a, b in m2.items()}}
            flat = ok
        faults, also = truth.flat_or_slow_labels(["slow-convergence"], flat)
        return ok, m, faults, also

    def boom(f, t, name, twin):
        k = keyset(name)
        ok, m = truth.confirm_explosion(f, t, k["grad_norm"], k["loss"])
        return ok, m, ["nonfinite"], None

    def vanish(f, t, name, twin):
        k = keyset(name)
        first = runs.done[name][6][0]
        ok, m = truth.confirm_vanishing(f, t, k["layer_grad"].format(first))
        m["first_layer_key"] = k["layer_grad"].format(first)
        # What the loss curve shows beside it, read by the same twin criteria (recorded as also acceptable).
        also = []
        s_ok, s_m = truth.confirm_slow(f, t, k["loss"])
        o_ok, o_m = truth.confirm_oscillation(f, t, k["loss"])
        if s_ok:
            also.append("slow-convergence")
        elif o_ok:
            also.append("loss-oscillation")
        m.update({f"slow_{a}": b for a, b in s_m.items()})
        m.update({f"osc_{a}": b for a, b in o_m.items()})
        return ok, m, ["vanishing-gradients"], also

    def overfit(f, t, name, twin):
        k = keyset(name)
        ok, m = truth.confirm_overfitting(f, t, k["loss"], k["val_loss"])
        return ok, m, ["overfitting"], None

    def bottleneck(f, t, name, twin):
        ok, m = truth.confirm_bottleneck(runs.done[name][2].samples_per_s, runs.done[twin][2].samples_per_s)
        return ok, m, ["input-bottleneck"], None

    W, M, P, C = ("wandb", "wandb"), ("mlflow", "mlflow"), ("parquet", "plain"), ("csv", "plain")

    # ---------------------------------------------------------------- twins
    adam = dict(max_steps=240, log_every=3)
    sgd = dict(optimizer="sgd", lr=0.02, max_steps=240, log_every=2)
    twin_run("mlp_twin_adam", *W, adam, "")
    twin_run("mlp_twin_sgd", *P, sgd, "")

    # ---------------------------------------------------------------- LR / batch / optimiser faults
    fault("mlp_lr_too_high_adam", "mlp_twin_adam", *P, dict(adam, lr=0.3, log_every=1), "lr_too_high", ["loss-oscillation"], osc,
          "Adam at lr 0.3 (300x the twin's 1e-3): the loss bounces at a level far above the twin's.")
    fault("mlp_lr_too_high_sgd", "mlp_twin_sgd", *P, dict(sgd, lr=0.3), "lr_too_high", ["loss-oscillation"], osc,
          "SGD momentum 0.9 at lr 0.3 (15x the twin's 0.02): the loss does not settle.")
    fault("mlp_batch_too_small", "mlp_twin_sgd", *C, dict(sgd, batch_size=2), "batch_too_small", ["loss-oscillation"],
          osc, "Batch 2 at the twin's SGD lr 0.02, momentum 0.9 (twin batch 32): gradient noise keeps the loss bouncing.")
    fault("mlp_lr_too_low", "mlp_twin_adam", *M, dict(adam, lr=1e-5), "lr_too_low", ["slow-convergence"], slow,
          "Adam at lr 1e-5 (100x below the twin's): the loss creeps down.")
    fault("mlp_adam_eps_one", "mlp_twin_adam", *C, dict(adam, eps=1.0), "adam_eps_large", ["slow-convergence"], slow,
          "Adam with eps=1.0: the adaptive step collapses to ~lr*grad.")
    fault("mlp_raw_features_sgd", "mlp_twin_sgd", *P, dict(sgd, raw_features=True), "features_not_normalised",
          ["slow-convergence"], slow, "Features left in raw units (0.001..~4,000) with SGD at the twin's lr 0.02: the first steps' huge gradients leave the ReLUs dead and the loss stuck high.")
    fault("mlp_nan_feature", "mlp_twin_adam", *M, dict(adam), "corrupt_record", ["nonfinite"], boom,
          "One record of the batch at step 120 has a NaN feature: the loss and the weights go NaN from there.",
          corrupt=corrupt_nan_at(120))

    # ---------------------------------------------------------------- init too small (shallow 3-layer ReLU)
    shallow = dict(depth=3, optimizer="sgd", lr=0.05, max_steps=240, log_every=3)
    if want("mlp_init_too_small", "mlp_twin_shallow"):
        twin_run("mlp_twin_shallow", *W, shallow, "")
        fault("mlp_init_too_small", "mlp_twin_shallow", *W, dict(shallow, init="scaled", init_std=1e-3),
              "init_too_small", ["slow-convergence"], slow,
              "A 3-layer ReLU net with every parameter scaled by 1e-3 at init, SGD: the signal and its gradients start near zero.")

    # ---------------------------------------------------------------- explosion: LR spike at a restart
    six = dict(depth=6, optimizer="sgd", lr=0.02, weight_decay=3e-2, max_steps=240, log_every=3)
    if want("mlp_lr_spike_restart", "mlp_twin_deep6"):
        twin_run("mlp_twin_deep6", *M, six, "")
        fault("mlp_lr_spike_restart", "mlp_twin_deep6", *M, six, "lr_spike", ["nonfinite"], boom,
              "Unclipped 6-layer net; a warm restart at step 120 multiplies the SGD lr by 1000: it explodes.",
              before_step=lr_spike(120, 1000.0))

    # ---------------------------------------------------------------- gradient explosion without an LR spike
    # (added after every threshold was set, to be scored once before any change informed by it): the same
    # unclipped 6-layer net with its weights drawn N(0, 0.25^2), about twice He's scale; the twin clips the
    # gradient norm at 1.0, the seed's prevention.
    big = dict(six, init="normal", init_std=0.25)
    if want("mlp_gradient_explosion_noclip", "mlp_twin_deep6_clipped"):
        twin_run("mlp_twin_deep6_clipped", *C, dict(big, clip=1.0), "")
        fault("mlp_gradient_explosion_noclip", "mlp_twin_deep6_clipped", *C, big, "gradient_explosion", ["nonfinite"], boom,
              "Unclipped 6-layer ReLU net initialised N(0, 0.25^2) (twice He's scale), SGD lr 0.02: the gradient norm runs away.")

    # ---------------------------------------------------------------- vanishing gradients
    if want("mlp_vanishing_sigmoid20", "mlp_twin_relu20"):
        d20 = dict(depth=20, width=32, lr=3e-4, max_steps=240, log_every=2)
        twin_run("mlp_twin_relu20", *P, dict(d20, init="he"), "")
        fault("mlp_vanishing_sigmoid20", "mlp_twin_relu20", *P, dict(d20, activation="sigmoid"), "vanishing_gradients",
              ["vanishing-gradients"], vanish,
              "A 20-layer sigmoid stack without residuals, default init: the first layer's gradient vanishes.")
    if want("mlp_vanishing_tanh25", "mlp_twin_relu25"):
        d25 = dict(depth=25, width=32, lr=3e-4, max_steps=240, log_every=2)
        twin_run("mlp_twin_relu25", *C, dict(d25, init="he"), "")
        fault("mlp_vanishing_tanh25", "mlp_twin_relu25", *C, dict(d25, activation="tanh", init="normal", init_std=0.05),
              "vanishing_gradients", ["vanishing-gradients"], vanish,
              "A 25-layer tanh stack with N(0, 0.05) init: the signal shrinks layer by layer and so does the first layer's gradient.")

    # ---------------------------------------------------------------- overfitting
    ovf = dict(n_train=60, width=256, depth=4, batch_size=20, weight_decay=0.0, max_steps=360, val_every=12, log_every=3)
    if want("mlp_overfit_small_subset", "mlp_twin_overfit_reg"):
        twin_run("mlp_twin_overfit_reg", *M, dict(ovf, weight_decay=0.05, dropout=0.5), "")
        fault("mlp_overfit_small_subset", "mlp_twin_overfit_reg", *M, ovf, "overfitting", ["overfitting"], overfit,
              "60 training rows, a 256-wide net, no weight decay, 120 epochs: the weights grow and the val loss climbs.")

    # ---------------------------------------------------------------- too few workers
    if want("mlp_too_few_workers", "mlp_twin_fast_loader"):
        ld = dict(max_steps=150, loader="fast", log_every=3)
        twin_run("mlp_twin_fast_loader", *W, ld, "")
        fault("mlp_too_few_workers", "mlp_twin_fast_loader", *W, dict(ld, loader="heavy", num_workers=1, fft_rounds=20),
              "too_few_workers", ["input-bottleneck"], bottleneck,
              "20 rounds of FFT augmentation per row in one DataLoader worker: one worker cannot keep up.")

    # ---------------------------------------------------------------- healthy runs
    healthy = [
        ("mlp_warmup_cosine", *P, dict(lr=3e-3, schedule="warmup_cosine", max_steps=240), "Adam lr 3e-3, 10 % warm-up then cosine decay."),
        ("mlp_step_decay", *W, dict(optimizer="sgd", lr=0.03, schedule="step", max_steps=240, log_every=3), "SGD momentum lr 0.03, x0.3 every 80 steps."),
        ("mlp_onecycle", *M, dict(optimizer="sgd", lr=0.1, schedule="onecycle", max_steps=240, log_every=3), "One-cycle SGD up to lr 0.1."),
        ("mlp_early_stopping", *C, dict(early_stop=3, max_steps=400), "Adam lr 1e-3, stops after 3 epochs without a val improvement."),
        ("mlp_label_noise", *P, dict(label_noise=0.15, max_steps=240), "15 % of the training labels flipped: the loss plateaus high, val tracks train."),
        ("mlp_tiny_batch_sane_lr", *W, dict(batch_size=4, lr=1e-4, max_steps=400, log_every=5), "Batch 4 with Adam lr 1e-4."),
        ("mlp_rare_val", *C, dict(max_steps=240, val_every=80), "Validated only every 80 steps."),
        ("mlp_deep12_relu_he", *M, dict(depth=12, width=48, init="he", lr=2e-4, max_steps=240, log_every=3), "A 12-layer ReLU net with He init, Adam lr 2e-4."),
    ]
    for name, style, naming, over, desc in healthy:
        if want(name):
            runs.train(name, style, naming, over)
            runs.add_clean(name, "healthy", desc)

    twins = {
        "mlp_twin_adam": "Adam lr 1e-3, batch 32, 4-layer ReLU net, standardised features: the sane twin.",
        "mlp_twin_sgd": "SGD momentum 0.9 lr 0.02, batch 32, standardised features: the SGD twin.",
        "mlp_twin_shallow": "3-layer ReLU net, default init, SGD lr 0.05: the init-too-small twin.",
        "mlp_twin_deep6": "Unclipped 6-layer ReLU net, SGD lr 0.02 (L2 3e-2), no LR spike: the explosion twin.",
        "mlp_twin_deep6_clipped": "The explosion run's settings with the gradient norm clipped at 1.0: its twin.",
        "mlp_twin_relu20": "20-layer ReLU net with He init: the vanishing-sigmoid twin.",
        "mlp_twin_relu25": "25-layer ReLU net with He init: the vanishing-tanh twin.",
        "mlp_twin_overfit_reg": "60 rows, 256-wide, Adam with L2 weight decay 0.05 and dropout 0.5: the overfitting twin.",
        "mlp_twin_fast_loader": "In-memory DataLoader (TensorDataset, no per-row work): the bottleneck twin.",
    }
    for name, desc in twins.items():
        if name in runs.done:
            runs.add_clean(name, "twin", desc)

    if want("mlp_lightning_adam"):
        runs.entries.append(_lightning(root))
    return runs.entries


def _lightning(root: Path) -> dict:
    """One healthy run through lightning.Trainer with a CSVLogger (its own key names)."""
    name = "mlp_lightning_adam"
    seed_all(SEED)
    xt, yt, xv, yv = cancer(SEED)
    torch.manual_seed(SEED)
    net = MLP(4, 64)
    ce = nn.functional.cross_entropy
    hp = dict(optimizer="adam", lr=1e-3, batch_size=32, schedule="constant", model="mlp4x64_relu", dataset=DATASET, seed=SEED)
    module = lightning_module(net, ce, lambda p: torch.optim.Adam(p, lr=1e-3), hp)
    g = torch.Generator().manual_seed(SEED)
    tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt), batch_size=32, shuffle=True, generator=g)
    vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, yv), batch_size=200)
    f, lg = lightning_run(root, name, module, tl, vl, dict(max_epochs=14, log_every_n_steps=1))
    ok, m = truth.confirm_healthy(lg, "train_loss_step", "val_loss")
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning", "file": f,
            "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp, "truth": m,
            "description": "lightning.Trainer with CSVLogger: Adam lr 1e-3, 14 epochs.", "healthy_confirmed": ok}
