"""Signed heads also name the conversation's ledger chains (task state, actions, snapshots).

The column is added with a plain ALTER TABLE … ADD COLUMN: on SQLite Django would rebuild
the table for a NOT NULL column and drop the append-only triggers of 0003 with it.
"""

from django.db import migrations, models

TYPES = {"sqlite": "text", "postgresql": "jsonb"}


def add_column(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    schema_editor.execute(f"ALTER TABLE proofs_signedhead ADD COLUMN ledger_chains {TYPES[vendor]} NULL",
                          params=None)


def drop_column(apps, schema_editor):
    schema_editor.execute("ALTER TABLE proofs_signedhead DROP COLUMN ledger_chains", params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("proofs", "0003_append_only_guards"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(add_column, drop_column)],
            state_operations=[migrations.AddField(model_name="signedhead", name="ledger_chains",
                                                  field=models.JSONField(default=dict, null=True))],
        ),
    ]
