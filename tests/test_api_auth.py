"""Keys, scopes and browser sessions on the API; the public docs and schema."""

import re

import pytest
from django.test import Client

from conversations import api_keys
from conversations.models import ApiKey
from tests.api_support import Api, error_of, login_as, make_key

pytestmark = pytest.mark.django_db


def test_it_rejects_a_request_without_a_key(anonymous):
    response = anonymous.get("/conversations")
    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthenticated"
    assert "Authorization: Bearer" in error_of(response)["message"]
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", [
    "Bearer mui_deadbeef_not-a-real-key",
    "Bearer nonsense",
    "Bearer ",
    "Basic dXNlcjpwYXNz",
    "mui_deadbeef_xyz",
    "Bearer mui_dead\x00beef_xyz",
    "Bearer mui_deadbeef_" + "x" * 5000,
])
def test_it_rejects_a_bad_key(client, header):
    response = client.get("/api/v1/conversations", headers={"Authorization": header})
    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthenticated"


def test_it_rejects_a_bad_key_on_writes_with_401_not_a_csrf_error(client):
    response = client.post("/api/v1/conversations", "{}", content_type="application/json",
                           headers={"Authorization": "Bearer mui_00000000_wrong"})
    assert response.status_code == 401


def test_it_rejects_a_revoked_key(client):
    secret = make_key(["read"])
    api = Api(client, secret)
    assert api.get("/conversations").status_code == 200
    key = ApiKey.objects.get(prefix=secret.split("_")[1])
    api_keys.revoke_api_key(key_id=key.pk, revoked_by="test")
    response = api.get("/conversations")
    assert response.status_code == 401
    assert "revoked" in error_of(response)["message"]


def test_a_key_with_the_right_prefix_but_wrong_secret_is_rejected(client):
    secret = make_key(["read"])
    response = Api(client, secret[:-3] + "xyz").get("/conversations")
    assert response.status_code == 401


@pytest.mark.parametrize("method, path, body, scope", [
    ("post", "/conversations", {}, "write"),
    ("post", "/conversations/{id}/messages", {"kind": "note", "text": "x"}, "write"),
    ("post", "/conversations/{id}/checkpoints", {"position": 0, "summary": "s"}, "write"),
    ("post", "/conversations/{id}/forks", {"position": 0}, "write"),
    ("delete", "/conversations/{id}", None, "admin"),
])
def test_a_read_only_key_cannot_write(reader, convo, method, path, body, scope):
    path = path.format(id=convo.pk)
    response = reader.post(path, body) if method == "post" else reader.delete(path)
    assert response.status_code == 403
    error = error_of(response)
    assert error["code"] == "forbidden"
    assert f"'{scope}' scope" in error["message"] and "has: read" in error["message"]
    convo.refresh_from_db()
    assert convo.next_position == 4


@pytest.mark.parametrize("path", ["/conversations", "/conversations/{id}", "/conversations/{id}/messages",
                                  "/conversations/{id}/active", "/conversations/{id}/checkpoints",
                                  "/conversations/{id}/export"])
def test_a_write_only_key_cannot_read(client, convo, path):
    api = Api(client, make_key(["write"]))
    response = api.get(path.format(id=convo.pk))
    assert response.status_code == 403
    assert "'read' scope" in error_of(response)["message"]


def test_a_facts_only_key_cannot_touch_conversations(client, convo):
    api = Api(client, make_key(["facts:read"]))
    assert api.get("/conversations").status_code == 403
    assert api.post(f"/conversations/{convo.pk}/messages", {"kind": "note", "text": "x"}).status_code == 403


def test_an_admin_key_may_read_and_write(admin_key, convo):
    assert admin_key.get(f"/conversations/{convo.pk}").status_code == 200
    assert admin_key.post(f"/conversations/{convo.pk}/messages", {"kind": "note", "text": "x"}).status_code == 201


def test_it_records_when_a_key_was_last_used(reader):
    key = ApiKey.objects.get(name="reader")
    assert key.last_used_at is None
    reader.get("/conversations")
    key.refresh_from_db()
    assert key.last_used_at is not None


def test_it_credits_writes_to_the_key(writer, convo):
    response = writer.post(f"/conversations/{convo.pk}/checkpoints", {"position": 1, "summary": "s"})
    assert response.json()["created_by"] == "key:writer"


# -- browser sessions -----------------------------------------------------------------


def test_a_logged_in_auditor_may_read(client, convo):
    login_as(client, "auditor")
    response = client.get(f"/api/v1/conversations/{convo.pk}/messages")
    assert response.status_code == 200
    assert [i["position"] for i in response.json()["items"]] == [0, 1, 2, 3]


def test_a_logged_in_auditor_may_not_write(convo):
    client = Client(enforce_csrf_checks=True)
    login_as(client, "auditor")
    client.get("/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(f"/api/v1/conversations/{convo.pk}/messages", '{"kind":"note","text":"x"}',
                           content_type="application/json", headers={"X-CSRFToken": token})
    assert response.status_code == 403
    assert "'write' scope" in error_of(response)["message"]


def test_a_logged_in_admin_must_send_the_csrf_token_to_write(convo):
    client = Client(enforce_csrf_checks=True)
    login_as(client, "admin")
    body = '{"kind":"note","text":"from the docs page"}'
    path = f"/api/v1/conversations/{convo.pk}/messages"
    response = client.post(path, body, content_type="application/json")
    assert response.status_code == 403
    assert error_of(response)["code"] == "csrf_failed"
    convo.refresh_from_db()
    assert convo.next_position == 4

    client.get("/")
    token = client.cookies["csrftoken"].value
    response = client.post(path, body, content_type="application/json", headers={"X-CSRFToken": token})
    assert response.status_code == 201
    assert response.json()["position"] == 4


def test_a_logged_in_admin_may_delete_with_the_csrf_token(convo):
    client = Client(enforce_csrf_checks=True)
    login_as(client, "admin")
    client.get("/")
    response = client.delete(f"/api/v1/conversations/{convo.pk}",
                             headers={"X-CSRFToken": client.cookies["csrftoken"].value})
    assert response.status_code == 200


def test_a_user_without_a_role_is_not_let_in(client):
    login_as(client, "none", username="norole")
    assert client.get("/api/v1/conversations").status_code == 401


# -- docs, schema, unknown paths ------------------------------------------------------


def test_the_schema_is_public_and_lists_every_endpoint(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    expected = {
        ("post", "/api/v1/conversations"), ("get", "/api/v1/conversations"),
        ("get", "/api/v1/conversations/{conversation_id}"), ("delete", "/api/v1/conversations/{conversation_id}"),
        ("post", "/api/v1/conversations/{conversation_id}/messages"),
        ("get", "/api/v1/conversations/{conversation_id}/messages"),
        ("get", "/api/v1/conversations/{conversation_id}/active"),
        ("post", "/api/v1/conversations/{conversation_id}/checkpoints"),
        ("get", "/api/v1/conversations/{conversation_id}/checkpoints"),
        ("post", "/api/v1/conversations/{conversation_id}/forks"),
        ("get", "/api/v1/conversations/{conversation_id}/export"),
    }
    found = {(method, path) for path, ops in paths.items() for method in ops}
    assert expected <= found


def test_every_conversation_endpoint_has_examples(client):
    schema = client.get("/api/v1/openapi.json").json()
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            if "conversations" not in op.get("tags", []):
                continue
            if method == "post":
                body = op["requestBody"]["content"]["application/json"]
                assert body.get("examples"), (method, path)
            ok = next(v for k, v in op["responses"].items() if k.startswith("2"))
            if op["operationId"] != "export_conversation":
                assert ok["content"]["application/json"].get("example"), (method, path)


def test_the_message_body_schema_refers_to_registered_components(client):
    from conversations.message_schema import message_adapter

    schema = client.get("/api/v1/openapi.json").json()
    body = schema["paths"]["/api/v1/conversations/{conversation_id}/messages"]["post"]["requestBody"]
    refs = re.findall(r"#/components/schemas/(\w+)", str(body))
    assert {"UserMessage", "NoteMessage", "ToolMessage"} <= set(refs)
    def shape(node):
        # ninja drops `default: null` from component schemas; what may be sent is the same.
        if isinstance(node, dict):
            return {k: shape(v) for k, v in node.items() if k != "default"}
        if isinstance(node, list):
            return [shape(v) for v in node]
        return node

    defs = message_adapter.json_schema(ref_template="#/components/schemas/{model}")["$defs"]
    for name, definition in defs.items():
        assert shape(schema["components"]["schemas"][name]) == shape(definition), name


def test_the_docs_page_loads_only_local_static_files(client):
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert urls, html
    # Scripts, styles and icons come from our static files; the other links lead back into the app.
    assert all(u.startswith("/") and not u.startswith("//") for u in urls), urls
    assert "http://" not in html and "https://" not in html and "//cdn" not in html
    assets = re.findall(r'<(?:script[^>]*src|link[^>]*href)="([^"]+)"', html)
    assert assets and all(u.startswith("/static/") for u in assets), assets
    for url in assets:
        assert client.get(url).status_code == 200, url


def test_an_unknown_api_path_is_a_json_404(reader):
    for path in ("/nope", "/conversations/a/b/c", "/conversations/x%2Fy"):
        response = reader.get(path)
        assert response.status_code == 404, path
        assert error_of(response)["code"] == "not_found"


def test_an_unsupported_method_is_405(reader, convo):
    response = reader.client.put(f"/api/v1/conversations/{convo.pk}", "{}", content_type="application/json",
                                 headers={"Authorization": f"Bearer {reader.key}"})
    assert response.status_code == 405
