"""POST and GET /api/v1/conversations/{id}/messages."""

import json
import uuid

import pytest
from django.db import connection

from conversations import store
from conversations.models import Message
from tests.api_support import error_of

pytestmark = pytest.mark.django_db


def _path(c):
    return f"/conversations/{c.pk}/messages"


def _count(c):
    return Message.objects.filter(conversation=c).count()


# -- append ---------------------------------------------------------------------------


def test_it_appends_and_answers_the_position(writer, convo):
    response = writer.post(_path(convo), {"kind": "user", "content": "Any news?"})
    assert response.status_code == 201
    assert response.json() == {"position": 4, "kind": "user"}
    assert Message.objects.get(conversation=convo, position=4).kind == "user"


@pytest.mark.parametrize("message", [
    {"kind": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "source": {"b": 1}}]},
    {"kind": "assistant", "tool_calls": [{"id": "c9", "name": "search", "arguments": {"q": "x"}}]},
    {"kind": "tool", "tool_call_id": "c9", "name": "search", "content": "none", "is_error": True},
    {"kind": "system", "content": "be brief"},
    {"kind": "thought", "text": "hmm", "meta": {"model": "m", "usage": {"input_tokens": 3}}},
    {"kind": "heard", "text": "a knock"}, {"kind": "said", "text": "hello"}, {"kind": "did", "text": "opened"},
    {"kind": "woke", "text": "08:00"}, {"kind": "note", "text": "ünïcödé 🙂 \\u0000 typed, \u0001 escaped"},
])
def test_what_it_returns_is_the_stored_text_decoded(writer, convo, message):
    position = writer.post(_path(convo), message).json()["position"]
    stored = Message.objects.get(conversation=convo, position=position).content
    item = writer.get(_path(convo), {"after": position - 1}).json()["items"][0]
    assert item["message"] == json.loads(stored)
    # Same keys in the same order: re-sending it sends exactly what was sent.
    assert list(item["message"]) == list(json.loads(stored))
    # ...and re-sending it stores the very same bytes again.
    again = writer.post(_path(convo), item["message"]).json()["position"]
    assert Message.objects.get(conversation=convo, position=again).content == stored


def test_the_store_encodes_whatever_key_order_the_agent_used(writer, convo):
    raw = '{"meta": {"z": 1, "a": 2}, "text": "x", "kind": "note"}'
    position = writer.post(_path(convo), raw=raw).json()["position"]
    stored = Message.objects.get(conversation=convo, position=position).content
    assert json.loads(stored) == {"kind": "note", "text": "x", "meta": {"z": 1, "a": 2}}
    assert writer.get(_path(convo), {"after": position - 1}).json()["items"][0]["message"] == json.loads(stored)


def test_it_appends_when_the_expected_position_matches(writer, convo):
    response = writer.post(_path(convo) + "?expected_position=4", {"kind": "note", "text": "x"})
    assert response.status_code == 201 and response.json()["position"] == 4


def test_it_refuses_a_stale_expected_position_with_409_and_writes_nothing(writer, convo):
    response = writer.post(_path(convo) + "?expected_position=3", {"kind": "note", "text": "x"})
    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["field"]) == ("position_conflict", "expected_position")
    assert "it is 4" in error["message"]
    assert _count(convo) == 4
    convo.refresh_from_db()
    assert convo.next_position == 4
    # The next append still gets the position the conflict named.
    assert writer.post(_path(convo), {"kind": "note", "text": "y"}).json()["position"] == 4


@pytest.mark.parametrize("query", ["expected_position=-1", "expected_position=true", "expected_position=x",
                                   "expected_position=1.5", f"expected_position={2**70}"])
def test_it_refuses_a_bad_expected_position_with_422(writer, convo, query):
    response = writer.post(_path(convo) + "?" + query, {"kind": "note", "text": "x"})
    assert response.status_code == 422
    assert error_of(response)["field"] == "expected_position"
    assert _count(convo) == 4


@pytest.mark.parametrize("message, field, words", [
    ({"kind": "hologram", "text": "x"}, "kind", "unknown kind"),
    ({"text": "x"}, "kind", "missing 'kind'"),
    ({"kind": "user"}, "content", "content"),
    ({"kind": "note", "text": "   "}, "text", "blank"),
    ({"kind": "user", "content": ""}, "content", "blank"),
    ({"kind": "user", "content": []}, "content", "empty"),
    ({"kind": "tool", "content": "x"}, "tool_call_id", "tool_call_id"),
    ({"kind": "assistant"}, None, "content or tool_calls"),
    ({"kind": "note", "text": "x", "colour": "red"}, "colour", "unknown field"),
    ({"kind": "note", "text": 5}, "text", "text"),
    ({"kind": 5, "text": "x"}, "kind", "kind"),
    ({"kind": "user", "content": "x", "meta": "m"}, "meta", "meta"),
])
def test_it_refuses_an_invalid_message_with_422_naming_the_problem(writer, convo, message, field, words):
    response = writer.post(_path(convo), message)
    assert response.status_code == 422, response.content
    error = error_of(response)
    assert error["code"] == "invalid_message"
    assert error.get("field") == field
    assert words in error["message"]
    assert _count(convo) == 4


@pytest.mark.parametrize("raw", ["{", "", '{"kind": "note", "text": NaN}', "\xff\xfe",
                                 '{"kind": "note", "text": "x", "meta": {"v": 1e400}}'])
def test_it_refuses_a_body_that_is_not_json_with_400(writer, convo, raw):
    response = writer.post(_path(convo), raw=raw)
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_json"
    assert _count(convo) == 4


@pytest.mark.parametrize("raw", ['[{"kind": "note", "text": "x"}]', '"note"', "null", "42"])
def test_it_refuses_a_body_that_is_not_an_object_with_422(writer, convo, raw):
    response = writer.post(_path(convo), raw=raw)
    assert response.status_code == 422
    assert _count(convo) == 4


def test_it_refuses_a_form_post_with_415(writer, convo):
    response = writer.post(_path(convo), raw="kind=note&text=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert _count(convo) == 4


def test_it_refuses_an_oversized_message_with_413(writer, convo, settings):
    settings.MEMORYUI_MAX_MESSAGE_BYTES = 200
    response = writer.post(_path(convo), {"kind": "note", "text": "x" * 300})
    assert response.status_code == 413
    error = error_of(response)
    assert error["code"] == "message_too_large" and "limit is 200 bytes" in error["message"]
    assert _count(convo) == 4
    assert writer.post(_path(convo), {"kind": "note", "text": "x" * 100}).status_code == 201


def test_it_refuses_an_oversized_body_with_413(writer, convo, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 500
    response = writer.post(_path(convo), {"kind": "note", "text": "x" * 1000})
    assert response.status_code == 413
    assert _count(convo) == 4


def test_it_refuses_a_lone_surrogate_in_a_message_with_422(writer, convo):
    response = writer.post(_path(convo), raw='{"kind": "note", "text": "\\udc00"}')
    assert response.status_code == 422
    assert _count(convo) == 4


def test_appending_to_an_unknown_conversation_is_404(writer):
    response = writer.post(f"/conversations/{uuid.uuid4()}/messages", {"kind": "note", "text": "x"})
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"
    assert Message.objects.count() == 0


def test_appending_to_a_malformed_id_is_404(writer):
    assert writer.post("/conversations/not-a-uuid/messages", {"kind": "note", "text": "x"}).status_code == 404


# -- the full record ------------------------------------------------------------------


def test_it_lists_the_full_record_in_position_order(reader, convo):
    body = reader.get(_path(convo)).json()
    assert [i["position"] for i in body["items"]] == [0, 1, 2, 3]
    assert [i["kind"] for i in body["items"]] == ["system", "user", "assistant", "tool"]
    assert body["items"][1]["message"] == {"kind": "user", "content": "Where is my refund?"}
    assert body["items"][0]["created_at"].endswith("Z")
    assert body["skipped"] == [] and body["next"] is None and body["next_url"] is None
    assert body["next_position"] == 4


def test_it_pages_by_position(reader, convo):
    body = reader.get(_path(convo), {"limit": 3}).json()
    assert [i["position"] for i in body["items"]] == [0, 1, 2]
    assert isinstance(body["next"], str)
    assert f"cursor={body['next']}" in body["next_url"] and "limit=3" in body["next_url"]
    rest = reader.client.get(body["next_url"], headers={"Authorization": f"Bearer {reader.key}"}).json()
    assert [i["position"] for i in rest["items"]] == [3]
    assert rest["next"] is None
    same = reader.get(_path(convo), {"cursor": body["next"], "limit": 3}).json()
    assert [i["position"] for i in same["items"]] == [3]


def test_a_cursor_of_another_list_is_refused(reader, convo):
    active = reader.get(_path(convo).replace("/messages", "/active"), {"limit": 1}).json()
    refused = reader.get(_path(convo), {"cursor": active["next"]})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_cursor"


def test_it_reads_after_a_position(reader, convo):
    assert [i["position"] for i in reader.get(_path(convo), {"after": 1}).json()["items"]] == [2, 3]
    assert reader.get(_path(convo), {"after": 3}).json()["items"] == []
    assert reader.get(_path(convo), {"after": 10**9}).json()["items"] == []


def test_it_lists_rows_that_no_longer_decode_in_skipped(reader, convo):
    with connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET next_position = 5 WHERE id = %s",
                       [convo._meta.pk.get_db_prep_value(convo.pk, connection)])
    Message.objects.create(conversation=convo, position=4, kind="hologram",
                           content='{"kind": "hologram", "beam": 1}', created_at=convo.created_at)
    store.append_message(conversation_id=convo.pk, message={"kind": "note", "text": "after the hole"})
    body = reader.get(_path(convo)).json()
    assert [i["position"] for i in body["items"]] == [0, 1, 2, 3, 5]
    assert body["skipped"] == [4]


@pytest.mark.parametrize("params", [
    {"after": -2}, {"after": "x"}, {"after": "true"}, {"after": 2**64},
    {"limit": 0}, {"limit": 1001}, {"limit": 10**12}, {"limit": "false"}, {"limit": ""},
])
def test_it_refuses_bad_paging_parameters_with_422(reader, convo, params):
    response = reader.get(_path(convo), params)
    assert response.status_code == 422, response.content
    assert error_of(response)["field"] in params


def test_listing_an_unknown_conversation_is_404(reader):
    assert reader.get(f"/conversations/{uuid.uuid4()}/messages").status_code == 404
    assert reader.get("/conversations/zzz/messages").status_code == 404
