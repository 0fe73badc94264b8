"""Which kind of MLflow store a tracking URI names, and how to talk to it.

* ``http(s)://host:port`` — a tracking server: histories over REST (parallel, retried), listing
  over REST, writes through ``MlflowClient``.
* ``sqlite:///path.db``, ``postgresql://…``, ``mysql://…`` — the server's database: histories read
  directly with read-only SQL (an order of magnitude faster than the REST API), listing and writes
  through ``MlflowClient``.
* ``./mlruns``, ``file:///…/mlruns`` — a file store: everything through ``MlflowClient``. MLflow 3
  refuses file stores unless ``MLFLOW_ALLOW_FILE_STORE=true``; we set it for the user, because
  reading an existing store is exactly what that flag is meant to allow.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from ._errors import SelectionError

HTTP, DATABASE, FILE = "http", "database", "file"
_DB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mssql")
_UNSUPPORTED = ("databricks", "databricks-uc", "uc")


@dataclass(frozen=True)
class TrackingUri:
    raw: str
    kind: str  # http | database | file
    dialect: str = ""  # sqlite | postgresql | mysql | mssql, for databases

    @property
    def redacted(self) -> str:
        """The URI without a password, for messages, cache keys and links."""
        return redact(self.raw)

    @property
    def sqlite_path(self) -> Path | None:
        if self.dialect != "sqlite":
            return None
        rest = self.raw.split(":", 1)[1]
        path = rest[3:] if rest.startswith("///") else rest.lstrip("/")  # sqlite:///rel, sqlite:////abs
        path = path.split("?", 1)[0]
        return Path(unquote(path)) if path and path != ":memory:" else None

    @property
    def file_path(self) -> Path | None:
        if self.kind != FILE:
            return None
        if self.raw.startswith("file:"):
            return Path(unquote(urlsplit(self.raw).path))
        return Path(self.raw).expanduser()

    @property
    def mlflow_uri(self) -> str:
        """What to hand to MlflowClient (an absolute file path for file stores)."""
        if self.kind == FILE:
            return str(self.file_path.resolve())
        return self.raw

    @property
    def ui_base(self) -> str | None:
        """Where the MLflow UI lives, when the URI itself is a server."""
        if self.kind != HTTP:
            return None
        parts = urlsplit(self.raw)  # links never carry credentials
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))

    def cache_key(self) -> str:
        """A folder name for this store's history cache: readable, unique, no secrets."""
        ident = self.mlflow_uri if self.kind == FILE else self.redacted
        if self.kind == FILE or self.dialect == "sqlite":
            path = self.file_path if self.kind == FILE else self.sqlite_path
            ident = str(path.resolve()) if path else ident
        digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
        label = urlsplit(ident).hostname or Path(ident).name or self.kind
        return f"{re.sub(r'[^A-Za-z0-9._-]+', '_', label)[:40]}-{digest}"


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return head == b"SQLite format 3\x00" or head == b""  # an empty file is a new, empty database


def redact_unparsable(uri: str) -> str:
    """``uri`` without its userinfo, for a URL too broken for urlsplit."""
    return re.sub(r"(://)[^/@]*@", r"\1***@", uri)


def redact(uri: str) -> str:
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018
    except ValueError:
        return redact_unparsable(uri)
    if parts.password is None and parts.username is None:
        return uri
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{quote(parts.username or '')}:***@" if parts.password is not None else f"{quote(parts.username or '')}@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def parse(uri: str | None) -> TrackingUri:
    """Classify ``uri``; raise :class:`SelectionError` (with the fix) for what cannot be scanned."""
    if not uri or not uri.strip():
        raise SelectionError("no MLflow tracking URI: pass --mlflow-uri http://host:5000 (or a sqlite:///…, postgresql://… "
                             "URI, or an ./mlruns folder), or set MLFLOW_TRACKING_URI")
    uri = uri.strip()
    scheme = uri.split(":", 1)[0].lower() if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri) else ""
    if len(scheme) == 1:  # a Windows drive letter, not a scheme
        scheme = ""
    base = scheme.split("+", 1)[0]
    if uri.lower() in _UNSUPPORTED:  # MLflow spells the Databricks store as a bare word
        base = uri.lower()
    if base in ("http", "https"):
        try:
            parts = urlsplit(uri)
            parts.port  # noqa: B018 - raises on a port out of range or not a number
        except ValueError as exc:
            raise SelectionError(f"--mlflow-uri {redact_unparsable(uri)!r} is not a valid URL ({exc}); expected "
                                 "http(s)://host:port, e.g. http://127.0.0.1:5000 or http://[::1]:5000") from None
        if not parts.hostname:
            raise SelectionError(f"--mlflow-uri {redact_unparsable(uri)!r} names no host; expected http(s)://host:port")
        return TrackingUri(uri.rstrip("/"), HTTP)
    if base in _DB_SCHEMES:
        dialect = "postgresql" if base == "postgres" else base
        found = TrackingUri(uri, DATABASE, dialect)
        path = found.sqlite_path
        if dialect == "sqlite" and (path is None or not path.is_file()):
            raise SelectionError(f"no MLflow database at {path or uri}: check --mlflow-uri (an absolute path needs four "
                                 "slashes: sqlite:////abs/path/mlflow.db)")
        if dialect == "sqlite" and not _is_sqlite(path):
            raise SelectionError(f"{path} is not a SQLite database (its first bytes are not SQLite's header); "
                                 "check --mlflow-uri: it must name the server's backend store (mlflow.db)")
        return found
    if base in _UNSUPPORTED:
        raise SelectionError(f"{base} tracking URIs are not supported yet: scan the workspace's MLflow REST endpoint "
                             "(https://<workspace-host> with MLFLOW_TRACKING_TOKEN) instead")
    if base in ("", "file"):
        found = TrackingUri(uri, FILE)
        path = found.file_path
        if not path.is_dir():
            raise SelectionError(f"no MLflow file store at {path}: pass the folder that holds the experiments "
                                 "(usually ./mlruns), a sqlite:///… database or an http:// server")
        return found
    raise SelectionError(f"unsupported tracking URI scheme {scheme!r} in {redact(uri)}: use http(s)://, sqlite:///, "
                         "postgresql://, mysql:// or a file-store folder")


def check_ui_url(url: str | None) -> str | None:
    """``--mlflow-ui-url``: only an http(s) URL with a host, since it becomes a link in alerts and
    reports (a ``javascript:`` URL there would run in whoever clicks it)."""
    if url is None or not url.strip():
        return None
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise SelectionError(f"--mlflow-ui-url {redact_unparsable(url)!r} is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise SelectionError(f"--mlflow-ui-url must be an http(s):// URL (e.g. http://mlflow.internal:5000), not "
                             f"{redact_unparsable(url)[:80]!r}")
    return url.rstrip("/")


def allow_file_store() -> None:
    """MLflow 3 refuses to open file stores unless told; reading one is why we were pointed at it."""
    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() not in ("true", "1"):
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
