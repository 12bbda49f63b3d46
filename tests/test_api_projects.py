"""/api/v1/projects: the project a caller acts in, and new projects made by an operator's
all-projects admin key (conversations/api_projects.py)."""

import pytest
from django.test import Client

from conversations import api_keys
from conversations.models import AuditEvent, Project
from tests.api_support import Api, error_of
from tests.helpers import make_person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


def api_of(project=None, scopes=("admin",), **kwargs) -> Api:
    _, secret = api_keys.create_api_key(name="k", scopes=list(scopes), project=project, **kwargs)
    return Api(Client(), secret)


def slugs(answer) -> list[str]:
    assert answer.status_code == 200, answer.content
    return [p["slug"] for p in answer.json()["items"]]


@pytest.mark.parametrize("scopes", [("read",), ("write",), ("facts:read",), ("facts:write",), ("admin",)])
def test_any_key_of_one_project_lists_that_project_alone(two_projects, scopes):
    alpha, _ = two_projects
    alpha.retention_days = 30
    alpha.save()
    answer = api_of(alpha, scopes).get("/projects")
    assert slugs(answer) == ["alpha"]
    only = answer.json()["items"][0]
    assert only["name"] == "Alpha" and only["retention_days"] == 30 and only["kept_days"] == 30
    assert answer.json()["next"] is None


def test_an_all_projects_key_lists_every_project_or_the_one_it_names(two_projects):
    operator = api_of(None, ("read",), all_projects=True)
    assert slugs(operator.get("/projects")) == ["default", "alpha", "beta"]
    assert slugs(operator.get("/projects", headers={"X-Memoryui-Project": "beta"})) == ["beta"]
    default = operator.get("/projects").json()["items"][0]
    assert default["retention_days"] is None and default["kept_days"] == 90


def test_a_signed_in_person_lists_the_projects_they_belong_to(two_projects):
    alpha, beta = two_projects
    client = Client()
    client.force_login(make_person("ann", {alpha: "auditor", beta: "reviewer"}))
    assert slugs(Api(client, None).get("/projects")) == ["alpha", "beta"]


def test_a_caller_without_a_key_is_refused(client, two_projects):
    assert Api(client, None).get("/projects").status_code == 401
    assert Api(client, "mui_nope_nope").get("/projects").status_code == 401


def test_an_all_projects_admin_key_creates_a_project(two_projects):
    operator = api_of(None, ("admin",), all_projects=True)
    answer = operator.post("/projects", {"slug": "support", "name": "Support bots", "retention_days": 30})
    assert answer.status_code == 201, answer.content
    made = answer.json()
    assert made["slug"] == "support" and made["retention_days"] == 30
    project = Project.objects.get(slug="support")
    event = AuditEvent.everywhere.get(action="project.created", target_id=str(project.pk))
    assert event.project_id is None and event.actor == "key:k"
    # A key made for it then acts there.
    key = operator.post("/keys", {"name": "bot", "scopes": ["read", "write"]},
                        headers={"X-Memoryui-Project": "support"})
    assert key.json()["project"] == "support"
    assert slugs(Api(Client(), key.json()["secret"]).get("/projects")) == ["support"]


def test_named_inside_a_project_the_creation_goes_through_an_audited_bypass(two_projects):
    operator = api_of(None, ("admin",), all_projects=True)
    answer = operator.post("/projects", {"slug": "coding"}, headers={"X-Memoryui-Project": "alpha"})
    assert answer.status_code == 201 and answer.json()["name"] == "coding"
    assert AuditEvent.everywhere.get(action="scope.bypass").project_id == two_projects[0].pk


@pytest.mark.parametrize("caller", ["project-admin", "operator-reader", "superuser-session"])
def test_no_one_else_creates_a_project(two_projects, caller):
    alpha, _ = two_projects
    if caller == "superuser-session":
        client = Client()
        client.force_login(make_person("root", {}, superuser=True))
        api = Api(client, None)
    else:
        api = api_of(alpha, ("admin",)) if caller == "project-admin" else api_of(None, ("read",), all_projects=True)
    answer = api.post("/projects", {"slug": "mine"})
    assert answer.status_code == 403
    assert not Project.objects.filter(slug="mine").exists()


@pytest.mark.parametrize("body, status, field", [
    ({}, 422, "slug"),
    ({"slug": "Bad Slug"}, 422, "slug"),
    ({"slug": "api"}, 422, "slug"),
    ({"slug": 7}, 422, "slug"),
    ({"slug": "x" * 65}, 422, "slug"),
    ({"slug": "ok", "retention_days": 0}, 422, "retention_days"),
    ({"slug": "ok", "retention_days": "30"}, 422, "retention_days"),
    ({"slug": "ok", "retention_days": 10**9}, 422, "retention_days"),
    ({"slug": "ok", "name": "x" * 201}, 422, "name"),
    ({"slug": "ok", "owner": "me"}, 422, "owner"),
    ({"slug": "alpha"}, 409, "slug"),
])
def test_it_refuses_bad_input_naming_the_field(two_projects, body, status, field):
    operator = api_of(None, ("admin",), all_projects=True)
    answer = operator.post("/projects", body)
    assert answer.status_code == status, answer.content
    assert error_of(answer)["field"] == field
    assert Project.objects.count() == 3
