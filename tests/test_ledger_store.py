"""The ledger's store: task-state versions, the actions ledger's one-performed rule, snapshots, forks."""


import pytest

from conversations import store
from conversations.errors import Conflict, InvalidInput, NotFound
from conversations.ledger import store as ledger
from conversations.ledger.models import Action, TaskStateEvent, WorkspaceSnapshot

pytestmark = pytest.mark.django_db

COMMIT = "a" * 40
OTHER = "b" * 40


@pytest.fixture
def ticket():
    c = store.create_conversation(title="Refund T-40219", subject="customer:7")
    for text in ("customer asks for a refund", "agent looks the order up", "tool: order found"):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": text})
    return c


def refund(conversation, *, status="performed", key="refund:T-40219:SU-88421:oak-shelf:11800", result=None):
    return ledger.record_action(
        conversation_id=conversation.pk, idempotency_key=key, name="issue_refund",
        arguments={"order": "SU-88421", "amount_cents": 11800}, result=result or {"refund_id": "RF-77120"},
        status=status, actor="key:support-bot",
    )


# -- task state -----------------------------------------------------------------------


def test_it_starts_empty_and_versions_each_change(ticket):
    assert TaskStateEvent.objects.current(ticket.pk) is None
    first = ledger.set_state(conversation_id=ticket.pk, state={"order": "SU-88421"}, expected_version=0,
                             actor="key:bot")
    assert first.changed and first.event.version == 1
    second = ledger.set_state(conversation_id=ticket.pk, state={"order": "SU-88421", "decision": "refund"},
                              expected_version=1, actor="key:bot")
    assert second.event.version == 2
    assert second.event.state_json == {"order": "SU-88421", "decision": "refund"}
    assert second.event.changes_json == [{"op": "add", "path": "/decision", "new": "refund"}]
    assert second.event.actor == "key:bot"
    assert TaskStateEvent.objects.current(ticket.pk).version == 2


def test_it_records_the_position_the_change_was_made_at(ticket):
    event = ledger.set_state(conversation_id=ticket.pk, state={"a": 1}, expected_version=0).event
    assert event.position == 2
    store.append_message(conversation_id=ticket.pk, message={"kind": "note", "text": "later"})
    event = ledger.set_state(conversation_id=ticket.pk, state={"a": 2}, expected_version=1).event
    assert event.position == 3


def test_a_stale_expected_version_is_a_conflict_and_writes_nothing(ticket):
    ledger.set_state(conversation_id=ticket.pk, state={"a": 1}, expected_version=0)
    with pytest.raises(Conflict) as exc:
        ledger.set_state(conversation_id=ticket.pk, state={"a": 2}, expected_version=0)
    assert exc.value.code == "version_conflict" and exc.value.field == "expected_version"
    assert "version 1" in exc.value.message
    assert TaskStateEvent.objects.of(ticket.pk).count() == 1


def test_sending_the_same_state_again_makes_no_version(ticket):
    ledger.set_state(conversation_id=ticket.pk, state={"a": 1}, expected_version=0)
    again = ledger.set_state(conversation_id=ticket.pk, state={"a": 1}, expected_version=1)
    assert not again.changed and again.event.version == 1
    # A retry of the first write, whose answer was lost: no conflict, nothing written.
    retried = ledger.set_state(conversation_id=ticket.pk, state={"a": 1}, expected_version=0)
    assert not retried.changed and retried.event.version == 1
    assert TaskStateEvent.objects.of(ticket.pk).count() == 1


def test_the_diff_names_nested_paths_and_escapes_them():
    old = {"order": {"id": "SU-1", "items": [1]}, "a/b": 1, "gone": True}
    new = {"order": {"id": "SU-1", "items": [1, 2], "seller": "Ashcombe"}, "a/b": 2}
    assert ledger.diff_state(old, new) == [
        {"op": "replace", "path": "/order/items", "old": [1], "new": [1, 2]},
        {"op": "add", "path": "/order/seller", "new": "Ashcombe"},
        {"op": "replace", "path": "/a~1b", "old": 1, "new": 2},
        {"op": "remove", "path": "/gone", "old": True},
    ]
    assert ledger.diff_state({"n": 1}, {"n": True}) == [{"op": "replace", "path": "/n", "old": 1, "new": True}]


@pytest.mark.parametrize("state, field", [
    ([1, 2], "state"),
    ({"a": float("nan")}, "state"),
    ({"a": "nul\x00"}, "state"),
    ({"a": "\ud800"}, "state"),
])
def test_it_refuses_state_no_database_can_store(ticket, state, field):
    with pytest.raises(InvalidInput) as exc:
        ledger.set_state(conversation_id=ticket.pk, state=state, expected_version=0)
    assert exc.value.field == field
    assert not TaskStateEvent.objects.exists()


def test_checkpoints_never_change_the_task_state(ticket):
    ledger.set_state(conversation_id=ticket.pk, state={"decision": "refund"}, expected_version=0)
    store.checkpoint_at(conversation_id=ticket.pk, position=2, summary="refund asked for and decided")
    current = TaskStateEvent.objects.current(ticket.pk)
    assert current.version == 1 and current.state_json == {"decision": "refund"}


def test_a_missing_conversation_is_not_found():
    with pytest.raises(NotFound):
        ledger.set_state(conversation_id="3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88", state={}, expected_version=0)


# -- actions --------------------------------------------------------------------------


def test_the_first_attempt_is_performed_and_a_retry_is_already_performed(ticket):
    first = refund(ticket)
    assert first.status == "performed" and first.first_time
    assert first.action == first.attempt and first.action.position == 2
    store.append_message(conversation_id=ticket.pk, message={"kind": "note", "text": "timeout; retrying"})
    retry = refund(ticket, result={"status": "already_performed", "refund_id": "RF-77120"})
    assert retry.status == "already_performed" and not retry.first_time
    assert retry.action.pk == first.action.pk
    assert retry.attempt.pk != first.action.pk
    assert retry.attempt.original_id == first.action.pk
    assert retry.attempt.position == 3
    assert retry.attempt.result_json == {"status": "already_performed", "refund_id": "RF-77120"}
    assert list(Action.objects.of(ticket.pk).order_by("id").values_list("status", flat=True)) == [
        "performed", "already_performed"]


def test_a_failed_attempt_is_followed_by_another_entry_never_edited(ticket):
    failed = refund(ticket, status="failed", result={"error": "gateway timeout"})
    assert failed.status == "failed" and failed.attempt.original_id is None
    done = refund(ticket)
    assert done.status == "performed" and done.attempt.original_id == failed.attempt.pk
    assert Action.objects.get(pk=failed.attempt.pk).status == "failed"


def test_keys_are_unique_across_conversations_without_a_namespace(ticket):
    refund(ticket)
    resumed = store.create_conversation(title="Refund T-40219, resumed on Thursday")
    again = refund(resumed)
    assert again.status == "already_performed"
    assert again.action.conversation_id == ticket.pk


def test_a_namespace_keeps_its_keys_apart(ticket):
    refund(ticket)
    other = store.create_conversation(title="another tenant")
    type(other).objects.filter(pk=other.pk).update(namespace="tenant-b")
    assert refund(other).status == "performed"
    assert Action.objects.filter(status="performed").count() == 2


@pytest.mark.parametrize("kwargs, field", [
    ({"idempotency_key": ""}, "idempotency_key"),
    ({"idempotency_key": "   "}, "idempotency_key"),
    ({"idempotency_key": "k" * 256}, "idempotency_key"),
    ({"idempotency_key": "line\nbreak"}, "idempotency_key"),
    ({"idempotency_key": 7}, "idempotency_key"),
    ({"name": ""}, "name"),
    ({"status": "already_performed"}, "status"),
    ({"status": "done"}, "status"),
    ({"arguments": {"x": float("inf")}}, "arguments"),
    ({"result": "nul\x00"}, "result"),
])
def test_it_refuses_bad_actions_naming_the_field(ticket, kwargs, field):
    args = {"conversation_id": ticket.pk, "idempotency_key": "k1", "name": "issue_refund", **kwargs}
    with pytest.raises(InvalidInput) as exc:
        ledger.record_action(**args)
    assert exc.value.field == field
    assert not Action.objects.exists()


def test_payloads_are_stored_once_and_read_back_byte_for_byte(ticket):
    recorded = ledger.record_action(conversation_id=ticket.pk, idempotency_key="k", name="n",
                                    arguments={"b": 1, "a": "é"}, result=[1, None])
    row = Action.objects.get(pk=recorded.action.pk)
    assert row.arguments == '{"b":1,"a":"é"}' and row.result == "[1,null]"


# -- snapshots ------------------------------------------------------------------------


def test_a_snapshot_is_recorded_once_per_turn_and_repository(ticket):
    made = ledger.record_snapshot(conversation_id=ticket.pk, position=3, repo="/src/shop", commit=COMMIT,
                                  base=OTHER, files_changed=2, insertions=10, deletions=1)
    assert made.created and made.snapshot.ref == f"refs/memoryui/{ticket.pk}/3"
    again = ledger.record_snapshot(conversation_id=ticket.pk, position=3, repo="/src/shop", commit=COMMIT)
    assert not again.created and again.snapshot.pk == made.snapshot.pk
    with pytest.raises(Conflict) as exc:
        ledger.record_snapshot(conversation_id=ticket.pk, position=3, repo="/src/shop", commit=OTHER)
    assert exc.value.code == "snapshot_exists"
    assert ledger.record_snapshot(conversation_id=ticket.pk, position=3, repo="/src/docs", commit=OTHER).created


@pytest.mark.parametrize("kwargs, field", [
    ({"position": 5}, "position"),
    ({"position": -1}, "position"),
    ({"commit": "abc"}, "commit"),
    ({"commit": "A" * 40}, "commit"),
    ({"base": "xyz"}, "base"),
    ({"repo": ""}, "repo"),
    ({"insertions": -1}, "insertions"),
    ({"ref": "refs/heads/main"}, "ref"),
])
def test_it_refuses_bad_snapshots_naming_the_field(ticket, kwargs, field):
    args = {"conversation_id": ticket.pk, "position": 1, "repo": "/src/shop", "commit": COMMIT, **kwargs}
    with pytest.raises(InvalidInput) as exc:
        ledger.record_snapshot(**args)
    assert exc.value.field == field
    assert not WorkspaceSnapshot.objects.exists()


# -- forks ----------------------------------------------------------------------------


def test_a_fork_carries_the_ledger_as_of_its_fork_position(ticket):
    ledger.set_state(conversation_id=ticket.pk, state={"order": "SU-88421"}, expected_version=0)  # at #2
    first = refund(ticket)  # at #2
    ledger.record_snapshot(conversation_id=ticket.pk, position=2, repo="/src", commit=COMMIT)
    store.append_message(conversation_id=ticket.pk, message={"kind": "note", "text": "decided"})
    ledger.set_state(conversation_id=ticket.pk, state={"order": "SU-88421", "decision": "refund"},
                     expected_version=1)  # at #3
    refund(ticket)  # the retry, at #3
    ledger.record_snapshot(conversation_id=ticket.pk, position=3, repo="/src", commit=OTHER)

    fork = store.fork_conversation(conversation_id=ticket.pk, position=2)

    current = TaskStateEvent.objects.current(fork.pk)
    assert current.version == 1 and current.state_json == {"order": "SU-88421"}
    copied = list(Action.objects.of(fork.pk))
    assert [(a.status, a.inherited_from) for a in copied] == [("performed", first.action.pk)]
    assert copied[0].arguments == first.action.arguments and copied[0].created_at == first.action.created_at
    assert list(WorkspaceSnapshot.objects.of(fork.pk).values_list("position", "ref")) == [
        (2, f"refs/memoryui/{ticket.pk}/2")]
    # The parent is untouched.
    assert TaskStateEvent.objects.current(ticket.pk).version == 2
    assert Action.objects.of(ticket.pk).count() == 2


def test_a_fork_continues_the_state_from_its_own_version(ticket):
    ledger.set_state(conversation_id=ticket.pk, state={"a": 1}, expected_version=0)
    fork = store.fork_conversation(conversation_id=ticket.pk, position=2)
    assert ledger.set_state(conversation_id=fork.pk, state={"a": 2}, expected_version=1).event.version == 2


def test_a_retry_in_a_fork_finds_the_parents_action(ticket):
    type(ticket).objects.filter(pk=ticket.pk).update(namespace="sundry")
    first = refund(ticket)
    fork = store.fork_conversation(conversation_id=ticket.pk, position=2)
    assert fork.namespace == "sundry"
    retry = refund(fork)
    assert retry.status == "already_performed" and retry.action.pk == first.action.pk


def test_a_fork_still_knows_after_its_parent_is_gone(ticket):
    first = refund(ticket)
    fork = store.fork_conversation(conversation_id=ticket.pk, position=2)
    later = store.fork_conversation(conversation_id=fork.pk, position=2)
    # What the deletion path does; without a deletion the guards refuse it (test_ledger_invariants_sql).
    from django.db import connection, transaction
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET deleting = %s WHERE id = %s",
                       [True, store._db_uuid(ticket.pk)])
        cursor.execute("DELETE FROM ledger_action WHERE conversation_id = %s", [store._db_uuid(ticket.pk)])
    retry = refund(later)
    assert retry.status == "already_performed"
    assert retry.action.conversation_id == fork.pk and retry.action.inherited_from == first.action.pk
    # Reconciliation counts the refund once: the oldest surviving copy stands in for it.
    rows = list(Action.objects.for_reconciliation().filter(status="performed"))
    assert [(r.conversation_id, r.inherited_from) for r in rows] == [(fork.pk, first.action.pk)]


def test_counts_cover_every_ledger_table(ticket):
    ledger.set_state(conversation_id=ticket.pk, state={"a": 1}, expected_version=0)
    refund(ticket)
    refund(ticket)
    ledger.record_snapshot(conversation_id=ticket.pk, position=0, repo="/src", commit=COMMIT)
    other = store.create_conversation(title="other")
    assert ledger.counts_for([ticket.pk]) == {"task_state_events": 1, "actions": 2, "workspace_snapshots": 1}
    assert ledger.counts_for([other.pk]) == {"task_state_events": 0, "actions": 0, "workspace_snapshots": 0}
