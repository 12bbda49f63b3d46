"""Original entries are append-only, in the database as for messages.

- an entry is never updated;
- an entry or a source is deleted only while its conversation is being deleted
  (marked `deleting` by the store's deletion path), or once it no longer exists.
"""

from django.db import migrations

from conversations.migration_sql import WHILE_CONVERSATION_LIVE, postgres_trigger, sqlite_no_update, sqlite_refusal

CONV = "conversations_conversation"
ENTRY = "imports_sourceentry"
SOURCE = "imports_importsource"

SQLITE_FORWARD = [
    sqlite_no_update("sourceentry_no_update", ENTRY, "an original entry"),
    sqlite_refusal("sourceentry_guard_delete", ENTRY, "DELETE",
                   "append-only: original entries are deleted only with their conversation",
                   when=WHILE_CONVERSATION_LIVE),
    sqlite_refusal("importsource_guard_delete", SOURCE, "DELETE",
                   "append-only: an import source is deleted only with its conversation",
                   when=WHILE_CONVERSATION_LIVE),
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS sourceentry_no_update",
    "DROP TRIGGER IF EXISTS sourceentry_guard_delete",
    "DROP TRIGGER IF EXISTS importsource_guard_delete",
]
POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION memoryui_guard_owned_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM {CONV} WHERE id = OLD.conversation_id AND NOT deleting) THEN
            RAISE EXCEPTION 'append-only: % rows are deleted only with their conversation', TG_TABLE_NAME
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END $$""",
    postgres_trigger("sourceentry_no_update", ENTRY, "UPDATE"),
    postgres_trigger("sourceentry_guard_delete", ENTRY, "DELETE", "memoryui_guard_owned_delete"),
    postgres_trigger("importsource_guard_delete", SOURCE, "DELETE", "memoryui_guard_owned_delete"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS sourceentry_no_update ON {ENTRY}",
    f"DROP TRIGGER IF EXISTS sourceentry_guard_delete ON {ENTRY}",
    f"DROP TRIGGER IF EXISTS importsource_guard_delete ON {SOURCE}",
    "DROP FUNCTION IF EXISTS memoryui_guard_owned_delete()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor[schema_editor.connection.vendor]:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("imports", "0001_initial"), ("conversations", "0002_append_only_guards")]

    operations = [
        migrations.RunPython(_run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
                             _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD})),
    ]
