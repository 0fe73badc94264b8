"""A run's logged config — MLflow params, W&B config, HF TrainingArguments, Lightning hparams —
read into one set of optimizer facts, and those facts corroborating (never making) a finding — with one
exception: a slow-convergence back-loaded note whose cause the config names becomes a warning."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from trackerhealth import RunHistory, RunRef, config_facts, engine
from trackerhealth.adapters.files import read_histories
from trackerhealth.cli import main
from trackerhealth.config import from_dict
from trackerhealth.config_facts import ConfigFacts, Fact, facts

N = 600
STEPS = np.arange(N, dtype=float)


def test_mlflow_params_are_strings_and_still_numbers():
    f = facts({"optimizer_name": "Adam", "lr": "0.001", "eps": "1e-08", "batch_size": "32", "weight_decay": "0"})
    assert f.optimizer == Fact("adam", "optimizer_name") and f.optimizer_family == "adam"
    assert f.lr == Fact(0.001, "lr") and f.adam_epsilon == Fact(1e-8, "eps")
    assert f.batch_size == Fact(32, "batch_size") and f.weight_decay == Fact(0.0, "weight_decay")


def test_wandb_api_config_with_value_wrappers_and_nesting():
    config = {"_wandb": {"value": {"cli_version": "0.31.0"}},
              "optimizer": {"value": {"name": "SGD", "lr": 0.5, "momentum": 0.9}},
              "batch_size": {"desc": None, "value": 2}}
    f = facts(config)
    assert f.optimizer == Fact("sgd", "optimizer.name") and f.optimizer_family == "sgd"
    assert f.lr == Fact(0.5, "optimizer.lr") and f.batch_size == Fact(2, "batch_size")


def test_hf_training_arguments_as_the_mlflow_callback_logs_them(tmp_path):
    transformers = pytest.importorskip("transformers")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), learning_rate=3e-6, adam_epsilon=1.0,
                                          per_device_train_batch_size=2, gradient_accumulation_steps=3,
                                          max_grad_norm=0.0, warmup_steps=10, report_to=[])
    f = facts({k: str(v) for k, v in args.to_dict().items()})  # MLflow params are strings
    assert f.lr == Fact(3e-6, "learning_rate") and f.adam_epsilon == Fact(1.0, "adam_epsilon")
    assert f.optimizer_family == "adam"  # optim=adamw_torch…
    assert f.batch_size == Fact(6, "per_device_train_batch_size×gradient_accumulation_steps")
    assert f.max_grad_norm == Fact(0.0, "max_grad_norm") and f.fp16 == Fact(False, "fp16")
    assert f.warmup == Fact(10.0, "warmup_steps")


def test_hydra_targets_lightning_precision_and_aliases():
    f = facts({"model": {"optim": {"_target_": "torch.optim.AdamW", "base_lr": 0.02}}, "trainer": {"precision": "16-mixed"},
               "bs": 4, "Learning-Rate": "ignored-not-a-number"})
    assert f.optimizer == Fact("adamw", "model.optim._target_") and f.lr == Fact(0.02, "model.optim.base_lr")
    assert f.fp16 == Fact(True, "trainer.precision") and f.bf16 is None and f.batch_size == Fact(4, "bs")
    assert facts({}) == ConfigFacts() and facts(None) == ConfigFacts()
    assert facts({"lr": "nan", "optimizer": "None", "eps": -1}) == ConfigFacts()


def _slow():
    rng = np.random.default_rng(2)
    return {"loss": (STEPS, 2.3 - 0.1 * STEPS / N + 0.003 * rng.standard_normal(N))}


def _oscillating():
    rng = np.random.default_rng(3)
    return {"loss": (STEPS, 1.0 + 3.0 * np.abs(rng.standard_normal(N)))}  # bounces, never learns


def _nan():
    loss = np.exp(-STEPS / 100) + 0.2
    loss[400:] = np.nan
    return {"loss": (STEPS, loss)}


def _analyze(data, config):
    return engine.analyze(RunHistory.from_series(RunRef("file", "p", "r", config=config), data))


def _codes(finding):
    return [e.code for e in finding.evidence if e.code.startswith("config_")]


def test_adam_epsilon_one_sharpens_slow_convergence_without_changing_its_level():
    plain = _analyze(_slow(), {}).finding("slow-convergence")
    sharp = _analyze(_slow(), {"optimizer": "Adam", "adam_epsilon": "1.0", "learning_rate": "0.001"}).finding("slow-convergence")
    assert plain.is_problem and sharp.level == plain.level and _codes(plain) == []
    assert _codes(sharp) == ["config_adam_epsilon"]
    assert sharp.message.startswith(plain.message)
    assert "Adam epsilon to 1, 10^8 × the usual 1e-08: the update is divided by it." in sharp.message
    eps = next(e for e in sharp.evidence if e.code == "config_adam_epsilon")
    assert (eps.metric, eps.observed, eps.threshold) == ("config:adam_epsilon", 1.0, 1e-4)


def test_a_tiny_lr_counts_per_optimizer_family():
    sgd = _analyze(_slow(), {"optimizer": "SGD", "lr": "5e-5"}).finding("slow-convergence")
    adam = _analyze(_slow(), {"optimizer": "Adam", "lr": "5e-5"}).finding("slow-convergence")
    assert _codes(sgd) == ["config_lr", "config_optimizer"]  # 5e-5 <= 1e-4 for SGD
    assert _codes(adam) == []  # but not <= 1e-5 for Adam


def test_a_high_lr_and_a_tiny_batch_sharpen_oscillation():
    report = _analyze(_oscillating(), {"optimizer": {"value": "adamw"}, "lr": {"value": 0.1}, "batch_size": {"value": 2}})
    osc = report.finding("loss-oscillation")
    assert osc.is_problem, [(f.id, f.level, f.message) for f in report.findings]
    assert _codes(osc) == ["config_lr", "config_batch_size", "config_optimizer"]
    assert "learning rate to 0.1, high for adamw" in osc.message and "batch of 2 sample(s)" in osc.message


def test_no_clipping_and_fp16_sharpen_a_nan():
    nan = _analyze(_nan(), {"max_grad_norm": "None", "fp16": "True"}).finding("nonfinite")
    assert _codes(nan) == ["config_grad_clipping", "config_fp16"]
    clipped = _analyze(_nan(), {"max_grad_norm": "1.0", "fp16": "False"}).finding("nonfinite")
    assert _codes(clipped) == []


def test_config_never_makes_or_silences_a_finding():
    # (beyond the slow-convergence promotions below: a healthy curve that has settled stays healthy whatever the config says)
    healthy = {"loss": (STEPS, 2 * np.exp(-STEPS / 40) + 0.1 + 0.003 * np.random.default_rng(4).standard_normal(N))}
    alarming = {"optimizer": "Adam", "adam_epsilon": 1.0, "lr": 1.0, "batch_size": 1, "max_grad_norm": 0, "fp16": True}
    assert _analyze(healthy, alarming).problems == () and _analyze(healthy, alarming).status == "ok"
    assert [f.id for f in _analyze(_nan(), {"max_grad_norm": 1.0}).problems] == ["nonfinite"]


def _crawl():
    """A line that never bends, still falling at the end: slow-convergence's back-loaded note."""
    noise = 0.01 * np.random.default_rng(6).standard_normal(N)
    return {"loss": (STEPS, 2.3 - 0.6 * STEPS / N + noise)}


def test_a_back_loaded_note_becomes_a_warning_when_the_config_names_a_slowing_setting():
    alone = _analyze(_crawl(), {}).finding("slow-convergence")
    assert alone.level == "ok" and alone.evidence[0].code == "back_loaded_fall", alone.message
    # Adam epsilon 1.0: the shape and a cause agree, so it is tagged, with the config's evidence and words.
    eps = _analyze(_crawl(), {"optimizer": "Adam", "adam_epsilon": 1.0, "lr": 1e-3}).finding("slow-convergence")
    assert eps.level == "warning" and eps.recommendation, eps.message
    assert _codes(eps) == ["config_adam_epsilon"] and "Adam epsilon to 1" in eps.message and "almost constant rate" in eps.message
    # A tiny LR for the optimizer's family does the same; a usual LR and epsilon leave the note a note.
    assert _analyze(_crawl(), {"optimizer": "SGD", "lr": 1e-5}).finding("slow-convergence").level == "warning"
    assert _analyze(_crawl(), {"optimizer": "Adam", "adam_epsilon": 1e-8, "lr": 1e-4}).finding("slow-convergence").level == "ok"
    # SGD has no epsilon: an eps key beside SGD names nothing that slows it.
    assert _analyze(_crawl(), {"optimizer": "SGD", "eps": 1.0, "lr": 0.1}).finding("slow-convergence").level == "ok"


def _bending_but_unfinished():
    """A loss that bends early (half its fall in the first fifth: no back-loaded note) and is still falling at the end."""
    noise = 0.005 * np.random.default_rng(7).standard_normal(N)
    return {"loss": (STEPS, 1.0 + 1.3 * np.exp(-STEPS / 150) + noise)}


def test_a_loss_still_falling_at_its_end_is_slow_when_adam_epsilon_swamps_every_update():
    alone = _analyze(_bending_but_unfinished(), {}).finding("slow-convergence")
    assert alone.level == "ok" and [e.code for e in alone.evidence] == ["still_falling"], alone.message
    # Adam epsilon 1.0 outweighs any gradient's scale: Adam steps like SGD at a tiny LR, whatever the shape.
    eps = _analyze(_bending_but_unfinished(), {"optimizer": "AdamW", "eps": 1.0, "lr": 1e-3}).finding("slow-convergence")
    assert eps.level == "warning" and "still falling at the end" in eps.message, eps.message
    assert _codes(eps) == ["config_adam_epsilon"]
    # 1e-3 is large for an epsilon but below the gradients' usual scale; SGD has no epsilon to swamp anything.
    assert _analyze(_bending_but_unfinished(), {"optimizer": "Adam", "eps": 1e-3}).finding("slow-convergence").level == "ok"
    assert _analyze(_bending_but_unfinished(), {"optimizer": "SGD", "eps": 1.0}).finding("slow-convergence").level == "ok"
    # A loss that has settled is not slow, whatever its epsilon.
    settled = {"loss": (STEPS, 1.0 + 1.3 * np.exp(-STEPS / 30) + 0.005 * np.random.default_rng(7).standard_normal(N))}
    assert _analyze(settled, {"optimizer": "Adam", "eps": 1.0}).finding("slow-convergence").level == "ok"


def test_corroboration_thresholds_are_configurable():
    config = from_dict({"thresholds": {"config": {"adam_eps_large": 2.0}}})
    history = RunHistory.from_series(RunRef("file", "p", "r", config={"adam_epsilon": 1.0}), _slow())
    assert _codes(engine.analyze(history, config).finding("slow-convergence")) == []
    assert config.thresholds_for(config_facts.ID).adam_eps_large == 2.0


def _write_lightning_run(folder, loss):
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_text("step,train_loss\n" + "".join(f"{i},{float(v)!r}\n" for i, v in enumerate(loss)))


def test_hparams_yaml_beside_a_lightning_metrics_csv_is_the_config(tmp_path):
    run = tmp_path / "lightning_logs" / "version_0"
    _write_lightning_run(run, _slow()["loss"][1])
    (run / "hparams.yaml").write_text("optimizer: Adam\nlr: 0.001\neps: 1.0\nbatch_size: 64\n")
    [history] = read_histories(run)
    assert dict(history.ref.config) == {"optimizer": "Adam", "lr": 0.001, "eps": 1.0, "batch_size": 64}
    assert _codes(engine.analyze(history).finding("slow-convergence")) == ["config_adam_epsilon"]


def test_hparams_yaml_with_python_objects_is_skipped_with_a_note(tmp_path):
    run = tmp_path / "version_1"
    _write_lightning_run(run, _slow()["loss"][1])
    (run / "hparams.yaml").write_text("loss_fn: !!python/object:builtins.object {}\nlr: 0.001\n")
    [history] = read_histories(run / "metrics.csv")
    assert dict(history.ref.config) == {}
    assert any("hparams.yaml" in n and "not read" in n for n in history.notes)


def test_hparams_written_by_lightnings_csv_logger(tmp_path):
    loggers = pytest.importorskip("lightning.pytorch.loggers")
    logger = loggers.CSVLogger(str(tmp_path), name="run")
    logger.log_hyperparams({"optimizer": "SGD", "learning_rate": 5e-5, "batch_size": 16})
    for i, v in enumerate(_slow()["loss"][1]):
        logger.log_metrics({"train_loss": float(v)}, step=i)
    logger.save()
    logger.finalize("success")
    [history] = read_histories(tmp_path / "run" / "version_0")
    f = facts(history.ref.config)
    assert f.optimizer == Fact("sgd", "optimizer") and f.lr == Fact(5e-5, "learning_rate") and f.batch_size == Fact(16, "batch_size")
    report = engine.analyze(history)
    assert _codes(report.finding("slow-convergence")) == ["config_lr", "config_optimizer"]
    # The CLI shows the config evidence too.
    out = CliRunner().invoke(main, ["analyze", str(tmp_path / "run" / "version_0"), "--format", "json", "--fail-on", "never"])
    doc = json.loads(out.stdout)
    [slow] = [f for f in doc["runs"][0]["findings"] if f["id"] == "slow-convergence"]
    assert {"config_lr", "config_optimizer"} <= {e["code"] for e in slow["evidence"]}


def test_hf_trainer_state_json_gives_the_batch_size(tmp_path):
    transformers = pytest.importorskip("transformers")
    loss = _oscillating()["loss"][1]
    state = transformers.TrainerState(train_batch_size=2, global_step=N,
                                      log_history=[{"step": int(i), "loss": float(v)} for i, v in enumerate(loss, 1)])
    state.save_to_json(str(tmp_path / "trainer_state.json"))
    [history] = read_histories(tmp_path / "trainer_state.json")
    assert facts(history.ref.config).batch_size == Fact(2, "train_batch_size")
    osc = engine.analyze(history).finding("loss-oscillation")
    assert osc.is_problem and "config_batch_size" in _codes(osc)
