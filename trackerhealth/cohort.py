"""Runs compared within their group: the group key, the baseline, and the group-aware analysis.

A run is analysed alone first (:func:`trackerhealth.engine.analyze`); its :func:`profile` and that
report's status are all the group needs. Runs whose group key is the same form a group; each group
of two or more gets a baseline (:func:`choose_baseline`), and each of its runs is analysed again
with a :class:`~trackerhealth.baseline.Cohort` that carries the baseline's profile, so
``slow-convergence`` can measure the run against it and ``baseline-regression`` can say it ended
worse. A group of one has no comparison, and its report says so.

Pure: histories and reports in, reports out (no tracker import). The scan loop uses the same
pieces with its own fetching (:mod:`trackerhealth.scan`); ``analyze --group-by`` and the evidence
scripts call :func:`analyze_groups`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from .baseline import DRAWN_ROLES, HEALTHIEST, MARKED, Cohort, RunProfile, curve, final_level, finite_median
from . import config_facts
from .loss_setting import loss_setting, split_by_setting
from .config import Config
from .engine import analyze
from .roles import RoleView, resolve
from .schema import CRITICAL, OK, WARNING, HealthReport, RunHistory, RunRef

GroupKey = tuple[tuple[str, str], ...]
# A run's state that can be a baseline: finished, or not said (a local file). Running, crashed and
# failed runs never are: their curve stops where the trouble started.
FINISHED_STATES = (None, "", "finished", "FINISHED")


NO_KEY = "no group: the run has none of the group-by keys"
GROUP_OF_ONE = "a group of one: no other run to compare with"


# The statuses a baseline may have, healthiest first.
_STATUS_ORDER = (OK, WARNING, CRITICAL)


class GroupingError(ValueError):
    """A --group-by key or --baseline id that cannot work (the message names the fix)."""


def group_key(values: Mapping[str, str], keys: Sequence[str]) -> GroupKey | None:
    """The tuple of the run's values for ``keys``; None when it has none of them (a group of its own)."""
    if not any(k in values for k in keys):
        return None
    return tuple((k, str(values.get(k, "(none)"))) for k in keys)


def group_sizes(keys: Mapping[str, GroupKey | None]) -> dict[GroupKey, int]:
    """How many runs each group key has (``keys``: run id → group key; None counts for none)."""
    sizes: dict[GroupKey, int] = {}
    for key in keys.values():
        if key is not None:
            sizes[key] = sizes.get(key, 0) + 1
    return sizes


def grouped_ids(keys: Mapping[str, GroupKey | None]) -> set[str]:
    """The run ids whose group has two or more runs."""
    sizes = group_sizes(keys)
    return {run_id for run_id, key in keys.items() if key is not None and sizes[key] > 1}


def alone(key: GroupKey | None) -> Cohort:
    """The cohort of a run compared with nothing: a group of one, or no group key at all."""
    return Cohort(key, 1, reason=GROUP_OF_ONE) if key is not None else Cohort((), 1, reason=NO_KEY)


def marked_runs(wanted: Sequence[str], refs: Sequence[RunRef]) -> tuple[set[str], set[str]]:
    """``(ids of the runs named in wanted by id or name, the names that match no run)``."""
    wanted = set(wanted)
    named = {r.id for r in refs if r.id in wanted or r.name in wanted}
    return named, wanted - {r.id for r in refs} - {r.name for r in refs}


def default_group_key(values: Mapping[str, str], keys: Sequence[str]) -> GroupKey | None:
    """The first of ``keys`` (a tracker's default order, e.g. W&B's group → sweep) the run has."""
    for k in keys:
        if values.get(k):
            return ((k, str(values[k])),)
    return None


FILE_KEYS = ("folder", "config.NAME", "params.NAME", "COLUMN")


def file_values(ref: RunRef, history: RunHistory | None = None) -> dict[str, str]:
    """What ``analyze --group-by`` can name for a local run: ``folder`` (the folder its file is in);
    ``config.NAME`` / ``params.NAME`` for every value of its logged config (Lightning's
    hparams.yaml, an MLflow run folder's params, a W&B run folder's config, HF's trainer args, a
    table's text column with one value per run); and a bare ``NAME`` for those same values and for
    every logged metric that holds one value for the whole run (a ``batch_size`` column)."""
    values: dict[str, str] = {}
    if history is not None:
        for key in history.keys():
            v = history[key].values
            if len(v) and np.all(v == v[0]):
                values[key] = f"{float(v[0]):g}"
    for name, value in ref.config.items():
        values[f"config.{name}"] = values[f"params.{name}"] = values[name] = str(config_facts.unwrap(value))
    if ref.source:
        values["folder"] = str(Path(ref.source).parent)
    return values


def check_file_keys(keys: Sequence[str]) -> None:
    """Raise :class:`GroupingError` for a key ``analyze`` cannot group local runs by."""
    for key in keys:
        if not key or key.endswith(".") or (key.startswith(("config.", "params.")) and not key.split(".", 1)[1]):
            raise GroupingError(f"--group-by {key!r}: local runs group by {', '.join(FILE_KEYS)} "
                                "(e.g. --group-by folder, --group-by config.model, or --group-by model for a column)")


def _check_keys_found(keys: Sequence[str], values: Mapping[str, Mapping[str, str]]) -> None:
    """A key that no run has is a typo, not a grouping: name what the runs do have."""
    have = sorted({k for v in values.values() for k in v if not k.startswith(("config.", "params."))})
    for key in keys:
        if not any(key in v for v in values.values()):
            shown = ", ".join(have[:12]) + (" …" if len(have) > 12 else "")
            raise GroupingError(f"--group-by {key}: no run has it; these runs can be grouped by {shown or 'folder'} "
                                "(config.NAME and params.NAME for their config)")


def profile(view: RoleView, report: HealthReport, *, finished: bool = True, marked: bool = False) -> RunProfile:
    """A run reduced to what its siblings are compared against (see :class:`RunProfile`)."""
    val = view.series("val_loss")
    val = val.finite() if val is not None else None
    has_val = val is not None and len(val) > 0
    return RunProfile(
        run_id=view.ref.id, name=view.ref.name, loss_key=view.key("train_loss"), loss=curve(view.series("train_loss")),
        val_best=float(np.min(val.values)) if has_val else None,
        val_final=final_level(val.values) if has_val else None,
        step_seconds=finite_median(view.series("step_time")), throughput=finite_median(view.series("throughput")),
        batch_size=_batch_size(view.ref.config),
        grad_norm=finite_median(view.series("grad_norm")), status=report.status, finished=finished, marked=marked,
        loss_setting=loss_setting(view.ref.config),
        curves=tuple((role, c) for role in DRAWN_ROLES if (c := curve(view.series(role))) is not None))


def choose_baseline(members: Sequence[RunProfile]) -> tuple[RunProfile | None, str, str]:
    """``(baseline, rule, reason)`` for one group.

    The rule, in order: a run the user marked (the first listed, when several are); else the
    healthiest finished run whose loss curve was read: the least severe status of its own analysis
    (``ok``, then ``warning``, then ``critical``; a run whose analysis failed or whose loss was not
    recognised never is one), then the lowest final val loss when every run of that status logged
    one, else the lowest final training loss (the median of the last tenth of the run); ties go to
    the run listed first. No such run: no baseline, and the reason says so."""
    marked = [p for p in members if p.marked]
    if marked:
        return marked[0], MARKED, ""
    candidates = [p for p in members if p.finished and p.status in _STATUS_ORDER and p.loss is not None]
    if not candidates:
        return None, "", f"no finished run of the {len(members)} in the group was analysed with a training loss: nothing to compare with"
    status = min((p.status for p in candidates), key=_STATUS_ORDER.index)
    healthiest = [p for p in candidates if p.status == status]
    among = f"{len(healthiest)} finished runs with status {status}"
    if all(p.val_final is not None for p in healthiest):
        return min(healthiest, key=lambda p: p.val_final), f"{HEALTHIEST}: lowest final val loss of {among}", ""
    return min(healthiest, key=lambda p: p.loss.final), f"{HEALTHIEST}: lowest final training loss of {among}", ""


def cohorts(profiles: Sequence[RunProfile], keys: Mapping[str, GroupKey | None]) -> dict[str, Cohort]:
    """Each grouped run's :class:`Cohort`, from the profiles of the runs with a group key (by run id).

    A group whose runs define their loss differently (:mod:`trackerhealth.loss_setting`: a
    temperature, a loss term's weight) is compared in parts, one per loss setting: each part gets
    its own baseline, and its group key carries the setting (``temperature=0.5``), so a run is
    never called slow for not reaching a loss that another function computes."""
    groups: dict[GroupKey, list[RunProfile]] = {}
    out: dict[str, Cohort] = {}
    for p in profiles:
        groups.setdefault(keys[p.run_id], []).append(p)
    for key, members in groups.items():
        by_id = {p.run_id: p for p in members}
        parts = split_by_setting({p.run_id: p.loss_setting for p in members})
        for setting, ids in parts.items():
            part = [by_id[i] for i in ids]
            cohort = _part_cohort(key, setting, part, len(members))
            for p in part:
                out[p.run_id] = dataclasses.replace(cohort, batch_size=p.batch_size)
    return out


def _part_cohort(key: GroupKey, setting: tuple[tuple[str, str], ...], part: Sequence[RunProfile], group_size: int) -> Cohort:
    """The cohort of one loss setting's runs within a group of ``group_size``."""
    full_key = tuple(key) + tuple(setting)
    if len(part) > 1:
        return Cohort(full_key, len(part), *choose_baseline(part))
    if len(part) == group_size:
        return alone(full_key)
    words = ", ".join(f"{k}={v}" for k, v in setting)
    return Cohort(full_key, 1, reason=f"the only run of its group of {group_size} with {words}: runs whose "
                                      "loss is defined otherwise end at other levels and are not compared")


def analyze_groups(histories: Sequence[RunHistory], config: Config | None,
                   key_of: Callable[[RunHistory], GroupKey | None], baseline_ids: Sequence[str] = ()) -> list[HealthReport]:
    """Every history analysed with its group: alone first, then again with its cohort when it is in a
    group of two or more. ``baseline_ids`` marks baselines (a run id or name)."""
    config = config or Config()
    keys = {h.ref.id: key_of(h) for h in histories}
    grouped = grouped_ids(keys)
    marks, unknown = marked_runs(baseline_ids, [h.ref for h in histories])
    if unknown:
        raise GroupingError(f"--baseline {', '.join(sorted(unknown))}: no such run among the {len(histories)} read; "
                            "pass a run id or name that the listing shows")
    # Alone first (only the runs with siblings: a group of one is analysed once, below).
    profiles = []
    for h in histories:
        if h.ref.id in grouped:
            view = resolve(h, config.roles, config.units)
            profiles.append(profile(view, analyze(h, config), finished=h.ref.state in FINISHED_STATES,
                                    marked=h.ref.id in marks))
    found = cohorts(profiles, keys)
    return [analyze(h, config, cohort=found.get(h.ref.id) or alone(keys[h.ref.id])) for h in histories]


def _batch_size(config: Mapping) -> int | None:
    """Samples per optimizer step as the run's config says (None: not said, or unreadable)."""
    try:
        found = config_facts.facts(config).batch_size
    except Exception:  # noqa: BLE001 - a config it cannot read compares steps as steps, never fails the run
        return None
    return int(found.value) if found is not None else None


def analyze_files(histories: Sequence[RunHistory], config: Config | None, group_by: Sequence[str],
                  baselines: Sequence[str] = ()) -> tuple[list[HealthReport], tuple]:
    """Local runs analysed with their groups (``analyze`` and ``report`` with ``--group-by``):
    the reports and the sweep summaries. Raises :class:`GroupingError` for a key or baseline that
    cannot work."""
    from .sweeps import summarize_groups

    check_file_keys(group_by)
    values = {h.ref.id: file_values(h.ref, h) for h in histories}
    _check_keys_found(group_by, values)
    keys = {run_id: group_key(v, group_by) for run_id, v in values.items()}
    reports = analyze_groups(histories, config, lambda h: keys[h.ref.id], baselines)
    return reports, summarize_groups(reports, keys, values)

