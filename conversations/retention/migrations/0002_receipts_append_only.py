"""A deletion receipt is proof: the database refuses to change or remove one,
as it does for audit events (conversations migration 0002)."""

from django.db import migrations

from conversations.migration_sql import postgres_trigger, sqlite_no_delete, sqlite_no_update

RECEIPT = "retention_deletionreceipt"

SQLITE_FORWARD = [
    sqlite_no_update("deletionreceipt_no_update", RECEIPT, "a deletion receipt"),
    sqlite_no_delete("deletionreceipt_no_delete", RECEIPT, "a deletion receipt"),
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS deletionreceipt_no_update",
    "DROP TRIGGER IF EXISTS deletionreceipt_no_delete",
]
# memoryui_refuse() comes from conversations migration 0002.
POSTGRES_FORWARD = [
    postgres_trigger("deletionreceipt_no_update", RECEIPT, "UPDATE"),
    postgres_trigger("deletionreceipt_no_delete", RECEIPT, "DELETE"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS deletionreceipt_no_update ON {RECEIPT}",
    f"DROP TRIGGER IF EXISTS deletionreceipt_no_delete ON {RECEIPT}",
]


def _run(by_vendor):
    def run(apps, schema_editor):
        for sql in by_vendor[schema_editor.connection.vendor]:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0001_initial"),
        ("conversations", "0002_append_only_guards"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
