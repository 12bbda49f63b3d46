"""POST/GET /api/v1/conversations and GET /api/v1/conversations/{id}."""

import base64
import json
import uuid

import pytest

from conversations import store
from conversations.models import Conversation
from tests.api_support import error_of
from tests.retention_support import delete_conversation

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


# -- create ---------------------------------------------------------------------------


def test_it_creates_a_conversation(writer):
    response = writer.post("/conversations", {"title": " Refund ", "subject": "customer:42", "meta": {"a": [1]}})
    assert response.status_code == 201
    body = response.json()
    c = Conversation.objects.get(pk=body["id"])
    assert (c.title, c.subject, c.meta) == ("Refund", "customer:42", {"a": [1]})
    assert body["title"] == "Refund" and body["message_count"] == 0 and body["next_position"] == 0
    assert body["latest_checkpoint"] is None and body["lineage"] == []
    assert body["url"].endswith(f"/api/v1/conversations/{c.pk}")


def test_everything_is_optional(writer):
    for body in ({}, {"title": None, "subject": None, "meta": None}):
        response = writer.post("/conversations", body)
        assert response.status_code == 201, response.content
        assert response.json()["title"] == ""


def test_it_accepts_a_json_content_type_with_charset_or_none(writer):
    assert writer.post("/conversations", raw="{}", content_type="application/json; charset=utf-8").status_code == 201
    assert writer.post("/conversations", raw="{}", content_type="").status_code == 201


@pytest.mark.parametrize("body, field", [
    ({"title": 7}, "title"),
    ({"title": "x" * 301}, "title"),
    ({"subject": ["a"]}, "subject"),
    ({"meta": "not an object"}, "meta"),
    ({"meta": [1, 2]}, "meta"),
    ({"titel": "typo"}, "titel"),
    ({"title": "nul\u0000byte"}, "title"),
    ({"meta": {"k": "nul\u0000"}}, "meta.k"),
])
def test_it_refuses_bad_fields_with_422(writer, body, field):
    response = writer.post("/conversations", body)
    assert response.status_code == 422, response.content
    error = error_of(response)
    assert error["code"] == "invalid_input"
    assert error["field"] == field
    assert Conversation.objects.count() == 0


@pytest.mark.parametrize("raw", ["{bad", "", "   ", '{"title": NaN}', '{"meta": {"x": Infinity}}', "[" * 50000,
                                 '{"meta": {"x": 1e400}}', '{"meta": {"x": -1e999}}'])
def test_it_refuses_a_body_that_is_not_json_with_400(writer, raw):
    response = writer.post("/conversations", raw=raw)
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_json"
    assert Conversation.objects.count() == 0


@pytest.mark.parametrize("raw", ["[]", "null", "3", '"title"', "true"])
def test_it_refuses_a_body_that_is_not_an_object_with_422(writer, raw):
    response = writer.post("/conversations", raw=raw)
    assert response.status_code == 422
    assert "JSON object" in error_of(response)["message"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"])
def test_it_refuses_a_body_that_is_not_sent_as_json_with_415(writer, content_type):
    response = writer.post("/conversations", raw='{"title": "x"}', content_type=content_type)
    assert response.status_code == 415
    assert "application/json" in error_of(response)["message"]


def test_it_refuses_a_multipart_body_with_415(writer):
    response = writer.client.post("/api/v1/conversations", {"title": "x"},
                                  headers={"Authorization": f"Bearer {writer.key}"})
    assert response.status_code == 415


def test_it_refuses_a_lone_surrogate(writer):
    response = writer.post("/conversations", raw='{"title": "\\ud800"}')
    assert response.status_code == 422
    assert "surrogate" in error_of(response)["message"]


def test_it_refuses_a_body_over_the_upload_limit_with_413(writer, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = writer.post("/conversations", {"meta": {"x": "y" * 2000}})
    assert response.status_code == 413
    assert error_of(response)["code"] == "body_too_large"


def test_it_keeps_deep_but_legal_meta(writer):
    meta = {"a": {"b": {"c": {"d": [1, {"e": "ü 🙂"}]}}}}
    response = writer.post("/conversations", {"meta": meta})
    assert response.status_code == 201
    assert writer.get(f"/conversations/{response.json()['id']}").json()["meta"] == meta


# -- list -----------------------------------------------------------------------------


def _make(n, subject=""):
    return [store.create_conversation(title=f"c{i}", subject=subject) for i in range(n)]


def test_it_lists_most_recent_activity_first(reader):
    a, b, c = _make(3)
    store.append_message(conversation_id=a.pk, message={"kind": "note", "text": "bump"})
    titles = [i["title"] for i in reader.get("/conversations").json()["items"]]
    assert titles == ["c0", "c2", "c1"]


def test_it_pages_with_an_opaque_cursor_without_gaps_or_repeats(reader):
    made = _make(7)
    seen, params, pages = [], {"limit": 3}, 0
    while True:
        body = reader.get("/conversations", params).json()
        pages += 1
        seen += [i["id"] for i in body["items"]]
        if body["next"] is None:
            assert body["next_url"] is None
            break
        assert "cursor=" in body["next_url"] and "limit=3" in body["next_url"]
        params = {"limit": 3, "cursor": body["next"]}
        assert pages < 10
    assert pages == 3
    assert sorted(seen) == sorted(str(c.pk) for c in made)
    assert len(seen) == len(set(seen))


def test_the_next_url_works_as_given(reader):
    _make(3)
    body = reader.get("/conversations", {"limit": 2, "order": "created"}).json()
    second = reader.client.get(body["next_url"], headers={"Authorization": f"Bearer {reader.key}"}).json()
    assert [i["title"] for i in body["items"] + second["items"]] == ["c2", "c1", "c0"]


def test_it_orders_by_creation_on_request(reader):
    a, b = _make(2)
    store.append_message(conversation_id=a.pk, message={"kind": "note", "text": "bump"})
    titles = [i["title"] for i in reader.get("/conversations", {"order": "created"}).json()["items"]]
    assert titles == ["c1", "c0"]


def test_it_pages_conversations_created_in_the_same_instant(reader):
    # Ties on the timestamp are broken by id, so no row is lost between pages.
    made = _make(5)
    Conversation.objects.update(last_activity_at=made[0].created_at)
    seen, params = [], {"limit": 2}
    for _ in range(5):
        body = reader.get("/conversations", params).json()
        seen += [i["id"] for i in body["items"]]
        if not body["next"]:
            break
        params = {"limit": 2, "cursor": body["next"]}
    assert sorted(seen) == sorted(str(c.pk) for c in made)


def test_it_filters_by_subject(reader):
    _make(2, subject="customer:1")
    _make(1, subject="customer:2")
    body = reader.get("/conversations", {"subject": "customer:2"}).json()
    assert [i["subject"] for i in body["items"]] == ["customer:2"]
    assert reader.get("/conversations", {"subject": "nobody"}).json()["items"] == []


def test_it_hides_conversations_being_deleted(reader):
    a, b = _make(2)
    Conversation.objects.filter(pk=a.pk).update(deleting=True)  # as a prune killed halfway leaves it
    assert [i["id"] for i in reader.get("/conversations").json()["items"]] == [str(b.pk)]


def _cursor(*parts):
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


@pytest.mark.parametrize("cursor", [
    "garbage", "!!!", "W10", "WyJyZWNlbnQiXQ", "e30", "\u00e9t\u00e9",
    _cursor("recent", "0001-01-01T00:00:00+14:00", "6f1d2c3b4a5948e7b6c5d4e3f2a1b0c9"),
    _cursor("recent", "2026-01-01T00:00:00", "6f1d2c3b4a5948e7b6c5d4e3f2a1b0c9"),
    _cursor("recent", "2026-01-01T00:00:00+00:00", "not-a-uuid"),
    _cursor("recent", 5, "6f1d2c3b4a5948e7b6c5d4e3f2a1b0c9"),
])
def test_it_refuses_a_cursor_it_did_not_give_out_with_400(reader, cursor):
    response = reader.get("/conversations", {"cursor": cursor})
    assert response.status_code == 400
    error = error_of(response)
    assert (error["code"], error["field"]) == ("invalid_cursor", "cursor")


def test_a_cursor_of_one_order_is_refused_for_the_other(reader):
    _make(3)
    cursor = reader.get("/conversations", {"limit": 1}).json()["next"]
    assert reader.get("/conversations", {"limit": 1, "cursor": cursor, "order": "created"}).status_code == 400


@pytest.mark.parametrize("params", [
    {"limit": 0}, {"limit": -1}, {"limit": 10**6}, {"limit": "true"}, {"limit": "ten"}, {"limit": "1.5"},
    {"order": "random"}, {"subject": "a\x00b"},
])
def test_it_refuses_bad_query_parameters_with_422(reader, params):
    response = reader.get("/conversations", params)
    assert response.status_code == 422, response.content
    assert error_of(response)["code"] == "invalid_input"


def test_it_ignores_unknown_query_parameters(reader):
    _make(1)
    assert len(reader.get("/conversations", {"colour": "blue"}).json()["items"]) == 1


# -- one conversation -----------------------------------------------------------------


def test_it_shows_one_conversation_with_counts_lineage_and_latest_checkpoint(reader, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=1, summary="first")
    store.checkpoint_at(conversation_id=convo.pk, position=3, summary="second", created_by="key:x")
    child = store.fork_conversation(conversation_id=convo.pk, position=3, title="child")
    grandchild = store.fork_conversation(conversation_id=child.pk, position=1)

    body = reader.get(f"/conversations/{convo.pk}").json()
    assert body["message_count"] == 4 and body["next_position"] == 4
    assert body["fork_count"] == 1 and body["checkpoint_count"] == 2
    assert body["latest_checkpoint"]["position"] == 3
    assert body["latest_checkpoint"]["summary"] == "second"
    assert body["latest_checkpoint"]["created_by"] == "key:x"
    assert body["meta"] == {"agent": "bot"}

    body = reader.get(f"/conversations/{grandchild.pk}").json()
    assert [a["id"] for a in body["lineage"]] == [str(convo.pk), str(child.pk)]
    assert body["parent_id"] == str(child.pk) and body["forked_from_position"] == 1
    assert body["parent_missing"] is False


def test_its_fork_count_leaves_out_subagent_transcripts_and_forks_being_deleted(reader, convo):
    store.fork_conversation(conversation_id=convo.pk, position=1)
    store.fork_conversation(conversation_id=convo.pk, position=2, relation="subagent")
    going = store.fork_conversation(conversation_id=convo.pk, position=0)
    Conversation.objects.filter(pk=going.pk).update(deleting=True)  # as a prune killed halfway leaves it
    body = reader.get(f"/conversations/{convo.pk}").json()
    assert body["fork_count"] == 1 and body["checkpoint_count"] == 0 and body["latest_checkpoint"] is None
    assert reader.get(f"/conversations/{going.pk}").status_code == 404


def test_it_says_when_the_parent_is_gone(reader, convo):
    child = store.fork_conversation(conversation_id=convo.pk, position=1)
    delete_conversation(convo.pk)
    body = reader.get(f"/conversations/{child.pk}").json()
    assert body["parent_missing"] is True and body["lineage"] == []


@pytest.mark.parametrize("bad", ["nope", "123", "3f1c2a9e-8d4b-4c61-9a57", "%00", "' OR 1=1 --", "é"])
def test_a_malformed_id_is_a_json_404(reader, bad):
    response = reader.get(f"/conversations/{bad}")
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"


def test_an_unknown_id_is_a_json_404(reader):
    missing = uuid.uuid4()
    response = reader.get(f"/conversations/{missing}")
    assert response.status_code == 404
    assert str(missing) in error_of(response)["message"]


def test_responses_are_utf8_json(reader):
    c = store.create_conversation(title="Grüße 🙂")
    response = reader.get(f"/conversations/{c.pk}")
    assert response["Content-Type"].startswith("application/json")
    assert json.loads(response.content.decode("utf-8"))["title"] == "Grüße 🙂"
