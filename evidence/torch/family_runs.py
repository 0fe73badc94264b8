"""The bookkeeping every family's run registry shares: what a run's logged config says about the
fault injected into it, the taps and fit results kept for its truth check, and its manifest entry.

Each family's ``Runs.train`` builds its own model, data and loss and trains with
:func:`evidence.torch.common.fit`; the rest — the same for every family — is here, so a manifest
entry has one layout whichever family wrote it.
"""

from __future__ import annotations

from pathlib import Path

from . import truth
from ._pipeline import loader_batches
from .common import NAMES, minibatches


def manifest_entry(family: str, name: str, model: str, dataset: str, style: str, file: str, *, faults: list[str],
                   intended: list[str], cause: str, twin: str | None, seed: int, config: dict, truth: dict,
                   description: str, **extra) -> dict:
    """One run's entry in ``evidence/torch/manifest/<family>.json``."""
    return {"name": name, "family": family, "model": model, "dataset": dataset, "style": style, "file": file,
            "faults": faults, "intended": intended, "cause": cause, "twin": twin, "seed": seed, "config": config,
            "truth": truth, "description": description, **extra}


def describe_injections(logged: dict, *, corrupt=None, before_step=None, **row_ranges) -> dict:
    """``logged`` (the config a run logs) with the faults injected into its data and schedule:
    each row range given (``bad_shard_rows=(640, 704)``; None: not injected) as a list, then the
    corruption's and the LR spike's labels."""
    for key, rows in row_ranges.items():
        if rows is not None:
            logged[key] = list(rows)
    if corrupt is not None:
        logged["corruption"] = corrupt.label
    if before_step is not None:
        logged["lr_spike"] = before_step.label
    return logged


class FamilyRuns:
    """Trains a family's runs (``train``, per family), keeps each run's in-memory taps and fit result
    for its truth check, and collects the manifest entries. Subclasses set ``family`` and ``dataset``."""

    family: str
    dataset: str

    def __init__(self, root: Path):
        self.root, self.taps, self.results, self.entries = root, {}, {}, []

    def keep(self, name: str, log, result) -> str:
        """Close the run's log and keep what its truth check reads; returns the run's file."""
        file = log.close()
        self.taps[name], self.results[name] = log.logged, result
        return file

    def model_of(self, cfg: dict) -> str:
        return cfg["model"]

    def add(self, name, style, file, cfg, *, faults, intended, cause, twin, truth_measures, description, **extra):
        self.entries.append(manifest_entry(self.family, name, self.model_of(cfg), self.dataset, style, file,
                                           faults=faults, intended=intended, cause=cause, twin=twin, seed=cfg["seed"],
                                           config=cfg, truth=truth_measures, description=description, **extra))

    def add_unlabelled(self, name, style, file, cfg, *, cause, description):
        """A run meant to be sane (``cause`` "twin" or "healthy"): no fault, no twin, no truth measures."""
        self.add(name, style, file, cfg, faults=[], intended=[], cause=cause, twin=None, truth_measures={},
                 description=description)

    def add_checked(self, name, style, file, cfg, *, intended, ok, measures, cause, twin, loss_key, description):
        """A fault run labelled by what its twin check found (``ok``, ``measures``): the intended faults when
        confirmed, else what :func:`.truth.labels_from_check` makes of it."""
        got, also, measures = truth.labels_from_check(intended, ok, measures, self.taps[name], self.taps[twin], loss_key)
        extra = {"also_acceptable": also} if also else {}
        self.add(name, style, file, cfg, faults=got, intended=intended, cause=cause, twin=twin, truth_measures=measures,
                 description=description, **extra)


def batches_for(x, y, cfg: dict, default_delay_s: float):
    """The run's training batches: in memory (``loader: memory``), else through a real DataLoader —
    ``fast`` (a TensorDataset) or ``slow_io`` (each sample takes ``io_delay_s`` to arrive)."""
    if cfg["loader"] == "memory":
        return minibatches(x, y, cfg["batch_size"], cfg["seed"], cfg["shuffle"])
    return loader_batches(x, y, cfg["batch_size"], cfg["seed"], cfg["loader"], num_workers=cfg["num_workers"],
                          delay_s=cfg.get("io_delay_s", default_delay_s), shuffle=cfg["shuffle"])


def batches_per_epoch(cfg: dict, n_train: int) -> int:
    """Batches in one epoch of ``n_train`` samples at ``cfg["batch_size"]`` (the last one partial)."""
    return -(-n_train // cfg["batch_size"])


def shard_steps_for(cfg: dict, batch_ids: tuple[int, ...], n_train: int) -> list[float]:
    """The 1-based steps (after the first epoch) that meet the shard's batches without shuffling."""
    n = batches_per_epoch(cfg, n_train)
    return [float(ep * n + k + 1) for ep in range(1, 1000) for k in batch_ids if ep * n + k + 1 <= cfg["max_steps"]]


def with_val_extras(emit, val_key: str, extras):
    """``emit`` with ``extras()`` (the metrics one validation pass measured beside its loss: an accuracy, a MAE)
    added to the row that holds ``val_key``, so they land on the evaluation's step."""
    def log(metrics: dict, step):
        emit({**metrics, **extras()} if val_key in metrics else metrics, step)
    return log


class TwinChecks:
    """What a family's ``build`` does around its training: its twins, and each fault run trained and labelled by
    its check against a twin (``check(fault_tap, twin_tap, name, twin_name) -> (ok, measures)``).

    Metric names are W&B's whatever the file format a run is written in: the twins log them so, and the truth
    compares like with like. ``only`` (``generate --only``) skips the faults not named."""

    def __init__(self, runs: FamilyRuns, only: set[str] | None, default_twin: str, naming: str = "wandb"):
        self.runs, self.only, self.default_twin, self.naming = runs, only, default_twin, naming
        names = NAMES[naming]
        self.key, self.val_key, self.grad_key = names["loss"], names["val_loss"], names["grad_norm"]

    def wanted(self, *names: str) -> bool:
        return self.only is None or any(n in self.only for n in names)

    def twin(self, name: str, style: str, over: dict, description: str, **kw) -> None:
        file, cfg = self.runs.train(name, style, self.naming, over, **kw)
        self.runs.add_unlabelled(name, style, file, cfg, cause="twin", description=description)

    def fault(self, name: str, cause: str, intended: list[str], over: dict, check, description: str,
              style: str = "wandb", twin_name: str | None = None, **kw) -> None:
        if not self.wanted(name):
            return
        twin_name = twin_name or self.default_twin
        file, cfg = self.runs.train(name, style, self.naming, over, **kw)
        ok, measures = check(self.runs.taps[name], self.runs.taps[twin_name], name, twin_name)
        self.runs.add_checked(name, style, file, cfg, intended=intended, ok=ok, measures=measures, cause=cause,
                              twin=twin_name, loss_key=self.key, description=description)

    # The three twin checks most faults use, on the family's loss and gradient norm.
    def oscillation(self, tap, twin, *_):
        return truth.confirm_oscillation(tap, twin, self.key)

    def slowness(self, tap, twin, *_):
        return truth.confirm_slow(tap, twin, self.key)

    def explosion(self, tap, twin, *_):
        return truth.confirm_explosion(tap, twin, self.grad_key, self.key)
