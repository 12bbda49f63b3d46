"""The ledger's rows go with their conversation — deletion, pruning, deletion requests —
and a deletion request proves their text is gone from the database files."""

import pytest

from conversations import store
from conversations.ledger import store as ledger
from conversations.ledger.models import Action, TaskStateEvent, WorkspaceSnapshot
from conversations.retention import erasure, erasure_verify
from conversations.retention.pruning import prune_older_than
from tests.retention_support import age, conversation, delete_conversation, raw_bytes_of_database

pytestmark = pytest.mark.django_db(transaction=True)

SUBJECT = "cust:ledger-erasure-5e1d"
STATE_TEXT = "Wilhelmina Oyelaran-Vasquez, 17 Juniper Row"
REFUND_KEY = "refund:wilhelmina-oyelaran:order-Q-55012:8800"
RESULT_TEXT = "refund RF-QX-55012-credited-to-IBAN-DE89370400440532013000"
REPO = "/home/wilhelmina-oyelaran/projects/garden-shop"


def with_ledger(c):
    ledger.set_state(conversation_id=c.pk, state={"customer": STATE_TEXT, "decision": "refund"}, expected_version=0)
    ledger.record_action(conversation_id=c.pk, idempotency_key=REFUND_KEY, name="issue_refund",
                         result={"note": RESULT_TEXT})
    ledger.record_action(conversation_id=c.pk, idempotency_key=REFUND_KEY, name="issue_refund",
                         result={"note": RESULT_TEXT})
    ledger.record_snapshot(conversation_id=c.pk, position=0, repo=REPO, commit="c" * 40,
                           files_changed=1, insertions=2, deletions=0)
    return c


def ledger_rows(c):
    return (TaskStateEvent.objects.of(c.pk).count(), Action.objects.of(c.pk).count(),
            WorkspaceSnapshot.objects.of(c.pk).count())


def test_deleting_a_conversation_deletes_its_ledger_rows():
    doomed = with_ledger(conversation(title="doomed", messages=2))
    kept = conversation(title="kept", messages=2)
    ledger.record_action(conversation_id=kept.pk, idempotency_key="keep-me", name="n")
    delete_conversation(doomed.pk)
    assert ledger_rows(doomed) == (0, 0, 0)
    assert Action.objects.of(kept.pk).count() == 1


def test_pruning_takes_the_ledger_rows_of_the_conversations_it_prunes():
    old = with_ledger(conversation(title="old", messages=2))
    age(old, 400)
    fresh = conversation(title="fresh", messages=1)
    ledger.record_action(conversation_id=fresh.pk, idempotency_key="fresh-key", name="n")
    prune_older_than(days=90)
    assert ledger_rows(old) == (0, 0, 0)
    assert Action.objects.of(fresh.pk).count() == 1


def test_a_fork_keeps_its_copy_when_the_parent_is_deleted():
    parent = with_ledger(conversation(title="parent", messages=2))
    fork = store.fork_conversation(conversation_id=parent.pk, position=1)
    delete_conversation(parent.pk)
    assert ledger_rows(fork) == (1, 2, 1)
    again = ledger.record_action(conversation_id=fork.pk, idempotency_key=REFUND_KEY, name="issue_refund")
    assert again.status == "already_performed"


def test_a_deletion_request_previews_erases_and_verifies_the_ledger():
    about = with_ledger(conversation(title="Refund for W.", subject=SUBJECT, messages=2))
    preview = erasure.preview_deletion(subject=SUBJECT)
    assert ledger.counts_for([about.pk]) == {"task_state_events": 1, "actions": 2, "workspace_snapshots": 1}
    assert preview.owned == {"ledger_taskstateevent": 1, "ledger_action": 2, "ledger_workspacesnapshot": 1}
    erasure_verify.checkpoint_to_disk()
    assert all(t.encode() in raw_bytes_of_database() for t in (STATE_TEXT, RESULT_TEXT, REPO))

    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:dpo")

    assert ledger_rows(about) == (0, 0, 0)
    assert receipt.verification["status"] == "verified", receipt.verification
    data = raw_bytes_of_database()
    assert not any(t.encode() in data for t in (STATE_TEXT, RESULT_TEXT, REPO, REFUND_KEY))
