"""Small things a reader meets on the pages: receipts name what they count, the fork tree
follows the record, the API docs lead back into the app."""

import re

import pytest

from conversations import store
from conversations.retention.models import DeletionReceipt
from tests.api_support import login_as

pytestmark = pytest.mark.django_db


def test_a_receipt_names_what_it_counts_not_its_tables(client):
    receipt = DeletionReceipt.objects.create(actor="user:boss", kind="subject", conversation_ids=[], counts={
        "conversations": 1, "messages": 4, "ledger_taskstateevent": 2, "imports_sourceentry": 3,
        "conversation_ids_not_found": 0}, filed_verification={"status": "verified"})
    login_as(client, "admin")
    body = client.get(f"/admin/receipts/{receipt.pk}/").content.decode()
    assert "task state events: <strong>2</strong>" in body and "transcript entries: <strong>3</strong>" in body
    assert ">ledger_taskstateevent:" not in body and 'title="ledger_taskstateevent"' in body


def test_the_fork_tree_lists_children_where_they_branch_off(client):
    parent = store.create_conversation(title="Root")
    store.append_messages(conversation_id=parent.pk, messages=[{"kind": "note", "text": f"r{i}"} for i in range(6)])
    late = store.fork_conversation(conversation_id=parent.pk, position=5, title="Fork at five")
    early = store.fork_conversation(conversation_id=parent.pk, position=1, title="Fork at one")
    login_as(client, "auditor")
    body = client.get(f"/conversations/{parent.pk}/").content.decode()
    assert body.index(str(early.pk)) < body.index(str(late.pk))


def test_the_api_docs_lead_back_into_the_app(client):
    login_as(client, "auditor")
    body = client.get("/api/v1/docs").content.decode()
    assert '<a href="/">← Back to memoryui</a>' in body


def test_the_import_preview_counts_a_fork_as_its_page_then_shows_it(client, tmp_path, settings):
    from pathlib import Path

    from django.core.files.uploadedfile import SimpleUploadedFile

    from conversations.models import Conversation

    settings.MEMORYUI_DATA_DIR = tmp_path
    fixture = Path(__file__).parent / "fixtures" / "formats" / "claude_code_session.jsonl"
    login_as(client, "admin")
    preview = client.post("/admin/import/", {"file": SimpleUploadedFile("s.jsonl", fixture.read_bytes()),
                                             "format": "auto", "namespace": "shop"}).content.decode()
    assert "(6 copied from its parent)" in preview
    token = preview.split('name="token" value="', 1)[1].split('"', 1)[0]
    client.post("/admin/import/", {"token": token, "confirm": "1", "format": "auto", "namespace": "shop"})
    fork = Conversation.objects.get(parent_relation="fork")
    shown = re.search(r'>(\d+) <span class="muted">\(6 copied from its parent\)', preview)
    assert shown and int(shown[1]) == fork.next_position
