"""Healthy runs: real training that converges, including the shapes that look odd but are
*not* faults (SGDR restart bumps, step-decay drops, a finished plateau, early stopping,
noisy small batches, sparse validation)."""

from __future__ import annotations

import time

import numpy as np

from . import datasets as D
from . import models as M
from .loop import eval_loss, fit, scenario
from .loops2 import fast_loader, fit_multitask, fit_timed
from .naming import HF, PLAIN, WANDB, layer_keys, lightning
from .naming import rng_for as _rng
from .runlog import RunLog
from .scenarios_more import _image_data, _zero_head


@scenario(
    "healthy_warmup_cosine_hf",
    faults=[],
    fmt="hf-trainer-state",
    model="MLP 10-128-128-5 ReLU, AdamW",
    dataset="gaussian blobs, 5 classes, d=10",
    seed=901,
    cadence="logging_steps=10 (mean loss), eval every 200, 2000 steps",
    naming="hf-trainer",
    keys=dict(loss="loss", val="eval_loss", grad="grad_norm"),
    description="HF trainer_state.json; AdamW lr 1e-3, weight decay 0.01, linear warm-up 100 steps then "
    "cosine decay to 0; loss and eval_loss fall and settle",
)
def healthy_warmup_cosine_hf(name, seed):
    log = RunLog(name)
    log.meta.update(logging_steps=10, eval_steps=200, max_steps=2000, train_batch_size=32, num_train_epochs=16)
    X, y = D.blobs(5000, d=10, k=5, sep=1.2, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([10, 128, 128, 5], rng=_rng(seed))
    n_ep = len(Xtr) // 32
    t0 = time.time()
    fit(
        log,
        m,
        M.Adam(m.params, weight_decay=0.01),
        M.warmup_cosine(1e-3, 100, 2000),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=2000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=HF,
        log_every=10,
        avg_loss=True,
        Xva=Xva,
        yva=yva,
        val_every=200,
    )
    for step, vals, _wt in log.records:
        if "eval_loss" in vals:
            vals.update(
                epoch=round(step / n_ep, 4),
                eval_runtime=0.02,
                eval_samples_per_second=50000.0,
                eval_steps_per_second=1562.5,
            )
    runtime = time.time() - t0
    train_loss = float(np.mean(log.series("loss")[1]))
    log.log(
        2000,
        {
            "epoch": round(2000 / n_ep, 4),
            "total_flos": 0.0,
            "train_loss": train_loss,
            "train_runtime": round(runtime, 4),
            "train_samples_per_second": round(64000 / runtime, 3),
            "train_steps_per_second": round(2000 / runtime, 3),
        },
    )
    return log


@scenario(
    "healthy_sgdr_wandb",
    faults=[],
    model="MLP 2-128-128-3 ReLU, SGD nesterov momentum 0.9",
    dataset="3 spirals",
    seed=902,
    cadence="every 5 steps, val every 100, 2100 steps",
    naming="wandb (+ train/momentum)",
    keys=dict(loss="train/loss", val="val/loss", grad="grad_norm"),
    description="cosine annealing with warm restarts (SGDR, T0=300, Tmult=2: restarts at 300 and 900): the "
    "loss bumps up after each restart and comes back lower; not a fault",
)
def healthy_sgdr_wandb(name, seed):
    log = RunLog(name)
    X, y = D.spirals(5000, k=3, noise=0.15, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([2, 128, 128, 3], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9, nesterov=True),
        M.sgdr(0.1, 300, 2, min_lr=1e-4),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=2100,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(WANDB, momentum="train/momentum"),
        log_every=5,
        Xva=Xva,
        yva=yva,
        val_every=100,
        step_base=0,
    )
    return log


@scenario(
    "healthy_step_decay_keras",
    faults=[],
    model="MLP 2-64-64-3 ReLU, SGD momentum 0.9",
    dataset="3 spirals, 2000 train / 500 val",
    seed=903,
    cadence="once per epoch, 90 epochs (62 steps each)",
    naming="keras (loss, val_loss, lr, accuracy, val_accuracy)",
    keys=dict(loss="loss", val="val_loss"),
    description="Keras-style epoch logs; lr 0.05 divided by 10 at epochs 30 and 60 (step decay): loss drops "
    "in visible steps at each decay, val follows",
)
def healthy_step_decay_keras(name, seed):
    log = RunLog(name)
    X, y = D.spirals(2500, k=3, noise=0.15, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=2000, n_val=500, seed=seed)
    m = M.MLP([2, 64, 64, 3], rng=_rng(seed))
    opt = M.SGD(m.params, momentum=0.9)
    sched = M.step_decay(0.05, [30, 60])
    rng = _rng(seed, 1)
    for epoch in range(90):
        lr = sched(epoch)
        order = rng.permutation(2000)
        tot, acc = 0.0, 0.0
        for b in range(62):
            idx = order[b * 32 : (b + 1) * 32]
            out = m.forward(Xtr[idx])
            bl, d = M.softmax_ce(out, ytr[idx])
            acc += M.accuracy(out, ytr[idx])
            g, _ = m.backward(d)
            opt.step(g, lr)
            tot += bl
        log.log(
            epoch,
            {
                "loss": tot / 62,
                "accuracy": acc / 62,
                "val_loss": eval_loss(m, Xva, yva, M.softmax_ce),
                "val_accuracy": M.accuracy(m.forward(Xva), yva),
                "lr": lr,
            },
        )
    return log


@scenario(
    "healthy_noisy_batch4_plain",
    faults=[],
    model="MLP 4-32-32-1 tanh, SGD",
    dataset="nonlinear regression d=4",
    seed=904,
    cadence="every step, 3000 steps; val every 250",
    naming="plain",
    keys=dict(loss="train_loss", val="valid_loss"),
    description="batch size 4, SGD lr 0.01: the per-step loss is very noisy (spread of an order of magnitude) "
    "but trends clearly down; valid_loss falls smoothly",
)
def healthy_noisy_batch4_plain(name, seed):
    log = RunLog(name)
    X, y = D.nonlinear_regression(5000, d=4, noise=0.2, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([4, 32, 32, 1], activation="tanh", init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params),
        M.constant(0.01),
        Xtr,
        ytr,
        M.mse,
        steps=3000,
        batch_size=4,
        rng=_rng(seed, 1),
        names=PLAIN,
        Xva=Xva,
        yva=yva,
        val_every=250,
    )
    return log


@scenario(
    "healthy_early_stopping_lightning",
    faults=[],
    fmt="lightning-csv",
    model="MLP 8-128-128-2 ReLU, Adam",
    dataset="XOR + 6 distractor dims, 400 train / 400 val",
    seed=905,
    cadence="train_loss_step every 10 steps, epoch metrics each epoch (12 steps); stopped by EarlyStopping",
    naming="lightning CSVLogger",
    keys=dict(loss="train_loss_step", val="val_loss"),
    description="Lightning CSVLogger metrics.csv; EarlyStopping(monitor='val_loss', patience=5): val loss "
    "falls, bottoms out, rises a little (~3%) over the last 5 epochs and training stops at epoch ~35",
)
def healthy_early_stopping_lightning(name, seed):
    log = RunLog(name)
    X, y = D.xor(800, d=8, noise=0.25, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=400, n_val=400, seed=seed)
    m = M.MLP([8, 128, 128, 2], rng=_rng(seed))
    opt = M.Adam(m.params, lr=5e-4)
    rng = _rng(seed, 1)
    step, best, bad = 0, np.inf, 0
    for epoch in range(200):
        order = rng.permutation(400)
        tot = 0.0
        for b in range(12):
            idx = order[b * 32 : (b + 1) * 32]
            bl, d = M.softmax_ce(m.forward(Xtr[idx]), ytr[idx])
            g, _ = m.backward(d)
            opt.step(g)
            tot += bl
            step += 1
            if step % 10 == 0:
                log.log(step - 1, {"train_loss_step": bl, "epoch": epoch})
        log.log(step - 1, {"lr-Adam": opt.lr, "epoch": epoch})
        vl = eval_loss(m, Xva, yva, M.softmax_ce)
        log.log(step - 1, {"val_loss": vl, "val_acc": M.accuracy(m.forward(Xva), yva), "epoch": epoch})
        log.log(step - 1, {"train_loss_epoch": tot / 12, "epoch": epoch})
        if vl < best - 1e-4:
            best, bad = vl, 0
        else:
            bad += 1
            if bad >= 5:
                break
    log.meta["stopped_epoch"] = epoch
    return log


@scenario(
    "healthy_fast_plateau_wandb",
    faults=[],
    model="softmax regression 10->4, Adam",
    dataset="gaussian blobs, 4 classes, d=10",
    seed=906,
    cadence="every 5 steps, val every 100, 3000 steps",
    naming="wandb",
    keys=dict(loss="train/loss", val="val/loss", grad="grad_norm"),
    description="a convex model with Adam lr 0.05 converges in the first ~5% of the run and then sits on a "
    "finished plateau (the Bayes error of the overlapping blobs) for the rest: not a fault",
)
def healthy_fast_plateau_wandb(name, seed):
    log = RunLog(name)
    X, y = D.blobs(5000, d=10, k=4, sep=0.8, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([10, 4], init="xavier", rng=_rng(seed))
    for p in m.params[:1]:
        p *= 8.0  # a poor random start, so the early descent is visible
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(0.05),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=3000,
        batch_size=128,
        rng=_rng(seed, 1),
        names=WANDB,
        log_every=5,
        Xva=Xva,
        yva=yva,
        val_every=100,
        step_base=0,
    )
    return log


@scenario(
    "healthy_sparse_val_plain",
    faults=[],
    model="MLP 4-64-64-1 ReLU, Adam + cosine",
    dataset="nonlinear regression d=4",
    seed=907,
    cadence="train every 50 steps (mean), val every 1000, 5000 steps",
    naming="plain (+ momentum = Adam beta1)",
    keys=dict(loss="train_loss", val="valid_loss"),
    description="validation only 5 times in the run; both curves fall; beta1 logged as momentum",
)
def healthy_sparse_val_plain(name, seed):
    log = RunLog(name)
    X, y = D.nonlinear_regression(6000, d=4, noise=0.2, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=5000, n_val=1000, seed=seed)
    m = M.MLP([4, 64, 64, 1], rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.cosine(2e-3, 5000, 1e-5),
        Xtr,
        ytr,
        M.mse,
        steps=5000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(PLAIN, momentum="momentum"),
        log_every=50,
        avg_loss=True,
        Xva=Xva,
        yva=yva,
        val_every=1000,
    )
    return log


@scenario(
    "healthy_long_20k_wandb",
    faults=[],
    model="MLP 2-64-64-3 ReLU, Adam + cosine",
    dataset="3 spirals, 20000 train",
    seed=908,
    cadence="every 10 steps (mean), val every 1000, 20000 steps",
    naming="wandb",
    keys=dict(loss="train/loss", val="val/loss", grad="grad_norm"),
    description="a long run: 20k optimizer steps logged every 10; Adam 3e-3 with cosine decay; loss keeps "
    "improving slowly late in the run as the lr anneals",
)
def healthy_long_20k_wandb(name, seed):
    log = RunLog(name)
    X, y = D.spirals(21000, k=3, noise=0.2, turns=1.25, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=20000, n_val=1000, seed=seed)
    m = M.MLP([2, 64, 64, 3], rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.cosine(3e-3, 20000, 1e-5),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=20000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=WANDB,
        log_every=10,
        avg_loss=True,
        Xva=Xva,
        yva=yva,
        val_every=1000,
        step_base=0,
    )
    return log


@scenario(
    "healthy_multitask_balanced",
    faults=[],
    model="two-head MLP 10-64-64 trunk, cls(2) + reg(1), Adam",
    dataset="XOR label + standardised regression target (same inputs as the imbalance runs)",
    seed=909,
    cadence="every 10 steps, 2500 steps; val every 250",
    naming="wandb (loss/task_cls, loss/task_reg, loss)",
    keys=dict(loss="loss", tasks=["loss/task_cls", "loss/task_reg"]),
    description="the same two-task setup as imbalance_wandb_unscaled_target but with the target standardised: "
    "both terms are of the same order and both fall",
)
def healthy_multitask_balanced(name, seed):
    log = RunLog(name)
    X, y, r = D.multitask_xor(5000, reg_scale=1.0, seed=seed)
    m = M.MultiTaskMLP(10, [64, 64], {"cls": 2, "reg": 1}, rng=_rng(seed))
    _zero_head(m, "cls")
    fit_multitask(
        log,
        m,
        M.Adam(m.params),
        M.constant(1e-3),
        X[:4000],
        {"cls": y[:4000], "reg": r[:4000]},
        {"cls": M.softmax_ce, "reg": M.mse},
        steps=2500,
        batch_size=64,
        rng=_rng(seed, 1),
        names={"cls": "loss/task_cls", "reg": "loss/task_reg"},
        total_key="loss",
        log_every=10,
        extra_names={"lr": "train/lr", "grad_norm": "grad_norm"},
        step_base=0,
        val=(X[4000:], {"cls": y[4000:], "reg": r[4000:]}),
        val_every=250,
        val_names={"cls": "val/loss_cls", "reg": "val/loss_reg"},
    )
    return log


@scenario(
    "healthy_deep_resmlp_grads",
    faults=[],
    model="residual MLP 2-64x15-3 ReLU (16 layers), He init",
    dataset="3 spirals",
    seed=910,
    cadence="loss every step, per-layer grad norms every 10, 2000 steps",
    naming="wandb (grad_norm/layer_00 ...)",
    keys=dict(loss="train/loss", grad="grad_norm", layers=layer_keys(lambda i: f"grad_norm/layer_{i:02d}", 16)),
    description="16-layer MLP with identity skips and He init, momentum SGD: per-layer gradient norms stay "
    "within ~1-2 orders of magnitude of each other from first to last layer",
)
def healthy_deep_resmlp_grads(name, seed):
    log = RunLog(name)
    X, y = D.spirals(4000, k=3, noise=0.15, seed=seed)
    m = M.MLP([2] + [64] * 15 + [3], residual=True, rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.warmup_cosine(0.02, 100, 2000),
        X,
        y,
        M.softmax_ce,
        steps=2000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(WANDB, layer_grad=lambda i: f"grad_norm/layer_{i:02d}"),
        layer_every=10,
        step_base=0,
    )
    return log


@scenario(
    "healthy_deep_relu_he_lightning",
    faults=[],
    model="MLP 10-64x9-4 ReLU (10 layers), He init",
    dataset="gaussian blobs, 4 classes, d=10",
    seed=911,
    cadence="every 10 steps, 1500 steps",
    naming="lightning (grad_2.0_norm/layers.N.weight, grad_2.0_norm_total)",
    keys=dict(
        loss="train_loss_step",
        grad="grad_2.0_norm_total",
        layers=layer_keys(lambda i: f"grad_2.0_norm/layers.{i}.weight", 10),
    ),
    description="10 plain ReLU layers with He init keep the backward signal's scale: first-layer grads are "
    "the same order as the last layer's",
)
def healthy_deep_relu_he_lightning(name, seed):
    log = RunLog(name)
    X, y = D.blobs(4000, d=10, k=4, sep=1.0, seed=seed)
    m = M.MLP([10] + [64] * 9 + [4], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.005),
        X,
        y,
        M.softmax_ce,
        steps=1500,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(lightning("SGD"), layer_grad=lambda i: f"grad_2.0_norm/layers.{i}.weight"),
        log_every=10,
        layer_every=10,
        step_base=0,
    )
    return log


@scenario(
    "healthy_autoencoder_adam",
    faults=[],
    model="autoencoder 16-32-8-32-16 ReLU, Adam",
    dataset="6 gaussian blobs in d=16, standardised",
    seed=912,
    cadence="every 10 steps, val every 200, 3000 steps",
    naming="plain",
    keys=dict(loss="train_loss", val="valid_loss"),
    description="the same autoencoder as slow_autoencoder_tiny_lr with Adam 1e-3: reconstruction error falls "
    "by ~5x and levels off",
)
def healthy_autoencoder_adam(name, seed):
    log = RunLog(name)
    X, _ = D.blobs(5000, d=16, k=6, sep=1.5, seed=seed)
    Xtr, Xva = D.standardize(X[:4000], X[4000:])
    m = M.MLP([16, 32, 8, 32, 16], rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(1e-3),
        Xtr,
        Xtr,
        M.mse,
        steps=3000,
        batch_size=64,
        rng=_rng(seed, 1),
        names=PLAIN,
        log_every=10,
        Xva=Xva,
        yva=Xva,
        val_every=200,
    )
    return log


# --------------------------------------------------------------------------- timing, fast loader


@scenario(
    "healthy_fast_loader_mlflow",
    faults=[],
    model="MLP 256-512-512-4 ReLU",
    dataset="synthetic 16x16 grating images, preloaded in memory",
    seed=913,
    cadence="every 5 steps (interval means), 200 steps",
    naming="mlflow system metrics + plain",
    keys=dict(
        loss="train_loss",
        data_time="data_time",
        compute_time="compute_time",
        util="system/gpu_0_utilization_percentage",
        time_unit="s",
    ),
    description="same timing metrics as bottleneck_mlflow_slow_io but with data preloaded (a batch is one "
    "index op, ~0.05 ms) : data_time << compute_time, busy share ~99%",
)
def healthy_fast_loader_mlflow(name, seed):
    log = RunLog(name)
    _, y, X = _image_data(seed)
    m = M.MLP([256, 512, 512, 4], rng=_rng(seed))
    names = dict(
        loss="train_loss",
        lr="lr",
        data_time="data_time",
        compute_time="compute_time",
        step_time="step_time",
        util="system/gpu_0_utilization_percentage",
    )
    fit_timed(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.01),
        fast_loader(X, y, 64, _rng(seed, 1)),
        M.softmax_ce,
        steps=200,
        batch_size=64,
        names=names,
        log_every=5,
    )
    return log


@scenario(
    "healthy_fast_loader_wandb_ms",
    faults=[],
    model="MLP 256-512-512-4 ReLU, Adam",
    dataset="synthetic 16x16 images, pre-decoded and cached",
    seed=914,
    cadence="every 5 steps (interval means), 200 steps",
    naming="wandb system metrics, times in ms",
    keys=dict(
        loss="train/loss",
        data_time="data_time_ms",
        compute_time="compute_time_ms",
        util="system/gpu.0.gpu",
        time_unit="ms",
    ),
    description="the decode/augment work of bottleneck_wandb_decode_ms done once up front and cached: "
    "data_time_ms ~0.05 vs compute ~5 ms; step_time_ms, samples_per_sec",
)
def healthy_fast_loader_wandb_ms(name, seed):
    log = RunLog(name)
    _, y, X = _image_data(seed)
    m = M.MLP([256, 512, 512, 4], rng=_rng(seed))
    names = dict(
        loss="train/loss",
        lr="train/lr",
        data_time="data_time_ms",
        compute_time="compute_time_ms",
        step_time="step_time_ms",
        util="system/gpu.0.gpu",
        throughput="samples_per_sec",
    )
    fit_timed(
        log,
        m,
        M.Adam(m.params),
        M.constant(1e-3),
        fast_loader(X, y, 64, _rng(seed, 1)),
        M.softmax_ce,
        steps=200,
        batch_size=64,
        names=names,
        log_every=5,
        unit="ms",
        step_base=0,
    )
    return log


@scenario(
    "healthy_fast_loader_plain",
    faults=[],
    model="MLP 256-512-512-4 ReLU",
    dataset="synthetic 16x16 images in memory",
    seed=915,
    cadence="every 10 steps (interval means), 250 steps",
    naming="plain (gpu_util, throughput)",
    keys=dict(loss="train_loss", data_time="data_time", compute_time="compute_time", util="gpu_util", time_unit="s"),
    description="in-memory batches, momentum SGD with cosine lr: gpu_util (measured busy share) ~99%, "
    "throughput in samples/s",
)
def healthy_fast_loader_plain(name, seed):
    log = RunLog(name)
    _, y, X = _image_data(seed)
    m = M.MLP([256, 512, 512, 4], rng=_rng(seed))
    names = dict(
        loss="train_loss",
        lr="lr",
        data_time="data_time",
        compute_time="compute_time",
        step_time="step_time",
        util="gpu_util",
        throughput="throughput",
    )
    fit_timed(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.cosine(0.02, 250),
        fast_loader(X, y, 32, _rng(seed, 1)),
        M.softmax_ce,
        steps=250,
        batch_size=32,
        names=names,
        log_every=10,
    )
    return log
