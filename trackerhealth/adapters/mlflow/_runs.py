"""Which runs a scan looks at: experiments by name or id, MLflow filters, run ids, ``--since``.

MLflow's run search has no ``last_update_time`` and no ``OR``, so "changed since T" is the union of
three searches that do work: ``attributes.start_time >= T`` (new runs), ``attributes.end_time >= T``
(runs that ended since) and ``attributes.status = 'RUNNING'`` (still logging — and runs that crashed
without ending stay RUNNING forever, so they are always looked at; the history cache makes that
cheap). Each search is paginated; runs are de-duplicated by id.

Two listers with one output: over REST for servers, through ``MlflowClient`` for databases and file
stores. Both yield the REST JSON shape of a run (``Run.to_proto()`` renders the same), parsed once
by :func:`parse_run`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ...schema import RunRef
from ._errors import ApiError, MalformedAnswer, SelectionError

PAGE = 1000
_FILTER_HELP = ("see https://mlflow.org/docs/latest/ml/search/search-runs/ — MLflow rejects OR and "
                "last_update_time; use --since for \"changed recently\"")


@dataclass
class MlflowRun:
    """One listed run: its RunRef plus what the cache and the writer need from the listing."""

    ref: RunRef
    experiment_id: str
    status: str
    start_time: int | None
    end_time: int | None
    lifecycle_stage: str
    tags: dict[str, str] = field(default_factory=dict)
    # key -> (last step, timestamp of that point), in first-logged order (MLflow's latest_metrics)
    latest: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.ref.id


def _entries(data: dict, name: str) -> list[dict]:
    """A run document's tags/params/metrics; entries without a key are not data we can use."""
    items = data.get(name, [])
    if not isinstance(items, list):
        raise MalformedAnswer(f"the server's run document has {name!r} = {str(items)[:80]!r}, not a list")
    return [e for e in items if isinstance(e, dict) and isinstance(e.get("key"), str)]


def _int(value, what: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise MalformedAnswer(f"the server's run document has {what} = {str(value)[:40]!r}, not a number") from None


def parse_run(doc: dict, experiment_names: dict[str, str], ui_base: str | None) -> MlflowRun:
    """One run document (REST JSON); raises MalformedAnswer when it is not one."""
    info = doc.get("info") if isinstance(doc, dict) else None
    data = doc.get("data", {}) if isinstance(doc, dict) else None
    if not isinstance(info, dict) or not isinstance(data, dict):
        raise MalformedAnswer(f"a run document without 'info' and 'data' objects: {str(doc)[:120]!r}")
    run_id = info.get("run_id") or info.get("run_uuid")
    if not isinstance(run_id, str) or not run_id:
        raise MalformedAnswer(f"a run document without a run id: {str(info)[:120]!r}")
    exp_id = str(info.get("experiment_id", ""))
    tags = {t["key"]: str(t.get("value", "")) for t in _entries(data, "tags")}
    params = {p["key"]: str(p.get("value", "")) for p in _entries(data, "params")}
    latest = {m["key"]: (_int(m.get("step", 0), "a metric step") or 0, _int(m.get("timestamp", 0), "a timestamp") or 0)
              for m in _entries(data, "metrics")}
    start, end = _int(info.get("start_time"), "start_time"), _int(info.get("end_time"), "end_time")
    status = info.get("status", "")
    url = f"{ui_base}/#/experiments/{exp_id}/runs/{run_id}" if ui_base else None
    ref = RunRef(
        tracker="mlflow",
        project=experiment_names.get(exp_id, exp_id),
        id=run_id,
        name=info.get("run_name") or tags.get("mlflow.runName") or run_id,
        state=status.lower() or None,
        updated_at=(end or start or 0) / 1000 or None,
        url=url,
        config=params,
        tags=tuple(f"{k}={v}" for k, v in tags.items() if not k.startswith(("mlflow.", "trackerhealth."))),
    )
    return MlflowRun(ref, exp_id, status, start, end, info.get("lifecycle_stage", "active"), tags, latest)


def since_filters(base: str | None, since_ms: int | None) -> list[str]:
    """The filter strings whose union is "matches ``base`` and changed since ``since_ms``"."""
    base = (base or "").strip()
    if since_ms is None:
        return [base]
    clauses = [f"attributes.start_time >= {since_ms}", f"attributes.end_time >= {since_ms}",
               "attributes.status = 'RUNNING'"]
    return [f"{base} AND {c}" if base else c for c in clauses]


class RestLister:
    """Listing over the server's REST API."""

    def __init__(self, rest):
        self.rest = rest

    def experiment(self, ident: str) -> tuple[str, str] | None:
        if ident.isdigit():
            try:
                body = self.rest.get("/api/2.0/mlflow/experiments/get", {"experiment_id": ident},
                                     what=f"getting experiment {ident}")
                return _experiment(body, f"getting experiment {ident}")
            except ApiError as exc:
                if not exc.not_found:
                    raise
        try:
            body = self.rest.get("/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": ident},
                                 what=f"getting experiment {ident!r}")
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return _experiment(body, f"getting experiment {ident!r}")

    def experiment_names(self, limit: int = 50) -> list[str]:
        body = self.rest.post("/api/2.0/mlflow/experiments/search", {"max_results": limit}, what="listing experiments")
        return [e["name"] for e in body.get("experiments", []) if isinstance(e, dict) and "name" in e]

    def experiment_ids(self) -> list[str]:
        """Every active experiment's id (all pages)."""
        ids, token = [], None
        while True:
            req = {"max_results": PAGE, "view_type": "ACTIVE_ONLY", **({"page_token": token} if token else {})}
            body = self.rest.post("/api/2.0/mlflow/experiments/search", req, what="listing experiments")
            ids += [str(e["experiment_id"]) for e in body.get("experiments", []) if isinstance(e, dict)
                    and "experiment_id" in e]
            token = body.get("next_page_token")
            if not token:
                return ids

    def search(self, experiment_ids: list[str], filter_string: str) -> Iterator[dict]:
        token = None
        while True:
            body = {"experiment_ids": experiment_ids, "filter": filter_string, "max_results": PAGE,
                    "run_view_type": "ACTIVE_ONLY", "order_by": ["attributes.start_time DESC"]}
            if token:
                body["page_token"] = token
            page = self.rest.post("/api/2.0/mlflow/runs/search", body, what="searching runs")
            if not isinstance(page, dict) or not isinstance(page.get("runs", []), list):
                raise MalformedAnswer(f"searching runs answered {str(page)[:120]!r}, not MLflow's {{\"runs\": [...]}}")
            yield from page.get("runs", [])
            token = page.get("next_page_token")
            if not token:
                return

    def get_run(self, run_id: str) -> dict | None:
        try:
            body = self.rest.get("/api/2.0/mlflow/runs/get", {"run_id": run_id}, what=f"getting run {run_id}")
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        if not isinstance(body, dict) or not isinstance(body.get("run"), dict):
            raise MalformedAnswer(f"getting run {run_id} answered {str(body)[:120]!r}, without a 'run' object")
        return body["run"]


def _experiment(body, what: str) -> tuple[str, str]:
    exp = body.get("experiment") if isinstance(body, dict) else None
    if not isinstance(exp, dict) or "experiment_id" not in exp or "name" not in exp:
        raise MalformedAnswer(f"{what} answered {str(body)[:120]!r}, without MLflow's experiment object")
    return str(exp["experiment_id"]), str(exp["name"])


class ClientLister:
    """Listing through MlflowClient, for database URIs and file stores."""

    def __init__(self, client):
        from mlflow.exceptions import MlflowException
        from mlflow.utils.proto_json_utils import message_to_json

        self.client = client
        self._exc = MlflowException
        self._to_json = message_to_json

    def _wrap(self, exc, what: str) -> ApiError:
        return ApiError(0, getattr(exc, "error_code", ""), getattr(exc, "message", str(exc)), what)

    def _doc(self, run) -> dict:
        return json.loads(self._to_json(run.to_proto()))

    def experiment(self, ident: str) -> tuple[str, str] | None:
        found = None
        if ident.isdigit():
            try:
                found = self.client.get_experiment(ident)
            except self._exc:
                found = None
        if found is None:
            try:
                found = self.client.get_experiment_by_name(ident)
            except self._exc as exc:
                raise self._wrap(exc, f"getting experiment {ident!r}") from None
        return (str(found.experiment_id), found.name) if found is not None else None

    def experiment_names(self, limit: int = 50) -> list[str]:
        return [e.name for e in self.client.search_experiments(max_results=limit)]

    def experiment_ids(self) -> list[str]:
        """Every active experiment's id (all pages)."""
        ids, token = [], None
        while True:
            try:
                page = self.client.search_experiments(max_results=PAGE, page_token=token)
            except self._exc as exc:
                raise self._wrap(exc, "listing experiments") from None
            ids += [str(e.experiment_id) for e in page]
            token = page.token
            if not token:
                return ids

    def search(self, experiment_ids: list[str], filter_string: str) -> Iterator[dict]:
        token = None
        while True:
            try:
                page = self.client.search_runs(experiment_ids, filter_string=filter_string, max_results=PAGE,
                                               order_by=["attributes.start_time DESC"], page_token=token)
            except self._exc as exc:
                raise self._wrap(exc, "searching runs") from None
            for run in page:
                yield self._doc(run)
            token = page.token
            if not token:
                return

    def get_run(self, run_id: str) -> dict | None:
        try:
            return self._doc(self.client.get_run(run_id))
        except self._exc as exc:
            if getattr(exc, "error_code", "") == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise self._wrap(exc, f"getting run {run_id}") from None


def select_runs(lister, experiments: Iterable[str] = (), filter_string: str | None = None,
                run_ids: Iterable[str] = (), since_ms: int | None = None,
                ui_base: str | None = None) -> list[MlflowRun]:
    """The runs to scan, newest first; raises SelectionError when the selection itself is wrong."""
    experiments, run_ids = list(experiments), list(run_ids)
    if not experiments and not run_ids:
        raise SelectionError("say which runs to scan: --experiment NAME_OR_ID (repeatable) or --run RUN_ID; "
                             f"experiments here: {_known(lister)}")
    names: dict[str, str] = {}
    for ident in experiments:
        found = lister.experiment(ident)
        if found is None:
            raise SelectionError(f"no experiment named or numbered {ident!r}; experiments here: {_known(lister)}")
        names[found[0]] = found[1]
    runs: dict[str, MlflowRun] = {}
    if names:
        for flt in since_filters(filter_string, since_ms):
            try:
                for doc in lister.search(list(names), flt):
                    run = parse_run(doc, names, ui_base)
                    runs.setdefault(run.id, run)
            except ApiError as exc:
                if exc.error_code == "INVALID_PARAMETER_VALUE" or exc.status == 400:
                    raise SelectionError(f"MLflow rejected the filter {flt!r}: {exc.message}; {_FILTER_HELP}") from None
                raise
    for run_id in run_ids:
        if run_id in runs:
            continue
        doc = lister.get_run(run_id)
        if doc is None:
            raise SelectionError(f"no run with id {run_id!r}: check --run (the 32-character id shown on the run page)")
        exp_id = str(doc.get("info", {}).get("experiment_id", ""))
        if exp_id not in names:
            found = lister.experiment(exp_id)
            if found:
                names[found[0]] = found[1]
        runs[run_id] = parse_run(doc, names, ui_base)
    ordered = sorted(runs.values(), key=lambda r: -(r.start_time or 0))
    return ordered


def _known(lister) -> str:
    try:
        names = lister.experiment_names()
    except Exception:  # noqa: BLE001 - only decorates an error message
        return "(could not list them)"
    shown = ", ".join(repr(n) for n in names[:20])
    return (shown + (", …" if len(names) > 20 else "")) or "(none)"
