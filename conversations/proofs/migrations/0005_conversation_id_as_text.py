"""A signed head names its conversation as text with dashes, not as a UUID column.

A deletion request checks that an erased conversation's id is gone from the database files
unless a UUID column still holds it; heads are kept after their conversation, so as a UUID
column they would take every erased id out of that check (retention/erasure.py).

On SQLite Django rebuilds the table for the new type, dropping its append-only triggers
(migration 0003) with the old table: the rows written as 32 hex digits get their dashes,
then the triggers are made again. PostgreSQL converts in place (uuid::text has the dashes)
and keeps its triggers.
"""

from importlib import import_module

from django.db import migrations, models

guards = import_module("conversations.proofs.migrations.0003_append_only_guards")


def dashes_and_guards(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    for name in ("signedhead_no_update", "signedhead_no_delete"):
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}", params=None)
    schema_editor.execute(
        "UPDATE proofs_signedhead SET conversation_id = substr(conversation_id, 1, 8) || '-' || "
        "substr(conversation_id, 9, 4) || '-' || substr(conversation_id, 13, 4) || '-' || "
        "substr(conversation_id, 17, 4) || '-' || substr(conversation_id, 21) WHERE length(conversation_id) = 32",
        params=None)
    for sql in guards.SQLITE_FORWARD[:2]:
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("proofs", "0004_ledger_chains"),
    ]

    operations = [
        migrations.AlterField(model_name="signedhead", name="conversation_id", field=models.CharField(max_length=36)),
        migrations.RunPython(dashes_and_guards, migrations.RunPython.noop),
    ]
