"""The admin page for API keys at /keys/."""

import pytest
from django.test import Client

from conversations import api_keys
from conversations.models import ApiKey, AuditEvent
from tests.api_support import Api, login_as

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
