"""W&B runs compared with their group, through the real ``wandb`` client and the strict contract
server: by W&B's group by default, ``--group-by config.X``, the ``trackerhealth:baseline`` tag, an
incremental re-scan that still compares a changed run with its whole group, and a sweep summary in
the project's "Training health" report.

The runs are real torch trainings (evidence/torch): a GRU language model with a learning rate 100x
too small among sane siblings of the same model and data, and the 12-run LR x batch sweep."""

from __future__ import annotations

import json

from click.testing import CliRunner
from contract.corpus import rows_of

from evidence import lofo
from evidence.torch import manifest
from trackerhealth.adapters.files import read_histories
from trackerhealth.cli import main

ENTITY = "groups-team"
SLOW = "rnn_lr_too_low"
RNN = (SLOW, "rnn_twin_adam", "rnn_warmup_cosine", "rnn_sgdr_restarts")


def _add(store, project: str, name: str, file, *, group=None, config=None, tags=()):
    (history,) = read_histories(file)
    rows, events = rows_of(history)
    run_id = name.replace("_", "")[:24].lower()
    return store.add_run(ENTITY, project, run_id, display_name=name, history=rows, events=events, group=group,
                         job_type="train", config={k: {"value": v} for k, v in (config or {}).items()}, tags=list(tags))


def _rnn(store, project: str, *, group="gru-char", tags=None):
    for name in RNN:
        entry = next(e for e in manifest.load() if e["name"] == name)
        _add(store, project, name, lofo.TORCH / entry["file"], group=group,
             config={"model": entry["model"], "dataset": entry["dataset"], "lr": entry["config"].get("lr")},
             tags=(tags or {}).get(name, ()))


def _scan(project: str, tmp_path, *extra, code=0) -> dict:
    result = CliRunner().invoke(main, ["scan", "--project", f"{ENTITY}/{project}", "--format", "json", "--full",
                                       "--cache-dir", str(tmp_path / "cache"), "--fail-on", "never", *extra],
                                catch_exceptions=False)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if code == 0 else result.output


def _runs(doc) -> dict[str, dict]:
    return {r["run"]["name"]: r for r in doc["runs"]}


def _level(run: dict, diag_id: str) -> str:
    return next(f["level"] for f in run["findings"] if f["id"] == diag_id)


def _codes(run: dict, diag_id: str) -> list[str]:
    return next([e["code"] for e in f["evidence"]] for f in run["findings"] if f["id"] == diag_id)


def test_runs_of_one_wandb_group_are_compared_by_default_and_by_config_keys(wandb_env, tmp_path):
    _rnn(wandb_env.store, "rnn", tags={"rnn_sgdr_restarts": ("trackerhealth:baseline",)})
    runs = _runs(_scan("rnn", tmp_path, "--dry-run"))
    assert runs[SLOW]["group"]["group"] == {"group": "gru-char"} and runs[SLOW]["group"]["size"] == len(RNN)
    assert runs[SLOW]["group"]["baseline_name"] == "rnn_sgdr_restarts" and runs[SLOW]["group"]["rule"] == "marked"
    assert _level(runs[SLOW], "slow-convergence") == "warning"
    by_config = _runs(_scan("rnn", tmp_path / "c", "--dry-run", "--group-by", "config.model", "--group-by", "config.dataset"))
    assert by_config[SLOW]["group"]["group"]["config.model"] == "char-gru-h96x1"
    assert _level(by_config[SLOW], "slow-convergence") == "warning"
    for name in RNN[1:]:
        assert by_config[name]["status"] == "ok", name
    out = _scan("rnn", tmp_path, "--dry-run", "--group-by", "params.model", code=2)
    assert "group, job_type, sweep or config.NAME" in out


def test_a_wandb_group_is_compared_in_parts_by_the_loss_setting_each_runs_config_logs(wandb_env, tmp_path):
    # One W&B group, one model and data set, NT-Xent at temperature 0.1 and 0.5 (evidence/torch's
    # SimCLR runs). The listing leaves configs out; the scan reads each analysed run's, so the group is
    # split by temperature and no healthy 0.5 run is "slow" against the 0.1 run's lower loss.
    t01 = ("simclr_temperature_01", "simclr_twin_adam_t01")
    t05 = ("simclr_twin_adam", "simclr_warmup_cosine", "simclr_lr_too_low", "simclr_adam_eps_large")
    for name in (*t01, *t05):
        entry = next(e for e in manifest.load() if e["name"] == name)
        _add(wandb_env.store, "simclr", name, lofo.TORCH / entry["file"], group="simclr-w32",
             config={"model": entry["model"], "temperature": entry["config"]["temperature"], "lr": entry["config"]["lr"],
                     "optimizer": entry["config"]["optimizer"], "eps": entry["config"]["eps"]})
    runs = _runs(_scan("simclr", tmp_path, "--dry-run"))
    for name in t05:
        assert runs[name]["group"]["group"] == {"group": "simclr-w32", "temperature": "0.5"}, runs[name]["group"]
        assert runs[name]["group"]["size"] == len(t05) and runs[name]["group"]["baseline_name"] in t05
    assert runs[t01[0]]["group"]["group"]["temperature"] == "0.1"
    for name in t05[:2]:
        assert _level(runs[name], "slow-convergence") == "ok", name
    assert _level(runs["simclr_lr_too_low"], "slow-convergence") == "warning"
    # The config reaches the finding's evidence too: Adam with epsilon 1.0.
    assert _level(runs["simclr_adam_eps_large"], "slow-convergence") == "warning"
    assert "config_adam_epsilon" in _codes(runs["simclr_adam_eps_large"], "slow-convergence")


def test_an_incremental_rescan_compares_a_changed_run_with_its_whole_group(wandb_env, tmp_path):
    _rnn(wandb_env.store, "rnn-inc")
    first = _scan("rnn-inc", tmp_path)
    assert first["summary"]["analyzed"] == len(RNN)
    # One sibling logs a new step; the incremental listing lists only it, its group is listed with it.
    store = wandb_env.store
    with store.lock:
        run = next(r for r in store.runs.values() if r.project == "rnn-inc" and r.display_name == "rnn_twin_adam")
        last = dict(run.history[-1])
        last["_step"] += 1
        run.history.append(last)
        from datetime import datetime, timezone
        run.updated_at = run.heartbeat_at = datetime.now(timezone.utc)
    second = _scan("rnn-inc", tmp_path)
    assert second["summary"]["listed"] == len(RNN) and second["summary"]["analyzed"] == len(RNN)
    assert _level(_runs(second)[SLOW], "slow-convergence") == "warning"


def test_a_sweep_summary_reaches_the_projects_report(wandb_env, tmp_path):
    entries = json.loads((lofo.TORCH / "sweep" / "manifest.json").read_text())
    for e in entries:
        _add(wandb_env.store, "sweep", e["name"], lofo.TORCH / "sweep" / e["file"], group="lr-batch",
             config={"lr": e["config"]["lr"], "batch_size": e["config"]["batch_size"]})
    doc = _scan("sweep", tmp_path)
    (sweep,) = doc["sweeps"]
    assert any(a["key"] == "config.lr" and a["finding"] == "loss-oscillation" and a["relation"] == ">="
               and float(a["value"]) == 0.3 for a in sweep["associations"]), sweep
    views = [v for v in wandb_env.store.views.values() if v["projectName"] == "sweep"]
    assert len(views) == 1 and "every run with config.lr ≥ 0.3 has loss-oscillation" in json.dumps(views[0], ensure_ascii=False)


def test_a_shared_job_type_alone_groups_nothing_unless_asked(wandb_env, tmp_path):
    # Every run says job_type "train" and no group: by default each is analysed alone.
    _rnn(wandb_env.store, "jobs", group=None)
    runs = _runs(_scan("jobs", tmp_path, "--dry-run"))
    assert all("group" not in r for r in runs.values())
    # Alone, only the shape of its fall (back-loaded) names it; with the group, the steps to the baseline's level.
    assert _codes(runs[SLOW], "slow-convergence")[0] == "back_loaded_fall"
    asked = _runs(_scan("jobs", tmp_path / "j", "--dry-run", "--group-by", "job_type"))
    assert asked[SLOW]["group"]["group"] == {"job_type": "train"} and _level(asked[SLOW], "slow-convergence") == "warning"
    assert "slower_than_baseline" in _codes(asked[SLOW], "slow-convergence")
