"""Which configuration values go with which findings, in a group of ten or more runs (a sweep).

For every configuration key whose value differs between the group's runs and every finding some run
of the group has, the runs are split by the key's value — for a number, every "at least" and "at most"
cut between two of its values; otherwise each value on its own — and a split is reported when the
runs on its side mostly have the finding (at least ``MIN_SHARE`` of them, and at least two) and the
runs outside it mostly do not (at most ``MAX_OUTSIDE_SHARE``). Of the cuts for one key and finding,
the one that separates best is kept (the most runs inside at the purest split). The counts go with
it: "every run with params.lr ≥ 0.3 has loss-oscillation (3 of 3; 0 of 9 others)".

Pure (no tracker import): it takes each run's configuration values and its problem ids.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .schema import HealthReport

MIN_RUNS = 10  # a smaller group is not a sweep: too few runs to tell a pattern from chance
MIN_SHARE = 0.8  # of the runs inside the split that have the finding
MAX_OUTSIDE_SHARE = 0.2  # of the runs outside it that have it too
MIN_INSIDE = 2  # one run is an anecdote
# The group values that are a run's configuration (a sweep's axes), not its labels.
CONFIG_PREFIXES = ("params.", "config.")


@dataclass(frozen=True)
class Association:
    """A configuration range and the finding that goes with it, with the counts."""

    key: str
    finding: str
    relation: str  # ">=", "<=" or "="
    value: str
    inside_with: int  # runs in the range that have the finding
    inside: int
    outside_with: int
    outside: int

    @property
    def range(self) -> str:
        return f"{self.key} {'≥' if self.relation == '>=' else '≤' if self.relation == '<=' else '='} {self.value}"

    def sentence(self) -> str:
        share = "every run" if self.inside_with == self.inside else f"{self.inside_with} of {self.inside} runs"
        return (f"{share} with {self.range} has {self.finding} ({self.inside_with} of {self.inside}; "
                f"{self.outside_with} of {self.outside} others)")

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "finding": self.finding, "relation": self.relation, "value": self.value,
                "range": self.range, "inside_with": self.inside_with, "inside": self.inside,
                "outside_with": self.outside_with, "outside": self.outside, "text": self.sentence()}


@dataclass(frozen=True)
class SweepSummary:
    """One group's patterns."""

    group: str  # the group's label
    runs: int
    associations: tuple[Association, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "runs": self.runs, "associations": [a.to_dict() for a in self.associations]}


def summarize(group: str, members: Sequence[tuple[Mapping[str, str], frozenset[str]]],
              min_runs: int = MIN_RUNS) -> SweepSummary | None:
    """The group's summary from each run's ``(config values, problem ids)``; None below ``min_runs``."""
    if len(members) < min_runs:
        return None
    findings = sorted({f for _, found in members for f in found})
    keys = sorted({k for values, _ in members for k in values})
    out: list[Association] = []
    for key in keys:
        values = [values.get(key) for values, _ in members]
        distinct = {v for v in values if v is not None}
        if len(distinct) < 2 or len(distinct) == len(members):
            continue  # the same for every run, or a label of each run (its name, its seed): no pattern to find
        numbers = _numbers(values)
        for finding in findings:
            has = [finding in found for _, found in members]
            best = _best_cut(key, finding, values, numbers, has)
            if best is not None:
                out.append(best)
    out.sort(key=lambda a: (-a.inside_with / a.inside + a.outside_with / max(a.outside, 1), -a.inside, a.key, a.finding))
    return SweepSummary(group, len(members), tuple(out))


def summarize_groups(reports: Sequence[HealthReport], keys: Mapping[str, Any],
                     values: Mapping[str, Mapping[str, str]]) -> tuple[SweepSummary, ...]:
    """Per group of ten or more runs (``keys``: run id → group key, a tuple of (key, value)), which
    configuration values (``values``: run id → its ``params.*`` / ``config.*`` values) go with which
    findings."""
    groups: dict[Any, list[HealthReport]] = {}
    for report in reports:
        key = keys.get(report.run.id)
        if key is not None:
            groups.setdefault(key, []).append(report)
    out = []
    for key, members in groups.items():
        grouped_by = {k for k, _ in key}
        rows = [({k: v for k, v in values.get(r.run.id, {}).items() if k.startswith(CONFIG_PREFIXES) and k not in grouped_by},
                 frozenset(f.id for f in r.problems)) for r in members]
        summary = summarize(", ".join(f"{k}={v}" for k, v in key), rows)
        if summary is not None:
            out.append(summary)
    return tuple(out)


def _numbers(values: Sequence[str | None]) -> list[float] | None:
    try:
        out = [float(v) for v in values if v is not None]
    except ValueError:
        return None
    return out if len(out) == len(values) and all(math.isfinite(x) for x in out) else None


def _best_cut(key, finding, values, numbers, has) -> Association | None:
    candidates = []
    if numbers is not None:
        for cut in sorted(set(numbers)):
            for rel, inside in ((">=", [x >= cut for x in numbers]), ("<=", [x <= cut for x in numbers])):
                candidates.append((rel, _fmt(cut), inside))
    else:
        for value in sorted({v for v in values if v is not None}):
            candidates.append(("=", value, [v == value for v in values]))
    best = None
    for rel, shown, inside in candidates:
        n_in = sum(inside)
        n_out = len(inside) - n_in
        if n_in < MIN_INSIDE or n_out == 0:
            continue
        with_in = sum(1 for i, h in zip(inside, has) if i and h)
        with_out = sum(1 for i, h in zip(inside, has) if not i and h)
        if with_in / n_in < MIN_SHARE or with_out / n_out > MAX_OUTSIDE_SHARE:
            continue
        a = Association(key, finding, rel, shown, with_in, n_in, with_out, n_out)
        score = (with_in / n_in - with_out / n_out, with_in)
        if best is None or score > best[0]:
            best = (score, a)
    return best[1] if best else None


def _fmt(x: float) -> str:
    return f"{x:g}"
