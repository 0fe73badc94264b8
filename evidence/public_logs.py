"""Score the diagnoses on real public logs with our labels: ``python -m evidence.public_logs``.

Two label sets: ``shared/realworld/labels.json`` (logs in ``shared/realworld/``) and
``evidence/public/labels.json`` (logs under ``shared/realworld/more/``, or wherever
``TRACKERHEALTH_PUBLIC_LOGS`` points; this repository does not commit the data files —
``python -m evidence.public.restore DIR`` rebuilds them from their repositories, see
evidence/public/README.md).
Ambiguous cases are not scored. A labelled log whose file is absent is reported as missing, never
scored as anything.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trackerhealth.adapters.files import InputError, read_histories
from trackerhealth.engine import analyze

from .score import Case, case, render

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "realworld"
# Where the restored public logs live: ``python -m evidence.public.restore DIR`` writes them anywhere;
# the steering repo keeps a copy in shared/realworld/more.
PUBLIC_LOGS = Path(os.environ.get("TRACKERHEALTH_PUBLIC_LOGS") or SHARED / "more")
SETS = {
    "realworld": (SHARED / "labels.json", SHARED),
    "public": (REPO / "evidence" / "public" / "labels.json", PUBLIC_LOGS),
}


UNREADABLE = "(unreadable)"


def cases(which: str, strict: bool = False) -> tuple[list[Case], list[str]]:
    labels_path, root = SETS[which]
    runs = json.loads(labels_path.read_text())["runs"]
    out, missing = [], []
    for run_id, label in sorted(runs.items()):
        if label.get("ambiguous"):
            continue
        path = root / label["path"]
        if not path.exists():
            missing.append(run_id)
            continue
        try:
            histories = read_histories(path)
        except InputError:
            # A log the reader refuses gets no verdict: every label it carries is missed, and a healthy
            # log is not counted as rightly healthy (UNREADABLE is no diagnosis, so it is no one's false alarm).
            out.append(case(run_id, label["labels"], label.get("also_acceptable", ()), {UNREADABLE}, label.get("format", ""), strict))
            continue
        # A file holding several runs (detectron2's concatenated metrics.json) is judged as its worst.
        flagged = frozenset(f.id for h in histories for f in analyze(h).problems)
        out.append(case(run_id, label["labels"], label.get("also_acceptable", ()), flagged, label.get("format", ""), strict))
    return out, missing


def main(argv: list[str]) -> int:
    strict = "--strict" in argv
    for which in [a for a in argv if not a.startswith("--")] or list(SETS):
        found, missing = cases(which, strict)
        print(render(found, f"{which}: {len(found)} scored logs" + (" (strict: only the label itself counts)" if strict else "")))
        if missing:
            print(f"missing files (not scored): {', '.join(missing)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
