"""DELETE /api/v1/conversations/{id}: admin scope only; the deletion-request path, with a receipt."""

import uuid

import pytest

from conversations import store
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from conversations.retention.lease import maintenance
from conversations.retention.models import DeletionReceipt
from tests.api_support import Api, error_of, make_key

pytestmark = pytest.mark.django_db


@pytest.mark.django_db(transaction=True)
def test_an_admin_key_deletes_a_conversation_with_its_rows_and_gets_a_receipt(admin_key, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=1, summary="s")
    response = admin_key.delete(f"/conversations/{convo.pk}")
    assert response.status_code == 200
    body = response.json()
    receipt = DeletionReceipt.objects.get(pk=body["receipt_id"])
    assert body == {"deleted": str(convo.pk), "messages": 4, "checkpoints": 1, "receipt_id": str(receipt.pk),
                    "verification": "verified", "receipt_url": f"http://testserver/api/v1/receipts/{receipt.pk}"}
    assert receipt.kind == "conversation" and receipt.conversation_ids == [str(convo.pk)]
    assert not Conversation.objects.filter(pk=convo.pk).exists()
    assert Message.objects.count() == 0 and Checkpoint.objects.count() == 0
    assert admin_key.get(f"/conversations/{convo.pk}").status_code == 404
    assert admin_key.delete(f"/conversations/{convo.pk}").status_code == 404
    assert admin_key.get(f"/receipts/{receipt.pk}").json()["verification"]["status"] == "verified"


def test_it_records_the_deletion_with_counts_and_no_text(admin_key, convo):
    admin_key.delete(f"/conversations/{convo.pk}")
    event = AuditEvent.objects.get(action="deletion.executed")
    assert event.actor == "key:janitor"
    assert event.detail["kind"] == "conversation" and event.detail["conversation_ids"] == [str(convo.pk)]
    assert event.detail["counts"]["messages"] == 4 and event.detail["counts"]["checkpoints"] == 0
    assert AuditEvent.objects.filter(action="deletion.receipt").count() == 1
    assert "refund" not in str(event.detail).lower()


def test_it_answers_409_while_other_maintenance_runs(admin_key, convo):
    with maintenance(kind="prune", actor="user:night-shift"):
        response = admin_key.delete(f"/conversations/{convo.pk}")
    assert response.status_code == 409
    error = error_of(response)
    assert error["code"] == "maintenance_running" and "user:night-shift" in error["message"]
    assert Message.objects.filter(conversation=convo).count() == 4
    assert admin_key.delete(f"/conversations/{convo.pk}").status_code == 200


def test_forks_survive_their_parents_deletion(admin_key, convo):
    child = store.fork_conversation(conversation_id=convo.pk, position=2)
    admin_key.delete(f"/conversations/{convo.pk}")
    body = admin_key.get(f"/conversations/{child.pk}/messages").json()
    assert [i["position"] for i in body["items"]] == [0, 1, 2]


@pytest.mark.parametrize("scopes", [["read"], ["read", "write"], ["facts:read", "facts:write"]])
def test_it_needs_the_admin_scope(client, convo, scopes):
    response = Api(client, make_key(scopes)).delete(f"/conversations/{convo.pk}")
    assert response.status_code == 403
    assert "'admin' scope" in error_of(response)["message"]
    assert Message.objects.filter(conversation=convo).count() == 4
    assert not AuditEvent.objects.filter(action__startswith="deletion.").exists()


def test_it_needs_a_key(client, convo):
    assert Api(client, None).delete(f"/conversations/{convo.pk}").status_code == 401


def test_deleting_an_unknown_or_malformed_conversation_is_404(admin_key):
    assert admin_key.delete(f"/conversations/{uuid.uuid4()}").status_code == 404
    assert admin_key.delete("/conversations/not-an-id").status_code == 404
    assert not AuditEvent.objects.filter(action__startswith="deletion.").exists()
