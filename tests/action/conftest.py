"""Fixtures for the GitHub Action test: the action installed as GitHub would install it, and a real
MLflow server holding real training runs from tests/corpus.

The server is the session's MLflow fixture (tests/conftest.py). The action's own install step
runs once per session: the action's files (the repository as GitHub checks it out: tracked and
non-ignored files) are copied to a temporary folder and pip-installed from there, exactly as the
step does it, into a fresh virtual environment of its own that sees the packages of the
environment running the tests — the one `pip install -e '.[test]'` filled — so nothing is
downloaded (PIP_NO_INDEX) and the wheel is built by that environment's setuptools (the test extra
pins the version pyproject.toml's build-system needs).

That environment, not the base interpreter's: `venv` always builds on the base interpreter, whose
site-packages (with `system_site_packages`) may hold an old setuptools and none of trackerhealth's
dependencies. A `.pth` file adds this environment's site-packages instead.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

pytest.importorskip("mlflow")
pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
MLFLOW_TESTS = REPO / "tests" / "mlflow"
sys.path.insert(0, str(MLFLOW_TESTS))  # mlflow_support, as tests/mlflow/conftest.py imports it
sys.path.insert(0, str(Path(__file__).resolve().parent))

# mlflow_server and client: the session's one server, from tests/conftest.py

from action_support import INJECTED_NAME, INSTALL, MIXED, WARNINGS
from github_actions import ActionRunner
from mlflow_support import corpus_history, log_history


def _action_files(dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, stdout=subprocess.PIPE).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _see_this_environment(env_dir: Path) -> None:
    """Make the venv at ``env_dir`` see this environment's packages, after its own."""
    nested = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                            check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    ours = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    # addsitedir, as for a system site: these folders' own .pth files (namespace packages…) apply too.
    lines = [f"import site; site.addsitedir({folder!r})" for folder in ours if Path(folder).is_dir()]
    (Path(nested) / "_tests_outer_environment.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def action_env(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(the action's folder, the runner's environment) with the action's install step already run."""
    root = tmp_path_factory.mktemp("action")
    action_path = _action_files(root / "_actions" / "trackerhealth")
    env_dir = root / "python"
    # Without its own pip/setuptools: this environment's ones build the wheel, offline.
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    _see_this_environment(env_dir)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "TRACKERHEALTH_", "WANDB_", "GITHUB_", "PYTHON"))}
    env.update({"PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(env_dir),
                "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",  # "0" turns build isolation off
                "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true", "HOME": str(root / "home")})
    runner = ActionRunner(action_path, root, env)
    result = runner.run({"tracker": "mlflow"}, only=(INSTALL,))
    step = result.step(INSTALL)
    assert step.rc == 0, step.log
    where = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import trackerhealth; print(trackerhealth.__file__)"],
                           cwd=root, env=env, stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    assert where.startswith(str(env_dir)), f"the action's install did not land in its environment: {where}"
    commands = subprocess.run([str(env_dir / "bin" / "trackerhealth"), "scan", "--help"], cwd=root, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    assert commands.returncode == 0, (
        "`trackerhealth scan` is not a command of the installed CLI: register it in cli.py "
        f"(main.add_command(scan))\n{commands.stdout}")
    return action_path, env


@pytest.fixture()
def runner(action_env, tmp_path) -> ActionRunner:
    action_path, env = action_env
    return ActionRunner(action_path, tmp_path, env)


def _log_experiment(server_client, db_uri: str, name: str, runs: dict[str, str], extra: dict[str, str] | None = None):
    from mlflow.tracking import MlflowClient

    exp_id = server_client.create_experiment(name)  # through the server: its artifacts are proxied
    direct = MlflowClient(db_uri)
    ids = {run: log_history(direct, exp_id, corpus_history(run), run) for run in runs}
    for shown, corpus_run in (extra or {}).items():
        ids[shown] = log_history(direct, exp_id, corpus_history(corpus_run), shown)
    return exp_id, ids


@pytest.fixture(scope="session")
def action_experiments(mlflow_server, client) -> dict[str, tuple[str, dict[str, str]]]:
    """``{"mixed": (experiment name, {run name: id}), "warnings": …}``; scanned with --dry-run by
    every test but the one that writes (it uses "mixed" once)."""
    _, mixed = _log_experiment(client, mlflow_server.db_uri, "action-mixed", MIXED,
                               extra={INJECTED_NAME: "healthy_step_decay_keras"})
    _, warnings = _log_experiment(client, mlflow_server.db_uri, "action-warnings", WARNINGS)
    return {"mixed": ("action-mixed", mixed), "warnings": ("action-warnings", warnings)}
