"""PostgreSQL row-level security on this app's tables (conversations/migration_sql.py):
each answers only the rows of the project the connection is in."""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

CONV = "conversations_conversation"
FORWARD = [
    *own_project("frameworks_sessionsummary"),
]
BACKWARD = [statement for table in ["frameworks_sessionsummary"] for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("frameworks", "0002_projects"), ("conversations", "0010_row_level_security")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
