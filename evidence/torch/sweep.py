"""A real small sweep for the sweep summary: ``python -m evidence.torch.sweep [--out DIR]``.

Twelve trainings of a 4-layer MLP on scikit-learn's digits (10 classes; torch on CPU, one thread,
seeded): Adam (weight decay 1e-3) at four learning rates (3e-4, 3e-3, 3e-2, 0.3) × three batch sizes
(8, 32, 128), 300 steps each, logged as CSV by pandas (``sweep/runs/``). ``sweep/manifest.json`` records each run's config
and its ground truth against the sweep's reference run — the family's own default setting (Adam
3e-3, batch 32), chosen before any run was trained — with :func:`.truth.confirm_oscillation`, which
uses no diagnosis' statistic. Nothing trains in CI: the tests read these files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from torch import nn

from . import truth
from .common import NAMES, fit, minibatches, seed_all
from .fam_mlp import MLP
from .sinks import open_run

HERE = Path(__file__).parent
OUT = HERE / "sweep"
LRS = (3e-4, 3e-3, 3e-2, 0.3)
BATCHES = (8, 32, 128)
REFERENCE = (3e-3, 32)  # Adam's usual setting: the sane twin every run is compared with
SEED, STEPS, MODEL, DATASET = 7, 300, "mlp4x64_relu_digits", "sklearn.load_digits"


def digits(seed: int):
    """A seeded 1,400 / 397 split, standardised with the training split's statistics."""
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    tr, va = order[:1400], order[1400:]
    x = x.astype(np.float32)
    mu, sd = x[tr].mean(0), x[tr].std(0) + 1e-6
    x = (x - mu) / sd
    f = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    i = lambda a: torch.tensor(a, dtype=torch.long)  # noqa: E731
    return f(x[tr]), i(y[tr]), f(x[va]), i(y[va])


def _name(lr: float, batch: int) -> str:
    return f"sweep_lr{lr:g}_bs{batch}"


def train(out: Path, lr: float, batch: int):
    seed_all(SEED)
    xt, yt, xv, yv = digits(SEED)
    torch.manual_seed(SEED)
    net = MLP(4, 64, "relu", n_in=64, n_out=10)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=1e-3)
    ce = nn.functional.cross_entropy

    def val_fn():
        net.eval()
        with torch.no_grad():
            return float(ce(net(xv), yv))

    config = {"model": MODEL, "dataset": DATASET, "optimizer": "adam", "lr": lr, "batch_size": batch, "seed": SEED,
              "max_steps": STEPS}
    log = open_run("csv", out, _name(lr, batch), config)
    fit(net, minibatches(xt, yt, batch, SEED), lambda m, b: ce(m(b[0]), b[1]), opt, log, epochs=10_000,
        naming="mlflow", val_fn=val_fn, val_every=15, max_steps=STEPS)
    return log.close(), log.logged, config


def main(argv: list[str]) -> int:
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else OUT
    out.mkdir(parents=True, exist_ok=True)
    trained = {(lr, b): train(out, lr, b) for lr in LRS for b in BATCHES}
    loss_key = NAMES["mlflow"]["loss"]
    ref = trained[REFERENCE][1]
    entries = []
    for (lr, batch), (file, logged, config) in trained.items():
        oscillates, measures = truth.confirm_oscillation(logged, ref, loss_key) if (lr, batch) != REFERENCE else (False, {})
        entries.append({"name": _name(lr, batch), "file": file, "config": config,
                        "oscillates": oscillates, "truth": measures, "reference": _name(*REFERENCE)})
    (out / "manifest.json").write_text(json.dumps(entries, indent=1) + "\n")
    for e in entries:
        print(f"{e['name']:24s} oscillates={e['oscillates']} {e['truth']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
