"""Score the diagnoses against the trained corpus: per-diagnosis precision and recall.

Run ``python -m tests.corpus.evaluate [heldout]`` for the table; the accuracy test asserts the same
numbers. ``heldout/`` holds the same scenarios trained with other seeds (``generate --seed-offset
1000``): the thresholds were tuned on the main corpus only, so the held-out scores show whether
they generalise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trackerhealth import diagnoses
from trackerhealth.adapters.files import read_histories
from trackerhealth.engine import analyze

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Outcome:
    name: str
    faults: frozenset[str]
    flagged: frozenset[str]
    levels: dict


def load_manifest(folder: Path = HERE) -> list[dict]:
    return json.loads((folder / "manifest.json").read_text())


def run_corpus(folder: Path = HERE) -> list[Outcome]:
    outcomes = []
    for entry in load_manifest(folder):
        histories = read_histories(folder / entry["file"])
        assert len(histories) == 1, (entry["name"], len(histories))
        report = analyze(histories[0])
        flagged = frozenset(f.id for f in report.problems)
        outcomes.append(
            Outcome(entry["name"], frozenset(entry["faults"]), flagged, {f.id: f.level for f in report.findings})
        )
    return outcomes


def precision_recall(outcomes: list[Outcome]) -> dict[str, dict[str, float]]:
    table = {}
    for diag_id in diagnoses.SINGLE_RUN:  # the numpy corpus is single runs: nothing to compare with
        tp = sum(1 for o in outcomes if diag_id in o.flagged and diag_id in o.faults)
        fp = sum(1 for o in outcomes if diag_id in o.flagged and diag_id not in o.faults)
        fn = sum(1 for o in outcomes if diag_id not in o.flagged and diag_id in o.faults)
        table[diag_id] = {
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 1.0,
        }
    return table


def main() -> None:
    import sys

    outcomes = run_corpus(HERE / sys.argv[1] if len(sys.argv) > 1 else HERE)
    for o in outcomes:
        mark = "ok " if o.flagged == o.faults else "XX "
        print(f"{mark}{o.name:<45} faults={sorted(o.faults)} flagged={sorted(o.flagged)}")
    print()
    for diag_id, row in precision_recall(outcomes).items():
        print(
            f"{diag_id:<22} precision {row['precision']:.2f}  recall {row['recall']:.2f}  (tp {row['tp']}, fp {row['fp']}, fn {row['fn']})"
        )
    healthy = [o for o in outcomes if not o.faults]
    print(f"healthy runs with any finding: {sum(1 for o in healthy if o.flagged)} of {len(healthy)}")


if __name__ == "__main__":
    main()
