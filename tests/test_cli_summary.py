"""`trackerhealth summary`: a saved JSON report as Markdown, an HTML overview, or a GitHub job
summary with the Action's outputs (the Action's own run is tests/action)."""

import json
from pathlib import Path

from click.testing import CliRunner

from trackerhealth.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "logs"


def invoke(*args, env=None):
    res = CliRunner().invoke(main, list(map(str, args)), env=env)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def _report(tmp_path) -> Path:
    res = invoke("analyze", EXAMPLES, "--format", "json")
    path = tmp_path / "report.json"
    path.write_text(res.stdout)
    return path


def test_markdown_is_the_same_as_analyze_gives(tmp_path):
    path = _report(tmp_path)
    direct = invoke("analyze", EXAMPLES, "--format", "markdown").stdout
    res = invoke("summary", path)
    assert res.exit_code == 0
    assert res.stdout.strip() == direct.strip()
    assert "`nonfinite`" in res.stdout and "*Fix:*" in res.stdout


def test_github_writes_summary_outputs_and_an_inert_table(tmp_path):
    path = _report(tmp_path)
    doc = json.loads(path.read_text())
    statuses = [r["status"] for r in doc["runs"]]
    step_summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    step_summary.write_text("earlier step\n")
    res = invoke("summary", path, "--exit-code", "1", "--html", tmp_path / "index.html", "--github",
                 env={"GITHUB_STEP_SUMMARY": str(step_summary), "GITHUB_OUTPUT": str(outputs)})
    assert res.exit_code == 0, res.output
    written = step_summary.read_text()
    assert written.startswith("earlier step\n## Training health")  # appended, never replaced
    assert dict(line.split("=", 1) for line in outputs.read_text().splitlines()) == {
        "runs-scanned": str(len(statuses)), "critical": str(statuses.count("critical")),
        "warning": str(statuses.count("warning")), "unknown": str(statuses.count("unknown")),
        "error": str(statuses.count("error")), "report-path": str(tmp_path)}
    first, *_, last = res.stdout.strip().splitlines()
    assert first.startswith("::stop-commands::") and last == f"::{first.split('::')[2]}::"
    assert "<script" in (tmp_path / "index.html").read_text()


def test_a_scan_that_did_not_finish_is_said_so_with_its_error(tmp_path):
    empty = tmp_path / "report.json"
    empty.write_text("")
    log = tmp_path / "scan.log"
    log.write_text("starting\nError: http://127.0.0.1:9 did not answer; check the server\n")
    res = invoke("summary", empty, "--exit-code", "3", "--log", log)
    assert res.exit_code == 0
    assert "The scan did not finish: exit code 3 (tracker unreachable)." in res.stdout
    assert "<pre>http://127.0.0.1:9 did not answer; check the server</pre>" in res.stdout
    assert "_The scan exited 3: tracker unreachable;" in res.stdout


def test_bad_input_and_missing_github_variables_name_the_fix(tmp_path):
    res = invoke("summary", tmp_path / "missing.json")
    assert res.exit_code == 2 and "is not a trackerhealth JSON report" in res.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"runs": [{"no": "run"}]}))
    res = invoke("summary", wrong)
    assert res.exit_code == 2 and "does not follow trackerhealth's format" in res.stderr
    res = invoke("summary", _report(tmp_path), "--github", env={"GITHUB_STEP_SUMMARY": "", "GITHUB_OUTPUT": ""})
    assert res.exit_code == 2 and "$GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT" in res.stderr
    res = invoke("summary", _report(tmp_path), "--markdown", tmp_path)
    assert res.exit_code == 2 and "is a folder" in res.stderr


def test_an_unjudged_run_is_counted_in_its_own_output_never_as_healthy(tmp_path):
    costs = tmp_path / "costs.csv"  # a loss name trackerhealth does not know: status unknown
    costs.write_text("step,cost\n" + "".join(f"{i},{2.0 / (1 + i)}\n" for i in range(50)))
    res = invoke("analyze", costs, "--format", "json")
    path = tmp_path / "report.json"
    path.write_text(res.stdout)
    outputs = tmp_path / "outputs"
    res = invoke("summary", path, "--github",
                 env={"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_OUTPUT": str(outputs)})
    assert res.exit_code == 0, res.output
    written = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    assert (written["runs-scanned"], written["unknown"], written["error"]) == ("1", "1", "0")
    assert (written["critical"], written["warning"]) == ("0", "0")
