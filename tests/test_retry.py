"""The one retry policy: Retry-After, jitter, the time budget, and "transient" by type, not text."""

from __future__ import annotations

import pytest

from trackerhealth.retry import RetryableAnswer, RetryPolicy, parse_retry_after


class Flaky:
    def __init__(self, failures):
        self.failures = list(failures)
        self.calls = 0

    def __call__(self, left):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def test_retry_after_wins_over_backoff_and_jitter_stays_in_bounds():
    slept = []
    policy = RetryPolicy(retries=4, backoff=1.0, max_backoff=8.0, timeout=1000)
    flaky = Flaky([RetryableAnswer(429, retry_after=3.0), RetryableAnswer(503), RetryableAnswer(503)])
    assert policy.call(flaky, lambda exc: False, sleep=slept.append) == "done"
    assert flaky.calls == 4
    assert slept[0] == 3.0  # the server said when
    assert all(0 <= s <= 8.0 for s in slept[1:])


def test_an_error_whose_text_says_500_or_connection_is_not_retried():
    flaky = Flaky([ValueError("HTTP 500: connection reset (timeout)")])
    with pytest.raises(ValueError):
        RetryPolicy(retries=5).call(flaky, lambda exc: isinstance(exc, ConnectionError), sleep=lambda s: None)
    assert flaky.calls == 1


def test_transient_types_are_retried_and_the_last_error_comes_back():
    flaky = Flaky([ConnectionError("a"), ConnectionError("b"), ConnectionError("c")])
    with pytest.raises(ConnectionError, match="c"):
        RetryPolicy(retries=2).call(flaky, lambda exc: isinstance(exc, ConnectionError), sleep=lambda s: None)
    assert flaky.calls == 3


def test_the_budget_is_passed_to_each_try_and_stops_the_retries():
    seen = []
    policy = RetryPolicy(retries=50, backoff=0.05, timeout=0.3)

    def attempt(left):
        seen.append(left)
        raise TimeoutError("hung")

    with pytest.raises(TimeoutError):
        policy.call(attempt, lambda exc: isinstance(exc, TimeoutError))
    assert seen[0] <= 0.3 and len(seen) < 51  # stopped by the budget, not by the retry count
    assert seen == sorted(seen, reverse=True)  # each try gets what is left


def test_parse_retry_after():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: now
