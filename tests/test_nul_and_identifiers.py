"""NUL and look-alike identifiers, on every door, the same on SQLite and PostgreSQL.

- NUL in any identifier or text field is a 422 naming the field; before, an
  external id with NUL answered 500 on PostgreSQL and was stored as U+FFFD on SQLite,
  and a message holding NUL was accepted (and exported as raw NUL bytes).
- namespace and external_id are NFC, like subjects: "Zoë" composed or decomposed is
  one conversation; with an invisible or direction-changing character it is a 422.
- An imported transcript keeps NUL in its original entry; its message row holds U+FFFD.
"""

import json
import unicodedata

import pytest
from django.utils import timezone

from conversations import store
from conversations.imports import importer
from conversations.imports.models import SourceEntry
from conversations.models import Conversation, Message
from tests.api_support import error_of, login_as

pytestmark = pytest.mark.django_db

NFC = unicodedata.normalize("NFC", "Zoë")
NFD = unicodedata.normalize("NFD", "Zoë")
# The audit's variants: two spellings of the same id, and seven that print like it.
SAME = [NFC, NFD, f" {NFC} "]
LOOK_ALIKES = [
    "Zo\u200bë",  # zero-width space
    "\u202eZoë",  # right-to-left override
    "Zoë\u200e",  # left-to-right mark
    "\ufeffZoë",  # byte order mark
    "Zo\u00adë",  # soft hyphen
    "Zo\u2066ë\u2069",  # an isolate
    "Zo\u200dë",  # zero-width joiner
    "Zo\u061cë",  # Arabic letter mark
    "Zo\u034fë",  # combining grapheme joiner
]


@pytest.mark.parametrize("field", ["external_id", "namespace"])
def test_it_makes_one_conversation_of_every_spelling_of_an_id_or_refuses_it(writer, field):  # noqa: F811
    ids = set()
    for variant in SAME + LOOK_ALIKES:
        body = {"namespace": "ns", "external_id": "session-1", field: variant}
        response = writer.post("/conversations", body)
        if variant in LOOK_ALIKES:
            assert response.status_code == 422, (variant, response.content)
            assert error_of(response)["field"] == field and "invisible" in error_of(response)["message"]
        else:
            assert response.status_code in (200, 201), (variant, response.content)
            ids.add(response.json()["id"])
    assert len(ids) == 1
    conversation = Conversation.objects.get()
    assert getattr(conversation, field) == NFC


def test_a_look_up_normalises_the_id_it_is_given(writer):  # noqa: F811
    created = writer.post("/conversations", {"namespace": NFD, "external_id": NFD}).json()
    found = writer.get("/conversations", {"namespace": NFC, "external_id": NFC}).json()["items"]
    assert [c["id"] for c in found] == [created["id"]]
    assert writer.get("/conversations", {"namespace": NFD}).json()["items"][0]["id"] == created["id"]
    refused = writer.get("/conversations", {"external_id": "Zo\u200bë"})
    assert refused.status_code == 422 and error_of(refused)["field"] == "external_id"


def test_a_row_written_before_normalisation_is_found_and_not_duplicated(writer):  # noqa: F811
    # Rows are not rewritten: one stored decomposed by an older version stays so.
    old = Conversation.objects.create(title="old", namespace=NFD, external_id=NFD)
    again, created = store.get_or_create_conversation(namespace=NFC, external_id=NFC)
    assert again.pk == old.pk and not created
    answer = writer.post("/conversations", {"namespace": NFC, "external_id": NFD})
    assert answer.status_code == 200 and answer.json()["id"] == str(old.pk)
    assert [c["id"] for c in writer.get("/conversations", {"namespace": NFC, "external_id": NFC}).json()["items"]] \
        == [str(old.pk)]
    assert Conversation.objects.count() == 1


def test_a_fork_of_a_conversation_named_in_an_older_form_keeps_its_namespace():
    old = Conversation.objects.create(title="old", namespace="Zo\u200bë")
    store.append_message(conversation_id=old.pk, message={"kind": "note", "text": "a"})
    child = store.fork_conversation(conversation_id=old.pk, position=0, external_id=NFD)
    assert child.namespace == old.namespace and child.external_id == NFC


# ---- NUL: a 422 naming the field, on every door ----------------------------------------

ENTRY = {"parentUuid": None, "type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user",
                                                                                      "content": "x"}}


@pytest.mark.parametrize("path, body, field", [
    ("/conversations", {"external_id": "a\x00b"}, "external_id"),
    ("/conversations", {"namespace": "a\x00b", "external_id": "x"}, "namespace"),
    ("/conversations", {"title": "a\x00b"}, "title"),
    ("/conversations", {"subject": "a\x00b"}, "subject"),
    ("/imports", {"format": "claude-code", "external_id": "a\x00b", "entries": [ENTRY]}, "external_id"),
    ("/imports", {"format": "claude-code", "namespace": "a\x00b", "external_id": "s", "entries": [ENTRY]},
     "namespace"),
    ("/imports", {"format": "journal", "namespace": "a\x00b",
                  "content": '{"kind":"note","text":"x","at":"2025-01-01T00:00:00Z"}\n'}, "namespace"),
    ("/imports", {"format": "openai-responses", "external_id": "a\x00b",
                  "entries": [{"role": "user", "content": "hi"}]}, "external_id"),
    ("/imports", {"format": "claude-code", "external_id": "Zo\u202eë", "entries": [ENTRY]}, "external_id"),
    ("/imports/sessions/clear", {"namespace": "n", "session_id": "a\x00b"}, "session_id"),
])
def test_nul_or_an_invisible_character_in_an_identifier_is_422_and_writes_nothing(writer, path, body, field):  # noqa: F811
    response = writer.post(path, body)
    assert response.status_code == 422, response.content
    assert error_of(response)["field"] == field
    assert not Conversation.objects.exists() and not SourceEntry.objects.exists()


@pytest.mark.parametrize("path, query, field", [
    ("/conversations", {"external_id": "a\x00b"}, "external_id"),
    ("/conversations", {"namespace": "a\x00b"}, "namespace"),
    ("/imports/entries", {"namespace": "a\x00b", "external_id": "s"}, "namespace"),
    ("/imports/entries", {"external_id": "s\x00"}, "external_id"),
    ("/imports/sources", {"prefix": "s\u200b/"}, "prefix"),
    ("/imports/sessions/items", {"session_id": "a\x00b"}, "session_id"),
])
def test_nul_in_a_looked_up_identifier_is_422(writer, path, query, field):  # noqa: F811
    response = writer.get(path, query)
    assert response.status_code == 422, response.content
    assert error_of(response)["field"] == field


@pytest.fixture
def convo():
    return store.create_conversation(title="c")


@pytest.mark.parametrize("message, field", [
    ({"kind": "note", "text": "a\x00b"}, "text"),
    ({"kind": "woke", "text": "\x00"}, "text"),
    ({"kind": "user", "content": "a\x00b"}, "content"),
    ({"kind": "system", "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": "a\x00"}]},
     "content.1.text"),
    ({"kind": "assistant", "tool_calls": [{"id": "c1", "name": "f", "arguments": {"q": "a\x00"}}]},
     "tool_calls.0.arguments.q"),
    ({"kind": "assistant", "tool_calls": [{"id": "c\x001", "name": "f"}]}, "tool_calls.0.id"),
    ({"kind": "assistant", "tool_calls": [{"id": "c1", "name": "f\x00"}]}, "tool_calls.0.name"),
    ({"kind": "tool", "tool_call_id": "c\x00", "content": "ok"}, "tool_call_id"),
    ({"kind": "tool", "tool_call_id": "c", "name": "\x00", "content": "ok"}, "name"),
    ({"kind": "user", "content": "ok", "meta": {"model": "m\x00"}}, "meta.model"),
])
def test_nul_in_a_message_is_422_naming_the_field_on_every_message_door(writer, convo, message, field):  # noqa: F811
    one = writer.post(f"/conversations/{convo.pk}/messages", message)
    assert one.status_code == 422 and error_of(one)["field"] == field, one.content
    batch = writer.post(f"/conversations/{convo.pk}/messages/batch",
                        {"messages": [{"kind": "note", "text": "fine"}, message]})
    assert batch.status_code == 422 and error_of(batch)["field"] == f"messages.1.{field}", batch.content
    with pytest.raises(Exception) as exc:  # the store itself, for every other door
        store.append_messages(conversation_id=convo.pk, messages=[{"kind": "note", "text": "fine"}, message])
    assert exc.value.status == 422 and exc.value.field == f"messages.1.{field}"
    assert not Message.objects.exists()


def test_nul_in_a_checkpoint_summary_and_a_fork_title_is_422(writer, convo):  # noqa: F811
    store.append_message(conversation_id=convo.pk, message={"kind": "note", "text": "a"})
    fold = writer.post(f"/conversations/{convo.pk}/checkpoints", {"position": 0, "summary": "s\x00"})
    assert fold.status_code == 422 and error_of(fold)["field"] == "summary"
    fork = writer.post(f"/conversations/{convo.pk}/forks", {"position": 0, "title": "t\x00"})
    assert fork.status_code == 422 and error_of(fork)["field"] == "title"
    assert Conversation.objects.count() == 1


def test_the_fork_page_refuses_nul_in_the_title(client, convo):
    store.append_message(conversation_id=convo.pk, message={"kind": "note", "text": "a"})
    login_as(client, "auditor")
    response = client.post(f"/conversations/{convo.pk}/fork/0/", {"title": "t\x00"})
    assert response.status_code == 422 and b"NUL" in response.content
    assert Conversation.objects.count() == 1


# ---- an imported transcript: the original keeps NUL, the row holds U+FFFD -----------------

CLAUDE_CODE_WITH_NUL = "\n".join(json.dumps(e) for e in [
    {"parentUuid": None, "type": "user", "uuid": "u1", "sessionId": "s-nul", "message": {
        "role": "user", "content": "read the file"}},
    {"parentUuid": "u1", "type": "assistant", "uuid": "a1", "sessionId": "s-nul", "message": {
        "id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read",
                                                      "input": {"path": "blob.bin"}}]}},
    {"parentUuid": "a1", "type": "user", "uuid": "r1", "sessionId": "s-nul", "message": {
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ELF\x00\x00\x01"}]}},
]) + "\n"


def test_an_imported_nul_is_kept_in_the_original_entry_and_replaced_in_the_message_row(writer):  # noqa: F811
    response = writer.post("/imports", {"format": "claude-code", "content": CLAUDE_CODE_WITH_NUL})
    assert response.status_code == 201, response.content
    assert not response.json()["problems"]
    conversation = Conversation.objects.get()
    rows = [json.loads(m.content) for m in Message.objects.filter(conversation=conversation).order_by("position")]
    assert [r["kind"] for r in rows] == ["user", "assistant", "tool"]
    assert rows[2]["content"] == "ELF\ufffd\ufffd\x01"
    assert all("\\u0000" not in m.content for m in Message.objects.all())
    raws = [json.loads(e.raw) for e in SourceEntry.objects.order_by("seq")]
    assert raws[2]["message"]["content"][0]["content"] == "ELF\x00\x00\x01"  # lossless
    # The original format renders it back; the Markdown export holds no NUL byte.
    entries = writer.get("/imports/entries", {"namespace": response.json()["namespace"], "external_id": "s-nul"})
    assert entries.json()["items"][2]["message"]["content"][0]["content"] == "ELF\x00\x00\x01"
    markdown = writer.get(f"/conversations/{conversation.pk}/export", {"format": "markdown"})
    assert b"\x00" not in b"".join(markdown.streaming_content)
    again = importer.import_text(CLAUDE_CODE_WITH_NUL, format="claude-code", namespace=response.json()["namespace"])
    assert again.unchanged


def test_a_row_stored_with_nul_before_the_rule_exports_to_markdown_without_it(writer, convo):  # noqa: F811
    Conversation.objects.filter(pk=convo.pk).update(next_position=1)  # the position handed out, then the row
    Message.objects.create(conversation=convo, position=0, kind="note", content='{"kind":"note","text":"a\\u0000b"}',
                           created_at=timezone.now())
    markdown = writer.get(f"/conversations/{convo.pk}/export", {"format": "markdown"})
    body = b"".join(markdown.streaming_content)
    assert b"\x00" not in body and "a\ufffdb".encode() in body
