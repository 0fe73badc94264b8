"""Lightning's ``hparams.yaml``: the hyper-parameters ``CSVLogger`` writes next to ``metrics.csv``.

A run's config (``RunRef.config``) lets trackerhealth name the optimizer, LR, epsilon and batch size
in a finding's evidence (:mod:`trackerhealth.config_facts`). Read with PyYAML's ``safe_load``: the
file can hold ``!!python/object`` tags for hyper-parameters that were objects, and building those
would run code from the log; such a file is skipped with a note. PyYAML comes with Lightning, but
is not a dependency of trackerhealth: without it the file is skipped with a note too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

NAME = "hparams.yaml"


def sibling_hparams(metrics_file: Path) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The hyper-parameters beside a Lightning ``metrics.csv`` (``{}`` when there are none) and
    notes on why a file that is there could not be used."""
    if not metrics_file.name.lower().startswith("metrics"):
        return {}, ()
    return yaml_params(metrics_file.parent / NAME, "Lightning's hyper-parameters")


def yaml_params(path: Path, what: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The top-level mapping of a hyper-parameter YAML file (``{}`` when there is none) and notes on
    why a file that is there could not be used; ``what`` names the file's contents in those notes."""
    if not path.is_file():
        return {}, ()
    try:
        import yaml
    except ImportError:
        return {}, (f"{path}: not read (install PyYAML to use {what} in the evidence)",)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {}, (f"{path}: not read as plain YAML ({first}); the run's hyper-parameters are not used",)
    if not isinstance(doc, dict):
        return {}, ()
    return {str(k): v for k, v in doc.items()}, ()
