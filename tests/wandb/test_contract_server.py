"""The contract server is strict: what the recorded SDK never sends is an error and a violation."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest

pytest.importorskip("graphql")

from contract.server import ContractServer  # noqa: E402


def post(server, path: str, body: dict, key: str | None = None) -> tuple[int, dict]:
    auth = base64.b64encode(f"api:{key or server.API_KEY}".encode()).decode()
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Basic {auth}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


@pytest.fixture
def server():
    with ContractServer() as s:
        s.store.add_run("e", "p", "r1", history=[{"_step": 0, "loss": 1.0}])
        yield s


def test_a_field_the_sdk_never_asks_for_is_an_error_and_a_violation(server):
    status, doc = post(server, "/graphql", {"query": "query Run($n: String!) { project(name: \"p\", entityName: \"e\") "
                                                     "{ run(name: $n) { name secretField } } }", "variables": {"n": "r1"}})
    assert status == 400 and "secretField" in doc["errors"][0]["message"]
    assert any("secretField" in v for v in server.violations)


def test_a_valid_query_that_was_never_recorded_is_a_violation_but_answered(server):
    status, doc = post(server, "/graphql", {"query": "query Odd { project(name: \"p\", entityName: \"e\") { run(name: \"r1\") "
                                                     "{ name state } } }"})
    assert status == 200 and doc["data"]["project"]["run"] == {"name": "r1", "state": "finished"}
    assert any("never recorded" in v for v in server.violations)


def test_unknown_endpoints_filters_and_keys(server):
    assert post(server, "/api/v1/anything", {})[0] == 404
    assert post(server, "/sdk/otel/v1/metrics", {})[0] == 404  # the SDK's telemetry: fine, not a violation
    assert len(server.violations) == 1 and "unknown endpoint" in server.violations[0]
    server.violations.clear()
    query = ("query Runs($f: JSONString) { project(name: \"p\", entityName: \"e\") "
             "{ runs(filters: $f) { edges { node { name } } } } }")
    post(server, "/graphql", {"query": query, "variables": {"f": json.dumps({"state": {"$like": "fin%"}})}})
    assert any("$like" in v for v in server.violations)
    assert post(server, "/graphql", {"query": "query Viewer { viewer { id } }"}, key="x" * 40)[0] == 401


def get_projects(server, entity: str, cursor: str | None = None, per_page: int = 2) -> tuple[int, dict]:
    """The SDK's own ``GetProjects`` (``Api().projects``), paged ``per_page`` at a time."""
    from wandb.apis._generated import GET_PROJECTS_GQL

    return post(server, "/graphql", {"query": GET_PROJECTS_GQL, "operationName": "GetProjects",
                                     "variables": {"entity": entity, "cursor": cursor, "perPage": per_page}})


def test_models_pages_an_entitys_projects_by_cursor(server):
    pytest.importorskip("wandb.apis._generated")
    for name in ("p2", "p3", "p4"):
        server.store.add_run("e", name, "r1")
    server.store.add_run("other", "x", "r1")
    names, cursor, pages = [], None, 0
    while True:
        status, doc = get_projects(server, "e", cursor)
        assert status == 200 and "errors" not in doc, doc
        conn = doc["data"]["models"]
        page = [edge["node"] for edge in conn["edges"]]
        assert len(page) <= 2 and all(n["entityName"] == "e" and n["__typename"] == "Project" for n in page)
        assert all(n["createdAt"] and n["isBenchmark"] is False and n["user"]["apiKeys"] == {"edges": []}
                   for n in page)
        names += [n["name"] for n in page]
        pages += 1
        if not conn["pageInfo"]["hasNextPage"]:
            break
        cursor = conn["pageInfo"]["endCursor"]
        if pages == 1:
            server.store.add_run("e", "p5", "r1")  # a project added between pages is not lost or repeated
    assert names == ["p", "p2", "p3", "p4", "p5"] and pages == 3
    assert not server.violations, server.violations


def test_models_of_an_entity_without_projects_is_an_empty_connection(server):
    pytest.importorskip("wandb.apis._generated")
    status, doc = get_projects(server, "nobody")
    assert status == 200 and doc["data"]["models"] == {"pageInfo": {"__typename": "PageInfo", "endCursor": None,
                                                                    "hasNextPage": False}, "edges": []}
    status, doc = get_projects(server, "e", cursor="bm90LWEtY3Vyc29y")
    assert "invalid cursor" in doc["errors"][0]["message"]
    assert not server.violations, server.violations
