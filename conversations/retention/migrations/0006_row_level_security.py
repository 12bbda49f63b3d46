"""PostgreSQL row-level security on this app's tables (conversations/migration_sql.py):
each answers only the rows of the project the connection is in."""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

CONV = "conversations_conversation"
FORWARD = [
    *own_project("retention_prunerun"),
    *own_project("retention_deletionreceipt"),
    *via_parent("retention_erasedrow", "receipt_id", "retention_deletionreceipt"),
]
BACKWARD = [statement for table in ["retention_prunerun", "retention_deletionreceipt", "retention_erasedrow"] for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("retention", "0005_projects"), ("conversations", "0010_row_level_security")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
