"""Every 413 and 422 names the field of the kind concerned: a journal
kind's field is `text`, a chat kind's `content`, a tool call's `tool_calls.N.arguments`;
in a batch `messages.N.<field>`. Before, every oversized message was blamed on
`content`, so a `note` over 1 MiB in a batch got `messages.1.content`.
"""

import pytest
from django.conf import settings

from conversations import store
from conversations.message_schema import CHAT_KINDS, JOURNAL_KINDS
from conversations.models import Message
from tests.api_support import Api, error_of, make_key

pytestmark = pytest.mark.django_db

BIG = "x" * (settings.MEMORYUI_MAX_MESSAGE_BYTES + 1)


@pytest.fixture
def convo():
    return store.create_conversation(title="c")


def oversized(kind: str) -> tuple[dict, str]:
    if kind in JOURNAL_KINDS:
        return {"kind": kind, "text": BIG}, "text"
    if kind == "tool":
        return {"kind": "tool", "tool_call_id": "c1", "content": BIG}, "content"
    return {"kind": kind, "content": BIG}, "content"


OVERSIZED_PARTS = [
    ({"kind": "assistant", "content": "calling", "tool_calls": [
        {"id": "c0", "name": "f", "arguments": {}}, {"id": "c1", "name": "f", "arguments": {"q": BIG}}]},
     "tool_calls.1.arguments"),
    ({"kind": "assistant", "tool_calls": [{"id": "c0", "name": "f", "arguments": BIG}]}, "tool_calls.0.arguments"),
    ({"kind": "user", "content": [{"type": "text", "text": "look"}, {"type": "text", "text": BIG}]}, "content.1.text"),
    ({"kind": "user", "content": [{"type": "text", "text": "look"},
                                  {"type": "image", "source": {"type": "base64", "data": BIG}}]}, "content.1.source"),
    ({"kind": "note", "text": "short", "meta": {"usage": {"input_tokens": 3}, "trace": BIG}}, "meta"),
    ({"kind": "user", "content": [{"type": "text", "text": "y" * 40000}] * 30}, "content"),
]


@pytest.mark.parametrize("kind", CHAT_KINDS + JOURNAL_KINDS)
def test_an_oversized_message_of_each_kind_is_413_naming_its_field(writer, convo, kind):  # noqa: F811
    message, field = oversized(kind)
    one = writer.post(f"/conversations/{convo.pk}/messages", message)
    assert one.status_code == 413 and error_of(one)["field"] == field, one.content
    assert error_of(one)["code"] == "message_too_large"
    batch = writer.post(f"/conversations/{convo.pk}/messages/batch",
                        {"messages": [{"kind": "user", "content": "fine"}, message]})
    assert batch.status_code == 413 and error_of(batch)["field"] == f"messages.1.{field}", batch.content
    assert not Message.objects.exists()


@pytest.mark.parametrize("message, field", OVERSIZED_PARTS)
def test_the_413_names_the_part_that_makes_up_the_message(writer, convo, message, field):  # noqa: F811
    one = writer.post(f"/conversations/{convo.pk}/messages", message)
    assert one.status_code == 413 and error_of(one)["field"] == field, one.content
    batch = writer.post(f"/conversations/{convo.pk}/messages/batch",
                        {"messages": [{"kind": "note", "text": "fine"}, {"kind": "note", "text": "fine"}, message]})
    assert batch.status_code == 413 and error_of(batch)["field"] == f"messages.2.{field}", batch.content
    assert not Message.objects.exists()


INVALID = [
    ({"kind": "note", "text": " "}, "text"),
    ({"kind": "thought"}, "text"),
    ({"kind": "did", "content": "x"}, "text"),  # a journal kind's field is text (and content is unknown)
    ({"kind": "user", "content": ""}, "content"),
    ({"kind": "user", "text": "x"}, "content"),  # a chat kind's field is content (and text is unknown)
    ({"kind": "system"}, "content"),
    ({"kind": "tool", "content": "ok"}, "tool_call_id"),
    ({"kind": "tool", "tool_call_id": "c1", "content": "ok", "is_error": [True]}, "is_error"),
    ({"kind": "user", "content": 5}, "content"),
    ({"kind": "user", "content": [{"type": "text"}]}, "content.0.text"),
    ({"kind": "assistant", "tool_calls": [{"id": "c1", "name": ""}]}, "tool_calls.0.name"),
    ({"kind": "assistant", "tool_calls": [{"id": "c1", "name": "f", "arguments": 5}]}, "tool_calls.0.arguments"),
    ({"kind": "assistant", "content": [{"type": "text", "text": "  "}]}, "content.0.text"),
    ({"kind": "user", "content": "x", "meta": "m"}, "meta"),
    ({"kind": "chat", "content": "x"}, "kind"),
]


@pytest.mark.parametrize("message, field", INVALID)
def test_an_invalid_message_is_422_naming_the_field_of_its_kind(writer, convo, message, field):  # noqa: F811
    one = writer.post(f"/conversations/{convo.pk}/messages", message)
    assert one.status_code == 422 and error_of(one)["field"] == field, one.content
    batch = writer.post(f"/conversations/{convo.pk}/messages/batch",
                        {"messages": [{"kind": "note", "text": "fine"}, message]})
    assert batch.status_code == 422 and error_of(batch)["field"] == f"messages.1.{field}", batch.content
    assert not Message.objects.exists()


def test_an_oversized_summary_fact_and_ledger_entry_name_their_fields(client, writer, convo):  # noqa: F811
    store.append_message(conversation_id=convo.pk, message={"kind": "note", "text": "a"})
    fold = writer.post(f"/conversations/{convo.pk}/checkpoints", {"position": 0, "summary": BIG})
    assert fold.status_code == 422 and error_of(fold)["field"] == "summary"
    action = writer.post(f"/conversations/{convo.pk}/actions",
                         {"idempotency_key": "k1", "name": "refund", "arguments": {"note": BIG}})
    assert action.status_code == 422 and error_of(action)["field"] == "arguments", action.content
    result = writer.post(f"/conversations/{convo.pk}/actions",
                         {"idempotency_key": "k2", "name": "refund", "result": BIG})
    assert result.status_code == 422 and error_of(result)["field"] == "result", result.content


def test_an_oversized_or_nul_fact_text_is_422_naming_text(client):
    facts = Api(client, make_key(["facts:write"], name="extractor"))
    for text in ("t" * 5000, "a\x00b"):
        response = facts.post("/facts", {"subject": "cust:7", "text": text, "category": "preference",
                                         "importance": 5})
        assert response.status_code == 422 and error_of(response)["field"] == "text", response.content
