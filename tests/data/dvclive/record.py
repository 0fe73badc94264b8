"""Writes ``overfit/``: a real DVCLive folder of a real torch training that overfits (the reader's fixture).

    python -m venv /tmp/dvc && /tmp/dvc/bin/pip install dvclive==3.49.1 torch==2.13.0 scikit-learn
    /tmp/dvc/bin/python tests/data/dvclive/record.py

An MLP on 120 of scikit-learn's digits (no weight decay, no dropout, 60 epochs of Adam at 3e-3) fits its
training rows while its loss on 600 held-out rows bottoms out and climbs; DVCLive logs each epoch's mean
train loss, the eval loss and accuracy, and the params. Run once; the folder is committed (CI needs no
DVCLive and trains nothing). DVCLive is not a dependency of trackerhealth: only this script imports it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch
from dvclive import Live
from sklearn.datasets import load_digits

OUT = Path(__file__).resolve().parent / "overfit"
PARAMS = {"optimizer": "adam", "lr": 3e-3, "batch_size": 16, "epochs": 60, "n_train": 120, "seed": 0}


def main() -> None:
    torch.manual_seed(PARAMS["seed"])
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y)
    train_x, train_y = x[:PARAMS["n_train"]], y[:PARAMS["n_train"]]
    val_x, val_y = x[1000:1600], y[1000:1600]
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=PARAMS["lr"])
    loss_fn = torch.nn.CrossEntropyLoss()
    scratch = Path(tempfile.mkdtemp())
    cwd = os.getcwd()
    os.chdir(scratch)  # DVCLive writes dvc.yaml into the working folder: keep it out of the repository
    try:
        with Live(dir="dvclive", save_dvc_exp=False) as live:
            live.log_params(PARAMS)
            for _epoch in range(PARAMS["epochs"]):
                model.train()
                losses = []
                for idx in torch.randperm(len(train_x)).split(PARAMS["batch_size"]):
                    opt.zero_grad()
                    loss = loss_fn(model(train_x[idx]), train_y[idx])
                    loss.backward()
                    opt.step()
                    losses.append(loss.item())
                model.eval()
                with torch.no_grad():
                    logits = model(val_x)
                    live.log_metric("train/loss", sum(losses) / len(losses))
                    live.log_metric("eval/loss", loss_fn(logits, val_y).item())
                    live.log_metric("eval/acc", (logits.argmax(1) == val_y).float().mean().item())
                live.next_step()
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.copytree(scratch / "dvclive", OUT)
    finally:
        os.chdir(cwd)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
