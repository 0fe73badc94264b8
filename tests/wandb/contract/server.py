"""A strict W&B API contract server on 127.0.0.1, for driving the real ``wandb`` client in tests.

The W&B cloud cannot be reached from the tests and its schema is not public, so this server holds
the part of the API that the pinned SDK (and ``wandb-workspaces``) really send — recorded from
their requests, see ``recorded_operations.json`` — in ``schema.graphql``. Every GraphQL request is
parsed and validated with ``graphql-core`` against that schema and executed against an in-memory
store. Anything the server does not know (an operation, a field, an argument, an endpoint, a filter
operator) is answered with an error *and* recorded in :attr:`ContractServer.violations`; the test
fixture fails the test on any violation, so a change in what the SDK sends is caught, never
silently answered with nulls.

Faults for the resilience tests: :meth:`ContractServer.fail` answers the next N matching requests
with a status (429 with Retry-After, 503) or drops the connection; :attr:`ContractServer.hooks`
run a callback when an operation arrives (a run deleted mid-scan).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from graphql import (
    GraphQLError,
    OperationDefinitionNode,
    build_schema,
    execute,
    parse,
    validate,
)

from .operations import signature
from .store import Store, StoreError

SCHEMA = build_schema((Path(__file__).with_name("schema.graphql")).read_text())
RECORDED = Path(__file__).with_name("recorded_operations.json")
OTEL_PATH = "/sdk/otel/v1/metrics"  # the SDK's telemetry export; W&B answers it, a 404 is fine


def known_operations() -> dict[str, list[list[str]]]:
    """Operation name -> the field signatures recorded from the SDK (see operations.py)."""
    return json.loads(RECORDED.read_text()) if RECORDED.exists() else {}


class ContractServer:
    """``with ContractServer() as server:`` → ``server.url``, ``server.api_key``, ``server.store``."""

    API_KEY = "7472616b65726865616c746820636f6e74726163"  # any 40 characters, as W&B keys are

    def __init__(self, *, strict_operations: bool = True, latency_s: float = 0.0):
        self.store = Store(self)
        self.latency_s = latency_s  # added to every answer: a network round trip, for benchmarks
        self.violations: list[str] = []
        self.operations: Counter[str] = Counter()  # operationName -> count
        self.signatures: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        self.requests: list[tuple[str, str]] = []  # (method, operation name or path)
        self.hooks: dict[str, Any] = {}  # operationName -> callable(variables), run before answering
        self.strict_operations = strict_operations
        self._faults: list[dict] = []
        self._lock = threading.Lock()
        self.in_flight = 0  # requests being answered now
        self.max_in_flight = 0  # the most answered at once since reset_in_flight(): back-pressure tests
        self._known = known_operations()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="wandb-contract", daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def reset_in_flight(self) -> None:
        with self._lock:
            self.max_in_flight = self.in_flight

    def _entered(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _left(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def env(self) -> dict[str, str]:
        """The environment that points the SDK (and trackerhealth) at this server."""
        return {"WANDB_BASE_URL": self.url, "WANDB_API_KEY": self.API_KEY}

    # -- faults ------------------------------------------------------------------------------
    def fail(self, match: str, *, status: int = 503, times: int = 1, drop: bool = False,
             retry_after: float | None = None) -> None:
        """Answer the next ``times`` requests whose operation name or path equals ``match`` with
        ``status`` (or drop the connection)."""
        with self._lock:
            self._faults.append({"match": match, "status": status, "left": times, "drop": drop,
                                 "retry_after": retry_after})

    def _fault_for(self, name: str) -> dict | None:
        with self._lock:
            for fault in self._faults:
                if fault["left"] > 0 and fault["match"] == name:
                    fault["left"] -= 1
                    return fault
        return None

    def violation(self, message: str) -> None:
        with self._lock:
            self.violations.append(message)

    def count(self, operation: str) -> int:
        return self.operations[operation]

    def reset_counts(self) -> None:
        with self._lock:
            self.operations.clear()
            self.requests.clear()

    # -- GraphQL -----------------------------------------------------------------------------
    def graphql(self, body: dict) -> tuple[int, dict]:
        query, variables = body.get("query"), body.get("variables") or {}
        if not isinstance(query, str):
            self.violation(f"GraphQL request without a query: {sorted(body)}")
            return 400, {"errors": [{"message": "missing query"}]}
        try:
            document = parse(query)
        except GraphQLError as exc:
            self.violation(f"unparsable GraphQL: {exc.message}\n{query}")
            return 400, {"errors": [{"message": exc.message}]}
        errors = validate(SCHEMA, document)
        operation = next((d for d in document.definitions if isinstance(d, OperationDefinitionNode)), None)
        name = body.get("operationName") or (operation.name.value if operation and operation.name else "")
        if errors:
            self.violation(f"{name or 'anonymous operation'} does not match the contract: "
                           + "; ".join(e.message for e in errors) + f"\n{query}")
            return 400, {"errors": [{"message": e.message} for e in errors]}
        sig = signature(document)
        with self._lock:
            self.operations[name] += 1
            self.signatures[name].add(sig)
            self.requests.append(("POST", name))
        if self.strict_operations and list(sig) not in self._known.get(name, []):
            self.violation(f"operation {name!r} with fields {list(sig)} was never recorded from the SDK; "
                           "re-record with `python -m tests.wandb.contract.record` if the SDK changed")
        hook = self.hooks.get(name)
        if hook is not None:
            hook(variables)
        try:
            result = execute(SCHEMA, document, root_value=self.store.root(), variable_values=variables,
                             operation_name=body.get("operationName") or None)
        except StoreError as exc:  # a contract problem found while answering (e.g. a filter operator)
            self.violation(f"{name}: {exc}")
            return 400, {"errors": [{"message": str(exc)}]}
        out: dict[str, Any] = {"data": result.data}
        if result.errors:
            contract = [e for e in result.errors if isinstance(e.original_error, StoreError)]
            for err in contract:
                self.violation(f"{name}: {err.message}")
            out["errors"] = [{"message": e.message, "path": e.path} for e in result.errors]
        return 200, out


_OPERATION = re.compile(r"\b(?:query|mutation)\s+(\w+)")


def operation_name(request: dict) -> str:
    """The operation a request names (wandb-core does not always send ``operationName``)."""
    if request.get("operationName"):
        return request["operationName"]
    found = _OPERATION.search(request.get("query") or "")
    return found.group(1) if found else ""


def _handler(server: ContractServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else b""
            if self.headers.get("Content-Encoding") == "gzip":
                data = gzip.decompress(data)
            return data

        def _send(self, status: int, payload: bytes, content_type: str = "application/json",
                  headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, status: int, doc: dict, headers: dict | None = None) -> None:
            self._send(status, json.dumps(doc).encode(), headers=headers)

        def _authorized(self) -> bool:
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                try:
                    _user, _, key = base64.b64decode(auth[6:]).decode().partition(":")
                except ValueError:
                    return False
                return key == server.API_KEY
            return auth == f"Bearer {server.API_KEY}"

        def _fault(self, name: str) -> bool:
            fault = server._fault_for(name)
            if fault is None:
                return False
            if fault["drop"]:
                self.close_connection = True
                self.connection.shutdown(2)  # the client sees the connection reset mid-request
                return True
            headers = {"Retry-After": str(fault["retry_after"])} if fault["retry_after"] is not None else None
            self._json(fault["status"], {"errors": [{"message": f"injected {fault['status']}"}]}, headers)
            return True

        def do_POST(self):
            path = urlsplit(self.path).path
            body = self._body()
            if server.latency_s:
                time.sleep(server.latency_s)
            if path == OTEL_PATH:
                self._send(404, b"")
                return
            if path != "/graphql":
                server.violation(f"unknown endpoint POST {path}")
                self._json(404, {"errors": [{"message": f"unknown endpoint {path}"}]})
                return
            if not self._authorized():
                self._json(401, {"errors": [{"message": "invalid API key"}]})
                return
            try:
                request = json.loads(body)
            except ValueError:
                server.violation(f"POST /graphql with a body that is not JSON: {body[:200]!r}")
                self._json(400, {"errors": [{"message": "body is not JSON"}]})
                return
            if self._fault(operation_name(request)):
                return
            status, doc = server.graphql(request)
            self._json(status, doc)

        def do_GET(self):
            path = urlsplit(self.path).path
            if server.latency_s:
                time.sleep(server.latency_s)
            with server._lock:
                server.requests.append(("GET", path))
            if self._fault("GET " + path.split("/")[1] if "/" in path else path):
                return
            blob = server.store.download(path)
            if blob is None:
                server.violation(f"unknown endpoint GET {path}")
                self._json(404, {"errors": [{"message": f"not found: {path}"}]})
                return
            self._send(200, blob, "application/octet-stream")

        def do_PUT(self):
            path = urlsplit(self.path).path
            body = self._body()
            with server._lock:
                server.requests.append(("PUT", path))
            if self._fault("PUT " + path.split("/")[1]):
                return
            if not server.store.upload(path, body):
                server.violation(f"unknown endpoint PUT {path}")
                self._json(404, {"errors": [{"message": f"no upload expected at {path}"}]})
                return
            self._send(200, b"", "text/plain")

    for name in ("do_GET", "do_POST", "do_PUT"):
        if hasattr(Handler, name):
            setattr(Handler, name, _counted(server, getattr(Handler, name)))
    return Handler


def _counted(server: ContractServer, answer):
    """``answer`` counted in the server's requests in flight (from request to reply; an idle
    keep-alive connection is not a request)."""

    def counted(self):
        server._entered()
        try:
            return answer(self)
        finally:
            server._left()

    return counted


__all__ = ["OTEL_PATH", "SCHEMA", "ContractServer", "known_operations"]
