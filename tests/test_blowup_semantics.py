"""Two blow-up semantics the torch corpus showed: one corrupt record's gradient is a nonfinite warning
with its step, and layers killed by a blow-up are not vanishing gradients."""

import numpy as np

from trackerhealth import RunHistory, RunRef, analyze

N = 400


def _run(grad: np.ndarray, layers: dict[str, np.ndarray] | None = None) -> RunHistory:
    rng = np.random.default_rng(0)
    steps = np.arange(N, dtype=float)
    loss = 2.0 * np.exp(-steps / 120) + 0.3 + 0.02 * rng.standard_normal(N)
    data = {"loss": (steps, loss), "grad_norm": (steps, grad)}
    for name, values in (layers or {}).items():
        data[f"grad_norm/{name}"] = (steps, values)
    return RunHistory.from_series(RunRef("files", "p", "r"), data)


def _grad(rng) -> np.ndarray:
    return 1.0 + 0.2 * rng.random(N)


def test_one_update_thousands_of_times_the_level_is_a_warning_at_its_step():
    grad = _grad(np.random.default_rng(1))
    grad[250] = 5e4
    report = analyze(_run(grad))
    (finding,) = [f for f in report.problems if f.id == "nonfinite"]
    assert finding.level == "warning"
    (ev,) = finding.evidence
    assert ev.code == "grad_norm_outlier" and ev.step_start == 250.0


def test_a_spike_of_tens_of_times_the_level_is_not_one():
    grad = _grad(np.random.default_rng(1))
    grad[250] = 40.0  # a heavy-tailed batch, as a bad shard gives: periodic-spikes territory, not a blow-up
    assert "nonfinite" not in {f.id for f in analyze(_run(grad)).problems}


def test_layers_dead_after_a_blow_up_are_judged_while_alive():
    rng = np.random.default_rng(2)
    alive = {name: 0.2 + 0.05 * rng.random(N) for name in ("l0", "l1", "l2", "l3")}
    dead = {name: np.where(np.arange(N) < 150, v, 0.0) for name, v in alive.items()}
    dead["l3"] = alive["l3"]  # the head keeps getting gradient
    finding = analyze(_run(_grad(rng), dead)).finding("vanishing-gradients")
    assert finding.level == "ok", finding.message
    never = dict(alive, l0=np.zeros(N), l1=np.zeros(N))  # early layers that never got any gradient still vanish
    assert analyze(_run(_grad(rng), never)).finding("vanishing-gradients").is_problem


def _loss_run(loss: np.ndarray) -> RunHistory:
    steps = np.arange(len(loss), dtype=float)
    return RunHistory.from_series(RunRef("files", "p", "r"), {"loss": (steps, loss)})


def test_a_loss_that_learns_then_swings_back_up_over_the_second_half_is_loss_oscillation():
    rng = np.random.default_rng(3)
    t = np.arange(N, dtype=float)
    level = 0.7 * np.exp(-t / 30) + 0.01 + np.where(t > N / 2, 0.15 * (t - N / 2) / (N / 2), 0.0)
    loss = level * np.exp(0.8 * rng.standard_normal(N))  # a batch of 2: each step's loss is mostly noise
    finding = analyze(_loss_run(loss)).finding("loss-oscillation")
    assert finding.is_problem and "second_half_rise" in {e.code for e in finding.evidence}, finding.message
    settled = (0.7 * np.exp(-t / 30) + 0.01) * np.exp(0.8 * rng.standard_normal(N))  # as noisy, but it stays down
    assert "second_half_rise" not in {e.code for e in analyze(_loss_run(settled)).finding("loss-oscillation").evidence}


def test_a_loss_that_blows_up_in_its_first_steps_is_measured_from_its_first_point():
    rng = np.random.default_rng(4)
    t = np.arange(N, dtype=float)
    loss = 18.0 * np.exp(-t / 400) * (1 + 0.05 * rng.standard_normal(N))
    loss[0] = 2.9  # the loss at initialisation; Adam at lr 1.0 throws it to 10^4 at once
    loss[1:6] = [7e4, 1.5e7, 2e5, 8e5, 3e5]
    report = analyze(_loss_run(loss))
    oscillation = report.finding("loss-oscillation")
    assert oscillation.level == "critical" and "rose from 2.9" in oscillation.message
    assert not report.finding("slow-convergence").is_problem  # a loss above where it began is not a slow fall


def test_a_converged_near_zero_loss_that_doubles_while_swinging_is_not_a_late_rise():
    rng = np.random.default_rng(5)
    t = np.arange(N, dtype=float)
    level = 0.5 * np.exp(-t / 10) + 1e-5 * (1 + t / N)  # at ~0 from step 60 on; the 1e-5 floor doubles
    loss = level * np.exp(0.8 * rng.standard_normal(N))
    assert not analyze(_loss_run(loss)).finding("loss-oscillation").is_problem


def _warmup_climb_run(loss_after: np.ndarray) -> RunHistory:
    """Public log P213's shape: the gradient norm's level climbs ~25x for a stretch early in the run (with
    the loss rising a little there), then settles; ``loss_after`` is the loss from step 60 on."""
    rng = np.random.default_rng(3)
    steps = np.arange(N, dtype=float)
    grad = _grad(rng)
    grad[30:60] *= 25.0
    loss = np.concatenate([2.2 + 0.02 * rng.standard_normal(30), np.linspace(2.3, 2.9, 30), loss_after])
    return RunHistory.from_series(RunRef("files", "p", "r"), {"loss": (steps, loss), "grad_norm": (steps, grad)})


def test_a_gradient_climb_the_run_survived_and_learned_far_past_is_not_an_explosion():
    rng = np.random.default_rng(4)
    learned = 2.9 * np.exp(-np.arange(N - 60) / 30) + 0.002 * (1 + rng.random(N - 60))
    finding = analyze(_warmup_climb_run(learned)).finding("nonfinite")
    assert finding.level == "ok" and "went on to end at" in finding.message, finding.message
    stayed = 2.9 + 0.05 * rng.standard_normal(N - 60)  # the same climb, and the loss never got below it
    assert analyze(_warmup_climb_run(stayed)).finding("nonfinite").level == "warning"
