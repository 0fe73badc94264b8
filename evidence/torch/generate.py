"""Regenerate the torch corpus: ``python -m evidence.torch.generate [--family F ...] [--only NAME,...] [--out DIR]``.

Each family is a module ``fam_<family>.py`` with ``FAMILY`` and ``build(root: Path, only: set[str] | None)
-> list[dict]`` (manifest entries, twins included). ``--out`` writes elsewhere (the committed corpus
stays as it is); without it, the runs and fragments under this folder are replaced. With ``--only``, the named
runs (and twins the corpus does not hold yet) are added or replaced, and every other run stays as committed.

Asked for several families, it generates each in its own Python process: a family trained after
another in one process did not reproduce its committed runs (the conv family after seqcls gave other
floats; alone it reproduces them exactly), so some state one family's training leaves in torch changes
the next one's arithmetic. A fresh process per family makes "regenerate everything" equal to
"regenerate each family alone", which is what the committed corpus was checked against.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import manifest, recheck

HERE = Path(__file__).parent


def families() -> dict[str, object]:
    found = {}
    for info in pkgutil.iter_modules([str(HERE)]):
        if info.name.startswith("fam_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            found[module.FAMILY] = module
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--family", action="append", help="only these families (repeatable)")
    parser.add_argument("--only", help="only these run names (comma-separated; their twins are trained too)")
    parser.add_argument("--out", type=Path, help="write here instead of the committed corpus")
    args = parser.parse_args(argv)
    root = args.out or HERE
    only = set(args.only.split(",")) if args.only else None
    known = families()
    chosen = args.family or sorted(known)
    unknown = [f for f in chosen if f not in known]
    if unknown:
        parser.error(f"unknown family {unknown}; known: {sorted(known)}")
    if len(chosen) > 1:
        return _each_in_its_own_process(chosen, args)
    for fam in chosen:
        t0 = time.time()
        if only is None:
            entries = recheck.apply(known[fam].build(root, only), root)
            manifest.write_fragment(fam, entries, root / "manifest")
        else:
            entries = _add_named(fam, known[fam], only, root)
        faulty = sum(1 for e in entries if e["faults"])
        def named(e):  # the intended faults, as the labels or the one_of alternatives name them
            return set(e["faults"]) | {d for group in e.get("one_of", ()) for d in group}
        unconfirmed = [e["name"] for e in entries if e["intended"] and not set(e["intended"]) <= named(e)]
        print(f"{fam}: {len(entries)} runs ({faulty} with confirmed faults) in {time.time() - t0:.0f} s; "
              f"intended but not confirmed: {unconfirmed or 'none'}", flush=True)
    return 0


def _add_named(fam: str, module, only: set[str], root: Path) -> list[dict]:
    """Train the named runs (with the twins a family always trains) in a scratch folder, then bring into ``root``
    the named runs and any twin the fragment does not hold yet, and merge their entries into the fragment.
    Twins already in the corpus stay as committed: retrained, their measured timings (and some floats) differ."""
    held = {e["name"] for e in manifest.load(root / "manifest")} if (root / "manifest").exists() else set()
    with tempfile.TemporaryDirectory() as scratch:
        trained = recheck.apply(module.build(Path(scratch), only), Path(scratch))
        new = [e for e in trained if e["name"] in only or e["name"] not in held]
        for entry in new:
            top = Path(entry["file"]).parts[:2]  # runs/<name> or runs/<name>.csv
            source, target = Path(scratch).joinpath(*top), root.joinpath(*top)
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(source, target)
    manifest.merge_fragment(fam, new, root / "manifest")
    return new


def _each_in_its_own_process(chosen: list[str], args: argparse.Namespace) -> int:
    """Run this command once per family, each in a fresh interpreter (see the module docstring)."""
    for fam in chosen:
        command = [sys.executable, "-m", __spec__.name, "--family", fam]
        if args.only:
            command += ["--only", args.only]
        if args.out:
            command += ["--out", str(args.out)]
        code = subprocess.run(command, check=False).returncode
        if code:
            print(f"{fam}: generation failed (exit {code}); the families after it were not generated", file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
