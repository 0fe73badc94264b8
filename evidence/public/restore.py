"""Rebuild the labelled public logs' data files from their git repositories.

    python -m evidence.public.restore OUT [--mirrors DIR]

Each entry of ``labels.json`` names a repository, a full commit and a path in it; the file (or folder)
at that commit is written to ``OUT/<entry's path>``, byte for byte. With ``--mirrors DIR`` the
repositories are read from bare git directories ``DIR/<owner>+<name>/repo`` (the layout the tool
library's ``fetch`` leaves); without it each repository is cloned from GitHub into a temporary
folder. Then point the evidence at OUT: ``TRACKERHEALTH_PUBLIC_LOGS=OUT python -m evidence.public_logs``.

Git does the work (each blob under one path at one commit), so the copy is exactly the blob the
author committed; nothing here parses or rewrites a log.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

LABELS = Path(__file__).with_name("labels.json")


def _git_dir(repo: str, mirrors: Path | None, scratch: Path) -> Path:
    if mirrors is not None:
        found = mirrors / repo.replace("/", "+") / "repo"
        if (found / ".git").is_dir():  # fetch leaves some snapshots as a work-tree layout, repo/.git
            found = found / ".git"
        if not found.is_dir():
            raise SystemExit(f"no mirror of {repo} at {found}: fetch it first, or drop --mirrors to clone from GitHub")
        return found
    target = scratch / repo.replace("/", "+")
    if not target.is_dir():
        subprocess.run(["git", "clone", "--bare", "--quiet", f"https://github.com/{repo}.git", str(target)], check=True)
    return target


def _commit_time(git_dir: Path, commit: str) -> int:
    """The commit's committer time (unix seconds), read from the commit object alone: a partial mirror
    may lack objects that ``git show`` would also read."""
    body = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "commit", commit],
                          check=True, capture_output=True, text=True).stdout
    committer = next(line for line in body.splitlines() if line.startswith("committer "))
    return int(committer.rsplit(" ", 2)[-2])


def restore_one(git_dir: Path, commit: str, repo_path: str, destination: Path) -> tuple[int, list[str]]:
    """Write ``repo_path`` at ``commit`` to ``destination``; returns (files written, blobs the clone lacks).

    One ``git cat-file`` per blob rather than one ``git archive``: a shallow or size-limited mirror
    may lack a checkpoint stored beside the logs, and that must cost the checkpoint, not the log.
    """
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit, "--", repo_path],
                             check=True, capture_output=True).stdout.decode()
    # Each file is dated to its commit: a log is historical, and a W&B log without an exit record that
    # looks freshly written reads as a run still in progress (public log P306), so a restore's own time
    # would change the verdicts from one hour to the next.
    committed = _commit_time(git_dir, commit)
    written, absent = 0, []
    prefix = Path(repo_path.rstrip("/"))
    for entry in filter(None, listing.split("\0")):
        meta, name = entry.split("\t", 1)
        _mode, kind, blob = meta.split()
        if kind != "blob":
            continue
        body = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", blob], capture_output=True)
        if body.returncode != 0:
            absent.append(name)
            continue
        relative = Path(name).relative_to(prefix)
        out = destination / relative if relative != Path() else destination
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(body.stdout)
        os.utime(out, (committed, committed))
        written += 1
    if not written:
        raise SystemExit(f"{repo_path} at {commit} gave no file from {git_dir}")
    return written, absent


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m evidence.public.restore", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write the logs into (the labels' paths are relative to it)")
    parser.add_argument("--mirrors", type=Path, help="folder of bare git mirrors named <owner>+<name>/repo")
    parser.add_argument("--skip-missing", action="store_true",
                        help="with --mirrors: restore the logs whose repository is mirrored and list the others, "
                             "instead of stopping at the first missing one (a fetch quota may not cover them all)")
    args = parser.parse_args(argv)
    runs = json.loads(LABELS.read_text())["runs"]
    missing: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        for run_id, label in sorted(runs.items()):
            destination = args.out / label["path"]
            if destination.exists():
                continue
            try:
                git_dir = _git_dir(label["repo"], args.mirrors, Path(scratch))
            except SystemExit:
                if not (args.skip_missing and args.mirrors is not None):
                    raise
                missing.append(run_id)
                continue
            count, absent = restore_one(git_dir, label["commit"], label["repo_path"], destination)
            print(f"{run_id}: {count} file(s) -> {destination}" + (f" (not in the clone: {', '.join(absent)})" if absent else ""))
    if missing:
        print(f"{len(missing)} log(s) not restored, their repository not mirrored: {' '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
