"""`trackerhealth demo`: trains real runs, logs them into a local MLflow store, scans it as `scan`
does, writes tags, dashboards and the overview, and tells the user where to look.

The demo runs once per module (``--quick``, in-process) and the tests read what it left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("mlflow")

from trackerhealth.demo import EXPERIMENT, demo
from trackerhealth.demo import _trainings as trainings

pytestmark = pytest.mark.slow

EXPECTED = {
    "healthy-warmup-cosine": set(),
    "overfit-tiny-train-set": {"overfitting"},
    "nan-lr-typo": {"nonfinite"},
    "slow-data-loader": {"input-bottleneck"},
    "bad-shard-every-epoch": {"periodic-spikes"},
    "deep-sigmoid-vanishing": {"vanishing-gradients"},
}


@contextlib.contextmanager
def _cwd(path: Path):
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _run_demo(where: Path):
    """`trackerhealth demo --quick` in ``where``, as the README runs it (default --dir)."""
    with _cwd(where):
        return CliRunner().invoke(demo, ["--quick"], catch_exceptions=False)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("demo") / "trackerhealth-demo"


@pytest.fixture(scope="module")
def first(demo_dir):
    return _run_demo(demo_dir.parent)


@pytest.fixture(scope="module")
def runs(first, demo_dir):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{demo_dir / 'mlflow.db'}")
    exp = client.get_experiment_by_name(EXPERIMENT)
    return client, {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}


def test_demo_trains_scans_and_says_where_to_look(first, demo_dir):
    assert first.exit_code == 0, first.output
    out = first.output
    for name in EXPECTED:
        assert f"trained {name}" in out
        assert re.search(rf"^{re.escape(name)}\s+\d+", out, re.MULTILINE), f"{name} missing from the table"
    assert "scanned 6 of 6 runs (0 skipped, 0 failed): 1 healthy, 0 warning, 5 critical" in out
    assert "not found as expected" not in out
    assert "mlflow ui --backend-store-uri sqlite:///trackerhealth-demo/mlflow.db" in out
    assert "open trackerhealth-demo/report/index.html" in out
    assert "trackerhealth scan --mlflow-uri sqlite:///trackerhealth-demo/mlflow.db -e trackerhealth-demo" in out
    assert "fix:" in out  # every finding comes with its fix


def test_every_fault_is_found_and_the_healthy_run_is_clean(runs):
    _, by_name = runs
    assert set(by_name) == set(EXPECTED)
    for name, expected in EXPECTED.items():
        tags = by_name[name].data.tags
        found = set(filter(None, tags["trackerhealth.findings"].split(",")))
        assert expected <= found, (name, found)
        assert tags["trackerhealth.status"] == ("ok" if not expected else "critical"), name
        assert tags["demo.fault"] == (",".join(sorted(expected)) or "none")
        assert by_name[name].info.status == "FINISHED"


def test_dashboards_and_overview_on_disk_and_as_artifacts(runs, demo_dir):
    client, by_name = runs
    report = demo_dir / "report"
    index = (report / "index.html").read_text()
    pages = sorted((report / "runs").glob("*.html"))
    assert len(pages) == 6
    for page in pages:
        assert f'href="runs/{page.name}"' in index
        html = page.read_text()
        # The folder shares one plotly.js; each page loads it and links back to the overview.
        assert 'src="../plotly.min.js"' in html and 'href="../index.html"' in html
    assert (report / "plotly.min.js").stat().st_size > 1_000_000
    assert "http://127.0.0.1:5000/#/experiments/" in index  # each run links to the MLflow UI
    assert "## Training health" in (report / "summary.md").read_text()
    for run in by_name.values():
        assert {a.path for a in client.list_artifacts(run.info.run_id, "trackerhealth")} == {
            "trackerhealth/dashboard.html", "trackerhealth/report.json"}
    # The artifacts live inside the demo folder, not in ./mlruns of wherever the demo ran.
    assert (demo_dir / "artifacts").is_dir() and sorted(p.name for p in demo_dir.parent.iterdir()) == [demo_dir.name]


def test_scan_sees_what_the_demo_wrote(runs, demo_dir):
    """The demo's store is an ordinary MLflow store: `trackerhealth scan` agrees with the demo's tags."""
    from trackerhealth.scan_cli import scan

    _, by_name = runs
    result = CliRunner().invoke(scan, ["--mlflow-uri", f"sqlite:///{demo_dir / 'mlflow.db'}", "-e", EXPERIMENT,
                                       "--dry-run", "--no-cache", "--format", "json", "--fail-on", "never"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {r["run"]["name"]: r["status"] for r in doc["runs"]} == {
        name: run.data.tags["trackerhealth.status"] for name, run in by_name.items()}


def test_running_again_replaces_the_demo(first, runs, demo_dir):
    # Again in the same process: refused before anything is deleted (MLflow holds the database open).
    same = _run_demo(demo_dir.parent)
    assert same.exit_code == 2 and "run the demo again in a new process" in same.stderr
    assert (demo_dir / "mlflow.db").exists()
    # Again as a user does, in a new process: the folder is replaced, not added to.
    again = subprocess.run([sys.executable, "-m", "trackerhealth.demo", "--quick"], cwd=demo_dir.parent,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stdout
    _, before = runs
    reread = subprocess.run(
        [sys.executable, "-c", ("import sys; from mlflow.tracking import MlflowClient; c = MlflowClient(sys.argv[1]); "
         "e = c.get_experiment_by_name(sys.argv[2]); print(*[r.info.run_id for r in c.search_runs([e.experiment_id])])"),
         f"sqlite:///{demo_dir / 'mlflow.db'}", EXPERIMENT],
        stdout=subprocess.PIPE, text=True, check=True).stdout.split()
    assert len(reread) == 6 and not set(reread) & {r.info.run_id for r in before.values()}


def test_a_folder_with_other_files_is_refused_untouched(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(demo, ["--quick", "--dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "choose an empty or new folder with --dir" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_missing_mlflow_says_what_to_install(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError
    result = CliRunner().invoke(demo, ["--dir", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert "pip install 'trackerhealth[mlflow]'" in result.stderr
    assert not (tmp_path / "d").exists()


def test_without_plotly_the_demo_still_runs_and_says_what_to_install(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly -> ImportError
    with _cwd(tmp_path):
        result = CliRunner().invoke(demo, ["--quick", "--dir", "d"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "pip install 'trackerhealth[dashboard]'" in result.output
    assert (tmp_path / "d" / "report" / "index.html").exists()  # the overview needs no plotly
    assert not (tmp_path / "d" / "report" / "runs").exists()


def test_help_has_examples():
    out = CliRunner().invoke(demo, ["--help"]).output
    assert "Examples:" in out and "trackerhealth demo --quick --dir /tmp/th-demo" in out
    assert "pip install 'trackerhealth[mlflow]'" in out


def test_demo_is_a_command_of_the_cli():
    from trackerhealth.cli import main
    from trackerhealth.demo import demo

    # The group loads its commands lazily (trackerhealth.cli.LAZY_COMMANDS).
    assert "demo" in main.list_commands(None) and main.get_command(None, "demo") is demo, \
        "register it in cli.py's LAZY_COMMANDS: \"demo\": \"trackerhealth.demo._cli:demo\""


# -- the faults really happen in the trainings ------------------------------------------------------
def _series(run: trainings.Training, key: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [(s, v) for s, k, v, _ in run.rows if k == key]
    return np.array([s for s, _ in rows]), np.array([v for _, v in rows])


def test_the_lr_typo_really_diverges_to_nan():
    _steps, loss = _series(trainings.lr_too_high(quick=True), trainings.LOSS)
    finite = np.isfinite(loss)
    first_bad = int(np.argmin(finite))
    assert not finite.all() and finite[:first_bad].all() and not finite[first_bad:].any()
    assert loss[first_bad // 4] < loss[0]  # it learned while the learning rate was still small


def test_the_slow_loader_is_measured_not_invented():
    run = trainings.slow_loader(quick=True)
    _, data = _series(run, "data_time")
    _, compute = _series(run, "compute_time")
    assert np.all(data >= 0.005)  # every read sleeps 5 ms: the measured time cannot be less
    assert np.median(data) > 3 * np.median(compute)


def test_the_bad_shard_spikes_once_per_epoch():
    steps, loss = _series(trainings.corrupt_shard(quick=True), trainings.LOSS)
    after_first_epoch = steps > 50
    spikes = steps[after_first_epoch & (loss > 5 * np.median(loss))]
    assert len(spikes) >= 10 and set(spikes % 50) == {26}  # batch 25 of 50 (1-based steps)


def test_the_healthy_run_learns():
    run = trainings.healthy(quick=True)
    _, val = _series(run, trainings.VAL_LOSS)
    assert val[-1] < 0.5 * val[0] and np.all(np.isfinite(val))
