"""The ledger's rows join the record's hash chains (conversations/chain.py): task-state
events, actions and workspace snapshots get `salt`, `commitment` and `chain_hash`, one
chain per conversation and table. Added with plain ALTER TABLE … ADD COLUMN (on SQLite
Django would rebuild the tables and drop their triggers); rows already stored are sealed
here, in id order, with the no-update triggers off for the migration's own transaction."""

from django.db import migrations, models

from conversations import chain
from conversations.migration_sql import sqlite_no_update

TABLES = {"ledger_taskstateevent": ("taskstate", "TaskStateEvent", "state"),
          "ledger_action": ("action", "Action", "action"),
          "ledger_workspacesnapshot": ("snapshot", "WorkspaceSnapshot", "snapshot")}
BLOB = {"sqlite": "blob", "postgresql": "bytea"}
COLUMNS = ("salt", "commitment", "chain_hash")


def add_columns(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for table in TABLES:
        for column in COLUMNS:
            schema_editor.execute(f"ALTER TABLE {table} ADD COLUMN {column} {BLOB[vendor]} NULL", params=None)


def drop_columns(apps, schema_editor):
    for table in TABLES:
        for column in COLUMNS:
            schema_editor.execute(f"ALTER TABLE {table} DROP COLUMN {column}", params=None)


def _trigger(cursor, vendor: str, table: str, short: str, enable: bool) -> None:
    name = f"ledger_{short}_no_update"
    if vendor == "postgresql":
        cursor.execute(f"ALTER TABLE {table} {'ENABLE' if enable else 'DISABLE'} TRIGGER {name}")
    elif enable:  # exactly as 0002 made it
        cursor.execute(sqlite_no_update(name, table, f"a {short} row", indent=8))
    else:
        cursor.execute(f"DROP TRIGGER IF EXISTS {name}")


def seal_existing_rows(apps, schema_editor):
    alias, vendor = schema_editor.connection.alias, schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        for table, (short, model_name, record_type) in TABLES.items():
            model = apps.get_model("ledger", model_name)
            if not model.objects.using(alias).exists():
                continue
            _trigger(cursor, vendor, table, short, enable=False)
            prev, last = chain.GENESIS, None
            for row in model.objects.using(alias).order_by("conversation_id", "id").iterator(chunk_size=2000):
                if row.conversation_id != last:
                    prev, last = chain.GENESIS, row.conversation_id
                values = [getattr(row, name) for name in chain.FIELDS[record_type]]
                salt, commitment, prev = chain.seal(prev, chain.payload(record_type, values))
                model.objects.using(alias).filter(pk=row.pk).update(salt=salt, commitment=commitment, chain_hash=prev)
            _trigger(cursor, vendor, table, short, enable=True)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0002_append_only_guards"), ("conversations", "0006_record_chain")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(add_columns, drop_columns)],
            state_operations=[
                migrations.AddField(model_name=model, name=name, field=models.BinaryField(null=True, editable=False))
                for model in ("taskstateevent", "action", "workspacesnapshot") for name in COLUMNS
            ],
        ),
        migrations.RunPython(seal_existing_rows, migrations.RunPython.noop),
    ]
