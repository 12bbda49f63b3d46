"""The database enforces the log's invariants, whatever code (or person) runs SQL.

- messages, checkpoints and audit events are never updated;
- messages and checkpoints are deleted only while their conversation is marked
  `deleting` (the store's deletion and pruning paths set it in the transaction);
- audit events are never deleted;
- a message can only be inserted below its conversation's `next_position`, which
  the store bumps first, so a hand-written INSERT cannot open a gap;
- `next_position` never goes down.
"""

from django.db import migrations

from conversations.migration_sql import (
    UNLESS_CONVERSATION_DELETING,
    postgres_trigger,
    sqlite_no_delete,
    sqlite_no_update,
    sqlite_refusal,
)

CONV = "conversations_conversation"
MSG = "conversations_message"
CKPT = "conversations_checkpoint"
AUDIT = "conversations_auditevent"

NEXT_POSITION_NOT_HANDED_OUT = (
    f"NEW.position >= COALESCE((SELECT next_position FROM {CONV} WHERE id = NEW.conversation_id), 0)")

SQLITE_FORWARD = [
    sqlite_no_update("message_no_update", MSG, "a message row"),
    sqlite_refusal("message_guard_delete", MSG, "DELETE",
                   "append-only: messages are deleted only with their conversation", when=UNLESS_CONVERSATION_DELETING),
    sqlite_refusal("message_guard_insert", MSG, "INSERT",
                   "positions are assigned by the store: this position was not handed out",
                   when=NEXT_POSITION_NOT_HANDED_OUT),
    sqlite_no_update("checkpoint_no_update", CKPT, "a checkpoint row"),
    sqlite_refusal("checkpoint_guard_delete", CKPT, "DELETE",
                   "append-only: checkpoints are deleted only with their conversation",
                   when=UNLESS_CONVERSATION_DELETING),
    sqlite_refusal("conversation_position_monotonic", CONV, "UPDATE OF next_position", "next_position never goes down",
                   when="NEW.next_position < OLD.next_position"),
    sqlite_no_update("auditevent_no_update", AUDIT, "an audit event"),
    sqlite_no_delete("auditevent_no_delete", AUDIT, "an audit event"),
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in (
        "message_no_update",
        "message_guard_delete",
        "message_guard_insert",
        "checkpoint_no_update",
        "checkpoint_guard_delete",
        "conversation_position_monotonic",
        "auditevent_no_update",
        "auditevent_no_delete",
    )
]

POSTGRES_FORWARD = [
    """CREATE OR REPLACE FUNCTION memoryui_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'append-only: % rows are never %d', TG_TABLE_NAME, lower(TG_OP)
        USING ERRCODE = 'integrity_constraint_violation'; END $$""",
    f"""CREATE OR REPLACE FUNCTION memoryui_guard_child_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM {CONV} WHERE id = OLD.conversation_id AND deleting) THEN
            RAISE EXCEPTION 'append-only: % rows are deleted only with their conversation', TG_TABLE_NAME
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END $$""",
    f"""CREATE OR REPLACE FUNCTION memoryui_guard_message_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.position >= COALESCE((SELECT next_position FROM {CONV} WHERE id = NEW.conversation_id), 0) THEN
            RAISE EXCEPTION 'positions are assigned by the store: position % was not handed out', NEW.position
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END $$""",
    """CREATE OR REPLACE FUNCTION memoryui_position_monotonic() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.next_position < OLD.next_position THEN
            RAISE EXCEPTION 'next_position never goes down' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END $$""",
    postgres_trigger("message_no_update", MSG, "UPDATE"),
    postgres_trigger("message_guard_delete", MSG, "DELETE", "memoryui_guard_child_delete"),
    postgres_trigger("message_guard_insert", MSG, "INSERT", "memoryui_guard_message_insert"),
    postgres_trigger("checkpoint_no_update", CKPT, "UPDATE"),
    postgres_trigger("checkpoint_guard_delete", CKPT, "DELETE", "memoryui_guard_child_delete"),
    postgres_trigger("conversation_position_monotonic", CONV, "UPDATE OF next_position", "memoryui_position_monotonic"),
    postgres_trigger("auditevent_no_update", AUDIT, "UPDATE"),
    postgres_trigger("auditevent_no_delete", AUDIT, "DELETE"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {name} ON {table}"
    for name, table in (
        ("message_no_update", MSG),
        ("message_guard_delete", MSG),
        ("message_guard_insert", MSG),
        ("checkpoint_no_update", CKPT),
        ("checkpoint_guard_delete", CKPT),
        ("conversation_position_monotonic", CONV),
        ("auditevent_no_update", AUDIT),
        ("auditevent_no_delete", AUDIT),
    )
] + [
    "DROP FUNCTION IF EXISTS memoryui_refuse()",
    "DROP FUNCTION IF EXISTS memoryui_guard_child_delete()",
    "DROP FUNCTION IF EXISTS memoryui_guard_message_insert()",
    "DROP FUNCTION IF EXISTS memoryui_position_monotonic()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {schema_editor.connection.vendor}")
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return run


forward = _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD})
backward = _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD})

ROLES = ("auditor", "reviewer", "admin")


def create_roles(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.RunPython(forward, backward),
        migrations.RunPython(create_roles, migrations.RunPython.noop),
    ]
