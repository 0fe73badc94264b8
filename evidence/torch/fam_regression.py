"""Regression family: MLP regressors on scikit-learn's bundled diabetes data (442 patients, 10 features),
MSE loss, features and target standardised on the training split unless the fault is raw units.

Each fault run has a sane twin with the same seed, split and init; labels come from :mod:`.truth`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_diabetes

from . import truth
from ._pipeline import loader_batches
from .common import NAMES, fit, lr_spike, minibatches, seed_all
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .sinks import open_run

FAMILY = "regression"
DATASET = "sklearn.load_diabetes"


def diabetes(seed: int, raw_features: bool = False, raw_target: bool = False, n_train: int | None = None):
    """Seeded 342/100 split; standardised with the training split's statistics unless raw."""
    x, y = load_diabetes(return_X_y=True, scaled=not raw_features)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    tr, va = order[:342], order[342:]
    if n_train is not None:
        tr = tr[:n_train]
    x, y = x.astype(np.float32), y.astype(np.float32)
    if not raw_features:
        mu, sd = x[tr].mean(0), x[tr].std(0)
        x = (x - mu) / sd
    if not raw_target:
        y = (y - y[tr].mean()) / y[tr].std()
    t = lambda a: torch.tensor(a, dtype=torch.float32)
    return t(x[tr]), t(y[tr]).unsqueeze(1), t(x[va]), t(y[va]).unsqueeze(1)


def mlp(width: int = 64, depth: int = 2, act: str = "relu", init: str = "default", init_std: float = 0.0,
        dropout: float = 0.0, n_in: int = 10, n_out: int = 1) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    d = n_in
    for _ in range(depth):
        layers += [torch.nn.Linear(d, width), {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[act]()]
        if dropout:
            layers.append(torch.nn.Dropout(dropout))
        d = width
    layers.append(torch.nn.Linear(d, n_out))
    net = torch.nn.Sequential(*layers)
    for m in net:
        if isinstance(m, torch.nn.Linear):
            if init == "small":
                torch.nn.init.normal_(m.weight, std=init_std)
                torch.nn.init.zeros_(m.bias)
            elif init == "he":
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                torch.nn.init.zeros_(m.bias)
            elif init == "xavier_small":
                torch.nn.init.xavier_normal_(m.weight, gain=init_std)
                torch.nn.init.zeros_(m.bias)
    return net


def first_layer_names(net: torch.nn.Module) -> list[str]:
    return [n for n, _ in net.named_parameters() if n.endswith("weight")]


def make_opt(params, opt: str, lr: float, wd: float = 0.0, eps: float = 1e-8, momentum: float = 0.0):
    if opt == "adam":
        return torch.optim.Adam(params, lr=lr, eps=eps, weight_decay=wd)
    if opt == "adamw":
        return torch.optim.AdamW(params, lr=lr, eps=eps, weight_decay=wd)
    return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd)


def make_sched(optimizer, schedule: str, total: int):
    if schedule == "cosine_warmup":
        warm = max(1, total // 10)
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + np.cos(np.pi * (s - warm) / max(1, total - warm))))
    if schedule == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=max(1, total // 3), gamma=0.3)
    if schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=optimizer.param_groups[0]["lr"], total_steps=total + 5)
    return None


DEFAULT = dict(opt="adam", lr=1e-3, eps=1e-8, batch_size=32, weight_decay=0.0, momentum=0.0, width=64, depth=2,
               activation="relu", init="default", init_std=0.0, dropout=0.0, schedule="constant", shuffle=True,
               num_workers=0, loader="fast", raw_features=False, raw_target=False, n_train=None, steps=300,
               val_every=20, log_every=1, style="csv", naming="plain", early_stop=False, target_noise=0.0)


def train(root: Path, name: str, seed: int, **over):
    """Train one diabetes regressor; returns (file, Logged, FitResult, config)."""
    cfg = {**DEFAULT, **over}
    seed_all(seed)
    xt, yt, xv, yv = diabetes(seed, cfg["raw_features"], cfg["raw_target"], cfg["n_train"])
    if cfg["target_noise"]:
        yt = yt + cfg["target_noise"] * torch.randn(yt.shape, generator=torch.Generator().manual_seed(seed))
        yv = yv + cfg["target_noise"] * torch.randn(yv.shape, generator=torch.Generator().manual_seed(seed + 1))
    before = over.get("before_step")
    corrupt = over.get("corrupt")  # applied to the batch stream below, not stored in config as data
    torch.manual_seed(seed)
    net = mlp(cfg["width"], cfg["depth"], cfg["activation"], cfg["init"], cfg["init_std"], cfg["dropout"])
    optimizer = make_opt(net.parameters(), cfg["opt"], cfg["lr"], cfg["weight_decay"], cfg["eps"], cfg["momentum"])
    steps = cfg["steps"]
    scheduler = make_sched(optimizer, cfg["schedule"], steps)
    if cfg["loader"] == "fast" and cfg["num_workers"] == 0 and not over.get("dataloader"):
        base = minibatches(xt, yt, cfg["batch_size"], seed, cfg["shuffle"])
    else:
        base = loader_batches(xt, yt, cfg["batch_size"], seed, cfg["loader"], num_workers=cfg["num_workers"],
                              shuffle=cfg["shuffle"], delay_s=cfg.get("delay_s", 0.0005), fft_rounds=cfg.get("fft_rounds", 20))
    per_epoch = -(-len(xt) // cfg["batch_size"])
    batches = corrupt(base, per_epoch) if corrupt else base
    mse = torch.nn.functional.mse_loss
    best = {"val": float("inf"), "bad": 0}

    def val_fn():
        net.eval()
        with torch.no_grad():
            v = float(mse(net(xv), yv))
        return v

    config = {k: v for k, v in cfg.items() if k not in ("corrupt", "style", "naming", "before_step", "layer_grads")}
    if corrupt:
        config["corruption"] = corrupt.__qualname__.split(".")[0]
    if before:
        config["lr_spike"] = True
    config.update(model=f"mlp{cfg['depth']}x{cfg['width']}_{cfg['activation']}", dataset=DATASET)
    log = open_run(cfg["style"], root, name, config)
    epochs = 2_000
    if cfg["early_stop"]:
        # Early stopping with patience 3 val checks: the loop's max_steps is set from outside by stopping the
        # batch stream once val stops improving (checked on the batches' epoch boundary).
        inner = batches

        def batches(epoch):  # noqa: F811 - wraps the stream so training ends when val stalls
            if best["bad"] >= 3:
                return iter(())
            v = val_fn()
            if v < best["val"] - 1e-4:
                best.update(val=v, bad=0)
            else:
                best["bad"] += 1
            if best["bad"] >= 3:
                return iter(())
            return inner(epoch)
    result = fit(net, batches, lambda m, b: mse(m(b[0]), b[1]), optimizer, log, epochs=epochs, naming=cfg["naming"],
                 scheduler=scheduler, val_fn=val_fn, val_every=cfg["val_every"], log_every=cfg["log_every"],
                 layer_grads=over.get("layer_grads", ()), before_step=before, max_steps=steps)
    file = log.close()
    return file, log.logged, result, config


def entry(name, style, file, faults, intended, cause, twin, seed, config, measures, description, model=None,
          also=None, family=FAMILY, dataset=DATASET):
    e = {"name": name, "family": family, "model": model or config.get("model"), "dataset": dataset, "style": style,
         "file": file, "faults": sorted(faults), "intended": sorted(intended), "cause": cause, "twin": twin,
         "seed": seed, "config": config, "truth": measures, "description": description}
    if also:
        e["also_acceptable"] = sorted(also)
    return e


def keys(naming: str) -> dict[str, str]:
    return NAMES[naming]


def corrupt_at(step: int, what: str):
    """One bad batch at a given step: a NaN feature or a 1e6 target in one record (no other batch touched)."""
    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                if epoch * per_epoch + i + 1 == step:
                    x, y = x.clone(), y.clone()
                    if what == "nan_feature":
                        x[0, 2] = float("nan")
                    else:
                        y[0, 0] = 1e6
                yield x, y
        return batches
    return wrap


def bad_shard(batch_index: int, scale: float):
    """A contiguous shard (one batch's worth of rows, met at the same place every epoch without shuffling)
    whose targets were written in other units (x scale)."""
    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                yield (x, y * scale) if i == batch_index else (x, y)
        return batches
    return wrap


def oversized(batch_index: int, factor: int):
    """One batch per epoch that is ``factor`` batches glued together with sum-reduced loss semantics: the
    loader concatenates the next ``factor`` batches into one (a misconfigured bucketing sampler)."""
    def wrap(base, per_epoch):
        def batches(epoch):
            it = iter(base(epoch))
            for i, (x, y) in enumerate(it):
                if i == batch_index:
                    xs, ys = [x], [y]
                    for _ in range(factor - 1):
                        try:
                            a, b = next(it)
                        except StopIteration:
                            break
                        xs.append(a); ys.append(b)
                    x, y = torch.cat(xs), torch.cat(ys)
                yield x, y
        return batches
    return wrap


def build(root: Path, only: set[str] | None) -> list[dict]:
    out: list[dict] = []
    runs: dict[str, tuple] = {}

    def run(name, seed=0, **over):
        if name not in runs:
            runs[name] = train(root, name, seed, **over)
        return runs[name]

    def add(name, twin, seed, cause, intended, check, description, over, twin_over, also=None):
        """Train the twin (if any) and the run, confirm with ``check(fault_logged, twin_logged, fault_result,
        twin_result, naming) -> (ok, measures, fault_ids)``."""
        if only is not None and name not in only and twin not in only:
            return
        tw = run(twin, seed, **twin_over) if twin else None
        f, lg, res, cfg = run(name, seed, **over)
        if tw is None:
            ok, measures, ids = True, {"steps": res.steps}, []
        else:
            ok, measures, ids = check(lg, tw[1], res, tw[2], over.get("naming", "plain"))
        faults = ids if ok else []
        out.append(entry(name, over.get("style", "csv"), f, faults, intended, cause, twin, seed, cfg, measures,
                         description, also=also))

    def healthy(name, seed, description, **over):
        if only is not None and name not in only:
            return
        f, lg, res, cfg = run(name, seed, **over)
        out.append(entry(name, over.get("style", "csv"), f, [], [], "healthy", None, seed, cfg,
                         {"steps": res.steps, "samples_per_s": res.samples_per_s}, description))

    def osc(lg, tlg, r, tr, naming):
        ok, m = truth.confirm_oscillation(lg, tlg, keys(naming)["loss"])
        bad, nm = truth.has_nonfinite(lg, (keys(naming)["loss"], keys(naming)["grad_norm"]))
        if bad:
            return True, {**m, **nm}, ["nonfinite"]
        return ok, m, ["loss-oscillation"]

    def slow(lg, tlg, r, tr, naming):
        ok, m = truth.confirm_slow(lg, tlg, keys(naming)["loss"])
        if not ok:
            ok2, m2 = truth.confirm_oscillation(lg, tlg, keys(naming)["loss"])
            if ok2 and m2["fault_fell"] < 0.1:
                return True, {**m, **m2}, ["loss-oscillation"]
        return ok, m, ["slow-convergence"]

    def boom(lg, tlg, r, tr, naming):
        k = keys(naming)
        ok, m = truth.confirm_explosion(lg, tlg, k["grad_norm"], k["loss"])
        return ok, m, ["nonfinite"]

    def overfit(lg, tlg, r, tr, naming):
        k = keys(naming)
        ok, m = truth.confirm_overfitting(lg, tlg, k["loss"], k["val_loss"])
        return ok, m, ["overfitting"]

    def spikes_at(steps):
        def check(lg, tlg, r, tr, naming):
            ok, m = truth.confirm_spikes_at(lg, tlg, keys(naming)["loss"], steps)
            return ok, {**m, "spike_steps": steps}, ["periodic-spikes"]
        return check

    def vanish(first):
        def check(lg, tlg, r, tr, naming):
            ok, m = truth.confirm_vanishing(lg, tlg, keys(naming)["layer_grad"].format(first))
            return ok, m, ["vanishing-gradients"]
        return check

    def bottleneck(lg, tlg, r, tr, naming):
        ok, m = truth.confirm_bottleneck(r.samples_per_s, tr.samples_per_s)
        return ok, m, ["input-bottleneck"]

    W = dict(style="wandb", naming="wandb")
    M = dict(style="mlflow", naming="mlflow")
    P = dict(style="parquet", naming="plain")
    C = dict(style="csv", naming="plain")

    # twins
    adam = dict(**C)
    sgd = dict(opt="sgd", lr=0.05, momentum=0.9, **W)
    healthy_twins = {"regression_twin_adam": adam, "regression_twin_sgd": sgd}
    add("regression_lr_too_high_adam", "regression_twin_adam", 0, "lr_too_high", ["loss-oscillation"], osc,
        "Adam at lr 0.3 on the standardised diabetes MLP: the loss jumps around a level far above the twin's (lr 1e-3).",
        dict(adam, lr=0.3), adam)
    add("regression_lr_too_high_sgd", "regression_twin_sgd", 0, "lr_too_high", ["nonfinite"], osc,
        "SGD momentum 0.9 at lr 1.0 (twin 0.05): the regressor diverges.", dict(sgd, lr=1.0), sgd)
    add("regression_lr_too_low_adam", "regression_twin_adam", 0, "lr_too_low", ["slow-convergence"], slow,
        "Adam at lr 2e-5 (twin 1e-3): the loss creeps down.", dict(adam, lr=2e-5), adam)
    add("regression_batch_too_small", "regression_twin_sgd", 0, "batch_too_small", ["loss-oscillation"], osc,
        "Batch 2 with the twin's SGD lr 0.05 momentum 0.9 (twin batch 32): noisy steps keep the loss high.",
        dict(sgd, batch_size=2), sgd)
    ovf = dict(n_train=40, width=512, steps=800, val_every=20, log_every=4, **M)
    add("regression_overfit_small_subset", "regression_twin_overfit_wd", 0, "overfitting", ["overfitting"], overfit,
        "40 training rows, a 512-wide MLP, no weight decay, 800 steps: val loss climbs while train loss falls.",
        ovf, dict(ovf, weight_decay=0.0, dropout=0.5, opt="adamw"))
    add("regression_raw_target_sgd", "regression_twin_sgd_plain", 0, "gradient_explosion", ["nonfinite"], boom,
        "The target left in raw units (25..346) with SGD lr 0.01: the gradients explode and the loss goes NaN.",
        dict(opt="sgd", lr=0.01, raw_target=True, **P), dict(opt="sgd", lr=0.01, **P))
    add("regression_corrupt_target", "regression_twin_adam_w", 0, "corrupt_record", ["nonfinite"], boom,
        "One record's target is 1e6 in the batch at step 150: the gradient norm jumps by orders of magnitude.",
        dict(adam, corrupt=corrupt_at(150, "huge_target"), **W), dict(adam, **W))
    add("regression_nan_feature", "regression_twin_adam_m", 0, "corrupt_record", ["nonfinite"], boom,
        "A NaN feature in one record of the batch at step 120: the loss and weights go NaN from there.",
        dict(adam, corrupt=corrupt_at(120, "nan_feature"), **M), dict(adam, **M))
    add("regression_lr_spike_restart", "regression_twin_sgd", 0, "lr_spike", ["nonfinite"], boom,
        "A warm restart sets the LR 200x at step 150 (SGD momentum): the run blows up.",
        dict(sgd, before_step=lr_spike(150, 200.0)), sgd)
    add("regression_raw_features_sgd", "regression_twin_sgd_plain", 0, "features_not_normalised",
        ["slow-convergence"], slow,
        "Features in raw units (age, bmi, blood serum) with SGD lr 1e-5 (the largest that does not diverge on raw inputs) against standardised features.",
        dict(opt="sgd", lr=1e-5, raw_features=True, **P), dict(opt="sgd", lr=0.01, **P))
    add("regression_init_too_small", "regression_twin_sgd", 0, "init_too_small", ["slow-convergence"], slow,
        "Weights initialised N(0, 1e-3) in a 4-layer MLP with SGD: a long plateau before it learns.",
        dict(sgd, init="small", init_std=1e-3, depth=4), dict(sgd, depth=4), also=["vanishing-gradients"])
    add("regression_adam_eps_1", "regression_twin_adam_w", 0, "adam_eps_large", ["slow-convergence"], slow,
        "Adam with eps=1.0: the adaptive step shrinks to ~lr*grad and the loss creeps down.",
        dict(adam, eps=1.0, **W), dict(adam, **W))
    ns = dict(shuffle=False, **C)
    per_epoch = 11  # 342 rows / 32
    steps = [e * per_epoch + 6 for e in range(1, 27)]
    add("regression_bad_shard_noshuffle", "regression_twin_noshuffle", 0, "bad_shard", ["periodic-spikes"],
        spikes_at(steps), "Without shuffling, the 6th batch every epoch is a shard with targets x8 (other units).",
        dict(ns, corrupt=bad_shard(5, 8.0)), ns)
    add("regression_oversized_batch", "regression_twin_sgd_sum", 0, "oversized_batch", ["periodic-spikes"],
        spikes_at([e * 8 + 4 for e in range(1, 35)]),
        "One batch per epoch glued from 4 batches; the step size does not account for it (sum-reduced loss).",
        dict(opt="sgd", lr=0.05, momentum=0.9, shuffle=False, corrupt=oversized(3, 4), **C),
        dict(opt="sgd", lr=0.05, momentum=0.9, shuffle=False, **C))
    deep = dict(depth=10, width=32, activation="tanh", init="xavier_small", init_std=0.4, opt="sgd", lr=0.05,
                momentum=0.9, log_every=3, **W)
    layers = [f"{2 * i}.weight" for i in range(10)] + ["20.weight"]
    add("regression_deep_tanh", "regression_twin_deep_relu_he", 0, "vanishing_gradients", ["vanishing-gradients"],
        vanish("0.weight"), "A 10-layer tanh MLP with small Xavier init, no residuals: the first layer's gradient vanishes.",
        dict(deep, layer_grads=layers), dict(deep, activation="relu", init="he", lr=0.01, layer_grads=layers),
        also=["slow-convergence"])
    add("regression_slow_loader", "regression_twin_fast_loader", 0, "slow_loader", ["input-bottleneck"], bottleneck,
        "Each row takes 0.5 ms to arrive (slow storage) through a DataLoader with no workers.",
        dict(loader="slow_io", delay_s=0.0005, **M), dict(loader="fast", dataloader=True, **M))
    add("regression_heavy_preprocessing", "regression_twin_fast_loader", 0, "heavy_preprocessing",
        ["input-bottleneck"], bottleneck, "20 rounds of FFT low-pass augmentation per row in the loader (no workers).",
        dict(loader="heavy", fft_rounds=20, **M), dict(loader="fast", dataloader=True, **M))
    add("regression_too_few_workers", "regression_twin_fast_loader", 0, "too_few_workers", ["input-bottleneck"],
        bottleneck, "Heavy per-row preprocessing in one DataLoader worker: one worker cannot keep up.",
        dict(loader="heavy", fft_rounds=20, num_workers=1, steps=200, **M), dict(loader="fast", dataloader=True, **M))
    # healthy variants
    healthy("regression_warmup_cosine", 1, "Adam lr 3e-3 with 10 % warm-up then cosine decay.", lr=3e-3,
            schedule="cosine_warmup", **P)
    healthy("regression_step_decay", 1, "SGD momentum lr 0.05 with step decay x0.3 every third.", opt="sgd",
            lr=0.05, momentum=0.9, schedule="step", **W)
    healthy("regression_onecycle", 1, "One-cycle SGD to lr 0.05.", opt="sgd", lr=0.05, momentum=0.9,
            schedule="onecycle", **M)
    healthy("regression_early_stopping", 2, "Adam with early stopping (patience 3 epochs on val loss).",
            early_stop=True, steps=1000, **C)
    healthy("regression_target_noise", 2, "Targets with added noise (std 1): a high plateau, val tracks train.",
            target_noise=1.0, **P)
    healthy("regression_tiny_batch_sane_lr", 2, "Batch 4 with Adam lr 2e-4.", batch_size=4, lr=2e-4, steps=600, log_every=3, **W)
    healthy("regression_rare_val", 3, "Val loss logged only every 100 steps.", val_every=100, **M)
    names = {e["name"] for e in out}
    for name, over in list(healthy_twins.items()) + [
            ("regression_twin_overfit_wd", dict(ovf, dropout=0.5, opt="adamw")),
            ("regression_twin_sgd_plain", dict(opt="sgd", lr=0.01, **P)),
            ("regression_twin_adam_w", dict(adam, **W)), ("regression_twin_adam_m", dict(adam, **M)),
            ("regression_twin_noshuffle", ns),
            ("regression_twin_sgd_sum", dict(opt="sgd", lr=0.05, momentum=0.9, shuffle=False, **C)),
            ("regression_twin_deep_relu_he", dict(deep, activation="relu", init="he", lr=0.01, layer_grads=layers)),
            ("regression_twin_fast_loader", dict(loader="fast", dataloader=True, **M))]:
        if name in runs and name not in names:
            f, lg, res, cfg = runs[name]
            out.append(entry(name, over.get("style", "csv"), f, [], [], "twin", None, 0, cfg,
                             {"steps": res.steps, "samples_per_s": res.samples_per_s}, "Sane twin."))
    out.extend(framework_runs(root, only))
    return out


def framework_runs(root: Path, only: set[str] | None) -> list[dict]:
    """HF Trainer and Lightning regressors (their own key names): a twin and an LR-too-high run each."""
    out = []
    xt, yt, xv, yv = diabetes(0)
    mse = torch.nn.functional.mse_loss
    hf = {}
    for name, lr in (("regression_hf_twin", 1e-3), ("regression_hf_lr_too_high", 0.5), ("regression_hf_warmup", 3e-3)):
        if only is not None and name not in only and "regression_hf_twin" not in only:
            continue
        seed_all(0)
        net = mlp()
        args = dict(learning_rate=lr, per_device_train_batch_size=16, max_steps=300, logging_steps=2, eval_steps=25,
                    weight_decay=0.0, lr_scheduler_type="constant" if name != "regression_hf_warmup" else "cosine",
                    warmup_steps=30 if name == "regression_hf_warmup" else 0)
        f, lg = hf_trainer_run(root, name, net, mse, (xt, yt), (xv, yv), args, 0)
        hf[name] = (f, lg, args)
    light = {}
    for name, lr in (("regression_lightning_twin", 1e-3), ("regression_lightning_lr_too_low", 1e-5),
                     ("regression_lightning_sgd_step", 0.05)):
        if only is not None and name not in only and "regression_lightning_twin" not in only:
            continue
        seed_all(0)
        net = mlp()
        sgd = name.endswith("sgd_step")
        mk = (lambda p, lr=lr: torch.optim.SGD(p, lr=lr, momentum=0.9)) if sgd else (lambda p, lr=lr: torch.optim.Adam(p, lr=lr))
        hp = dict(optimizer="sgd" if sgd else "adam", lr=lr, batch_size=16, schedule="step" if sgd else "constant",
                  model="mlp2x64_relu", dataset=DATASET)
        sched = (lambda o: torch.optim.lr_scheduler.StepLR(o, 100, 0.3)) if sgd else None
        module = lightning_module(net, mse, mk, hp, sched)
        g = torch.Generator().manual_seed(0)
        tl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt), batch_size=16, shuffle=True, generator=g)
        vl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xv, yv), batch_size=100)
        f, lg = lightning_run(root, name, module, tl, vl, dict(max_epochs=14, log_every_n_steps=1))
        light[name] = (f, lg, hp)
    for name, (f, lg, args) in hf.items():
        faults, measures, intended, twin = [], {}, [], None
        if name == "regression_hf_lr_too_high":
            twin, intended = "regression_hf_twin", ["loss-oscillation"]
            ok, measures = truth.confirm_oscillation(lg, hf[twin][1], "loss")
            faults = ["loss-oscillation"] if ok else []
        out.append(entry(name, "hf_trainer", f, faults, intended, "lr_too_high" if intended else "healthy", twin, 0,
                         {**args, "optimizer": "adamw", "model": "mlp2x64_relu", "dataset": DATASET}, measures,
                         "transformers.Trainer on the diabetes MLP.", model="mlp2x64_relu"))
    for name, (f, lg, hp) in light.items():
        faults, measures, intended, twin = [], {}, [], None
        if name == "regression_lightning_lr_too_low":
            twin, intended = "regression_lightning_twin", ["slow-convergence"]
            ok, measures = truth.confirm_slow(lg, light[twin][1], "train_loss_step")
            faults = ["slow-convergence"] if ok else []
        out.append(entry(name, "lightning", f, faults, intended, "lr_too_low" if intended else "healthy", twin, 0, hp,
                         measures, "lightning.Trainer with CSVLogger on the diabetes MLP.", model="mlp2x64_relu"))
    return out
