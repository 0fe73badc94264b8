"""The contract server's in-memory W&B: entities, projects, runs (history, system events, summary,
config, tags, files), reports (views) and alerts; plus the GraphQL resolvers over them.

graphql-core's default resolver reads an attribute, calling it with ``(info, **arguments)`` when it
is a method, so each GraphQL type is a small class here whose attributes are its fields.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone


class StoreError(Exception):
    """A request the contract does not cover (unknown filter field or operator, say)."""


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def iso(moment: datetime) -> str:
    # W&B's API writes times as naive UTC ISO strings without a zone.
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


def _parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _json_safe(value):
    """History values as W&B's JSON lines carry them: NaN/Infinity as bare tokens (json.dumps does)."""
    return value


@dataclass
class StoredRun:
    entity: str
    project: str
    name: str  # the run id
    display_name: str
    history: list[dict] = field(default_factory=list)  # rows with _step, _runtime, _timestamp, metrics
    events: list[dict] = field(default_factory=list)  # system-metric rows (system.gpu.0.gpu, …)
    state: str = "finished"
    tags: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    group: str | None = None
    job_type: str | None = None
    notes: str | None = None
    description: str | None = None
    created_at: datetime = field(default_factory=now)
    heartbeat_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
    exported_rows: int | None = None  # rows in the parquet export; the rest are "live" (None: all)
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def storage_id(self) -> str:
        return base64.b64encode(f"Run:v1:{self.name}:{self.project}:{self.entity}".encode()).decode()

    @property
    def last_step(self) -> int:
        return max((int(r["_step"]) for r in self.history), default=-1)

    def exported_count(self) -> int:
        return len(self.history) if self.exported_rows is None else min(self.exported_rows, len(self.history))

    def history_keys(self) -> dict:
        counts: dict[str, int] = {}
        for row in self.history:
            for key in row:
                counts[key] = counts.get(key, 0) + 1
        return {"lastStep": self.last_step,
                "keys": {k: {"typeCounts": [{"type": "number", "count": n}]} for k, n in sorted(counts.items())}}


class Store:
    """Everything the server knows. Thread-safe for the server's handler threads."""

    def __init__(self, server=None):
        self._server = server
        self.lock = threading.RLock()
        self.viewer_entity = "trackerhealth-ci"
        self.runs: dict[tuple[str, str, str], StoredRun] = {}  # (entity, project, name)
        self.projects: dict[tuple[str, str], int] = {}  # -> internal id
        self.project_created: dict[tuple[str, str], datetime] = {}
        self.views: dict[str, dict] = {}
        self.alerts: list[dict] = []
        self.uploads: dict[str, tuple[StoredRun, str]] = {}  # upload path -> (run, file name)
        self.parquet: dict[str, bytes] = {}  # download path -> parquet bytes
        self.mutations: list[tuple[str, dict]] = []  # (mutation, input) in arrival order

    # -- filling the store (tests) -------------------------------------------------------------
    def add_project(self, entity: str, project: str) -> int:
        """The project (created empty if new); its internal id."""
        with self.lock:
            if (entity, project) not in self.projects:
                self.projects[(entity, project)] = len(self.projects) + 1
                self.project_created[(entity, project)] = now()
            return self.projects[(entity, project)]

    def add_run(self, entity: str, project: str, name: str, *, display_name: str | None = None, **fields) -> StoredRun:
        with self.lock:
            self.add_project(entity, project)
            run = StoredRun(entity, project, name, display_name or name, **fields)
            self.runs[(entity, project, name)] = run
            return run

    def delete_run(self, entity: str, project: str, name: str) -> None:
        with self.lock:
            self.runs.pop((entity, project, name), None)

    def append_history(self, run: StoredRun, rows: list[dict]) -> None:
        with self.lock:
            run.history.extend(rows)
            run.heartbeat_at = run.updated_at = now()

    def touch(self, run: StoredRun, when: datetime | None = None) -> None:
        with self.lock:
            run.updated_at = when or now()

    def run(self, entity: str, project: str, name: str) -> StoredRun | None:
        with self.lock:
            return self.runs.get((entity, project, name))

    def _run_by_storage_id(self, storage_id: str) -> StoredRun | None:
        with self.lock:
            return next((r for r in self.runs.values() if r.storage_id == storage_id), None)

    # -- blobs ---------------------------------------------------------------------------------
    def download(self, path: str) -> bytes | None:
        with self.lock:
            return self.parquet.get(path)

    def upload(self, path: str, body: bytes) -> bool:
        with self.lock:
            target = self.uploads.get(path)
            if target is None:
                return False
            run, name = target
            run.files[name] = body
            return True

    # -- GraphQL -------------------------------------------------------------------------------
    def root(self) -> _Root:
        return _Root(self)

    def base_url(self) -> str:
        return self._server.url if self._server is not None else "http://127.0.0.1"


class _Root:
    def __init__(self, store: Store):
        self.s = store

    # queries
    def viewer(self, info):
        entity = self.s.viewer_entity
        return {"id": "VXNlcjox", "entity": entity, "username": entity, "email": f"{entity}@example.com",
                "name": entity, "flags": "{}", "teams": {"edges": [{"node": {"id": "RW50aXR5OjE=", "name": entity}}]}}

    def serverInfo(self, info):
        # Features wandb-core asks about; none of the optional ones, so it takes the plain paths.
        return {"features": []}

    def project(self, info, name=None, entityName=None):
        entity = entityName or self.s.viewer_entity
        with self.s.lock:
            if (entity, name) not in self.s.projects:
                return None
        return _Project(self.s, entity, name)

    def models(self, info, entityName=None, after=None, first=None):
        """The entity's projects, oldest first, as W&B pages them: an entity with none (or one that
        does not exist) is an empty connection, not an error. The cursor is opaque and names the
        last project of the page, so a page boundary holds while projects are added."""
        entity = entityName or self.s.viewer_entity
        with self.s.lock:
            ids = sorted((pid, name) for (e, name), pid in self.s.projects.items() if e == entity)
        start = 0
        if after:
            last = _cursor_id(after, "Project")
            start = next((i for i, (pid, _) in enumerate(ids) if pid > last), len(ids))
        size = 50 if first is None else first
        if size < 0:
            raise GraphQLNotFound(f"first must not be negative, got {first}")
        page = ids[start:start + size]
        return {"edges": [{"node": _Project(self.s, entity, name), "cursor": _cursor("Project", pid)}
                          for pid, name in page],
                "pageInfo": {"hasNextPage": start + len(page) < len(ids),
                             "endCursor": _cursor("Project", page[-1][0]) if page else None}}

    def entity(self, info, name=None):
        return {"id": "RW50aXR5OjE=", "name": name or self.s.viewer_entity}

    def view(self, info, id):
        view = self.s.views.get(id)
        return _View(self.s, view) if view else None

    # mutations
    def upsertBucket(self, info, input):
        with self.s.lock:
            self.s.mutations.append(("upsertBucket", dict(input)))
            run = self.s._run_by_storage_id(input.get("id") or "")
            if run is None:
                raise GraphQLNotFound(f"run {input.get('id')!r} not found")
            if "tags" in input and input["tags"] is not None:
                run.tags = list(input["tags"])
            if input.get("summaryMetrics") is not None:
                run.summary = json.loads(input["summaryMetrics"])
            if input.get("config") is not None:
                run.config = json.loads(input["config"])
            for key, attr in (("description", "description"), ("displayName", "display_name"),
                              ("notes", "notes"), ("groupName", "group"), ("jobType", "job_type")):
                if key in input and input[key] is not None:
                    setattr(run, attr, input[key])
            run.updated_at = now()
            return {"bucket": _Run(self.s, run), "inserted": False}

    def notifyScriptableRunAlert(self, info, input):
        with self.s.lock:
            self.s.mutations.append(("notifyScriptableRunAlert", dict(input)))
            run = self.s.run(input["entityName"], input["projectName"], input["runName"])
            if run is None:
                return {"success": False}
            self.s.alerts.append(dict(input))
            return {"success": True}

    def createRunFiles(self, info, input):
        with self.s.lock:
            self.s.mutations.append(("createRunFiles", dict(input)))
            run = self.s.run(input["entityName"], input["projectName"], input["runName"])
            if run is None:
                raise GraphQLNotFound(f"run {input['runName']!r} not found")
            files = []
            for name in input["files"]:
                path = f"/upload/{run.storage_id}/{name}"
                self.s.uploads[path] = (run, name)
                files.append({"name": name, "uploadUrl": self.s.base_url() + path})
            return {"runID": run.storage_id, "uploadHeaders": [], "files": files}

    def markRunFilesUploaded(self, info, input):
        return {"success": True}

    def upsertView(self, info, input):
        with self.s.lock:
            self.s.mutations.append(("upsertView", dict(input)))
            inserted = not input.get("id")
            if inserted:
                key = (input.get("entityName"), input.get("projectName"))
                if key not in self.s.projects:
                    raise GraphQLNotFound(f"project {key} not found")
                view_id = base64.b64encode(f"View:{len(self.s.views) + 1}".encode()).decode()
                view = {"id": view_id, "createdAt": iso(now()), "entityName": key[0], "projectName": key[1]}
                self.s.views[view_id] = view
            else:
                view = self.s.views.get(input["id"])
                if view is None:
                    raise GraphQLNotFound(f"view {input['id']!r} not found")
            for key in ("name", "displayName", "description", "type", "spec"):
                if input.get(key) is not None:
                    view[key] = input[key]
            view["updatedAt"] = iso(now())
            return {"view": _View(self.s, view), "inserted": inserted}


class GraphQLNotFound(Exception):
    """Answered as a GraphQL error, as W&B does for a missing object (not a contract violation)."""


class _View:
    def __init__(self, store: Store, view: dict):
        self.s, self.v = store, view
        for key in ("id", "type", "name", "displayName", "description", "spec", "createdAt", "updatedAt"):
            setattr(self, key, view.get(key))

    @property
    def project(self):
        return _Project(self.s, self.v["entityName"], self.v["projectName"])

    @property
    def user(self):
        entity = self.s.viewer_entity
        return {"id": "VXNlcjox", "username": entity, "email": f"{entity}@example.com", "photoUrl": None}


def _cursor(kind: str, internal_id: int) -> str:
    return base64.b64encode(f"{kind}Cursor:{internal_id}".encode()).decode()


def _cursor_id(cursor: str, kind: str) -> int:
    try:
        label, _, number = base64.b64decode(cursor, validate=True).decode().partition(":")
        if label == f"{kind}Cursor":
            return int(number)
    except ValueError:
        pass
    raise GraphQLNotFound(f"invalid cursor {cursor!r}")


class _Project:
    def __init__(self, store: Store, entity: str, name: str):
        self.s, self.entityName, self.name = store, entity, name
        self.readOnly = False
        self.isBenchmark = False
        self.internalId = str(store.projects[(entity, name)])
        self.id = base64.b64encode(f"Project:{self.internalId}".encode()).decode()
        self.createdAt = iso(store.project_created.get((entity, name)) or now())

    @property
    def user(self):
        # The project's creator: the viewer (the store has one user). W&B shows no one else's keys.
        entity = self.s.viewer_entity
        return {"id": "VXNlcjox", "name": entity, "username": entity, "email": f"{entity}@example.com",
                "admin": False, "flags": "{}", "entity": entity, "deletedAt": None, "apiKeys": {"edges": []},
                "teams": {"edges": [{"node": {"id": "RW50aXR5OjE=", "name": entity}}]}}

    def _runs(self, filters: str | None, order: str | None) -> list[StoredRun]:
        spec = json.loads(filters) if filters else {}
        with self.s.lock:
            runs = [r for r in self.s.runs.values() if (r.entity, r.project) == (self.entityName, self.name)]
        runs = [r for r in runs if matches(r, spec)]
        return sort_runs(runs, order or "+created_at")

    def runCount(self, info, filters=None):
        return len(self._runs(filters, None))

    def runs(self, info, filters=None, order=None, first=None, after=None):
        runs = self._runs(filters, order)
        start = int(after) if after else 0
        page = runs[start:start + (first or 50)]
        return {"edges": [{"node": _Run(self.s, r), "cursor": str(start + i + 1)} for i, r in enumerate(page)],
                "pageInfo": {"hasNextPage": start + len(page) < len(runs),
                             "endCursor": str(start + len(page)) if page else None},
                "totalCount": len(runs)}

    def allViews(self, info, viewType="runs", viewName=None, first=None, after=None):
        with self.s.lock:
            views = [v for v in self.s.views.values()
                     if (v["entityName"], v["projectName"]) == (self.entityName, self.name)
                     and v.get("type") == viewType and (viewName is None or v.get("name") == viewName)]
        start = int(after) if after else 0
        page = views[start:start + (first or 50)]
        return {"edges": [{"node": _View(self.s, v), "cursor": str(start + i + 1)} for i, v in enumerate(page)],
                "pageInfo": {"hasNextPage": start + len(page) < len(views),
                             "endCursor": str(start + len(page)) if page else None}}

    def run(self, info, name):
        found = self.s.run(self.entityName, self.name, name)
        return _Run(self.s, found) if found else None


def _dumps(value) -> str:
    return json.dumps(value)  # NaN/Infinity as bare tokens, as W&B's history lines have them


class _Run:
    def __init__(self, store: Store, run: StoredRun):
        self.s, self.r = store, run
        self.id = run.storage_id
        self.name = run.name
        self.displayName = run.display_name
        self.sweepName = None
        self.state = run.state
        self.group = run.group
        self.jobType = run.job_type
        self.commit = None
        self.readOnly = False
        self.createdAt = iso(run.created_at)
        self.heartbeatAt = iso(run.heartbeat_at)
        self.updatedAt = iso(run.updated_at)
        self.description = run.description
        self.notes = run.notes
        self.tags = list(run.tags)
        self.historyLineCount = len(run.history)
        self.projectId = store.projects[(run.entity, run.project)]
        self.user = {"id": "VXNlcjox", "name": store.viewer_entity, "username": store.viewer_entity}

    @property
    def config(self):
        return _dumps(self.r.config)

    @property
    def summaryMetrics(self):
        return _dumps(self.r.summary)

    @property
    def systemMetrics(self):
        return _dumps(self.r.events[-1] if self.r.events else {})

    @property
    def project(self):
        return _Project(self.s, self.r.entity, self.r.project)

    @property
    def fileCount(self):
        return len(self.r.files)

    def files(self, info, names=None, after=None, first=None, pattern=None):
        with self.s.lock:
            items = sorted(self.r.files.items())
        if names:
            items = [(n, b) for n, b in items if n in names]
        elif pattern:
            regex = re.compile("^" + re.escape(pattern).replace("%", ".*").replace("_", ".") + "$")
            items = [(n, b) for n, b in items if regex.match(n)]
        start = int(after) if after else 0
        page = items[start:start + (first or 50)]
        base = self.s.base_url()
        edges = [{"node": {"id": base64.b64encode(f"File:{self.r.storage_id}:{n}".encode()).decode(), "name": n,
                           "url": lambda info, upload=False, n=n: f"{base}/files/{self.r.storage_id}/{n}",
                           "directUrl": f"{base}/files/{self.r.storage_id}/{n}", "sizeBytes": len(b),
                           "mimetype": "text/html" if n.endswith(".html") else "application/octet-stream",
                           "updatedAt": self.updatedAt, "md5": base64.b64encode(hashlib.md5(b).digest()).decode()},
                  "cursor": str(start + i + 1)} for i, (n, b) in enumerate(page)]
        return {"edges": edges, "pageInfo": {"hasNextPage": start + len(page) < len(items),
                                             "endCursor": str(start + len(page)) if page else None}}

    def historyKeys(self, info, format=None):
        return self.r.history_keys()

    def history(self, info, samples=None, minStep=None, maxStep=None):
        rows = self.r.history
        if minStep is not None or maxStep is not None:
            # A paged read (wandb-core's HistoryPage) sees only the rows not yet exported to parquet:
            # the SDK reads the export first, then asks for the whole step range here.
            rows = rows[self.r.exported_count():]
            lo = -math.inf if minStep is None else int(minStep)
            hi = math.inf if maxStep is None else int(maxStep)
            rows = [row for row in rows if lo <= row["_step"] < hi]
            rows = rows[: samples or len(rows)]
        else:
            rows = _sample(rows, samples or 500)
        return [_dumps(row) for row in rows]

    def events(self, info, samples=None):
        return [_dumps(row) for row in _sample(self.r.events, samples or 500)]

    def sampledHistory(self, info, specs):
        out = []
        for text in specs:
            spec = json.loads(text)
            keys = spec.get("keys") or []
            rows = [{k: row[k] for k in keys if k in row} for row in self.r.history
                    if any(k in row for k in keys[1:])]
            out.append(_sample(rows, int(spec.get("samples") or 500)))
        return out

    def parquetHistory(self, info, liveKeys):
        run = self.r
        n = run.exported_count()
        urls = []
        if n:
            path = f"/parquet/{run.storage_id}/{n}.parquet"
            with self.s.lock:
                if path not in self.s.parquet:
                    self.s.parquet[path] = _parquet(run.history[:n])
            urls.append(self.s.base_url() + path)
        live = [row for row in run.history[n:]]
        if liveKeys:
            wanted = set(liveKeys) | {"_step"}
            live = [{k: v for k, v in row.items() if k in wanted} for row in live]
        return {"parquetUrls": urls, "liveData": live}


def _sample(rows: list, samples: int) -> list:
    if len(rows) <= samples:
        return list(rows)
    stride = len(rows) / samples
    return [rows[int(i * stride)] for i in range(samples)]


def _parquet(rows: list[dict]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys = sorted({k for row in rows for k in row})
    columns = {}
    for key in keys:
        values = [row.get(key) for row in rows]
        if key == "_step":
            columns[key] = pa.array(values, type=pa.int64())
        else:
            columns[key] = pa.array([None if v is None else float(v) for v in values], type=pa.float64())
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer)
    return buffer.getvalue()


# -- run filters (W&B's MongoDB-style filter language, the part the tests use) ---------------------
_FIELDS = {"state": "state", "tags": "tags", "displayName": "display_name", "display_name": "display_name",
           "name": "name", "group": "group", "jobType": "job_type", "createdAt": "created_at",
           "created_at": "created_at", "updatedAt": "updated_at", "updated_at": "updated_at",
           "heartbeatAt": "heartbeat_at", "heartbeat_at": "heartbeat_at"}
_TIMES = {"created_at", "updated_at", "heartbeat_at"}


def _value(run: StoredRun, path: str):
    if path in _FIELDS:
        return getattr(run, _FIELDS[path])
    head, _, rest = path.partition(".")
    if head == "config" and rest:
        key, _, tail = rest.partition(".")
        value = run.config.get(key)
        if isinstance(value, dict) and "value" in value and tail in ("value", ""):
            return value["value"]
        return value
    if head in ("summary_metrics", "summaryMetrics") and rest:
        return run.summary.get(rest)
    raise StoreError(f"unknown run filter field {path!r}")


def _compare(op: str, actual, expected) -> bool:
    if isinstance(actual, datetime):
        expected = _parse_time(expected) if isinstance(expected, str) else expected
    if isinstance(actual, list) and op in ("$eq", "$ne", "$in", "$nin"):  # tags: any element
        hit = any(_compare("$in" if op in ("$in", "$nin") else "$eq", a, expected) for a in actual)
        return hit if op in ("$eq", "$in") else not hit
    if op == "$eq":
        return actual == expected
    if op == "$ne":
        return actual != expected
    if op == "$in":
        return actual in expected
    if op == "$nin":
        return actual not in expected
    if op == "$regex":
        return actual is not None and re.search(expected, str(actual)) is not None
    if op == "$exists":
        return (actual is not None) == bool(expected)
    if actual is None:
        return False
    if op == "$gt":
        return actual > expected
    if op == "$gte":
        return actual >= expected
    if op == "$lt":
        return actual < expected
    if op == "$lte":
        return actual <= expected
    raise StoreError(f"unknown run filter operator {op!r}")


def matches(run: StoredRun, spec: dict) -> bool:
    for key, cond in spec.items():
        if key == "$and":
            if not all(matches(run, s) for s in cond):
                return False
        elif key == "$or":
            if not any(matches(run, s) for s in cond):
                return False
        elif key.startswith("$"):
            raise StoreError(f"unknown run filter operator {key!r}")
        else:
            actual = _value(run, key)
            ops = cond if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond) else {"$eq": cond}
            if not all(_compare(op, actual, expected) for op, expected in ops.items()):
                return False
    return True


def sort_runs(runs: list[StoredRun], order: str) -> list[StoredRun]:
    desc = order.startswith("-")
    key = order.lstrip("+-")
    if key not in _FIELDS and not key.startswith(("config.", "summary_metrics.")):
        raise StoreError(f"unknown run order {order!r}")

    def sort_key(run):
        value = _value(run, key)
        return (value is None, value if value is not None else 0)

    return sorted(runs, key=sort_key, reverse=desc)


__all__ = ["GraphQLNotFound", "Store", "StoreError", "StoredRun", "iso", "now", "timedelta"]
