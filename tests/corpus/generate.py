"""Regenerate the evidence corpus: train every scenario, write its log and the manifest.

    python -m tests.corpus.generate                 # everything (~1-2 min on 2 cores)
    python -m tests.corpus.generate --only NAME     # one run (comma-separated names allowed)
    python -m tests.corpus.generate --out /tmp/c    # somewhere else
    python -m tests.corpus.generate --list          # list scenario names
    python -m tests.corpus.generate --out tests/corpus/heldout --seed-offset 1000
                                                    # a held-out set: same scenarios, new seeds

After training, each run is summarised (loss first/min/max/last, val trend, grad-norm
ranges, timing means) and checked against what its fault must look like (see
``checks.py``); a run whose fault did not really happen is reported as FAIL and the
exit status is 1.
"""

from __future__ import annotations

import os

# single-threaded BLAS: the tiny matmuls are faster this way and results are reproducible
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from . import scenarios, scenarios_healthy, scenarios_more  # noqa: E402,F401  (registration)
from .checks import check, summarize  # noqa: E402
from .loop import SCENARIOS  # noqa: E402

HERE = Path(__file__).resolve().parent


def manifest_entry(sc, seed_offset=0):
    return {
        "name": sc.name,
        "file": sc.file,
        "format": sc.fmt,
        "faults": sc.faults,
        "description": sc.description,
        "model": sc.model,
        "dataset": sc.dataset,
        "seed": sc.seed + seed_offset,
        "cadence": sc.cadence,
        "naming_style": sc.naming,
    }


def readme_table(entries):
    lines = [
        "| run | format | model | dataset | what was done | cadence | naming | faults |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(x):
        return str(x).replace("|", "\\|")

    for e in entries:
        faults = ", ".join(f"`{f}`" for f in e["faults"]) or "healthy"
        lines.append(
            f"| `{e['name']}` | {e['format']} | {cell(e['model'])} | {cell(e['dataset'])} | "
            f"{cell(e['description'])} | {cell(e['cadence'])} | {cell(e['naming_style'])} | {faults} |"
        )
    return "\n".join(lines)


def replace_block(text, tag, body):
    pat = re.compile(rf"(<!-- {tag}:start -->\n).*?(<!-- {tag}:end -->)", re.S)
    return pat.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--out", default=str(HERE), help="output folder (default: tests/corpus)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--seed-offset", type=int, default=0,
                    help="add to every scenario's seed (a held-out set); runs whose fault did not happen are left out")
    args = ap.parse_args(argv)

    if args.list:
        for sc in SCENARIOS.values():
            print(f"{sc.name:40s} {','.join(sc.faults) or 'healthy'}")
        return 0

    names = list(SCENARIOS)
    if args.only:
        want = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in want if n not in SCENARIOS]
        if unknown:
            print(f"unknown scenario(s): {', '.join(unknown)}; see --list", file=sys.stderr)
            return 2
        names = want

    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    summaries, failures = {}, []
    t_all = time.perf_counter()
    for name in names:
        sc = SCENARIOS[name]
        t0 = time.perf_counter()
        log = sc.fn(name, sc.seed + args.seed_offset)
        dt = time.perf_counter() - t0
        log.write(out / sc.file, sc.fmt)
        size = (out / sc.file).stat().st_size
        summ = summarize(sc, log)
        ok, notes = check(sc, log)
        status = "ok  " if ok else "FAIL"
        if not ok:
            failures.append(name)
        line = (
            f"{status} {name} [{', '.join(sc.faults) or 'healthy'}] {dt:.1f}s {size / 1024:.0f}KB\n"
            f"     {summ}\n     checks: {notes}"
        )
        print(line, flush=True)
        summaries[name] = f"- `{name}` ({', '.join(sc.faults) or 'healthy'}): {summ}; checks: {notes}"

    # manifest: merge with the existing one so --only keeps the other entries
    man_path = out / "manifest.json"
    existing = {}
    if man_path.exists() and args.only:
        existing = {e["name"]: e for e in json.loads(man_path.read_text())}
    for name in names:
        if args.seed_offset and name in failures:
            # With new seeds a fault may not happen: such a run is not evidence either way.
            existing.pop(name, None)
            continue
        existing[name] = manifest_entry(SCENARIOS[name], args.seed_offset)
    entries = [existing[n] for n in SCENARIOS if n in existing]
    man_path.write_text(json.dumps(entries, indent=2) + "\n")

    # README blocks (table always; summaries only on a full run)
    readme = out / "README.md"
    if readme.exists():
        text = readme.read_text()
        text = replace_block(text, "table", readme_table(entries))
        if not args.only:
            text = replace_block(text, "summary", "\n".join(summaries[n] for n in names))
        readme.write_text(text)

    total = sum((out / e["file"]).stat().st_size for e in entries if (out / e["file"]).exists())
    print(
        f"\n{len(names)} runs in {time.perf_counter() - t_all:.1f}s; corpus files {total / 1024:.0f} KB; "
        f"{len(failures)} failed checks{': ' + ', '.join(failures) if failures else ''}"
    )
    return 1 if failures and not args.seed_offset else 0


if __name__ == "__main__":
    sys.exit(main())
