"""action.yml, run step by step as GitHub runs it, against a real MLflow server with real runs.

Each test gives the action inputs as a workflow would, runs its steps (see github_actions.py for
what is emulated) and checks what a user sees: the job summary, the outputs, the job's status
and exit code, the uploaded report, and — for the one scan that writes — the tags on the runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from action_support import INJECTED_NAME, INSTALL, MIXED, WARNINGS
from mlflow_support import free_port

pytestmark = pytest.mark.slow

ACTION = Path(__file__).resolve().parents[2] / "action.yml"
SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _inputs(server, experiment: str, **more) -> dict[str, str]:
    return {"tracker": "mlflow", "tracking-uri": server.url, "experiment": experiment, **more}


def test_action_is_thin_pinned_and_injection_free():
    action = yaml.safe_load(ACTION.read_text())
    steps = action["runs"]["steps"]
    assert action["runs"]["using"] == "composite"
    for step in steps:
        if "run" in step:
            # Inputs and run names reach scripts only through env: never expanded into the script.
            assert "${{" not in step["run"], step["name"]
            assert step["shell"] == "bash"
        else:
            assert SHA_PIN.match(step["uses"].split()[0]), f"{step['uses']} is not pinned to a commit"
    for name, spec in action["inputs"].items():
        assert spec.get("description"), f"input {name} has no description"
    assert set(action["outputs"]) >= {"runs-scanned", "critical", "warning", "unknown", "error", "report-path"}
    ids = {s.get("id") for s in steps}
    for name, spec in action["outputs"].items():
        step_id = re.search(r"steps\.([\w-]+)\.outputs", spec["value"]).group(1)
        assert step_id in ids, f"output {name} reads a step that does not exist"
    scans = [s for s in steps if "run" in s and "trackerhealth scan" in s["run"]]
    assert len(scans) == 1, "the action runs the CLI's scan exactly once"
    # No program of its own: the report is the CLI's `summary` command, and Python appears only in
    # one-line calls (checking and splitting `args` before trackerhealth is installed).
    reports = [s for s in steps if "run" in s and "trackerhealth summary" in s["run"]]
    assert len(reports) == 1 and "--github" in reports[0]["run"]
    for step in steps:
        script = step.get("run", "")
        assert not re.search(r"<<-?\s*'?[A-Z]+", script), f"{step['name']} embeds a here-document"
        assert "python -\n" not in script and "import trackerhealth" not in script, step["name"]
        assert "from trackerhealth" not in script, step["name"]


def test_critical_runs_fail_the_job_and_everything_is_reported(runner, mlflow_server, client, action_experiments):
    name, ids = action_experiments["mixed"]
    result = runner.run(_inputs(mlflow_server, name), skip=(INSTALL,))  # writes: the only non-dry-run scan

    # The job fails at the verdict, after the summary, the outputs, the cache and the upload.
    assert result.failed and result.exit_code == 1
    assert [s.name for s in result.steps if s.ran and s.rc] == ["Verdict"]
    assert result.outputs == {"runs-scanned": "6", "critical": "2", "warning": "1", "unknown": "0", "error": "0",
                              "report-path": result.outputs["report-path"], "exit-code": "1"}
    assert ("error", "runs with findings at or above fail-on (critical): see the job summary") in result.commands

    summary = result.summary
    assert summary.startswith("## Training health")
    assert "6 run(s): 2 critical, 1 warning, 3 healthy." in summary
    for run, status in MIXED.items():
        shown = re.escape(run.replace("_", "\\_"))  # Markdown-escaped in the summary
        # The name links to the run when the report knows its URL (MLflow's UI here).
        assert re.search(rf"\| (\[{shown}\]\([^)]*\)|{shown}) \| .*\| {status} \|", summary), run
    assert "`nonfinite`" in summary and "`input-bottleneck`" in summary and "*Fix:*" in summary

    report = Path(result.outputs["report-path"])
    doc = json.loads((report / "report.json").read_text())
    assert {r["run"]["name"]: r["status"] for r in doc["runs"]} == {**MIXED, INJECTED_NAME: "ok"}
    assert doc["summary"]["scanned"] == 6 and doc["errors"] == []
    assert (report / "report.md").read_text() == summary
    overview = (report / "index.html").read_text()
    assert all(run in overview for run in MIXED) and "<script" in overview

    # The uses: steps get what GitHub needs: the cache the scan filled, the report folder.
    scan_env = result.step("Scan").env
    restore, save = result.step("Restore the history cache"), result.step("Save the history cache")
    assert restore.with_["path"] == save.with_["path"] == scan_env["TRACKERHEALTH_CACHE_DIR"]
    assert save.with_["key"] == "trackerhealth-mlflow-health-4242-1"
    assert restore.with_["restore-keys"].strip() == "trackerhealth-mlflow-health-"
    assert save.ran and any(Path(save.with_["path"]).rglob("*")), "the scan cached no history"
    upload = result.step("Upload the HTML report")
    assert upload.ran and Path(upload.with_["path"]) == report and upload.with_["name"] == "trackerhealth-report"
    assert result.step("Set up Python").with_ == {"python-version": "3.11"}

    # Written back onto the runs, as the scan does.
    run = client.get_run(ids["nan_exploding_lr_linreg"])
    assert run.data.tags["trackerhealth.status"] == "critical"
    assert "nonfinite" in run.data.tags["trackerhealth.findings"]


def test_run_names_never_act_as_workflow_commands(runner, mlflow_server, action_experiments):
    name, _ = action_experiments["mixed"]
    result = runner.run(_inputs(mlflow_server, name, **{"dry-run": "true", "fail-on": "never"}), skip=(INSTALL,))
    assert INJECTED_NAME in result.log  # the table in the log shows it…
    assert all("pwned" not in f"{cmd} {msg}" and "injected" not in msg for cmd, msg in result.commands)  # …inertly


@pytest.mark.parametrize(("experiment", "fail_on", "code", "critical", "warning"), [
    ("warnings", "critical", 0, "0", "1"),
    ("warnings", "warning", 1, "0", "1"),
    ("mixed", "never", 0, "2", "1"),
])
def test_exit_code_follows_fail_on(runner, mlflow_server, client, action_experiments, experiment, fail_on, code,
                                   critical, warning):
    name, ids = action_experiments[experiment]
    result = runner.run(_inputs(mlflow_server, name, **{"fail-on": fail_on, "dry-run": "true"}), skip=(INSTALL,))
    assert result.exit_code == code and result.failed == bool(code)
    assert result.outputs["exit-code"] == str(code)
    assert (result.outputs["critical"], result.outputs["warning"]) == (critical, warning)
    assert result.outputs["runs-scanned"] == str(len(ids))
    assert "## Training health" in result.summary
    if experiment == "warnings":  # a dry run writes nothing onto the runs
        for run_id in ids.values():
            assert not any(k.startswith("trackerhealth.") for k in client.get_run(run_id).data.tags)
        shown = set(re.findall(r"^\| \[?([^|\]]+?)\]?(?:\([^)]*\))? \|", result.summary.replace("\\_", "_"), re.M))
        assert set(WARNINGS) <= shown, shown


def test_unreachable_tracker_exits_3_and_credentials_stay_out_of_logs(runner):
    secret, token = "s3cret-pw-81723", "tok-secret-99817"
    uri = f"http://alice:{secret}@127.0.0.1:{free_port()}"
    result = runner.run({"tracker": "mlflow", "tracking-uri": uri, "experiment": "anything"},
                        env={"MLFLOW_TRACKING_TOKEN": token, "TRACKERHEALTH_HTTP_RETRIES": "0",
                             "TRACKERHEALTH_ALERT_WEBHOOK": f"https://hooks.slack.com/services/{token}"},
                        skip=(INSTALL,))
    assert result.exit_code == 3 and result.outputs["exit-code"] == "3"
    assert result.outputs["runs-scanned"] == "0"
    assert "exit code 3 (tracker unreachable)" in result.summary
    assert "127.0.0.1" in result.summary  # the error names what did not answer…
    everything = result.log + result.summary + json.dumps(result.outputs)
    assert secret not in everything and token not in everything  # …and never a credential


@pytest.mark.parametrize(("inputs", "message"), [
    ({"tracker": "neptune"}, "tracker must be mlflow or wandb"),
    ({"tracker": "mlflow", "dry-run": "yes"}, "dry-run must be true or false"),
    ({"tracker": "mlflow", "version": "1.0; curl evil"}, "version must be a release number"),
    ({"tracker": "mlflow", "args": "--filter \"params.x = 'a'"}, "args has an unclosed quote"),
])
def test_bad_inputs_stop_before_the_scan_with_the_fix(runner, inputs, message):
    result = runner.run(inputs)  # the install step checks the inputs first, before installing anything
    assert result.exit_code == 2
    assert any(cmd == "error" and message in msg for cmd, msg in result.commands), result.log
    assert not result.step("Scan").ran and not result.step("Report").ran and not result.step("Verdict").ran


def test_args_are_split_like_words_and_never_evaluated(runner, mlflow_server, action_experiments, tmp_path):
    name, _ = action_experiments["warnings"]
    marker = tmp_path / "evaluated"
    args = f"--filter \"params.corpus_run = 'slow_unnormalized_features'\" --workers 2 $(touch {marker})"
    result = runner.run(_inputs(mlflow_server, name, args=args, **{"dry-run": "true"}), skip=(INSTALL,))
    assert not marker.exists()  # $(…) reached the CLI as text, it did not run
    assert result.exit_code == 2 and "unexpected extra argument" in result.step("Scan").log
    result = runner.run(_inputs(mlflow_server, name, args=args.rsplit(" $(", 1)[0], **{"dry-run": "true"}),
                        skip=(INSTALL,))
    assert result.outputs["runs-scanned"] == "1" and result.outputs["warning"] == "1" and result.exit_code == 0


def test_bad_fail_on_is_the_clis_usage_error(runner, mlflow_server, action_experiments):
    name, _ = action_experiments["warnings"]
    result = runner.run(_inputs(mlflow_server, name, **{"fail-on": "sometimes", "dry-run": "true"}), skip=(INSTALL,))
    assert result.exit_code == 2 and result.outputs["exit-code"] == "2"
    assert "'sometimes' is not one of" in result.summary
    assert any(cmd == "error" and msg.startswith("a usage or configuration error") for cmd, msg in result.commands)
