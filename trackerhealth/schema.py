"""The common schema every adapter produces and every writer consumes.

A run is described by a :class:`RunRef`; its logged metrics by a columnar :class:`RunHistory`
(per metric key: sorted step, value and wall-time arrays). Analysis results are frozen dataclasses
(:class:`Evidence`, :class:`Finding`, :class:`DimensionScore`, :class:`StageFailure`,
:class:`HealthReport`) with ``to_dict()`` and ``from_dict()``:
``HealthReport.from_dict(report.to_dict(full=True)) == report``. Nothing here imports a tracker, a
plotting library or the analysis code.

A run's status (:attr:`HealthReport.status`) is ``ok`` only when its training loss was recognised
and every stage of its analysis ran: ``error`` when a stage failed, ``unknown`` when no training
loss was recognised, otherwise the worst finding's level. The ``--fail-on`` rule and the exit codes live in :mod:`trackerhealth.exit_codes`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

# Finding levels and run statuses. `skipped` is a finding level only (the diagnosis had nothing to
# look at); `unknown` is a run status only (no training loss recognised); `error` is both.
OK, WARNING, CRITICAL, SKIPPED, ERROR, UNKNOWN = "ok", "warning", "critical", "skipped", "error", "unknown"
STATUSES = (OK, WARNING, CRITICAL, ERROR, UNKNOWN)
# Healthiest first. A failed analysis ranks above every health level, never below `ok`, so nothing
# that takes the worst of these can read a failure as health.
LEVEL_RANK = {SKIPPED: -1, OK: 0, WARNING: 1, CRITICAL: 2, ERROR: 3}
# Run statuses by how bad they are: `unknown` is as bad as a warning (the run may be fine, but
# nothing says so), `error` is worse than any finding (the analysis itself did not finish).
STATUS_RANK = {OK: 0, WARNING: 1, UNKNOWN: 1, CRITICAL: 2, ERROR: 3}

DIMENSIONS = (
    "convergence_speed",
    "stability",
    "gradient_health",
    "resource_efficiency",
    "overfitting_risk",
)


@dataclass(frozen=True)
class RunRef:
    """Identifies one run in one tracker (or one local file).

    A run is identified by tracker, project, id, name, url and source. ``state``, ``updated_at``,
    ``config`` and ``tags`` are what the listing saw at that moment: they take no part in equality
    and are not written into the report (a scan's own tag write changes them, and a report that
    changed with them would be re-uploaded on every scan). An empty ``name`` reads as the id.
    """

    tracker: str
    project: str
    id: str
    name: str = ""
    state: str | None = field(default=None, compare=False)
    updated_at: float | None = field(default=None, compare=False)  # unix seconds
    url: str | None = None
    config: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    tags: tuple[str, ...] = field(default=(), compare=False)
    source: str | None = None  # the file or folder a local run was read from

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", self.id)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tracker": self.tracker, "project": self.project, "id": self.id, "name": self.name}
        if self.url is not None:
            out["url"] = self.url
        if self.source is not None:
            out["source"] = self.source
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunRef:
        """The inverse of :meth:`to_dict`; keys it does not know are ignored."""
        data = _mapping(data, "run")
        return cls(
            _required(data, "tracker", "run"),
            _required(data, "project", "run"),
            _required(data, "id", "run"),
            str(data.get("name") or ""),
            url=data.get("url"),
            source=data.get("source"),
        )


def _mapping(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what}: expected a JSON object, got {type(data).__name__}; pass the JSON that to_dict() wrote")
    return data


def _required(data: Mapping[str, Any], key: str, what: str) -> str:
    if key not in data:
        raise ValueError(f"{what}: the key {key!r} is missing; pass the JSON that to_dict() wrote")
    return str(data[key])


class Series(NamedTuple):
    """One metric: steps ascending (float64, may be fractional), values and wall times aligned."""

    steps: np.ndarray
    values: np.ndarray
    wall_times: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    def finite(self) -> Series:
        """The points whose value is finite."""
        mask = np.isfinite(self.values)
        if mask.all():
            return self
        return Series(self.steps[mask], self.values[mask], self.wall_times[mask])

    def between(self, start: float, end: float) -> Series:
        lo, hi = np.searchsorted(self.steps, [start, end], side="left")
        hi = np.searchsorted(self.steps, end, side="right")
        return Series(self.steps[lo:hi], self.values[lo:hi], self.wall_times[lo:hi])

    def scaled(self, factor: float) -> Series:
        return self if factor == 1.0 else Series(self.steps, self.values * factor, self.wall_times)


class RunHistory:
    """Columnar metric history of one run.

    Build it with :meth:`from_long` (rows ``step, key, value, wall_time`` in log order) or
    :meth:`from_series`. Keys keep the order in which they were first logged, which for per-layer
    metrics is the model's parameter order.
    """

    def __init__(self, ref: RunRef, series: Mapping[str, Series], notes: Iterable[str] = ()):
        self.ref = ref
        self._series: dict[str, Series] = dict(series)
        self.notes: tuple[str, ...] = tuple(notes)

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_long(
        cls,
        ref: RunRef,
        steps: Any,
        keys: Any,
        values: Any,
        wall_times: Any = None,
    ) -> RunHistory:
        """Build from long rows given in log order.

        Duplicate (key, step) pairs keep the last logged value; unsorted steps are sorted; a step
        counter that restarts inside a run (it drops back to or below where the metric started)
        is re-based onto the previous segment's end, so the run reads as one continuous timeline.
        """
        steps = np.asarray(steps)
        if steps.dtype.kind not in "iuf":
            steps = _to_float(steps)
        values = _to_float(values)
        n = len(steps)
        if wall_times is None:
            wall_times = np.full(n, np.nan)
        else:
            wall_times = _to_float(wall_times)
        if isinstance(keys, pd.Categorical):
            codes, uniques = np.asarray(keys.codes), list(keys.categories)
        else:
            codes, uniques = pd.factorize(np.asarray(keys, dtype=object), sort=False)
            uniques = list(uniques)
        if not (len(values) == n == len(codes) == len(wall_times)):
            raise ValueError("steps, keys, values and wall_times must have the same length")
        # Integer steps are all finite; only float steps (or unknown keys) need a mask.
        keep = codes >= 0 if steps.dtype.kind in "iu" else (codes >= 0) & np.isfinite(steps)
        if not keep.all():
            steps, values, wall_times, codes = steps[keep], values[keep], wall_times[keep], codes[keep]
        def blocks():
            for lo in range(0, len(codes), _BLOCK):
                sl = slice(lo, lo + _BLOCK)
                yield lo, codes[sl], (steps[sl], values[sl], wall_times[sl])

        return cls._from_blocks(ref, uniques, blocks)

    @classmethod
    def from_chunks(cls, ref: RunRef, key_names: list[str], chunks) -> RunHistory:
        """Build from chunks of long rows in log order — ``(steps, key_codes, values, wall_times)``
        with codes into ``key_names`` (e.g. Arrow record batches with one unified dictionary).

        Nothing is concatenated up front: a 10^7-row Parquet file is grouped row group by row group.
        Codes must be valid (>= 0) and steps finite; ``wall_times`` may be None.
        """
        chunks = list(chunks)  # two passes over them (count, then fill); each chunk is a view

        def blocks():
            lo = 0
            for steps, codes, values, wall in chunks:
                n = len(codes)
                wall = np.full(n, np.nan) if wall is None else wall
                for start in range(0, n, _BLOCK):
                    sl = slice(start, start + _BLOCK)
                    yield lo + start, codes[sl], (steps[sl], values[sl], wall[sl])
                lo += n

        return cls._from_blocks(ref, list(key_names), blocks)

    @classmethod
    def _from_blocks(cls, ref: RunRef, uniques: list, make_blocks) -> RunHistory:
        groups, first_row = _group_rows(make_blocks, len(uniques))
        series: dict[str, Series] = {}
        notes: list[str] = []
        first_seen = {}
        for code, (s, v, w) in groups.items():
            key = str(uniques[code])
            s, v, w, note = _normalize_steps(key, s, v, w)
            if note:
                notes.append(note)
            series[key] = Series(s, v, w)
            first_seen[key] = first_row[code]
        ordered = dict(sorted(series.items(), key=lambda kv: first_seen[kv[0]]))
        return cls(ref, ordered, notes)

    @classmethod
    def from_frame(cls, ref: RunRef, frame: pd.DataFrame) -> RunHistory:
        """Build from a long DataFrame with columns ``step, key, value`` and optionally ``wall_time``."""
        wall = frame["wall_time"].to_numpy() if "wall_time" in frame else None
        keys = frame["key"]
        # Categorical keys (e.g. a dictionary-encoded Parquet column) skip re-hashing every row.
        keys = keys.array if isinstance(keys.dtype, pd.CategoricalDtype) else keys.to_numpy()
        return cls.from_long(ref, frame["step"].to_numpy(), keys, frame["value"].to_numpy(), wall)

    @classmethod
    def from_series(cls, ref: RunRef, data: Mapping[str, tuple[Any, Any] | Series]) -> RunHistory:
        """Build from ``{key: (steps, values)}``; convenient in tests and the in-training monitor."""
        rows_s, rows_k, rows_v, rows_w = [], [], [], []
        for key, item in data.items():
            if isinstance(item, Series):
                s, v, w = item
            else:
                s, v = item[0], item[1]
                w = np.full(len(s), np.nan)
            rows_s.append(np.asarray(s, dtype=np.float64))
            rows_v.append(np.asarray(v, dtype=np.float64))
            rows_w.append(np.asarray(w, dtype=np.float64))
            rows_k.append(np.full(len(s), key, dtype=object))
        if not rows_s:
            return cls(ref, {})
        return cls.from_long(
            ref, np.concatenate(rows_s), np.concatenate(rows_k), np.concatenate(rows_v), np.concatenate(rows_w)
        )

    # -- access -----------------------------------------------------------------------------
    def keys(self) -> list[str]:
        return list(self._series)

    def get(self, key: str) -> Series | None:
        return self._series.get(key)

    def __getitem__(self, key: str) -> Series:
        return self._series[key]

    def __contains__(self, key: object) -> bool:
        return key in self._series

    def __len__(self) -> int:
        return len(self._series)

    @property
    def n_points(self) -> int:
        return sum(len(s) for s in self._series.values())

    @property
    def last_step(self) -> float | None:
        ends = [s.steps[-1] for s in self._series.values() if len(s)]
        return max(ends) if ends else None

    def with_ref(self, ref: RunRef) -> RunHistory:
        return RunHistory(ref, self._series, self.notes)

    def to_frame(self) -> pd.DataFrame:
        """Long DataFrame (``step, key, value, wall_time``), for writers and caches."""
        parts = [
            pd.DataFrame({"step": s.steps, "key": k, "value": s.values, "wall_time": s.wall_times})
            for k, s in self._series.items()
        ]
        if not parts:
            return pd.DataFrame({"step": [], "key": [], "value": [], "wall_time": []})
        return pd.concat(parts, ignore_index=True)


_BLOCK = 1 << 20


def _group_rows(make_blocks, n_codes: int):
    """Split blocks of rows by key code, keeping log order within each key.

    ``make_blocks()`` yields ``(first_row, codes, columns)`` afresh on each call. Pass one counts
    each key's rows; pass two sorts each block (~10^6 rows) on its narrow key code — a radix sort —
    and gathers it straight into preallocated per-key arrays. Block-sized temporaries stay in
    cache, and nothing is concatenated, so peak memory is one copy of the rows. Returns
    ``{code: (column, …)}`` and the first row of each code.
    """
    narrow = np.int16 if n_codes < 2**15 else np.int32 if n_codes < 2**31 else np.int64
    counts = np.zeros(n_codes, dtype=np.int64)
    n_columns = 0
    for _, codes, columns in make_blocks():
        counts += np.bincount(np.asarray(codes).astype(narrow, copy=False), minlength=n_codes)
        n_columns = len(columns)
    present = np.flatnonzero(counts).tolist()
    out = {code: tuple(np.empty(counts[code], dtype=np.float64) for _ in range(n_columns)) for code in present}
    filled = np.zeros(n_codes, dtype=np.int64)
    first_row: dict[int, int] = {}
    # numpy releases the GIL in these gathers: two threads keep both cores busy on big files.
    pool = ThreadPoolExecutor(2) if counts.sum() >= 4 * _BLOCK else None

    def gather(codes_here, order, ends, block_counts, columns):
        for code in codes_here:
            idx = order[ends[code] - block_counts[code]: ends[code]]
            at = filled[code]
            for dest, col in zip(out[code], columns):
                dest[at: at + len(idx)] = col[idx]

    try:
        for lo, codes, columns in make_blocks():
            block = np.asarray(codes).astype(narrow, copy=False)
            order = np.argsort(block, kind="stable")
            block_counts = np.bincount(block, minlength=n_codes)
            ends = np.cumsum(block_counts)
            here = np.flatnonzero(block_counts).tolist()
            for code in here:
                if code not in first_row:
                    first_row[code] = lo + int(order[ends[code] - block_counts[code]])
            if pool is None:
                gather(here, order, ends, block_counts, columns)
            else:
                # Each key writes only its own arrays, so the halves never touch the same memory.
                list(pool.map(lambda part: gather(part, order, ends, block_counts, columns), (here[0::2], here[1::2])))
            filled += block_counts
    finally:
        if pool is not None:
            pool.shutdown()
    return out, first_row


def _to_float(values: Any) -> np.ndarray:
    """Values as float64; strings that are not numbers become NaN (reported by the readers)."""
    arr = np.asarray(values)
    if arr.dtype.kind in "fiub":
        return arr.astype(np.float64, copy=False)
    return pd.to_numeric(pd.Series(arr, dtype=object), errors="coerce").to_numpy(dtype=np.float64)


def _normalize_steps(key: str, s: np.ndarray, v: np.ndarray, w: np.ndarray):
    """Sort one metric's points by step, re-base restarted step counters, drop duplicate steps."""
    note = ""
    if len(s) > 1:
        d = np.diff(s)
        if d.min() < 0:
            drops = np.flatnonzero(d < 0) + 1
            # A restart: the counter falls back to (or below) where this metric's segment began.
            seg_start = np.concatenate(([0], drops))
            # A single out-of-order point is just unsorted, not a restart.
            restarts = [i for j, i in enumerate(drops) if s[i] <= s[seg_start[j]] and i - seg_start[j] > 1]
            if restarts:
                offset = np.zeros(len(s))
                add = 0.0
                bounds = list(restarts) + [len(s)]
                prev = 0
                for b in bounds:
                    offset[prev:b] = add
                    add = (s[prev:b].max() + add) - s[b] + 1 if b < len(s) else add
                    prev = b
                s = s + offset
                note = f"{key}: step counter restarted {len(restarts)} time(s); steps re-based to one timeline"
            if (np.diff(s) < 0).any():
                order = np.argsort(s, kind="stable")
                s, v, w = s[order], v[order], w[order]
            d = np.diff(s)
        dup = d == 0
        if dup.any():
            # Keep the last value logged for a step, as trackers do when a step is re-logged.
            last = np.concatenate((~dup, [True]))
            s, v, w = s[last], v[last], w[last]
    return s, v, w, note


# -- results ------------------------------------------------------------------------------------
def _clean_number(x: float | None) -> float | None | str:
    """JSON has no NaN/Inf: write them as strings so the evidence stays readable."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _read_number(x: Any, what: str) -> float | None:
    """The inverse of :func:`_clean_number`."""
    if x is None:
        return None
    if isinstance(x, str):
        if x not in _SPECIAL:
            raise ValueError(f"{what}: {x!r} is not a number; numbers are JSON numbers, 'NaN', 'Infinity' or '-Infinity'")
        return _SPECIAL[x]
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"{what}: {x!r} is not a number")
    return float(x)


def _canonical_number(x: float | None) -> float | None:
    """A plain float, every NaN the one ``math.nan`` object.

    Dataclass equality compares field tuples, and tuple comparison tries identity before ``==``:
    with one NaN object, a report holding a NaN observation equals itself after a JSON round trip
    (NaN != NaN otherwise).
    """
    if x is None:
        return None
    x = float(x)
    return math.nan if math.isnan(x) else x


@dataclass(frozen=True)
class Evidence:
    """One measured fact behind a finding: which metric, over which steps, observed vs threshold."""

    metric: str
    observed: float | None
    threshold: float | None = None
    step_start: float | None = None
    step_end: float | None = None
    code: str = ""  # stable reason code, e.g. "grad_norm_spike"
    detail: str = ""

    def __post_init__(self):
        for name in ("observed", "threshold", "step_start", "step_end"):
            object.__setattr__(self, name, _canonical_number(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "metric": self.metric,
            "step_start": _clean_number(self.step_start),
            "step_end": _clean_number(self.step_end),
            "observed": _clean_number(self.observed),
            "threshold": _clean_number(self.threshold),
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Evidence:
        data = _mapping(data, "evidence")
        num = {k: _read_number(data.get(k), f"evidence {k}") for k in ("observed", "threshold", "step_start", "step_end")}
        return cls(str(data.get("metric", "")), code=str(data.get("code", "")), detail=str(data.get("detail", "")), **num)


@dataclass(frozen=True)
class Finding:
    """The outcome of one diagnosis on one run.

    ``explained_by`` is the id of a stronger finding on the same run that explains this one (see
    :mod:`trackerhealth.explain`): one cause, one finding. An explained finding keeps its level and
    evidence for ``--full`` output, but it is not a problem — never tagged, alerted, counted in the
    status or the score.
    """

    id: str
    level: str
    title: str
    message: str
    recommendation: str = ""
    evidence: tuple[Evidence, ...] = ()
    explained_by: str | None = None

    @property
    def is_problem(self) -> bool:
        """A warning or critical finding that no stronger finding explains."""
        return self.level in (WARNING, CRITICAL) and self.explained_by is None

    @property
    def is_explained(self) -> bool:
        """A warning or critical symptom of another finding (shown as "explained by <id>")."""
        return self.level in (WARNING, CRITICAL) and self.explained_by is not None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "level": self.level,
            "title": self.title,
            "message": self.message,
            "recommendation": self.recommendation,
            "evidence": [e.to_dict() for e in self.evidence],
        }
        if self.explained_by is not None:  # written only when set: unexplained findings read as before
            out["explained_by"] = self.explained_by
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        data = _mapping(data, "finding")
        level = _required(data, "level", "finding")
        if level not in LEVEL_RANK:
            raise ValueError(f"finding: unknown level {level!r}; valid: {', '.join(LEVEL_RANK)}")
        return cls(
            _required(data, "id", "finding"),
            level,
            str(data.get("title", "")),
            str(data.get("message", "")),
            str(data.get("recommendation", "")),
            tuple(Evidence.from_dict(e) for e in data.get("evidence", ())),
            None if data.get("explained_by") is None else str(data["explained_by"]),
        )


@dataclass(frozen=True)
class DimensionScore:
    """One scorecard dimension: 0-100 (higher is healthier) or None with the reason."""

    name: str
    score: float | None
    basis: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The dimension without its name (the report keys dimensions by name)."""
        return {
            "score": self.score,
            "basis": {k: _clean_number(v) for k, v in self.basis.items()},
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> DimensionScore:
        data = _mapping(data, f"dimension {name}")
        basis = {str(k): _read_number(v, f"dimension {name} basis {k}") for k, v in dict(data.get("basis") or {}).items()}
        return cls(name, _read_number(data.get("score"), f"dimension {name} score"), basis, str(data.get("reason", "")))


@dataclass(frozen=True)
class StageFailure:
    """A stage of one run's analysis that raised; the run's status is then ``error``.

    ``stage`` is ``roles``, ``diagnosis:<id>`` or ``scorecard``; ``message`` names the exception.
    """

    stage: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageFailure:
        data = _mapping(data, "failure")
        return cls(_required(data, "stage", "failure"), str(data.get("message", "")))

    def describe(self) -> str:
        return f"{self.stage} failed: {self.message}"


LOSS_KEY_HINT = 'name the training loss with --loss-key KEY or [roles] train_loss = "KEY" in trackerhealth.toml'


@dataclass(frozen=True)
class HealthReport:
    """Everything trackerhealth concluded about one run.

    ``loss_key`` is the metric read as the training loss (None: none was recognised, and the run's
    status is ``unknown``); ``failures`` lists the stages that raised (status ``error``);
    (an ``error`` finding adds its own entry); ``status_reason`` says in words why the status is
    ``error`` or ``unknown`` (empty otherwise; left empty, it is derived). ``unjudged`` is why the
    loss, though recognised, could not be judged (too few points, not positive): with no problem
    found, such a run is ``unknown`` too, never ``ok``.
    """

    run: RunRef
    score: float | None
    dimensions: tuple[DimensionScore, ...]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    n_points: int = 0
    last_step: float | None = None
    loss_key: str | None = None
    failures: tuple[StageFailure, ...] = ()
    status_reason: str = ""
    # The run's group when it was analysed with one (``Cohort.to_dict()``: the group's values, its
    # size, the baseline and how it was chosen, or why there is none); None: analysed alone.
    group: Mapping[str, Any] | None = field(default=None, hash=False)
    unjudged: str = ""

    def __post_init__(self):
        # An error finding is a failed stage, also when the report was built by hand: `failures`
        # then names every failure, and the short JSON (which drops error findings) keeps them.
        listed = {f.stage for f in self.failures}
        missing = tuple(StageFailure(f"diagnosis:{f.id}", f.message.removeprefix("diagnosis failed: "))
                        for f in self.findings if f.level == ERROR and f"diagnosis:{f.id}" not in listed)
        if missing:
            object.__setattr__(self, "failures", self.failures + missing)
        if not self.status_reason:
            object.__setattr__(self, "status_reason", self._derived_reason())

    def _derived_reason(self) -> str:
        status = self.status
        if status == ERROR:
            return "; ".join(f.describe() for f in self.failures)
        if status == UNKNOWN:
            return self.unjudged or f"no training loss recognised; {LOSS_KEY_HINT}"
        return ""

    @property
    def problems(self) -> tuple[Finding, ...]:
        """Warning and critical findings that no other finding explains, worst first: what
        becomes tags, the status, alerts and the exit code."""
        found = [f for f in self.findings if f.is_problem]
        return tuple(sorted(found, key=lambda f: -LEVEL_RANK[f.level]))

    @property
    def status(self) -> str:
        """``error`` when a stage of the analysis failed; else ``unknown`` when no training loss
        was recognised; else the worst finding's level: ``warning`` or ``critical``; else ``unknown``
        when the loss could not be judged (``unjudged``), else ``ok``.

        ``ok`` therefore always means: the loss was read, judged, and every diagnosis ran.
        """
        if self.failures:
            return ERROR
        if self.loss_key is None:
            return UNKNOWN
        # Explained findings are symptoms of one of these problems: they do not raise the status.
        worst = max((LEVEL_RANK[f.level] for f in self.problems), default=0)
        if worst == 0 and self.unjudged:
            return UNKNOWN  # nothing found is not health when the loss' course was never judged
        return {0: OK, 1: WARNING, 2: CRITICAL}[worst]

    @property
    def scores(self) -> dict[str, float | None]:
        return {d.name: d.score for d in self.dimensions}

    def finding(self, diagnosis_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == diagnosis_id), None)

    def to_dict(self, full: bool = False) -> dict[str, Any]:
        """The contract's JSON object for one run; ``full`` adds ok/skipped/error findings and
        the explained ones (with ``explained_by``).

        ``HealthReport.from_dict(report.to_dict(full=True)) == report``. Without ``full`` the
        round trip keeps the status (``failures`` still names every failed stage) but drops the
        findings that are not problems.
        """
        shown = self.findings if full else self.problems
        return {
            "run": self.run.to_dict(),
            "status": self.status,
            "status_reason": self.status_reason,
            "score": self.score,
            "scores": self.scores,
            "score_basis": {d.name: d.to_dict() for d in self.dimensions},
            "findings": [f.to_dict() for f in shown],
            "failures": [f.to_dict() for f in self.failures],
            "loss_key": self.loss_key,
            "notes": list(self.notes),
            "points": self.n_points,
            "last_step": self.last_step,
            **({"group": self._group_dict(full)} if self.group is not None else {}),
        }

    def _group_dict(self, full: bool) -> dict[str, Any]:
        """The group; the baseline's curves (a few kB, for the dashboard) only in full output."""
        return {k: v for k, v in self.group.items() if full or k != "baseline_curves"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HealthReport:
        """A report from its :meth:`to_dict` JSON (e.g. one entry of ``analyze --format json``'s
        ``runs``). ``status`` follows from the rest, except that an ``unknown`` status beside a
        ``loss_key`` says the loss was not judged (its ``status_reason`` says why). Unknown keys are
        ignored and optional ones may be missing; a report without ``loss_key`` reads as ``unknown``."""
        data = _mapping(data, "report")
        basis = _mapping(data.get("score_basis") or {}, "score_basis")
        scores = _mapping(data.get("scores") or {}, "scores")
        if basis:
            dims = tuple(DimensionScore.from_dict(name, d) for name, d in basis.items())
        else:  # only the plain scores were kept
            dims = tuple(DimensionScore(name, _read_number(v, f"score {name}")) for name, v in scores.items())
        loss_key = data.get("loss_key")
        return cls(
            RunRef.from_dict(data.get("run")),
            _read_number(data.get("score"), "score"),
            dims,
            tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            tuple(str(n) for n in data.get("notes", ())),
            int(data.get("points") or 0),
            _read_number(data.get("last_step"), "last_step"),
            None if loss_key is None else str(loss_key),
            tuple(StageFailure.from_dict(f) for f in data.get("failures", ())),
            str(data.get("status_reason") or ""),
            dict(_mapping(data["group"], "group")) if data.get("group") is not None else None,
            str(data.get("status_reason") or "unjudged") if data.get("status") == UNKNOWN and loss_key is not None else "",
        )
