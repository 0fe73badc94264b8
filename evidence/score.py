"""Scoring verdicts against labels: per-diagnosis precision, recall and F1, macro-F1, healthy runs flagged.

A case is ``(name, labels, also_acceptable, flagged)``. A flagged id that is a label is a true
positive; one in ``also_acceptable`` is neither right nor wrong (a defensible reading, not counted);
any other is a false positive. A label not flagged is a false negative.

:func:`case` builds one the way the contract reads a run: one cause gives one finding
(:mod:`trackerhealth.explain`), so when a label was not flagged but an acceptable reading that the
contract lets explain it was (a never-learning loss reported as ``slow-convergence``, a bouncing
loss the twin also shows blowing up reported as ``nonfinite``), that finding named the fault and
is the label. ``strict=True`` skips this: only the label itself counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trackerhealth import diagnoses, explain


@dataclass(frozen=True)
class Case:
    name: str
    labels: frozenset[str]
    also_acceptable: frozenset[str]
    flagged: frozenset[str]
    group: str = ""  # the family (torch corpus) or the format (public logs)

    @property
    def wrong(self) -> frozenset[str]:
        return self.flagged - self.labels - self.also_acceptable

    @property
    def missed(self) -> frozenset[str]:
        return self.labels - self.flagged


def explains(explainer: str, symptom: str) -> bool:
    """The contract's explain rules let ``explainer`` stand for ``symptom`` (one cause, one finding)."""
    return any(r.explainer == explainer and symptom in r.explained for r in explain.RULES)


def case(name: str, labels: Iterable[str], also: Iterable[str], flagged: Iterable[str], group: str = "",
         strict: bool = False) -> Case:
    labels, also, flagged = set(labels), set(also), frozenset(flagged)
    if not strict:
        for label in sorted(labels - flagged):
            stand_in = sorted(x for x in also & flagged if explains(x, label))
            if stand_in:
                labels = (labels - {label}) | {stand_in[0]}
                also = (also - {stand_in[0]}) | {label}
    return Case(name, frozenset(labels), frozenset(also - labels), flagged, group)


def table(cases: Sequence[Case]) -> dict[str, dict[str, float]]:
    out = {}
    for diag_id in diagnoses.REGISTRY:
        tp = sum(1 for c in cases if diag_id in c.flagged and diag_id in c.labels)
        fp = sum(1 for c in cases if diag_id in c.wrong)
        fn = sum(1 for c in cases if diag_id in c.missed)
        p = tp / (tp + fp) if tp + fp else None
        r = tp / (tp + fn) if tp + fn else None
        f1 = (2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else None
        out[diag_id] = {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": f1}
    return out


def macro_f1(cases: Sequence[Case]) -> float:
    """Mean F1 over the diagnoses that were labelled or flagged at least once."""
    f1s = [row["f1"] for row in table(cases).values() if row["f1"] is not None]
    return sum(f1s) / len(f1s) if f1s else float("nan")


def healthy_flagged(cases: Iterable[Case]) -> tuple[int, int]:
    healthy = [c for c in cases if not c.labels]
    return sum(1 for c in healthy if c.wrong), len(healthy)


def record(result: dict, path) -> str:
    """Write ``result`` (its keys that do not start with ``_``: those hold live objects) as the JSON
    a test re-derives; returns the path."""
    clean = {k: v for k, v in result.items() if not k.startswith("_")}
    path.write_text(json.dumps(clean, indent=1, sort_keys=True) + "\n")
    return str(path)


def render(cases: Sequence[Case], title: str) -> str:
    def pct(x):
        return "–" if x is None else f"{x:.2f}"

    lines = [f"### {title}", "", "| diagnosis | precision | recall | F1 | tp | fp | fn |", "|---|---|---|---|---|---|---|"]
    for diag_id, row in table(cases).items():
        lines.append(f"| `{diag_id}` | {pct(row['precision'])} | {pct(row['recall'])} | {pct(row['f1'])} | {row['tp']} | {row['fp']} | {row['fn']} |")
    bad, total = healthy_flagged(cases)
    lines += ["", f"macro-F1 {macro_f1(cases):.2f}; healthy runs with a wrong finding: {bad} of {total}", ""]
    wrong = [c for c in cases if c.wrong or c.missed]
    for c in wrong:
        lines.append(f"- {c.name} ({c.group}): labels {sorted(c.labels)}, flagged {sorted(c.flagged)}")
    return "\n".join(lines)
