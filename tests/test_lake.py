"""A Parquet lake (trackerhealth.fleet.lake): exports with a run column, one report per run, in one
process and with Ray Data on the session's real cluster — the same reports either way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from trackerhealth.cli import main
from trackerhealth.config import Config
from trackerhealth.fleet.lake import LakeError, analyze_lake, is_lake

STEPS = 300
T0_MS = 1_700_000_000_000


def loss_curve(seed: int) -> np.ndarray:
    """A healthy training loss: exp decay to a floor, with a little noise."""
    rng = np.random.default_rng(seed)
    steps = np.arange(STEPS)
    return np.exp(-steps / 60) + 0.05 + 0.01 * rng.standard_normal(STEPS)


def mlflow_rows(run: str, seed: int) -> pd.DataFrame:
    """Rows of MLflow's ``metrics`` table for one run: key, value, timestamp (ms), step, is_nan."""
    loss = loss_curve(seed)
    lr = np.full(STEPS, 1e-3)
    frame = pd.DataFrame({
        "key": ["train/loss"] * STEPS + ["lr"] * STEPS,
        "value": np.concatenate([loss, lr]),
        "timestamp": np.tile(T0_MS + 1000 * np.arange(STEPS), 2),
        "step": np.tile(np.arange(STEPS), 2),
        "is_nan": False,
        "run_uuid": run,
        "experiment_id": "7",
    })
    return frame


@pytest.fixture(scope="module")
def mlflow_lake(tmp_path_factory) -> Path:
    """Three runs split over two date partitions: ``healthy``; ``diverged``, whose loss goes NaN from
    step 200 the way MLflow stores it (value 0, is_nan true); ``nulled``, whose NaN loss pandas wrote
    as a null value."""
    root = tmp_path_factory.mktemp("mlflow") / "metrics"
    healthy, diverged, nulled = mlflow_rows("healthy", 0), mlflow_rows("diverged", 1), mlflow_rows("nulled", 2)
    bad = (diverged["key"] == "train/loss") & (diverged["step"] >= 200)
    diverged.loc[bad, "value"] = 0.0
    diverged.loc[bad, "is_nan"] = True
    nulled.loc[(nulled["key"] == "train/loss") & (nulled["step"] >= 250), "value"] = np.nan
    rows = pd.concat([healthy, diverged, nulled], ignore_index=True)
    early = rows["step"] < 150
    for name, part in (("date=2024-01-01", rows[early]), ("date=2024-01-02", rows[~early])):
        (root / name).mkdir(parents=True)
        part.sample(frac=1.0, random_state=3).to_parquet(root / name / "part-0.parquet", index=False)
    return root


@pytest.fixture(scope="module")
def databricks_lake(tmp_path_factory) -> Path:
    """Databricks' run_metrics_history exported: run_id, metric_name, metric_step, metric_value,
    metric_time (a timestamp type); two healthy runs in one file."""
    root = tmp_path_factory.mktemp("databricks")
    parts = []
    for run, seed in (("run-a", 4), ("run-b", 5)):
        parts.append(pd.DataFrame({
            "run_id": run, "experiment_id": "team-x", "metric_name": "loss", "metric_step": np.arange(STEPS),
            "metric_value": loss_curve(seed),
            "metric_time": pd.to_datetime(T0_MS + 1000 * np.arange(STEPS), unit="ms", utc=True),
        }))
    pd.concat(parts).to_parquet(root / "history.parquet", index=False)
    return root


def by_id(reports) -> dict:
    return {r.run.id: r for r in reports}


def test_mlflow_dump_gives_one_report_per_run_across_files(mlflow_lake):
    assert is_lake([mlflow_lake])
    reports = analyze_lake([mlflow_lake], Config())
    assert [r.run.id for r in reports] == ["diverged", "healthy", "nulled"]
    runs = by_id(reports)
    assert all(r.n_points == 2 * STEPS and r.loss_key == "train/loss" for r in reports)  # both files read
    assert all(r.run.project == "7" for r in reports)  # the experiment_id column
    assert runs["healthy"].status == "ok", runs["healthy"].to_dict()
    for nan_run, first_bad in (("diverged", 200), ("nulled", 250)):
        finding = runs[nan_run].finding("nonfinite")
        assert finding is not None and finding.is_problem, runs[nan_run].to_dict()
        assert min(e.step_start for e in finding.evidence if e.code == "nonfinite_value") == first_bad
    assert any("empty value read as NaN" in n for n in runs["nulled"].notes)


def test_databricks_export_reads_its_columns(databricks_lake):
    reports = analyze_lake([databricks_lake / "*.parquet"])
    assert [r.run.id for r in reports] == ["run-a", "run-b"]
    for report in reports:
        assert report.status == "ok" and report.loss_key == "loss" and report.run.project == "team-x"
        assert report.n_points == STEPS


def test_wide_wandb_export(tmp_path):
    frames = [pd.DataFrame({"run_id": run, "_step": np.arange(STEPS), "loss": loss_curve(seed),
                            "_runtime": np.arange(STEPS) * 1.0}) for run, seed in (("w1", 6), ("w2", 7))]
    pd.concat(frames).to_parquet(tmp_path / "export.parquet", index=False)
    reports = analyze_lake([tmp_path])
    assert [(r.run.id, r.status, r.n_points, r.run.project) for r in reports] == [
        ("w1", "ok", STEPS, tmp_path.name), ("w2", "ok", STEPS, tmp_path.name)]


def test_errors_name_the_fix(tmp_path):
    with pytest.raises(LakeError, match="no \\*.parquet files"):
        analyze_lake([tmp_path])
    with pytest.raises(LakeError, match="matches no file"):
        analyze_lake([str(tmp_path / "*.parquet")])
    pd.DataFrame({"step": [1, 2], "key": "loss", "value": [1.0, 0.5]}).to_parquet(tmp_path / "one.parquet")
    with pytest.raises(LakeError, match="no run column .*run_uuid.*a Parquet lake needs"):
        analyze_lake([tmp_path])
    assert not is_lake([tmp_path])  # ... and `analyze` reads it file by file, as before


def test_cli_uses_the_lake_and_refuses_ray_on_other_input(mlflow_lake, tmp_path):
    res = CliRunner().invoke(main, ["analyze", str(mlflow_lake), "--format", "json"])
    assert res.exit_code == 1, res.output  # a NaN loss is critical
    assert sorted(r["run"]["id"] for r in json.loads(res.stdout)["runs"]) == ["diverged", "healthy", "nulled"]
    csv = tmp_path / "run.csv"
    pd.DataFrame({"step": np.arange(STEPS), "loss": loss_curve(8)}).to_csv(csv, index=False)
    res = CliRunner().invoke(main, ["analyze", str(csv), "--ray", "local"])
    assert res.exit_code == 2 and "--ray analyzes a Parquet lake" in res.stderr


@pytest.mark.ray
def test_cli_with_ray_prints_json(ray_cluster, mlflow_lake):
    # One Ray Data job (each costs ~20 s on 2 cores): the lake with NaN by is_nan and by null, across files.
    res = CliRunner().invoke(main, ["analyze", str(mlflow_lake), "--ray", ray_cluster.address, "--format", "json",
                                    "--full"])
    assert res.exit_code == 1, res.output
    runs = json.loads(res.stdout)["runs"]
    assert runs == [r.to_dict(full=True) for r in analyze_lake([mlflow_lake])]


def test_ray_cluster_events_go_to_stderr_and_the_report_keeps_stdout(capsys):
    # What made the test above fail once in CI: a worker died, Ray retried its task (the reports
    # were right), and the driver's listener printed "(raylet) A worker died ..." at the head of
    # stdout, whatever log_to_driver says. Ray's own printer, as its listener calls it:
    from ray._private.worker import print_to_stdstream

    from trackerhealth.fleet.ray_connect import cluster_events_on_stderr

    event = {"lines": ["A worker died or was killed while executing a task"], "pid": "raylet", "is_err": False}
    print_to_stdstream(dict(event), ignore_prefix=False)
    assert "A worker died" in capsys.readouterr().out  # Ray's choice: stdout

    with cluster_events_on_stderr():
        print_to_stdstream(dict(event, lines=["A second worker died"]), ignore_prefix=False)
    seen = capsys.readouterr()
    assert seen.out == "" and "A second worker died" in seen.err
