"""An import is answered before it commits, and a keyed import holds no lock for long.

- Text no answer can carry (an unpaired surrogate, `"a \\ud800 b"`) is refused with
  422 naming where it is, before anything is written, on every door: it used to be
  committed and then answered 500 when the answer failed to encode.
- The import door renders its answer inside the import's last transaction: an answer
  that cannot be rendered leaves nothing committed (tested by making rendering fail).
- An import with an Idempotency-Key writes in short transactions like one without;
  the key is recorded in the last of them, a replay returns the stored answer, and
  the same key meanwhile answers 409 with Retry-After.
"""

import json

import pytest
from django.db import connection
from django.test import Client

from conversations import store
from conversations.imports import api as imports_api
from conversations.imports import store as import_store
from conversations.imports.models import ImportSource, ImportStage, SourceEntry
from conversations.models import Conversation, IdempotencyKey, Message
from tests.api_support import Api, login_as, make_key

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "7e6d5c4b-3a29-4817-a6b5-c4d3e2f1a0b9"


def line(n: int, text: str, session: str = SESSION) -> dict:
    return {"parentUuid": f"u{n - 1}" if n else None, "isSidechain": False, "sessionId": session,
            "type": "user" if n % 2 == 0 else "assistant", "uuid": f"u{n}",
            "timestamp": f"2025-11-02T10:00:{n % 60:02d}.000Z",
            "message": {"role": "user", "content": text} if n % 2 == 0 else
            {"id": f"m{n}", "role": "assistant", "content": [{"type": "text", "text": text}]}}


def transcript(texts, session: str = SESSION) -> str:
    # json.dumps escapes a lone surrogate as \ud800: the bytes are ASCII, the value is not Unicode.
    return "".join(json.dumps(line(n, t, session)) + "\n" for n, t in enumerate(texts))


def nothing_written():
    assert not Conversation.objects.exists()
    assert not Message.objects.exists() and not ImportSource.objects.exists()
    assert not SourceEntry.objects.exists() and not ImportStage.objects.exists()


@pytest.fixture
def writer(client):
    return Api(Client(raise_request_exception=False), make_key(["read", "write"], name="writer"))


# ---- unencodable text is refused before anything is written ----------------------------------


def test_it_refuses_a_transcript_line_with_an_unpaired_surrogate_and_names_the_line(writer):
    response = writer.post("/imports", {"content": transcript(["hello", "fine", "a \ud800 b", "after"])})
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["field"] == "content" and error["message"].startswith("line 3: message.content holds an unpaired")
    nothing_written()


def test_it_refuses_it_in_a_grown_session_too_and_keeps_what_was_there(writer):
    first = transcript(["hello", "fine"])
    assert writer.post("/imports", {"content": first}).status_code == 201
    grown = first + "".join(json.dumps(line(n, t)) + "\n" for n, t in [(2, "ok"), (3, "x \udfff")])
    response = writer.post("/imports", {"content": grown})
    assert response.status_code == 422 and response.json()["error"]["message"].startswith("line 4:")
    assert Message.objects.count() == 2 and SourceEntry.objects.count() == 2


def test_a_paired_surrogate_escape_is_one_character_and_imports(writer):
    response = writer.post("/imports", {"content": transcript(["smile \ud83d\ude00", "ok"])})
    assert response.status_code == 201
    assert "smile \U0001F600" in json.dumps(json.loads(Message.objects.get(position=0).content), ensure_ascii=False)


def test_the_upload_page_refuses_it_with_422_and_imports_nothing(client, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    login_as(client, "admin")
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("s.jsonl", transcript(["hello", "a \ud800 b"]).encode())
    response = client.post("/admin/import/", {"file": upload, "format": "auto", "namespace": "p"})
    assert response.status_code == 422 and "unpaired surrogate" in response.content.decode()
    nothing_written()


RAW_SURROGATE = '"a \\ud800 b"'  # the JSON escape itself, as a client that sent it wrote it


@pytest.mark.parametrize("path,body,field", [
    ("/imports", '{"entries": [{"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", '
                 f'"content": {RAW_SURROGATE}}}}}], "external_id": "s"}}', "entries.0.message.content"),
    ("/imports", '{"format": "openai-responses", "entries": [{"role": "user", "content": ' + RAW_SURROGATE + '}], '
                 '"external_id": "oai"}', "entries.0.content"),
    ("/conversations/{cid}/messages", '{"kind": "user", "content": ' + RAW_SURROGATE + "}", "content"),
    ("/conversations/{cid}/messages/batch", '{"messages": [{"kind": "note", "text": "ok"}, {"kind": "note", '
                                            '"text": ' + RAW_SURROGATE + "}]}", "messages.1.text"),
], ids=["claude-entries", "openai-session", "append", "batch"])
def test_every_json_door_refuses_it_with_422_naming_the_field(writer, path, body, field):
    target = store.create_conversation(title="target")
    response = writer.post(path.format(cid=target.pk), raw=body)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["field"] == field
    assert Conversation.objects.count() == 1 and not Message.objects.exists() and not ImportSource.objects.exists()


# ---- an answer that cannot be rendered leaves nothing committed ------------------------------


@pytest.fixture
def answer_fails(monkeypatch):
    def fail(*args, **kwargs):
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(imports_api, "json_response", fail)


@pytest.mark.parametrize("keyed", [False, True])
def test_a_new_file_whose_answer_fails_is_not_imported(writer, answer_fails, monkeypatch, keyed):
    headers = {"Idempotency-Key": "the-file"} if keyed else None
    response = writer.post("/imports", {"content": transcript(["hello", "answer"])}, headers=headers)
    assert response.status_code == 500
    nothing_written()
    assert not IdempotencyKey.objects.exists()
    monkeypatch.undo()
    # Sent again, it imports: nothing half-written stood in its way.
    response = writer.post("/imports", {"content": transcript(["hello", "answer"])}, headers=headers)
    assert response.status_code == 201 and Message.objects.count() == 2


def test_a_grown_session_whose_answer_fails_appends_nothing(writer, monkeypatch):
    first = transcript(["hello", "fine"])
    assert writer.post("/imports", {"content": first}).status_code == 201
    monkeypatch.setattr(imports_api, "json_response", lambda *a, **k: 1 / 0)
    response = writer.post("/imports", {"content": transcript(["hello", "fine", "more", "again"])})
    assert response.status_code == 500
    assert Message.objects.count() == 2 and SourceEntry.objects.count() == 2
    assert ImportSource.objects.get().entries == 2


@pytest.mark.parametrize("format", ["claude-code", "openai-responses"])
def test_a_batch_of_entries_whose_answer_fails_is_not_stored(writer, answer_fails, format):
    entries = [line(0, "hello")] if format == "claude-code" else [{"role": "user", "content": "hello"}]
    response = writer.post("/imports", {"format": format, "entries": entries, "external_id": "s1"})
    assert response.status_code == 500
    assert not Message.objects.exists() and not SourceEntry.objects.exists()
    assert not Conversation.objects.live().exists()


# ---- a keyed import: short transactions, the key kept with its last one ------------------------


def test_a_keyed_import_writes_in_short_transactions_and_the_same_key_meanwhile_is_told_to_wait(writer, monkeypatch):
    monkeypatch.setattr("conversations.imports.writer.CHUNK_ROWS", 10)
    texts = [f"turn {i} " + "words " * 40 for i in range(200)]
    body = {"content": transcript(texts)}
    real_write, seen = import_store.write_chunk, []

    def write_chunk(**kw):
        # Not nested in a transaction the middleware holds around the whole import.
        seen.append(connection.in_atomic_block)
        real_write(**kw)
        if len(seen) == 2:  # the same request again, while the import runs
            meanwhile = writer.post("/imports", body, headers={"Idempotency-Key": "big-file"})
            seen.append(meanwhile)

    monkeypatch.setattr(import_store, "write_chunk", write_chunk)
    first = writer.post("/imports", body, headers={"Idempotency-Key": "big-file"})
    assert first.status_code == 201, first.content
    flags = [s for s in seen if isinstance(s, bool)]
    assert len(flags) > 5 and not any(flags)
    meanwhile = next(s for s in seen if not isinstance(s, bool))
    assert meanwhile.status_code == 409 and meanwhile["Retry-After"] == "2"
    assert meanwhile.json()["error"]["code"] == "idempotency_key_in_progress"
    kept = IdempotencyKey.objects.get(key="big-file")
    assert kept.status == 201 and json.loads(kept.body) == first.json()
    replay = writer.post("/imports", body, headers={"Idempotency-Key": "big-file"})
    assert replay.status_code == 201 and replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
    assert Message.objects.count() == 200


def test_a_keyed_import_refused_keeps_no_key(writer):
    response = writer.post("/imports", {"content": "not a transcript"}, headers={"Idempotency-Key": "k1"})
    assert response.status_code == 422
    assert not IdempotencyKey.objects.exists()
    # A keyed import that wrote nothing (the file again, unchanged) keeps its answer too.
    assert writer.post("/imports", {"content": transcript(["a", "b"])}).status_code == 201
    again = writer.post("/imports", {"content": transcript(["a", "b"])}, headers={"Idempotency-Key": "k2"})
    assert again.status_code == 200 and again.json()["unchanged"]
    assert IdempotencyKey.objects.get(key="k2").status == 200
