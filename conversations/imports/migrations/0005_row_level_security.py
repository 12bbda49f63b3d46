"""PostgreSQL row-level security on this app's tables (conversations/migration_sql.py):
each answers only the rows of the project the connection is in."""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

CONV = "conversations_conversation"
FORWARD = [
    *own_project("imports_importsource"),
    *via_parent("imports_sourceentry", "source_id", "imports_importsource"),
    *via_parent("imports_importstage", "conversation_id", CONV),
]
BACKWARD = [statement for table in ["imports_importsource", "imports_sourceentry", "imports_importstage"] for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("imports", "0004_projects"), ("conversations", "0010_row_level_security")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
