"""`trackerhealth analyze` end to end: formats, exit codes, and bad input that never tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from tests.corpus import evaluate
from trackerhealth.cli import main

MANIFEST = {e["name"]: evaluate.HERE / e["file"] for e in evaluate.load_manifest()}


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def test_json_output_follows_the_contract():
    res = run("analyze", MANIFEST["overfit_spirals_wandb"], MANIFEST["healthy_long_20k_wandb"], "--format", "json")
    assert res.exit_code == 1, res.output  # a critical finding with the default --fail-on critical
    doc = json.loads(res.stdout)
    assert set(doc) >= {"runs", "errors"} and len(doc["runs"]) == 2
    for r in doc["runs"]:
        # url and source are optional (the link, the file read): the report round-trips through from_dict
        assert {"tracker", "project", "id", "name"} <= set(r["run"]) <= {"tracker", "project", "id", "name", "url", "source"}
        assert r["status"] in ("ok", "warning", "critical") and r["loss_key"] and r["run"]["source"]
        assert set(r["scores"]) == {"convergence_speed", "stability", "gradient_health", "resource_efficiency", "overfitting_risk"}
        for f in r["findings"]:
            assert set(f) >= {"id", "level", "message", "recommendation", "evidence"}
            assert f["level"] in ("warning", "critical")
    by_name = {r["run"]["name"]: r for r in doc["runs"]}
    assert [f["id"] for f in by_name["overfit_spirals_wandb"]["findings"]] == ["overfitting"]
    assert by_name["healthy_long_20k_wandb"]["findings"] == []


def test_exit_codes_follow_fail_on():
    healthy = MANIFEST["healthy_long_20k_wandb"]
    warn = MANIFEST["slow_tiny_lr_sgd_mlp"]
    assert run("analyze", healthy).exit_code == 0
    assert run("analyze", warn).exit_code == 0  # a warning does not reach the default --fail-on critical
    assert run("analyze", warn, "--fail-on", "warning").exit_code == 1
    assert run("analyze", MANIFEST["nan_log0_custom_bce"], "--fail-on", "never").exit_code == 0
    assert run("analyze", healthy, "--format", "yaml").exit_code == 2


def test_table_and_markdown_show_findings_evidence_and_fix():
    table = run("analyze", MANIFEST["spikes_mislabeled_batch_k50"]).output
    assert "periodic-spikes" in table and "fix:" in table and "steps" in table
    md = run("analyze", MANIFEST["spikes_mislabeled_batch_k50"], "--format", "markdown").output
    assert md.startswith("## Training health") and "`periodic-spikes`" in md and "*Fix:*" in md


def test_bad_inputs_give_clear_messages_and_do_not_stop_the_other_files(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header = tmp_path / "header.csv"
    header.write_text("step,loss\n")
    strings = tmp_path / "strings.csv"
    strings.write_text("step,loss\n1,2.5\n2,oops\n3,2.1\n")
    single = tmp_path / "single.csv"
    single.write_text("step,loss\n1,2.5\n")
    noloss = tmp_path / "noloss.csv"
    noloss.write_text("step,accuracy\n" + "".join(f"{i},{i / 100}\n" for i in range(100)))
    dupes = tmp_path / "dupes.csv"
    dupes.write_text("step,loss\n3,1.0\n1,2.0\n1,2.5\n2,1.5\n")
    missing = tmp_path / "nope.csv"
    res = run("analyze", empty, header, strings, single, noloss, dupes, missing, MANIFEST["healthy_sparse_val_plain"], "--format", "json")
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 2  # input errors, no finding at --fail-on
    doc = json.loads(res.stdout)
    names = [r["run"]["name"] for r in doc["runs"]]
    assert "healthy_sparse_val_plain" in names and "strings" in names and "dupes" in names
    errors = {Path(e["source"]).name: e["message"] for e in doc["errors"]}
    assert "nope.csv" in errors and "empty.csv" in errors
    for message in errors.values():
        assert "Traceback" not in message and len(message) > 20
        assert message in res.stderr  # and on stderr, for whoever redirected stdout to a file


def test_table_errors_go_to_stderr_and_no_empty_table_is_printed(tmp_path):
    missing = tmp_path / "nope.csv"
    res = run("analyze", missing)
    assert res.exit_code == 2
    assert res.stdout == ""  # no table header with no run under it
    assert res.stderr.startswith(f"error: {missing}: ")
    res = run("analyze", missing, MANIFEST["healthy_long_20k_wandb"])
    assert res.exit_code == 2 and "healthy_long_20k_wandb" in res.stdout
    assert "nope.csv" not in res.stdout and "nope.csv" in res.stderr


def test_loss_key_names_the_training_loss(tmp_path):
    costs = tmp_path / "costs.csv"
    values = [2.0 * 0.99 ** i for i in range(300)]
    values[200:] = [float("nan")] * 100
    costs.write_text("step,cost\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    unmapped = json.loads(run("analyze", costs, "--format", "json").stdout)
    assert unmapped["runs"][0]["findings"] == []  # `cost` is not a name trackerhealth recognises as the loss
    res = run("analyze", costs, "--loss-key", "cost", "--format", "json")
    doc = json.loads(res.stdout)
    assert [f["id"] for f in doc["runs"][0]["findings"]] == ["nonfinite"]
    assert doc["runs"][0]["status"] == "critical" and res.exit_code == 1
    assert run("analyze", costs, "--loss-key", " ").exit_code == 2


def test_ten_million_points_analyze_without_error(tmp_path):
    """10^7 points of long Parquet (pyarrow keeps NaN a value; pandas would write it as null)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n_steps, n_keys = 1_000_000, 10
    rng = np.random.default_rng(0)
    steps = np.repeat(np.arange(n_steps), n_keys)
    keys = np.tile(np.arange(n_keys, dtype=np.int32), n_steps)
    values = rng.random(n_steps * n_keys)
    loss_rows = keys == 0
    values[loss_rows] = 2.0 * np.exp(-np.arange(n_steps) / 2e5) + 0.1 * rng.random(n_steps)
    values[700_000 * n_keys] = np.nan  # the loss goes NaN at step 700,000
    names = pa.array(["loss"] + [f"m{i}" for i in range(1, n_keys)])
    table = pa.table({"step": steps, "key": pa.DictionaryArray.from_arrays(pa.array(keys), names), "value": values})
    path = tmp_path / "long.parquet"
    pq.write_table(table, path)
    out = subprocess.run([sys.executable, "-m", "trackerhealth.cli", "analyze", str(path), "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["runs"][0]["points"] == 10_000_000
    (finding,) = doc["runs"][0]["findings"]
    assert finding["id"] == "nonfinite" and finding["evidence"][0]["step_start"] == 700_000
