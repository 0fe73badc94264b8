"""Fault scenarios, part 2: periodic-spikes, vanishing-gradients, input-bottleneck, task-imbalance.

Each function trains a small numpy model for real, with the fault really happening.
"""

from __future__ import annotations

import numpy as np

from . import datasets as D
from . import models as M
from .loop import fit, scenario
from .loops2 import fit_multitask, fit_timed, heavy_loader, sleepy_loader
from .naming import KERAS, PLAIN, WANDB, layer_keys, lightning
from .naming import rng_for as _rng
from .runlog import RunLog

# =========================================================================== periodic-spikes


@scenario(
    "spikes_mislabeled_batch_k50",
    faults=["periodic-spikes"],
    model="MLP 10-64-64-4 ReLU",
    dataset="gaussian blobs d=10, 1600 samples = 50 batches of 32, never shuffled",
    seed=501,
    cadence="every step, 1000 steps (20 epochs)",
    naming="wandb (with epoch)",
    keys=dict(loss="train/loss", grad="grad_norm", period=50, phase=17),
    description="shuffle=False and batch #17 of every epoch comes from a mislabeled shard (labels shifted "
    "by one class): the loss spikes at steps 17, 67, 117, ... and recovers within a few steps",
)
def spikes_mislabeled_batch_k50(name, seed):
    log = RunLog(name)
    X, y = D.blobs(1600, d=10, k=4, sep=1.0, seed=seed)

    def corrupt(step, epoch, b, Xb, yb):
        return (Xb, (yb + 1) % 4) if b == 17 else (Xb, yb)

    m = M.MLP([10, 64, 64, 4], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.02),
        X,
        y,
        M.softmax_ce,
        steps=1000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(WANDB, epoch="epoch"),
        shuffle=False,
        corrupt=corrupt,
        step_base=0,
    )
    return log


@scenario(
    "spikes_unit_mismatch_k120",
    faults=["periodic-spikes"],
    model="MLP 4-64-64-1 ReLU",
    dataset="nonlinear regression, 1920 samples = 120 batches of 16, fixed order",
    seed=502,
    cadence="every 2 steps (mean of the 2), 1800 steps (15 epochs)",
    naming="plain",
    keys=dict(loss="train_loss", period=120, phase=62),
    description="one shard stored in different units (features x6): batch #60 of each epoch has a huge "
    "loss, Adam recovers in a few steps; with logging every 2 steps the spike shows in the "
    "interval mean every 120 steps",
)
def spikes_unit_mismatch_k120(name, seed):
    log = RunLog(name)
    X, y = D.nonlinear_regression(1920, d=4, noise=0.2, seed=seed)

    def corrupt(step, epoch, b, Xb, yb):
        return (Xb * 6.0, yb) if b == 60 else (Xb, yb)

    m = M.MLP([4, 64, 64, 1], rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(1e-3),
        X,
        y,
        M.mse,
        steps=1800,
        batch_size=16,
        rng=_rng(seed, 1),
        names=PLAIN,
        log_every=2,
        avg_loss=True,
        shuffle=False,
        corrupt=corrupt,
    )
    return log


@scenario(
    "spikes_noise_shard_k200",
    faults=["periodic-spikes"],
    model="MLP 2-64-64-3 ReLU",
    dataset="3 spirals, 1600 samples = 200 batches of 8, fixed order",
    seed=503,
    cadence="every step, 1600 steps (8 epochs)",
    naming="lightning (long csv)",
    keys=dict(loss="train_loss_step", grad="grad_2.0_norm_total", period=200, phase=150),
    description="a corrupted shard: batch #150 of every epoch decodes to garbage (large random inputs, "
    "random labels); momentum SGD, loss spikes every 200 steps",
)
def spikes_noise_shard_k200(name, seed):
    log = RunLog(name)
    X, y = D.spirals(1600, k=3, seed=seed)
    bad = _rng(seed, 5)
    Xbad, ybad = bad.standard_normal((8, 2)) * 6.0, bad.integers(0, 3, 8)

    def corrupt(step, epoch, b, Xb, yb):
        return (Xbad, ybad) if b == 150 else (Xb, yb)

    m = M.MLP([2, 64, 64, 3], rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.02),
        X,
        y,
        M.softmax_ce,
        steps=1600,
        batch_size=8,
        rng=_rng(seed, 1),
        names=lightning("SGD"),
        shuffle=False,
        corrupt=corrupt,
        step_base=0,
    )
    return log


@scenario(
    "spikes_flipped_labels_wide_k80",
    faults=["periodic-spikes"],
    fmt="wide-csv",
    model="MLP 2-32-32-2 tanh",
    dataset="XOR, 2560 samples = 80 batches of 32, fixed order",
    seed=504,
    cadence="every step, 1200 steps (15 epochs)",
    naming="plain (wide csv)",
    keys=dict(loss="train_loss", grad="grad_norm", period=80, phase=41),
    description="wide CSV; batch #40 of each epoch has its labels flipped (a shard written with the "
    "opposite convention): a loss spike every 80 steps",
)
def spikes_flipped_labels_wide_k80(name, seed):
    log = RunLog(name)
    X, y = D.xor(2560, d=2, noise=0.2, seed=seed)

    def corrupt(step, epoch, b, Xb, yb):
        return (Xb, 1 - yb) if b == 40 else (Xb, yb)

    m = M.MLP([2, 32, 32, 2], activation="tanh", init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(3e-3),
        X,
        y,
        M.softmax_ce,
        steps=1200,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(PLAIN, grad_norm="grad_norm"),
        shuffle=False,
        corrupt=corrupt,
    )
    return log


# =========================================================================== vanishing-gradients


@scenario(
    "vanish_sigmoid15_wandb",
    faults=["vanishing-gradients"],
    model="MLP 20-32x14-4 sigmoid (15 layers), Xavier",
    dataset="gaussian blobs, 4 imbalanced classes (55/25/15/5%), d=20",
    seed=601,
    cadence="loss every step; per-layer grads every 10; 1500 steps",
    naming="wandb (grad_norm/layer_00 ...)",
    keys=dict(loss="train/loss", grad="grad_norm", layers=layer_keys(lambda i: f"grad_norm/layer_{i:02d}", 15)),
    description="15 sigmoid layers: each layer scales the backward signal by ~0.25*|W|, the first layers' "
    "grad norms are ~1e-9 while the last layer's are ~1e-1; the loss curve looks converged (falls "
    "~20% to the entropy of the class prior, then flat) but the net only learned the prior",
)
def vanish_sigmoid15_wandb(name, seed):
    log = RunLog(name)
    X, y = D.blobs(4000, d=20, k=4, sep=1.0, seed=seed, priors=[0.55, 0.25, 0.15, 0.05])
    m = M.MLP([20] + [32] * 14 + [4], activation="sigmoid", init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.05),
        X,
        y,
        M.softmax_ce,
        steps=1500,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(WANDB, layer_grad=lambda i: f"grad_norm/layer_{i:02d}"),
        layer_every=10,
        step_base=0,
    )
    return log


@scenario(
    "vanish_sigmoid16_regression_lightning",
    faults=["vanishing-gradients"],
    model="MLP 4-64x15-1 sigmoid (16 layers), Xavier",
    dataset="nonlinear regression d=4, target offset +5",
    seed=602,
    cadence="every 5 steps (loss, grad norms), 1500 steps; val every 100",
    naming="lightning (grad_2.0_norm/layers.N.weight)",
    keys=dict(
        loss="train_loss_step",
        val="val_loss",
        grad="grad_2.0_norm_total",
        layers=layer_keys(lambda i: f"grad_2.0_norm/layers.{i}.weight", 16),
    ),
    description="16 sigmoid layers: the loss curve looks fine (falls from ~45 to ~2 as the output "
    "bias learns the +5 offset, then flat) but the first layers' grad norms are ~1e-9 and the "
    "net never learns the input dependence (plateau = target variance)",
)
def vanish_sigmoid16_regression_lightning(name, seed):
    log = RunLog(name)
    X, y = D.nonlinear_regression(5000, d=4, noise=0.2, seed=seed)
    y = y + 5.0
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([4] + [64] * 15 + [1], activation="sigmoid", init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.01),
        Xtr,
        ytr,
        M.mse,
        steps=1500,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(lightning("SGD"), layer_grad=lambda i: f"grad_2.0_norm/layers.{i}.weight"),
        log_every=5,
        layer_every=5,
        Xva=Xva,
        yva=yva,
        val_every=100,
        step_base=0,
    )
    return log


@scenario(
    "vanish_sigmoid20_gradients",
    faults=["vanishing-gradients"],
    model="MLP 10-48x19-5 sigmoid (20 layers), Xavier, Adam",
    dataset="gaussian blobs, 5 imbalanced classes (50/20/15/10/5%), d=10",
    seed=603,
    cadence="every 20 steps from step 0, 2000 steps",
    naming="plain + gradients/fcN.weight (wandb.watch style)",
    keys=dict(loss="train_loss", layers=layer_keys(lambda i: f"gradients/fc{i + 1}.weight", 20)),
    description="20 sigmoid layers trained with Adam: Adam rescales the updates but the raw gradients "
    "logged per layer fall from ~1e-1 at fc20 to <1e-10 at fc1; loss drops only to the class-prior entropy",
)
def vanish_sigmoid20_gradients(name, seed):
    log = RunLog(name)
    X, y = D.blobs(4000, d=10, k=5, sep=1.0, seed=seed, priors=[0.5, 0.2, 0.15, 0.1, 0.05])
    m = M.MLP([10] + [48] * 19 + [5], activation="sigmoid", init="xavier", rng=_rng(seed))
    fit(
        log,
        m,
        M.Adam(m.params),
        M.constant(1e-3),
        X,
        y,
        M.softmax_ce,
        steps=2000,
        batch_size=64,
        rng=_rng(seed, 1),
        names=dict(PLAIN, layer_grad=lambda i: f"gradients/fc{i + 1}.weight"),
        log_every=20,
        layer_every=20,
        step_base=0,
    )
    return log


@scenario(
    "vanish_sigmoid10_small_init_jsonl",
    faults=["vanishing-gradients"],
    fmt="long-jsonl",
    model="MLP 8-32x9-2 sigmoid (10 layers), init N(0, 0.1^2)",
    dataset="XOR + 6 distractor dims, 20% positives",
    seed=604,
    cadence="loss every 10 steps, layer grads every 20; val every 200; 2000 steps",
    naming="keras + grad_norm/layer_N",
    keys=dict(loss="loss", val="val_loss", layers=layer_keys(lambda i: f"grad_norm/layer_{i}", 10)),
    description="JSONL long format; 10 sigmoid layers with a too-small init: backward gain ~0.25*0.1*sqrt(32) "
    "per layer, layer 0 grads ~1e-8 while layer 9 grads are normal; loss falls from ln 2 to the "
    "label-prior entropy (~0.5) and stays there",
)
def vanish_sigmoid10_small_init_jsonl(name, seed):
    log = RunLog(name)
    X, y = D.xor(5000, d=8, noise=0.2, seed=seed, pos_frac=0.2)
    (Xtr, ytr), (Xva, yva) = D.split(X, y, n_train=4000, n_val=1000, seed=seed)
    m = M.MLP([8] + [32] * 9 + [2], activation="sigmoid", init="normal", init_scale=0.1, rng=_rng(seed))
    fit(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(0.1),
        Xtr,
        ytr,
        M.softmax_ce,
        steps=2000,
        batch_size=32,
        rng=_rng(seed, 1),
        names=dict(KERAS, layer_grad=lambda i: f"grad_norm/layer_{i}"),
        log_every=10,
        layer_every=20,
        Xva=Xva,
        yva=yva,
        val_every=200,
        step_base=0,
    )
    return log


# =========================================================================== input-bottleneck


def _image_data(seed, n=1024, side=16, k=4):
    imgs, y = D.images(n, side=side, k=k, seed=seed)
    return [im.tobytes() for im in imgs], y, imgs.reshape(n, -1).astype(np.float64) / 64.0 - 2.0


@scenario(
    "bottleneck_mlflow_slow_io",
    faults=["input-bottleneck"],
    model="MLP 256-256-256-4 ReLU",
    dataset="synthetic 16x16 grating images, 4 classes",
    seed=701,
    cadence="every 5 steps (interval means), 250 steps",
    naming="mlflow system metrics + plain",
    keys=dict(
        loss="train_loss",
        data_time="data_time",
        compute_time="compute_time",
        util="system/gpu_0_utilization_percentage",
        time_unit="s",
    ),
    description="each batch is read from a slow network filesystem (6 ms latency emulated with time.sleep); "
    "compute (forward+backward+update) takes ~2-3 ms, so the compute device is busy well under "
    "half the time; data_time/compute_time/step_time in seconds",
)
def bottleneck_mlflow_slow_io(name, seed):
    log = RunLog(name)
    _, y, X = _image_data(seed)
    m = M.MLP([256, 256, 256, 4], rng=_rng(seed))
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
        sleepy_loader(X, y, 64, _rng(seed, 1), 0.006),
        M.softmax_ce,
        steps=250,
        batch_size=64,
        names=names,
        log_every=5,
    )
    return log


@scenario(
    "bottleneck_wandb_decode_ms",
    faults=["input-bottleneck"],
    model="MLP 256-256-4 ReLU",
    dataset="synthetic 16x16 images stored as raw uint8 bytes, decoded + augmented per sample",
    seed=702,
    cadence="every 5 steps (interval means), 200 steps",
    naming="wandb system metrics, times in ms",
    keys=dict(
        loss="train/loss",
        data_time="data_time_ms",
        compute_time="compute_time_ms",
        util="system/gpu.0.gpu",
        time_unit="ms",
    ),
    description="per-sample decode, 2x upsample, random crop/flip, FFT blur and jitter in a Python loop in the "
    "training process (num_workers=0): data ~10 ms per batch vs ~1-2 ms compute; "
    "step_time_ms, samples_per_sec logged",
)
def bottleneck_wandb_decode_ms(name, seed):
    log = RunLog(name)
    raw, y, _ = _image_data(seed)
    m = M.MLP([256, 256, 4], rng=_rng(seed))
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
        heavy_loader(raw, y, 64, _rng(seed, 1), up=2),
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
    "bottleneck_plain_augment",
    faults=["input-bottleneck"],
    model="MLP 256-384-384-4 ReLU",
    dataset="synthetic 16x16 images, raw bytes, per-sample augmentation",
    seed=703,
    cadence="every 10 steps (interval means), 300 steps",
    naming="plain (gpu_util, throughput)",
    keys=dict(loss="train_loss", data_time="data_time", compute_time="compute_time", util="gpu_util", time_unit="s"),
    description="batch 32 decoded and augmented per sample on the main process (~5 ms) while the model step "
    "takes ~2 ms: gpu_util ~25-40%",
)
def bottleneck_plain_augment(name, seed):
    log = RunLog(name)
    raw, y, _ = _image_data(seed)
    m = M.MLP([256, 384, 384, 4], rng=_rng(seed))
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
        M.cosine(0.02, 300),
        heavy_loader(raw, y, 32, _rng(seed, 1), up=2),
        M.softmax_ce,
        steps=300,
        batch_size=32,
        names=names,
        log_every=10,
    )
    return log


@scenario(
    "bottleneck_wandb_slow_io_val",
    faults=["input-bottleneck"],
    model="MLP 256-256-4 ReLU",
    dataset="synthetic 16x16 grating images, 4 classes",
    seed=704,
    cadence="every 10 steps (interval means), 300 steps; val every 100",
    naming="wandb system metrics",
    keys=dict(
        loss="train/loss",
        val="val/loss",
        data_time="data_time",
        compute_time="compute_time",
        util="system/gpu.0.gpu",
        time_unit="s",
    ),
    description="remote object-store reads (4 ms emulated latency per batch) vs ~1-2 ms compute; model "
    "learns normally, but the compute device idles more than half the time",
)
def bottleneck_wandb_slow_io_val(name, seed):
    log = RunLog(name)
    _, y, X = _image_data(seed, n=1280)
    Xtr, ytr, Xva, yva = X[:1024], y[:1024], X[1024:], y[1024:]
    m = M.MLP([256, 256, 4], rng=_rng(seed))
    names = dict(
        loss="train/loss",
        lr="train/lr",
        data_time="data_time",
        compute_time="compute_time",
        step_time="step_time",
        util="system/gpu.0.gpu",
        val_loss="val/loss",
    )
    fit_timed(
        log,
        m,
        M.Adam(m.params),
        M.warmup_cosine(1e-3, 30, 300),
        sleepy_loader(Xtr, ytr, 64, _rng(seed, 1), 0.004),
        M.softmax_ce,
        steps=300,
        batch_size=64,
        names=names,
        log_every=10,
        Xva=Xva,
        yva=yva,
        val_every=100,
        step_base=0,
    )
    return log


# =========================================================================== task-imbalance
# The classification label is an XOR of two input signs, so it needs the shared trunk to learn
# features for it; when another loss term is orders of magnitude larger, the trunk only serves that
# term and the classification loss stays at chance (ln 2). With both targets standardised the same
# model learns both tasks (see healthy_multitask_balanced).


def _zero_head(m, task):
    m.heads[task].params[0][:] = 0.0  # classifier heads are commonly zero-initialised: loss starts at ln k


@scenario(
    "imbalance_detectron_box_pixels",
    faults=["task-imbalance"],
    model="two-head MLP 10-64-64 trunk, cls(2) + box(4) heads",
    dataset="XOR foreground label + 4 box coordinates in pixels (~200 +- 60 px)",
    seed=801,
    cadence="every 20 steps, 3000 steps",
    naming="detectron2 (loss_cls, loss_box_reg, total_loss, lr)",
    keys=dict(loss="total_loss", tasks=["loss_cls", "loss_box_reg"], dominant="loss_box_reg", flat="loss_cls"),
    description="box targets left in pixels (MSE ~4e4 falling to ~2e3) next to a CE of ~0.69, summed with weight 1, "
    "momentum SGD with warm-up + cosine, grad clipping at 1.0: loss_box_reg is >99% of total_loss and falls; the trunk "
    "only learns box features and loss_cls stays flat at ln 2",
)
def imbalance_detectron_box_pixels(name, seed):
    log = RunLog(name)
    X, y, r = D.multitask_xor(4000, reg_scale=60.0, reg_offset=200.0, reg_noise=0.2, n_reg=4, seed=seed)
    m = M.MultiTaskMLP(10, [64, 64], {"cls": 2, "box": 4}, rng=_rng(seed))
    _zero_head(m, "cls")
    fit_multitask(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.warmup_cosine(1e-3, 200, 3000),
        X,
        {"cls": y, "box": r},
        {"cls": M.softmax_ce, "box": M.mse},
        steps=3000,
        batch_size=32,
        rng=_rng(seed, 1),
        names={"cls": "loss_cls", "box": "loss_box_reg"},
        total_key="total_loss",
        log_every=20,
        extra_names={"lr": "lr"},
        clip=1.0,
    )
    return log


@scenario(
    "imbalance_wandb_unscaled_target",
    faults=["task-imbalance"],
    model="two-head MLP 10-64-64 trunk, cls(2) + reg(1)",
    dataset="XOR label + regression target in raw units (scale 100)",
    seed=802,
    cadence="every 10 steps, 2500 steps; val every 250",
    naming="wandb (loss/task_cls, loss/task_reg, loss)",
    keys=dict(loss="loss", tasks=["loss/task_cls", "loss/task_reg"], dominant="loss/task_reg", flat="loss/task_cls"),
    description="reg target not standardised (scale 100), momentum SGD at 1e-3 (1e-2 diverges): task_reg is "
    "~99.9% of the loss and drops ~4x, task_cls stays at ln 2 on train and val",
)
def imbalance_wandb_unscaled_target(name, seed):
    log = RunLog(name)
    X, y, r = D.multitask_xor(5000, reg_scale=100.0, seed=seed)
    m = M.MultiTaskMLP(10, [64, 64], {"cls": 2, "reg": 1}, rng=_rng(seed))
    _zero_head(m, "cls")
    fit_multitask(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
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


def _sum_mse(pred, target):
    """reduction='sum' by mistake: summed over batch and pixels instead of averaged."""
    diff = pred - target
    return float(np.sum(diff * diff)), 2.0 * diff


@scenario(
    "imbalance_three_heads_sum_reduction",
    faults=["task-imbalance"],
    model="three-head MLP 10-128-64 trunk: seg(16 px), cls(2), depth(1); Adam",
    dataset="XOR label, 16-pixel mask from x0..x4, depth value",
    seed=803,
    cadence="every 5 steps, 2000 steps",
    naming="wandb (train/seg_loss, train/cls_loss, train/depth_loss)",
    keys=dict(
        loss="train/loss",
        tasks=["train/seg_loss", "train/cls_loss", "train/depth_loss"],
        dominant="train/seg_loss",
        flat="train/cls_loss",
    ),
    description="the seg loss uses reduction='sum' (over 32x16 values) while cls/depth are means: seg is "
    ">95% of train/loss; even with Adam the shared trunk serves seg only and cls stays at ln 2",
)
def imbalance_three_heads_sum_reduction(name, seed):
    log = RunLog(name)
    X, y, r = D.multitask_xor(4000, n_reg=17, seed=seed)
    mask, depth = (r[:, :16] > 0).astype(np.float64), r[:, 16:]
    m = M.MultiTaskMLP(10, [128, 64], {"seg": 16, "cls": 2, "depth": 1}, rng=_rng(seed))
    _zero_head(m, "cls")
    fit_multitask(
        log,
        m,
        M.Adam(m.params),
        M.constant(1e-3),
        X,
        {"seg": mask, "cls": y, "depth": depth},
        {"seg": _sum_mse, "cls": M.softmax_ce, "depth": M.mse},
        steps=2000,
        batch_size=32,
        rng=_rng(seed, 1),
        names={"seg": "train/seg_loss", "cls": "train/cls_loss", "depth": "train/depth_loss"},
        total_key="train/loss",
        log_every=5,
        extra_names={"lr": "train/lr"},
    )
    return log


@scenario(
    "imbalance_plain_recon_dominates",
    faults=["task-imbalance"],
    model="two-head MLP 10-64-32 trunk: reconstruction(32) + cls(2)",
    dataset="XOR label; auxiliary target = 32 raw sensor channels (sd ~30, noisy)",
    seed=804,
    cadence="every step, 1500 steps",
    naming="plain (recon_loss, cls_loss, loss)",
    keys=dict(loss="loss", tasks=["recon_loss", "cls_loss"], dominant="recon_loss", flat="cls_loss"),
    description="auxiliary reconstruction of 32 raw (unscaled, sd ~30, noisy) sensor channels added to the "
    "classification loss with weight 1: recon ~1e3 falling to its ~80 noise floor vs cls ~0.69; "
    "momentum SGD lr 0.01 with grad-norm clipping at 1.0, so every step is scaled by the recon "
    "gradient; cls_loss stays at chance",
)
def imbalance_plain_recon_dominates(name, seed):
    log = RunLog(name)
    X, y, _ = D.multitask_xor(3000, seed=seed)
    g = _rng(seed, 4)
    raw = (X @ (g.standard_normal((10, 32)) / np.sqrt(10)) + 0.3 * g.standard_normal((3000, 32))) * 30.0
    m = M.MultiTaskMLP(10, [64, 32], {"recon": 32, "cls": 2}, rng=_rng(seed))
    _zero_head(m, "cls")
    fit_multitask(
        log,
        m,
        M.SGD(m.params, momentum=0.9),
        M.constant(1e-2),
        X,
        {"recon": raw, "cls": y},
        {"recon": M.mse, "cls": M.softmax_ce},
        steps=1500,
        batch_size=32,
        rng=_rng(seed, 1),
        names={"recon": "recon_loss", "cls": "cls_loss"},
        total_key="loss",
        log_every=1,
        extra_names={"lr": "lr"},
        clip=1.0,
    )
    return log
