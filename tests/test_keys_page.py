"""The admin page for API keys at /keys/."""

import pytest
from django.test import Client

from conversations import api_keys
from conversations.models import ApiKey, AuditEvent
from tests.api_support import Api, login_as
from tests.helpers import make_person

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client):
    return login_as(client, "admin", username="root-admin")


def test_it_requires_login(client):
    response = client.get("/keys/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("role", ["auditor", "reviewer", "none"])
def test_it_is_forbidden_to_everyone_but_admins(client, role):
    login_as(client, role, username=f"u-{role}")
    assert client.get("/keys/").status_code == 403
    assert client.post("/keys/create", {"name": "x", "scopes": ["read"]}).status_code == 403
    key, _ = api_keys.create_api_key(name="victim", scopes=["read"])
    assert client.get(f"/keys/{key.pk}/revoke").status_code == 403
    assert client.post(f"/keys/{key.pk}/revoke", {"confirm": "yes"}).status_code == 403
    key.refresh_from_db()
    assert key.revoked_at is None and ApiKey.objects.count() == 1


def test_it_lists_keys_without_their_secrets(client, admin):
    key, secret = api_keys.create_api_key(name="support-agent", scopes=["read", "write"], created_by="user:x")
    old, _ = api_keys.create_api_key(name="old <b>agent</b>", scopes=["admin"])
    api_keys.revoke_api_key(key_id=old.pk)
    Api(client, secret).get("/conversations")
    html = client.get("/keys/").content.decode()
    assert "support-agent" in html and f"mui_{key.prefix}_" in html
    assert secret not in html
    assert "old &lt;b&gt;agent&lt;/b&gt;" in html
    assert "revoked" in html and "never" in html
    assert html.count("Revoke…</a>") == 1 and f'href="/keys/{key.pk}/revoke"' in html


def test_it_creates_a_key_and_shows_the_secret_once(client, admin):
    response = client.post("/keys/create", {"name": "nightly-agent", "scopes": ["read", "write"]})
    assert response.status_code == 200
    html = response.content.decode()
    key = ApiKey.objects.get(name="nightly-agent")
    assert key.scopes == ["read", "write"] and key.created_by == "user:root-admin"
    secret = html.split('id="new-key-secret">', 1)[1].split("<", 1)[0]
    assert secret.startswith(f"mui_{key.prefix}_")
    assert api_keys.authenticate_api_key(secret) == key
    assert secret not in client.get("/keys/").content.decode()
    assert AuditEvent.objects.filter(action="api_key.created", target_id=str(key.pk)).exists()


@pytest.mark.parametrize("form, words", [
    ({"name": "", "scopes": ["read"]}, "name must not be blank"),
    ({"name": "x"}, "at least one scope"),
    ({"name": "x", "scopes": ["root"]}, "unknown scope"),
])
def test_it_refuses_a_bad_form(client, admin, form, words):
    response = client.post("/keys/create", form)
    assert response.status_code == 400
    assert words in response.content.decode()
    assert ApiKey.objects.count() == 0


def test_revoke_asks_first_naming_the_key_its_last_use_and_what_stops(client, admin):
    key, secret = api_keys.create_api_key(name="leaky", scopes=["read", "facts:read"], created_by="user:x")
    Api(client, secret).get("/conversations")
    key.refresh_from_db()
    response = client.get(f"/keys/{key.pk}/revoke")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Revoke the API key “leaky”?" in html and f"mui_{key.prefix}_" in html and "facts:read, read" in html
    assert f"{key.last_used_at:%Y-%m-%d %H:%M}" in html and "gets 401 on its next request" in html
    assert "Nothing undoes this" in html
    assert 'name="confirm" value="yes" required' in html
    key.refresh_from_db()
    assert key.revoked_at is None
    assert Api(Client(), secret).get("/conversations").status_code == 200


def test_it_revokes_a_key_once_confirmed(client, admin):
    key, secret = api_keys.create_api_key(name="leaky", scopes=["read"])
    response = client.post(f"/keys/{key.pk}/revoke", {"confirm": "yes"}, follow=True)
    assert response.status_code == 200
    assert "Revoked" in response.content.decode()
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert Api(Client(), secret).get("/conversations").status_code == 401
    assert AuditEvent.objects.get(action="api_key.revoked").actor == "user:root-admin"


@pytest.mark.parametrize("form", [{}, {"confirm": ""}, {"confirm": "no"}, {"confirm": "on"}])
def test_a_revoke_posted_without_the_confirmation_revokes_nothing(client, admin, form):
    key, secret = api_keys.create_api_key(name="live-agent", scopes=["read"])
    response = client.post(f"/keys/{key.pk}/revoke", form)
    assert response.status_code == 422
    html = response.content.decode()
    assert "nothing was done" in html and "Revoke the API key “live-agent”?" in html
    key.refresh_from_db()
    assert key.revoked_at is None and not AuditEvent.objects.filter(action="api_key.revoked").exists()
    assert Api(Client(), secret).get("/conversations").status_code == 200


def test_htmx_gets_only_the_confirmation_panel(client, admin):
    key, _ = api_keys.create_api_key(name="k", scopes=["read"])
    response = client.get(f"/keys/{key.pk}/revoke", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="confirm")
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="confirm"') and "<html" not in html
    assert "HX-Request" in response["Vary"]
    assert "<html" in client.get(f"/keys/{key.pk}/revoke").content.decode()


def test_an_already_revoked_key_goes_back_to_the_list(client, admin):
    key, _ = api_keys.create_api_key(name="gone", scopes=["read"])
    api_keys.revoke_api_key(key_id=key.pk)
    response = client.get(f"/keys/{key.pk}/revoke", follow=True)
    assert "was already revoked" in response.content.decode()
    assert AuditEvent.objects.filter(action="api_key.revoked").count() == 1


def test_revoking_an_unknown_key_is_404(client, admin):
    assert client.post("/keys/999/revoke", {"confirm": "yes"}).status_code == 404
    assert client.get("/keys/999/revoke").status_code == 404
    assert client.post(f"/keys/{2**70}/revoke", {"confirm": "yes"}).status_code == 404


def test_it_rejects_get_on_create(client, admin):
    assert client.get("/keys/create").status_code == 405


def test_the_forms_need_the_csrf_token():
    client = Client(enforce_csrf_checks=True)
    login_as(client, "admin", username="csrf-admin")
    assert client.post("/keys/create", {"name": "x", "scopes": ["read"]}).status_code == 403
    assert ApiKey.objects.count() == 0


def test_admins_see_the_link_in_the_navigation(client, admin):
    assert 'href="/keys/"' in client.get("/keys/").content.decode()


# ---- projects: each key's project and namespaces; the whole server's keys for superusers only ----


def test_it_shows_each_key_project_and_namespaces(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "admin"}))
    api_keys.create_api_key(name="importer", scopes=["write"], project=alpha, namespaces=["claude-code", "codex"])
    api_keys.create_api_key(name="reader", scopes=["read"], project=alpha)
    html = client.get("/p/alpha/keys/").content.decode()
    importer = html.split("<td data-label=\"Name\">importer</td>", 1)[1].split("</tr>", 1)[0]
    assert '<td data-label="Project"><code>alpha</code></td>' in importer
    assert "<code>claude-code</code> <code>codex</code>" in importer
    reader = html.split("<td data-label=\"Name\">reader</td>", 1)[1].split("</tr>", 1)[0]
    assert '<span class="muted">all</span>' in reader


def test_it_lists_only_the_project_keys_and_finds_no_other(client, two_projects):
    alpha, beta = two_projects
    client.force_login(make_person("ann", {alpha: "admin", beta: "admin"}))
    theirs, secret = api_keys.create_api_key(name="beta-bot", scopes=["read"], project=beta)
    html = client.get("/p/alpha/keys/").content.decode()
    assert "beta-bot" not in html and theirs.prefix not in html
    assert client.get(f"/p/alpha/keys/{theirs.pk}/revoke").status_code == 404
    assert client.post(f"/p/alpha/keys/{theirs.pk}/revoke", {"confirm": "yes"}).status_code == 404
    assert api_keys.authenticate_api_key(secret) is not None
    assert "beta-bot" in client.get("/p/beta/keys/").content.decode()


def test_it_creates_a_key_in_the_current_project_narrowed_to_namespaces(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "admin"}))
    response = client.post("/p/alpha/keys/create", {"name": "cc", "scopes": ["read", "write"],
                                                    "namespaces": "claude-code, codex"})
    assert response.status_code == 200
    key = ApiKey.everywhere.get(name="cc")
    assert key.project_id == alpha.pk and key.namespaces == ["claude-code", "codex"]
    event = AuditEvent.everywhere.get(action="api_key.created", target_id=str(key.pk))
    assert event.project_id == alpha.pk and event.detail["namespaces"] == ["claude-code", "codex"]


def test_it_refuses_a_namespace_no_conversation_could_have(client, admin):
    response = client.post("/keys/create", {"name": "x", "scopes": ["read"], "namespaces": "ok, bad\u200bname"})
    assert response.status_code == 400
    assert "namespaces holds U+200B" in response.content.decode()
    assert ApiKey.everywhere.count() == 0


def test_all_projects_keys_are_shown_to_superusers_only_and_marked(client, two_projects):
    alpha, _ = two_projects
    ops, secret = api_keys.create_api_key(name="ops-key", scopes=["admin"], all_projects=True)
    client.force_login(make_person("ann", {alpha: "admin"}))
    html = client.get("/p/alpha/keys/").content.decode()
    assert "ops-key" not in html and ops.prefix not in html and 'name="all_projects"' not in html
    assert client.get(f"/p/alpha/keys/{ops.pk}/revoke").status_code == 404
    assert client.post(f"/p/alpha/keys/{ops.pk}/revoke", {"confirm": "yes"}).status_code == 404
    assert api_keys.authenticate_api_key(secret) is not None

    client.force_login(make_person("root", {}, superuser=True))
    html = client.get("/p/alpha/keys/").content.decode()
    row = html.split('<td data-label="Name">ops-key</td>', 1)[1].split("</tr>", 1)[0]
    assert '<span class="badge-all-projects">all projects</span>' in row
    assert 'name="all_projects" value="yes"' in html
    panel = client.get(f"/p/alpha/keys/{ops.pk}/revoke").content.decode()
    assert "all projects (the whole server)" in panel


def test_a_superuser_makes_and_revokes_an_all_projects_key(client, two_projects):
    client.force_login(make_person("root", {}, superuser=True))
    response = client.post("/p/alpha/keys/create", {"name": "ops", "scopes": ["admin"], "all_projects": "yes"})
    assert response.status_code == 200
    assert '<span class="badge-all-projects">all projects</span></h2>' in response.content.decode()
    key = ApiKey.everywhere.get(name="ops")
    assert key.all_projects
    assert AuditEvent.everywhere.get(action="api_key.created", target_id=str(key.pk)).project_id is None
    response = client.post(f"/p/alpha/keys/{key.pk}/revoke", {"confirm": "yes"})
    assert response.status_code == 302 and response["Location"] == "/p/alpha/keys/"
    key.refresh_from_db()
    assert key.revoked_at is not None
    # Asked from a project's page, both writes about the whole server went through an audited bypass.
    assert AuditEvent.everywhere.filter(action="scope.bypass").count() == 2


def test_an_all_projects_key_takes_no_namespaces(client):
    client.force_login(make_person("root", {}, superuser=True))
    response = client.post("/keys/create", {"name": "ops", "scopes": ["admin"], "all_projects": "yes",
                                            "namespaces": "claude-code"})
    assert response.status_code == 400 and "an all-projects key has none" in response.content.decode()
    assert ApiKey.everywhere.count() == 0


def test_a_project_admin_cannot_make_an_all_projects_key(client, two_projects):
    alpha, _ = two_projects
    client.force_login(make_person("ann", {alpha: "admin"}))
    response = client.post("/p/alpha/keys/create", {"name": "sneaky", "scopes": ["admin"], "all_projects": "yes"})
    assert response.status_code == 403
    assert ApiKey.everywhere.count() == 0
