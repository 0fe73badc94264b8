"""`trackerhealth scan` as the CLI shapes it: the summary line's time is the command's wall time."""

import json
import time

import pytest
from click.testing import CliRunner

from trackerhealth import cli_common
from trackerhealth.cli import main

pytest.importorskip("mlflow")


class _EnteredEarlier:
    """perf_counter for cli_common whose first reading (the CLI's entry) is 100 s in the past, as if
    connecting, listing and importing had taken that long before the scan loop began."""

    def __init__(self):
        self.first = True

    def perf_counter(self) -> float:
        if self.first:
            self.first = False
            return time.perf_counter() - 100.0
        return time.perf_counter()


def test_summary_time_counts_from_the_command_line_entry(mlflow_server, client, monkeypatch):
    client.create_experiment("cli-wall-time")
    monkeypatch.setattr(cli_common, "time", _EnteredEarlier())
    res = CliRunner().invoke(main, ["scan", "--mlflow-uri", mlflow_server.url, "-e", "cli-wall-time", "--dry-run",
                                    "--no-cache", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["summary"]["elapsed_seconds"] >= 100.0  # the scan loop alone took well under that
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("scanned 0 of 0 runs") and f"· {doc['summary']['elapsed_seconds']:.1f}s" in line
