"""Every format through every door.

A file imports to the same conversations, rows, checkpoints and lineage whether it
comes through `manage.py import`, the admin page or POST /api/v1/imports, and again
through the same door creates nothing. Each export format gives the same bytes from
the API's export endpoint, the conversation page's button and `manage.py export`,
and what it gives imports back."""

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations import store
from conversations.errors import CheckpointSplitsToolCall, NothingToSend
from conversations.export import export_stream
from conversations.formats.requests import openai_text
from conversations.imports import importer
from conversations.message_schema import JOURNAL_KINDS
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from tests.api_support import Api, login_as, make_key
from tests.retention_support import delete_conversations

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]
FIX = Path(__file__).parent / "fixtures" / "formats"
NAMESPACE = "doors"

FILES = {
    "claude-code": "claude_code_session.jsonl",
    "codex": "codex_rollout.jsonl",
    "openai-chat": "openai_chat.json",
    "openai-responses": "openai_responses.json",
    "anthropic": "anthropic_request.json",
    "journal": "journal.jsonl",
    "memoryui": None,  # made in the test: an export of a conversation with a checkpoint and a fork
}
EXPORTS = ["memoryui", "claude-code", "openai-chat", "anthropic", "gemini"]


def memoryui_file() -> str:
    parent = store.create_conversation(title="Refund for order 1182", subject="cust:9", meta={"team": "support"})
    for m in ({"kind": "user", "content": "Where is my refund?"},
              {"kind": "assistant", "content": "Looking.", "tool_calls": [{"id": "c1", "name": "order",
                                                                          "arguments": {"id": 1182}}]},
              {"kind": "tool", "tool_call_id": "c1", "name": "order", "content": "refunded 2025-10-02"},
              {"kind": "assistant", "content": "It was refunded on 2 October."}):
        store.append_message(conversation_id=parent.pk, message=m)
    store.checkpoint_at(conversation_id=parent.pk, position=2, summary="The customer asked about a refund.")
    child = store.fork_conversation(conversation_id=parent.pk, position=2)
    store.append_message(conversation_id=child.pk, message={"kind": "note", "text": "try the other answer"})
    text = "".join(export_stream(parent.pk, "memoryui").chunks) + "".join(export_stream(child.pk, "memoryui").chunks)
    delete_conversations(child.pk, parent.pk)
    return text


def content_of(fmt: str) -> str:
    return memoryui_file() if FILES[fmt] is None else (FIX / FILES[fmt]).read_text()


def shape() -> list:
    """What a person reads afterwards: each live conversation with its lineage, rows and folds."""
    convs = list(Conversation.objects.live().order_by("created_at", "id"))
    index = {c.pk: i for i, c in enumerate(sorted(convs, key=lambda c: (c.parent_relation, c.title)))}
    out = []
    for c in convs:
        rows = list(Message.objects.filter(conversation=c).order_by("position").values_list("position", "kind",
                                                                                           "content"))
        folds = list(Checkpoint.objects.filter(conversation=c).order_by("message_position")
                     .values_list("message_position", "summary"))
        out.append((c.title, c.namespace, c.external_id, c.subject, c.parent_relation, c.forked_from_position,
                    index.get(c.parent_id), rows, folds))
    return sorted(out, key=lambda s: (s[4], s[0]))


class Rollback(Exception):
    pass


def reference(text: str) -> list:
    """The shape the importer's own function gives the file, rolled back."""
    found = []
    try:
        with transaction.atomic():
            importer.import_text(text, namespace=NAMESPACE)
            found.extend(shape())
            raise Rollback
    except Rollback:
        pass
    assert not Conversation.objects.exists()
    return found


class Doors:
    """One client per door, made once per test."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.admin = Client()
        login_as(self.admin, "admin")
        self.auditor = Client()
        login_as(self.auditor, "auditor")
        self.writer = Api(Client(), make_key(["read", "write"], name="importer"))
        self.reader = Api(Client(), make_key(["read"], name="reader"))


@pytest.fixture
def doors(tmp_path):
    return Doors(tmp_path)


def by_command(doors, fmt, text) -> str:
    path = doors.tmp_path / ("session.jsonl" if FILES[fmt] is None else FILES[fmt])
    path.write_text(text)
    out = io.StringIO()
    call_command("import", str(path), "--namespace", NAMESPACE, stdout=out)
    return out.getvalue()


def by_page(doors, fmt, text) -> str:
    page = doors.admin
    name = "session.jsonl" if FILES[fmt] is None else FILES[fmt]
    preview = page.post("/admin/import/", {"file": SimpleUploadedFile(name, text.encode()), "format": "auto",
                                           "namespace": NAMESPACE})
    assert preview.status_code == 200, preview.content[:400]
    html = preview.content.decode()
    if 'name="token" value="' not in html:  # nothing to confirm: it is there already
        return html
    token = html.split('name="token" value="')[1].split('"')[0]
    done = page.post("/admin/import/", {"token": token, "confirm": "1", "format": fmt, "namespace": NAMESPACE,
                                        "name": name})
    assert done.status_code == 200, done.content[:400]
    return done.content.decode()


def by_api(doors, fmt, text) -> str:
    response = doors.writer.post("/imports", {"content": text, "namespace": NAMESPACE})
    assert response.status_code in (200, 201), response.content[:400]
    assert (response.status_code == 201) == bool(response.json()["created"])
    return response.content.decode()


DOORS = {"command": by_command, "page": by_page, "api": by_api}


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("fmt", list(FILES))
def test_each_format_imports_alike_through_each_door_and_again_creates_nothing(doors, fmt, door):
    text = content_of(fmt)
    expected = reference(text)
    assert expected and any(rows for *_, rows, _folds in expected)
    DOORS[door](doors, fmt, text)
    assert shape() == expected
    counts = (Conversation.objects.count(), Message.objects.count(), Checkpoint.objects.count())
    again = DOORS[door](doors, fmt, text)
    assert (Conversation.objects.count(), Message.objects.count(), Checkpoint.objects.count()) == counts
    assert shape() == expected
    # ... and says so: nothing new.
    assert {"command": "0 conversation(s) created", "page": "Nothing new", "api": '"unchanged": true'}[door] in again


# ---- exports ------------------------------------------------------------------------------


def by_export_api(doors, cid, fmt) -> str:
    response = doors.reader.get(f"/conversations/{cid}/export", {"format": fmt})
    assert response.status_code == 200 and response.streaming
    return b"".join(response.streaming_content).decode()


def by_export_page(doors, cid, fmt) -> str:
    page = doors.auditor
    assert f'/conversations/{cid}/export.{fmt}"'.encode() in page.get(f"/conversations/{cid}/").content
    response = page.get(f"/conversations/{cid}/export.{fmt}")
    assert response.status_code == 200 and response.streaming
    return b"".join(response.streaming_content).decode()


def by_export_command(doors, cid, fmt) -> str:
    out = io.StringIO()
    call_command("export", str(cid), "--format", fmt, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("fmt", EXPORTS)
def test_each_export_format_gives_the_same_bytes_through_each_door_and_imports_back(doors, fmt):
    importer.import_text((FIX / FILES["claude-code"]).read_text(), namespace="proj")
    for conversation in Conversation.objects.all():
        expected = "".join(export_stream(conversation.pk, fmt).chunks)
        assert expected.strip()
        for door in (by_export_api, by_export_page, by_export_command):
            assert door(doors, conversation.pk, fmt) == expected, (door.__name__, conversation.title)
        if fmt == "gemini":
            continue  # a request body to send, not a transcript the importer reads
        back = importer.import_text(expected, format="auto", namespace="back", dry_run=True)
        assert back.format == fmt and not back.failed and not back.problems
        if fmt == "memoryui":  # the same ids: it is there already, and would create nothing
            assert back.unchanged and not back.created and [c["id"] for c in back.present] == [str(conversation.pk)]
        else:
            assert back.created and back.messages
    assert AuditEvent.objects.filter(action="conversation.exported").count() == 3 * 3


def test_an_export_imports_back_exactly_through_the_command(tmp_path):
    text = memoryui_file()
    importer.import_text(text)
    before = shape()
    parent = Conversation.objects.get(parent_id__isnull=True)
    child = Conversation.objects.get(parent_id=parent.pk)
    call_command("export", str(parent.pk), "-o", str(tmp_path / "a.jsonl"))
    call_command("export", str(child.pk), "--output", str(tmp_path / "b.jsonl"), stderr=io.StringIO())
    assert (tmp_path / "a.jsonl").read_text() + (tmp_path / "b.jsonl").read_text() == text
    assert not list(tmp_path.glob("*.part"))
    delete_conversations(child.pk, parent.pk)
    call_command("import", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), stdout=io.StringIO())
    assert shape() == before


@pytest.mark.parametrize("args,message", [
    (["not-an-id"], "not found"),
    (["0b1c2d3e-4f50-4617-8899-aabbccddeeff"], "not found"),
])
def test_the_export_command_names_what_is_wrong(args, message):
    with pytest.raises(CommandError, match=message):
        call_command("export", *args)


def test_the_export_command_refuses_an_unknown_format():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("export", "0b1c2d3e-4f50-4617-8899-aabbccddeeff", "--format", "csv")


# ---- any conversation exports, and the transcripts import back --------------------------------

# NUL is refused in a message, so none is generated.
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1,
                max_size=40).filter(str.strip)
_content = st.one_of(_text, st.lists(st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.just({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}),
), min_size=1, max_size=3))
_calls = st.lists(st.builds(lambda i, n, a: {"id": f"call_{i}", "name": n, "arguments": a},
                            st.integers(0, 99), st.sampled_from(["Read", "lookup"]),
                            st.one_of(st.dictionaries(st.sampled_from(["p", "q"]), _text, max_size=2), _text)),
                  min_size=1, max_size=2)
_any_message = st.one_of(
    st.builds(lambda c: {"kind": "user", "content": c}, _content),
    st.builds(lambda c: {"kind": "system", "content": c}, _content),
    st.builds(lambda c, k: {"kind": "assistant", "content": c, "tool_calls": k}, _content, _calls),
    st.builds(lambda c: {"kind": "assistant", "content": c, "meta": {"model": "m-1", "usage": {"output_tokens": 3}}},
              _content),
    st.builds(lambda k: {"kind": "assistant", "tool_calls": k}, _calls),
    st.builds(lambda c, e: {"kind": "tool", "tool_call_id": "call_1", "name": "Read", "content": c, "is_error": e},
              _content, st.booleans()),
    st.builds(lambda k, t: {"kind": k, "text": t}, st.sampled_from(["note", "thought", "heard", "said", "did", "woke"]),
              _text),
)


def _says_nothing_to_claude(m: dict) -> bool:
    return m["kind"] in JOURNAL_KINDS or (m["kind"] == "system" and not openai_text(m["content"]).strip())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.lists(_any_message, min_size=1, max_size=10), st.data())
def test_any_conversation_exports_in_every_format_and_the_transcripts_import_back(rows, data):
    c = store.create_conversation(title="any")
    for m in rows:
        store.append_message(conversation_id=c.pk, message=m)
    if data.draw(st.booleans()):
        try:
            store.checkpoint_at(conversation_id=c.pk, position=data.draw(st.integers(0, len(rows) - 1)),
                                summary="so far")
        except CheckpointSplitsToolCall:
            pass  # between a call and its result: refused (tests/test_active_views_valid.py), no fold
    for fmt in EXPORTS:
        try:
            text = "".join(export_stream(c.pk, fmt).chunks)
        except NothingToSend:
            # Journal rows only (left out of a request) and no fold: no request body is valid.
            # Anthropic and Gemini take a system row as text (its other blocks named, as
            # OpenAI's system message names them), so a system row with no block and no
            # text says nothing to them either.
            silent = (lambda m: m["kind"] in JOURNAL_KINDS) if fmt == "openai-chat" else _says_nothing_to_claude
            assert fmt in ("openai-chat", "anthropic", "gemini") and all(silent(m) for m in rows), (fmt, rows)
            continue
        if fmt in ("openai-chat", "anthropic", "gemini"):
            assert isinstance(json.loads(text), (list, dict))
            if fmt == "gemini":
                continue  # a request body to send, not a transcript the importer reads
        else:
            # JSONL lines end at "\n" only (a U+2028 inside a string is not a line end)
            assert all(isinstance(json.loads(line), dict) for line in text.split("\n") if line)
        back = importer.import_text(text, format=fmt, namespace="back", dry_run=True)
        assert not back.failed, (fmt, back.failed)
        if fmt == "claude-code":  # the full record: a row for every row, the fold as a fold
            assert (back.messages, back.checkpoints) == (len(rows), Checkpoint.objects.filter(conversation=c).count())
        if fmt == "memoryui":  # here already (its round trip elsewhere is exact)
            assert back.unchanged and back.present


def test_a_system_image_alone_is_named_to_every_provider():
    """The case the property test above once drew: a system row holding only an image. No
    provider's system prompt takes an image, so each is told one was there, never nothing."""
    c = store.create_conversation(title="image only")
    store.append_message(conversation_id=c.pk, message={"kind": "system", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]})
    anthropic = json.loads("".join(export_stream(c.pk, "anthropic").chunks))
    gemini = json.loads("".join(export_stream(c.pk, "gemini").chunks))
    assert anthropic["system"] == "[image block]" and anthropic["messages"]
    assert gemini["systemInstruction"] == {"parts": [{"text": "[image block]"}]} and gemini["contents"]
    assert json.loads("".join(export_stream(c.pk, "openai-chat").chunks)) == [
        {"role": "system", "content": "[image block]"}]
