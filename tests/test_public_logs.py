"""Verdicts on real public logs with our labels (evidence/public_logs).

The logs listed in shared/realworld (present wherever this repository's CI runs) are scored here;
the floor is the figure as measured, not the issue's target (macro-F1 >= 0.8). The second set,
evidence/public/labels.json, labels logs whose data files live under shared/realworld/more/ (the
steering repo's folder, not committed here); its provenance is checked here and its score is reported
by ``python -m evidence.public_logs public`` where the files are present.
"""

import json
import re
from pathlib import Path

import pytest

from evidence import public_logs
from evidence.score import healthy_flagged, macro_f1
from trackerhealth import diagnoses

REALWORLD = public_logs.SHARED
needs_realworld = pytest.mark.skipif(not (REALWORLD / "labels.json").is_file(), reason="../shared/realworld not present")


@needs_realworld
def test_the_labelled_public_logs_score_at_least_as_measured():
    cases, missing = public_logs.cases("realworld")
    assert not missing and len(cases) >= 10
    assert macro_f1(cases) >= 0.5
    wrong, healthy = healthy_flagged(cases)
    assert healthy >= 5 and wrong == 0


def test_every_added_public_log_names_its_source_and_is_not_reserved():
    labels = json.loads((Path(public_logs.REPO) / "evidence" / "public" / "labels.json").read_text())["runs"]
    assert len(labels) >= 30
    reserved_file = REALWORLD / "RESERVED.md"
    reserved = {m.lower() for m in re.findall(r"^- (\S+)", reserved_file.read_text(), re.M)} if reserved_file.exists() else set()
    for run_id, label in labels.items():
        assert re.fullmatch(r"[0-9a-f]{40}", label["commit"]), run_id
        assert label["repo"] and label["repo_path"] and label["format"] and label["why"], run_id
        assert label["repo"].lower() not in reserved, run_id
        assert set(label["labels"]) | set(label["also_acceptable"]) <= set(diagnoses.REGISTRY), run_id
        assert label["healthy"] == (not label["labels"]), run_id


MORE = public_logs.SETS["public"][1]
needs_more = pytest.mark.skipif(not MORE.is_dir(), reason="the restored public logs are not present (python -m evidence.public.restore DIR; TRACKERHEALTH_PUBLIC_LOGS=DIR)")


@needs_more
def test_the_labelled_public_logs_score_what_the_readme_reports():
    cases, missing = public_logs.cases("public")
    assert not missing and len(cases) >= 141
    # issue #12's target for labelled public logs is 0.8, and this set is below it: measured 0.69 over 112 scored
    # logs (0.67 strict). Not a held-out figure: rules and readers were changed after reading misses of this set
    # (P02-v20, P10, P09-v5, P30-v0, P36, P43, P45, and batch 5's printed logs and P70). The held-out ones, each
    # scored once before any change made for it: P25-P34 0.88; P35-P45 0.16, 1 of 5 healthy flagged; P46-P57
    # 0.67, 1 of 8 healthy flagged (P49); P58-P72 0.00, 3 of 12 healthy flagged (0.12 and 1 of 12 after the
    # reader fixes it showed were needed); P73-P84 0.70, 1 of 7 healthy flagged (P77). Then the fast-start rule,
    # written after seeing P49 and P77: 0.69 and 1 of 52 healthy flagged (P62). P85-P92 0.80, 0 of 7 healthy flagged.
    # Then 0.81 (0.80 strict): slow-convergence's first-tenth gate removed P69's false alarm (0.70), and
    # periodic-spikes' epoch lock removed P56's, the only periodic-spikes finding on the set. No log is
    # labelled periodic-spikes, so its row left the macro average (its F1 of 0 had been one of seven rows):
    # most of that 0.11 is the average's arithmetic, not ten more logs read right. Batch 8 (P93-P105, 15
    # scored logs) was then scored once: 0.67 (0.35 strict), 0 of 9 healthy flagged; all 127 at 0.79. Then
    # slow-convergence stopped calling a loss that needs 200+ runs to halve slow (P94-a, a classifier
    # pinned at ln 10, seen in batch 8): 0.80 (0.78 strict), 1 of 68 healthy flagged. Batch 9 (P106-P117,
    # 14 logs, only loss-oscillation, overfitting and nonfinite labelled) was scored once with bae592a:
    # 1.00, 0 of 8 healthy flagged; all 141 at 0.81 (0.79 strict), 1 of 76. Batch 10 (P118-P128, 12
    # scored) was scored once with d0231fe's parent code: 0.56, 2 of 7 healthy flagged (P124, P126); all
    # 153 at 0.79, 3 of 83. Then loss-oscillation spared an early overshoot followed by a significant
    # fall (written after P124; it also cleared P62): 0.795 (0.77 strict), 2 of 83. Then slow-convergence
    # spared a back-loaded train loss whose val loss bent early (also written after P124): 0.805 (0.78
    # strict), 1 of 83 (P126's task-imbalance). Batch 11 (P129-P152, 21 scored: 3 faults, 18 healthy) was
    # scored once with 289a02c: 0.67, 0 of 18 healthy flagged, all three faults found, but P132 (a YOLO run
    # whose box and dfl losses are 0 at every epoch) also tagged task-imbalance; all 174 at 0.797 (0.775
    # strict), 1 of 101. Then a loss term that is 0 at every step stopped counting as a task (written after
    # P132): batch 11 1.00; all 174 at 0.805 (0.784 strict), 1 of 101. Batch 12 (P153-P162, 7 scored:
    # 4 faults, 3 healthy; W&B, TensorBoard and plain CSV, labelled blind by a helper) was scored once with
    # 41b8459's code: 0.40, 0 of 3 healthy flagged; P154's blow-up in its first two steps (1.4e6 -> 1.9e12,
    # before any learning) called loss-oscillation rather than nonfinite, and P156's bouncing loss (which
    # halved over the run) not flagged. Nothing was changed for it: all 181 at 0.797 (0.770 strict), 1 of 104,
    # below the 0.8. Batch 13 (P163-P171, 6 scored: 2 faults, 4 healthy; blind, by a helper) was
    # scored once with 0571e3a's code: 1.00, 0 of 4 healthy flagged. All 187: 0.8025 (0.779 strict), 1 of 108.
    # Batch 14 (P172-P173, 2 healthy logs: a Lightning TensorBoard folder and a DETR log.txt; blind, by a
    # helper) was scored once with 0a60e66's code: 1 of 2 healthy flagged (P172: an RMSE metric ~410 beside a
    # logged train_loss of ~0.017 read as a task term holding 100 % of the sum); all 189 at 0.79 (0.77
    # strict), 2 of 110. Then a loss-named key over 100x the logged total stopped counting as a term of it
    # (written after P172): all 189 at 0.8025 (0.779 strict), 1 of 110. Batch 15 (P174-P184, 8 scored: 2 faults,
    # 6 healthy; DETR/maskrcnn text logs and Lightning TensorBoard folders, blind, by a helper) was scored once
    # with df3faa6's code: 0.33, 1 of 6 healthy flagged (P178: Mask R-CNN's 47 -> 2 fall inside its first five
    # logs was invisible to the first bin, and its creep under step decay read as slow); P179's task-imbalance
    # found, P181 (a loss bouncing around 3,000 with no trend for ten epochs) missed; P183, a VAE whose KL
    # rises, not flagged (the KL rule, written before this batch was seen). All 197 at 0.796 (0.772 strict),
    # 2 of 116. Then slow-convergence's fast start also reads the first three logged points (written after
    # P178): all 197 at 0.8037 (0.781 strict), 1 of 116. Then a second half that "fell" only by noise (its trend
    # stalled) no longer spares a loss that never learned (written after P181): 0.8073 (0.785 strict), 1 of 116;
    # reverted before it landed: mid-run, the monitor called numpy's slow_unnormalized_features never-learned
    # while the finished run is slow (the monitor and the scan must agree), so P181 is a miss again.
    # Batch 16 (P185-P191, 6 scored: 2 faults, 4 healthy; DETR/DeiT outputs/log.txt, an st-gcn printed log, a
    # CSV; blind, by a helper) was scored once with 3e338ca's code: 0.00 on its two faults, 0 of 4 healthy
    # flagged: P188 (a DETR loss bouncing around 6.6 after its first 20 epochs) and P190 (st-gcn's
    # 'mean_loss: nan' lines under 'Training epoch: N' headers, which the text reader did not read) missed.
    # All 203 at 0.797 (0.775 strict), 1 of 120. Then the text reader dates lines under an epoch-only
    # header and splits a log's appended starts (written after P190): 0.805 (0.783 strict), 1 of 120 with the
    # P181 change, 0.8017 (0.780 strict), 1 of 120 without it (as it stands). Batch 17 (P192-P197): 4 healthy
    # scored, 0 flagged. Batch 18 (P198-P204, 5 scored, blind, scored once): 0 of 4 healthy flagged; P198's
    # nonfinite found and its overfitting missed: an fp16 scaler's Inf grad norm at epoch 0 cuts the
    # overfitting check's "living run" to nothing, so its 30 test-loss points are never read. All 212 at
    # 0.7986, 1 of 128: below the 0.8, recorded as measured. Then a gradient norm's NaN/Inf ends the
    # living run only when it lasts to the end: P198 is judged, still missed (its mixup train loss sits above
    # its test loss); all 212 unchanged at 0.7986. Batch 19 (P205-P218, 13 scored: 7 faults, 6 healthy; blind,
    # by a helper) was scored once with aabb066's code: 0.62, 2 of 6 healthy flagged (P213: a warm-up gradient
    # spike 25x its median called nonfinite; P218: a converged per-epoch plateau called slow). All 225 at
    # 0.7778, 3 of 134: further below the 0.8, recorded as measured. Batch 20 (P219-P230, 12 scored:
    # 9 faults, 3 healthy; blind, by a helper) was scored once with 2c6a9aa's code: 0.40, 0 of 3 healthy
    # flagged; both divergences without NaN missed (P219 read as task-imbalance, P227's ten points as
    # loss-oscillation), a loss pinned at ln 2 called slow (P224). All 237 at 0.7553, 3 of 137. Then a quality
    # metric exactly 0 at every evaluation beside a loss on a plateau is never-learned (written after
    # seeing batch 20's P214, mAP 0 for 100 epochs, called slow): P214 found, P80 (seq_acc 0) reported as
    # loss-oscillation, acceptable there; no other log changed. All 237 at 0.7637, 3 of 137. Batch 21
    # (P231-P242, 10 scored: 3 faults, 7 healthy; blind, by a helper) was scored once with 66fc9c7's code:
    # 0.67, all 3 faults found, 2 of 7 healthy flagged slow (P231, a regressor creeping down beside a val
    # loss on its plateau; P242, a fine-tune whose first logged loss is already low). All 247 at 0.7561, 5
    # of 144. Then a val loss settled over its second half spares slow-convergence (written after seeing
    # P231): P231 and P224's wrong slow reading gone; all 247 at 0.7699, 4 of 144. Then a gradient-norm climb
    # short of critical after which the loss ends below half its level just before it was survived, not an
    # explosion (written after P213, batch 19): all 247 at 0.7749, 3 of 144. Batch 22 (P243-P254, 12 scored,
    # blind) scored once with 6f05583's code: 0.33, 1 of 9 healthy flagged (P254 slow: its ValLoss was not
    # read as a val loss; P251's loss column is named "0": unknown). All 259 at 0.7685, 4 of 153. Then
    # camelCase keys split into words (written after P254): all 259 at 0.7743, 3 of 153. Batch 23 (P255-P266,
    # 11 scored, all W&B run folders, blind) scored once with c7af7e6's code: 0.27, 2 of 7 healthy flagged
    # input-bottleneck on W&B GPU utilisation alone (P261, P265); P255's 6 % steady eval rise and P256's
    # PDE term (~97 % of a PINN's loss) missed. All 270 at 0.7371, 5 of 160: recorded as measured.
    # Batch 24 (P267-P278, 12 scored, blind) scored once with 000e591's code: 0.25, 0 of 6 healthy flagged;
    # all 282 at 0.7242, 5 of 166. Then W&B's gpu.process GPU (after P261): 0.7353, 4 of 166; overfitting by
    # opposite trends (after P206, P255): 0.7488. Batch 25 (P279-P290, 12 scored, blind; 6 W&B, 4 TensorBoard)
    # scored once with 8bc3db9's code: 0.30, 0 of 4; all 294 at 0.6176, 4 of 170 (the set's first
    # periodic-spikes log, P289, missed, enters the macro at 0). Then GPU utilisation alone flags only below
    # 30 % (after P282, P284): 0.6721, 3 of 170. Batch 26 (P291-P302, 12 scored, blind) scored once with
    # 67b2e7d's code: 0.20, 0 of 4. All 306 at 0.6562, 3 of 174. Batch 27 (P303-P314, 12 scored, blind)
    # scored once with 1f154ef's code: 0.50, 1 of 10 (P314 "stopped moving"); then a val loss still moving
    # spares a still train loss (P314) and a wander that only falls back to the start is bouncing (P303):
    # all 318 at 0.6569, 3 of 184. Restored logs dated to their commit (P306 is then judged: flagged) and
    # a val blow-up rule (P283): 0.6601, 4 of 184. Batch 28 (P315-P326, 12 scored, blind) scored once with
    # 77f480b's code: 0.46, 0 of 2; then a per-batch val loss is the last choice (P316): all 330 at 0.6562,
    # 4 of 186. Batch 29 (P327-P333, 7 scored, blind) scored once with 4cd7e28's code: 0.83, 0 of 4. All 337
    # at 0.6580, 4 of 190. Batch 30 (P334-P345, 6 scored, blind) scored once with 59e2526's code: 0.50, 0 of 4
    # (P342's frozen 0 % GPU read as input-bottleneck, then a utilisation that never changes is not judged).
    # Then nonfinite's blow-up past 10x the start (after P321, P154): all 343 at 0.6618, 4 of 194. Batch 31
    # (P346-P357, 12 scored, blind) scored once with 1fc5caf's code: 0.82, 0 of 6; then a train loss at exactly
    # 0 is judged (P349) and a flat loss ending above its start never learned (P354): all 355 at 0.6655, 4 of
    # 200. Batch 32 (P358-P368, 10 scored, blind) scored once with 8c2ced1's code: 0.77, 0 of 2. All 365 at
    # 0.6825; then a finished run's flat loss whose second half moves along no line never learned (after P367):
    # 0.6861. Batch 33 (P369-P380, 9 scored, blind) scored once with e156ddb's code: 0.90, 0 of 5. All 374 at
    # 0.6860, 4 of 207. Batch 34 (P381-P392, 12 scored, blind) scored once with 05d69b2's code: 0.70, 0 of 4;
    # all 386 at 0.6889, 4 of 211. Then printed logs in Chinese are read (GBK, full-width colons, Chinese
    # metric names): P61's per-epoch summary lines now give a val loss that settled, and its slow label is
    # missed ("converged, not slow"): 0.6842, 4 of 211. Batch 35 (P393-P404, 12 scored, blind) scored once with
    # 0ebde39's code: 0.56, 0 of 4 (input-bottleneck on two faulty W&B runs). All 398 at 0.6643; then W&B's
    # percent utilisation is never read as a fraction and a GPU never 1 % busy is not judged (P398): IB fp
    # 3 -> 2; a val loss that leaps between evaluations beside a smooth train loss is unstable (P387, P404):
    # 0.6674, 4 of 215. Batch 36 (P405-P416, 12 scored, blind) scored once with a591b7e's code: 0.70, 0 of 4.
    # Then an evaluation pass printed with no counter of the run's is read (P412): all 410 at 0.6678, 4 of 219.
    # Batch 37 (P417-P428, 12 scored, blind) scored once with 747b98c's code: 0.80, 0 of 4. All 422 at 0.6702,
    # 4 of 223. Batch 38 (P429-P437, 9 scored, blind) scored once with b0583df's code: 0.89, 0 of 3. All 431 at
    # 0.6727, 4 of 226. Batch 39 (P438-P448, 10 scored, blind) scored once with 39fe7f0's code: 0.60, 0 of 5
    # (P443's once-per-epoch spikes and P446's straight-line fall missed). Batch 40 (P449-P458, 10 scored,
    # blind), same code: 0.73, 0 of 5. All 451 at 0.5897, 4 of 236: the macro now averages eight diagnoses,
    # and the two with 3 labels between them are at 0 (periodic-spikes 0 of 2; vanishing-gradients 0 of 1,
    # P452, whose only gradient norm is the total one the diagnosis does not read). Then input-bottleneck
    # judges only the utilization sampled while the loss was logged (P396): 0.6064, 4 of 236. Batch 41 (P459-P470,
    # 11 scored, blind; forecasters, GANs, graph networks) scored once with 45b40bf's code: 0.47, 1 of 5 (a hinge
    # DCGAN's flat discriminator loss read as never learned). All 462 at 0.6043, 5 of 241. Then the overfitting
    # check reads the train level from five points, not one or two (P382): 0.6053. Batch 42 (P471-P482, 11 scored,
    # blind) scored once with 9c5400a's code: 0.78, 0 of 5 (P473's plateau and P474's crawl missed). All 473 at
    # 0.6162, 5 of 246. Then task-imbalance stopped counting a term that fell 90 % or more as flat (after two torch
    # families' healthy twins): P126's task-imbalance false alarm gone, its loss-oscillation (which that finding had
    # explained) now shows: 0.6212, 5 of 246. Then an accuracy at one and the same value at every evaluation never
    # scored, as one at 0 does (P429, val accuracy 0.72414 for 31 epochs): 0.6223, 5 of 246. Batch 43 (P483-P490,
    # 8 scored, blind: six Keras CSVs) scored once with 3c5ad5f's code: 0.00, 0 of 5 (two slow crawls of 20 and
    # 300 epochs and four concatenated cross-validation folds, read as a divergence, missed). All 481 at 0.6167,
    # 5 of 251. Then a finished run of 10-29 points is judged for slow convergence (P483): 0.6191, 4 of 251
    # (P306's short run now slow, a reading its label accepts, instead of never-learned). Batch 44 (P491-P499, 9
    # scored, blind: W&B runs logging per-layer gradient norms) scored once with 3b51da5's code: 0.58, 0 of 2. All
    # 490 at 0.6632, 4 of 253 (vanishing-gradients' first public find, P491's all-zero gradients, lifts the macro).
    # Then a gradient that falls at every one of five or more layers to under 1 % is vanishing (P494, P495): 0.7193,
    # 4 of 253 (a macro over eight diagnoses, one with 4 labels: each of them moves it). Batch 45 (P500-P505, 4
    # scored, blind: GAN and printed logs) scored once with 2d9d8dd's code: 0.67, 1 of 3 (a healthy BEGAN's rising
    # generator loss called loss-oscillation). All 494 at 0.7189, 5 of 256. Then a GAN's generator or discriminator loss
    # is not judged as a descent, except a discriminator that won (P45, P462, P463, P501): 0.7183, 3 of 256 (P462's
    # won game, labelled nonfinite, now loss-oscillation, which its label accepts). Then an unstable loss that fell
    # 60 % or more from its first level, warm-up included, learned (after torch run forecast_onecycle): P126's ORPO
    # fine-tune no longer stuck: 0.7190, 2 of 256. Batch 46 (P506-P513, 8 scored, blind: Keras CSVs, an HF log)
    # scored once with e90bbd2's code: 0.00, 1 of 5 (three short faulty logs missed, an appended fine-tune stage called
    # slow). All 502 at 0.7153, 3 of 261. Then the overfitting trend test reads from the raw val minimum when it comes
    # first (P512): 0.7173, 3 of 261. Batch 47 (P514-P520, 7 scored, blind: TensorBoard event files, HF LLM
    # fine-tunes; three of them one repository's runs) scored once with ec9bd85's code: 0.93, 0 of 2 (P518's
    # overfitting, 4 evaluations, missed). All 509 at 0.7188, 3 of 263. Batch 48 (P521-P529, 9 scored, blind: printed
    # logs and Keras CSVs) scored once with 53dacf6's code: 0.20, 2 of 6 (a tqdm bar's per-batch postfix read into the
    # epoch lines' series, called periodic-spikes; a noisy val loss called val_loss_swings; eleven appended sessions
    # read as a divergence; an 89 % val rise beside an 8 % train fall missed). All 518 at 0.7165, 5 of 269. Then a
    # progress bar's values are kept apart from the epoch lines that give the same metric (P525): 4 of 269. Then a
    # printed log's training lines whose epoch counter and loss both start over begin a new run (P529: its fresh
    # starts no longer read as a divergence; P476's four sessions, labelled from their merged reading as one slow run,
    # now read apart: its first, 54 epochs within 0.45 % of its start, never learned): 0.7157, 4 of 269. Then the
    # back-loaded shape of slow-convergence is a note, not a tag (after its false alarms on five blind torch families):
    # slow-convergence P 0.94, R 0.43 here; 0.7119, 2 of 269. Batch 49 (P530-P536: per-epoch CSVs, a printed Keras log,
    # a Keras TensorBoard folder; two of seven unreadable, so ambiguous) scored once with e1b4ac2's code: 0.22, 0 of 2
    # (a 10-epoch overfit missed, its 28 % val rise smoothed to 6 %; a VAE's flat total called slow, not never-learned).
    # Batch 50 (P537-P543: printed logs, a YOLOv5 TensorBoard folder; five scored, all healthy) with a49d0e3's code:
    # 0 of 5 flagged. All 528: 0.7093, 2 of 276. Then overfitting judges a train loss above its val loss by the trends
    # alone (written after P20, P301, P521, in-sample): 0.7121, overfitting R 0.79 -> 0.83, still 2 of 276.
    # Batches 51-53 (P544-P591, 26 scored; blind: 0.50, 0 of 6; 0.90, 0 of 3; 1.00, 0 of 3): all 555 0.7127, 2 of 288.
    # Then nonfinite's start is the first point only where it is its block's lowest (after P551, P552, in-sample):
    # 0.7643 (periodic-spikes 1 of 4 found). Batches 54-56 (P604-P655, 28 scored; blind: 0.56, 1 of 5; 0.50, 1 of 5;
    # 0.59, 0 of 2): all 583 0.7564, 4 of 300. Then Keras' gan_loss is a generator's (after P635, in-sample): 0.7569,
    # 3 of 300. Batches 57-59 (P664-P709, 14 scored; blind: 0.80, 0 of 3; 1.00, 0 of 4; 1.00, 0 of 2): all 597 0.7590,
    # 3 of 309. Then an error rate (WER, CER) at one value at every evaluation never learned, short logs included (after
    # P669, in-sample; P654's train accuracy, 0 at 13 of 14 epochs, is found so too): 0.7608, still 3 of 309.
    # Batches 60-62 (P724-P764, 12 scored; blind: no fault labels, 0 of 6; 0.50, 1 of 3; 0 of 1): all 609 0.7602, 4 of 319.
    # Batches 63-65 (P784-P827, 14 scored; blind: 0.50, no healthy log; 0.00, 0 of 7; 0.00, 0 of 3): all 623 0.7577, 4 of 329.
    # Batches 66-68 (P844-P886, 7 scored; blind: 1.00, 0 of 1; no fault label, 0 of 2; 0.50, 0 of 1): all 630 0.7575, 4 of 333.
    # The next session restored 581 of the then 642 scored logs (its fetches ran out; the other 61 are all healthy) and
    # measured on those 581: 0.7545, 4 of 280 with the previous code; 0.7640, 2 of 280 after its reader and rule changes.
    # Batches 69 (P904-P909, 2 scored, no fault label: 1 of 2 healthy flagged) and 70 (P924-P933, 9 scored: 1.00, 0 of
    # 5; 0.13 with the previous code, eight DVCLive folders) were scored blind. The floors below are the last full
    # measure's: the 61 healthy logs not restored were not re-scored with the new rules.
    assert not missing and len(cases) >= 642
    assert macro_f1(cases) >= 0.757
    wrong, healthy = healthy_flagged(cases)
    assert healthy >= 341 and wrong <= 4
