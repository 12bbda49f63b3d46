"""Small things a reader meets on the pages: receipts name what they count, the fork tree
follows the record, the API docs lead back into the app."""

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
