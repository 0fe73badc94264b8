"""Run role resolution, every diagnosis and the scorecard on one history.

Each stage is isolated per run: a stage that raises is recorded on that run's report as a
:class:`~trackerhealth.schema.StageFailure` (``roles``, ``diagnosis:<id>``, ``explain``, ``config``,
``scorecard``), which
makes its status ``error``; the stages after it still run and their findings are still reported.
One bug or one odd run never fails a scan, and never reads as health. A run whose training loss was
not recognised gets status ``unknown``, with the keys it logged and how to map one.
"""

from __future__ import annotations

import traceback

import numpy as np

from . import config_facts, diagnoses, explain, scorecard
from .baseline import Cohort
from .config import Config
from .roles import RoleView, Roles, resolve
from .schema import (
    DIMENSIONS,
    ERROR,
    LOSS_KEY_HINT,
    SKIPPED,
    DimensionScore,
    Finding,
    HealthReport,
    RunHistory,
    StageFailure,
)

# How many of a run's keys an `unknown` reason lists: enough to spot the loss, short enough to read.
SHOWN_KEYS = 10


def analyze(history: RunHistory, config: Config | None = None, cohort: Cohort | None = None) -> HealthReport:
    """The run's report; ``cohort`` (its group and baseline, :mod:`trackerhealth.cohort`) lets the
    diagnoses compare it with the group's baseline."""
    with np.errstate(all="ignore"):  # overflow in a 1e308 loss is evidence, not a warning to print
        return _analyze(history, config or Config(), cohort)


def _analyze(history: RunHistory, config: Config, cohort: Cohort | None) -> HealthReport:
    failures: list[StageFailure] = []
    try:
        view = resolve(history, config.roles, config.units)
        view.cohort = cohort
    except Exception as exc:  # noqa: BLE001 - reported as data, by design
        failures.append(StageFailure("roles", _describe(exc)))
        view = RoleView(history, Roles(), cohort)  # no roles: every diagnosis skips, with its reason

    findings: list[Finding] = []
    for diag_id, diag in diagnoses.REGISTRY.items():
        if diag_id in config.disable:
            continue
        try:
            finding = diag.run(view, config.thresholds_for(diag_id))
        except Exception as exc:  # noqa: BLE001 - reported as data, by design
            message = _describe(exc)
            failures.append(StageFailure(f"diagnosis:{diag_id}", message))
            finding = Finding(diag_id, ERROR, diag.title, f"diagnosis failed: {message}")
        findings.append(finding)

    # The logged config (optimizer, LR, epsilon, batch) turns slow-convergence's back-loaded note into a warning
    # when it names a setting that slows every step; otherwise it never changes a level.
    facts = None
    try:
        facts = config_facts.facts(history.ref.config)
        findings = list(config_facts.promote(findings, facts, config.thresholds_for(config_facts.ID)))
    except Exception as exc:  # noqa: BLE001 - reported as data, by design
        failures.append(StageFailure("config", _describe(exc)))
    # One cause, one finding: a symptom a stronger finding explains is marked, not tagged again.
    try:
        findings = list(explain.explain(findings, view, config.thresholds_for(explain.ID)))
    except Exception as exc:  # noqa: BLE001 - reported as data, by design
        failures.append(StageFailure("explain", _describe(exc)))
    # ... and sharpens a problem's evidence with the settings behind it.
    if facts is not None:
        try:
            findings = list(config_facts.corroborate(findings, facts, config.thresholds_for(config_facts.ID)))
        except Exception as exc:  # noqa: BLE001 - reported as data, by design
            failures.append(StageFailure("config", _describe(exc)))

    try:
        score, dims = scorecard.score_run(view, findings, config.thresholds_for(scorecard.ID))
    except Exception as exc:  # noqa: BLE001 - reported as data, by design
        message = _describe(exc)
        failures.append(StageFailure("scorecard", message))
        score, dims = None, tuple(DimensionScore(d, None, reason=f"the scorecard failed: {message}") for d in DIMENSIONS)

    loss_key = view.key("train_loss") if view.series("train_loss") is not None else None
    unjudged = _unjudged(loss_key, findings)
    if failures:
        reason = "; ".join(f.describe() for f in failures)
    elif loss_key is None:
        reason = _no_loss_reason(history, config)
    else:
        reason = ""
    # The view's notes: the reader's, and what the roles derived (a loss summed from its logged terms).
    return HealthReport(history.ref, score, tuple(dims), tuple(findings), view.history.notes, history.n_points,
                        history.last_step, loss_key, tuple(failures), reason,
                        cohort.to_dict() if cohort is not None else None, unjudged)


# The diagnoses that judge the loss' course: whether it learns at all, and how fast. When each of
# them that ran had to skip (eight epoch-level points, a loss that is not positive), nothing says
# the run is healthy, so it must not read as `ok`.
# loss-oscillation first: its reason is quoted, as it needs the fewest points.
TREND_DIAGNOSES = ("loss-oscillation", "slow-convergence")


def _unjudged(loss_key: str | None, findings: list[Finding]) -> str:
    """Why the recognised training loss could not be judged, or "" when it was."""
    trend = [f for diag_id in TREND_DIAGNOSES for f in findings if f.id == diag_id]
    if loss_key is None or not trend or any(f.level != SKIPPED for f in trend):
        return ""
    return f"the training loss '{loss_key}' was read but could not be judged: {trend[0].message}"


def _describe(exc: BaseException) -> str:
    """The exception and where it was raised: enough to file a bug from a report."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" ({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
    return text


def _no_loss_reason(history: RunHistory, config: Config) -> str:
    keys = [k for k in history.keys() if len(history[k])]
    mapped = config.roles.get("train_loss")
    if not keys:
        return f"no training loss recognised: the run logged no metric values; {LOSS_KEY_HINT}"
    shown = ", ".join(keys[:SHOWN_KEYS]) + (f", … ({len(keys) - SHOWN_KEYS} more)" if len(keys) > SHOWN_KEYS else "")
    if mapped is not None:
        return f"the training loss is mapped to {mapped!r}, but the run logged no values under that key; keys seen: {shown}"
    return f"no training loss recognised among the run's {len(keys)} metric key(s): {shown}; {LOSS_KEY_HINT}"
