"""POST and GET /api/v1/conversations/{id}/checkpoints."""

import uuid

import pytest

from conversations import store
from conversations.models import AuditEvent, Checkpoint
from tests.api_support import error_of

pytestmark = pytest.mark.django_db


def _path(c):
    return f"/conversations/{c.pk}/checkpoints"


def test_it_creates_a_checkpoint(writer, convo):
    response = writer.post(_path(convo), {"position": 3, "summary": "Refund asked; tool called."})
    assert response.status_code == 201
    body = response.json()
    assert (body["position"], body["summary"], body["created_by"]) == (3, "Refund asked; tool called.", "key:writer")
    cp = Checkpoint.objects.get(pk=body["id"])
    assert cp.message_position == 3
    # A checkpoint deletes nothing.
    assert writer.get(f"/conversations/{convo.pk}/messages").json()["next_position"] == 4
    assert len(writer.get(f"/conversations/{convo.pk}/messages").json()["items"]) == 4


def test_it_records_the_checkpoint_in_the_audit_log_without_text(writer, convo):
    writer.post(_path(convo), {"position": 1, "summary": "a secret summary"})
    event = AuditEvent.objects.get(action="conversation.checkpointed")
    assert (event.actor, event.target_id, event.detail["position"]) == ("key:writer", str(convo.pk), 1)
    assert "secret" not in str(event.detail)


def test_it_lists_checkpoints_oldest_first(reader, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=0, summary="a")
    store.checkpoint_at(conversation_id=convo.pk, position=3, summary="b")
    store.checkpoint_at(conversation_id=convo.pk, position=3, summary="c")
    body = reader.get(_path(convo)).json()
    assert [(i["position"], i["summary"]) for i in body["items"]] == [(0, "a"), (3, "b"), (3, "c")]


def test_a_conversation_without_checkpoints_lists_none(reader, convo):
    assert reader.get(_path(convo)).json() == {"items": [], "next": None, "next_url": None}


@pytest.mark.parametrize("position", [4, 99, 2**62])
def test_a_position_past_the_end_is_422(writer, convo, position):
    response = writer.post(_path(convo), {"position": position, "summary": "s"})
    assert response.status_code == 422
    error = error_of(response)
    assert (error["code"], error["field"]) == ("position_out_of_range", "position")
    assert "between 0 and 3" in error["message"]
    assert Checkpoint.objects.count() == 0


def test_a_checkpoint_before_the_latest_is_409(writer, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=3, summary="s")
    response = writer.post(_path(convo), {"position": 1, "summary": "older"})
    assert response.status_code == 409
    assert error_of(response)["code"] == "checkpoint_before_latest"
    assert Checkpoint.objects.count() == 1


def test_an_empty_conversation_cannot_be_checkpointed(writer):
    c = store.create_conversation()
    response = writer.post(_path(c), {"position": 0, "summary": "s"})
    assert response.status_code == 422
    assert "no messages" in error_of(response)["message"]


@pytest.mark.parametrize("body, field", [
    ({"position": 1}, "summary"),
    ({"summary": "s"}, "position"),
    ({"position": 1, "summary": ""}, "summary"),
    ({"position": 1, "summary": "   "}, "summary"),
    ({"position": True, "summary": "s"}, "position"),
    ({"position": "1", "summary": "s"}, "position"),
    ({"position": 1.0, "summary": "s"}, "position"),
    ({"position": -1, "summary": "s"}, "position"),
    ({"position": 2**64, "summary": "s"}, "position"),
    ({"position": 1, "summary": 7}, "summary"),
    ({"position": 1, "summary": "s", "by": "me"}, "by"),
    ({"position": 1, "summary": "nul\u0000"}, "summary"),
])
def test_it_refuses_bad_fields_with_422(writer, convo, body, field):
    response = writer.post(_path(convo), body)
    assert response.status_code == 422, response.content
    assert error_of(response)["field"] == field
    assert Checkpoint.objects.count() == 0


def test_it_refuses_an_oversized_summary(writer, convo, settings):
    settings.MEMORYUI_MAX_MESSAGE_BYTES = 100
    response = writer.post(_path(convo), {"position": 1, "summary": "s" * 200})
    assert response.status_code in (413, 422)
    assert error_of(response)["field"] == "summary"
    assert Checkpoint.objects.count() == 0


def test_it_refuses_a_body_that_is_not_json(writer, convo):
    assert writer.post(_path(convo), raw="position=1").status_code == 400
    assert writer.post(_path(convo), raw="[1]").status_code == 422
    assert writer.post(_path(convo), raw="{}", content_type="text/plain").status_code == 415


def test_an_unknown_or_malformed_conversation_is_404(writer, reader):
    body = {"position": 0, "summary": "s"}
    assert writer.post(f"/conversations/{uuid.uuid4()}/checkpoints", body).status_code == 404
    assert writer.post("/conversations/x/checkpoints", body).status_code == 404
    assert reader.get(f"/conversations/{uuid.uuid4()}/checkpoints").status_code == 404


def test_a_checkpoint_between_a_call_and_its_result_is_409_naming_the_nearest_allowed_positions(writer, convo):
    # convo: 0 system, 1 user, 2 assistant calling c1, 3 the result of c1.
    response = writer.post(_path(convo), {"position": 2, "summary": "would orphan the result"})
    assert response.status_code == 409
    error = error_of(response)
    assert (error["code"], error["field"]) == ("checkpoint_splits_tool_call", "position")
    assert "c1" in error["message"] and "1 (before) and 3 (after)" in error["message"]
    assert Checkpoint.objects.count() == 0
    assert writer.post(_path(convo), {"position": 3, "summary": "after the result"}).status_code == 201


def test_a_fold_may_not_leave_any_result_of_a_split_reply_behind(writer):
    # An older import kept one assistant row per parallel call, and a journal row between.
    c = store.create_conversation()
    for m in ({"kind": "user", "content": "go"},
              {"kind": "assistant", "tool_calls": [{"id": "a", "name": "n"}]},
              {"kind": "assistant", "tool_calls": [{"id": "b", "name": "n"}]},
              {"kind": "note", "text": "both sent"},
              {"kind": "tool", "tool_call_id": "a", "content": "1"},
              {"kind": "tool", "tool_call_id": "b", "content": "2"},
              {"kind": "assistant", "content": "done"}):
        store.append_message(conversation_id=c.pk, message=m)
    refused = [p for p in range(7) if writer.post(_path(c), {"position": p, "summary": "s"}).status_code == 409]
    assert refused == [1, 2, 3, 4]
