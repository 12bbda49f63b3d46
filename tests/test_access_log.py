"""Every time a person opens a conversation, the access log says who, which and when."""

import pytest
from django.db import IntegrityError, connection, transaction

from conversations import store
from conversations.access.models import ConversationAccess
from conversations.models import Conversation
from conversations.owned import owned_tables
from conversations.retention import erasure, pruning
from tests.api_support import login_as
from tests.retention_support import delete_conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def convo():
    c = store.create_conversation(title="Ticket", subject="cust:access-1")
    for i in range(3):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": f"row {i}"})
    return c


def _log():
    return list(ConversationAccess.objects.order_by("id").values_list("actor", "conversation_id", "via", "detail"))


def test_opening_the_page_an_export_and_what_the_model_saw_are_each_recorded(client, convo):
    login_as(client, "auditor", "ann")
    assert client.get(f"/conversations/{convo.pk}/").status_code == 200
    # Paging and htmx swaps inside the open page are the same opening.
    client.get(f"/conversations/{convo.pk}/?after=0", headers={"HX-Request": "true", "HX-Target": "record-more"})
    b"".join(client.get(f"/conversations/{convo.pk}/export.jsonl").streaming_content)
    assert client.get(f"/conversations/{convo.pk}/saw/2/").status_code == 200
    assert _log() == [("user:ann", convo.pk, "page", ""), ("user:ann", convo.pk, "export", "jsonl"),
                      ("user:ann", convo.pk, "model_saw", "#2")]
    assert ConversationAccess.objects.get(via="page").at is not None


def test_a_refused_read_is_not_recorded(client, convo):
    login_as(client, "none", "nobody")
    assert client.get(f"/conversations/{convo.pk}/").status_code == 403
    assert _log() == []


def test_admins_see_the_log_with_links_beside_the_facts_access_log(client, convo):
    ConversationAccess.objects.create(actor="user:ann", conversation_id=convo.pk, via="page")
    login_as(client, "auditor", "ann2")
    assert client.get("/admin/access/").status_code == 403
    login_as(client, "admin", "boss")
    body = client.get("/admin/access/").content.decode()
    assert f'href="/conversations/{convo.pk}/"' in body and "user:ann" in body and "conversation page" in body
    assert 'href="/facts/access-log/"' in body or "facts access log" in body
    assert client.get("/admin/access/", {"before": "x"}).status_code == 400
    only = client.get("/admin/access/", {"actor": "user:nobody"}).content.decode()
    assert "No openings recorded with this filter" in only


def test_it_is_registered_as_owned_by_the_conversation():
    assert ConversationAccess in [o.model for o in owned_tables()]


def test_rows_are_never_updated_and_only_deleted_with_their_conversation(convo):
    row = ConversationAccess.objects.create(actor="user:ann", conversation_id=convo.pk, via="page")
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE access_conversationaccess SET actor = 'user:mallory' WHERE id = %s", [row.pk])
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM access_conversationaccess WHERE id = %s", [row.pk])
    delete_conversation(convo.pk)
    assert not ConversationAccess.objects.exists()


def test_pruning_takes_the_rows_with_the_conversation(convo):
    from datetime import timedelta

    from django.utils import timezone

    ConversationAccess.objects.create(actor="user:ann", conversation_id=convo.pk, via="page")
    Conversation.objects.filter(pk=convo.pk).update(last_activity_at=timezone.now() - timedelta(days=400),
                                                         received_at=timezone.now() - timedelta(days=400))
    pruning.prune_older_than(days=90)
    assert not ConversationAccess.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_deletion_request_takes_the_rows_too(convo):
    ConversationAccess.objects.create(actor="user:ann", conversation_id=convo.pk, via="page")
    kept = store.create_conversation(title="kept")
    ConversationAccess.objects.create(actor="user:ann", conversation_id=kept.pk, via="page")
    erasure.execute_deletion(subject="cust:access-1", actor="user:boss")
    assert list(ConversationAccess.objects.values_list("conversation_id", flat=True)) == [kept.pk]
