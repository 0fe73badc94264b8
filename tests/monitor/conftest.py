"""Markers for the framework tests, and BLAS pinned to one thread as the corpus generator does.

``extra_torch`` / ``extra_hf`` / ``extra_lightning`` / ``extra_keras`` tests train with the real
framework. Where it is not installed they are skipped with the pip line to run them — except in
CI (``CI`` set), where ``.ci/run`` installs the extras: there a missing framework fails the test
instead of hiding it behind a skip.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

EXTRAS = {
    "extra_torch": (),  # torch alone: the monitor on tensors from a real torch loop
    "extra_hf": ("transformers", "accelerate"),
    "extra_lightning": ("lightning",),
    "extra_keras": ("keras",),
}
PIP = "pip install torch==2.13.0 transformers accelerate lightning keras"


def pytest_configure(config):
    for marker, modules in EXTRAS.items():
        config.addinivalue_line("markers", f"{marker}: trains with {', '.join(('torch', *modules))}; {PIP}")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CI"):
        return
    missing = {m: [mod for mod in ("torch", *mods) if importlib.util.find_spec(mod) is None]
               for m, mods in EXTRAS.items()}
    for item in items:
        for marker, gone in missing.items():
            if gone and item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=f"{', '.join(gone)} not installed: {PIP}"))
