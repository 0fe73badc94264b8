"""A failed, unread or unjudged analysis is never tagged healthy on MLflow: ``trackerhealth.status``
is ``error`` / ``unknown`` (real MLflow server, real training logs)."""

from __future__ import annotations

from mlflow_support import corpus_history, log_history, scan_cli

from trackerhealth.schema import RunHistory
from trackerhealth.writers import mlflow_writer as mw


def _args(server, exp_name, cache_dir):
    return ["--mlflow-uri", server.url, "-e", exp_name, "--cache-dir", str(cache_dir), "--fail-on", "never"]


def _renamed(history: RunHistory, old: str, new: str) -> RunHistory:
    frame = history.to_frame()
    frame["key"] = frame["key"].replace(old, new)
    return RunHistory.from_frame(history.ref, frame)


def _first_steps(history: RunHistory, last: float) -> RunHistory:
    frame = history.to_frame()
    return RunHistory.from_frame(history.ref, frame[frame["step"] <= last])


def test_an_unrecognised_loss_is_tagged_unknown(mlflow_server, client, experiment, cache_dir):
    exp_id, exp_name = experiment
    healthy = log_history(client, exp_id, corpus_history("healthy_fast_loader_mlflow"), "healthy")
    cost = log_history(client, exp_id, _renamed(corpus_history("nan_log0_custom_bce"), "train_loss", "cost"), "cost")
    # Its first 80 steps: 8 loss points, read but too few for any trend diagnosis (10) -- not judged, not ok.
    short = log_history(client, exp_id, _first_steps(corpus_history("healthy_fast_loader_plain"), 80), "short")
    scan_cli(_args(mlflow_server, exp_name, cache_dir))
    assert client.get_run(healthy).data.tags[mw.STATUS] == "ok"
    assert client.get_run(cost).data.tags[mw.STATUS] == "unknown"
    assert client.get_run(short).data.tags[mw.STATUS] == "unknown"


def test_every_diagnosis_failing_is_tagged_error(every_diagnosis_raises, mlflow_server, client, experiment,
                                                 cache_dir):
    exp_id, exp_name = experiment
    rid = log_history(client, exp_id, corpus_history("healthy_fast_loader_plain"), "healthy")
    scan_cli(_args(mlflow_server, exp_name, cache_dir))
    tags = client.get_run(rid).data.tags
    assert tags[mw.STATUS] == "error"
