"""A file that makes no message creates nothing, and says so, through every door; asked
explicitly (allow_empty, --allow-empty, the page's box) it is kept as an empty conversation."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from conversations.imports import importer
from conversations.imports.models import ImportSource
from conversations.models import Conversation
from tests.api_support import Api, login_as, make_key

pytestmark = pytest.mark.django_db

SESSION = "4b7d0c1e-2f3a-4b5c-8d9e-0f1a2b3c4d5e"
ONLY_METADATA = {
    "claude-code": "\n".join(json.dumps(o) for o in (
        {"type": "summary", "summary": "Fixing the flaky test", "leafUuid": "0d9c8b7a-0000-4000-8000-000000000001"},
        {"type": "file-history-snapshot", "messageId": "m1", "snapshot": {"trackedFileBackups": {}},
         "isSnapshotUpdate": False},
        {"type": "system", "subtype": "informational", "content": "", "sessionId": SESSION, "parentUuid": None,
         "uuid": "9e8d7c6b-0000-4000-8000-000000000002", "isSidechain": False, "timestamp": "2025-11-02T09:00:00Z"},
    )) + "\n",
    "codex": "\n".join(json.dumps(o) for o in (
        {"timestamp": "2025-11-03T10:00:00Z", "type": "session_meta",
         "payload": {"id": "d0e1f2a3-1111-4222-8333-444455556666", "cwd": "/w"}},
        {"timestamp": "2025-11-03T10:00:01Z", "type": "event_msg", "payload": {"type": "token_count", "info": None}},
    )) + "\n",
    "openai-responses": json.dumps({"object": "response", "id": "resp_empty", "model": "gpt-4.1", "input": [],
                                    "output": [], "usage": {"input_tokens": 4, "output_tokens": 0}}),
}


@pytest.mark.parametrize("fmt", list(ONLY_METADATA))
def test_a_file_with_no_message_creates_nothing_and_says_so(fmt):
    result = importer.import_text(ONLY_METADATA[fmt], format=fmt if fmt != "openai-responses" else "auto")
    assert result.empty and not result.created and result.conversation_id is None
    assert any("no message" in p.reason and "allow_empty" in p.reason for p in result.problems)
    assert not Conversation.objects.exists() and not ImportSource.objects.exists()
    assert result.as_dict()["empty"] is True


@pytest.mark.parametrize("fmt", list(ONLY_METADATA))
def test_asked_explicitly_it_is_kept_as_an_empty_conversation_once(fmt):
    result = importer.import_text(ONLY_METADATA[fmt], allow_empty=True)
    assert not result.empty and len(result.created) == 1 and result.messages == 0
    assert importer.import_text(ONLY_METADATA[fmt], allow_empty=True).unchanged
    assert Conversation.objects.count() == 1


def test_a_dry_run_of_a_file_with_no_message_says_the_same():
    result = importer.import_text(ONLY_METADATA["claude-code"], dry_run=True)
    assert result.empty and result.dry_run and not result.created


def test_the_command_reports_it_and_keeps_it_with_allow_empty(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(ONLY_METADATA["claude-code"])
    out = io.StringIO()
    call_command("import", str(path), stdout=out)
    assert "empty, not imported" in out.getvalue() and "1 with no message" in out.getvalue()
    assert not Conversation.objects.exists()
    call_command("import", str(path), "--allow-empty", stdout=io.StringIO())
    assert Conversation.objects.count() == 1


def test_the_api_reports_it_and_keeps_it_with_allow_empty():
    api = Api(Client(), make_key(["read", "write"]))
    response = api.post("/imports", {"content": ONLY_METADATA["codex"]})
    assert response.status_code == 200 and response.json()["empty"] is True and not response.json()["created"]
    assert not Conversation.objects.exists()
    response = api.post("/imports", {"content": ONLY_METADATA["codex"], "allow_empty": True})
    assert response.status_code == 201 and response.json()["empty"] is False
    assert Conversation.objects.count() == 1
    assert api.post("/imports", {"content": "x", "allow_empty": "yes"}).status_code == 422


def test_the_page_previews_it_as_empty_and_confirms_it_when_the_box_is_ticked():
    page = Client()
    login_as(page, "admin")
    upload = SimpleUploadedFile("s.jsonl", ONLY_METADATA["claude-code"].encode())
    html = page.post("/admin/import/", {"file": upload, "format": "auto"}).content.decode()
    assert "holds no message" in html and 'name="token"' not in html
    upload = SimpleUploadedFile("s.jsonl", ONLY_METADATA["claude-code"].encode())
    html = page.post("/admin/import/", {"file": upload, "format": "auto", "allow_empty": "1"}).content.decode()
    token = html.split('name="token" value="')[1].split('"')[0]
    page.post("/admin/import/", {"token": token, "confirm": "1", "format": "auto", "allow_empty": "1", "name": "s"})
    assert Conversation.objects.count() == 1
