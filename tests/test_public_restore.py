"""evidence.public.restore rebuilds a labelled log byte for byte from a real git repository."""

import os
import subprocess
from pathlib import Path

import pytest

from evidence.public.restore import restore_one


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture()
def repository(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    _git(work, "config", "user.email", "t@example.com")
    _git(work, "config", "user.name", "t")
    (work / "lightning_logs" / "version_3").mkdir(parents=True)
    (work / "lightning_logs" / "version_3" / "metrics.csv").write_bytes(b"epoch,train_loss\r\n0,2.5\r\n1,nan\r\n")
    (work / "lightning_logs" / "version_3" / "hparams.yaml").write_text("lr: 0.1\n")
    (work / "trainer_state.json").write_text('{"log_history": []}')
    _git(work, "add", "-A")
    # Committed long ago (a restore's own clock must not date the files).
    subprocess.run(["git", "-C", str(work), "commit", "-q", "-m", "logs"], check=True,
                   env={**os.environ, "GIT_COMMITTER_DATE": "2023-01-02T03:04:05+00:00"})
    commit = _git(work, "rev-parse", "HEAD")
    # The author later deletes the logs: the restore must read the commit, not HEAD.
    _git(work, "rm", "-q", "-r", "lightning_logs")
    _git(work, "commit", "-q", "-m", "drop logs")
    return work / ".git", commit


def test_a_folder_and_a_file_come_back_byte_for_byte_from_the_commit(repository, tmp_path):
    git_dir, commit = repository
    folder = tmp_path / "out" / "owner__name" / "lightning_logs" / "version_3"
    written, absent = restore_one(git_dir, commit, "lightning_logs/version_3", folder)
    assert (written, absent) == (2, [])
    assert (folder / "metrics.csv").read_bytes() == b"epoch,train_loss\r\n0,2.5\r\n1,nan\r\n"
    single = tmp_path / "out" / "owner__name" / "trainer_state.json"
    assert restore_one(git_dir, commit, "trainer_state.json", single) == (1, [])
    assert single.read_text() == '{"log_history": []}'
    # Dated to the commit, not to the restore: a W&B log with no exit record that looks freshly written
    # would read as a run still in progress, and the verdict would depend on when the logs were restored.
    committed = int(_git(git_dir.parent, "show", "-s", "--format=%ct", commit))
    assert int((folder / "metrics.csv").stat().st_mtime) == committed == int(single.stat().st_mtime) == 1672628645


def test_a_path_the_commit_lacks_is_an_error_not_an_empty_folder(repository, tmp_path):
    git_dir, commit = repository
    with pytest.raises(SystemExit, match="gave no file"):
        restore_one(git_dir, commit, "lightning_logs/version_9", tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_a_mirror_is_found_bare_or_as_a_work_tree(repository, tmp_path):
    # fetch leaves most snapshots bare (<owner>+<name>/repo) and some as a work tree (repo/.git).
    from evidence.public.restore import _git_dir

    git_dir, _ = repository
    mirrors = tmp_path / "mirrors"
    (mirrors / "owner+tree").mkdir(parents=True)
    (mirrors / "owner+tree" / "repo").mkdir()
    git_dir.rename(mirrors / "owner+tree" / "repo" / ".git")
    assert _git_dir("owner/tree", mirrors, tmp_path) == mirrors / "owner+tree" / "repo" / ".git"
    with pytest.raises(SystemExit, match="no mirror of owner/missing"):
        _git_dir("owner/missing", mirrors, tmp_path)


def test_skip_missing_restores_what_is_mirrored_and_lists_the_rest(repository, tmp_path, monkeypatch, capsys):
    import json

    from evidence.public import restore

    git_dir, commit = repository
    mirrors = tmp_path / "mirrors"
    (mirrors / "owner+name").mkdir(parents=True)
    git_dir.rename(mirrors / "owner+name" / "repo")
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"runs": {
        "P1": {"repo": "owner/name", "commit": commit, "repo_path": "trainer_state.json", "path": "owner__name/trainer_state.json"},
        "P2": {"repo": "owner/gone", "commit": commit, "repo_path": "x.csv", "path": "owner__gone/x.csv"}}}))
    monkeypatch.setattr(restore, "LABELS", labels)
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match="no mirror of owner/gone"):  # without the flag: stops, says which
        restore.main([str(out), "--mirrors", str(mirrors)])
    assert restore.main([str(out), "--mirrors", str(mirrors), "--skip-missing"]) == 0
    assert (out / "owner__name" / "trainer_state.json").read_text() == '{"log_history": []}'
    assert not (out / "owner__gone").exists()
    assert "1 log(s) not restored, their repository not mirrored: P2" in capsys.readouterr().out
