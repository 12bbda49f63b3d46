"""The database keeps the ledger's rows as the store wrote them, whatever code runs SQL.

- task-state events, actions and workspace snapshots are never updated;
- they are deleted only while their conversation is marked `deleting` (the
  store's deletion path, pruning and deletion requests set it in the transaction);
- a task-state event takes the next version of its conversation, no gap, no
  duplicate (the unique (conversation, version) constraint refuses duplicates);
- one `performed` entry per (namespace, idempotency key): migration 0001's
  partial unique index `ledger_action_performed_once`.
"""

from django.db import migrations

from conversations.migration_sql import UNLESS_CONVERSATION_DELETING, postgres_trigger, sqlite_no_update, sqlite_refusal

CONV = "conversations_conversation"
STATE = "ledger_taskstateevent"
ACTION = "ledger_action"
SNAPSHOT = "ledger_workspacesnapshot"
GUARDED = ((STATE, "taskstate"), (ACTION, "action"), (SNAPSHOT, "snapshot"))

SQLITE_FORWARD = [
    stmt
    for table, short in GUARDED
    for stmt in (
        sqlite_no_update(f"ledger_{short}_no_update", table, f"a {short} row", indent=8),
        sqlite_refusal(f"ledger_{short}_guard_delete", table, "DELETE",
                       f"append-only: {short} rows are deleted only with their conversation",
                       when=UNLESS_CONVERSATION_DELETING, indent=8),
    )
] + [
    sqlite_refusal("ledger_taskstate_next_version", STATE, "INSERT",
                   "task state versions are assigned by the store: not the next version",
                   when=f"NEW.version <> COALESCE((SELECT MAX(version) FROM {STATE} "
                        "WHERE conversation_id = NEW.conversation_id), 0) + 1"),
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS ledger_{short}_{what}" for _, short in GUARDED for what in ("no_update", "guard_delete")
] + ["DROP TRIGGER IF EXISTS ledger_taskstate_next_version"]

POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION ledger_guard_state_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.version <> COALESCE((SELECT MAX(version) FROM {STATE} WHERE conversation_id = NEW.conversation_id), 0) + 1
        THEN
            RAISE EXCEPTION 'task state versions are assigned by the store: % is not the next version', NEW.version
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END $$""",
] + [
    stmt
    for table, short in GUARDED
    for stmt in (
        postgres_trigger(f"ledger_{short}_no_update", table, "UPDATE"),
        postgres_trigger(f"ledger_{short}_guard_delete", table, "DELETE", "memoryui_guard_child_delete"),
    )
] + [
    postgres_trigger("ledger_taskstate_next_version", STATE, "INSERT", "ledger_guard_state_version"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS ledger_{short}_{what} ON {table}"
    for table, short in GUARDED for what in ("no_update", "guard_delete")
] + [
    f"DROP TRIGGER IF EXISTS ledger_taskstate_next_version ON {STATE}",
    "DROP FUNCTION IF EXISTS ledger_guard_state_version()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {schema_editor.connection.vendor}")
        for sql in statements:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0001_initial"),
        # memoryui_refuse() and memoryui_guard_child_delete() are defined there.
        ("conversations", "0002_append_only_guards"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
