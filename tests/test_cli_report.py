"""`trackerhealth report`: output paths that cannot be written give a message and exit 2, never a
traceback; `--fail-on` and `--loss-key` work as in `analyze`."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from trackerhealth.cli import main

pytest.importorskip("plotly")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "logs"
CRITICAL = EXAMPLES / "spikes_flipped_labels_wide_k80.csv"  # periodic-spikes, critical


def report(*args):
    res = CliRunner().invoke(main, ["report", *map(str, args)])
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_html_to_a_device_is_a_message():
    res = report(CRITICAL, "--html", "/dev/full")
    assert res.exit_code == 2
    assert "--html /dev/full is an existing file, not a folder" in res.stderr


def test_html_folder_that_is_a_file_is_a_message(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for target in (f"{afile}/", str(afile), f"{afile}/sub/", f"{afile}/run.html"):
        res = report(CRITICAL, "--html", target)
        assert res.exit_code == 2, target
        assert "is an existing file, not a folder" in res.stderr or f"{afile} is a file where a folder is needed" \
            in res.stderr, (target, res.stderr)
        assert "Traceback" not in res.output
    assert afile.read_text() == "x"


def test_markdown_to_a_folder_is_a_message_before_anything_is_written(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    res = report(CRITICAL, "--html", tmp_path / "run.html", "--markdown", folder)
    assert res.exit_code == 2
    assert f"--markdown {folder} is a folder; give a file name inside it" in res.stderr
    assert not (tmp_path / "run.html").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_markdown_to_a_full_disk_is_a_message(tmp_path):
    res = report(CRITICAL, "--html", tmp_path / "run.html", "--markdown", "/dev/full")
    assert res.exit_code == 2
    assert "could not write --markdown /dev/full: the disk is full" in res.stderr


def test_fail_on(tmp_path):
    assert report(CRITICAL, "--html", tmp_path / "a.html").exit_code == 1  # default: critical
    assert report(CRITICAL, "--html", tmp_path / "b.html", "--fail-on", "never").exit_code == 0
    assert (tmp_path / "b.html").stat().st_size > 1000
    assert report(CRITICAL, "--html", tmp_path / "c.html", "--fail-on", "sometimes").exit_code == 2


def test_unreadable_inputs_go_to_stderr(tmp_path):
    missing = tmp_path / "nope.csv"
    res = report(CRITICAL, missing, "--html", tmp_path / "out/", "--fail-on", "never")
    assert res.exit_code == 2  # the dashboard of the readable file is written; the missing one is an error
    assert (tmp_path / "out" / "index.html").exists()
    assert f"error: {missing}" in res.stderr and str(missing) not in res.stdout
