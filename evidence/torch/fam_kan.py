"""The kan family: a Kolmogorov-Arnold Network (Liu et al. 2024, the efficient-kan formulation) on scikit-learn's
breast-cancer table.

The data: scikit-learn's breast-cancer table (569 tumours, 30 numeric features, malignant 0 / benign 1), split once by
``train_test_split`` stratified and seeded: 455 training rows, in the order it returns them (the stored order an
unshuffled loader reads), and 114 val rows; the features standardised with the training rows' mean and std and then
passed through tanh, so that every input sits inside the splines' grid (the raw units, neither standardised nor
squashed, for the features-not-normalised run: 'mean area' ~650 +- 350, most features far outside [-1, 1]). Each val
check logs the cross-entropy on all val rows and the accuracy (``val/acc`` under W&B names).

The **model** (``KAN``): a Kolmogorov-Arnold Network (Liu et al. 2024) in the efficient-kan formulation, written here
(no package): each ``KANLinear`` maps d_in -> d_out with a learnable univariate function on every edge, phi(x) = w_b
SiLU(x) + w_s sum_c c_c B_c(x), cubic B-splines (order 3) on a uniform grid of 5 intervals over [-1, 1] extended by 3
knots each side (so every basis is 0 outside [-2.2, 2.2], where only the SiLU branch is left), with efficient-kan's
init (Kaiming-uniform base weights and standalone spline scalers, the coefficients a least-squares fit of noise of scale
0.1 / 5); the network is [30, 16, 2], two logits, loss = cross-entropy (batch mean). Variants: [30, 32, 32, 2] (the
wide/deep healthy run and the overfitting pair); a grid of 10 intervals; a 12-layer sigmoid MLP (16 wide, torch's
default init) between the two KAN layers, without/with residual connections (the vanishing pair); and a task variant
regressing 'mean area' (left out of the inputs: [29, 16, 3], the third output the regression) with an MSE summed
unweighted with the cross-entropy, in raw units (~650 +- 350) or z-scored (its twin), both terms logged beside the total
(``train/loss_cls``, ``train/loss_aux``). The first KAN layer's base and spline weights', the last KAN layer's and (where
there is one) the sigmoid stack's first and last layers' gradient norms are logged. The overfitting pair's regularised
twin adds AdamW weight decay 1.0 and 1e-2 x efficient-kan's spline L1 term (the mean |coefficient| of each edge's
spline, summed) to the loss it logs.

Built blind to the detectors: nothing under ``trackerhealth/diagnoses/`` nor the scoring was read or run while building
it, and no detector was run on its runs. Settings are efficient-kan's example's and a practitioner's (AdamW 1e-3,
weight decay 1e-4, constant, batch 32, 600 steps, ~42 epochs; SGD momentum 0.9 lr 1e-2, clip 1.0, constant, for the
SGD faults, the LR chosen by a sweep of the SGD twin alone; see the comment at :data:`BASE`); every fault run has a
twin with the one setting put right (same seed and data) and its label is what :mod:`.truth` confirms against it. Two
fault settings were changed after their truth check, each once (the two LR-too-high runs, from 1000x to 100x the
twin's LR; the comments at the runs say why); no other. One change not informed by any result: the first two scratch
generations drew the splines' initial coefficients with torch's float32 ``lstsq``, which on this CPU returned values
differing by ~1e-8 from call to call, so no two trainings of a seed were equal (and the chaotic runs' labels moved:
the unclipped SGD run was confirmed in one generation and not in the next); the fit is now done in float64 and rounded,
and two generations since agree value for value. The results below are that deterministic generation's; the two LR
changes were decided on the first, non-deterministic one.

Result (35 runs, 15 fault runs and 20 meant healthy, twins included; wandb 3, MLflow 7, CSV 13, Parquet 10, HF
``Trainer``, Lightning ``CSVLogger``): the twins confirm 12 of the 15 faults: SGD lr 1.0 with clip 1.0 (100x; it
memorises the rows in bursts: its last level 1.63x the twin's, swing 3.6x), AdamW lr 1e-6 and AdamW eps 1.0 (the flat
case, ``one_of`` loss-oscillation / slow-convergence: 33x and 32x the twin's level, falling 0.2 % and 4 %), the raw
features under SGD (slow: never reaches the twin's quarter-run level while learning; the cross-check adds
``nonfinite``: its gradient norm peaks far above the twin's), an LR spike x1000 at step 300 under SGD (gradient norm
1717x the twin's median, no NaN), a NaN in one row's first feature at step 300 (NaN from step 300), SGD lr 1.0 unclipped
(NaN from step 307), 'mean area' regressed in raw units beside the cross-entropy under SGD with clip 1.0 (the
cross-entropy term rose 35 %, the z-scored twin's fell 92 %; the cross-check adds ``nonfinite``), two label-flipped
batches an epoch met unshuffled (72 of 78 shard steps >= 3x the twin; the first epochs' are 1.3-2.3x), a 12-layer plain
sigmoid stack between the KAN layers (the first KAN layer's gradient underflows to 0; the residual twin's does not), a 1
ms/row loader (throughput 0.03x) and the first 64 rows fitted by [30, 32, 32, 2] without weight decay or spline penalty
(val 0.354 against the regularised twin's 0.143). Not confirmed, kept but not scored: AdamW lr 0.1 (changed once, from
1.0; it learns, falling 81 %, its last level 6.4x the twin's but with a swing only 1.18x the twin's), batch 1 at the
twin's AdamW 1e-3 (it fits the rows: 0.32x the twin's level) and init x1e-3 under SGD (a plateau at ln 2 for ~240
steps, then it learns: it reaches the twin's quarter-run level 3.4x later, short of 4x). 16 of the 20 runs meant healthy
pass the healthy check (10 of 13 healthy variants, 6 of 7 twins); left out: 20 % label noise (val 12 % above its best),
the one-cycle run (11.8 %), the wide/deep [30, 32, 32, 2] variant (31 %) and the regularised overfitting twin (18 %): a
KAN fits these 455 (or 64) rows to a train loss of 0.003-0.02 and its val cross-entropy drifts up from its best.
Generated with ``--family kan``: into scratch folders (41-45 s each), then into the corpus (33 s wall) on a two-core
machine shared with other jobs; 7.4 MB.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from . import truth
from .common import NAMES, early_stopping, fit, lr_spike, make_optimizer, make_scheduler, nan_cell_at, seed_all, \
    shrink_init
from .family_runs import FamilyRuns, TwinChecks, batches_for, batches_per_epoch, shard_steps_for, with_val_extras
from .integrations import hf_trainer_run, lightning_module, lightning_run
from .sinks import open_run

FAMILY = "kan"
SEED = 179
N_VAL = 114
AUX_FEATURE = "mean area"
DATASET = ("sklearn.load_breast_cancer: 569 tumours, 30 numeric features standardised with the training split's "
           "statistics then passed through tanh (into the spline grid [-1, 1]), binary (malignant 0 / benign 1), two "
           "logits; a seeded stratified 455 train / 114 val split")


# --- The data. ---

@lru_cache(maxsize=1)
def split() -> dict:
    """The seeded stratified split: raw (float32 numpy) and standardised with the training rows' mean and std then
    squashed by tanh; the training rows in the order ``train_test_split`` returns them (the stored order an unshuffled
    loader reads)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    d = load_breast_cancer()
    x, y = d.data.astype(np.float32), d.target.astype(np.int64)
    xt, xv, yt, yv = train_test_split(x, y, test_size=N_VAL, stratify=y, random_state=SEED)
    mu, sd = xt.mean(0), xt.std(0)
    return {"xt_raw": xt, "xv_raw": xv, "xt": np.tanh((xt - mu) / sd), "xv": np.tanh((xv - mu) / sd), "yt": yt,
            "yv": yv, "features": list(d.feature_names)}


def aux_index() -> int:
    return split()["features"].index(AUX_FEATURE)


def arrays(raw: bool, aux: str | None, n_train: int | None, label_noise: float):
    """(xt, yt, xv, yv) tensors; y is (N, 2) float: the label and the auxiliary target ('mean area' in raw units for
    aux "raw", z-scored with the training rows' statistics for "scaled", else 0). With an auxiliary target its column
    is dropped from the inputs (the head regresses it from the other 29 features)."""
    s = split()
    xt, xv = (s["xt_raw"], s["xv_raw"]) if raw else (s["xt"], s["xv"])
    yt, yv = s["yt"].copy(), s["yv"]
    if label_noise:
        flip = np.random.default_rng(SEED + 3).permutation(len(yt))[: int(round(label_noise * len(yt)))]
        yt[flip] = 1 - yt[flip]
    if aux is not None:
        j = aux_index()
        at, av = s["xt_raw"][:, j].astype(np.float64), s["xv_raw"][:, j].astype(np.float64)
        if aux == "scaled":
            mu, sd = at.mean(), at.std()
            at, av = (at - mu) / sd, (av - mu) / sd
        keep = [i for i in range(xt.shape[1]) if i != j]
        xt, xv = xt[:, keep], xv[:, keep]
    else:
        at, av = np.zeros(len(yt)), np.zeros(len(yv))
    t = lambda a: torch.tensor(np.asarray(a), dtype=torch.float32)
    ytt = torch.stack([t(yt), t(at)], dim=1)
    yvt = torch.stack([t(yv), t(av)], dim=1)
    xtt, xvt = t(xt), t(xv)
    if n_train is not None:
        xtt, ytt = xtt[:n_train], ytt[:n_train]
    return xtt, ytt, xvt, yvt


# --- The model. ---

class KANLinear(nn.Module):
    """One KAN layer as efficient-kan writes it: every edge (i -> o) carries phi(x_i) = w_b[o, i] * SiLU(x_i) +
    w_s[o, i] * sum_c c[o, i, c] B_c(x_i), B-splines of order ``k`` on a uniform grid of ``grid_size`` intervals over
    [-1, 1], extended by ``k`` knots each side (so a basis is non-zero only on [-1 - k h, 1 + k h]). Init as
    efficient-kan's: the base weights Kaiming-uniform, the spline coefficients a least-squares fit of small noise
    (scale 0.1 / grid_size), the standalone spline scalers Kaiming-uniform."""

    def __init__(self, d_in: int, d_out: int, grid_size: int = 5, k: int = 3, scale_noise: float = 0.1):
        super().__init__()
        self.d_in, self.d_out, self.grid_size, self.k = d_in, d_out, grid_size, k
        h = 2.0 / grid_size
        grid = torch.arange(-k, grid_size + k + 1, dtype=torch.float32) * h - 1.0
        self.register_buffer("grid", grid.expand(d_in, -1).contiguous())
        self.base_weight = nn.Parameter(torch.empty(d_out, d_in))
        self.spline_weight = nn.Parameter(torch.empty(d_out, d_in, grid_size + k))
        self.spline_scaler = nn.Parameter(torch.empty(d_out, d_in))
        nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5))
        with torch.no_grad():
            noise = (torch.rand(grid_size + 1, d_in, d_out) - 0.5) * scale_noise / grid_size
            self.spline_weight.copy_(self.curve2coeff(self.grid.T[k:-k], noise))
        nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5))

    def b_splines(self, x: torch.Tensor) -> torch.Tensor:
        """(N, d_in) -> (N, d_in, grid_size + k): the B-spline bases at x (Cox-de Boor recursion)."""
        g = self.grid
        x = x.unsqueeze(-1)
        bases = ((x >= g[:, :-1]) & (x < g[:, 1:])).to(x.dtype)
        for j in range(1, self.k + 1):
            bases = ((x - g[:, :-(j + 1)]) / (g[:, j:-1] - g[:, :-(j + 1)]) * bases[:, :, :-1]
                     + (g[:, j + 1:] - x) / (g[:, j + 1:] - g[:, 1:-j]) * bases[:, :, 1:])
        return bases

    def curve2coeff(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The coefficients (d_out, d_in, grid_size + k) whose splines pass nearest the points (x (M, d_in), y (M,
        d_in, d_out)), by least squares (min-norm: M = grid_size + 1 points for grid_size + k coefficients). Solved in
        float64 and rounded to float32: torch's float32 ``lstsq`` on this CPU gave answers differing by ~1e-8 from one
        call to the next, which made no two trainings of the same seed equal."""
        a = self.b_splines(x.double()).transpose(0, 1)
        b = y.double().transpose(0, 1)
        return torch.linalg.lstsq(a, b).solution.permute(2, 0, 1).float().contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        base = F.linear(F.silu(x), self.base_weight)
        coeff = self.spline_weight * self.spline_scaler.unsqueeze(-1)
        spline = F.linear(self.b_splines(x).reshape(len(x), -1), coeff.reshape(self.d_out, -1))
        return base + spline

    def spline_l1(self) -> torch.Tensor:
        """efficient-kan's L1 regulariser: the mean |coefficient| of each edge's spline, summed over the edges."""
        return self.spline_weight.abs().mean(-1).sum()


class KAN(nn.Module):
    """KAN layers of the given widths; ``stack_layers``: a plain MLP of sigmoid layers (as wide as the first KAN
    layer's output) after the first KAN layer (``residual`` adds each layer's input to its output)."""

    def __init__(self, widths: tuple[int, ...], grid_size: int = 5, k: int = 3, stack_layers: int = 0,
                 residual: bool = False):
        super().__init__()
        self.layers = nn.ModuleList([KANLinear(a, b, grid_size, k) for a, b in zip(widths[:-1], widths[1:])])
        self.stack = nn.ModuleList([nn.Linear(widths[1], widths[1]) for _ in range(stack_layers)])
        self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i == 0:
                for lin in self.stack:
                    x = x + torch.sigmoid(lin(x)) if self.residual else torch.sigmoid(lin(x))
        return x

    def spline_l1(self) -> torch.Tensor:
        return sum(layer.spline_l1() for layer in self.layers)


def task_terms(out: torch.Tensor, y: torch.Tensor, aux: str | None) -> dict[str, torch.Tensor]:
    """{"cls": the cross-entropy of the two logits} and, with the auxiliary head (a third output), {"aux": its MSE
    against y[:, 1]}."""
    cls = F.cross_entropy(out[:, :2], y[:, 0].long())
    if aux is None:
        return {"cls": cls}
    return {"cls": cls, "aux": F.mse_loss(out[:, 2], y[:, 1])}


BASE = {"optimizer": "adamw", "lr": 1e-3, "eps": 1e-8, "batch_size": 32, "weight_decay": 1e-4, "init": "default",
        "widths": (30, 16, 2), "grid_size": 5, "spline_order": 3, "stack_layers": 0, "residual": False, "aux": None,
        "raw_features": False, "schedule": "constant", "shuffle": True, "loader": "memory", "num_workers": 0,
        "clip": None, "max_steps": 600, "n_train": None, "early_stop": None, "label_noise": 0.0, "bad_shard": None,
        "spline_l1": 0.0}
# The base recipe (efficient-kan's example: AdamW 1e-3, weight decay 1e-4) was tried alone before any fault ran (the
# twin only, batch 32, 600 steps; its last val cross-entropy, how far it ends above its best): AdamW 3e-4 0.106 (0 %),
# 1e-3 0.091 (0 %, kept; train level 0.015), 3e-3 0.132 (47 %; train level 0.001). SGD momentum 0.9, constant, clip 1.0
# for the SGD faults' twin, its lr picked by a sweep of that twin alone: 3e-3 0.127 (0 %), 1e-2 0.095 (0 %, kept), 3e-2
# 0.103 (9 %), 0.1 0.171 (82 %). The overfitting pair's regularised twin alone (the first 64 rows, [30, 32, 32, 2], 600
# steps; its last val cross-entropy, above its best): weight decay 1e-2 with spline L1 1e-3 0.188 (27 %), 0.1 and 1e-2
# 0.172 (42 %), 1.0 and 1e-3 0.192 (33 %), 1.0 and 1e-2 0.143 (19 %, kept), 1.0 and 3e-2 0.170 (36 %), 3.0 and 1e-2
# 0.132 (10 %; not kept: weight decay 3 is further from what a practitioner would set); each fits the 64 rows.
SGD = {"optimizer": "sgd", "lr": 1e-2, "weight_decay": 0.0, "schedule": "constant", "clip": 1.0}


def scheduler_for(opt, cfg: dict):
    """A cosine decay to 1 % over ``decay_steps`` that then idles there; else :func:`.common.make_scheduler`."""
    if cfg["schedule"] == "decay_then_idle":
        d = cfg["decay_steps"]
        return torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * min(s, d) / d)))
    return make_scheduler(opt, cfg)


def widths_of(cfg: dict) -> tuple[int, ...]:
    w = list(cfg["widths"])
    if cfg["aux"]:
        w[0], w[-1] = w[0] - 1, w[-1] + 1  # 'mean area' leaves the inputs; a third output regresses it
    return tuple(w)


def model_name(cfg: dict) -> str:
    name = "kan-" + "-".join(str(w) for w in widths_of(cfg)) + f"-grid{cfg['grid_size']}-order{cfg['spline_order']}"
    if cfg["stack_layers"]:
        name += f"-sigmoid{cfg['stack_layers']}" + ("-res" if cfg["residual"] else "-plain")
    if cfg["aux"]:
        name += "-areahead"
    return name


def grad_layers(cfg: dict) -> tuple[str, ...]:
    last = len(widths_of(cfg)) - 2
    names = ["layers.0.base_weight", "layers.0.spline_weight"]
    k = cfg["stack_layers"]
    if k:
        names += ["stack.0.weight", f"stack.{k - 1}.weight"]
    names += [f"layers.{last}.base_weight", f"layers.{last}.spline_weight"]
    return tuple(names)


def build_model(cfg: dict) -> KAN:
    seed_all(cfg["seed"])
    model = KAN(widths_of(cfg), cfg["grid_size"], cfg["spline_order"], cfg["stack_layers"], cfg["residual"])
    return shrink_init(model, cfg["init"])


def loss_label(cfg: dict) -> str:
    label = "cross-entropy of two logits (batch mean)"
    if cfg["aux"] == "raw":
        label += f" + MSE of a third output regressing '{AUX_FEATURE}' in its raw units (~650 +- 350), weight 1"
    elif cfg["aux"] == "scaled":
        label += f" + MSE of a third output regressing '{AUX_FEATURE}' z-scored with the training rows' statistics"
    if cfg["spline_l1"]:
        label += f" + {cfg['spline_l1']:g} x the spline coefficients' L1 (efficient-kan's regularization_loss)"
    if cfg["label_noise"]:
        label += f"; {cfg['label_noise']:.0%} of the training labels flipped"
    return label


def flipped_labels_shard(batch_ids: tuple[int, ...]):
    """Those batch positions of every epoch were exported with the label column flipped (0 <-> 1)."""
    ids = set(batch_ids)

    def wrap(base, per_epoch):
        def batches(epoch):
            for i, (x, y) in enumerate(base(epoch)):
                if i in ids:
                    y = y.clone()
                    y[:, 0] = 1.0 - y[:, 0]
                yield x, y
        return batches
    return wrap


def val_fn_for(model: KAN, cfg: dict, xv: torch.Tensor, yv: torch.Tensor, state: dict):
    aux = cfg["aux"]

    def fn() -> float:
        model.eval()
        with torch.no_grad():
            out = model(xv)
            terms = task_terms(out, yv, aux)
            state.update({k: float(v) for k, v in terms.items()})
            pred = out[:, :2].argmax(1)
            state["acc"] = float((pred == yv[:, 0].long()).float().mean()) if torch.isfinite(out).all() else \
                float("nan")
        model.train()
        return float(sum(terms.values()))
    return fn


def val_term_key(names: dict, term: str) -> str:
    task = names["task"].format(term)
    return "val/" + task.split("/", 1)[1] if "/" in task else "val_" + task


class Runs(FamilyRuns):
    family, dataset = FAMILY, DATASET

    def train(self, name: str, style: str, naming: str, over: dict, *, before_step=None, corrupt=None,
              val_every: int = 20, log_every: int = 1):
        cfg = {**BASE, "seed": SEED, **over}
        xt, yt, xv, yv = arrays(cfg["raw_features"], cfg["aux"], cfg["n_train"], cfg["label_noise"])
        model = build_model(cfg)
        opt = make_optimizer(model.parameters(), cfg)
        batches = batches_for(xt, yt, cfg, 0.001)
        per_epoch = batches_per_epoch(cfg, len(xt))
        if cfg["bad_shard"]:
            batches = flipped_labels_shard(cfg["bad_shard"])(batches, per_epoch)
        if corrupt is not None:
            batches = corrupt(batches, per_epoch)
        state: dict = {}
        val_fn = val_fn_for(model, cfg, xv, yv, state)
        if cfg["early_stop"]:
            batches = early_stopping(batches, val_fn, cfg["early_stop"])
        logged = dict(cfg, widths=list(widths_of(cfg)), model=model_name(cfg), dataset=DATASET, n_train=len(xt),
                      n_val=len(xv), loss=loss_label(cfg), n_features=int(xt.shape[1]),
                      task="tabular classification (KAN)",
                      features="raw units" if cfg["raw_features"] else
                      "standardised (training split's mean and std), then tanh")
        if cfg["aux"]:
            logged["aux_target"] = (f"'{AUX_FEATURE}' in raw units (mean {float(yt[:, 1].mean()):.0f}, std "
                                    f"{float(yt[:, 1].std()):.0f})" if cfg["aux"] == "raw" else
                                    f"'{AUX_FEATURE}' z-scored with the training rows' mean and std")
        if cfg["bad_shard"]:
            logged["bad_shard"] = f"batches {list(cfg['bad_shard'])} of every epoch exported with the label flipped"
        if corrupt is not None:
            logged["corruption"] = corrupt.label
        if before_step is not None:
            logged["lr_spike"] = before_step.label
        log = open_run(style, self.root, name, logged)
        names = NAMES[naming]
        acc_key = names["val_loss"].replace("loss", "acc")
        extra_terms = ("cls", "aux") if cfg["aux"] else ()
        log.log = with_val_extras(log.log, names["val_loss"], lambda: {
            acc_key: state["acc"], **{val_term_key(names, t): state[t] for t in extra_terms}})
        aux, l1 = cfg["aux"], cfg["spline_l1"]

        def loss_fn(m, batch):
            xb, yb = batch
            t = task_terms(m(xb), yb, aux)
            total = sum(t.values())
            if l1:
                total = total + l1 * m.spline_l1()
            return total if aux is None else (total, t)

        res = fit(model, batches, loss_fn, opt, log, epochs=100_000, naming=naming, scheduler=scheduler_for(opt, cfg),
                  val_fn=val_fn, val_every=val_every, log_every=log_every, layer_grads=grad_layers(cfg),
                  clip=cfg["clip"], before_step=before_step, max_steps=cfg["max_steps"])
        file = self.keep(name, log, res)
        return file, logged


def build(root: Path, only: set[str] | None) -> list[dict]:
    runs = Runs(root)
    book = TwinChecks(runs, only, default_twin="kan_twin_adam")
    want, twin_run, fault = book.wanted, book.twin, book.fault
    W = NAMES[book.naming]
    key, val_key = book.key, book.val_key
    osc, slow, boom = book.oscillation, book.slowness, book.explosion
    lr0, sgd = BASE["lr"], SGD["lr"]
    n_train = len(split()["yt"])

    twin_run("kan_twin_adam", "wandb", {},
             f"KAN [30, 16, 2] (efficient-kan layers: SiLU base + cubic B-splines on 5 intervals over [-1, 1]) on the "
             f"standardised, tanh-squashed breast-cancer features, cross-entropy, batch 32, AdamW {lr0:g} (weight "
             "decay 1e-4) constant, 600 steps: the sane twin (and the family's baseline).")
    twin_run("kan_twin_sgd", "mlflow", SGD,
             f"The same KAN with SGD momentum 0.9 lr {sgd:g}, constant, clip 1.0: the SGD faults' twin.")

    # Changed once after its truth check: at lr 1.0 (1000x) the loss blew up to 10-90 in its first steps, then settled
    # on a flat plateau near 0.50 from step ~60 (val cross-entropy ~57, dead units): its last level 24x the twin's, but
    # 26 % below its blown-up first level and with a smaller swing (0.18x), so not confirmed; now lr 0.1 (100x). Not
    # confirmed at 0.1 either, kept but not scored: it learns (fell 81 %), its last level 6.4x the twin's, swing 1.18x.
    # (In the non-deterministic generation the change was decided on, lr 0.1 memorised the rows, 0.0005x.)
    fault("kan_lr_too_high_adam", "lr_too_high", ["loss-oscillation"], {"lr": 100 * lr0}, osc,
          f"AdamW at lr {100 * lr0:g} (100x the twin's {lr0:g}), constant.", style="parquet")
    # Changed once after its truth check: at lr 10 (1000x) with clip 1.0 the loss rose to ~9 over its first 60 steps,
    # then settled flat at 0.563 (val ~38): 11x the twin's last level, but 18 % below its first level, swing 0.10x, so
    # not confirmed; now lr 1.0 (100x): confirmed (its last level 1.63x the twin's, swing 3.6x; its val cross-entropy
    # climbs to ~0.47 while it memorises the rows in bursts).
    fault("kan_lr_too_high_sgd", "lr_too_high", ["loss-oscillation"], {**SGD, "lr": 100 * sgd}, osc,
          f"SGD momentum 0.9 at lr {100 * sgd:g} (100x the twin's {sgd:g}), clip 1.0.", style="csv",
          twin_name="kan_twin_sgd")
    # Not confirmed, kept but not scored, not changed: batch 1 at the twin's lr fits the rows (its last level 0.32x the
    # twin's, swing 1.4x).
    fault("kan_batch_too_small", "batch_too_small", ["loss-oscillation"], {"batch_size": 1}, osc,
          f"Batch 1 row with AdamW at the twin's lr {lr0:g}.", style="csv")
    fault("kan_lr_too_low", "lr_too_low", ["slow-convergence"], {"lr": lr0 / 1000}, slow,
          f"AdamW at lr {lr0 / 1000:g} (1000x below the twin).", style="mlflow")
    fault("kan_adam_eps_large", "adam_eps_large", ["slow-convergence"], {"eps": 1.0}, slow,
          "AdamW eps=1.0 (a typo for 1e-8).", style="wandb")
    # Not confirmed, kept but not scored, not changed: it sits at ln 2 for ~250 steps, then learns, reaching the twin's
    # quarter-run level at step 498 against the twin's 148 (3.4x, short of 4x).
    fault("kan_init_too_small", "init_too_small", ["slow-convergence"], {**SGD, "init": "scaled:0.001"}, slow,
          f"Every base weight, spline coefficient and spline scaler multiplied by 1e-3 at init, SGD momentum lr "
          f"{sgd:g}, clip 1.0.", style="parquet", twin_name="kan_twin_sgd")
    fault("kan_lr_spike_restart", "lr_spike", ["nonfinite"], SGD, boom,
          f"SGD momentum lr {sgd:g}, clip 1.0; at step 300 a restart multiplies the LR by 1000.", style="mlflow",
          twin_name="kan_twin_sgd", before_step=lr_spike(300, 1000))
    fault("kan_corrupt_record", "corrupt_record", ["nonfinite"], {}, boom,
          f"AdamW {lr0:g}; feature 0 ('mean radius') of one row in the batch read at step 300 is NaN.", style="csv",
          corrupt=nan_cell_at(300, 0, "NaN in feature 0 of one row at step 300"))
    fault("kan_gradient_explosion_noclip", "gradient_explosion", ["nonfinite"],
          {**SGD, "lr": 100 * sgd, "clip": None}, boom,
          f"SGD momentum lr {100 * sgd:g} (100x the twin's {sgd:g}), no gradient clipping.", style="parquet",
          twin_name="kan_twin_sgd")
    # Confirmed slow (never reaches the twin's quarter-run level while learning); the raw areas (~650) through the SiLU
    # branch give a gradient norm 4133x the twin's median at step 7, so the cross-check adds nonfinite.
    fault("kan_raw_features_sgd", "features_not_normalised", ["slow-convergence"], {**SGD, "raw_features": True}, slow,
          "The 30 features fed in their raw units ('mean area' ~650 +- 350, 'mean smoothness' ~0.1), neither "
          "standardised nor squashed: most of them far outside the splines' grid, where every B-spline basis is 0; "
          f"SGD momentum lr {sgd:g}, clip 1.0.", style="parquet", twin_name="kan_twin_sgd")

    # Task imbalance: a third output regressing 'mean area' (dropped from the inputs) in its raw units, MSE summed
    # unweighted with the cross-entropy, SGD momentum with clip 1.0; the twin regresses it z-scored.
    stalled = lambda tap, twin, *_: truth.confirm_task_stalled(tap, twin, W["task"].format("cls"))
    if want("kan_unscaled_aux_loss", "kan_twin_aux_scaled"):
        twin_run("kan_twin_aux_scaled", "csv", {**SGD, "aux": "scaled"},
                 f"The KAN [29, 16, 3] with a third output regressing '{AUX_FEATURE}' (left out of the inputs) "
                 f"z-scored (MSE, weight 1) beside the cross-entropy, SGD momentum lr {sgd:g}, clip 1.0: the "
                 "unscaled auxiliary loss's twin.")
        fault("kan_unscaled_aux_loss", "unscaled_aux_loss", ["task-imbalance"], {**SGD, "aux": "raw"}, stalled,
              f"The KAN [29, 16, 3] with a third output regressing '{AUX_FEATURE}' (left out of the inputs) in its "
              f"raw units (~650 +- 350), MSE summed unweighted with the cross-entropy, both logged beside the total; "
              f"SGD momentum lr {sgd:g}, clip 1.0.", style="wandb", twin_name="kan_twin_aux_scaled")

    # Bad shard, unshuffled: batches 5 and 6 of each epoch (15 batches of 32 an epoch) were exported with the label
    # column flipped.
    noshuf = {"shuffle": False}
    shard = (5, 6)
    if want("kan_bad_shard_noshuffle", "kan_twin_noshuffle"):
        steps = shard_steps_for({**BASE, **noshuf}, shard, n_train)
        twin_run("kan_twin_noshuffle", "csv", noshuf,
                 f"AdamW {lr0:g}, batches of 32 rows in the stored order without shuffling, every label right: the bad "
                 "shard's twin.")

        def spikes(tap, twin, *_):
            ok, m = truth.confirm_spikes_at(tap, twin, key, steps)
            return ok, {**m, "spike_steps": steps}

        fault("kan_bad_shard_noshuffle", "bad_shard_noshuffle", ["periodic-spikes"], {**noshuf, "bad_shard": shard},
              spikes, "No shuffling, batches of 32 rows; batches 5 and 6 of each epoch (rows 160..223 of the stored "
              "order) were exported with the label column flipped (malignant <-> benign).",
              style="parquet", twin_name="kan_twin_noshuffle")

    deep = {"stack_layers": 12}
    if want("kan_vanishing_sigmoid12", "kan_twin_residual_sigmoid12"):
        twin_run("kan_twin_residual_sigmoid12", "mlflow", {**deep, "residual": True},
                 f"The KAN with a 12-layer sigmoid MLP (16 wide) with residual connections between its two KAN "
                 f"layers, AdamW {lr0:g}: the vanishing run's twin.")
        fault("kan_vanishing_sigmoid12", "vanishing_gradients", ["vanishing-gradients"], deep,
              lambda tap, twin, *_: truth.confirm_vanishing(tap, twin, W["layer_grad"].format("layers.0.base_weight")),
              f"The KAN with a 12-layer plain sigmoid MLP (16 wide, no residual connections, torch's default init) "
              f"between its two KAN layers, AdamW {lr0:g}.", style="csv", twin_name="kan_twin_residual_sigmoid12")

    if want("kan_slow_loader", "kan_twin_fast_loader"):
        twin_run("kan_twin_fast_loader", "parquet", {"loader": "fast", "max_steps": 100},
                 f"AdamW {lr0:g} through an in-memory DataLoader of rows (no workers), 100 steps: the slow loader's "
                 "twin.")

        def bottleneck(tap, twin, name, twin_name):
            return truth.confirm_bottleneck(runs.results[name].samples_per_s, runs.results[twin_name].samples_per_s)

        fault("kan_slow_loader", "slow_loader", ["input-bottleneck"],
              {"loader": "slow_io", "io_delay_s": 0.001, "max_steps": 100}, bottleneck,
              "Each row takes 1 ms to arrive (SlowIODataset, a real sleep) through a DataLoader with no workers, 100 "
              "steps.", style="mlflow", twin_name="kan_twin_fast_loader")

    small = {"n_train": 64, "widths": (30, 32, 32, 2)}
    if want("kan_overfit_small_subset", "kan_twin_overfit_reg"):
        twin_run("kan_twin_overfit_reg", "csv", {**small, "weight_decay": OVERFIT_WD, "spline_l1": OVERFIT_L1},
                 f"The first 64 training rows, KAN [30, 32, 32, 2], AdamW {lr0:g} with weight decay {OVERFIT_WD:g} "
                 f"and a spline-coefficient L1 penalty ({OVERFIT_L1:g} x efficient-kan's regularization_loss, the "
                 "L1 term) in the loss, 600 steps: the overfitting run's twin.")
        fault("kan_overfit_small_subset", "overfitting", ["overfitting"], {**small, "weight_decay": 0.0},
              lambda tap, twin, *_: truth.confirm_overfitting(tap, twin, key, val_key),
              f"The first 64 training rows, KAN [30, 32, 32, 2], AdamW {lr0:g} for 600 steps, no weight decay and no "
              "spline penalty.", style="mlflow", twin_name="kan_twin_overfit_reg")

    healthy = [
        ("kan_warmup_cosine", "csv", "plain", {"schedule": "warmup_cosine", "lr": 2e-3}, {},
         "AdamW peaking at 2e-3, a tenth of warm-up then cosine decay."),
        ("kan_step_decay_sgd", "csv", "mlflow", {**SGD, "schedule": "step"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, step decay x0.3 every third of the run."),
        ("kan_onecycle", "parquet", "wandb", {"schedule": "onecycle", "lr": 3e-3}, {},
         "AdamW with a one-cycle schedule peaking at 3e-3."),
        ("kan_sgdr_restarts", "csv", "plain", {**SGD, "schedule": "sgdr"}, {},
         f"SGD momentum lr {sgd:g}, clip 1.0, cosine warm restarts every quarter of the run (SGDR)."),
        ("kan_early_stopping", "mlflow", "wandb", {"max_steps": 2000, "early_stop": 3}, {"log_every": 2},
         f"AdamW {lr0:g}, early stopping (patience 3 epochs on the val loss), at most 2000 steps."),
        ("kan_label_noise", "csv", "mlflow", {"label_noise": 0.2}, {},
         f"AdamW {lr0:g}; 20 % of the training labels flipped: a high plateau."),
        ("kan_tiny_batch_sane_lr", "parquet", "mlflow",
         {"batch_size": 4, "lr": round(lr0 / math.sqrt(8), 6), "max_steps": 1500}, {"log_every": 2, "val_every": 50},
         f"Batch 4 rows with AdamW {lr0 / math.sqrt(8):.2g} (the square-root rule from the twin's batch 32 and lr), "
         "1500 steps."),
        ("kan_rare_val", "csv", "wandb", {}, {"val_every": 100, "log_every": 3},
         f"AdamW {lr0:g}; logs every 3rd step and validates every 100."),
        ("kan_converged_idle", "parquet", "plain", {"schedule": "decay_then_idle", "decay_steps": 400,
                                                   "max_steps": 1200}, {"log_every": 3, "val_every": 30},
         f"AdamW {lr0:g}, cosine decay to 1 % by step 400, then 800 steps idling at that LR."),
        ("kan_wide_deep", "parquet", "wandb", {"widths": (30, 32, 32, 2)}, {},
         f"A wider and deeper KAN [30, 32, 32, 2], AdamW {lr0:g}."),
        ("kan_grid10", "csv", "plain", {"grid_size": 10}, {},
         f"The KAN [30, 16, 2] with a finer grid: 10 intervals over [-1, 1], AdamW {lr0:g}."),
    ]
    for name, style, naming, over, kw, desc in healthy:
        if want(name):
            f, c = runs.train(name, style, naming, over, **kw)
            runs.add_unlabelled(name, style, f, c, cause="healthy", description=desc)
    if want("kan_hf_warmup_cosine"):
        runs.entries.append(_hf_run(root))
    if want("kan_lightning_step_decay"):
        runs.entries.append(_lightning_run(root))
    return runs.entries


OVERFIT_WD = 1.0
OVERFIT_L1 = 1e-2


def _ce(out, y):
    return F.cross_entropy(out[:, :2], y[:, 0].long())


def _stock_config(cfg: dict) -> dict:
    return {"model": model_name(cfg), "dataset": DATASET, "seed": SEED, "loss": loss_label(cfg),
            "widths": list(widths_of(cfg)), "grid_size": cfg["grid_size"], "spline_order": cfg["spline_order"],
            "n_train": len(split()["yt"]), "n_val": N_VAL, "n_features": 30,
            "features": "standardised (training split's mean and std), then tanh"}


def _hf_run(root: Path) -> dict:
    """A healthy run through transformers.Trainer (AdamW, warm-up then cosine, its default clip 1.0)."""
    name = "kan_hf_warmup_cosine"
    cfg = {**BASE, "seed": SEED}
    model = build_model(cfg)
    xt, yt, xv, yv = arrays(False, None, None, 0.0)
    args = {"learning_rate": 1e-3, "weight_decay": 1e-4, "lr_scheduler_type": "cosine", "warmup_steps": 60,
            "max_steps": 600, "per_device_train_batch_size": 32, "per_device_eval_batch_size": 114,
            "logging_steps": 2, "eval_steps": 20}
    f, _ = hf_trainer_run(root, name, model, _ce, (xt, yt), (xv, yv), args, SEED)
    config = {**args, "optimizer": "adamw", "trainer": "hf", **_stock_config(cfg)}
    return {"name": name, "family": FAMILY, "model": config["model"], "dataset": DATASET,
            "style": "hf_trainer", "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None,
            "seed": SEED, "config": config, "truth": {},
            "description": "transformers.Trainer: the KAN [30, 16, 2] on the standardised, tanh-squashed "
                           "breast-cancer features, batches of 32, AdamW 1e-3 with weight decay 1e-4, 60 warm-up "
                           "steps then cosine, 600 steps; loss = cross-entropy; eval loss on the 114 val rows; "
                           "trainer_state.json."}


def _lightning_run(root: Path) -> dict:
    """A healthy run through lightning.Trainer with a CSVLogger: Adam 1e-3, step decay x0.3 every 200 steps."""
    name = "kan_lightning_step_decay"
    cfg = {**BASE, "seed": SEED}
    model = build_model(cfg)
    hp = {"optimizer": "adam", "lr": 1e-3, "weight_decay": 0.0, "batch_size": 32, "schedule": "step",
          "step_size": 200, "gamma": 0.3, "max_epochs": 40, **_stock_config(cfg)}
    module = lightning_module(
        model, _ce, lambda p: torch.optim.Adam(p, lr=hp["lr"]), hp,
        lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=hp["step_size"], gamma=hp["gamma"]))
    xt, yt, xv, yv = arrays(False, None, None, 0.0)
    g = torch.Generator().manual_seed(SEED)
    tl = DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True, generator=g)
    vl = DataLoader(TensorDataset(xv, yv), batch_size=114)
    f, _ = lightning_run(root, name, module, tl, vl, {"max_epochs": hp["max_epochs"], "log_every_n_steps": 1})
    return {"name": name, "family": FAMILY, "model": hp["model"], "dataset": DATASET, "style": "lightning",
            "file": f, "faults": [], "intended": [], "cause": "healthy", "twin": None, "seed": SEED, "config": hp,
            "truth": {},
            "description": "lightning.Trainer with CSVLogger: the KAN [30, 16, 2] on the standardised, tanh-squashed "
                           "breast-cancer features, batches of 32, Adam 1e-3, step decay x0.3 every 200 steps, 40 "
                           "epochs (600 steps; validated once per epoch on the 114 val rows)."}
