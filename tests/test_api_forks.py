"""POST /api/v1/conversations/{id}/forks."""

import uuid

import pytest

from conversations import store
from conversations.models import AuditEvent, Conversation, Message
from tests.api_support import error_of

pytestmark = pytest.mark.django_db


def _path(c):
    return f"/conversations/{c.pk}/forks"


def test_it_forks_and_answers_the_child(writer, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=1, summary="early")
    response = writer.post(_path(convo), {"position": 2, "title": "Try a voucher"})
    assert response.status_code == 201
    child = response.json()
    assert child["title"] == "Try a voucher"
    assert (child["parent_id"], child["forked_from_position"]) == (str(convo.pk), 2)
    assert child["message_count"] == 3 and child["next_position"] == 3
    assert [a["id"] for a in child["lineage"]] == [str(convo.pk)]
    assert child["latest_checkpoint"]["position"] == 1
    assert child["subject"] == convo.subject


def test_the_child_holds_the_same_bytes_and_the_parent_is_untouched(writer, convo):
    child_id = writer.post(_path(convo), {"position": 3}).json()["id"]
    parent_rows = list(Message.objects.filter(conversation=convo).order_by("position")
                       .values_list("position", "kind", "content", "created_at"))
    child_rows = list(Message.objects.filter(conversation_id=child_id).order_by("position")
                      .values_list("position", "kind", "content", "created_at"))
    assert child_rows == parent_rows
    parent = writer.get(f"/conversations/{convo.pk}/messages").json()["items"]
    child = writer.get(f"/conversations/{child_id}/messages").json()["items"]
    assert child == parent
    # Both go on independently.
    assert writer.post(f"/conversations/{child_id}/messages", {"kind": "note", "text": "x"}).json()["position"] == 4
    assert writer.post(f"/conversations/{convo.pk}/messages", {"kind": "note", "text": "y"}).json()["position"] == 4


def test_it_names_an_untitled_fork(writer, convo):
    assert writer.post(_path(convo), {"position": 1}).json()["title"] == "Refund for order 7 (fork at 1)"
    assert writer.post(_path(convo), {"position": 1, "title": None}).json()["title"].endswith("(fork at 1)")


def test_it_records_the_fork_in_the_audit_log(writer, convo):
    child_id = writer.post(_path(convo), {"position": 0}).json()["id"]
    event = AuditEvent.objects.get(action="conversation.forked")
    assert event.target_id == child_id
    assert event.detail["parent_id"] == str(convo.pk) and event.detail["position"] == 0
    assert event.detail["messages"] == 1 and event.actor == "key:writer"


@pytest.mark.parametrize("body, status, code, field", [
    ({"position": 4}, 422, "position_out_of_range", "position"),
    ({"position": -1}, 422, "invalid_input", "position"),
    ({"position": "2"}, 422, "invalid_input", "position"),
    ({"position": False}, 422, "invalid_input", "position"),
    ({}, 422, "invalid_input", "position"),
    ({"position": 1, "title": "t" * 301}, 422, "invalid_input", "title"),
    ({"position": 1, "title": 3}, 422, "invalid_input", "title"),
    ({"position": 1, "parent": "x"}, 422, "invalid_input", "parent"),
])
def test_it_refuses_bad_forks_and_writes_nothing(writer, convo, body, status, code, field):
    response = writer.post(_path(convo), body)
    assert response.status_code == status, response.content
    error = error_of(response)
    assert (error["code"], error["field"]) == (code, field)
    assert Conversation.objects.count() == 1


def test_forking_an_unknown_or_malformed_conversation_is_404(writer):
    assert writer.post(f"/conversations/{uuid.uuid4()}/forks", {"position": 0}).status_code == 404
    assert writer.post("/conversations/nope/forks", {"position": 0}).status_code == 404
