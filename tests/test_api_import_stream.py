"""POST /api/v1/imports takes transcripts of any size up to MEMORYUI_MAX_IMPORT_BYTES, read a
block at a time; past the limit a 413 names it and the ways in that take more. Every other
endpoint keeps its own small limit. A raw body is the file itself, its options in the query."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.test import Client

from conversations.imports.containers import cline_bundle
from conversations.models import Conversation, Message
from tests.api_support import Api, make_key

pytestmark = pytest.mark.django_db
FIX = Path(__file__).parent / "fixtures" / "formats"
SESSION = "2c4e6a8b-0d1f-4a3b-8c5d-7e9f1a2b3c4d"


def long_session(lines: int = 2600) -> str:
    """A Claude Code session of about 3 MB: larger than any other API body may be."""
    out, parent = [], None
    for n in range(lines):
        uid = f"{n:08d}-0000-4000-8000-000000000000"
        kind = "user" if n % 2 == 0 else "assistant"
        message = ({"role": "user", "content": f"question {n} " + "é∑ words " * 120} if kind == "user" else
                   {"id": f"msg_{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": f"answer {n} " + "x" * 1000}]})
        out.append(json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": SESSION, "type": kind,
                               "uuid": uid, "timestamp": "2025-11-02T09:00:00.000Z", "message": message},
                              ensure_ascii=False))
        parent = uid
    return "\n".join(out) + "\n"


@pytest.fixture
def api():
    return Api(Client(), make_key(["read", "write"]))


def test_a_session_larger_than_any_other_body_imports_as_json_content(api, settings):
    text = long_session()
    body = json.dumps({"content": text})
    assert len(body.encode()) > 3 * settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 2
    response = api.post("/imports", raw=body)
    assert response.status_code == 201, response.content[:300]
    assert response.json()["messages"] == 2600
    conversation = Conversation.objects.get(external_id=SESSION)
    assert Message.objects.filter(conversation=conversation).count() == 2600
    assert api.post("/imports", raw=body).json()["unchanged"] is True


def test_the_same_session_as_the_body_itself_is_the_same_conversation(api):
    text = long_session()
    response = api.post("/imports?namespace=big", raw=text.encode(), content_type="application/x-ndjson")
    assert response.status_code == 201 and response.json()["namespace"] == "big"
    again = api.post("/imports", raw=json.dumps({"content": text, "namespace": "big"}))
    assert again.json()["unchanged"] is True and Conversation.objects.count() == 1


def test_past_the_limit_the_answer_names_it_and_the_other_ways_in(api, settings):
    settings.MEMORYUI_MAX_IMPORT_BYTES = 100_000
    response = api.post("/imports", raw=json.dumps({"content": long_session(200)}))
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "body_too_large"
    for named in ("100,000 bytes", "MEMORYUI_MAX_IMPORT_BYTES", "manage.py import", "/admin/import/", "zip"):
        assert named in error["message"], named
    assert not Conversation.objects.exists()


def test_every_other_endpoint_keeps_its_small_limit(api, settings):
    big = json.dumps({"title": "x", "meta": {"blob": "y" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10)}})
    response = api.post("/conversations", raw=big)
    assert response.status_code == 413
    assert "MEMORYUI_MAX_IMPORT_BYTES" not in response.json()["error"]["message"]


def test_a_keyed_import_is_fingerprinted_from_its_spool_and_replayed(api):
    text = long_session(300).encode()
    headers = {"Idempotency-Key": "import-once-1"}
    first = api.post("/imports", raw=text, content_type="text/plain", headers=headers)
    second = api.post("/imports", raw=text, content_type="text/plain", headers=headers)
    assert first.status_code == 201 and second.status_code == 201
    assert second.headers.get("Idempotent-Replayed") == "true" and second.json() == first.json()
    other = api.post("/imports", raw=text + b"\n", content_type="text/plain", headers=headers)
    assert other.status_code == 422 and other.json()["error"]["code"] == "idempotency_key_reused"


def test_a_raw_body_takes_its_options_from_the_query_and_refuses_unknown_ones(api):
    text = (FIX / "aider" / ".aider.chat.history.md").read_bytes()
    dry = api.post("/imports?dry_run=true&subject=cust:7", raw=text, content_type="text/markdown")
    assert dry.status_code == 200 and dry.json()["dry_run"] is True and not Conversation.objects.exists()
    assert api.post("/imports?colour=red", raw=text, content_type="text/markdown").status_code == 422
    assert api.post("/imports?dry_run=maybe", raw=text, content_type="text/markdown").status_code == 422
    refused = api.post("/imports", raw=text, content_type="image/png")
    assert refused.status_code == 415 and "text/markdown" in refused.json()["error"]["message"]


def test_a_zip_of_task_folders_as_the_body_imports_each_task(api):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted((FIX / "cline").rglob("*")):
            if f.is_file():
                z.write(f, str(f.relative_to(FIX)))
    response = api.post("/imports", raw=buf.getvalue(), content_type="application/zip")
    assert response.status_code == 201 and len(response.json()["created"]) == 2
    task = FIX / "cline" / "tasks" / "1761900000123"
    bundle = cline_bundle((task / "api_conversation_history.json").read_bytes(),
                          (task / "ui_messages.json").read_bytes(), task.name).decode()
    assert api.post("/imports", {"content": bundle}).json()["unchanged"] is True


def test_content_with_a_lone_surrogate_or_a_raw_control_character_is_refused(api):
    assert api.post("/imports", raw='{"content": "\\ud83d x"}').status_code == 422
    bad = api.post("/imports", raw=b'{"content": "a\x01b"}')
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"
