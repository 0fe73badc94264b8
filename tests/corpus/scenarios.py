"""Fault scenarios, part 1: each function trains a small numpy model for real, with the fault
really happening, and returns what the training loop logged.

This file: loss-oscillation, overfitting, nonfinite, slow-convergence.
``scenarios_more.py``: periodic-spikes, vanishing-gradients, input-bottleneck, task-imbalance.
``scenarios_healthy.py``: healthy runs.
"""

from __future__ import annotations

import numpy as np

from . import datasets as D
from . import models as M
from .loop import eval_loss, fit, scenario
from .naming import HF, KERAS, PLAIN, WANDB, lightning
from .naming import rng_for as _rng
from .runlog import RunLog

# =========================================================================== loss-oscillation


@scenario(
    "osc_softmax_sgd_lr_too_high",
    faults=["loss-oscillation"],
    model="softmax regression (10->4)",
    dataset="gaussian blobs, 4 overlapping classes, d=10",
    seed=101,
    cadence="every step, 1500 steps",
    naming="wandb",
    keys=dict(loss="train/loss", grad="grad_norm"),
    description="plain SGD with lr=20 (about 100x too high); the bounded CE gradient keeps the "
    "weights jumping: loss bounces around ~2 (lr 0.1 reaches ~0.2 on the same data) with no trend, never NaN",
)
def osc_softmax_sgd_lr_too_high(name, seed):
    log = RunLog(name)
    X, y = D.blobs(4000, d=10, k=4, sep=1.0, seed=seed)
    m = M.MLP([10, 4], init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params),
        M.constant(20.0),
        X,
        y,
        M.softmax_ce,
        steps=1500,
        batch_size=32,
        rng=_rng(seed, 1),
        names=WANDB,
        step_base=0,
    )
    return log


@scenario(
    "osc_linreg_batch2_high_lr",
    faults=["loss-oscillation"],
    model="linear regression (8->1)",
    dataset="noisy linear regression, d=8, noise sd 1",
    seed=102,
    cadence="every step, 3000 steps",
    naming="plain",
    keys=dict(loss="train_loss"),
    description="SGD batch size 2 with lr=0.1 (close to the per-sample stability limit); the iterate "
    "rattles around the optimum, loss jumps around a plateau ~2x the noise floor, no downward trend",
)
def osc_linreg_batch2_high_lr(name, seed):
    log = RunLog(name)
    X, y, _ = D.linear_regression(4000, d=8, noise=1.0, seed=seed)
    m = M.MLP([8, 1], init="xavier", rng=_rng(seed))
    fit(log, m, M.SGD(m.params), M.constant(0.1), X, y, M.mse, steps=3000, batch_size=2, rng=_rng(seed, 1), names=PLAIN)
    return log


@scenario(
    "osc_adam_huge_lr_tanh",
    faults=["loss-oscillation"],
    model="MLP 2-64-64-3 tanh",
    dataset="3 spirals",
    seed=103,
    cadence="every 2 steps (mean of the interval), 2000 steps; eval every 200",
    naming="hf-trainer (long csv)",
    keys=dict(loss="loss", val="eval_loss", grad="grad_norm"),
    description="Adam with lr=0.3 (300x the usual 1e-3); loss bounces around ~1.8, well above chance "
    "(ln 3 = 1.1), for the whole run; eval loss equally high",
)
def osc_adam_huge_lr_tanh(name, seed):
    log = RunLog(name)
    X, y = D.spirals(4000, k=3, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=3000, n_val=1000, seed=seed)
    m = M.MLP([2, 64, 64, 3], activation="tanh", init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(0.3),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=2000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=HF,
        log_every=2,
        avg_loss=True,
        Xva=Xva,
        yva=yva,
        val_every=200,
    )
    return log


@scenario(
    "osc_batch2_momentum_xor",
    faults=["loss-oscillation"],
    model="MLP 2-32-32-2 ReLU",
    dataset="XOR, noise 0.3",
    seed=104,
    cadence="every step, 3000 steps; val every 250",
    naming="lightning (long csv)",
    keys=dict(loss="train_loss_step", val="val_loss", grad="grad_2.0_norm_total"),
    description="batch size 2, SGD momentum 0.9, lr=0.08 (effective 0.8): loss jumps around a plateau "
    "above chance (ln2) and never trends down",
)
def osc_batch2_momentum_xor(name, seed):
    log = RunLog(name)
    X, y = D.xor(4000, d=2, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=3000, n_val=1000, seed=seed)
    m = M.MLP([2, 32, 32, 2], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.08),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=3000,
        batch_size=2,
        rng=_rng(seed, 1),
        names=dict(lightning("SGD"), epoch="epoch"),
        Xva=Xva,
        yva=yva,
        val_every=250,
        step_base=0,
    )
    return log


# =========================================================================== overfitting


@scenario(
    "overfit_spirals_wandb",
    faults=["overfitting"],
    model="MLP 2-128-128-128-3 ReLU",
    dataset="3 spirals, 60 train / 500 val samples",
    seed=201,
    cadence="train every step; val and weight norms every 2 epochs (8 steps); 2500 steps",
    naming="wandb",
    keys=dict(loss="train/loss", val="val/loss", grad="grad_norm"),
    description="tiny train set, big MLP, Adam 1e-3, no regularisation, long training: train loss -> ~0 "
    "while val loss bottoms early and climbs; per-layer weight norms grow",
)
def overfit_spirals_wandb(name, seed):
    log = RunLog(name)
    X, y = D.spirals(560, k=3, noise=0.35, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=60, n_val=500, seed=seed)
    m = M.MLP([2, 128, 128, 128, 3], rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params, lr=1e-3),
        M.constant(1e-3),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=2500,
        batch_size=15,
        rng=_rng(seed, 1),
        names=dict(WANDB, weight_norm=lambda i: f"weight_norm/layer_{i}", epoch="epoch"),
        Xva=Xva,
        yva=yva,
        val_every=8,
        weight_norm_every=8,
        step_base=0,
    )
    return log


@scenario(
    "overfit_regression_keras",
    faults=["overfitting"],
    model="MLP 4-128-128-1 ReLU",
    dataset="noisy nonlinear regression, 50 train / 500 val",
    seed=202,
    cadence="once per epoch, 400 epochs",
    naming="keras",
    keys=dict(loss="loss", val="val_loss"),
    description="Keras-style epoch logs (loss, val_loss, lr); 50 samples with noise sd 0.5, the net "
    "memorises the noise: train MSE -> ~1e-4, val MSE bottoms at epoch ~8 and rises to ~1.4x",
)
def overfit_regression_keras(name, seed):
    log = RunLog(name)
    X, y = D.nonlinear_regression(550, d=4, noise=0.5, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=50, n_val=500, seed=seed)
    m = M.MLP([4, 128, 128, 1], rng=_rng(seed))
    opt = M.Adam(m.params, lr=3e-3)
    rng = _rng(seed, 1)
    with np.errstate(all="ignore"):
        for epoch in range(400):
            order = rng.permutation(50)
            tot = 0.0
            for b in range(5):
                idx = order[b * 10 : (b + 1) * 10]
                bl, d = M.mse(m.forward(Xtr[idx]), ytr[idx])
                g, _ = m.backward(d)
                opt.step(g)
                tot += bl
            log.log(epoch, {"loss": tot / 5, "val_loss": eval_loss(m, Xva, yva, M.mse), "lr": opt.lr})
    return log


@scenario(
    "overfit_blobs_lightning",
    faults=["overfitting"],
    fmt="lightning-csv",
    model="MLP 50-128-128-4 ReLU",
    dataset="gaussian blobs d=50, 80 train / 500 val, 15% label noise",
    seed=203,
    cadence="train_loss_step every 10 steps, epoch metrics every epoch (5 steps), 300 epochs",
    naming="lightning CSVLogger",
    keys=dict(loss="train_loss_step", val="val_loss"),
    description="Lightning CSVLogger metrics.csv; 80 samples with noisy labels, Adam 1e-3, no weight decay: "
    "train loss -> ~0, val loss bottoms after ~5 epochs and rises steadily",
)
def overfit_blobs_lightning(name, seed):
    log = RunLog(name)
    X, y = D.blobs(880, d=50, k=4, sep=0.35, seed=seed)
    rng = _rng(seed, 2)
    flip = rng.random(len(y)) < 0.15
    y = np.where(flip, rng.integers(0, 4, len(y)), y)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=80, n_val=500, seed=seed)
    m = M.MLP([50, 128, 128, 4], rng=_rng(seed))
    opt = M.Adam(m.params, lr=1e-3)
    rng = _rng(seed, 1)
    step = 0
    with np.errstate(all="ignore"):
        for epoch in range(300):
            order = rng.permutation(80)
            tot = 0.0
            for b in range(5):
                idx = order[b * 16 : (b + 1) * 16]
                bl, d = M.softmax_ce(m.forward(Xtr[idx]), ytr[idx])
                g, _ = m.backward(d)
                opt.step(g)
                tot += bl
                step += 1
                if step % 10 == 0:
                    log.log(step - 1, {"train_loss_step": bl, "epoch": epoch})
            log.log(step - 1, {"lr-Adam": opt.lr, "epoch": epoch})
            log.log(
                step - 1,
                {
                    "val_loss": eval_loss(m, Xva, yva, M.softmax_ce),
                    "val_acc": M.accuracy(m.forward(Xva), yva),
                    "epoch": epoch,
                },
            )
            log.log(step - 1, {"train_loss_epoch": tot / 5, "epoch": epoch})
    return log


@scenario(
    "overfit_xor_distractors_plain",
    faults=["overfitting"],
    model="MLP 6-256-256-2 ReLU",
    dataset="XOR with 4 distractor dims, 100 train / 1000 val",
    seed=204,
    cadence="train every 5 steps, val + weight norms every 50 steps, 4000 steps",
    naming="plain",
    keys=dict(loss="train_loss", val="valid_loss"),
    description="SGD momentum 0.9, lr 0.002, no regularisation; the net fits 100 points using the distractor "
    "dims; valid loss falls then rises steadily; weight_norm/layer_N grow",
)
def overfit_xor_distractors_plain(name, seed):
    log = RunLog(name)
    X, y = D.xor(1100, d=6, noise=0.3, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=100, n_val=1000, seed=seed)
    m = M.MLP([6, 256, 256, 2], rng=_rng(seed))
    opt = M.SGD(m.params, momentum=0.9)
    fit(
        log,
        m,
        opt,
        M.constant(0.002),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=4000,
        batch_size=20,
        rng=_rng(seed, 1),
        names=dict(PLAIN, momentum="momentum", weight_norm=lambda i: f"weight_norm/layer_{i}"),
        log_every=5,
        Xva=Xva,
        yva=yva,
        val_every=50,
        weight_norm_every=50,
    )
    return log


# =========================================================================== nonfinite


@scenario(
    "nan_lr_schedule_typo_deep",
    faults=["nonfinite"],
    model="MLP 20-128x8-5 ReLU (9 layers)",
    dataset="gaussian blobs, 5 classes, d=20",
    seed=301,
    cadence="every step, 1200 steps; val every 100",
    naming="wandb",
    keys=dict(loss="train/loss", val="val/loss", grad="grad_norm"),
    description="linear warm-up to peak lr 2.0 (meant 0.02) over 10k steps, momentum SGD, no clipping: as "
    "the lr ramps past ~0.1 the grad norm spikes and the loss goes NaN at ~step 500; logging "
    "continues with NaN like real loops do",
)
def nan_lr_schedule_typo_deep(name, seed):
    log = RunLog(name)
    X, y = D.blobs(5000, d=20, k=5, sep=1.0, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([20] + [128] * 8 + [5], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.linear_warmup(2.0, 10000),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=1200,
        batch_size=64,
        rng=_rng(seed, 1),
        names=WANDB,
        Xva=Xva,
        yva=yva,
        val_every=100,
        step_base=0,
    )
    return log


@scenario(
    "nan_corrupted_batch_hf",
    faults=["nonfinite"],
    fmt="hf-trainer-state",
    model="MLP 16-128-128-128-4 ReLU, float32",
    dataset="gaussian blobs d=16; one batch with raw uint16-scale inputs (x6e4)",
    seed=302,
    cadence="logging_steps=5 (mean loss of the interval), eval every 100, 1500 steps",
    naming="hf-trainer",
    keys=dict(loss="loss", val="eval_loss", grad="grad_norm"),
    description="HF trainer_state.json; at step 700 a corrupted batch (features not normalised, ~6e4) "
    "arrives, no grad clipping: grad norm jumps >1000x, weights blow up and loss/grad_norm/"
    "eval_loss are NaN from then on, written as bare NaN tokens",
)
def nan_corrupted_batch_hf(name, seed):
    log = RunLog(name)
    log.meta.update(logging_steps=5, eval_steps=100, max_steps=1500, train_batch_size=32)
    X, y = D.blobs(6000, d=16, k=4, sep=1.0, seed=seed)
    X = X.astype(np.float32)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=5000, n_val=1000, seed=seed)
    m = M.MLP([16, 128, 128, 128, 4], rng=_rng(seed), dtype=np.float32)
    bad_rng = _rng(seed, 3)

    def corrupt(step, epoch, b, Xb, yb):
        if step == 700:
            Xb = (bad_rng.integers(0, 65535, Xb.shape)).astype(np.float32)
        return Xb, yb

    n_ep = len(Xtr) // 32
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.warmup_linear_decay(0.05, 100, 1500),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=1500,
        batch_size=32,
        rng=_rng(seed, 1),
        names=HF,
        log_every=5,
        avg_loss=True,
        Xva=Xva,
        yva=yva,
        val_every=100,
        corrupt=corrupt,
    )
    # HF adds runtime fields to eval entries; epoch is fractional
    for step, vals, _wt in log.records:
        if "eval_loss" in vals:
            vals.update(
                epoch=round(step / n_ep, 4),
                eval_runtime=0.05,
                eval_samples_per_second=20000.0,
                eval_steps_per_second=625.0,
            )
    return log


@scenario(
    "nan_log0_custom_bce",
    faults=["nonfinite"],
    model="logistic regression 10->1, float32",
    dataset="two well separated gaussian blobs (binary)",
    seed=303,
    cadence="every 10 steps, val every 100; 2000 steps",
    naming="plain",
    keys=dict(loss="train_loss", val="valid_loss", grad="grad_norm"),
    description="hand-written BCE -(y log p + (1-y) log(1-p)) without epsilon on float32 sigmoid: as the "
    "model gets confident p rounds to exactly 1.0, log(0)*0 gives NaN loss and NaN grads",
)
def nan_log0_custom_bce(name, seed):
    log = RunLog(name)
    X, y = D.blobs(3000, d=10, k=2, sep=1.5, seed=seed)
    X = X.astype(np.float32)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=2500, n_val=500, seed=seed)
    ytr, yva = ytr[:, None].astype(np.float32), yva[:, None].astype(np.float32)
    m = M.MLP([10, 1], init="xavier", rng=_rng(seed), dtype=np.float32)
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(0.01),
        Xtr,
        ytr,
        M.naive_bce,
        steps=2000,
        batch_size=50,
        rng=_rng(seed, 1),
        names=dict(PLAIN, grad_norm="grad_norm"),
        log_every=10,
        Xva=Xva,
        yva=yva,
        val_every=100,
    )
    return log


@scenario(
    "nan_exploding_lr_linreg",
    faults=["nonfinite"],
    model="linear regression (12->1)",
    dataset="noisy linear regression d=12",
    seed=304,
    cadence="every 10 steps, val every epoch (50 steps), 1500 steps",
    naming="keras",
    keys=dict(loss="loss", val="val_loss", grad="grad_norm"),
    description="step-decay schedule written with gamma=10 instead of 0.1: lr x10 at step 500 and 1000; "
    "after the second jump SGD diverges, loss grows ~1e10x per log and overflows to inf (stays inf)",
)
def nan_exploding_lr_linreg(name, seed):
    log = RunLog(name)
    X, y, _ = D.linear_regression(3000, d=12, noise=0.3, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=2500, n_val=500, seed=seed)
    m = M.MLP([12, 1], init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params),
        M.step_decay(0.02, [500, 1000], gamma=10.0),
        Xtr,
        ytr,
        M.mse,
        steps=1500,
        batch_size=50,
        rng=_rng(seed, 1),
        names=dict(KERAS, grad_norm="grad_norm"),
        log_every=10,
        Xva=Xva,
        yva=yva,
        val_every=50,
    )
    return log


# =========================================================================== slow-convergence


@scenario(
    "slow_tiny_lr_sgd_mlp",
    faults=["slow-convergence"],
    model="MLP 10-64-64-4 ReLU",
    dataset="gaussian blobs, 4 classes, d=10",
    seed=401,
    cadence="every 10 steps (mean), 3000 steps; val every 500",
    naming="wandb",
    keys=dict(loss="train/loss", val="val/loss", grad="grad_norm"),
    description="plain SGD with lr=2e-6 (thousands of times too small): loss creeps down steadily, "
    "~7% below its start after 3000 steps and still falling at the same pace",
)
def slow_tiny_lr_sgd_mlp(name, seed):
    log = RunLog(name)
    X, y = D.blobs(5000, d=10, k=4, sep=1.0, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([10, 64, 64, 4], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params),
        M.constant(2e-6),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=3000,
        batch_size=64,
        rng=_rng(seed, 1),
        names=WANDB,
        log_every=10,
        avg_loss=True,
        Xva=Xva,
        yva=yva,
        val_every=500,
    )
    return log


@scenario(
    "slow_unnormalized_features",
    faults=["slow-convergence"],
    model="linear regression (8->1), zero init",
    dataset="linear regression on raw sensor-like features ~1000 +- 8 (not standardised)",
    seed=402,
    cadence="every 10 steps, 3000 steps",
    naming="plain",
    keys=dict(loss="train_loss", grad="grad_norm"),
    description="features have mean 1000 and sd 8; the mean direction forces lr <= ~1.2e-7 (1.3e-7 "
    "diverges), so lr=1e-7 and the informative directions learn at ~1e-5 per step: loss only "
    "~5% lower after 3000 steps, still falling",
)
def slow_unnormalized_features(name, seed):
    log = RunLog(name)
    X, y, _ = D.linear_regression(4000, d=8, noise=0.5, seed=seed, feature_scale=8.0, feature_offset=1000.0)
    m = M.MLP([8, 1], init="xavier", rng=_rng(seed))
    m.params[0][:] = 0.0
    fit(
        log,
        m,
        M.SGD(m.params),
        M.constant(1e-7),
        X,
        y,
        M.mse,
        steps=3000,
        batch_size=256,
        rng=_rng(seed, 1),
        names=dict(PLAIN, grad_norm="grad_norm"),
        log_every=10,
    )
    return log


@scenario(
    "slow_autoencoder_tiny_lr",
    faults=["slow-convergence"],
    model="autoencoder 16-32-8-32-16 ReLU",
    dataset="6 gaussian blobs in d=16, standardised (reconstruction)",
    seed=403,
    cadence="every 10 steps, 3000 steps; val every 300",
    naming="lightning (long csv)",
    keys=dict(loss="train_loss_step", val="val_loss", grad="grad_2.0_norm_total"),
    description="SGD lr=1e-6 on a reconstruction loss: MSE creeps down ~7% in 3000 steps, a straight slow "
    "descent with no sign of flattening",
)
def slow_autoencoder_tiny_lr(name, seed):
    log = RunLog(name)
    X, _ = D.blobs(5000, d=16, k=6, sep=1.5, seed=seed)
    Xtr, Xva = D.standardize(X[:4000], X[4000:])
    m = M.MLP([16, 32, 8, 32, 16], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params),
        M.constant(1e-6),
        Xtr,
        Xtr,
        M.mse,
        steps=3000,
        batch_size=64,
        rng=_rng(seed, 1),
        names=dict(lightning("SGD"), epoch="epoch"),
        log_every=10,
        Xva=Xva,
        yva=Xva,
        val_every=300,
        step_base=0,
    )
    return log


@scenario(
    "slow_adam_finetune_lr",
    faults=["slow-convergence"],
    model="MLP 4-64-64-1 tanh",
    dataset="noisy nonlinear regression d=4",
    seed=404,
    cadence="every 10 steps (mean), 4000 steps; eval every 500",
    naming="hf-trainer (long csv)",
    keys=dict(loss="loss", val="eval_loss", grad="grad_norm"),
    description="Adam with lr=2.5e-7 copied from a fine-tuning config onto training from scratch: every "
    "weight moves ~2.5e-7 per step, loss decreases almost linearly and only a few % in 4000 steps",
)
def slow_adam_finetune_lr(name, seed):
    log = RunLog(name)
    X, y = D.nonlinear_regression(5000, d=4, noise=0.3, seed=seed)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([4, 64, 64, 1], activation="tanh", init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(2.5e-7),
        Xtr,
        ytr,
        M.mse,
        steps=4000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=HF,
        log_every=10,
        avg_loss=True,
        Xva=Xva,
        yva=yva,
        val_every=500,
    )
    return log
