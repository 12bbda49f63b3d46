"""PostgreSQL: the message table becomes MEMORYUI_PG_MESSAGE_PARTITIONS hash partitions of the
conversation id (conversations/partitions.py says why: erasure then rewrites and searches only
the partitions that held a subject's rows). Everything other apps put on the table (the search
app's column, index and triggers, the append-only guards, row-level security) is kept.
SQLite: nothing."""

from django.db import migrations

from conversations import partitions


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        partitions.repartition(db=schema_editor.connection)


class Migration(migrations.Migration):
    # Last of what changes the message table: the search app's words, index and guards, and
    # the row-level security policies.
    dependencies = [("conversations", "0010_row_level_security"), ("search", "0006_row_level_security")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
