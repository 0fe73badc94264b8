"""The diagnoses reference, as ``trackerhealth diagnoses`` prints it and docs/diagnoses.md holds it.

Rendered from the code only: each module's docstring (what it looks for, why it matters), its
``RECOMMENDATION`` (the fix, the same text a finding carries) and its ``Thresholds`` fields
(name, default, meaning); then the scorecard's thresholds. Nothing here is written twice.
"""

from __future__ import annotations

from .. import scorecard
from . import REGISTRY, Diagnosis, get
from ._thresholds import described

FORMATS = ("text", "markdown")


def select(diagnosis_id: str | None) -> tuple[list[Diagnosis], bool]:
    """The diagnoses to show and whether the scorecard's thresholds are shown too.

    ``None`` is everything; ``scorecard`` is only the scorecard; an unknown id raises KeyError
    naming the known ones.
    """
    if diagnosis_id is None:
        return list(REGISTRY.values()), True
    if diagnosis_id == scorecard.ID:
        return [], True
    try:
        return [get(diagnosis_id)], False
    except KeyError:
        raise KeyError(f"unknown diagnosis {diagnosis_id!r}; known: {', '.join(REGISTRY)}, {scorecard.ID}") from None


def render(diagnosis_id: str | None = None, fmt: str = "text") -> str:
    """The listing for one diagnosis id (its full page in text), ``scorecard``, or all of them."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    chosen, with_scorecard = select(diagnosis_id)
    if fmt == "markdown":
        return markdown(chosen, with_scorecard)
    return text(chosen, with_scorecard, detailed=diagnosis_id is not None)


def page(d: Diagnosis) -> str:
    """The diagnosis' documentation: its docstring, the fix from ``RECOMMENDATION``, then the real
    runs it catches (``REAL_CASES``)."""
    cases = "\n".join(c.markdown() for c in d.real_cases)
    return f"{d.doc}\n\n**Fix.** {d.recommendation}\n\n**Real cases.**\n\n{cases}"


def markdown(chosen: list[Diagnosis], with_scorecard: bool = True) -> str:
    out: list[str] = []
    for d in chosen:
        out += [f"### `{d.id}` — {d.title}", "", page(d), "", *_table(d.threshold_meanings()), ""]
    if with_scorecard:
        out += [f"### `{scorecard.ID}` — {scorecard.TITLE}", "", _scorecard_doc(), "",
                *_table(described(scorecard.Thresholds)), ""]
    return "\n".join(out)


def text(chosen: list[Diagnosis], with_scorecard: bool = True, detailed: bool = False) -> str:
    out: list[str] = []
    for d in chosen:
        out += [f"{d.id}  —  {d.title}", f"  needs: {', '.join(d.needs)}"]
        out += ["", page(d), ""] if detailed else [f"  {d.summary}"]
        out += ["  thresholds:", *_lines(d.threshold_meanings()), ""]
    if with_scorecard:
        out += [f"{scorecard.ID}  —  {scorecard.TITLE} (config [thresholds.{scorecard.ID}])", "  thresholds:",
                *_lines(described(scorecard.Thresholds)), ""]
    return "\n".join(out).rstrip("\n")


def _scorecard_doc() -> str:
    return (scorecard.__doc__ or "").strip()


def _table(rows) -> list[str]:
    return ["| threshold | default | meaning |", "|---|---|---|",
            *(f"| `{name}` | {default} | {meaning.replace('|', '/')} |" for name, default, meaning in rows)]


def _lines(rows) -> list[str]:
    width = max((len(f"{name} = {default}") for name, default, _ in rows), default=0)
    return [f"    {f'{name} = {default}':<{width}}  {meaning}" for name, default, meaning in rows]
