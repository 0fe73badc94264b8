"""A small REST client for the MLflow tracking server: auth from the environment, retries, a pool.

MlflowClient is fine for writes, but for reads it is sequential and waits up to minutes on a dead
server; the scan wants many history requests in flight at once, its own retry budget, and a fast,
clear "unreachable" answer. Auth follows MLflow's own environment variables, so whatever works for
``mlflow`` works here:

* ``MLFLOW_TRACKING_TOKEN`` (bearer), or ``MLFLOW_TRACKING_USERNAME`` + ``MLFLOW_TRACKING_PASSWORD``
  (basic), or ``user:password@`` in the URI;
* ``MLFLOW_TRACKING_INSECURE_TLS=true``, ``MLFLOW_TRACKING_SERVER_CERT_PATH``,
  ``MLFLOW_TRACKING_CLIENT_CERT_PATH``.

Retries follow the shared policy (:mod:`trackerhealth.retry`): 429, 5xx, timeouts, dropped
connections and truncated bodies, with jitter and ``Retry-After``, within ``--timeout`` per request.
Before anything else :meth:`RestClient.check_reachable` checks that an MLflow server answers
(``/version``), so a wrong port or a login page is named as "not an MLflow server" (exit 3).
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ... import retry as _retry
from ...redaction import redact_secrets
from ._errors import ApiError, TrackerUnreachable, import_requests

# Old name, kept for callers that imported it from here.
RetryPolicy = _retry.RetryPolicy
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([.+-]?[A-Za-z0-9.+-]*)$")


class _BadBody(Exception):
    """A 2xx answer whose body is not complete JSON (a connection cut mid-body): retried."""


class NotMlflowServer(TrackerUnreachable):
    """Something answered at the URI, but it is not an MLflow tracking server."""


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
        r = self._requests
        transport = (r.ConnectionError, r.Timeout, r.exceptions.ChunkedEncodingError,
                     r.exceptions.ContentDecodingError, _BadBody)
        tries = 0

        def attempt(left: float) -> Any:
            nonlocal tries
            tries += 1
            self._count(tries > 1)
            resp = self.session.request(method, url, params=params, json=json,
                                        timeout=(min(policy.connect_timeout, left), left))
            if resp.status_code in _retry.RETRY_STATUS:
                raise _retry.RetryableAnswer(resp.status_code, _retry.parse_retry_after(resp.headers.get("Retry-After")))
            if resp.status_code >= 400:
                raise _api_error(resp, what)
            if raw:
                return resp
            try:
                return resp.json()
            except ValueError:
                if _looks_like_html(resp):  # a login page or another service answering 200
                    raise NotMlflowServer(self._not_mlflow(resp)) from None
                raise _BadBody("truncated or invalid JSON body") from None

        try:
            return policy.call(attempt, lambda exc: isinstance(exc, transport))
        except _retry.RetryableAnswer as exc:
            raise ApiError(exc.status, "", f"HTTP {exc.status} after {tries} tries; the server is overloaded or "
                                           "failing (raise TRACKERHEALTH_HTTP_RETRIES or --timeout, or lower --workers)",
                           what) from None
        except transport as exc:
            problem = redact_secrets(f"{type(exc).__name__}: {exc}")
            raise TrackerUnreachable(
                f"MLflow server {self.base} did not answer ({problem}) after {tries} tries "
                f"{policy.elapsed_note()}{' ' + what if what else ''}; check that it is up with "
                f"`curl {self.base}/health` and that --mlflow-uri / MLFLOW_TRACKING_URI is right") from None

    def get(self, path: str, params: Any = None, what: str = "") -> dict:
        return self.request("GET", path, params=params, what=what)

    def post(self, path: str, body: Any, what: str = "") -> dict:
        return self.request("POST", path, json=body, what=what)

    def check_reachable(self) -> str:
        """Fail fast when nothing answers, and when what answers is not MLflow; returns the version.

        MLflow servers answer ``GET /version`` with their version as plain text. A gateway may hide
        it (404/405): then an experiments search must answer with MLflow's JSON shape.
        """
        quick = self.retry.with_(timeout=min(self.retry.timeout, 10.0), retries=min(self.retry.retries, 3))
        try:
            resp = self.request("GET", "/version", retry=quick, what="to GET /version", raw=True)
        except ApiError as exc:
            if exc.status in (401, 403):
                raise
            if exc.status not in (404, 405):
                raise NotMlflowServer(f"this is not an MLflow server: {self.base}/version answered {exc}") from None
        else:
            text = resp.text.strip()
            if _VERSION.match(text[:40]) and len(text) < 40:
                return text
            raise NotMlflowServer(self._not_mlflow(resp))
        try:
            body = self.request("POST", "/api/2.0/mlflow/experiments/search", json={"max_results": 1}, retry=quick,
                                what="searching experiments")
        except ApiError as exc:
            if exc.status in (401, 403):
                raise
            raise NotMlflowServer(f"this is not an MLflow server: {self.base} has no /version and answered the "
                                  f"experiments search with {exc} (no 'experiments' list); check --mlflow-uri "
                                  "(host, port and path)") from None
        if not isinstance(body, dict) or not isinstance(body.get("experiments"), list):
            raise NotMlflowServer(f"this is not an MLflow server: {self.base} answered the experiments search with "
                                  f"{_show(str(body))} (no 'experiments' list); check --mlflow-uri (host and port)")
        return ""

    def _not_mlflow(self, resp) -> str:
        kind = resp.headers.get("Content-Type", "no content type").split(";")[0]
        title = re.search(r"<title[^>]*>(.*?)</title>", resp.text[:5000], re.I | re.S)
        shown = title.group(1).strip() if title else resp.text.strip()
        return (f"this is not an MLflow server: {resp.url.split('?')[0] if resp.url else self.base} answered "
                f"HTTP {resp.status_code} {kind} {_show(shown)!r}; check --mlflow-uri (host, port and path)")

    def close(self) -> None:
        self.session.close()


def _api_error(resp, what: str) -> ApiError:
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        code, message = str(body.get("error_code", "")), str(body.get("message", "") or resp.text[:300])
    else:
        code, message = "", resp.text[:300].strip() or resp.reason
    message = redact_secrets(message)
    if resp.status_code in (401, 403):
        message += (" — set MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, "
                    "to credentials that may read (and, unless --dry-run, write) these runs")
    return ApiError(resp.status_code, code, message, what)


def _looks_like_html(resp) -> bool:
    return "html" in resp.headers.get("Content-Type", "").lower() or resp.text.lstrip()[:1] == "<"


def _show(text: str, limit: int = 80) -> str:
    text = " ".join(redact_secrets(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
