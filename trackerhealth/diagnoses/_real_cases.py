"""A real run each diagnosis catches, as its documentation page quotes it.

Each diagnosis module lists its ``REAL_CASES``: runs from the project's evidence — a real torch
training of ``evidence/torch/`` or a labelled public log of ``evidence/public/`` — whose fault was
confirmed without the detector (a twin run with the sane setting, or our reading of the numbers),
with an excerpt of what the finding says about it. ``tests/test_real_cases.py`` analyses each run's
cached log again and checks that the finding still says that, so a page never quotes a verdict the
code no longer gives.
"""

from __future__ import annotations

from dataclasses import dataclass

TORCH = "torch"
PUBLIC = "public"


@dataclass(frozen=True)
class RealCase:
    run: str  # the run's name in evidence/torch/manifest.json, or a public log's id in evidence/public/labels.json
    corpus: str  # TORCH or PUBLIC
    setting: str  # what is wrong with the run (or, for a public log, where it comes from)
    says: str  # an excerpt of the finding's message; "…" stands for text left out
    grouped: bool = False  # analysed with its group (same model and data set), as `scan` does
    explained_by: str | None = None  # the stronger finding that is tagged instead (one cause, one finding)

    def __post_init__(self):
        if self.corpus not in (TORCH, PUBLIC):
            raise ValueError(f"{self.run}: corpus must be {TORCH!r} or {PUBLIC!r}, not {self.corpus!r}")

    @property
    def pieces(self) -> list[str]:
        """The excerpt's parts between the "…" marks: each must appear, in this order, in the message."""
        return [p.strip() for p in self.says.split("…") if p.strip()]

    def markdown(self) -> str:
        where = "a real torch training in `evidence/torch/`" if self.corpus == TORCH else "a labelled public log, `evidence/public/`"
        how = " analysed with its group" if self.grouped else ""
        tail = f" — not tagged: `{self.explained_by}` explains it and is the finding tagged" if self.explained_by else ""
        return f"- `{self.run}` ({where}{how}): {self.setting}. “{self.says}”{tail}"
