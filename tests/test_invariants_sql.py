"""docs/DESIGN.md's invariants, attacked with raw SQL: the database itself must refuse."""

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from conversations import store
from conversations.models import AuditEvent, Checkpoint, Conversation, Message

pytestmark = pytest.mark.django_db


def db_id(conversation):
    return Conversation._meta.pk.get_db_prep_value(conversation.pk, connection)


def run_sql(sql, params=()):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return cursor.rowcount


@pytest.fixture
def conversation():
    c = store.create_conversation(title="guarded")
    for i in range(3):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": f"n{i}"})
    store.checkpoint_at(conversation_id=c.pk, position=1, summary="two notes")
    return c


def contents(conversation):
    return list(Message.objects.filter(conversation=conversation).order_by("position")
                .values_list("content", flat=True))


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE conversations_message SET content = '{\"kind\":\"note\",\"text\":\"rewritten\"}' "
        "WHERE conversation_id = %s",
        "UPDATE conversations_message SET position = position + 10 WHERE conversation_id = %s",
        "UPDATE conversations_message SET kind = 'user' WHERE conversation_id = %s AND position = 0",
    ],
)
def test_a_message_row_cannot_be_updated(conversation, sql):
    before = contents(conversation)
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(sql, [db_id(conversation)])
    assert contents(conversation) == before


def test_a_message_row_cannot_be_deleted(conversation):
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql("DELETE FROM conversations_message WHERE conversation_id = %s AND position = 2", [db_id(conversation)])
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql("DELETE FROM conversations_message")
    assert len(contents(conversation)) == 3


def test_a_checkpoint_row_cannot_be_updated_or_deleted(conversation):
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql("UPDATE conversations_checkpoint SET summary = 'other' WHERE conversation_id = %s",
                [db_id(conversation)])
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql("UPDATE conversations_checkpoint SET message_position = 0")
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql("DELETE FROM conversations_checkpoint")
    assert Checkpoint.objects.get(conversation=conversation).summary == "two notes"


def test_a_message_cannot_be_inserted_at_a_position_the_store_did_not_hand_out(conversation):
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with pytest.raises(DatabaseError, match="assigned by the store"):
        run_sql(
            "INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
            "VALUES (%s, 7, 'note', '{}', %s)",
            [db_id(conversation), now],
        )
    # Re-using a handed-out position is a duplicate.
    with pytest.raises(DatabaseError):
        run_sql(
            "INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
            "VALUES (%s, 1, 'note', '{}', %s)",
            [db_id(conversation), now],
        )
    assert len(contents(conversation)) == 3


def test_the_position_counter_never_goes_down(conversation):
    with pytest.raises(DatabaseError, match="never goes down"):
        run_sql("UPDATE conversations_conversation SET next_position = 1 WHERE id = %s", [db_id(conversation)])
    conversation.refresh_from_db()
    assert conversation.next_position == 3


def test_negative_positions_are_refused(conversation):
    with pytest.raises(DatabaseError):
        run_sql(
            "INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
            "VALUES (%s, -1, 'note', '{}', %s)",
            [db_id(conversation), connection.ops.adapt_datetimefield_value(timezone.now())],
        )


def test_deleting_is_allowed_only_on_the_deletion_path(conversation):
    # The store's path: mark the conversation, then delete, in one transaction.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET deleting = %s WHERE id = %s", [True, db_id(conversation)])
        cursor.execute("DELETE FROM conversations_message WHERE conversation_id = %s", [db_id(conversation)])
        assert cursor.rowcount == 3
        cursor.execute("DELETE FROM conversations_checkpoint WHERE conversation_id = %s", [db_id(conversation)])
        cursor.execute("DELETE FROM conversations_conversation WHERE id = %s", [db_id(conversation)])
    assert Message.objects.count() == 0


def test_the_mark_does_not_open_other_conversations(conversation):
    other = store.create_conversation(title="bystander")
    store.append_message(conversation_id=other.pk, message={"kind": "note", "text": "keep me"})
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("UPDATE conversations_conversation SET deleting = %s WHERE id = %s",
                           [True, db_id(conversation)])
            cursor.execute("DELETE FROM conversations_message")
    assert Message.objects.filter(conversation=other).count() == 1
    assert Message.objects.filter(conversation=conversation).count() == 3


def test_the_audit_log_cannot_be_rewritten_or_deleted():
    event = store.record_audit(actor="user:alice", action="conversation.forked", target_id="x", detail={"n": 1})
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql("UPDATE conversations_auditevent SET actor = 'user:mallory'")
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql("DELETE FROM conversations_auditevent")
    assert AuditEvent.objects.get(pk=event.pk).actor == "user:alice"


def test_a_position_is_taken_once_by_the_primary_key(conversation):
    # Belt and braces under the trigger: (conversation, position) is the table's key.
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Message._meta.db_table)
    assert any(c["primary_key"] and sorted(c["columns"]) == ["conversation_id", "position"]
               for c in constraints.values())
    if connection.vendor == "sqlite":
        # Clustered: a conversation's rows sit together in the file, so pruning it frees whole pages.
        with connection.cursor() as cursor:
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'conversations_message'")
            assert cursor.fetchone()[0].rstrip().endswith("WITHOUT ROWID")
    with pytest.raises(DatabaseError):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS message_guard_insert" if connection.vendor == "sqlite"
                           else "DROP TRIGGER IF EXISTS message_guard_insert ON conversations_message")
            cursor.execute(
                "INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
                "VALUES (%s, 1, 'note', '{}', %s)",
                [db_id(conversation), connection.ops.adapt_datetimefield_value(timezone.now())],
            )
    assert len(contents(conversation)) == 3
