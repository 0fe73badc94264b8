"""Runs compared with their group on the torch corpus: ``python -m evidence.cohort [--write]``.

Every run of the corpus (scored or not: in a real project the unconfirmed runs are siblings too) is
grouped by the model and the data set its manifest entry names, as ``scan --group-by params.model
--group-by params.dataset`` groups an MLflow project, and analysed with its group
(:func:`trackerhealth.cohort.analyze_groups`). The scored runs are then scored as the
leave-one-family-out figures are (``evidence/score.py``), next to the same runs analysed alone.
``--write`` stores the tables in ``evidence/torch/cohort.json``; ``tests/test_torch_corpus.py``
re-derives and checks them.

The cohort rule's numbers were fixed before this ran, not chosen on it: 4× the baseline's steps (the
issue's figure) at half the baseline's fall (the middle of its curve, where a slow run and a healthy
one differ most plainly).
"""

from __future__ import annotations

import dataclasses
import sys
from functools import lru_cache

from trackerhealth.adapters.files import read_histories
from trackerhealth.cohort import analyze_groups
from trackerhealth.engine import analyze
from trackerhealth.schema import HealthReport, RunHistory

from . import lofo, score
from .score import Case, healthy_flagged, macro_f1, render, table
from .torch import manifest

RESULT = lofo.TORCH / "cohort.json"
GROUP_BY = ("model", "dataset")


@lru_cache(maxsize=1)
def everything() -> tuple[tuple[dict, RunHistory], ...]:
    """Every run of the corpus with its history, scored or not. A run whose file carries no config
    (CSV, Parquet) gets its manifest config, as its tracker would hold it (MLflow params, W&B config):
    ``evidence/cohort_mlflow.py`` logs exactly that as params."""
    out = []
    for entry in manifest.load():
        histories = read_histories(lofo.TORCH / entry["file"])
        if len(histories) != 1:
            raise ValueError(f"{entry['name']}: {entry['file']} holds {len(histories)} runs, expected 1")
        h = histories[0]
        config = {**entry["config"], "model": entry["model"], "dataset": entry["dataset"], **h.ref.config}
        out.append((entry, RunHistory(dataclasses.replace(h.ref, config=config), {k: h[k] for k in h.keys()}, h.notes)))
    return tuple(out)


def _key_of(entry: dict) -> tuple:
    return tuple((f"params.{k}", str(entry[k])) for k in GROUP_BY)


def grouped_reports(family: str | None = None, config=None) -> dict[str, HealthReport]:
    """Each run's report when analysed with its (model, dataset) group, by run name: every run, or
    those of one ``family``, with ``config`` (None: the shipped defaults)."""
    if family is None and config is None:
        return dict(_every_run_grouped_with_defaults())
    return _grouped_reports(family, config)


@lru_cache(maxsize=1)
def _every_run_grouped_with_defaults() -> dict[str, HealthReport]:
    # The whole corpus with the shipped defaults is asked for by evaluate() and by a test beside it.
    return _grouped_reports(None, None)


def _grouped_reports(family: str | None, config) -> dict[str, HealthReport]:
    runs = [(e, h) for e, h in everything() if family is None or e["family"] == family]
    by_id = {h.ref.id: e for e, h in runs}
    reports = analyze_groups([h for _, h in runs], config, lambda history: _key_of(by_id[history.ref.id]))
    return {by_id[r.run.id]["name"]: r for r in reports}


def held_out_grouped_cases() -> list[Case]:
    """The scored runs analysed with their groups, each family with the single-run thresholds its
    leave-one-family-out fold chose on the other families (``evidence/torch/lofo.json``). A group
    never spans two families (each family has its own models), so no fold sees another's runs."""
    runs = everything()
    families = {}
    for e, _ in runs:
        families.setdefault(_key_of(e), set()).add(e["family"])
    assert all(len(f) == 1 for f in families.values()), "a group spans two families"
    folds = lofo.recorded()["folds"]
    out = []
    for family, fold in sorted(folds.items()):
        reports = grouped_reports(family, lofo.config_for(fold["chosen"]))
        out += [_case(e, reports[e["name"]]) for e, _ in runs if e["family"] == family and lofo.scored(e)]
    return out


def _case(entry: dict, report: HealthReport, strict: bool = False) -> Case:
    flagged = frozenset(f.id for f in report.problems)
    labels, also = lofo.resolve_one_of(entry, flagged)
    if entry["faults"]:
        # The corpus labels causes, and baseline-regression names none: on a run whose twin confirmed
        # a fault it is a true statement ("worse than the group's best") that finds no cause — neither
        # a hit nor a false alarm. The fault it leaves unnamed is still a miss. On a healthy run it is
        # a false alarm.
        also = also | {"baseline-regression"}
    return score.case(entry["name"], labels, also, flagged, entry["family"], strict)


def evaluate() -> dict:
    runs = [(e, h) for e, h in everything() if lofo.scored(e)]
    grouped = grouped_reports()
    with_groups = [_case(e, grouped[e["name"]]) for e, _ in runs]
    alone = [_case(e, analyze(h)) for e, h in runs]
    slow_alone_missed = sorted(c.name for c in alone if "slow-convergence" in c.missed)
    slow_found_grouped = sorted(c.name for c in with_groups if "slow-convergence" in c.labels and "slow-convergence" in c.flagged)
    baselines = sorted({(f"{r.group['label']}", r.group.get("baseline_name") or "none")
                        for r in grouped.values() if r.group is not None and r.group["size"] > 1})
    families = sorted({e["family"] for e, _ in runs})
    held_out = held_out_grouped_cases()
    return {
        "grouped_held_out": table(held_out), "grouped_held_out_macro_f1": macro_f1(held_out),
        "grouped_held_out_healthy_flagged": healthy_flagged(held_out),
        "group_by": [f"params.{k}" for k in GROUP_BY],
        "grouped": table(with_groups), "grouped_macro_f1": macro_f1(with_groups),
        "grouped_healthy_flagged": healthy_flagged(with_groups),
        "alone": table(alone), "alone_macro_f1": macro_f1(alone), "alone_healthy_flagged": healthy_flagged(alone),
        "per_family_grouped": {f: table([c for c in with_groups if c.group == f])["slow-convergence"] for f in families},
        "slow_missed_alone_found_grouped": sorted(set(slow_alone_missed) & set(slow_found_grouped)),
        "baselines": [list(b) for b in baselines],
        "_grouped_cases": with_groups, "_alone_cases": alone, "_held_out_cases": held_out,
    }


def main(argv: list[str]) -> int:
    result = evaluate()
    print(render(result["_alone_cases"], "each run analysed alone (shipped defaults)"))
    print(render(result["_grouped_cases"], f"each run analysed with its group ({', '.join(result['group_by'])})"))
    print(render(result["_held_out_cases"], "with its group, each family with the thresholds its leave-one-family-out "
                                             "fold chose on the other families"))
    print("slow runs the single-run rule missed and the group found:", ", ".join(result["slow_missed_alone_found_grouped"]) or "none")
    for label, base in result["baselines"]:
        print(f"- group {label}: baseline {base}")
    if "--write" in argv:
        print(f"wrote {score.record(result, RESULT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
