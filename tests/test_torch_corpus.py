"""The torch evidence corpus (evidence/torch): its labels are twin-confirmed, and its
leave-one-family-out figures are what the code derives.

``python -m evidence.lofo --write`` records, per held-out family, the thresholds chosen on the other
families and the scores on the held-out one (evidence/torch/lofo.json). These tests re-derive them
from the cached runs — nothing trains here — so a detector change that moves a verdict fails until
the figures are re-recorded (and reported). The floors below are the figures as measured, not the
issue's targets (P and R >= 0.9): the corpus says the diagnoses are far from those on torch runs.
"""

import json

import pytest

from evidence import lofo
from evidence.torch import manifest
from trackerhealth import diagnoses


@pytest.fixture(scope="module")
def folds():
    return lofo.run_folds()


def test_every_corpus_run_opens_and_every_fault_is_confirmed_against_a_twin_in_the_corpus():
    entries = manifest.load()
    names = {e["name"] for e in entries}
    assert len({e["family"] for e in entries}) >= 2
    for entry, history in lofo.corpus():
        assert history.n_points > 0, entry["name"]
        assert set(entry["faults"]) <= set(diagnoses.REGISTRY), entry["name"]
        if entry["faults"] and entry["twin"] is not None:
            assert entry["twin"] in names, (entry["name"], entry["twin"])
            assert entry["truth"], entry["name"]  # the twin measures that confirmed it


def test_each_fold_chooses_its_thresholds_without_the_held_out_family(folds):
    recorded = json.loads(lofo.RESULT.read_text())
    runs = lofo.corpus()
    for fam in folds["families"]:
        others = [e for e, _ in runs if e["family"] != fam]
        assert lofo.choose(others) == folds["folds"][fam]["chosen"] == recorded["folds"][fam]["chosen"], fam


def test_the_recorded_held_out_figures_are_what_the_code_measures(folds):
    recorded = json.loads(lofo.RESULT.read_text())
    assert folds["pooled_held_out"] == recorded["pooled_held_out"], "re-record: python -m evidence.lofo --write"
    assert folds["shipped_defaults"] == recorded["shipped_defaults"]


# The pooled held-out figures as measured (README "How well the diagnoses work"), per diagnosis
# (precision, recall). They are floors, not the target of 0.9 for both: overfitting,
# slow-convergence, task-imbalance and vanishing-gradients are short of it. task-imbalance's third find
# (cnn_imbalance_raw_ink, a term 78x the other) came with the lagging-task rule, written for that class
# after the issue named it: its fold takes the rule's default on a tie, so it is not held out. The conv
# and seqcls families were each scored once before any change informed by them (conv 0.75 with 5 of 7
# healthy flagged; seqcls 0.53, 0 of 9); the rules changed after them (slow-convergence's first-tenth
# gate, vanishing-gradients' collapse) are not held out for those families. The unet family (blind) took
# vanishing-gradients' precision to 0.93 (its SGD run at lr 20 also read as vanishing) and slow-convergence's
# recall to 0.76 (its Adam-eps run missed); task-imbalance's false alarm went with the choices it moved.
# The mixup family (blind; a regularised train loss above the val loss) took overfitting's recall to 0.62:
# both its overfitting runs missed. The finetune family (blind; a pretrained CNN fine-tuned with a new head)
# took loss-oscillation's recall to 0.84 and slow-convergence's to 0.74: its flat LR-too-low run and its HF
# Adam-eps run missed. The diffusion family (blind; a tiny DDPM) took loss-oscillation's recall to 0.82: its
# batch-2 run missed. The distill family (blind; a distilled MLP student) took loss-oscillation to 0.94 / 0.79,
# nonfinite's recall to 0.95, slow-convergence's precision to 0.83, task-imbalance's to 0.88 and vanishing-gradients'
# to 0.89: its batch-2 run missed, its explosion called loss-oscillation, its Adam-lr-1 run called vanishing, a
# healthy batch-4 run called slow and a healthy twin's KL term read as dominating.
# The nineteenth family, metric (triplet-margin metric learning, built blind by a helper and scored once, held
# out: 0.63, 1 of 21), took periodic-spikes' recall to 0.93 (its weak bad-shard run missed), loss-oscillation's
# precision to 0.92 and slow-convergence's recall to 0.75 (its raw-features SGD crawl called oscillating),
# task-imbalance's precision to 0.80 (its healthy scaled-aux twin) and vanishing-gradients' to 0.81 (two faulty
# runs also called vanishing). Recorded as measured. Then task-imbalance stopped counting a term that fell 90 % or
# more of its start as flat (written after distill's and metric's healthy twins, so not held out for them):
# task-imbalance P 0.80 -> 1.00. Then every layer's gradient at 0 is no vanishing when the training loss first blew up
# 10x or more or ended at 0 (written after metric's two faulty runs and unet's and distill's LR-too-high runs, so not
# held out for them): vanishing-gradients P 0.81 -> 1.00, loss-oscillation R 0.81 -> 0.84 (what that finding had
# explained now shows). The twentieth family, gnn (GraphSAGE node classification on a k-NN graph of the digits, built
# blind by a helper and scored once, held out, with 952b740's code: 0.83, 0 of 12), took loss-oscillation's precision to
# 0.91 (its raw-features SGD crawl called oscillating, not slow) and periodic-spikes' recall to 0.88 (its bad-shard run
# missed). The twenty-first, seq2seq (a character-level GRU encoder-decoder with attention reversing words, built blind,
# scored once, held out, with ab17e50's code: 0.85, 0 of 14), took nonfinite's recall to 0.94 (its explosion without
# clipping, blown up by its fourth step, called vanishing-gradients: its embedding's gradient 0 after the blow-up),
# vanishing-gradients' to 0.95 / 0.91 (that, and its 8-layer tanh encoder missed) and periodic-spikes' recall to 0.83
# (its bad-shard run missed). Recorded as measured. Then tiny first layers are no vanishing either when the training loss
# first blew up 10x or more (written after that seq2seq run, so not held out for it): vanishing-gradients P 1.00, and
# the run's rising loss, no longer explained by a vanishing finding, shows as loss-oscillation (P 0.89). Then the
# spike comb counts only the cycles whose in-phase place the run reached (after seq2seq's bad shard, met in 5 of 5
# such cycles and read as 5 of 5.99): periodic-spikes R 0.83 -> 0.89. The twenty-second family, forecast (a GRU
# forecaster of daily stock closes, matplotlib's sample data; built blind, scored once, held out, with 79e2a8d's code:
# 0.72, 1 of 13), took slow-convergence's recall to 0.70 (its LR-too-low, Adam-eps and raw-price runs missed: they fall
# fast and then plateau above their twin), overfitting's to 0.70 (its small-subset run missed, its val loss never
# rising) and loss-oscillation's to 0.90 / 0.84 (its healthy one-cycle run called oscillating). Recorded as measured.
# Then an unstable loss that fell 60 % or more from its first level, warm-up included, is learning (after that one-cycle
# run, so not held out for it): its false alarm gone; loss-oscillation 0.90 / 0.86 (folds' choices moved). The
# twenty-third family, textcls (a character CNN telling which package's description a 64-character window comes from;
# built blind, scored once, held out, with 980fb4a's code: 0.72, 9 of 14 healthy flagged), took slow-convergence's
# precision to 0.67: its healthy runs are stopped mid-descent (the baseline's loss falls 1.79 -> 0.99 in a straight
# line over its 300 steps, val accuracy still rising), which the family's healthy check does not test and the
# back-loaded rule calls slow; its batch-2 run was called nonfinite and its unclipped explosion loss-oscillation
# (nonfinite P 0.98 / R 0.93, loss-oscillation 0.88 / 0.85). Recorded as measured. The twenty-fourth, moe (a
# top-1 Switch-gated mixture of four MLP experts on the digits, its load-balancing term logged beside the CE; built
# blind, scored once, held out, with ec9bd85's code: 0.47, 5 of 20 healthy flagged) missed its bad shard (periodic-
# spikes recall 0.85) and its batch-2 run; its balance term was called a task left behind on 15 of 35 runs, until
# a load-balancing term was no longer judged as a task (written after seeing it, so not held out for it). The
# twenty-fifth, flow (a RealNVP fitted by maximum likelihood to the dequantised digits, its NLL in bits/dim with a high
# floor; built blind, scored once, held out, with 2301c06's code: 0.79, 4 of 17 healthy flagged) found all twelve of its
# faults, but called three healthy runs slow (a loss that can fall only ~17 % above its floor reads as a crawl: the
# back-loaded rule; slow-convergence precision 0.62) and its log-scale penalty term a task left behind (0.92). Then
# the back-loaded shape became a note, never a tag (its healthy false alarms in five blind families, 16 of 333): slow-
# convergence from one curve P 0.85, R 0.50 — the group finds the rest (below). Then a back-loaded note under a
# logged Adam epsilon of 1 (or a very small LR) became a warning, the config naming the shape's cause: P 0.87, R 0.59
# (27/4/19: four eps-1 runs logged through MLflow/W&B found; the same runs written to CSV/Parquet carry no config).
# The twenty-sixth, ctc (a CRNN reading digit strips with CTC; built blind, scored once, held out, with 9d74e88's code:
# 0.59, 0 of 18 healthy flagged): CTC's loss drops from ~8 to ~2.7 in its first steps by predicting blanks, so its
# never-reading runs (Adam eps 1, raw inputs with SGD: slow by the twin, seq accuracy 0 at every evaluation) are called
# never-learned loss-oscillation; its LR-1e-5 crawl (CSV, no config) and its small-subset overfit (val never rises) are
# missed; its unclipped explosion (loss 738x its start, gradient norms not far above their level after the blow-up) is
# loss-oscillation and vanishing-gradients, not nonfinite. Nothing was changed for it. Pooled over twenty-six: LO P 0.86,
# SC R 0.55, OF R 0.70, NF R 0.94, VG P 0.96. The twenty-seventh, mlm (a BERT-style masked character LM; built blind,
# scored once, held out, with 3f2e0c9's code: 0.90, 0 of 19 healthy flagged): its init-too-small run (slow by its twin,
# its masked-token accuracy constant at every evaluation) called never-learned, and its AdamW-peak-3.0 run missed (it
# blew up in warm-up and learned back 92 % as the LR decayed). Pooled over twenty-seven: LO P 0.85 R 0.87, SC P 0.88 R 0.56,
# OF R 0.71. The twenty-eighth, sgns (word2vec skip-gram with negative sampling; built blind, scored once, held out, with
# 166ce11's code: 0.70, 0 of 19 healthy flagged): its bad shard (confirmed at the edge: 3 of 6 shard steps at 3x the
# twin) missed, and its batch-2 run, which crawled 6 % in 522 steps, called slow rather than oscillating (a false
# slow-convergence: SC P 0.85). Pooled over twenty-eight: PS R 0.83, LO R 0.87 (59/10/9). The twenty-ninth, det (a
# CenterNet-style detector on digit canvases, its heatmap and offset terms logged beside the total; built blind, scored
# once, held out, with 709d5fc's code): 1.00, 0 of 17, all 13 scored faults found. Then a loss still falling under a
# logged Adam epsilon >= 1e-2 is slow (SC 31/5/23 -> 34/5/20). The thirtieth, ssm (a diagonal state-space LM, blind):
# 0.83, 1 of 19 (Adam lr 1.0 also called vanishing: VG P 0.94). The thirty-first, ftt (an FT-Transformer on breast
# cancer, blind): 0.73, 0 of 17. Then truth.py's end level became the median of the last points, not the last point
# (ten labels dropped, one added, six moved between slow and flat): pooled over thirty-one, LO 58/9/8, SC 36/5/24,
# VG 34/2/2, PS 21/0/4, NF 77/0/4, OF 19/1/7, TI 14/1/0. Then a loss point 10x its start in the first logs, beside a
# gradient-norm peak 100x both its first norm and its later median, after which the loss ends above its start, is a
# blow-up (written after distill's and textcls' explosions, read as oscillation; not held out for them): NF 86/0/2,
# LO 51/7/8 (five LR-too-high runs, nonfinite acceptable for them, now read so). The thirty-second to thirty-fourth,
# built blind and scored once each, held out: pinn (a PINN for the heat equation) 0.71, 1 of 14; pixelcnn 0.92, 0 of 17;
# pointnet 0.77, 1 of 17 (rules written after pinn's and pointnet's false alarms, not held out for them). Pooled over
# thirty-four: LO 55/8/11, SC 41/6/27, OF 22/2/7, TI 15/2/1, NF 91/0/2, PS 24/0/4, VG 40/2/2, IB 34/0/0. The
# thirty-fifth, kan (a Kolmogorov-Arnold network on breast cancer, blind): 0.72, 3 of 16 (two healthy runs overfitting
# by the numbers, its unshuffled twin's data-order spikes periodic; a NaN written as blank CSV cells missed, read since,
# in-sample). Over thirty-five: LO 55/8/12, SC 43/6/28, OF 23/4/7, TI 16/2/1, NF 94/0/2, PS 25/1/4, VG 41/2/2, IB 35/0/0.
FLOORS = {
    "input-bottleneck": (1.0, 1.0),
    "periodic-spikes": (0.96, 0.85),
    "nonfinite": (1.0, 0.97),
    "overfitting": (0.85, 0.75),
    "vanishing-gradients": (0.94, 0.94),
    "loss-oscillation": (0.86, 0.82),
    "slow-convergence": (0.86, 0.59),
    "task-imbalance": (0.88, 0.93),
}


def test_pooled_held_out_floors_as_measured(folds):
    pooled = folds["pooled_held_out"]
    for diag_id, (precision, recall) in FLOORS.items():
        assert pooled[diag_id]["precision"] >= precision and pooled[diag_id]["recall"] >= recall, (diag_id, pooled[diag_id])
    # 0.943 as measured over nine families (0.914 over eight before overfitting's steady-climb shape found
    # the seqcls family's 7 % climb and task-imbalance the never-moving task beside a term that began 430x
    # it; 0.951 over eight after). The ninth, resnet (BatchNorm), was built blind and scored once: 0.71,
    # 0 of 6 healthy flagged; its batch-2 and SGD LR-too-high runs, bouncing at ln 10 after an early
    # rise, and its overfitting run, whose train loss was already ~0 at the val minimum, were missed.
    # Then overfitting no longer asks a memorised run's train loss to keep falling (written after seeing
    # that run, so not held out): 0.953, resnet 0.86. Then the never-learned rule also measures a loss
    # from its very first point when it rose over its first steps and came back (written after seeing the
    # resnet pair, so not held out for resnet): 0.96, resnet 1.00, loss-oscillation recall 0.83 -> 0.92.
    # The tenth, vit (a pre-LayerNorm ViT with AdamW, warm-up + cosine), was built blind after that and
    # scored once: 0.83, 0 of 13 healthy flagged; missed its Adam-eps-1 and LR-1e-5 runs (a warm-up +
    # cosine curve that bends and flattens at 1.6-1.8 as the LR anneals: slow only against the twin or
    # the group) and AdamW at lr 1.0 (blown up to 45 after warm-up, then flat at ln 10: "fell" 89 % from
    # the blow-up). Pooled over ten: 0.953, 1 of 105. Then four runs were added to fill the seed's causes
    # that no family held twice (one oversized batch: resnet's 16x16 batch and seqcls' double-height batch;
    # gradient explosion: an unclipped mlp at twice He's init scale, and its clipped twin), scored once,
    # blind: both oversized batches found, but resnet's also called overfitting, and the explosion (its
    # gradient norm 126x the clipped twin's median at step 15, no NaN) missed: 0.943, 1 of 106. The
    # eleventh family, ae (a fully connected autoencoder on the digits, MSE), was built blind by a helper
    # that read nothing of the detectors and scored once: 0.71, 0 of 18 healthy flagged; missed its batch-2
    # run (loss-oscillation) and its overfitting run. Pooled over eleven: 0.940 (0.9398), 1 of 124. The
    # twelfth, vae (a variational autoencoder: BCE reconstruction + KL, both terms logged), built blind by a
    # helper, scored once: 0.68 with 12 of 16 healthy runs flagged, task-imbalance on 18 runs (the KL grows
    # from ~0 beside a reconstruction that is ~97 % of the sum). Then task-imbalance leaves out a KL- or
    # regulariser-named term that rose (written after seeing the family, so not held out for it): vae 0.71,
    # 2 of 16 (slow-convergence on its batch-4 run and its long SGD twin, both still falling slowly at the
    # end), and the slow-convergence that task-imbalance had explained on them shows. Pooled over twelve:
    # 0.922 (0.9216), 3 of 140. Then slow-convergence's fast start also looks at the median of the first three
    # logged points (written after public log P178, a fall inside the first bin): the long SGD twin is spared,
    # vae 0.72, 1 of 16. Pooled over twelve: 0.924 (0.9242), 2 of 140. Then an Inf in a logged term of the loss
    # is nonfinite (written after the vae SGD run at lr 2.0, whose KL went Inf while its total became empty CSV
    # cells): vae 0.78; pooled 0.926 (0.9264), 2 of 140. The thirteenth family, simclr (contrastive learning,
    # NT-Xent; blind, by a helper), scored once: 0.71, 2 of 15 healthy flagged (slow-convergence: a bounded
    # contrastive loss falls ~28 % from ln 127 when healthy), and its overfitting run called slow. Nothing was
    # changed for it. Pooled over thirteen: 0.920 (0.9196), 3 of 155. The fourteenth, unet (segmentation, BCE +
    # soft Dice logged as terms; blind, by a helper), scored once: 0.91, 0 of 17 (its Adam-eps run missed, its
    # SGD-lr-20 run also called vanishing). Its runs move other folds' choices: vae 0.93 (its task-imbalance
    # false alarm gone). Nothing was changed for it. Pooled over fourteen: 0.927 (0.9271), 3 of 172. The
    # fifteenth, mixup (a CNN trained with mixup and label smoothing, whose train loss sits above its plain
    # val loss; built blind), scored once: 0.75, 0 of 5 healthy flagged, both overfitting runs missed (the
    # check asks the train loss to keep falling and the val/train ratio to reach 1.2). Nothing was changed
    # for it (a ratio rule relative to the val minimum was tried: it found one of the two and called an
    # mlp run with an LR too high overfitting; not kept). Pooled over fifteen: 0.920 (0.9199), 3 of 177. The
    # sixteenth, finetune (a CNN pretrained on digits 0-4 and fine-tuned with a new head on 5-9, through HF
    # Trainer, Lightning, W&B, MLflow and CSV/Parquet; blind, by a helper), scored once: 0.50, 0 of 10 healthy
    # flagged; its flat LR-1e-5 run and its HF Adam-eps-1.0 run missed. Pooled over sixteen: 0.919 (0.9190), 3 of 187.
    # Then nonfinite reads a loss level held at 10x its start as a blow-up (written after public logs P321 and
    # P154): vae_lr_too_high_adam (one of loss-oscillation or nonfinite) is now read as the blow-up it is, so
    # a loss-oscillation hit became a nonfinite one (recall 27/32 -> 26/31): 0.919 (0.9187), 3 of 187. The
    # seventeenth, diffusion (a tiny DDPM on the digits: an eps-prediction MLP, MSE on the noise; blind, by a
    # helper), scored once: 0.97, 0 of 18 healthy flagged; its batch-2 run (loss-oscillation) missed. Pooled
    # over seventeen: 0.923 (0.9228), 3 of 205. The eighteenth, distill (knowledge distillation: an MLP student on
    # Hinton's loss from a CNN teacher, KL and CE logged as terms; blind, by a helper), scored once: 0.81, 2 of 17
    # healthy flagged (a batch-4 run called slow; a healthy twin with alpha 0.7 called task-imbalance); its batch-2
    # run missed, its explosion called loss-oscillation, its Adam-lr-1 run called vanishing. Pooled over
    # eighteen: 0.908 (0.9082), 5 of 222. The nineteenth, metric (above), scored once: 0.63, 1 of 21. Pooled over
    # nineteen: 0.894 (0.8943), 6 of 243. Then a term that converged is not a task left behind (task-imbalance,
    # after the distill and metric twins): 0.908 (0.9082), 4 of 243. Then every layer still after a blow-up or at a
    # zero loss is not vanishing (after the metric, unet and distill runs above): 0.923 (0.9227), 4 of 243. The
    # twentieth, gnn (above), scored once: 0.83, 0 of 12; pooled over twenty: 0.921 (0.9205), 4 of 255. The
    # twenty-first, seq2seq (above), scored once: 0.85, 0 of 14; pooled over twenty-one: 0.915 (0.9145), 4 of 269.
    # Then tiny first layers after a 10x blow-up are not vanishing (after seq2seq's explosion): 0.916 (0.9161). Then
    # the spike comb's coverage counts only the cycles the run reached (after seq2seq's bad shard): 0.920 (0.9201).
    # The twenty-second, forecast (above), scored once: 0.72, 1 of 13; pooled over twenty-two: 0.913 (0.9133), 5 of 282.
    # Then a long warm-up's fall counts as learning for an unstable loss (after forecast_onecycle): 0.915 (0.9147), 4 of 282.
    # The twenty-third, textcls (above), scored once: 0.72, 9 of 14; pooled over twenty-three: 0.902 (0.9019), 13 of 296.
    # Then a loss still long before a late blow-up is not the blow-up's symptom (after textcls' batch-2 run): 0.903 (0.9032).
    # Then a finite blow-up within the first logs is measured against the gradient norms after it, at 100x (after
    # seq2seq's unclipped explosion): 0.904 (0.9041). The twenty-fourth, moe (above), scored once: 0.47, 5 of 20;
    # pooled over twenty-four: 0.85, 18 of 316. Then a load-balancing term is no task left behind: moe 0.81, 0 of 20;
    # pooled 0.903 (0.9026), 13 of 316. Then a val loss ending 50 % above its best beside a train loss ending 15 %
    # above its level then is lost progress (after moe's batch-2 run): 0.904 (0.9041). Then a blow-up in the first logs
    # measured against the norms after it must hold to the end (after the LR sweep's runs at 0.3, back at ln 10 after
    # a 250x overshoot): six LR-too-high runs read as loss-oscillation again, 0.905 (0.9054), 13 of 316. The
    # twenty-fifth, flow (above), scored once: 0.79, 4 of 17; pooled over twenty-five: 0.899 (0.8992), 17 of 333.
    # Then the back-loaded shape is a note, not a tag: 0.895 (0.8946), 4 of 333 (1.2 %). Then the note under a logged
    # Adam epsilon of 1 is a warning: 0.904 (0.9035), 4 of 333. The twenty-sixth, ctc (above), scored once: 0.59, 0 of 18;
    # pooled over twenty-six: 0.892 (0.8924), 4 of 351. The twenty-seventh, mlm (above), scored once: 0.90, 0 of 19;
    # pooled over twenty-seven: 0.894 (0.8939), 4 of 370. The twenty-eighth, sgns (above), scored once: 0.70, 0 of 19;
    # pooled over twenty-eight: 0.893 (0.8927), 4 of 389. The twenty-ninth, det (above): 1.00, 0 of 17; pooled over
    # twenty-nine: 0.897 (0.8974), 4 of 406; with the swamping-epsilon rule 0.903 (0.9027). The thirtieth, ssm: 0.83, 1 of
    # 19; pooled over thirty 0.900 (0.9004), 5 of 425. The thirty-first, ftt: 0.73, 0 of 17; pooled over thirty-one 0.899
    # (0.8986), 5 of 442. With truth.py's end level a median of the last points (labels, not detectors, changed): 0.901
    # (0.9011), 4 of 442. With the brief early blow-up read as nonfinite: 0.904 (0.9035), 4 of 442. Over thirty-four
    # (pinn, pixelcnn, pointnet: blind, 0.71, 0.92, 0.77 when first scored), with the rules written after two of them:
    # 0.896 (0.8962), 5 of 490. Over thirty-five (kan, blind: 0.72), with the rule written after it: 0.892 (0.8920), 8 of 506.
    assert folds["pooled_macro_f1"] >= 0.892
    wrong, healthy = folds["pooled_healthy_flagged"]
    # 1 of 105 as measured (the target: at most 1 in 20): slow-convergence on the conv family's
    # batch-4 run. (mlp_onecycle's 6 % noisy rise was flagged while the mlp fold chose min_rise 0.05 to
    # catch seqcls' climb; the steady-climb shape now catches that without it.) The cnn fold's three sane
    # twins, which sit at chance before a late fall of ~75 %, are spared by back_loaded_max_improvement
    # 0.65; that default was chosen after seeing them and their fold takes it on a tie, so for it the
    # fold is not held out.
    # Over twelve families, 2 of 140: the conv and vae batch-4 runs, slow-convergence both. Over thirteen, 3 of
    # 155: the vae batch-4 run and simclr's rare-val run and ReLU twin (the conv fold now chooses thresholds
    # that spare its batch-4 run). Over fourteen, 3 of 172 (the same three); over fifteen, 3 of 177; over
    # sixteen, 3 of 187; over seventeen, 3 of 205; over eighteen, 5 of 222 (2.3 %: distill's two above).
    assert healthy >= 506 and wrong <= 8  # 8 of 506 over thirty-five (kan's three); 5 of 490 over thirty-four (pointnet's regularised twin, whose val loss rose 25 % while its train loss fell to 0.02: overfitting by the numbers, healthy by its truth check); 4 of 442 over thirty-one (5 before truth's end level was fixed); 5 of 425 over thirty; 4 of 406 over twenty-nine; 4 of 389 over twenty-eight; 4 of 370 over twenty-seven; 4 of 351 over twenty-six; 4 of 333 with the back-loaded shape a note; twenty-five 17 of 333 (5.1 %: over the issue's 1 in 20); twenty-four 13 of 316 (4.1 %); over nineteen, 6 of 243, then 4 (1.6 %): both aux twins cleared; over twenty 4 of 255; twenty-one 4 of 269; twenty-two 5 of 282 (1.8 %), then 4; twenty-three 13 of 296 (4.4 %: textcls' 9)


def test_thirty_five_architecture_families_and_each_seed_cause_in_two_of_them(folds):
    assert len(folds["families"]) >= 35
    coverage = folds["cause_coverage"]
    # One oversized batch is confirmed in resnet and seqcls (the cnn family's 24x24 batch rose only
    # 1.1-3.8x its twin's loss, short of the truth's 3x on three epochs: kept, not scored); gradient
    # explosion as its own cause in regression and mlp.
    assert {c for c, fams in coverage.items() if len(fams) < 2} == set()


def test_healthy_runs_are_checked_and_a_never_learning_fault_may_be_named_either_way():
    entries = manifest.load()
    meant_healthy = [e for e in entries if not e["intended"]]
    assert len(meant_healthy) >= 20 and all("healthy_confirmed" in e for e in meant_healthy)
    scored_healthy = [e for e in meant_healthy if lofo.scored(e)]
    assert all(e["healthy_confirmed"] for e in scored_healthy)
    flat = next(e for e in entries if e.get("one_of"))
    assert lofo.resolve_one_of(flat, frozenset({"slow-convergence"}))[0] == frozenset({"slow-convergence"})
    assert lofo.resolve_one_of(flat, frozenset())[0] == frozenset({"loss-oscillation"})
    assert any(len(e["faults"]) == 2 for e in entries)  # runs with two twin-confirmed faults


# -- the same runs compared with their group (issue #15) ---------------------------------------------
@pytest.fixture(scope="module")
def grouped():
    from evidence import cohort

    return cohort.evaluate()


def test_the_recorded_grouped_figures_are_what_the_code_measures(grouped):
    from evidence import cohort

    recorded = json.loads(cohort.RESULT.read_text())
    assert grouped["grouped"] == recorded["grouped"], "re-record: python -m evidence.cohort --write"
    assert grouped["alone"] == recorded["alone"]
    assert grouped["grouped_held_out"] == recorded["grouped_held_out"]


def test_grouped_with_each_familys_held_out_thresholds_slow_convergence_as_measured(grouped):
    # Each family analysed with its group and the single-run thresholds its fold chose on the other
    # families (the shipped defaults were set with this corpus in view). Over fourteen families:
    # P 0.89, R 0.92 (over fifteen, with mixup: 0.89, 0.93, 4 of 177; over sixteen, with the blind finetune
    # family: 0.87, 0.90, 6 of 187 — its linear probe, a frozen backbone whose loss plateaus higher, was slow
    # against its full fine-tune siblings, and a healthy batch-4 fine-tune ends above the baseline; then a
    # group is also split by what a run trains (freeze_backbone, LoRA: written after seeing that probe, so
    # not held out for it): 0.90, 0.90, 5 of 187), 4 of 172 healthy runs with a wrong finding: resnet's label-noise run (its train
    # loss plateaus high: slow against the clean baseline), simclr's 12-layer ReLU MLP encoder (alone
    # in its group, slow by its shape) and two healthy batch-4 runs that end above their baselines
    # (baseline-regression). The third slow false alarm is on a faulty run: vit's AdamW at lr 1 (blown
    # up after warm-up, then flat below its first point) is called slow, not oscillating. Before a group compared only runs that agree on their logged loss
    # setting (trackerhealth/loss_setting.py) it was P 0.57, 18 of 172: the simclr group's
    # temperature-0.1 baseline made every healthy temperature-0.5 run slow, and the unet group's
    # Dice-only baseline did the same to BCE + Dice runs. The key names that rule reads were chosen
    # after seeing those two groups: this figure is not held out for it.
    # Then baseline-regression compares a run that saw less data than its baseline with the baseline's level
    # after as much data (written after the three healthy batch-4 runs, so not held out for them): 2 of 187,
    # resnet's label-noise run and simclr's ReLU encoder, slow-convergence both; over seventeen (the blind
    # diffusion family), 2 of 205. Over eighteen (the blind distill family): P 0.86, R 0.91, 4 of 222 — distill's
    # batch-4 run is slow alone and grouped, and its healthy alpha-0.7 twin is called task-imbalance either way.
    # Over nineteen (the blind metric family): P 0.76, R 0.91, 9 of 243 — four healthy metric runs (rare val,
    # SGDR restarts, step-decay SGD, the fast-loader twin) are slow against their group's baseline.
    slow = grouped["grouped_held_out"]["slow-convergence"]
    # Over twenty-two (the blind forecast family): P 0.79, R 0.88, 8 of 282 — two of its slow runs are missed grouped too
    # (they fall fast and plateau, which the baseline's pace does too), and its one-cycle run is called oscillating.
    # Over twenty-five with the back-loaded shape a note (a single-run tag no more): P 0.82, R 0.875, 6 of 333. Over
    # twenty-six (the blind ctc family, whose slow runs read as never-learned even grouped): P 0.83, R 0.84, 6 of 351.
    # Over twenty-seven (the blind mlm family): P 0.83, R 0.83, 6 of 370. Over twenty-eight (the blind sgns family, its
    # batch-2 crawl slow grouped too): P 0.82, R 0.83, 6 of 389. Over twenty-nine (det): P 0.82, R 0.84, 6 of 406. Over
    # thirty-one (ssm, ftt), truth's end level fixed: P 0.84, R 0.87, 6 of 442. Over thirty-four (pinn, pixelcnn,
    # pointnet, blind): P 0.80, R 0.87, 9 of 490 — pixelcnn's warm-up-and-cosine and one-cycle runs are slower than
    # their group's constant-LR baseline. Over thirty-five (kan): P 0.805, R 0.86, 12 of 506.
    assert slow["precision"] >= 0.80 and slow["recall"] >= 0.85, slow
    bad, total = grouped["grouped_held_out_healthy_flagged"]
    # Over twenty-three (the blind textcls family, its healthy runs stopped mid-descent): P 0.77, R 0.89, 9 of 296.
    # Over twenty-four (the blind moe family, after its balance-term rule): P 0.78, R 0.89, 9 of 316. Over twenty-five
    # (the blind flow family): P 0.77, R 0.90, 10 of 333; then 6 of 333.
    assert bad <= 12 and total >= 506  # 12 of 506 over thirty-five; 9 of 490 over thirty-four; 6 of 442 over thirty-one; 6 of 406 over twenty-nine; 6 of 389 over twenty-eight; 6 of 370 over twenty-seven; 6 of 351 over twenty-six; 9, then 7 with the aux twins cleared; over twenty (gnn, blind) P 0.77, R 0.92, 7 of 255; twenty-one (seq2seq) P 0.78, R 0.92, 7 of 269; twenty-two (forecast) 8 of 282, then 7 (its one-cycle run cleared); twenty-three 9 of 296


def test_grouping_by_model_and_data_finds_the_slow_runs_one_curve_cannot(grouped):
    slow, alone = grouped["grouped"]["slow-convergence"], grouped["alone"]["slow-convergence"]
    # As measured (evidence/torch/cohort.json), with the shipped defaults: recall 0.92 and precision
    # 0.89 grouped against 0.76 and 0.76 alone. The group finds runs one curve cannot: they bend
    # early and then crawl (vit Adam eps 1.0, LR too low) or sit near their start for most of the run.
    # unet's Adam eps 1.0 run was found only against the Dice-only baseline, a loss it cannot reach
    # (right for the wrong reason); against its own loss setting's baseline it is missed.
    assert slow["recall"] >= 0.83 > alone["recall"]  # 0.83 and 0.58 over twenty-eight and twenty-seven; 0.84 and 0.57 over twenty-six; 0.875 and 0.50 over twenty-five, the back-loaded shape a note; 0.90 and 0.74 over sixteen families; 0.91 and 0.77 over eighteen; 0.88 and 0.70 over twenty-two
    # 0.86 over eighteen; 0.76 over nineteen (metric's healthy runs, above); 0.63 over twenty-three with the shipped
    # defaults (textcls' healthy runs, stopped mid-descent, are slow against their group's best run too)
    assert slow["precision"] >= 0.62
    # (vit_adam_eps_large was one of them until a loss still falling under a logged Adam epsilon >= 1e-2 was slow alone.)
    assert set(grouped["slow_missed_alone_found_grouped"]) >= {"regression_raw_features_sgd", "transformer_init_too_small",
                                                               "vit_lr_too_low"}
    bad, total = grouped["grouped_healthy_flagged"]
    assert bad <= 13 and total >= 506  # 13 of 506 (9 alone) over thirty-five; 10 of 490 (6 alone) over thirty-four (pixelcnn's warm-up runs slow against their group, pointnet's regularised twin overfitting); 7 of 442 (5 alone) over thirty-one, 7 of 425 (5) over thirty: ssm's scaled-aux twin; 6 of 406 (4 alone) over twenty-nine; 6 of 389 (4 alone) over twenty-eight; 6 of 370 (4 alone) over twenty-seven; 6 of 351 (4 alone) over twenty-six; 6 of 333 (4 alone) with the back-loaded shape a note; 20 of 333 (21 alone) over twenty-five; 19 of 316 (18 alone) over twenty-four; 2 of 205 (5 alone) over seventeen; 4 of 222 (7 alone) over eighteen; 9 of 243 (8 alone) over nineteen, then 7 (6); 7 of 255 (6) over twenty; 7 of 269 (6) over twenty-one; 8 of 282 (7) over twenty-two, then 7 (6); 19 of 296 (18) over twenty-three: textcls' healthy runs, 13 of them slow
    # Macro-F1 was lower grouped (0.81) than alone (0.89): baseline-regression's three false alarms, healthy
    # batch-4 runs that ended 12-43x their batch-32 baseline's final val loss, made its row an F1 of 0. Compared
    # after as much data as they saw (3-17 % of the baseline's), they end 0.3-1.7x it: none is flagged, and
    # grouped is 0.916 (held-out thresholds: 0.937); over eighteen families 0.908 (0.922); over nineteen 0.892 (0.903),
    # then 0.903 (0.917), then 0.918 (0.932); over twenty 0.918 (0.931); over twenty-one 0.911 (0.924), then 0.913 (0.926),
    # then 0.917 (0.930); over twenty-two 0.914 (0.925), then 0.915 (0.926); over twenty-three 0.900 (0.922); over
    # twenty-four 0.903 (0.923), then 0.904 (0.925); over twenty-five 0.903 (0.922), then 0.915 (0.925); over twenty-six
    # 0.905 (0.915); over twenty-seven 0.906 (0.915); over twenty-eight 0.902 (0.914); over twenty-nine 0.907 (0.918);
    # over thirty 0.907 (0.917); over thirty-one 0.907 (0.917), truth's end level fixed 0.909 (0.921); the brief early
    # blow-up read as nonfinite 0.911 (0.923); over thirty-four 0.905 (0.914); over thirty-five 0.900 (0.909).
    assert grouped["grouped"]["baseline-regression"]["fp"] == 0 and grouped["grouped_macro_f1"] >= 0.900


def test_a_starved_run_is_measured_against_its_groups_baseline():
    from evidence import cohort

    reports = cohort.grouped_reports()
    finding = reports["regression_slow_loader"].finding("input-bottleneck")
    evidence = {e.code: e.observed for e in finding.evidence}
    # The sleeping loader's real throughput, against the group's baseline (measured, never derived).
    assert finding.is_problem and evidence["throughput_vs_baseline"] < 0.5 and evidence["step_time_vs_baseline"] > 2
    assert "throughput is" in finding.message and "the group's baseline" in finding.message
