"""The suite's two workers keep each group in one process (tests/conftest.py): one MLflow server, one
Ray cluster, and a module's heavy fixture computed once. When the groups silently stop forming (pytest
9.2 with xdist 3.8: pytest-dev/pytest-xdist#1386) nothing fails — the suite just takes twice its time
budget — so this checks the grouping itself, on a small module run in a child pytest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def test_a_modules_tests_all_run_in_one_worker_under_the_groups_name():
    done = subprocess.run([sys.executable, "-m", "pytest", str(TESTS / "test_retry.py"), "-n", "2", "-v",
                           "-p", "no:cacheprovider"], capture_output=True, text=True, timeout=300, cwd=TESTS.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED (\S+)", done.stdout)
    assert len(ran) >= 5, done.stdout[-3000:]
    assert {worker for worker, _ in ran} == {ran[0][0]}  # one worker took the whole module
    assert all(nodeid.endswith("@test_retry.py") for _, nodeid in ran)
