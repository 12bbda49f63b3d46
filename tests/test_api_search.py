"""GET /api/v1/search: content search for agents and people with a read scope."""

import pytest

from conversations import store
from tests.api_support import Api, error_of, login_as, make_key

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


def test_it_finds_rows_with_snippets_and_links(reader, convo):
    r = reader.get("/search", {"q": "refund"})
    assert r.status_code == 200
    body = r.json()
    assert body["query"] == "refund" and body["next"] is None and body["next_url"] is None
    assert [(i["conversation_id"], i["position"]) for i in body["items"]] == [
        (str(convo.pk), 3), (str(convo.pk), 2), (str(convo.pk), 1)]
    first = body["items"][2]
    assert first["kind"] == "user" and first["conversation_title"] == "Refund for order 7"
    assert first["subject"] == "customer:42" and first["created_at"].endswith("Z")
    assert [first["snippet"][a:b] for a, b in first["highlights"]] == ["refund"]
    assert first["page_url"].endswith(f"/conversations/{convo.pk}/?at=1#p1")
    follow = reader.client.get(first["url"], headers={"Authorization": f"Bearer {reader.key}"})
    assert follow.json()["items"][0]["position"] == 1


def test_it_pages_with_a_cursor_and_keeps_the_filters(reader, convo):
    for i in range(5):
        store.append_message(conversation_id=convo.pk, message={"kind": "user", "content": f"refund again {i}"})
    r = reader.get("/search", {"q": "refund", "kind": "user", "limit": 3})
    body = r.json()
    assert [i["position"] for i in body["items"]] == [8, 7, 6]
    assert "kind=user" in body["next_url"] and "limit=3" in body["next_url"]
    rest = reader.client.get(body["next_url"], headers={"Authorization": f"Bearer {reader.key}"}).json()
    assert [i["position"] for i in rest["items"]] == [5, 4, 1]


@pytest.mark.parametrize("params, field", [
    ({"q": '"unclosed'}, "q"),
    ({"q": "refund OR"}, "q"),
    ({"q": "-refund"}, "q"),
    ({"q": "refund", "from": "yesterday"}, "from"),
    ({"q": "refund", "to": "2026-13-45"}, "to"),
    ({"q": "refund", "from": "2026-05-05", "to": "2026-05-01"}, "from"),
    ({"q": "refund", "kind": "letter"}, "kind"),
    ({"q": "refund", "conversation": "nope"}, "conversation"),
    ({"q": "refund", "cursor": "garbage"}, "cursor"),
])
def test_bad_input_is_a_400_naming_the_field(reader, convo, params, field):
    r = reader.get("/search", params)
    assert r.status_code == 400, r.content
    assert error_of(r)["field"] == field


def test_a_missing_query_is_refused(reader):
    r = reader.get("/search")
    assert r.status_code == 422 and error_of(r)["field"] == "q"


def test_it_filters_by_date_range_subject_and_conversation(reader, convo):
    other = store.create_conversation(title="x", subject="someone:else")
    store.append_message(conversation_id=other.pk, message={"kind": "user", "content": "refund please"})
    def found(**params):
        items = reader.get("/search", {"q": "refund", **params}).json()["items"]
        return [(i["conversation_id"], i["position"]) for i in items]
    assert found(subject="CUSTOMER:42") == [(str(convo.pk), 3), (str(convo.pk), 2), (str(convo.pk), 1)]
    assert found(conversation=str(other.pk)) == [(str(other.pk), 0)]
    assert found(**{"from": "2000-01-01", "to": "2000-01-02"}) == []
    assert len(found(**{"from": "2000-01-01"})) == 4


def test_it_needs_the_read_scope(client, convo, anonymous):
    assert anonymous.get("/search", {"q": "refund"}).status_code == 401
    facts_only = Api(client, make_key(["facts:read"], name="facts"))
    assert facts_only.get("/search", {"q": "refund"}).status_code == 403


def test_a_logged_in_auditor_may_search(client, convo):
    login_as(client, "auditor")
    assert client.get("/api/v1/search", {"q": "refund"}).status_code == 200
