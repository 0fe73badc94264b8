"""Printed training logs (``train.log``, ``stdout.txt``, Slurm ``.out``): each tool's own line format,
read into steps and metrics, judged like any other run, and a text file that is no log refused
with a message that says what a log line needs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner

from trackerhealth.adapters.files import InputError, read_histories
from trackerhealth.cli import main
from trackerhealth.engine import analyze
from trackerhealth.roles import is_loss, resolve, tokens


def one(path):
    (history,) = read_histories(path)
    return history


def points(history, key):
    s = history[key]
    return list(zip(s.steps.tolist(), s.values.tolist()))


def nanogpt(losses, *, every=10, evals=()):
    """nanoGPT's train.py prints: ``iter N: loss X, time Yms, mfu Z%`` and ``step N: train loss X, val loss Y``."""
    lines = ["Overriding config with config/train_shakespeare_char.py:", "tokens per iteration will be: 16,384",
             "number of parameters: 10.65M"]
    for i, loss in enumerate(losses):
        step = i * every
        for at, train, val in evals:
            if at == step:
                lines.append(f"step {step}: train loss {train:.4f}, val loss {val:.4f}")
                lines.append("saving checkpoint to out-shakespeare-char")
        lines.append(f"iter {step}: loss {loss:.4f}, time {91.0 + i % 3:.2f}ms, mfu {4.09:.2f}%")
    return "\n".join(lines) + "\n"


def megatron(rows):
    """Megatron-LM's training log: one `|`-separated line per logged iteration."""
    out = [" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 125226240"]
    for it, loss, gnorm in rows:
        out.append(
            f" iteration {it:8d}/  500000 | consumed samples: {it * 512:12d} | elapsed time per iteration (ms): 1512.3 | "
            f"learning rate: 1.500E-04 | global batch size:   512 | lm loss: {loss:.6E} | loss scale: 4096.0 | "
            f"grad norm: {gnorm:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |")
    return "\n".join(out) + "\n"


def test_nanogpt_lines_give_the_loss_per_iteration_the_evals_and_the_step_time_in_seconds(tmp_path):
    losses = 4.2 * np.exp(-np.arange(40) / 12) + 1.4
    log = tmp_path / "train.log"
    log.write_text(nanogpt(losses, evals=[(0, 4.28, 4.29), (200, 1.97, 2.07)]))
    h = one(log)
    assert points(h, "loss")[:2] == [(0.0, 5.6), (10.0, round(losses[1], 4))]
    assert points(h, "val_loss") == [(0.0, 4.29), (200.0, 2.07)] and points(h, "train_loss")[1] == (200.0, 1.97)
    view = resolve(h)
    # The per-iteration loss is the curve; the eval's train loss is two points of it.
    assert view.key("train_loss") == "loss" and view.key("val_loss") == "val_loss"
    assert view.key("step_time") == "time_ms" and view.series("step_time").values[0] == pytest.approx(0.091)
    assert h.notes[0].startswith("read as a printed training log: 42 metric lines")
    assert analyze(h).status == "ok"


def test_a_nanogpt_run_that_blows_up_without_a_nan_is_found_at_its_step(tmp_path):
    losses = [10.9, 9.9, 9.0, 7.8, 6.6, 6.1, 5.9, 5.7, 5.3, 5.1, 4.8] + [280.0, 190.0, 125.0, 97.0, 70.0, 79.0, 41.0] + [
        30.0 + 0.5 * (i % 4) for i in range(20)]
    log = tmp_path / "train.log"
    log.write_text(nanogpt(losses))
    report = analyze(one(log))
    assert report.status == "critical"
    finding = report.finding("nonfinite")
    assert finding.is_problem and finding.level == "critical"
    # The jump is between iter 100 (4.8) and iter 110 (280); the onset is read from a level over a few points.
    assert 90 <= min(e.step_start for e in finding.evidence if e.step_start is not None) <= 110


def test_a_printed_nan_is_nonfinite(tmp_path):
    text = nanogpt([10.9, 9.9, 9.0, 7.8, 6.6, 6.1, 5.9, 5.7, 5.3, 5.1, 4.8]).splitlines()
    text += [f"iter {s}: loss nan, time 441.00ms, mfu 48.31%" for s in range(110, 400, 10)]
    log = tmp_path / "fp16.log"
    log.write_text("\n".join(text) + "\n")
    h = one(log)
    assert math.isnan(points(h, "loss")[11][1]) and points(h, "loss")[11][0] == 110
    assert "29 printed values are nan/inf" in h.notes
    finding = analyze(h).finding("nonfinite")
    assert finding.level == "critical" and finding.evidence[0].step_start == 110


def test_megatron_lines_read_every_field_and_the_validation_lines_as_val(tmp_path):
    rows = [(it, 10.8 * math.exp(-it / 400) + 2.0, 5.0) for it in range(10, 1010, 10)]
    text = megatron(rows) + (
        "-" * 96 + "\n validation loss at iteration 1000 | lm loss value: 2.310412E+00 | lm loss PPL: 1.007856E+01 | \n"
        + "-" * 96 + "\n")
    log = tmp_path / "slurm-1234.out"
    log.write_text(text)
    h = one(log)
    assert points(h, "lm_loss")[0] == (10.0, pytest.approx(rows[0][1], rel=1e-6))
    # "number of nan iterations: 0" is a count named with the word nan, not a NaN.
    assert points(h, "number_of_nan_iterations")[0] == (10.0, 0.0)
    assert points(h, "val/lm_loss_value") == [(1000.0, 2.310412)]
    view = resolve(h)
    assert view.key("train_loss") == "lm_loss" and view.key("val_loss") == "val/lm_loss_value"
    assert view.key("grad_norm") == "grad_norm" and view.key("lr") == "learning_rate"
    # fp16's loss scale multiplies the loss; it is not one, and not a task of it.
    assert "loss_scale" not in [k for _, k in view.group("task_losses")] and not is_loss(tokens("loss_scale"))
    assert view.key("step_time") == "elapsed_time_per_iteration_ms"
    assert view.series("step_time").values[0] == pytest.approx(1.5123)
    assert analyze(h).status == "ok"


def test_epoch_and_step_in_brackets_make_one_timeline(tmp_path):
    log = tmp_path / "stdout.txt"
    log.write_text("Epoch [1/5], Step [100/600], Loss: 0.2345\nEpoch [1/5], Step [600/600], Loss: 0.1945\n"
                   "Epoch [2/5], Step [100/600], Loss: 0.1245\n")
    h = one(log)
    assert points(h, "loss") == [(100.0, 0.2345), (600.0, 0.1945), (700.0, 0.1245)]
    assert points(h, "epoch")[-1] == (700.0, 2.0)
    assert "after the epochs before it" in h.notes[0]


def test_a_step_that_counts_the_whole_run_is_not_offset_by_its_epoch(tmp_path):
    log = tmp_path / "stdout.txt"
    log.write_text("epoch 1 step 1000/5000 loss 0.50\nepoch 2 step 2000/5000 loss 0.40\nepoch 3 step 3000/5000 loss 0.35\n")
    assert points(one(log), "loss") == [(1000.0, 0.5), (2000.0, 0.4), (3000.0, 0.35)]


def test_keras_progress_bars_keep_the_epochs_last_redraw(tmp_path):
    log = tmp_path / "fit.log"
    log.write_bytes(b"Epoch 1/2\n 1/10 [==>...........] - ETA: 1s - loss: 0.9100\r10/10 [==============================] "
                    b"- 1s 20ms/step - loss: 0.6931 - accuracy: 0.5000 - val_loss: 0.6800 - val_accuracy: 0.5500\n"
                    b"Epoch 2/2\n10/10 [==============================] - 0s 5ms/step - loss: 0.5012 - accuracy: 0.7000 "
                    b"- val_loss: 0.5500 - val_accuracy: 0.7000\n")
    h = one(log)
    assert points(h, "loss") == [(1.0, 0.6931), (2.0, 0.5012)] and points(h, "val_loss")[1] == (2.0, 0.55)
    assert set(h.keys()) == {"loss", "accuracy", "val_loss", "val_accuracy"}


def test_keras_epoch_lines_after_a_settings_banner_that_names_the_epochs_count_the_run(tmp_path):
    # Public log P533 (batch 49): a banner's "- Epoch: 1000" (the number of epochs to train) above Keras' "Epoch 1/1000"
    # lines held every progress bar at epoch 1000, one point. The latest header names the epoch.
    out = ["    - Epoch: 3", "-" * 40]
    for e, loss in ((1, 0.46), (2, 0.41), (3, 0.28)):
        out += [f"Epoch {e}/3", f"1/1 [==============================] - ETA: 0s - loss: {loss} - val_loss: {loss + 0.01}"]
    log = tmp_path / "train.log"
    log.write_text("\n".join(out) + "\n")
    h = one(log)
    assert points(h, "loss") == [(1.0, 0.46), (2.0, 0.41), (3.0, 0.28)]


def olmo(rows):
    """OLMo's trainer: after a tab-separated logging prefix, a ``[step=N/T,epoch=E]`` header, then one indented
    ``name=value`` per metric line (thousands separated by commas)."""
    prefix = "2025-12-11 00:28:{:02d}.343\thazy-book-rustles-fin-02:0\tolmo.train:979\tINFO\t"
    out = [prefix.format(0).replace("olmo.train:979", "train:417") + "CLI environment prepared"]
    for step, loss, gnorm in rows:
        out += [prefix.format(step) + f"[step={step}/2500,epoch=0]", f"    optim/total_grad_norm={gnorm}",
                f"    train/CrossEntropyLoss={loss}", f"    train/Perplexity={math.exp(loss):,.0f}",
                f"    throughput/total_tokens={step * 4_194_304:,}"]
    out.append("W1212 12:11:26.156000 9724 torch/distributed/elastic/multiprocessing/api.py:908] Sending process 9875 "
               "closing signal SIGTERM")
    return "\n".join(out) + "\n"


def test_olmo_step_headers_give_their_indented_metrics_that_step(tmp_path):
    # Public logs P584, P585 (batch 53): each metric line alone names no step, so every OLMo metric was dropped, and the
    # prefix's host name and "olmo.train:979" were read as metrics. Now a step-only header's name=value lines are its.
    log = tmp_path / "train.log"
    log.write_text(olmo([(1, 10.35, 7.712), (2, 10.01, 5.5), (3, 9.61, 3.25)]))
    h = one(log)
    assert points(h, "train/cross_entropy_loss") == [(1.0, 10.35), (2.0, 10.01), (3.0, 9.61)]
    assert points(h, "optim/total_grad_norm") == [(1.0, 7.712), (2.0, 5.5), (3.0, 3.25)]
    assert points(h, "throughput/total_tokens") == [(1.0, 4_194_304.0), (2.0, 8_388_608.0), (3.0, 12_582_912.0)]
    assert round(h["train/perplexity"].values[0]) == round(math.exp(10.35))  # "31,187", not 31
    assert not {k for k in h.keys() if "olmo" in k or "hazy" in k or "sigterm" in k or "process" in k}
    assert resolve(h).key("train_loss") == "train/cross_entropy_loss"


def test_a_comma_between_two_numbers_is_no_thousands_separator(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i}: loss {1.0 / i:.4f}, acc 0.{i}, lr 1,2\n" for i in range(1, 6)))
    h = one(log)
    assert points(h, "loss")[:2] == [(1.0, 1.0), (2.0, 0.5)] and h["acc"].values[1] == 0.2


def test_a_split_named_once_by_a_lines_first_metric_covers_its_bare_names(tmp_path):
    # Public logs P537-P539 (batch 50): "[Epoch: 05] Valid acc: 0.2988 | loss: 2.0462" after the epoch's "Train acc: ... |
    # loss: ..." line. The bare "loss" of the val line had gone into the train loss's series every fifth epoch.
    out = []
    for e in range(1, 11):
        out.append(f"17:46:38 [Epoch: {e:02d}] Train acc: {0.1 * e:.4f} | loss: {2.0 / e:.4f}")
        if e % 5 == 0:
            out.append(f"18:02:35 [Epoch: {e:02d}] Valid acc: {0.1 * e:.4f} | loss: {3.0 / e:.4f} | train_loss: 9.0")
    log = tmp_path / "train_log.txt"
    log.write_text("\n".join(out) + "\n")
    h = one(log)
    assert [v for _, v in points(h, "loss")] == [round(2.0 / e, 4) for e in range(1, 11)]
    assert points(h, "val/loss") == [(5.0, 0.6), (10.0, 0.3)] and len(points(h, "valid_acc")) == 2
    assert "val/train_loss" not in h.keys()  # a name that says its own split keeps it


def test_a_progress_bars_postfix_is_kept_apart_from_the_epoch_lines_that_give_the_same_metric(tmp_path):
    # Public log P525 (batch 48, blind): tqdm's bar for each epoch, its redraws on one line, shows one batch's CE in its
    # postfix, and the epoch's summary line gives the epoch's. Under one key they alternated (0.04, 0.145, 0.072, ...),
    # a sawtooth read as a loss spike every epoch on a healthy run.
    out = []
    for e in range(1, 31):
        batch, mean = 0.5 / e if e % 2 else 0.05 / e, 1.0 / e
        out += [f"\rEpoch {e}:   0%|          | 0/48 [00:00<?, ?it/s]\rEpoch {e}: 100%|##########| 48/48 [00:03<00:00, "
                f"12.1it/s, CE={batch:.4f}, acc=97.0%]", "", f"Epoch {e}", f"  Train - CE: {mean:.4f}, acc: 97.5%",
                f"  Val   - CE: {0.8 * mean:.4f}, acc: 98.0%"]
    log = tmp_path / "train_log.txt"
    log.write_text("\n".join(out) + "\n")
    h = one(log)
    assert [round(v, 4) for _, v in points(h, "ce")][:3] == [1.0, 0.5, 0.3333]
    assert [round(v, 4) for _, v in points(h, "ce_bar")][:2] == [0.5, 0.025] and len(points(h, "val/ce")) == 30
    # A bar alone (Keras' epoch redraws, above) keeps its key: nothing else gives it.


def test_sessions_appended_from_a_fresh_start_are_runs_and_a_resumed_one_is_not(tmp_path):
    # Public log P529 (batch 48, blind): eleven sessions of 'Epoch E/20, Train Loss: x' appended to one log, each
    # starting over from the untrained loss; one continuous timeline read each fresh start as a divergence.
    def session(losses):
        return [f"Epoch {e}/20, Train Loss: {v:.4f}" for e, v in enumerate(losses, start=1)]

    fresh = session([0.098 - 0.0001 * e for e in range(20)]) * 3
    log = tmp_path / "training.log"
    log.write_text("Using device: cpu\n" + "\n".join(fresh) + "\n")
    runs = read_histories(log)
    assert len(runs) == 3 and all(len(points(h, "train_loss")) == 20 for h in runs)
    assert "training 2 of 3 appended to this log" in runs[1].notes[1]
    # Resumed (P411): the counter starts over, the loss goes on from where it was: one training.
    resumed = session([5.0 - 0.05 * e for e in range(20)]) + session([4.0 - 0.05 * e for e in range(20)])
    log.write_text("\n".join(resumed) + "\n")
    (run,) = read_histories(log)
    assert len(points(run, "train_loss")) == 40


def test_hf_trainers_printed_dicts_count_lines_as_steps_and_keep_nan(tmp_path):
    log = tmp_path / "finetune.log"
    log.write_text(" 10%|#         | 1/10 [00:22<03:20, 22.80s/it]\n"
                   "{'loss': 2.1234, 'grad_norm': 1.5, 'learning_rate': 4.9e-05, 'epoch': 0.02}\n"
                   "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.04}\n"
                   "{'eval_loss': 1.9, 'eval_runtime': 3.2, 'epoch': 0.04}\n")
    h = one(log)
    assert points(h, "loss")[0] == (1.0, 2.1234) and math.isnan(points(h, "grad_norm")[1][1])
    assert points(h, "eval_loss") == [(3.0, 1.9)]
    assert "HF Trainer prints no step" in h.notes[0]


def test_a_text_file_without_metric_lines_says_what_a_log_line_needs(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("Training went fine.\nnumber of parameters: 124M\nloss looked good\n")
    with pytest.raises(InputError, match="holds a step and a loss"):
        read_histories(notes)


def test_a_table_saved_as_txt_is_still_read_as_a_table(tmp_path):
    table = tmp_path / "history.txt"
    table.write_text("step,loss,val_loss\n" + "".join(f"{i},{2.0 / (i + 1):.4f},{2.1 / (i + 1):.4f}\n" for i in range(40)))
    h = one(table)
    assert points(h, "loss")[1] == (1.0, 1.0) and not any("printed training log" in n for n in h.notes)


def test_analyze_reads_a_printed_log_and_exits_on_its_verdict(tmp_path):
    losses = [10.9, 9.9, 9.0, 7.8, 6.6, 6.1, 5.9, 5.7, 5.3, 5.1, 4.8] + [280.0, 190.0, 125.0] + [60.0] * 20
    log = tmp_path / "train.log"
    log.write_text(nanogpt(losses))
    result = CliRunner().invoke(main, ["analyze", str(log)])
    assert result.exit_code == 1, result.output
    assert "nonfinite" in result.output and "critical" in result.output


# Line styles met in real public logs (evidence/public batch 5), each written here in its tool's format.

def test_windows_line_ends_are_no_progress_bar_redraws(tmp_path):
    log = tmp_path / "training_log.txt"
    log.write_bytes(b"".join(f"Epoch 1, Step {s}: Reconstruction Loss={1 / (s + 1):.4f}, KL Loss=2.5, Total Loss=3.0\r\n"
                             .encode() for s in range(0, 300, 30)))
    h = one(log)
    assert [s for s, _ in points(h, "reconstruction_loss")] == list(range(0, 300, 30))


def test_bracketed_counters_with_padding_and_a_running_clock(tmp_path):
    lines = [f"2025-06-12 13:31:{i % 60:02d},075 - INFO - Epoch: [{e:2d}/200] Iter [{it:4d}/1487] || "
             f"Time: {3.8 * (e * 148 + it // 10):.4f} sec || lr: 0.0099 || Loss: {2.0 - 0.001 * i:.4f}"
             for i, (e, it) in enumerate((e, it) for e in range(3) for it in range(10, 1490, 10))]
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    h = one(log)
    loss = points(h, "loss")
    assert len(loss) == 3 * 148 and loss[148][0] == 1487 + 10  # epoch 1's first iteration follows epoch 0's last
    # Time since the start only grows: it is no step time.
    assert "elapsed_time_s" in h.keys() and resolve(h).key("step_time") is None


def test_a_batch_counter_with_its_total_counts_within_the_epoch_but_a_batch_size_does_not(tmp_path):
    log = tmp_path / "training_log.txt"
    log.write_text("".join(f"Epoch: {e:3d} | Batch: {b:5d}/ 1330 | LR: 2.97e-04 |Loss: {4.6 - 0.01 * e:.4f} | Time: {b * 0.3:.1f}s\n"
                           for e in (16, 17) for b in range(10, 1330, 10)))
    steps = [s for s, _ in points(one(log), "loss")]
    assert steps[0] == 10 and steps[132] == 1330 + 10
    sized = tmp_path / "sized.log"
    sized.write_text("epoch 1 batch 32 loss 0.9\nepoch 2 batch 32 loss 0.8\n")
    assert points(one(sized), "batch") == [(1.0, 32.0), (2.0, 32.0)]


def test_lines_that_name_only_their_epoch_are_spread_over_it(tmp_path):
    log = tmp_path / "train.log"
    body = []
    for e in (1, 2):
        body.append(f"2025-03-02 05:16:20,348 - INFO - ##### Epoch {e} #####")
        body += [f"2025-03-02 05:16:20,962 - INFO - Epoch {e} - Batch loss: {10.0 / (e * 100 + b):.4f}" for b in range(4)]
        body.append(f"2025-03-02 05:26:20,962 - INFO - Epoch {e} - Average Train Loss: 0.5")
    log.write_text("\n".join(body) + "\n")
    h = one(log)
    assert [s for s, _ in points(h, "batch_loss")] == [1.0, 1.2, 1.4, 1.6, 2.0, 2.2, 2.4, 2.6]
    assert "spread evenly" in h.notes[0]


def test_a_warning_on_the_line_and_a_second_counter_are_not_metrics(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("".join(f"/home/u/ssd.pytorch/utils/augmentations.py:238: VisibleDeprecationWarning: ragged iter {i} || "
                           f"Loss: {5.0 / (i + 10):.4f} ||\n" for i in range(0, 100, 10))
                   + "Saving state, iter: 2000 Loss: 0.3\n")
    assert set(one(log).keys()) == {"loss"}


def test_yolo_console_tables_are_read_per_epoch_with_their_loss_columns(tmp_path):
    header = "     Epoch   gpu_mem       box       obj       cls     total    labels  img_size"
    out = []
    for e in range(40):
        box, obj = 0.075 * 0.95 ** e, 0.027 * 0.97 ** e
        out += [header, f"     {e}/299     2.87G   0.08   0.03   0   0.11   30   640:  10%|#  | 4/38 [00:05<00:40]\r"
                        f"     {e}/299      7.8G   {box:.5f}   {obj:.5f}         0    {box + obj:.5f}        30       640: "
                        "100%|##########| 38/38 [00:45<00:00,  1.20s/it]",
                "               Class      Images      Labels           P           R      mAP@.5  mAP@.5:.95: 100%|#| 7/7",
                "                 all         195         882       0.118       0.151       0.047     0.00886"]
    log = tmp_path / "nohup.out"
    log.write_text("\n".join(out) + "\n")
    h = one(log)
    assert points(h, "train/loss")[1] == (1.0, pytest.approx(0.075 * 0.95 + 0.027 * 0.97, abs=1e-5))
    assert {"train/box_loss", "train/obj_loss", "train/cls_loss"} <= set(h.keys()) and len(h["train/loss"]) == 40
    assert resolve(h).key("train_loss") == "train/loss"


def stgcn(trainings):
    """st-gcn's torchlight IO (and the skeleton-action codebases built on it) prints a section header that names
    only an epoch, then each metric on a line of its own; a script started again appends to the same log.txt."""
    lines = []
    for train, evals in trainings:
        lines.append("[03.24.23|09:56:11] Parameters:\n{'work_dir': './output', 'base_lr': 0.1, 'num_epoch': 50}\n")
        for epoch, loss in enumerate(train):
            lines += [f"[03.24.23|09:56:11] Training epoch: {epoch}", f"[03.24.23|09:56:31] \tmean_loss: {loss}",
                      "[03.24.23|09:56:31] Time consumption:", "[03.24.23|09:56:31] Done."]
            if epoch in evals:
                lines += [f"[03.24.23|09:58:13] Eval epoch: {epoch}", f"[03.24.23|09:58:13] \tmean_loss: {evals[epoch]}",
                          "[03.24.23|09:58:13] \tTop1: 0.00%", "[03.24.23|09:58:13] Done."]
    return "\n".join(lines) + "\n"


def test_st_gcn_section_headers_give_their_epoch_and_each_appended_start_is_a_run(tmp_path):
    # Public log P190 (batch 16, written after it was scored): ~23 starts appended to one log.txt, the first
    # ones NaN at every training epoch. Read as one run of lines without a counter, it had no loss at all.
    path = tmp_path / "log.txt"
    nan_run = (["nan"] * 5, {4: 5.9914})
    learning = ([2.4 * 0.93 ** e for e in range(30)], {4: 2.1, 9: 1.8, 14: 1.7})
    path.write_text(stgcn([nan_run, learning]))
    first, second = read_histories(path)
    assert [s for s, _ in points(first, "mean_loss")] == [0, 1, 2, 3, 4]
    assert all(math.isnan(v) for _, v in points(first, "mean_loss"))
    assert points(first, "val/mean_loss") == [(4, 5.9914)]
    assert len(second["mean_loss"]) == 30 and points(second, "val/mean_loss")[-1] == (14, 1.7)
    assert "training 2 of 2 appended" in " ".join(second.notes) and second.ref.id != first.ref.id
    assert analyze(first).finding("nonfinite").level == "critical"
    assert analyze(second).status != "critical"
    # One start only: one run, as before.
    path.write_text(stgcn([learning]))
    (only,) = read_histories(path)
    assert resolve(only).key("val_loss") == "val/mean_loss"


def test_a_chinese_log_saved_in_gbk_reads_its_batches_epochs_loss_and_accuracy(tmp_path):
    # The shape of a GPT-2 fine-tune's log on GitHub (davidsongtao/Medical_QA_System_GPT2, logs/train_log.txt,
    # GBK): a batch counter that starts over each epoch, full-width colons, Chinese metric names.
    lines = ["模型训练开始，起始时间：2024-07-13 06:23:43.091239"]
    expected = []
    for epoch in range(3):
        for batch in (10, 20, 30, 40, 50):
            loss = 10.0 - epoch - batch / 100
            lines.append(f"当前Batch：{batch}/50 | 当前epoch:{epoch}/3 | 当前损失值：{loss:.4f} | 当前准确率：{5 * epoch:.2f}%")
            expected.append((epoch * 50 + batch, round(loss, 4)))
        lines.append("最佳模型保存成功！")
    log = tmp_path / "train_log.txt"
    log.write_bytes("\n".join(lines).encode("gbk"))
    history = one(log)
    assert points(history, "loss") == expected
    assert points(history, "accuracy")[-1] == (150.0, 10.0)
    assert any("GB18030" in note for note in history.notes)
    assert resolve(history).key("train_loss") == "loss"


def test_chinese_epoch_ordinals_and_train_and_val_losses_in_utf8(tmp_path):
    log = tmp_path / "训练日志.log"
    log.write_text("".join(f"第{e}轮 训练损失：{1 / e:.4f}，验证损失：{1 / e + 0.1:.4f}，学习率：0.001\n" for e in range(1, 8)),
                   encoding="utf-8")
    history = one(log)
    assert points(history, "train_loss") == [(float(e), round(1 / e, 4)) for e in range(1, 8)]
    assert points(history, "val_loss")[0] == (1.0, 1.1)
    view = resolve(history)
    assert (view.key("train_loss"), view.key("val_loss"), view.key("lr")) == ("train_loss", "val_loss", "lr")
    assert not any("GB18030" in note for note in history.notes)


def test_bytes_that_are_neither_utf8_nor_gbk_are_still_read_with_the_bad_bytes_replaced(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"\x81\x20 junk\n" + "".join(f"iter {i}: loss {2 - i / 10:.4f}\n" for i in range(5)).encode())
    assert [v for _, v in points(one(log), "loss")] == [2.0, 1.9, 1.8, 1.7, 1.6]


def test_an_epochs_summary_line_among_batch_lines_closes_that_epoch_as_its_aggregate(tmp_path):
    # The shape of public log P61 (an IWSLT Transformer): running batch losses with a counter that starts
    # over each epoch, and after each epoch a Chinese summary with its train and val loss.
    lines = []
    for epoch in (16, 17, 18):
        for batch in (100, 200, 300):
            lines.append(f"Epoch: {epoch}, Batch: {batch}/ 300, LR: 0.000297, Loss: {5 - epoch / 10 - batch / 1e4:.4f}, Time: 1.2s")
        lines.append(f"Epoch {epoch} 完成 | 训练损失: {5 - epoch / 10:.4f} | 验证损失: {6 - epoch / 100:.4f} | 时间: 385.8s")
    log = tmp_path / "training_log.txt"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    history = one(log)
    assert [s for s, _ in points(history, "loss")] == [100, 200, 300, 400, 500, 600, 700, 800, 900]
    assert points(history, "train_loss_epoch") == [(300.0, 3.4), (600.0, 3.3), (900.0, 3.2)]
    view = resolve(history)
    assert (view.key("train_loss"), view.key("val_loss")) == ("loss", "val_loss_epoch")


def test_an_evaluation_pass_without_a_counter_of_the_run_gives_one_val_point_where_training_had_got_to(tmp_path):
    # The PyTorch ImageNet example's console (public log P412, a WS-DAN bird classifier): per-batch
    # "Epoch: [e][i/N] ... Loss x (running average)" lines, then an evaluation pass "Test: [i/M] ... Loss x (avg)".
    lines = []
    for epoch in range(3):
        for batch in (0, 10, 20):
            lines.append(f"Epoch: [{epoch}][{batch}/30]\tTime 1.158 (1.175)\tData 0.364 (0.370)\tLoss {3 - epoch:.4f} ({3.5 - epoch:.4f})")
            lines.append(f"Prec@1     37.500 (19.208)\tPrec@5     66.667 (37.569)")
        for batch in (0, 10, 20):
            lines.append(f"Test: [{batch}/25]\tTime 0.604 (0.604)\tLoss {9 + batch:.4f} ({2 + epoch + batch / 100:.4f})")
        lines.append(" * Prec@1     52.365 Prec@5 80.394")
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    history = one(log)
    val = points(history, "val/loss")
    assert [v for _, v in val] == [2.2, 3.2, 4.2]  # each pass's last running average, one point per pass
    train_steps = [s for s, _ in points(history, "loss")] + [float("inf")]
    assert len(train_steps) == 10
    for epoch, (at, _) in enumerate(val):  # after its epoch's last training line, before the next epoch's first
        assert train_steps[3 * epoch + 2] <= at < train_steps[3 * epoch + 3]
    assert "val/test" not in history.keys() and "val/time" not in history.keys()


def test_a_log_windows_powershell_redirected_in_utf16_is_read(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes("".join(f"iter {i}: loss {2 - i / 10:.4f}\n" for i in range(5)).encode("utf-16"))
    history = one(log)
    assert [v for _, v in points(history, "loss")] == [2.0, 1.9, 1.8, 1.7, 1.6]
    assert any("UTF-16" in note for note in history.notes)


def test_a_log_whose_losses_are_not_called_losses_is_read_and_asks_which_one_is_the_loss(tmp_path):
    # pytorch-CycleGAN-and-pix2pix's loss_log.txt (public batch 41's helper found two the reader refused): every
    # value is a loss, none is named one. Its lines are read; the run is not judged until the user names its loss.
    log = tmp_path / "loss_log.txt"
    lines = ["================ Training Loss (Sun Mar  1 12:00:00 2026) ================"]
    for epoch in range(1, 21):
        for it in range(100, 501, 100):
            cycle = 2.0 * 0.95 ** (epoch + it / 500)
            lines.append(f"(epoch: {epoch}, iters: {it}, time: 0.123, data: 0.002) D_A: 0.25 G_A: 0.5{epoch % 3} "
                         f"cycle_A: {cycle:.4f} idt_A: {cycle / 2:.4f} ")
    log.write_text("\n".join(lines) + "\n")
    h = one(log)
    assert len(points(h, "cycle_a")) == 100 and points(h, "cycle_a")[0] == (100.0, round(2.0 * 0.95 ** 1.2, 4))
    # Its iters count each epoch's samples from 0 again: the epochs before are added (the largest iters, 500, an epoch).
    assert [s for s, _ in points(h, "cycle_a")] == [float(500 * (e - 1) + it) for e in range(1, 21) for it in range(100, 501, 100)]
    assert any("no metric on its lines is named a loss" in n and "cycle_a" in n and "--loss-key" in n for n in h.notes)
    # One line per epoch, each at the epoch's last iters (public log P907): twenty points, not one.
    per_epoch = tmp_path / "per_epoch" / "loss_log.txt"
    per_epoch.parent.mkdir()
    per_epoch.write_text("".join(f"(epoch: {e}, iters: 3648, time: 1188.8) D_A: 0.2 G_A: 0.19 Cyc_A: {1.26 / e:.4f}\n"
                                 for e in range(1, 21)))
    assert [s for s, _ in points(one(per_epoch), "cyc_a")] == [3648.0 * e for e in range(1, 21)]
    result = CliRunner().invoke(main, ["analyze", str(log)])
    assert "unknown" in result.output and "--loss-key" in result.output and " ok " not in result.output
    judged = CliRunner().invoke(main, ["analyze", str(log), "--loss-key", "cycle_a"])
    assert "unknown" not in judged.output.split("\n")[2], judged.output
    # A few stray "name: number" lines in a file that is no log are still no run.
    notes = tmp_path / "notes.txt"
    notes.write_text("".join(f"epoch: {e}, lr: 0.001\n" for e in range(1, 5)))
    with pytest.raises(InputError, match="holds a step and a loss"):
        read_histories(notes)


def test_a_qualifier_in_brackets_and_a_sentence_before_the_name_are_not_read_as_the_metric(tmp_path):
    # Found by public batch 42's helper (AdityaAshvin/ScalingDown): "Training Loss (avg over last 100): 2.44"
    # was read as a metric "training_loss_(avg_over_last" worth 100 at every line, and "Epoch 1 completed.
    # Average Training Loss: 4.68" as "completed._average_training_loss".
    lines = [f"2024-11-05 23:17:05,224 - INFO - Step {10 * i}, Training Loss (avg over last 100): {3.0 - 0.05 * i:.4f}, "
             f"Time (ms): 12" for i in range(1, 9)]
    lines += [f"2024-11-06 20:47:14,927 - INFO - Epoch {e} completed. Average Training Loss: {4.0 - e:.4f}" for e in (1, 2)]
    log = tmp_path / "training.log"
    log.write_text("\n".join(lines) + "\n")
    h = one(log)
    assert points(h, "training_loss")[:2] == [(10.0, 2.95), (20.0, 2.9)], sorted(h.keys())
    assert points(h, "time_ms")[0] == (10.0, 12.0)
    assert "average_training_loss" in h.keys(), sorted(h.keys())
    assert not [k for k in h.keys() if "(" in k or "completed" in k], sorted(h.keys())


def test_an_evaluation_line_behind_a_logging_prefix_is_the_val_loss(tmp_path):
    # Public log P476 (Kabir5296/CSTA-CustomImplementation): "INFO:root:Epoch 0 - Average Loss: 4.12" and
    # "INFO:root:Evaluation Epoch 0 - Average Loss: 3.95" were one zigzagging "average_loss" series: the
    # evaluation word was looked for at the start of the line, before the logging module's prefix.
    lines = []
    for e in range(6):
        lines.append(f"INFO:root:Epoch {e} - Average Loss: {4.1 - 0.01 * e:.4f}, Average Accuracy: 0.05, Samples: 1013")
        lines.append(f"2025-10-02 00:05:10,224 - INFO - Evaluation Epoch {e} - Average Loss: {3.9 - 0.01 * e:.4f}, Samples: 211")
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n")
    h = one(log)
    assert [v for _, v in points(h, "average_loss")] == [round(4.1 - 0.01 * e, 4) for e in range(6)], sorted(h.keys())
    assert [v for _, v in points(h, "val/average_loss")] == [round(3.9 - 0.01 * e, 4) for e in range(6)]
    assert resolve(h).key("val_loss") == "val/average_loss"


def test_a_printed_log_under_another_suffix_is_read_when_named(tmp_path):
    # Public logs P709 (a BERT fine-tune's console log pasted into models/README.md) and P904 (Keras' verbose=2 output
    # redirected into results/0508_results.rb): refused as tables. Named one by one, they are read as printed logs.
    lines = ["Train on 8000 samples, validate on 2000 samples"]
    for epoch in range(1, 11):
        lines += [f"Epoch {epoch}/10", f"64s - loss: {2.4 / epoch:.4f} - acc: 0.5 - val_loss: {1.9 + 0.02 * epoch:.4f} - val_acc: 0.47"]
    log = tmp_path / "results.rb"
    log.write_text("\n".join(lines) + "\n")
    h = one(log)
    assert [v for _, v in points(h, "val_loss")][-1] == 2.1 and len(points(h, "loss")) == 10
    notes = tmp_path / "README.md"
    notes.write_text("# A project\n\nIt classifies news titles.\n")
    with pytest.raises(InputError, match="numeric metric columns"):  # no log in it: the table reader's refusal stands
        read_histories(notes)
    # In a folder only the log suffixes are read as logs: the .rb file is not taken up.
    with pytest.raises(InputError):
        read_histories(tmp_path)
