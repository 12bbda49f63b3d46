"""POST /api/v1/prune, POST /api/v1/deletion-requests, GET /api/v1/receipts: admin scope only."""

import json

import pytest

from conversations import api_keys
from conversations.models import Conversation
from conversations.retention.models import DeletionReceipt
from tests.retention_support import conversation, make_user

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


def key(*scopes):
    _, secret = api_keys.create_api_key(name=f"k-{'-'.join(scopes)}", scopes=list(scopes))
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def post(client, url, body, headers):
    return client.post(url, data=json.dumps(body), content_type="application/json", **headers)


def test_it_prunes_with_an_admin_key(client):
    old = conversation(title="old", messages=3, age_days=100)
    admin = key("admin")

    preview = post(client, "/api/v1/prune", {"older_than_days": 90, "dry_run": True}, admin)
    assert preview.status_code == 200, preview.content
    assert preview.json()["conversations"] == 1 and preview.json()["dry_run"] is True
    assert preview.json()["conversation_ids"] == [str(old.pk)]
    assert Conversation.objects.filter(pk=old.pk).exists()

    run = post(client, "/api/v1/prune", {"older_than_days": 90}, admin)
    assert run.status_code == 200
    body = run.json()
    assert body["messages"] == 3 and body["run_id"]
    # The file's size is every project's together: not a project key's to learn.
    assert body["bytes_before"] is None and body["bytes_after"] is None and body["bytes_freed"] is None
    assert not Conversation.objects.filter(pk=old.pk).exists()


def test_an_all_projects_key_is_told_the_database_files_size(client):
    conversation(title="old", messages=2, age_days=100)
    _, secret = api_keys.create_api_key(name="operator", scopes=["admin"], all_projects=True)
    run = post(client, "/api/v1/prune", {"older_than_days": 90}, {"HTTP_AUTHORIZATION": f"Bearer {secret}"})
    assert run.status_code == 200, run.content
    body = run.json()
    assert body["bytes_before"] > 0 and body["bytes_after"] > 0 and body["bytes_freed"] is not None


@pytest.mark.parametrize("scopes", [("read",), ("write",), ("read", "write", "facts:read", "facts:write")])
def test_keys_without_the_admin_scope_get_403(client, scopes):
    conversation(title="old", messages=1, age_days=100)
    headers = key(*scopes)
    for url, body in [("/api/v1/prune", {"older_than_days": 90}),
                      ("/api/v1/deletion-requests", {"subject": "cust:1", "dry_run": True})]:
        response = post(client, url, body, headers)
        assert response.status_code == 403, url
        assert response.json()["error"]["code"] == "forbidden"
    assert client.get("/api/v1/receipts", **headers).status_code == 403
    assert Conversation.objects.count() == 1


def test_people_who_are_not_admins_get_403_and_strangers_401(client):
    conversation(title="old", messages=1, age_days=100)
    assert post(client, "/api/v1/prune", {"older_than_days": 90}, {}).status_code == 401
    for role in ("auditor", "reviewer"):
        client.force_login(make_user(role, role))
        assert post(client, "/api/v1/prune", {"older_than_days": 90}, {}).status_code in (403,)
    assert Conversation.objects.count() == 1


@pytest.mark.parametrize("body, field", [
    ({"older_than_days": 0}, "older_than_days"),
    ({"older_than_days": "90"}, "older_than_days"),
    ({"older_than_days": 90, "dry_run": "yes"}, "dry_run"),
    ({"older_than_days": 90, "batch_size": 0}, "batch_size"),
])
def test_it_rejects_bad_prune_input(client, body, field):
    response = post(client, "/api/v1/prune", body, key("admin"))
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field


@pytest.mark.django_db(transaction=True)
def test_a_deletion_request_returns_its_receipt_without_personal_data(client):
    c = conversation(title="About Zofia", subject="cust:zofia-1", messages=2, text="Zofia Quenby message {i} text")
    admin = key("admin")

    preview = post(client, "/api/v1/deletion-requests", {"subject": "cust:zofia-1", "dry_run": True}, admin)
    assert preview.status_code == 200
    assert preview.json()["counts"]["messages"] == 2 and "cust:zofia-1" not in preview.content.decode()

    response = post(client, "/api/v1/deletion-requests", {"subject": "cust:zofia-1"}, admin)
    assert response.status_code == 201, response.content
    receipt = response.json()
    assert receipt["counts"]["conversations"] == 1 and receipt["conversation_ids"] == [str(c.pk)]
    assert receipt["verification"]["status"] == "verified"
    assert "zofia" not in response.content.decode().lower()

    listed = client.get("/api/v1/receipts", **admin).json()
    assert [r["request_id"] for r in listed["items"]] == [receipt["request_id"]]
    one = client.get(f"/api/v1/receipts/{receipt['request_id']}", **admin)
    assert one.status_code == 200 and one.json()["subject_sha256"] == receipt["subject_sha256"]


@pytest.mark.parametrize("body", [
    {},
    {"subject": ""},
    {"subject": 7},
    {"conversation_ids": ["nope"]},
    {"subject": "x" * 301},
])
def test_it_rejects_bad_deletion_requests(client, body):
    response = post(client, "/api/v1/deletion-requests", body, key("admin"))
    assert response.status_code == 422, response.content
    assert not DeletionReceipt.objects.exists()


def test_receipts_page_through_with_a_cursor(client):
    admin = key("admin")
    for _ in range(3):
        post(client, "/api/v1/deletion-requests", {"conversation_ids": [str(conversation(messages=1).pk)]}, admin)
    first = client.get("/api/v1/receipts?limit=2", **admin).json()
    assert len(first["items"]) == 2 and first["next"]
    second = client.get(f"/api/v1/receipts?limit=2&cursor={first['next']}", **admin).json()
    assert len(second["items"]) == 1 and second["next"] is None
    ids = [r["request_id"] for r in first["items"] + second["items"]]
    assert len(set(ids)) == 3
    assert client.get("/api/v1/receipts/not-an-id", **admin).status_code == 404
    forged = client.get("/api/v1/receipts?cursor=00000000-0000-0000-0000-000000000000", **admin)
    assert forged.status_code == 400 and forged.json()["error"]["code"] == "invalid_cursor"
