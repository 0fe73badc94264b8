"""`trackerhealth --help`, `--version` and `scan --help` start without the heavy libraries.

A fresh interpreter runs each with ``-X importtime`` (which lists every module imported, on
stderr); none of the analysis core's or integrations' libraries may appear in that list.
"""

import subprocess
import sys

import pytest

HEAVY = ("scipy", "pandas", "pyarrow", "plotly", "mlflow", "wandb", "numpy")


def _imported(*args: str) -> set[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "trackerhealth.cli", *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    modules = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "click" in modules  # the listing works: click is always imported
    return modules


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("scan", "--help"), ("report", "--help"),
                                  ("analyze", "--help"), ("summary", "--help"), ("demo", "--help")])
def test_help_and_version_import_no_heavy_library(args):
    modules = _imported(*args)
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert heavy == [], f"`trackerhealth {' '.join(args)}` imports {heavy[:10]}"


def test_every_command_is_listed_and_loads():
    from click.testing import CliRunner

    from trackerhealth.cli import LAZY_COMMANDS, main

    out = CliRunner().invoke(main, ["--help"])
    assert out.exit_code == 0
    for name in LAZY_COMMANDS:
        assert f"  {name} " in out.stdout, name
        assert main.get_command(None, name).name == name
