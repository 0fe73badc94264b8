"""A W&B run folder written by the real SDK (offline) carries its ``wandb.init(config=…)``: the
run's config, from which a finding's evidence can name the LR."""

from __future__ import annotations

from trackerhealth.adapters.files import read_histories
from trackerhealth.config_facts import Fact, facts


def test_the_sdk_config_of_a_run_folder_gives_the_lr(sdk_runs):
    [history] = read_histories(sdk_runs["sgd"].folder)
    assert history.ref.config["model"]["hidden"] == 16  # nested, as wandb.init got it
    assert facts(history.ref.config).lr == Fact(0.05, "lr")  # train_numpy.py: base_lr
