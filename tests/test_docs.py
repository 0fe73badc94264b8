"""Docs that cannot drift: the diagnoses reference is generated, the README's commands exist."""

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from trackerhealth.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_diagnoses_reference_matches_the_code():
    generated = CliRunner().invoke(main, ["diagnoses", "--format", "markdown"]).output
    doc = (ROOT / "docs" / "diagnoses.md").read_text()
    assert generated.strip() in doc, "regenerate: trackerhealth diagnoses --format markdown (see docs/diagnoses.md)"


def test_readme_starts_with_the_two_fresh_machine_commands_and_they_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, re.S)
    first = blocks[0]
    assert "trackerhealth" in first and "pytest" in blocks[0] + blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest" in ci and "python -m pytest" in readme


def test_every_command_has_examples_in_its_help():
    for command in ([], ["analyze"], ["report"], ["diagnoses"]):
        out = CliRunner().invoke(main, [*command, "--help"]).output
        assert "Examples:" in out, command


def test_the_readme_example_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "trackerhealth.cli", "analyze", str(ROOT / "examples" / "logs"),
                          "--format", "json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr  # the examples include critical runs, on purpose
    assert '"overfitting"' in out.stdout and '"nonfinite"' in out.stdout
