"""No browser or proxy cache keeps a copy of what memoryui answers.

Every page, fragment, download and API answer (errors included) carries
`Cache-Control: no-store`: they hold conversations, facts, subjects or logs. Only
the static files keep their own caching. The crawler (tests/test_crawler.py)
checks the same header on every URL and parameter it tries.
"""

import pytest
from django.test import Client

from conversations import api_keys, store
from conversations.facts import store as facts
from conversations.retention import erasure
from tests.retention_support import make_user

pytestmark = pytest.mark.django_db


def no_store(response) -> bool:
    return "no-store" in response.get("Cache-Control", "")


@pytest.fixture
def world(client):
    client.force_login(make_user("boss", "admin"))
    convo = store.create_conversation(title="t", subject="cust:1")
    store.append_message(conversation_id=convo.pk, message={"kind": "user", "content": "my card ends 4242"})
    fact = facts.propose_fact(subject="cust:1", text="likes tea", importance=3, created_by="key:agent")
    gone = store.create_conversation(title="gone", subject="cust:gone")
    store.append_message(conversation_id=gone.pk, message={"kind": "user", "content": "bye"})
    receipt = erasure.execute_deletion(subject="cust:gone", conversation_ids=[], actor="test")
    _, secret = api_keys.create_api_key(name="k", scopes=["read", "write", "admin", "facts:read"])
    return {"convo": convo, "fact": fact, "receipt": receipt, "auth": {"Authorization": f"Bearer {secret}"}}


def test_it_marks_every_page_that_shows_personal_data_no_store(client, world):
    c, receipt = world["convo"], world["receipt"]
    pages = [
        ("get", "/", {}), ("get", f"/conversations/{c.pk}/", {}), ("get", "/search/?q=card", {}),
        ("post", "/admin/deletion-requests/preview/", {"subject": "cust:1"}),
        ("get", f"/facts/subject/{world['fact'].pk}/", {}),
        ("get", "/admin/receipts/", {}), ("get", f"/admin/receipts/{receipt.pk}/", {}),
        ("get", "/admin/audit/", {}), ("get", "/admin/access/", {}), ("get", "/facts/access-log/", {}),
        ("get", "/login/", {}),
    ]
    for method, url, data in pages:
        response = getattr(client, method)(url, data)
        assert response.status_code == 200, (url, response.status_code)
        assert no_store(response), (url, response.get("Cache-Control"))
    # A redirect too (it names the subject's page), and an htmx fragment.
    assert no_store(client.post("/facts/subject/", {"s": "cust:1"}))
    assert no_store(client.get(f"/conversations/{c.pk}/", headers={"HX-Request": "true"}))


def test_it_marks_every_api_answer_no_store_errors_included(client, world):
    c, auth = world["convo"], world["auth"]
    answers = [
        client.get(f"/api/v1/conversations/{c.pk}/messages", headers=auth),
        client.get("/api/v1/search?q=card", headers=auth),
        client.post(f"/api/v1/conversations/{c.pk}/messages", {"kind": "user", "content": "more"},
                    content_type="application/json", headers=auth),
    ]
    assert [r.status_code for r in answers] == [200, 200, 201]
    errors = [
        Client().get(f"/api/v1/conversations/{c.pk}/messages"),  # 401, no key
        client.get("/api/v1/conversations/nope/messages", headers=auth),  # 404 from the store
        client.get("/api/v1/no/such/endpoint", headers=auth),  # 404 from the error-shape middleware
        client.put(f"/api/v1/conversations/{c.pk}/messages", headers=auth),  # 405
        client.post(f"/api/v1/conversations/{c.pk}/messages", {"kind": "nope"},
                    content_type="application/json", headers=auth),  # 422
        client.get("/api/v1/search?q=" + "x" * 9000, headers=auth),  # 414
    ]
    assert [r.status_code for r in errors] == [401, 404, 404, 405, 422, 414]
    for response in answers + errors:
        assert response["Content-Type"].startswith("application/json")
        assert no_store(response), (response.status_code, response.get("Cache-Control"))


def test_it_leaves_static_files_to_their_own_caching(client):
    response = client.get("/static/css/app.css")
    assert response.status_code == 200
    assert not no_store(response)
