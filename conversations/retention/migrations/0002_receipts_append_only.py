"""A deletion receipt is proof: the database refuses to change or remove one,
as it does for audit events (conversations migration 0002)."""

from django.db import migrations

RECEIPT = "retention_deletionreceipt"

SQLITE_FORWARD = [
    f"""CREATE TRIGGER deletionreceipt_no_update BEFORE UPDATE ON {RECEIPT}
    BEGIN SELECT RAISE(ABORT, 'append-only: a deletion receipt is never updated'); END""",
    f"""CREATE TRIGGER deletionreceipt_no_delete BEFORE DELETE ON {RECEIPT}
    BEGIN SELECT RAISE(ABORT, 'append-only: a deletion receipt is never deleted'); END""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS deletionreceipt_no_update",
    "DROP TRIGGER IF EXISTS deletionreceipt_no_delete",
]
# memoryui_refuse() comes from conversations migration 0002.
POSTGRES_FORWARD = [
    f"""CREATE TRIGGER deletionreceipt_no_update BEFORE UPDATE ON {RECEIPT}
    FOR EACH ROW EXECUTE FUNCTION memoryui_refuse()""",
    f"""CREATE TRIGGER deletionreceipt_no_delete BEFORE DELETE ON {RECEIPT}
    FOR EACH ROW EXECUTE FUNCTION memoryui_refuse()""",
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
