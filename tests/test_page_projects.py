"""The superusers' page of every project at /admin/projects/ (conversations/views_members.py)."""

import pytest

from conversations.models import AuditEvent, Project
from tests.helpers import make_person

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(client):
    person = make_person("root", {}, superuser=True)
    client.force_login(person)
    return person


def test_it_requires_login(client):
    response = client.get("/admin/projects/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_it_is_forbidden_to_a_project_admin(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "admin"}))
    assert client.get("/p/alpha/admin/projects/").status_code == 403
    assert client.post("/p/alpha/admin/projects/create", {"slug": "mine"}).status_code == 403
    assert not Project.objects.filter(slug="mine").exists()
    assert "admin/projects/" not in client.get("/p/alpha/admin/").content.decode()


def test_it_lists_every_project_with_its_address_members_and_retention(client, two_projects, root):
    alpha, beta = two_projects
    make_person("ann", {alpha: "admin", beta: "auditor"})
    make_person("bob", {alpha: "auditor"})
    alpha.retention_days = 30
    alpha.save()
    html = client.get("/admin/projects/").content.decode()
    row = html.split('id="project-alpha"', 1)[1].split("</tr>", 1)[0]
    assert '<a href="/p/alpha/">Alpha</a>' in row and '<td class="num" data-label="Members">2</td>' in row
    assert "30 days" in row
    default = html.split('id="project-default"', 1)[1].split("</tr>", 1)[0]
    assert '<a href="/">' in default and "(the server's default)" in default
    assert 'id="project-beta"' in html
    assert 'href="/admin/projects/"' in client.get("/admin/").content.decode()


def test_it_creates_a_project_and_audits_it(client, root):
    response = client.post("/admin/projects/create",
                           {"slug": "support", "name": "Support bots", "retention_days": "30"})
    assert response.status_code == 302 and response["Location"] == "/admin/projects/"
    project = Project.objects.get(slug="support")
    assert project.name == "Support bots" and project.retention_days == 30
    event = AuditEvent.everywhere.get(action="project.created")
    assert event.actor == "user:root" and event.project_id is None and event.target_id == str(project.pk)
    assert "Created the project Support bots (support)" in client.get("/admin/projects/").content.decode()
    assert client.get("/p/support/").status_code == 200


def test_from_a_project_page_the_creation_goes_through_an_audited_bypass(client, two_projects, root):
    response = client.post("/p/alpha/admin/projects/create", {"slug": "coding", "name": "", "retention_days": ""})
    assert response.status_code == 302 and response["Location"] == "/p/alpha/admin/projects/"
    project = Project.objects.get(slug="coding")
    assert project.name == "coding" and project.retention_days is None
    bypass = AuditEvent.everywhere.get(action="scope.bypass")
    assert bypass.project_id == two_projects[0].pk and bypass.detail == {"reason": "a project created"}


@pytest.mark.parametrize("form, status, field_words", [
    ({"slug": "Not A Slug"}, 422, "a project&#x27;s slug is 1 to 64"),
    ({"slug": ""}, 422, "slug must not be blank"),
    ({"slug": "api"}, 422, "not one of"),
    ({"slug": "p"}, 422, "not one of"),
    ({"slug": "ok", "retention_days": "soon"}, 422, "retention_days must be a whole number"),
    ({"slug": "ok", "retention_days": "0"}, 422, "retention_days must be between 1 and"),
    ({"slug": "default"}, 409, "a project &#x27;default&#x27; already exists"),
])
def test_it_refuses_a_bad_project(client, root, form, status, field_words):
    before = Project.objects.count()
    response = client.post("/admin/projects/create", form)
    assert response.status_code == status
    assert field_words in response.content.decode()
    assert Project.objects.count() == before
    assert not AuditEvent.everywhere.filter(action="project.created").exists()
