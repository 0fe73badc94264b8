"""Run every diagnosis and the scorecard on one history.

A diagnosis that raises becomes an ``error`` finding for that run only: one bug or one odd run
never fails a scan.
"""

from __future__ import annotations

import traceback

import numpy as np

from . import diagnoses, scorecard
from .config import Config
from .roles import resolve
from .schema import ERROR, Finding, HealthReport, RunHistory


def analyze(history: RunHistory, config: Config | None = None) -> HealthReport:
    with np.errstate(all="ignore"):  # overflow in a 1e308 loss is evidence, not a warning to print
        return _analyze(history, config or Config())


def _analyze(history: RunHistory, config: Config) -> HealthReport:
    view = resolve(history, config.roles, config.units)
    findings: list[Finding] = []
    for diag_id, diag in diagnoses.REGISTRY.items():
        if diag_id in config.disable:
            continue
        try:
            finding = diag.run(view, config.thresholds_for(diag_id))
        except Exception as exc:  # noqa: BLE001 - reported as data, by design
            last = traceback.extract_tb(exc.__traceback__)[-1]
            finding = Finding(diag_id, ERROR, diag.title,
                              f"diagnosis failed: {type(exc).__name__}: {exc} ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})")
        findings.append(finding)
    score, dims = scorecard.score_run(view, findings, config.thresholds_for(scorecard.ID))
    return HealthReport(history.ref, score, dims, tuple(findings), history.notes, history.n_points, history.last_step)
