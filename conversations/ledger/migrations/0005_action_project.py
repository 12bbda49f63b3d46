"""An action belongs to its conversation's project, and a business key is unique per project:
the same key recorded in two projects is two actions, each `performed` once, and a lookup by
key (a retry, a resumed thread, a fork) finds only its own project's entries.

The column is added in place (conversations/migration_sql.py: the append-only guards stay);
rows of conversations outside `default` take their conversation's project with the no-update
guard off for this one statement, as migration 0003 sealed rows. On PostgreSQL the row-level
security policy reads the column itself instead of the conversation's."""

from django.db import migrations, models
from django.db.models import Q

from conversations.migration_sql import (
    add_project_column,
    own_project,
    postgresql_only,
    scoped_managers,
    sqlite_no_update,
    via_parent,
)

ACTION, CONV = "ledger_action", "conversations_conversation"
GUARD = "ledger_action_no_update"
FILL = (f"UPDATE {ACTION} SET project_id = (SELECT c.project_id FROM {CONV} c WHERE c.id = {ACTION}.conversation_id) "
        f"WHERE project_id <> (SELECT c.project_id FROM {CONV} c WHERE c.id = {ACTION}.conversation_id)")


def take_conversation_projects(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        statements = [f"ALTER TABLE {ACTION} DISABLE TRIGGER {GUARD}", FILL, f"ALTER TABLE {ACTION} ENABLE TRIGGER {GUARD}"]
    else:  # the trigger made again exactly as ledger 0002 made it
        statements = [f"DROP TRIGGER IF EXISTS {GUARD}", FILL, sqlite_no_update(GUARD, ACTION, "a action row", indent=8)]
    for sql in statements:
        schema_editor.execute(sql, params=None)


def _indexes(leading: str):
    def run(apps, schema_editor):
        for sql in ("DROP INDEX IF EXISTS ledger_action_performed_once", "DROP INDEX IF EXISTS ledger_action_key_idx",
                    f"CREATE UNIQUE INDEX ledger_action_performed_once ON {ACTION} ({leading}namespace, "
                    "idempotency_key) WHERE status = 'performed' AND inherited_from IS NULL",
                    f"CREATE INDEX ledger_action_key_idx ON {ACTION} ({leading}namespace, idempotency_key, id)"):
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("ledger", "0004_row_level_security")]

    operations = [
        add_project_column(model_name="action", table=ACTION),
        migrations.RunPython(take_conversation_projects, migrations.RunPython.noop),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(_indexes("project_id, "), _indexes(""))],
            state_operations=[
                migrations.RemoveIndex(model_name="action", name="ledger_action_key_idx"),
                migrations.AddIndex(model_name="action", index=models.Index(
                    fields=["project", "namespace", "idempotency_key", "id"], name="ledger_action_key_idx")),
                migrations.RemoveConstraint(model_name="action", name="ledger_action_performed_once"),
                migrations.AddConstraint(model_name="action", constraint=models.UniqueConstraint(
                    fields=["project", "namespace", "idempotency_key"],
                    condition=Q(status="performed", inherited_from__isnull=True),
                    name="ledger_action_performed_once")),
            ],
        ),
        *scoped_managers("action"),
        postgresql_only(own_project(ACTION), via_parent(ACTION, "conversation_id", CONV)),
    ]
