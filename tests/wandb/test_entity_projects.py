"""``scan --entity ENTITY`` starts from the entity's projects: ``list_projects`` through the real
``wandb`` SDK (``Api().projects``, its ``GetProjects`` query) against the strict contract server."""

from __future__ import annotations

import pytest

pytest.importorskip("graphql", reason="the test extra (graphql-core) is not installed")
pytest.importorskip("wandb.apis.public", reason="the wandb extra is not installed")

from trackerhealth.adapters.base import SelectionError, TrackerUnreachable  # noqa: E402
from trackerhealth.adapters.wandb._projects import list_projects  # noqa: E402

ROWS = [{"_step": 0, "loss": 1.0}, {"_step": 1, "loss": 0.5}]


def test_lists_exactly_the_entitys_projects_sorted(wandb_env):
    store = wandb_env.store
    for project in ("vision", "llm-pretrain", "audio"):
        store.add_run("projects-team", project, "r1", history=ROWS)
    store.add_run("projects-team", "llm-pretrain", "r2", history=ROWS)  # a second run: one project still
    store.add_run("projects-other", "elsewhere", "r1", history=ROWS)
    assert list_projects("projects-team") == ["audio", "llm-pretrain", "vision"]
    assert list_projects("projects-other") == ["elsewhere"]


def test_an_empty_project_is_listed_too(wandb_env):
    wandb_env.store.add_project("projects-empty-one", "nothing-logged-yet")
    assert list_projects("projects-empty-one") == ["nothing-logged-yet"]


def test_more_projects_than_one_page_are_all_listed(wandb_env):
    """The SDK asks for 200 projects a page (``Api.projects``' per_page): 250 take two requests,
    the second one after the first page's cursor."""
    names = [f"p{i:03d}" for i in range(250)]
    for name in reversed(names):
        wandb_env.store.add_run("projects-many", name, "r1", history=ROWS)
    wandb_env.store.add_run("projects-many-other", "not-mine", "r1", history=ROWS)
    before = wandb_env.count("GetProjects")
    assert list_projects("projects-many") == names
    assert wandb_env.count("GetProjects") - before == 2


def test_an_entity_with_no_projects_gives_an_empty_list(wandb_env):
    # W&B answers an empty connection for an entity with no projects (or one it does not know).
    assert list_projects("projects-nobody") == []


def test_a_rejected_key_is_a_selection_error(wandb_env, monkeypatch):
    wandb_env.store.add_run("projects-keyed", "p", "r1", history=ROWS)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    with pytest.raises(SelectionError, match="did not accept the API key"):
        list_projects("projects-keyed")


def test_a_refused_listing_is_a_selection_error(wandb_env):
    wandb_env.fail("GetProjects", status=403)
    with pytest.raises(SelectionError, match="W&B entity projects-hidden .*HTTP 403"):
        list_projects("projects-hidden")


def test_a_project_path_is_not_an_entity(wandb_env):
    with pytest.raises(SelectionError, match="expected a user or team name"):
        list_projects("team/project")


def test_a_listing_that_never_answers_is_unreachable(wandb_env):
    wandb_env.fail("GetProjects", status=503, times=1000)
    with pytest.raises(TrackerUnreachable, match="project listing for projects-busy"):
        list_projects("projects-busy", timeout=2)


def test_a_stopped_server_is_unreachable_and_names_wandb_base_url(monkeypatch):
    from contract.server import ContractServer

    server = ContractServer().start()
    server.stop()
    monkeypatch.setenv("WANDB_API_KEY", ContractServer.API_KEY)
    with pytest.raises(TrackerUnreachable, match="WANDB_BASE_URL") as err:
        list_projects("projects-team", base_url=server.url, timeout=5)
    assert server.url in str(err.value)
