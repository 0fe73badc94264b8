"""KerasHealthCallback in real ``model.fit()`` runs (Keras 3 on the torch backend, CPU)."""

from __future__ import annotations

import math
import os

import pytest

pytestmark = [pytest.mark.extra_keras,
              pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")]
os.environ.setdefault("KERAS_BACKEND", "torch")  # before keras is first imported


def _fit(tmp_path, callback, *, naive: bool, epochs: int, lr: float, validate: bool = True):
    import keras
    from torch_models import blobs

    keras.utils.set_random_seed(0)
    x, y = (t.numpy() for t in blobs(0))
    xv, yv = (t.numpy() for t in blobs(1, n=256))
    y, yv = y[:, None], yv[:, None]
    ops = keras.ops

    def naive_bce(y_true, logits):  # written by hand, without an epsilon
        p = ops.sigmoid(logits)
        return -ops.mean(y_true * ops.log(p) + (1 - y_true) * ops.log(1 - p))

    def stable_bce(y_true, logits):
        return keras.losses.binary_crossentropy(y_true, logits, from_logits=True)

    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(lr), loss=naive_bce if naive else stable_bce)
    csv = tmp_path / "history.csv"
    batches: list[int] = []  # batches trained in each epoch
    count = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: batches.append(0),
                                           on_train_batch_end=lambda batch, logs: batches.__setitem__(-1, batches[-1] + 1))
    history = model.fit(x, y, validation_data=(xv, yv) if validate else None, batch_size=32,
                        epochs=epochs, shuffle=True, verbose=0,
                        callbacks=[callback, count, keras.callbacks.CSVLogger(str(csv))])
    history.batches = batches
    return history, csv


def _scan(csv):
    from trackerhealth.adapters.files import read_histories
    from trackerhealth.engine import analyze

    (history,) = read_histories(csv)
    return {f.id for f in analyze(history).problems}


def test_keras_nan_run_stops_at_the_batch_and_is_reported(tmp_path):
    from trackerhealth.monitor import KerasHealthCallback

    callback = KerasHealthCallback(alert="log", stop_on_nonfinite=True)
    history, csv = _fit(tmp_path, callback, naive=True, epochs=40, lr=0.02, validate=False)
    losses = history.history["loss"]
    assert len(losses) < 40, "stopped early"
    assert not any(math.isnan(v) for v in losses[:-1]) and math.isnan(losses[-1]), "NaN only in the last epoch"
    assert history.batches[:-1] == [32] * (len(losses) - 1) and history.batches[-1] < 32, "stopped at the batch"
    assert callback.stopped_by["key"] == "loss" and callback.stopped_by["step"] == len(losses) - 1
    assert all(not c.active for c in callback.core.results[:-1])
    assert [f.id for f in callback.core.results[-1].new] == ["nonfinite"]
    assert callback.final.ids == ["nonfinite"] and _scan(csv) == {"nonfinite"}


def test_keras_healthy_run_raises_nothing(tmp_path):
    from trackerhealth.monitor import KerasHealthCallback

    callback = KerasHealthCallback(alert="log", timing=True)
    _, csv = _fit(tmp_path, callback, naive=False, epochs=12, lr=0.01)
    assert len(callback.core.results) == 12 and all(not c.active for c in callback.core.results)
    assert callback.final.ids == [] and _scan(csv) == set()
    keys = callback.monitor.history().keys()
    assert {"loss", "val_loss", "lr", "perf/data_time", "perf/compute_time"} <= set(keys)
