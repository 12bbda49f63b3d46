"""The admin page for a project's members at /admin/members/ (conversations/views_members.py)."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from conversations.models import AuditEvent, Membership
from tests.helpers import make_person, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def alpha(two_projects):
    return two_projects[0]


@pytest.fixture
def ann(client, alpha):
    """An admin of alpha, signed in."""
    person = make_person("ann", {alpha: "admin"})
    client.force_login(person)
    return person


def roles_in(project) -> dict[str, str]:
    return dict(Membership.objects.filter(project=project).values_list("user__username", "role"))


def test_it_requires_login(client, alpha):
    response = client.get("/p/alpha/admin/members/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("role", ["auditor", "reviewer"])
def test_it_is_forbidden_to_everyone_but_the_project_admins(client, two_projects, role):
    alpha, beta = two_projects
    bob = make_person("bob", {alpha: "auditor"})
    client.force_login(make_person("eve", {alpha: role, beta: "admin"}))
    assert client.get("/p/alpha/admin/members/").status_code == 403
    assert client.post("/p/alpha/admin/members/add", {"username": "eve", "role": "admin"}).status_code == 403
    assert client.post("/p/alpha/admin/members/create", {"username": "x", "role": "admin"}).status_code == 403
    assert client.post(f"/p/alpha/admin/members/{bob.pk}/role", {"role": "admin"}).status_code == 403
    assert client.post(f"/p/alpha/admin/members/{bob.pk}/remove").status_code == 403
    assert roles_in(alpha) == {"bob": "auditor", "eve": role}


def test_a_project_the_person_is_not_in_is_not_found(client, two_projects):
    client.force_login(make_person("eve", {two_projects[1]: "admin"}))
    assert client.get("/p/alpha/admin/members/").status_code == 404


def test_it_lists_the_members_with_their_roles_and_no_one_else(client, two_projects, ann):
    alpha, beta = two_projects
    make_person("bob", {alpha: "reviewer", beta: "admin"})
    make_person("carl", {beta: "auditor"})
    html = client.get("/p/alpha/admin/members/").content.decode()
    assert "Members of Alpha" in html
    assert "ann" in html and "(you)" in html and "bob" in html and "carl" not in html
    bob_row = html.split(">bob<", 1)[1].split("</tr>", 1)[0]
    assert '<option value="reviewer" selected>' in bob_row


def test_it_adds_a_person_who_has_an_account(client, alpha, ann):
    make_user(None, "dora")
    response = client.post("/p/alpha/admin/members/add", {"username": " dora ", "role": "reviewer"})
    assert response.status_code == 302 and response["Location"] == "/p/alpha/admin/members/"
    assert roles_in(alpha)["dora"] == "reviewer"
    event = AuditEvent.everywhere.get(action="project.member_set")
    assert event.actor == "user:ann" and event.project_id == alpha.pk and event.detail == {"role": "reviewer"}
    assert "dora is now reviewer in Alpha" in client.get("/p/alpha/admin/members/").content.decode()


def test_adding_an_unknown_person_says_to_create_them(client, alpha, ann):
    response = client.post("/p/alpha/admin/members/add", {"username": "nobody-here", "role": "auditor"})
    assert response.status_code == 404
    assert "no user &#x27;nobody-here&#x27;: create them instead" in response.content.decode()
    assert set(roles_in(alpha)) == {"ann"}


def test_it_creates_an_account_and_shows_its_password_once(client, alpha, ann):
    response = client.post("/p/alpha/admin/members/create", {"username": "erin", "role": "auditor"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    password = html.split('id="new-member-password">', 1)[1].split("<", 1)[0]
    erin = get_user_model().objects.get(username="erin")
    assert erin.check_password(password) and roles_in(alpha)["erin"] == "auditor"
    assert password not in client.get("/p/alpha/admin/members/").content.decode()
    made = AuditEvent.everywhere.filter(target_type="user", target_id=str(erin.pk))
    assert {e.action for e in made} == {"user.created", "project.member_set"}
    # The new person signs in and lands in the project.
    other = Client()
    assert other.login(username="erin", password=password)
    assert other.get("/").status_code == 302 and other.get("/p/alpha/").status_code == 200


@pytest.mark.parametrize("form, status, words", [
    ({"username": "", "role": "auditor"}, 422, "username must not be blank"),
    ({"username": "has space", "role": "auditor"}, 422, "a username is letters, digits"),
    ({"username": "x" * 151, "role": "auditor"}, 422, "at most 150"),
    ({"username": "frank", "role": "owner"}, 422, "unknown role"),
    ({"username": "ann", "role": "auditor"}, 409, "already exists: add them as a member instead"),
])
def test_it_refuses_a_bad_new_account(client, alpha, ann, form, status, words):
    response = client.post("/p/alpha/admin/members/create", form)
    assert response.status_code == status
    assert words in response.content.decode().replace("&#x27;", "'")
    assert set(roles_in(alpha)) == {"ann"}
    assert not AuditEvent.everywhere.filter(action="user.created").exists()


def test_it_changes_a_member_role(client, alpha, ann):
    bob = make_person("bob", {alpha: "auditor"})
    response = client.post(f"/p/alpha/admin/members/{bob.pk}/role", {"role": "admin"})
    assert response.status_code == 302
    assert roles_in(alpha)["bob"] == "admin"
    assert client.post(f"/p/alpha/admin/members/{bob.pk}/role", {"role": "king"}).status_code == 422
    assert roles_in(alpha)["bob"] == "admin"


def test_it_removes_a_member_who_then_no_longer_sees_the_project(client, alpha, ann):
    bob = make_person("bob", {alpha: "auditor"})
    response = client.post(f"/p/alpha/admin/members/{bob.pk}/remove")
    assert response.status_code == 302
    assert "bob" not in roles_in(alpha)
    assert AuditEvent.everywhere.get(action="project.member_removed").target_id == str(bob.pk)
    other = Client()
    other.force_login(bob)
    assert other.get("/p/alpha/").status_code == 404


def test_a_person_of_another_project_is_not_found(client, two_projects, ann):
    alpha, beta = two_projects
    carl = make_person("carl", {beta: "auditor"})
    assert client.post(f"/p/alpha/admin/members/{carl.pk}/role", {"role": "admin"}).status_code == 404
    assert client.post(f"/p/alpha/admin/members/{carl.pk}/remove").status_code == 404
    assert client.post(f"/p/alpha/admin/members/{2**70}/remove").status_code == 404
    assert roles_in(beta) == {"carl": "auditor"}
    assert "alpha" not in {m.project.slug for m in carl.memberships.all()}


def test_the_last_admin_is_neither_demoted_nor_removed(client, alpha, ann):
    response = client.post(f"/p/alpha/admin/members/{ann.pk}/role", {"role": "auditor"})
    assert response.status_code == 409 and "last admin of &#x27;alpha&#x27;" in response.content.decode()
    assert client.post(f"/p/alpha/admin/members/{ann.pk}/remove").status_code == 409
    assert roles_in(alpha) == {"ann": "admin"}
    # With a second admin, either may step down.
    make_person("bob", {alpha: "admin"})
    assert client.post(f"/p/alpha/admin/members/{ann.pk}/role", {"role": "reviewer"}).status_code == 302
    assert roles_in(alpha) == {"ann": "reviewer", "bob": "admin"}


def test_a_superuser_manages_any_project_members(client, two_projects):
    alpha, beta = two_projects
    client.force_login(make_person("root", {}, superuser=True))
    make_user(None, "dora")
    assert client.post("/p/beta/admin/members/add", {"username": "dora", "role": "admin"}).status_code == 302
    assert roles_in(beta) == {"dora": "admin"}


def test_the_forms_need_the_csrf_token(alpha):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_person("ann", {alpha: "admin"}))
    assert client.post("/p/alpha/admin/members/create", {"username": "x", "role": "admin"}).status_code == 403
    assert not get_user_model().objects.filter(username="x").exists()


def test_it_rejects_get_on_the_actions(client, alpha, ann):
    assert client.get("/p/alpha/admin/members/add").status_code == 405
    assert client.get(f"/p/alpha/admin/members/{ann.pk}/remove").status_code == 405
