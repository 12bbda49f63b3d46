"""The access log is append-only: never updated; deleted only while its conversation
is marked `deleting` or once it is gone.

Whatever path deletes a conversation (pruning, an admin's delete, a deletion
request), its access rows go in the same transaction: a trigger on the
conversation's delete removes them, so no path can forget them.
"""

from django.db import migrations

from conversations.migration_sql import WHILE_CONVERSATION_LIVE, postgres_trigger, sqlite_no_update, sqlite_refusal

CONV = "conversations_conversation"
LOG = "access_conversationaccess"

SQLITE_FORWARD = [
    sqlite_no_update("access_no_update", LOG, "an access log row"),
    sqlite_refusal("access_guard_delete", LOG, "DELETE",
                   "append-only: access log rows are deleted only with their conversation",
                   when=WHILE_CONVERSATION_LIVE),
    f"""CREATE TRIGGER access_forget_conversation AFTER DELETE ON {CONV}
    BEGIN DELETE FROM {LOG} WHERE conversation_id = OLD.id; END""",
]
SQLITE_BACKWARD = ["DROP TRIGGER IF EXISTS access_no_update", "DROP TRIGGER IF EXISTS access_guard_delete",
                   "DROP TRIGGER IF EXISTS access_forget_conversation"]

POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION access_guard_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM {CONV} WHERE id = OLD.conversation_id AND NOT deleting) THEN
            RAISE EXCEPTION 'append-only: access log rows are deleted only with their conversation'
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END $$""",
    postgres_trigger("access_no_update", LOG, "UPDATE"),
    postgres_trigger("access_guard_delete", LOG, "DELETE", "access_guard_delete"),
    f"""CREATE OR REPLACE FUNCTION access_forget_conversation() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN DELETE FROM {LOG} WHERE conversation_id = OLD.id; RETURN OLD; END $$""",
    postgres_trigger("access_forget_conversation", CONV, "DELETE", "access_forget_conversation", timing="AFTER"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS access_no_update ON {LOG}",
    f"DROP TRIGGER IF EXISTS access_guard_delete ON {LOG}",
    f"DROP TRIGGER IF EXISTS access_forget_conversation ON {CONV}",
    "DROP FUNCTION IF EXISTS access_guard_delete()",
    "DROP FUNCTION IF EXISTS access_forget_conversation()",
]


def _run(by_vendor):
    def run(apps, schema_editor):
        for sql in by_vendor[schema_editor.connection.vendor]:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("access", "0001_initial"),
        # memoryui_refuse() is defined there.
        ("conversations", "0002_append_only_guards"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
