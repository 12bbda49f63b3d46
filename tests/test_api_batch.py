"""POST /conversations/{id}/messages/batch: one step, one transaction, contiguous, all or nothing."""

import json

import pytest

from conversations import store
from conversations.models import Conversation, Message
from tests.api_support import error_of

pytestmark = pytest.mark.django_db

STEP = [
    {"kind": "assistant", "content": "Let me look.",
     "tool_calls": [{"id": "a", "name": "order", "arguments": {"n": 7}},
                    {"id": "b", "name": "refund", "arguments": {"n": 7}}]},
    {"kind": "tool", "tool_call_id": "a", "content": "delivered late"},
    {"kind": "tool", "tool_call_id": "b", "content": "refund possible"},
    {"kind": "note", "text": "Customer was polite.", "meta": {"z": 1, "a": 2}},
]


def batch(api, conversation, messages, query=""):
    return api.post(f"/conversations/{conversation.pk}/messages/batch{query}", {"messages": messages})


def test_it_appends_the_messages_at_contiguous_positions(writer, reader, convo):
    response = batch(writer, convo, STEP)
    assert response.status_code == 201
    assert response.json() == {"first_position": 4, "last_position": 7, "count": 4}
    items = reader.get(f"/conversations/{convo.pk}/messages", {"after": 3}).json()["items"]
    assert [i["position"] for i in items] == [4, 5, 6, 7]
    assert [i["message"] for i in items] == STEP
    times = set(Message.objects.of(convo.pk).filter(position__gte=4).values_list("created_at", flat=True))
    assert len(times) == 1
    convo.refresh_from_db()
    assert convo.next_position == 8


def test_it_stores_each_message_exactly_as_a_single_append_would(writer, convo):
    other = store.create_conversation(title="single")
    for m in STEP:
        store.append_message(conversation_id=other.pk, message=m)
    batch(writer, convo, STEP)
    batched = list(Message.objects.of(convo.pk).filter(position__gte=4).order_by("position")
                   .values_list("kind", "content"))
    single = list(Message.objects.of(other.pk).order_by("position").values_list("kind", "content"))
    assert batched == single


def test_expected_position_applies_to_the_first_message(writer, convo):
    assert batch(writer, convo, STEP[:1], "?expected_position=4").status_code == 201
    late = batch(writer, convo, STEP, "?expected_position=4")
    assert late.status_code == 409 and error_of(late)["code"] == "position_conflict"
    assert Message.objects.of(convo.pk).count() == 5


def test_a_bad_message_names_its_index_and_nothing_is_written(writer, convo):
    bad = STEP[:2] + [{"kind": "tool", "content": "no call id"}] + STEP[3:]
    response = batch(writer, convo, bad)
    assert response.status_code == 422
    error = error_of(response)
    assert error["field"] == "messages.2.tool_call_id", error
    assert error["message"].startswith("messages.2:")
    assert Message.objects.of(convo.pk).count() == 4
    convo.refresh_from_db()
    assert convo.next_position == 4


@pytest.mark.parametrize("item, field", [
    ({"kind": "wizard", "text": "x"}, "messages.1.kind"),
    ("just text", "messages.1"),
    ({"kind": "user", "content": "ok", "colour": "red"}, "messages.1.colour"),
])
def test_every_kind_of_bad_message_is_named(writer, convo, item, field):
    response = batch(writer, convo, [STEP[3], item])
    assert response.status_code == 422
    assert error_of(response)["field"] == field
    assert Message.objects.of(convo.pk).count() == 4


def test_a_message_over_the_limit_is_named(writer, convo, settings):
    settings.MEMORYUI_MAX_MESSAGE_BYTES = 200
    response = batch(writer, convo, [STEP[3], {"kind": "user", "content": "x" * 300}])
    assert response.status_code == 413
    assert error_of(response)["field"] == "messages.1.content"
    assert Message.objects.of(convo.pk).count() == 4


@pytest.mark.parametrize("body, field", [
    ({"messages": []}, "messages"),
    ({"messages": [{"kind": "note", "text": "x"}] * 1001}, "messages"),
    ({"messages": {"kind": "note", "text": "x"}}, "messages"),
    ({}, "messages"),
    ({"messages": [{"kind": "note", "text": "x"}], "extra": 1}, "extra"),
])
def test_it_refuses_a_body_that_is_not_a_batch(writer, convo, body, field):
    response = writer.post(f"/conversations/{convo.pk}/messages/batch", body)
    assert response.status_code == 422
    assert error_of(response)["field"] == field
    assert Message.objects.of(convo.pk).count() == 4


def test_it_takes_a_thousand_messages(writer, convo):
    response = batch(writer, convo, [{"kind": "did", "text": f"step {i}"} for i in range(1000)])
    assert response.json() == {"first_position": 4, "last_position": 1003, "count": 1000}
    assert Message.objects.of(convo.pk).count() == 1004


def test_it_answers_404_for_an_unknown_conversation(writer):
    response = writer.post("/conversations/3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88/messages/batch",
                           {"messages": STEP})
    assert response.status_code == 404


def test_it_needs_the_write_scope(reader, convo):
    assert batch(reader, convo, STEP).status_code == 403
    assert Message.objects.of(convo.pk).count() == 4


def test_it_refuses_a_conversation_being_deleted(writer, convo):
    Conversation.objects.filter(pk=convo.pk).update(deleting=True)
    assert batch(writer, convo, STEP).status_code == 404


def test_the_store_refuses_a_batch_that_is_not_a_list():
    c = store.create_conversation()
    from conversations.errors import InvalidInput

    with pytest.raises(InvalidInput) as exc:
        store.append_messages(conversation_id=c.pk, messages=json.dumps(STEP))
    assert exc.value.field == "messages"
