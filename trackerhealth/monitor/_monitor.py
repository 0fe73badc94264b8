"""HealthMonitor: the scan's diagnoses, run from inside the training loop.

``log()`` only appends to flat lists (well under a microsecond per metric); the rows move into
bounded per-key stores (:mod:`._store`) every 65,536 rows and before an analysis. ``check()``
looks at the new values for NaN/Inf and runs :func:`trackerhealth.engine.analyze` — the very
diagnoses a scan runs — on the history the stores hold. While a key has at most ``cap`` points that history is exactly what a scan of the
same run reads, so the two agree; beyond it, it is the bounded bucket view described in
:mod:`._store`.

Cost. A check that analyses costs O(``cap`` × keys), whatever the run's length. To keep the total
proportional to the data, the diagnoses run again only once the run has grown by
``reanalyze_growth`` (10 %) since the last analysis — or at once when a loss turned NaN/Inf, or on
the final check. Other checks cost O(new points).

Alerting. A trend judged on part of a run can flicker (a healthy run's first epochs can look like
a plateau), so a warning or critical finding is raised only once it has been found by ``confirm``
consecutive analyses, and clears after as many analyses without it. A NaN/Inf loss is raised at
once; the final check (``check(final=True)``, ``close()``) raises what the full run shows, which
is what a later scan reports. Each raised finding alerts once, again only on escalation from
warning to critical or after it has cleared.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import config as config_module
from .. import diagnoses
from ..config import Config
from ..engine import analyze
from ..roles import is_loss, tokens
from ..schema import (
    CRITICAL,
    LEVEL_RANK,
    WARNING,
    Finding,
    HealthReport,
    RunHistory,
    RunRef,
    Series,
)
from . import _alerts
from ._store import KeyStore

if TYPE_CHECKING:
    from typing_extensions import Self

NONFINITE = "nonfinite"
_FLUSH_ROWS = 1 << 16


def _loss_like(key: str) -> bool:
    """Keys whose NaN/Inf means the run is dead: what roles.py reads as a (train, val or task) loss."""
    return is_loss(tokens(key))


class HealthMonitorError(Exception):
    """Base of the exceptions the monitor raises on purpose (only where the user opted in)."""


class HealthCheckError(HealthMonitorError):
    """``fail_on`` was reached: ``result`` is the check that found it."""

    def __init__(self, message: str, result: CheckResult | None = None):
        super().__init__(message)
        self.result = result


class NonFiniteLossError(HealthCheckError, FloatingPointError):
    """A loss became NaN/Inf (``stop_on_nonfinite=True``, or ``fail_on`` reached by ``nonfinite``)."""

    def __init__(self, message: str, *, step: float | None, key: str | None, value: float | None,
                 saved: Path | None = None, result: CheckResult | None = None):
        super().__init__(message, result)
        self.step, self.key, self.value, self.saved = step, key, value, saved


@dataclass(frozen=True)
class CheckResult:
    """What one ``check()`` found.

    ``new``: findings raised at this check (they alerted); ``active``: every raised finding not yet
    cleared; ``cleared``: ids that cleared at this check; ``report``: the latest full analysis
    (None before the first); ``analyzed``: whether this check ran the diagnoses.
    """

    step: float | None
    new: tuple[Finding, ...]
    active: tuple[Finding, ...]
    cleared: tuple[str, ...]
    report: HealthReport | None
    analyzed: bool
    final: bool = False

    @property
    def status(self) -> str:
        worst = max((LEVEL_RANK[f.level] for f in self.active), default=0)
        return {0: "ok", 1: WARNING, 2: CRITICAL}[worst]

    @property
    def ids(self) -> list[str]:
        return [f.id for f in self.active]

    def __bool__(self) -> bool:
        """True when this check raised something new."""
        return bool(self.new)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "status": self.status,
            "new": [f.to_dict() for f in self.new],
            "active": [f.to_dict() for f in self.active],
            "cleared": list(self.cleared),
            "analyzed": self.analyzed,
            "final": self.final,
            "score": None if self.report is None else self.report.score,
        }


def _fail_rule(fail_on) -> tuple[int | None, frozenset[str]]:
    if fail_on is None:
        return None, frozenset()
    if isinstance(fail_on, str) and fail_on in (WARNING, CRITICAL):
        return LEVEL_RANK[fail_on], frozenset()
    ids = frozenset([fail_on] if isinstance(fail_on, str) else fail_on)
    unknown = sorted(ids - set(diagnoses.REGISTRY))
    if unknown:
        raise ValueError(f"fail_on: unknown diagnosis {', '.join(map(repr, unknown))}; use 'warning', 'critical' "
                         f"or ids from: {', '.join(diagnoses.REGISTRY)}")
    return None, ids


class HealthMonitor:
    """Runs trackerhealth's diagnoses at every check of a live training run.

    Args:
        alert: where new findings go: ``"log"`` (always on), ``"wandb"`` (``wandb.alert`` on the
            live run), ``"mlflow"`` (health tags on the active run), an ``http(s)://`` webhook URL
            (Slack-compatible), ``"auto"`` (the default: log, plus W&B/MLflow when their SDK is
            already imported), a list of these, or None.
        fail_on: None; ``"warning"`` or ``"critical"``; or diagnosis ids. ``check()`` raises
            :class:`HealthCheckError` (:class:`NonFiniteLossError` for ``nonfinite``) while an
            active finding matches.
        stop_on_nonfinite: False; True (or ``"raise"``): ``log()`` raises
            :class:`NonFiniteLossError` at the first NaN/Inf loss value; ``"flag"``: it sets
            :attr:`should_stop` instead (the framework callbacks use this to stop gracefully).
        save_batches: a folder; at the first NaN/Inf loss, the batch indices passed to ``log(...,
            batch=...)`` for the last ``keep_batches`` steps are written there as JSON.
        config: a :class:`~trackerhealth.config.Config`, a path to a TOML file, or None for the
            ``trackerhealth.toml`` / ``pyproject.toml`` in the working folder (what the CLI reads).
        cap: points kept exactly per metric key; beyond, ``cap`` buckets (bounded memory).
        confirm: consecutive analyses that must show a finding before it is raised or cleared.
        reanalyze_growth: growth of the run since the last analysis that triggers the next one.
        alert_level: lowest level sent to W&B (webhooks carry critical findings, as a scan's do).
        wait_duration: W&B's minimum seconds between two alerts with the same title.
        webhook_timeout: seconds per webhook POST (posts run on a background thread).
    """

    def __init__(
        self,
        alert: str | Iterable[str] | None = _alerts.AUTO,
        fail_on: str | Iterable[str] | None = None,
        *,
        stop_on_nonfinite: bool | str = False,
        save_batches: str | Path | None = None,
        keep_batches: int = 8,
        config: Config | str | Path | None = None,
        name: str = "",
        project: str = "",
        cap: int = 20_000,
        confirm: int = 2,
        reanalyze_growth: float = 0.1,
        alert_level: str = WARNING,
        wait_duration: float = 300.0,
        webhook_timeout: float = 5.0,
        seed: int = 0,
    ):
        if stop_on_nonfinite not in (False, True, "raise", "flag"):
            raise ValueError(f"stop_on_nonfinite must be False, True, 'raise' or 'flag', not {stop_on_nonfinite!r}")
        if alert_level not in (WARNING, CRITICAL):
            raise ValueError(f"alert_level must be 'warning' or 'critical', not {alert_level!r}")
        if confirm < 1:
            raise ValueError("confirm must be at least 1")
        self._fail_level, self._fail_ids = _fail_rule(fail_on)
        if config is None:
            config = config_module.load()
        elif not isinstance(config, Config):
            config = config_module.load(config)
        self.config = config
        spikes = config.thresholds_for("periodic-spikes")
        self._spike_params = (spikes.z, spikes.min_rel, spikes.window)
        self.ref = RunRef("monitor", project, name or "training-run", name or "training-run")
        self.cap, self.confirm, self.growth = int(cap), int(confirm), float(reanalyze_growth)
        self._rng = np.random.default_rng(seed)
        self.channels, self._alerted = _alerts.make_channels(
            alert, min_level=alert_level, wait_duration=wait_duration, timeout=webhook_timeout,
            run_label=self.ref.name)

        # Pending rows: flat lists, moved into the stores at each check (or every 65,536 rows).
        self._p_step: list = []
        self._p_wall: list[float] = []
        self._p_count: list[int] = []
        self._p_code: list[int] = []
        self._p_value: list = []
        self._codes: dict[str, int] = {}
        self._names: list[str] = []
        self._loss_codes: set[int] = set()
        self._stores: dict[int, KeyStore] = {}
        self._next_step = 0
        self._n_raw = 0
        self._raw_at_analysis = 0
        self._new_nonfinite = False

        # Opt-in NaN/Inf actions, taken at the log() call that sees the value.
        self.stop_mode = {True: "raise", "raise": "raise", "flag": "flag", False: None}[stop_on_nonfinite]
        self.save_dir = Path(save_batches) if save_batches is not None else None
        self._batches: deque = deque(maxlen=max(1, keep_batches))
        self.should_stop = False
        self.nonfinite_event: dict[str, Any] | None = None
        if self.stop_mode or self.save_dir is not None:
            self.log = self._log_watching  # type: ignore[method-assign]

        # Finding state across checks.
        self.report: HealthReport | None = None
        self._seen: dict[str, int] = {}
        self._absent: dict[str, int] = {}
        self._active: dict[str, Finding] = {}
        self.raised: list[tuple[float | None, Finding]] = []  # every finding raised, with the step
        self._closed = False

    # -- logging --------------------------------------------------------------------------------
    def log(self, metrics: Mapping[str, Any], step: float | None = None, *, batch: Any = None) -> None:
        """Record one step's scalars. ``step`` defaults to one more than the last; non-numbers are ignored.

        ``batch`` (sample indices of this step's batch) is kept only with ``save_batches``.
        """
        if step is None:
            step = self._next_step
        self._next_step = step + 1
        self._p_step.append(step)
        self._p_wall.append(time.time())
        self._p_count.append(len(metrics))
        codes, code_of, value_of = self._codes, self._p_code.append, self._p_value.append
        for key, value in metrics.items():
            code = codes.get(key)
            if code is None:
                code = self._register(key)
            code_of(code)
            value_of(value)
        if len(self._p_value) >= _FLUSH_ROWS:
            self._flush()

    def _log_watching(self, metrics: Mapping[str, Any], step: float | None = None, *, batch: Any = None) -> None:
        if step is None:
            step = self._next_step
        if batch is not None:
            self._batches.append((step, batch))
        HealthMonitor.log(self, metrics, step)
        if self.nonfinite_event is not None:
            return
        for key, value in metrics.items():
            if self._codes[key] in self._loss_codes and not _finite(value):
                self._on_nonfinite(step, key, float(value))
                return

    def remember_batch(self, step: float, batch: Any) -> None:
        """Keep one step's batch indices for ``save_batches`` (``log(..., batch=...)`` does this too)."""
        if self.save_dir is not None:
            self._batches.append((step, batch))

    def watch(self, key: str, value: Any, step: float) -> bool:
        """Check one value for NaN/Inf without recording it (e.g. a per-batch running loss).

        Takes the opted-in actions (``save_batches``, ``stop_on_nonfinite``) on a NaN/Inf loss;
        returns False when the value is not finite.
        """
        if _finite(value):
            return True
        if self.nonfinite_event is None and _loss_like(key) and (self.stop_mode or self.save_dir is not None):
            self._on_nonfinite(step, key, float(value))
        return False

    def _register(self, key: str) -> int:
        code = len(self._names)
        self._codes[key] = code
        self._names.append(key)
        if _loss_like(key):
            self._loss_codes.add(code)
        return code

    def _flush(self) -> None:
        if not self._p_value:
            return
        counts = np.asarray(self._p_count, dtype=np.int64)
        steps = np.repeat(np.asarray(self._p_step, dtype=np.float64), counts)
        walls = np.repeat(np.asarray(self._p_wall, dtype=np.float64), counts)
        codes = np.asarray(self._p_code, dtype=np.int64)
        values, ok = _as_floats(self._p_value)
        self._p_step, self._p_wall, self._p_count, self._p_code, self._p_value = [], [], [], [], []
        if ok is not None:
            steps, walls, codes, values = steps[ok], walls[ok], codes[ok], values[ok]
        self._n_raw += len(values)
        order = np.argsort(codes, kind="stable")
        bounds = np.flatnonzero(np.diff(codes[order])) + 1
        for idx in np.split(order, bounds):
            if not len(idx):
                continue
            code = int(codes[idx[0]])
            store = self._stores.get(code)
            if store is None:
                store = self._stores[code] = KeyStore(self.cap, self._rng, spiky=code in self._loss_codes)
            v = values[idx]
            if store.first_bad is None and not self._new_nonfinite and not np.isfinite(v).all():
                self._new_nonfinite = True  # a key's first NaN/Inf: analyse at this check
            store.extend(steps[idx], v, walls[idx])

    # -- the NaN/Inf actions --------------------------------------------------------------------
    def _on_nonfinite(self, step, key: str, value: float) -> None:
        saved = self._save_batches(step, key, value) if self.save_dir is not None else None
        self.nonfinite_event = {"step": step, "key": key, "value": value, "saved": saved}
        if self.stop_mode is None:
            return
        self.should_stop = True
        if self.stop_mode == "raise":
            result = self._check(force=True)  # alerts go out before the loop dies
            where = f"; batch indices of the last steps are in {saved}" if saved else ""
            raise NonFiniteLossError(
                f"{key} became {_word(value)} at step {step:g}: training stopped (stop_on_nonfinite){where}",
                step=step, key=key, value=value, saved=saved, result=result)

    def _save_batches(self, step, key: str, value: float) -> Path | None:
        from ._timing import to_list

        self.save_dir.mkdir(parents=True, exist_ok=True)
        path = self.save_dir / f"nonfinite_step{step:g}.json"
        doc = {"step": step, "key": key, "value": _word(value), "run": self.ref.name,
               "batches": [{"step": s, "indices": to_list(b)} for s, b in self._batches]}
        try:
            path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        except OSError as exc:
            _alerts.logger.warning("could not save the batch indices to %s: %s", path, exc)
            return None
        _alerts.logger.error("%s: %s became %s at step %g; batch indices saved to %s",
                             self.ref.name, key, _word(value), step, path)
        return path

    # -- checking -------------------------------------------------------------------------------
    def check(self, *, final: bool = False, force: bool = False) -> CheckResult:
        """Analyse what was logged since the last check; alert on newly raised findings.

        ``final=True`` (or :meth:`close`) judges the finished run: every current finding is
        raised, as a later scan would report it. Raises :class:`HealthCheckError` when
        ``fail_on`` is reached.
        """
        result = self._check(final=final, force=force)
        self._enforce(result)
        return result

    def _check(self, *, final: bool = False, force: bool = False) -> CheckResult:
        step = self._last_step()
        logged = self._n_raw + len(self._p_value)
        grown = logged - self._raw_at_analysis >= max(1.0, self.growth * self._raw_at_analysis)
        if not (final or force or self.report is None or grown or self._new_nonfinite):
            # Not due: only look for NaN/Inf among the new values. A finite sum of them (C speed)
            # proves there is none; otherwise their first NaN/Inf per key is analysed at once.
            if _finite_sum(self._p_value):
                return self._deferred(step)
            self._flush()
            if not self._new_nonfinite:
                return self._deferred(step)
        self._flush()
        self._new_nonfinite = False
        self._raw_at_analysis = self._n_raw
        report = analyze(self.history(), self.config)
        self.report = report
        new, cleared = self._update(report, final)
        for f in new:
            self.raised.append((step, f))
        result = CheckResult(step, tuple(new), tuple(self._active.values()), tuple(cleared), report, True, final)
        if new or cleared or final:
            _alerts.broadcast(self.channels, new, cleared, report, dict(self._active))
        else:  # keep the MLflow score current
            _alerts.broadcast([c for c in self.channels if c.name == "mlflow"], (), (), report, dict(self._active))
        return result

    def _deferred(self, step) -> CheckResult:
        return CheckResult(step, (), tuple(self._active.values()), (), self.report, False, False)

    def _update(self, report: HealthReport, final: bool) -> tuple[list[Finding], list[str]]:
        current = {f.id: f for f in report.problems}
        new: list[Finding] = []
        for diag_id, f in current.items():
            self._seen[diag_id] = self._seen.get(diag_id, 0) + 1
            self._absent[diag_id] = 0
            held = self._active.get(diag_id)
            if held is not None:
                if LEVEL_RANK[f.level] > LEVEL_RANK[held.level]:
                    new.append(f)  # escalated: warning -> critical
                self._active[diag_id] = f
                continue
            urgent = diag_id == NONFINITE and f.level == CRITICAL
            if final or urgent or self._seen[diag_id] >= self.confirm:
                self._active[diag_id] = f
                new.append(f)
        cleared = []
        for diag_id in list(self._seen):
            if diag_id in current:
                continue
            self._seen[diag_id] = 0
            if diag_id in self._active:
                self._absent[diag_id] = self._absent.get(diag_id, 0) + 1
                if final or self._absent[diag_id] >= self.confirm:
                    del self._active[diag_id]
                    cleared.append(diag_id)
        return new, cleared

    def _enforce(self, result: CheckResult) -> None:
        if self._fail_level is None and not self._fail_ids:
            return
        failing = [f for f in result.active
                   if (self._fail_level is not None and LEVEL_RANK[f.level] >= self._fail_level) or f.id in self._fail_ids]
        if not failing:
            return
        listed = "; ".join(f"{f.id} ({f.level}): {f.message}" for f in failing)
        nonfinite = next((f for f in failing if f.id == NONFINITE), None)
        if nonfinite is not None:
            ev = nonfinite.evidence[0] if nonfinite.evidence else None
            raise NonFiniteLossError(f"fail_on reached at step {result.step}: {listed}",
                                     step=ev.step_start if ev else result.step, key=ev.metric if ev else None,
                                     value=ev.observed if ev else None, result=result)
        raise HealthCheckError(f"fail_on reached at step {result.step}: {listed}", result)

    def close(self, timeout: float = 10.0) -> CheckResult:
        """The final check (the whole run judged, as a scan would), then wait for queued alerts."""
        result = self._check(final=True)
        for channel in self.channels:
            channel.close(timeout)
        if self._alerted:  # webhook deliveries finished: refresh MLflow's alerted tag
            _alerts.broadcast([c for c in self.channels if c.name == "mlflow"], (), (), result.report, dict(self._active))
        self._closed = True
        return result

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self._closed:
            self.close()

    # -- reading --------------------------------------------------------------------------------
    def history(self) -> RunHistory:
        """The run as the monitor holds it (exact up to ``cap`` points per key)."""
        self._flush()
        z, min_rel, window = self._spike_params
        series = {}
        ordered = True
        for code, store in self._stores.items():
            s, v, w = store.points(z, min_rel, window)
            series[self._names[code]] = Series(s, v, w)
            ordered = ordered and (len(s) < 2 or bool((s[1:] > s[:-1]).all()))
        if ordered:
            # Strictly increasing steps per key: what from_series would build, without its
            # regrouping pass (the keys already are in first-logged order).
            return RunHistory(self.ref, series)
        # Re-logged steps or a restarted step counter: the scan's normalisation.
        return RunHistory.from_series(self.ref, series)

    @property
    def active(self) -> tuple[Finding, ...]:
        return tuple(self._active.values())

    @property
    def n_points(self) -> int:
        """Points logged so far (all keys)."""
        return self._n_raw + len(self._p_value)

    @property
    def nbytes(self) -> int:
        """Memory held by the stores (bytes): bounded by ``cap`` per key."""
        return sum(s.nbytes for s in self._stores.values())

    def _last_step(self) -> float | None:
        """The step of the latest ``log()`` call (None before the first)."""
        return None if not (self._n_raw or self._p_count) else self._next_step - 1


def _finite_sum(values: list) -> bool:
    """True when the values are numbers whose sum is finite (so none is NaN/Inf); O(n) in C."""
    try:
        return math.isfinite(sum(values))
    except (TypeError, ValueError, OverflowError):
        return False


def _finite(value: Any) -> bool:
    """False only for a number that is NaN or ±Inf (non-numbers are not judged)."""
    try:
        return math.isfinite(value)
    except (TypeError, ValueError):
        return True


def _word(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def _as_floats(values: list) -> tuple[np.ndarray, np.ndarray | None]:
    """Values as float64 and, when some are not numbers, the mask of those that are."""
    try:
        arr = np.asarray(values, dtype=np.float64)
        if arr.ndim == 1:
            return arr, None
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values))
    ok = np.ones(len(values), dtype=bool)
    for i, x in enumerate(values):
        try:
            out[i] = float(x)
        except (TypeError, ValueError):
            ok[i] = False
    return out, ok
