"""Erased rows are read through the receipts the current project sees (conversations/projects.py):
the model's default manager is scoped, its base manager every project's. No schema change."""

from django.db import migrations

from conversations.migration_sql import scoped_managers


class Migration(migrations.Migration):
    dependencies = [("retention", "0007_receipt_checks")]

    operations = [*scoped_managers("erasedrow")]
