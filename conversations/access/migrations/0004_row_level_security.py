"""PostgreSQL row-level security on this app's tables (conversations/migration_sql.py):
each answers only the rows of the project the connection is in."""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

CONV = "conversations_conversation"
FORWARD = [
    *own_project("access_conversationaccess"),
]
BACKWARD = [statement for table in ["access_conversationaccess"] for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("access", "0003_projects"), ("conversations", "0010_row_level_security")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
