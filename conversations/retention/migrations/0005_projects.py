"""Prune runs and deletion receipts say which project they acted in, or that they acted in
every project (NULL). Existing runs and receipts were made before projects: `default`."""

from django.db import migrations

from conversations.migration_sql import add_project_column, scoped_managers


class Migration(migrations.Migration):
    dependencies = [("retention", "0004_erased_rows"), ("conversations", "0009_projects")]

    operations = [
        add_project_column(model_name="prunerun", table="retention_prunerun", null=True),
        *scoped_managers("prunerun", ordering=["-started_at", "-id"]),
        add_project_column(model_name="deletionreceipt", table="retention_deletionreceipt", null=True),
        *scoped_managers("deletionreceipt", ordering=["-created_at"]),
    ]
