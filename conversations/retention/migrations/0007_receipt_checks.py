"""Deletion requests in two phases (retention/window.py): a receipt filed when the rows are gone
says `erased` and by when its files are searched (`verify_by`); the maintenance window's verdict
is a `ReceiptCheck`, append-only like the receipt it completes. The receipt's own column keeps
its name in the database; in the model it is what the request *filed*."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

from conversations.migration_sql import (
    postgres_trigger,
    postgresql_only,
    run_sql_by_vendor,
    sqlite_no_delete,
    sqlite_no_update,
    via_parent,
    without_row_level_security,
)

RECEIPT, CHECK = "retention_deletionreceipt", "retention_receiptcheck"
COLUMN = {"sqlite": "datetime", "postgresql": "timestamp with time zone"}

SQLITE = [
    f"ALTER TABLE {RECEIPT} ADD COLUMN verify_by datetime NULL",
    sqlite_no_update("receiptcheck_no_update", CHECK, "a receipt check"),
    sqlite_no_delete("receiptcheck_no_delete", CHECK, "a receipt check"),
]
POSTGRES = [
    f"ALTER TABLE {RECEIPT} ADD COLUMN verify_by timestamp with time zone NULL",
    postgres_trigger("receiptcheck_no_update", CHECK, "UPDATE"),
    postgres_trigger("receiptcheck_no_delete", CHECK, "DELETE"),
]


class Migration(migrations.Migration):
    dependencies = [("retention", "0006_row_level_security")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RenameField(model_name="deletionreceipt", old_name="verification",
                                       new_name="filed_verification"),
                migrations.AlterField(model_name="deletionreceipt", name="filed_verification",
                                      field=models.JSONField(db_column="verification", default=dict)),
                migrations.AddField(model_name="deletionreceipt", name="verify_by",
                                    field=models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.CreateModel(
            name="ReceiptCheck",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                ("status", models.CharField(max_length=32)),
                ("verification", models.JSONField(default=dict)),
                ("receipt", models.ForeignKey(on_delete=django.db.models.deletion.DO_NOTHING, related_name="checks",
                                              to="retention.deletionreceipt")),
            ],
            options={"indexes": [models.Index(fields=["receipt", "at"], name="receiptcheck_receipt_idx")]},
        ),
        migrations.RunPython(run_sql_by_vendor(SQLITE, POSTGRES), migrations.RunPython.noop),
        postgresql_only(via_parent(CHECK, "receipt_id", RECEIPT), without_row_level_security(CHECK)),
    ]
