"""When memoryui received a conversation's last row: what retention counts from (docs/DESIGN.md, invariant 14).

`last_activity_at` keeps the transcript's own dates for an imported conversation, so an
archive imported today with last year's dates looked a year old to the prune. The store
sets `received_at` to its own clock whenever a conversation is created, imported, forked
or appended to; the prune compares it with the cutoff.

Existing rows get the latest time memoryui itself recorded for them: their last activity
(the store's clock for every conversation written through the API or the pages), or, for
an imported conversation, the time of its last import if that is later (the
`conversation.imported` audit event, written by memoryui when the import ran). So an
archive imported before this migration counts from its import, not from its own dates.

Added with plain ALTER TABLE … ADD COLUMN (as migration 0003): on SQLite Django would
rebuild the table and drop its triggers. SQLite cannot make an added column NOT NULL
without that rebuild; the model always fills it, and PostgreSQL enforces it.
"""

import uuid

from django.db import migrations, models
from django.db.models import F, Max

import django.utils.timezone

CONV = "conversations_conversation"

COLUMN = {"sqlite": "datetime", "postgresql": "timestamp with time zone"}


def add_column(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor not in COLUMN:
        raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {vendor}")
    schema_editor.execute(f"ALTER TABLE {CONV} ADD COLUMN received_at {COLUMN[vendor]} NULL", params=None)


def fill_received_at(Conversation, AuditEvent, using: str = "default") -> None:
    """Every conversation's last activity, or its last import's time where that is later
    (`using`: the database being migrated, which copy_database's target is not the default)."""
    Conversation.objects.using(using).update(received_at=F("last_activity_at"))
    imports = (AuditEvent.objects.using(using).filter(target_type="conversation", action="conversation.imported")
               .values("target_id").annotate(last=Max("at")).order_by())
    for row in imports.iterator():
        try:
            cid = uuid.UUID(row["target_id"])
        except ValueError:
            continue
        Conversation.objects.using(using).filter(pk=cid, received_at__lt=row["last"]).update(received_at=row["last"])


def fill(apps, schema_editor):
    fill_received_at(apps.get_model("conversations", "Conversation"), apps.get_model("conversations", "AuditEvent"),
                     using=schema_editor.connection.alias)


def constrain_and_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {CONV} ALTER COLUMN received_at SET NOT NULL", params=None)
    schema_editor.execute(f"CREATE INDEX conversation_received_idx ON {CONV} (received_at)", params=None)


def drop_index(apps, schema_editor):
    schema_editor.execute("DROP INDEX IF EXISTS conversation_received_idx", params=None)


def drop_column(apps, schema_editor):
    schema_editor.execute(f"ALTER TABLE {CONV} DROP COLUMN received_at", params=None)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0004_idempotency_keys_external_id_guard")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(add_column, drop_column)],
            state_operations=[
                migrations.AddField(
                    model_name="conversation", name="received_at",
                    field=models.DateTimeField(default=django.utils.timezone.now),
                ),
            ],
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(constrain_and_index, drop_index)],
            state_operations=[
                migrations.AddIndex(
                    model_name="conversation",
                    index=models.Index(fields=["received_at"], name="conversation_received_idx"),
                ),
            ],
        ),
    ]
