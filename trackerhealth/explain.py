"""One cause, one finding: mark a symptom that a stronger finding on the same run explains.

Several diagnoses can fire on one fault. A loss that blows up before it turns NaN also "oscillates"
and "converges slowly"; a network whose early layers get no gradient falls slowly; a multi-task
total loss dominated by one unscaled term moves as that term does. Tagging each symptom as its own
problem sends the user after three faults where there is one. :func:`explain` sets
``Finding.explained_by`` on such a symptom; the schema then leaves it out of
``HealthReport.problems`` (tags, status, alerts, score, exit code) while ``--full`` output keeps it,
marked "explained by <id>".

The rules are one declared table, :data:`RULES` (docs list them from it). Two guards hold for every
rule, so that explaining can never make a run look healthier than its strongest finding says:

* the explainer must itself be a problem (warning/critical, not explained), and at least as severe
  as the symptom — a warning never hides a critical finding, so the run's status never drops;
* an explained finding never explains another: rules whose explainer is itself some rule's symptom
  run last, on what the other rules left unexplained, so there are no chains.

A symptom is explained by the first rule in table order whose condition holds. Nothing here creates,
removes or re-levels a finding.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .diagnoses._thresholds import knob
from .roles import RoleView
from .schema import LEVEL_RANK, Finding

ID = "explain"  # the section name in ``[thresholds.explain]``


@dataclass(frozen=True)
class Thresholds:
    blowup_window_share: float = knob(
        0.1, "nonfinite explains a symptom whose evidence reaches within this share of the run before the blow-up's onset")
    still_before_share: float = knob(
        0.5, "a loss that never learned or stopped moving is the blow-up's symptom only when the blow-up began within this share of the run")


DEFAULTS = Thresholds()


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _starts(f: Finding) -> list[float]:
    return [e.step_start for e in f.evidence if _finite(e.step_start)]


def _ends(f: Finding) -> list[float]:
    """Where each evidence item ends (its start when it has no end)."""
    out = []
    for e in f.evidence:
        end = e.step_end if _finite(e.step_end) else e.step_start
        if _finite(end):
            out.append(end)
    return out


# The nonfinite evidence codes that mark where a blow-up began: the gradient-norm spike before the
# first NaN, the first non-finite value, the start of an explosion without NaN.
ONSET_CODES = ("grad_norm_spike_before_nonfinite", "nonfinite_value", "grad_norm_explosion", "loss_divergence",
               "grad_norm_spike_before_divergence")
# A lone outlier update the run recovered from (nonfinite's ``grad_norm_outlier`` alone) blew nothing up:
# what the run does after it is not its consequence, so it explains no symptom.
SURVIVED_CODES = frozenset({"grad_norm_outlier"})


def blowup_onset(nonfinite: Finding) -> float | None:
    """The step the blow-up began: the earliest start among the nonfinite finding's onset evidence
    (:data:`ONSET_CODES`). Without any, the latest start of its evidence: evidence that only gives
    context (a baseline measured from the run's start) must not move the onset back to step 0."""
    onset = [e.step_start for e in nonfinite.evidence if e.code in ONSET_CODES and _finite(e.step_start)]
    if onset:
        return min(onset)
    starts = _starts(nonfinite)
    return max(starts) if starts else None


def _blowup_window_start(nonfinite: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> float | None:
    if {e.code for e in nonfinite.evidence} <= SURVIVED_CODES:
        return None
    onset = blowup_onset(nonfinite)
    if onset is None:
        return None
    loss = view.series("train_loss")
    first = float(loss.steps[0]) if loss is not None and len(loss) else min(_starts(nonfinite) + _starts(symptom), default=onset)
    return onset - t.blowup_window_share * max(onset - first, 0.0)


def reaches_blowup(nonfinite: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """The symptom's evidence runs into the blow-up: its latest evidence ends at or after the
    start of the blow-up window. A symptom whose evidence all ends well before it is independent, and
    so is a loss that never learned or stopped moving (loss-oscillation's still verdicts) when the
    blow-up came only in the last ``1 - still_before_share`` of the run: it had been still long before
    (torch run textcls_batch_too_small, built blind: flat from step 29, its gradient norm 13x only from
    step 258 of 300)."""
    window = _blowup_window_start(nonfinite, symptom, view, t)
    ends = _ends(symptom)
    if window is None or not ends or max(ends) < window:
        return False
    if {e.code for e in symptom.evidence} in STILL_CODES:
        onset, loss = blowup_onset(nonfinite), view.series("train_loss")
        if onset is not None and loss is not None and len(loss) > 1:
            first, last = float(loss.steps[0]), float(loss.steps[-1])
            return onset <= first + t.still_before_share * (last - first)
    return True


def starts_in_blowup(nonfinite: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """The symptom began in the blow-up: its earliest evidence starts at or after the start of the
    blow-up window (overfitting's evidence always runs to the last evaluation, so where the val
    loss turned upward is what tells a rise caused by the blow-up from real overfitting)."""
    window = _blowup_window_start(nonfinite, symptom, view, t)
    starts = _starts(symptom)
    return window is not None and bool(starts) and min(starts) >= window


def overlaps(explainer: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """The two findings' evidence spans share steps (a finding without step ranges spans the run)."""
    a0, a1 = _starts(explainer), _ends(explainer)
    b0, b1 = _starts(symptom), _ends(symptom)
    if not (a0 and a1 and b0 and b1):
        return True
    return min(a0) <= max(b1) and min(b0) <= max(a1)


def on_total_loss(explainer: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """The symptom was measured on the run's total training loss, or its total val loss (a val loss that
    swings from one evaluation to the next: the torch runs whose unscaled ink-mass term dominates), not on
    one of the task losses: the total is the sum the dominating term drives."""
    total = view.key("train_loss")
    tasks = {key for _, key, _ in view.group("task_losses")}
    if total is None or total in tasks:
        return False
    totals = {total, view.key("val_loss")} - tasks - {None}
    return bool(totals & {e.metric for e in symptom.evidence})


# loss-oscillation's verdicts on a loss that does not move, as opposed to one that swings.
STILL_CODES = ({"no_learning"}, {"frozen_level"})


def only_no_learning(explainer: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """The symptom is loss-oscillation's "never learned" or "stopped moving" alone (its no_learning or
    frozen_level evidence, nothing about swings): a loss that slow-convergence sees falling steadily is
    learning, however slowly."""
    return {e.code for e in symptom.evidence} in STILL_CODES


def training_loss_rose(explainer: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """loss-oscillation found the training loss ending above where it started (its ``low_improvement``
    evidence below zero): a model worse on its own training data than at initialisation is not
    memorising it, so a val loss rising meanwhile is the same breakage, not overfitting."""
    return any(e.code == "low_improvement" and e.observed is not None and e.observed < 0 for e in explainer.evidence)


def loss_still_fell(explainer: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """loss-oscillation's own evidence says the loss fell overall (``low_improvement`` at or above
    zero): what made it look unstable is the spikes that recur at the period, not the optimizer."""
    return any(e.code == "low_improvement" and e.observed is not None and e.observed >= 0 for e in symptom.evidence)


def always(explainer: Finding, symptom: Finding, view: RoleView, t: Thresholds) -> bool:
    """No condition: the explainer names why the run ended worse than its baseline."""
    return True


Condition = Callable[[Finding, Finding, RoleView, Thresholds], bool]


@dataclass(frozen=True)
class Rule:
    explainer: str
    explained: tuple[str, ...]
    condition: Condition
    when: str  # the condition in words (docs)
    why: str  # why the explainer is the cause (docs)


RULES: tuple[Rule, ...] = (
    Rule("nonfinite", ("loss-oscillation", "slow-convergence", "periodic-spikes"), reaches_blowup,
         "the symptom's evidence reaches the blow-up window (the last `blowup_window_share` of the run before the onset)",
         "a run blowing up bounces, stalls and spikes on its way to NaN or divergence: those are the blow-up seen "
         "early, and its fix (clipping, a lower LR, the bad batch) is the fix"),
    Rule("nonfinite", ("overfitting",), starts_in_blowup,
         "the val loss's rise began inside the blow-up window",
         "a val loss that turns up only as the run blows up is the blow-up, not memorisation; a rise that began "
         "well before it is real overfitting and stays"),
    Rule("vanishing-gradients", ("slow-convergence", "loss-oscillation"), overlaps,
         "their evidence spans share steps",
         "a network whose early layers get no gradient learns slowly or stalls: the slow fall is the vanishing "
         "gradient's symptom, and normalisation, residuals or a better init is the fix"),
    Rule("task-imbalance", ("loss-oscillation", "slow-convergence"), on_total_loss,
         "the symptom was measured on the total training or val loss (not a task's loss)",
         "one term dominating the total drives how the total moves: rescaling that term is the fix"),
    Rule("periodic-spikes", ("loss-oscillation",), loss_still_fell,
         "the loss fell overall (loss-oscillation's `low_improvement` at or above zero)",
         "spikes that recur with the data order make a loss that learns look unstable; the bad shard or "
         "unshuffled loader is the cause, and fixing it removes the swings"),
    Rule("loss-oscillation", ("overfitting",), training_loss_rose,
         "loss-oscillation found the training loss ending above its start",
         "a run that ends worse on its training data than it began is not memorising it: the val loss rising "
         "with it is the same unstable optimisation, and its fix (a lower LR, warm-up) is the fix"),
    Rule("slow-convergence", ("loss-oscillation",), only_no_learning,
         "loss-oscillation reports only that the loss never learned or stopped moving (no swings), and slow-convergence still sees it falling",
         "a loss crawling down steadily is learning, too slowly: that is the finding, and its fix (LR, init, "
         "normalisation) is the one to try; this rule runs after the others, and only an unexplained "
         "slow-convergence explains"),
    *(Rule(cause, ("baseline-regression",), always, "always",
           "a run worse than its baseline because it is slow, unstable, overfitting or blew up has that finding as "
           "its cause, and that finding's fix; baseline-regression stands alone only when nothing else says why")
      for cause in ("nonfinite", "vanishing-gradients", "task-imbalance", "periodic-spikes",
                    "overfitting", "loss-oscillation", "slow-convergence")),
)


def explain(findings: Sequence[Finding], view: RoleView, thresholds: Thresholds = DEFAULTS) -> tuple[Finding, ...]:
    """The findings in their order, each symptom a rule explains marked with ``explained_by``."""
    # Rules whose explainer is some rule's symptom run last, on what the others left unexplained, so
    # an explained finding never explains another (no chains).
    symptoms = {s for r in RULES for s in r.explained}
    first = tuple(r for r in RULES if r.explainer not in symptoms)
    out = _apply(tuple(findings), view, thresholds, first)
    # The rest one rule at a time, a rule whose explainer some later-running rule can explain going
    # after that rule (periodic-spikes and slow-convergence may explain loss-oscillation, which may
    # explain overfitting): each explainer is settled before it explains.
    for rule in _ordered(tuple(r for r in RULES if r.explainer in symptoms)):
        out = _apply(out, view, thresholds, (rule,))
    return out


def _ordered(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """``rules`` so that a rule runs after every rule that explains its explainer (the table has no cycle)."""
    done: list[Rule] = []
    pending = list(rules)
    while pending:
        ready = [r for r in pending if not any(r.explainer in o.explained for o in pending if o is not r)]
        if not ready:
            raise ValueError("explain rules form a cycle: " + ", ".join(f"{r.explainer}->{r.explained}" for r in pending))
        done += ready
        pending = [r for r in pending if r not in ready]
    return tuple(done)


def _apply(findings: tuple[Finding, ...], view: RoleView, thresholds: Thresholds, rules: tuple[Rule, ...]) -> tuple[Finding, ...]:
    by_id = {f.id: f for f in findings if f.is_problem and f.explained_by is None}
    out = []
    for f in findings:
        if f.is_problem:
            for rule in rules:
                explainer = by_id.get(rule.explainer)
                if (f.id in rule.explained and explainer is not None and explainer.id != f.id
                        and LEVEL_RANK[explainer.level] >= LEVEL_RANK[f.level]
                        and rule.condition(explainer, f, view, thresholds)):
                    f = dataclasses.replace(f, explained_by=explainer.id)
                    break
        out.append(f)
    return tuple(out)


def rules_markdown() -> str:
    """The rules table as docs/design.md shows it (a test keeps the two the same)."""
    rows = ["| explainer | explains | when | why |", "|---|---|---|---|"]
    # Rules alike but for their explainer (every cause explains baseline-regression) share one row.
    merged: dict[tuple, list[str]] = {}
    for r in RULES:
        merged.setdefault((r.explained, r.when, r.why), []).append(r.explainer)
    for (explained, when, why), explainers in merged.items():
        rows.append(f"| {', '.join(f'`{e}`' for e in explainers)} | {', '.join(f'`{s}`' for s in explained)} | {when} | {why} |")
    return "\n".join(rows)
