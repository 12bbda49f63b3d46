"""Positions under concurrent writers, and a fork that fails halfway."""

import multiprocessing
import queue

import pytest
from django.db import DatabaseError, connection, transaction

from conversations import chain_verify, reads, store
from conversations.models import Checkpoint, Conversation, Message

from .workers import append_many

WRITERS = 8
APPENDS_EACH = 250


def test_concurrent_writers_get_every_position_exactly_once(transactional_db):
    conversation = store.create_conversation(title="contended")
    db_name = connection.settings_dict["NAME"]
    connection.close()
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [
        ctx.Process(target=append_many, args=(db_name, str(conversation.pk), w, APPENDS_EACH, results))
        for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    outcomes = []
    try:
        for _ in procs:
            outcomes.append(results.get(timeout=240))
    except queue.Empty:
        pytest.fail(f"only {len(outcomes)} of {WRITERS} writers finished; exit codes {[p.exitcode for p in procs]}")
    finally:
        for p in procs:
            if p.is_alive() and len(outcomes) < WRITERS:
                p.terminate()
    for p in procs:
        p.join(timeout=60)
    errors = [e for _, _, errs in outcomes for e in errs]
    assert errors == [], errors[:5]
    handed_out = sorted(pos for _, positions, _ in outcomes for pos in positions)
    total = WRITERS * APPENDS_EACH
    assert handed_out == list(range(total))
    stored = list(Message.objects.filter(conversation=conversation).order_by("position")
                  .values_list("position", flat=True))
    assert stored == list(range(total))
    conversation.refresh_from_db()
    assert conversation.next_position == total
    # Each writer's own messages are in the order it wrote them.
    page = reads.list_messages(conversation.pk)
    for w in range(WRITERS):
        steps = [int(i.message.text.rsplit(" ", 1)[1]) for i in page.items if i.message.text.startswith(f"writer {w} ")]
        assert steps == list(range(APPENDS_EACH))
    # Every writer read the previous row's chain hash in its own transaction: one unbroken chain.
    state = chain_verify.verify_conversation(conversation)
    assert (state.state, state.messages) == ("verified", total), state


FAIL_AT = 50


def _install_failing_trigger(child_marker_position: int):
    """Make the database fail the INSERT of one copied row, as a crash would."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "CREATE TEMP TRIGGER fail_mid_fork BEFORE INSERT ON main.conversations_message "
                f"WHEN NEW.position = {child_marker_position} AND NEW.kind = 'note' "
                "AND (SELECT parent_id FROM conversations_conversation WHERE id = NEW.conversation_id) IS NOT NULL "
                "BEGIN SELECT RAISE(ABORT, 'injected failure halfway through the fork'); END"
            )
        else:
            cursor.execute(
                "CREATE OR REPLACE FUNCTION pg_temp.fail_mid_fork() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF NEW.position = {child_marker_position} "
                "AND (SELECT parent_id FROM conversations_conversation "
                "WHERE id = NEW.conversation_id) IS NOT NULL THEN "
                "RAISE EXCEPTION 'injected failure halfway through the fork'; END IF; RETURN NEW; END $$"
            )
            cursor.execute(
                "CREATE TRIGGER fail_mid_fork BEFORE INSERT ON conversations_message "
                "FOR EACH ROW EXECUTE FUNCTION pg_temp.fail_mid_fork()"
            )


def _drop_failing_trigger():
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("DROP TRIGGER IF EXISTS temp.fail_mid_fork")
        else:
            cursor.execute("DROP TRIGGER IF EXISTS fail_mid_fork ON conversations_message")


@pytest.mark.django_db
def test_a_fork_that_fails_halfway_leaves_no_child():
    parent = store.create_conversation(title="source")
    for i in range(2 * FAIL_AT):
        store.append_message(conversation_id=parent.pk, message={"kind": "note", "text": f"n{i}"})
    store.checkpoint_at(conversation_id=parent.pk, position=10, summary="early fold")
    _install_failing_trigger(FAIL_AT)
    try:
        with pytest.raises(DatabaseError, match="injected failure"):
            with transaction.atomic():
                store.fork_conversation(conversation_id=parent.pk, position=2 * FAIL_AT - 1)
    finally:
        _drop_failing_trigger()
    assert list(Conversation.objects.values_list("pk", flat=True)) == [parent.pk]
    assert Message.objects.exclude(conversation=parent).count() == 0
    assert Checkpoint.objects.exclude(conversation=parent).count() == 0
    # And the parent is untouched; a retry without the fault succeeds.
    assert Message.objects.filter(conversation=parent).count() == 2 * FAIL_AT
    child = store.fork_conversation(conversation_id=parent.pk, position=2 * FAIL_AT - 1)
    assert Message.objects.filter(conversation=child).count() == 2 * FAIL_AT
