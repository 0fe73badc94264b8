"""The exit-code rule every command uses (trackerhealth.exit_codes)."""

import ast
from pathlib import Path

import pytest

from trackerhealth import exit_codes
from trackerhealth.exit_codes import FINDINGS, OK, UNREACHABLE, USAGE, exit_code

PACKAGE = Path(__file__).resolve().parents[1] / "trackerhealth"


@pytest.mark.parametrize(("statuses", "fail_on", "code"), [
    ([], "critical", OK),
    (["ok", "ok"], "warning", OK),
    (["ok", "warning"], "critical", OK),
    (["ok", "warning"], "warning", FINDINGS),
    (["critical"], "critical", FINDINGS),
    (["critical"], "never", OK),
    (["unknown"], "critical", OK),         # no recognised loss: a warning…
    (["unknown"], "warning", FINDINGS),    # …so it fails --fail-on warning
    (["ok", "error"], "critical", USAGE),  # a failed analysis is never health…
    (["error"], "never", USAGE),           # …whatever --fail-on says
    (["critical", "error"], "critical", USAGE),  # and it is more than "only findings"
])
def test_status_rule(statuses, fail_on, code):
    assert exit_code(statuses, fail_on) == code


def test_input_errors_and_an_unreachable_tracker_outrank_findings():
    assert exit_code(["critical"], "critical", input_errors=True) == USAGE
    assert exit_code(["critical"], "critical", input_errors=True, unreachable=True) == UNREACHABLE
    assert exit_code([], "never", unreachable=True) == UNREACHABLE


def test_unknown_fail_on_is_a_programming_error():
    with pytest.raises(ValueError, match="fail_on must be one of"):
        exit_codes.reaches("critical", "sometimes")


def test_the_codes_are_the_contract():
    assert (OK, FINDINGS, USAGE, UNREACHABLE) == (0, 1, 2, 3)
    assert set(exit_codes.MEANING) == {0, 1, 2, 3}


def test_no_other_module_defines_exit_codes():
    """Exit codes live in one module: nowhere else is a number given to sys.exit or an EXIT_ name."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "exit_codes.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "exit" \
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} sys.exit({node.args[0].value})")
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name) and name.id.startswith("EXIT_") and _literal_ints(node.value):
                            offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name.id}")
    assert offenders == []


def _literal_ints(node) -> bool:
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return all(isinstance(i, ast.Constant) and isinstance(i.value, int) for i in items)


def test_the_cli_formats_are_the_writers_formats():
    from trackerhealth.cli_common import FORMATS
    from trackerhealth.writers import formats

    assert FORMATS == formats.FORMATS
