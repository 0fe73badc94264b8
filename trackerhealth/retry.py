"""The one retry policy for every network call trackerhealth makes (MLflow REST, the W&B API, webhooks).

Built on tenacity: the policy is a composition (stop after N tries *or* when the time budget is
spent; full-jitter exponential wait, overridden by ``Retry-After``; retry when a predicate on the
exception says so) and tenacity provides exactly those parts, tested and maintained, for any
callable — the W&B SDK's calls included, which urllib3's ``Retry`` (transport-level, for
urllib3/requests only) cannot wrap, and with no decorator-at-import-time style forced on us
(stamina's strength, but its budget is fixed per decorated function, and ours comes from
``--timeout``).

What counts as transient is decided by exception type and HTTP status code, never by message text:

* :class:`RetryableAnswer` — a server answered with a status worth retrying (429, 500, 502, 503,
  504) — callers raise it from inside an attempt;
* connection errors and timeouts of the transport (each caller passes its own predicate, since
  ``requests``, ``urllib`` and ``wandb`` name them differently).

Non-idempotent requests (a webhook POST) use :data:`UNSENT_STATUS` and a predicate that admits
only errors raised before the request was delivered; see :mod:`trackerhealth.writers.alerts`.

Knobs: ``TRACKERHEALTH_HTTP_RETRIES`` (retries after the first try), ``TRACKERHEALTH_HTTP_BACKOFF``
(seconds before the second try; doubles each time) and the per-call time budget (``--timeout``,
``TRACKERHEALTH_TIMEOUT``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from email.utils import parsedate_to_datetime
from typing import TypeVar

import tenacity

__all__ = ["DEFAULT_TIMEOUT", "RETRY_STATUS", "UNSENT_STATUS", "RetryPolicy", "RetryableAnswer",
           "parse_retry_after"]

T = TypeVar("T")

# 30 s per request, retries included: an MLflow history page of 25,000 points takes 1-3 s on a
# loaded server and a W&B GraphQL call well under that, so this is >10x a slow normal answer, yet
# a hung server is named within half a minute instead of the 97 s three 30 s read timeouts took.
DEFAULT_TIMEOUT = 30.0
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
# Answers that say the request was not processed: safe to repeat even a non-idempotent POST.
UNSENT_STATUS = frozenset({429, 503})
MAX_RETRY_AFTER = 30.0


class RetryableAnswer(Exception):
    """A server answered with a transient status; raised inside an attempt so the policy retries it."""

    def __init__(self, status: int, retry_after: float | None = None, detail: str = ""):
        self.status = status
        self.retry_after = retry_after
        self.detail = detail
        super().__init__(f"HTTP {status}" + (f" ({detail})" if detail else ""))


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: a number of seconds or an HTTP date; None when absent or unreadable."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _env_number(name: str, kind):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry one call. ``timeout`` bounds the whole call, retries included."""

    retries: int = 5
    backoff: float = 0.5
    max_backoff: float = 10.0
    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = 10.0

    @classmethod
    def from_env(cls, timeout: float | None = None) -> RetryPolicy:
        base = cls()
        retries = _env_number("TRACKERHEALTH_HTTP_RETRIES", int)
        backoff = _env_number("TRACKERHEALTH_HTTP_BACKOFF", float)
        env_timeout = _env_number("TRACKERHEALTH_TIMEOUT", float)
        return cls(retries=base.retries if retries is None else max(0, retries),
                   backoff=base.backoff if backoff is None else max(0.0, backoff),
                   timeout=timeout or env_timeout or base.timeout)

    def with_(self, **changes) -> RetryPolicy:
        return replace(self, **changes)

    @property
    def tries(self) -> int:
        return self.retries + 1

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        told = exc.retry_after if isinstance(exc, RetryableAnswer) else None
        if told is not None:
            delay = min(float(told), MAX_RETRY_AFTER)
        else:
            # Full jitter keeps many scan threads from retrying in lock-step against a busy server.
            delay = tenacity.wait_random_exponential(multiplier=self.backoff, max=self.max_backoff)(state)
        return max(0.0, delay)

    def call(self, attempt: Callable[[float], T], transient: Callable[[BaseException], bool],
             sleep: Callable[[float], None] = time.sleep) -> T:
        """``attempt(seconds_left)`` until it returns, a non-transient error, ``retries`` retries or
        the time budget would be overrun by the next wait; the last error is re-raised as it was."""
        started = time.monotonic()

        def one() -> T:
            left = self.timeout - (time.monotonic() - started)
            return attempt(max(left, 0.1))

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.tries) | tenacity.stop_before_delay(self.timeout),
            wait=self._wait,
            retry=tenacity.retry_if_exception(lambda exc: isinstance(exc, RetryableAnswer) or transient(exc)),
            reraise=True,
            sleep=sleep,
        )
        return retrying(one)

    def elapsed_note(self) -> str:
        return f"(a {self.timeout:g} s budget; --timeout SECONDS sets it)"
