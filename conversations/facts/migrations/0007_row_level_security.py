"""PostgreSQL row-level security on this app's tables (conversations/migration_sql.py):
each answers only the rows of the project the connection is in."""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

CONV = "conversations_conversation"
FORWARD = [
    *own_project("facts_fact"),
    *own_project("facts_factaccess"),
    *via_parent("facts_factevent", "fact_id", "facts_fact"),
]
BACKWARD = [statement for table in ["facts_fact", "facts_factaccess", "facts_factevent"] for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("facts", "0006_projects"), ("conversations", "0010_row_level_security")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
