"""How long `trackerhealth --help` takes to start, as a ratio to `python -c "import click"`.

Both run as fresh processes, 5 times each, interleaved; the medians are compared. The target
(issue 13) is at most 3x: the CLI's help should cost little more than click itself.

    python bench/bench_cli_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def _time(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    script = shutil.which("trackerhealth")
    cli = [script, "--help"] if script else [sys.executable, "-m", "trackerhealth.cli", "--help"]
    commands = {
        "python -c 'import click'": [sys.executable, "-c", "import click"],
        "trackerhealth --help": cli,
        "trackerhealth --version": [*cli[:-1], "--version"],
        "trackerhealth scan --help": [*cli[:-1], "scan", "--help"],
    }
    for cmd in commands.values():  # warm the file cache
        _time(cmd)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.repeat):
        for name, cmd in commands.items():
            times[name].append(_time(cmd))
    base = statistics.median(times["python -c 'import click'"])
    print(f"median of {args.repeat} ({' '.join(cli[:-1])})")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:<28} {median * 1000:7.1f} ms   {median / base:4.2f}x")


if __name__ == "__main__":
    main()
