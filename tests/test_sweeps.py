"""The sweep summary's splits, on known answers."""

from trackerhealth.sweeps import summarize

OSC = "loss-oscillation"


def _sweep(rule):
    """Four LRs x three batch sizes; ``rule(lr, batch)`` gives each run's findings."""
    return [({"params.lr": str(lr), "params.batch_size": str(b), "params.seed": "0"}, frozenset(rule(lr, b)))
            for lr in (0.0003, 0.003, 0.03, 0.3) for b in (8, 32, 128)]


def test_the_learning_rates_that_oscillate_are_named_with_the_counts():
    s = summarize("sweep", _sweep(lambda lr, b: {OSC} if lr >= 0.03 else set()))
    (a,) = [a for a in s.associations if a.finding == OSC]
    assert (a.key, a.relation, a.value, a.inside_with, a.inside, a.outside_with, a.outside) == (
        "params.lr", ">=", "0.03", 6, 6, 0, 6)
    assert a.sentence() == "every run with params.lr ≥ 0.03 has loss-oscillation (6 of 6; 0 of 6 others)"


def test_a_mostly_pattern_is_reported_with_its_exception_and_noise_is_not():
    s = summarize("sweep", _sweep(lambda lr, b: {"noisy"} if b == 8 or (lr, b) == (0.3, 32) else set()))
    (a,) = s.associations
    assert (a.key, a.relation, a.value, a.inside_with, a.inside, a.outside_with, a.outside) == (
        "params.batch_size", "<=", "8", 4, 4, 1, 8)
    named = summarize("sweep", [({"params.opt": o, "params.lr": str(i)}, frozenset({"slow"} if o == "sgd" else ()))
                                for i, o in enumerate(["sgd", "adam", "adamw"] * 4)])
    (a,) = named.associations
    assert (a.key, a.relation, a.value, a.inside_with, a.inside) == ("params.opt", "=", "sgd", 4, 4)
    # A finding on two runs that share nothing is no pattern.
    scattered = summarize("sweep", _sweep(lambda lr, b: {"x"} if (lr, b) in {(0.0003, 8), (0.3, 128)} else set()))
    assert scattered.associations == ()


def test_fewer_than_ten_runs_is_not_a_sweep_and_a_constant_or_unique_key_is_no_axis():
    assert summarize("g", _sweep(lambda lr, b: set())[:9]) is None
    rows = [({"params.run_name": f"r{i}", "params.seed": "0"}, frozenset({OSC} if i < 5 else ())) for i in range(12)]
    assert summarize("g", rows).associations == ()
