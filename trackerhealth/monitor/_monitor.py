"""HealthMonitor: the scan's diagnoses, run from inside the training loop.

``log()`` only appends to flat lists (well under a microsecond per plain number; tensors are
detached and held, see :mod:`._values`, and read in one batch per check); the rows move into
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

import dataclasses
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
    ERROR,
    LEVEL_RANK,
    OK,
    UNKNOWN,
    WARNING,
    Finding,
    HealthReport,
    RunHistory,
    RunRef,
    Series,
)
from . import _alerts, _values
from ._store import KeyStore

if TYPE_CHECKING:
    from typing_extensions import Self

NONFINITE = "nonfinite"
_FLUSH_ROWS = 1 << 16
_TENSOR_LIMIT = 1024  # held tensors read in one go before the check: bounds memory and device syncs
STEP_NOTE = "<step>"  # the entry of HealthMonitor.skipped for an unreadable step (not a metric key)
_PENDING = _values.Skipped("a tensor not read yet")  # its place among the pending values


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


@dataclass(frozen=True, repr=False)
class CheckResult:
    """What one ``check()`` found.

    ``new``: findings raised at this check (they alerted); ``active``: every raised finding not yet
    cleared; ``cleared``: ids that cleared at this check; ``report``: the latest full analysis
    (None before the first); ``analyzed``: whether this check ran the diagnoses.

    ``str()`` and ``repr()`` are one line (step, status, score, new and active ids), so
    ``print(monitor.check())`` is readable in a training log; :meth:`to_dict` has everything.

    Truth value: a result is true when the run is **healthy** — no warning or critical finding is
    active, the check itself did not fail and the loss was recognised (``status == "ok"``), the same as
    :attr:`healthy`. So ``if not monitor.check(): ...``
    reacts to a problem, whether it was raised at this check or earlier and still holds; use
    ``result.new`` for "raised at this check".
    """

    step: float | None
    new: tuple[Finding, ...]
    active: tuple[Finding, ...]
    cleared: tuple[str, ...]
    report: HealthReport | None
    analyzed: bool
    final: bool = False
    error: str | None = None  # the analysis failed (never healthy): why

    @property
    def status(self) -> str:
        """``error`` when the check or part of its analysis failed, ``unknown`` when no training
        loss was recognised or it could not yet be judged (too few points: the same statuses a scan
        writes), else the worst active finding."""
        if self.error is not None:
            return ERROR
        if self.report is not None and self.report.status in (ERROR, UNKNOWN):
            return self.report.status
        worst = max((LEVEL_RANK[f.level] for f in self.active), default=0)
        return {0: OK, 1: WARNING, 2: CRITICAL}[worst]

    @property
    def healthy(self) -> bool:
        """No warning or critical finding is active, and the analysis ran and recognised the loss."""
        return self.status == OK

    @property
    def ids(self) -> list[str]:
        return [f.id for f in self.active]

    @property
    def score(self) -> float | None:
        """The latest analysis' overall score (None before the first, or when nothing could be scored)."""
        return None if self.report is None else self.report.score

    def __bool__(self) -> bool:
        """True when the run is healthy (no active warning or critical finding): see the class doc."""
        return self.healthy

    def __str__(self) -> str:
        step = "?" if self.step is None else f"{self.step:g}"
        score = "n/a" if self.score is None else f"{self.score:.1f}"
        parts = [f"{'final check' if self.final else 'check'} at step {step}: {self.status}, score {score}"]
        parts.append("new: " + (", ".join(f"{f.id} ({f.level})" for f in self.new) or "none"))
        held = [i for i in self.ids if i not in {f.id for f in self.new}]
        if held:
            parts.append("still active: " + ", ".join(held))
        if self.cleared:
            parts.append("cleared: " + ", ".join(self.cleared))
        if self.error is not None:
            parts.append(f"the check failed: {self.error}")
        elif not self.analyzed:
            parts.append("not re-analysed (the run has not grown enough)")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return f"<CheckResult {self}>"

    def to_dict(self) -> dict[str, Any]:
        """Everything this check found (findings with messages, evidence and fixes), JSON-able."""
        return {
            "step": self.step,
            "status": self.status,
            "new": [f.to_dict() for f in self.new],
            "active": [f.to_dict() for f in self.active],
            "cleared": list(self.cleared),
            "analyzed": self.analyzed,
            "final": self.final,
            "score": self.score,
            "error": self.error,
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
            Numbers and CPU tensors are judged at the ``log()`` call; a GPU tensor when the
            held tensors are read — at the next ``check()`` (which then raises), or within 1,024
            logged tensors — so watching costs no device sync per step. The error names the
            step the value was logged at either way.
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
        self._tensors = _values.TensorBuffer(_TENSOR_LIMIT)  # detached tensors, read at the check
        self._tensors_full = False
        self.skipped: dict[str, str] = {}  # key (or STEP_NOTE) -> why its first unrecordable value was skipped

        # Opt-in NaN/Inf actions, taken at the log() call that sees the value.
        self.stop_mode = {True: "raise", "raise": "raise", "flag": "flag", False: None}[stop_on_nonfinite]
        self.save_dir = Path(save_batches) if save_batches is not None else None
        self.keep_batches = max(1, keep_batches)
        # Room for the steps whose held tensors are not read yet: a NaN found when they are read
        # still has its own batch and the ones before it.
        self._batches: deque = deque(maxlen=self.keep_batches + _TENSOR_LIMIT)
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
        """Record one step's scalars. ``step`` defaults to one more than the last.

        Takes Python numbers, numpy scalars and one-element arrays, and one-element torch tensors
        (CPU or GPU, with or without grad: detached at once, so no graph is kept alive, and read in
        one batch at the next check, so the GPU is not synchronised at every step). ``None`` is
        skipped; any other value (a string, a tensor of several elements) is skipped with a
        warning, once per key (:attr:`skipped`). ``step`` may be a number or a one-element tensor.
        Past its arguments' shape (a mapping: else a ``TypeError`` at once), ``log()`` never
        raises, except the opted-in ``stop_on_nonfinite`` error. ``batch`` (sample indices of
        this step's batch) is kept only with ``save_batches``.
        """
        if step is None:
            step = self._next_step
        elif type(step) not in _values.PLAIN:
            step = self._step_of(step)
        self._next_step = step + 1
        self._p_step.append(step)
        self._p_wall.append(time.time())
        values = self._p_value
        start = len(values)
        codes, code_of, value_of, plain = self._codes, self._p_code.append, values.append, _values.PLAIN
        try:
            items = metrics.items()
        except AttributeError:
            raise TypeError(f"monitor.log takes a mapping of metric names to values, e.g. "
                            f"monitor.log({{'train/loss': loss}}, step=step), not a {type(metrics).__name__}") from None
        for key, value in items:
            if type(value) not in plain:
                value = self._read(key, value, len(values))
                if value is None:
                    continue
            code = codes.get(key)
            if code is None:
                code = self._register(key)
            code_of(code)
            value_of(value)
        self._p_count.append(len(values) - start)
        if self._tensors_full:
            self._read_tensors()
        if len(values) >= _FLUSH_ROWS:
            self._flush()

    def _step_of(self, step: Any) -> float:
        """A step given as a tensor or numpy number, as a float (the next step when it is not a number)."""
        try:
            got = float(step.detach()) if _values.is_tensor(step) else _values.read_now(step)
        except Exception:  # noqa: BLE001 - an unreadable step never stops training
            got = _values.Skipped("")
        if isinstance(got, _values.Skipped) or not math.isfinite(got):
            if STEP_NOTE not in self.skipped:
                self.skipped[STEP_NOTE] = f"{type(step).__name__} {step!r:.40} is not a step number: steps are counted on"
                _alerts.logger.warning("%s: monitor.log: %s (noted once)", self.ref.name, self.skipped[STEP_NOTE])
            return self._next_step
        return got

    def _read(self, key: str, value: Any, slot: int) -> Any:
        """A value that is not a plain float/int: its float, a placeholder for a held tensor, or None."""
        try:
            if _values.is_tensor(value):
                problem = _values.check_tensor(value)
                if problem is None:
                    self._tensors_full = self._tensors.add(_values.detached(value), slot)
                    return _PENDING
                got: float | _values.Skipped = _values.Skipped(problem)
            else:
                got = _values.read_now(value)
        except Exception as exc:  # noqa: BLE001 - an odd value never stops training
            got = _values.Skipped(f"{type(value).__name__} could not be read ({type(exc).__name__}: {exc})")
        if isinstance(got, _values.Skipped):
            if got.reason and key not in self.skipped:
                self.skipped[key] = got.reason
                _alerts.logger.warning("%s: monitor.log skipped %r: %s (noted once per key)", self.ref.name, key, got.reason)
            return None
        return got

    def _read_tensors(self) -> None:
        """Read the held tensors (one device sync) into their places among the pending values."""
        self._tensors_full = False
        if not len(self._tensors):
            return
        held = len(self._tensors)
        try:
            slots, read = self._tensors.read()
        except Exception as exc:  # noqa: BLE001 - e.g. a device error: drop these values, say so, go on
            # Their places keep the _PENDING placeholder, which is not a number: dropped at the flush.
            _alerts.logger.warning("%s: %d logged tensor value(s) could not be read and were dropped: %s: %s",
                                   self.ref.name, held, type(exc).__name__, exc)
            return
        values = self._p_value
        for slot, value in zip(slots, read):
            values[slot] = value
        if self.nonfinite_event is None and (self.stop_mode or self.save_dir is not None):
            # Deferred tensors of loss keys are judged here, at the step they were logged at.
            codes, loss_codes = self._p_code, self._loss_codes
            for slot, value in zip(slots, read):
                if codes[slot] in loss_codes and isinstance(value, float) and not math.isfinite(value):
                    row = int(np.searchsorted(np.cumsum(self._p_count), slot, side="right"))
                    self._on_nonfinite(self._p_step[row], self._names[codes[slot]], value)
                    return

    def _log_watching(self, metrics: Mapping[str, Any], step: float | None = None, *, batch: Any = None) -> None:
        if step is None:
            step = self._next_step
        elif type(step) not in _values.PLAIN:
            step = self._step_of(step)
        if batch is not None:
            self._batches.append((step, batch))
        HealthMonitor.log(self, metrics, step)
        if self.nonfinite_event is not None:
            return
        for key, value in metrics.items():
            code = self._codes.get(key)
            if code is None or code not in self._loss_codes:
                continue
            value = _peek(value)  # None: a tensor held for the next check, judged when it is read
            if value is not None and not math.isfinite(value):
                self._on_nonfinite(step, key, value)
                return

    def remember_batch(self, step: float, batch: Any) -> None:
        """Keep one step's batch indices for ``save_batches`` (``log(..., batch=...)`` does this too)."""
        if self.save_dir is not None:
            self._batches.append((step, batch))

    def watch(self, key: str, value: Any, step: float) -> bool:
        """Check one value for NaN/Inf now, without recording it (e.g. a per-batch running loss).

        Takes the opted-in actions (``save_batches``, ``stop_on_nonfinite``) on a NaN/Inf loss;
        returns False when the value is not finite. A GPU tensor is read at once (a device sync).
        """
        try:
            number = float(value.detach()) if _values.is_tensor(value) else _values.read_now(value)
        except Exception:  # noqa: BLE001 - not a number: nothing to judge
            return True
        if isinstance(number, _values.Skipped) or math.isfinite(number):
            return True
        if self.nonfinite_event is None and _loss_like(key) and (self.stop_mode or self.save_dir is not None):
            self._on_nonfinite(step, key, number)
        return False

    def _register(self, key: Any) -> int:
        code = len(self._names)
        self._codes[key] = code
        name = key if isinstance(key, str) else str(key)  # a tracker key is text
        self._names.append(name)
        if _loss_like(name):
            self._loss_codes.add(code)
        return code

    def _flush(self) -> None:
        self._read_tensors()
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
        kept = [(s, b) for s, b in self._batches if s <= step][-self.keep_batches:]
        doc = {"step": step, "key": key, "value": _word(value), "run": self.ref.name,
               "batches": [{"step": s, "indices": to_list(b)} for s, b in kept]}
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
        self._read_tensors()  # the one device sync of this check (may take the NaN/Inf action)
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
        try:
            # A check during training judges a run in progress (its first epochs are not a short
            # run that never learned); the final check judges the finished run.
            live = dataclasses.replace(self.ref, state="finished" if final else "running")
            report = analyze(self._snapshot(live), self.config)
        except Exception as exc:  # noqa: BLE001 - a failed analysis is reported, never raised into the loop
            # Not marked as analysed: the next check tries again.
            error = f"{type(exc).__name__}: {exc}"
            _alerts.logger.error("%s: the health check at step %s failed (%s); training goes on, the next check "
                                 "tries again — please report this with the traceback", self.ref.name, step, error,
                                 exc_info=True)
            return CheckResult(step, (), tuple(self._active.values()), (), self.report, False, final, error)
        self._new_nonfinite = False
        self._raw_at_analysis = self._n_raw
        self.report = report
        new, cleared = self._update(report, final)
        for f in new:
            self.raised.append((step, f))
        result = CheckResult(step, tuple(new), tuple(self._active.values()), tuple(cleared), report, True, final)
        # Every analysed check reaches every channel: MLflow keeps the score current, and a channel
        # that cannot deliver (no live run) says so at the first check, not at the first finding.
        _alerts.broadcast(self.channels, new, cleared, report, dict(self._active))
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
        return self._snapshot(self.ref)

    def _snapshot(self, ref: RunRef) -> RunHistory:
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
            return RunHistory(ref, series)
        # Re-logged steps or a restarted step counter: the scan's normalisation.
        return RunHistory.from_series(ref, series)

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


def _peek(value: Any) -> float | None:
    """A loss value read now for the NaN/Inf watch, if that needs no device sync (None otherwise).

    Numbers and CPU tensors are read; a tensor on an accelerator is judged when the held tensors
    are read (at the check, or every ``_TENSOR_LIMIT`` values), not at every step.
    """
    try:
        if _values.is_tensor(value):
            if value.device.type not in _values.EAGER_DEVICES or value.numel() != 1:
                return None
            return float(value.detach())
        number = _values.read_now(value)
    except Exception:  # noqa: BLE001 - not a number: nothing to judge
        return None
    return None if isinstance(number, _values.Skipped) else number


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
