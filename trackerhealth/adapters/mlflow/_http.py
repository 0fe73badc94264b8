"""A small REST client for the MLflow tracking server: auth from the environment, retries, a pool.

MlflowClient is fine for writes, but for reads it is sequential and waits up to minutes on a dead
server; the scan wants many history requests in flight at once, its own retry budget, and a fast,
clear "unreachable" answer. Auth follows MLflow's own environment variables, so whatever works for
``mlflow`` works here:

* ``MLFLOW_TRACKING_TOKEN`` (bearer), or ``MLFLOW_TRACKING_USERNAME`` + ``MLFLOW_TRACKING_PASSWORD``
  (basic), or ``user:password@`` in the URI;
* ``MLFLOW_TRACKING_INSECURE_TLS=true``, ``MLFLOW_TRACKING_SERVER_CERT_PATH``,
  ``MLFLOW_TRACKING_CLIENT_CERT_PATH``.

Retries: 429, 5xx, timeouts, dropped connections and truncated bodies are retried with exponential
backoff and jitter (``Retry-After`` is honoured); ``TRACKERHEALTH_HTTP_RETRIES`` and
``TRACKERHEALTH_HTTP_BACKOFF`` (seconds) tune the budget.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._errors import ApiError, TrackerUnreachable, import_requests

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 5
    backoff: float = 0.5  # seconds before the second try; doubles each time
    max_backoff: float = 10.0
    connect_timeout: float = 10.0
    read_timeout: float = 120.0

    @classmethod
    def from_env(cls) -> RetryPolicy:
        base = cls()
        retries = os.environ.get("TRACKERHEALTH_HTTP_RETRIES")
        backoff = os.environ.get("TRACKERHEALTH_HTTP_BACKOFF")
        return cls(
            retries=int(retries) if retries else base.retries,
            backoff=float(backoff) if backoff else base.backoff,
        )

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), 30.0)
            except ValueError:
                pass  # an HTTP date: fall back to our own backoff
        # Full jitter keeps many scan threads from retrying in lock-step against a busy server.
        return random.uniform(0.5, 1.0) * min(self.max_backoff, self.backoff * 2**attempt)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


class RestClient:
    """JSON over HTTP against one MLflow server, safe to share between threads."""

    def __init__(self, base_url: str, pool_size: int = 8, retry: RetryPolicy | None = None):
        requests = import_requests()
        from requests.adapters import HTTPAdapter

        parts = urlsplit(base_url)
        netloc = parts.hostname or ""
        if parts.port:
            netloc = f"{netloc}:{parts.port}"
        self.base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.retry = retry or RetryPolicy.from_env()
        self._requests = requests
        session = requests.Session()
        token = os.environ.get("MLFLOW_TRACKING_TOKEN")
        user = os.environ.get("MLFLOW_TRACKING_USERNAME") or parts.username
        password = os.environ.get("MLFLOW_TRACKING_PASSWORD") or parts.password
        if token:
            session.headers["Authorization"] = f"Bearer {token}"
        elif user and password:
            session.auth = (user, password)
        if _truthy("MLFLOW_TRACKING_INSECURE_TLS"):
            session.verify = False
        elif os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH"):
            session.verify = os.environ["MLFLOW_TRACKING_SERVER_CERT_PATH"]
        if os.environ.get("MLFLOW_TRACKING_CLIENT_CERT_PATH"):
            session.cert = os.environ["MLFLOW_TRACKING_CLIENT_CERT_PATH"]
        session.headers["User-Agent"] = "trackerhealth"
        # Retries are ours (below), so urllib3 must not retry on its own and double the budget.
        adapter = HTTPAdapter(pool_connections=1, pool_maxsize=max(pool_size, 1), max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        self.session = session
        self._lock = threading.Lock()
        self.requests = 0
        self.retries = 0

    # -- plumbing ---------------------------------------------------------------------------
    def _count(self, retried: bool) -> None:
        with self._lock:
            self.requests += 1
            self.retries += retried

    def request(self, method: str, path: str, *, params: Any = None, json: Any = None, what: str = "",
                retry: RetryPolicy | None = None, raw: bool = False) -> Any:
        """One API call; returns the decoded JSON object (the text when ``raw``), or raises
        ApiError / TrackerUnreachable."""
        policy = retry or self.retry
        url = self.base + path
        exc_types = (
            self._requests.ConnectionError,
            self._requests.Timeout,
            self._requests.exceptions.ChunkedEncodingError,
            self._requests.exceptions.ContentDecodingError,
        )
        last_problem = ""
        transport_only = True
        for attempt in range(policy.retries + 1):
            retry_after = None
            self._count(attempt > 0)
            try:
                resp = self.session.request(method, url, params=params, json=json,
                                            timeout=(policy.connect_timeout, policy.read_timeout))
            except exc_types as exc:
                last_problem = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code in RETRY_STATUS:
                    transport_only = False
                    last_problem = f"HTTP {resp.status_code}"
                    retry_after = resp.headers.get("Retry-After")
                elif resp.status_code >= 400:
                    raise _api_error(resp, what)
                elif raw:
                    return resp.text
                else:
                    try:
                        return resp.json()
                    except ValueError:  # a body cut short by a dropped connection
                        transport_only = False
                        last_problem = "truncated or invalid JSON body"
            if attempt < policy.retries:
                time.sleep(policy.delay(attempt, retry_after))
        tries = policy.retries + 1
        if transport_only:
            raise TrackerUnreachable(
                f"MLflow server {self.base} did not answer ({last_problem}) after {tries} tries{' ' + what if what else ''}; "
                f"check that it is up with `curl {self.base}/health` and that --mlflow-uri / MLFLOW_TRACKING_URI is right")
        raise ApiError(0, "", f"{last_problem} after {tries} tries; the server is overloaded or failing "
                              "(raise TRACKERHEALTH_HTTP_RETRIES, or lower --workers)", what)

    def get(self, path: str, params: Any = None, what: str = "") -> dict:
        return self.request("GET", path, params=params, what=what)

    def post(self, path: str, body: Any, what: str = "") -> dict:
        return self.request("POST", path, json=body, what=what)

    def check_reachable(self) -> None:
        """Fail fast (a few seconds, not minutes) when nothing answers at the URI."""
        quick = RetryPolicy(retries=2, backoff=0.5, connect_timeout=5.0, read_timeout=30.0)
        try:
            self.request("GET", "/health", retry=quick, what="to GET /health", raw=True)
        except ApiError:
            pass  # something answered (a proxy may hide /health): reachable is all we ask here

    def close(self) -> None:
        self.session.close()


def _api_error(resp, what: str) -> ApiError:
    try:
        body = resp.json()
        code, message = body.get("error_code", ""), body.get("message", "") or resp.text[:300]
    except ValueError:
        code, message = "", resp.text[:300].strip() or resp.reason
    if resp.status_code in (401, 403):
        message += (" — set MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, "
                    "to credentials that may read (and, unless --dry-run, write) these runs")
    return ApiError(resp.status_code, code, message, what)
