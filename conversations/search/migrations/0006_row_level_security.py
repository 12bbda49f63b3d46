"""PostgreSQL row-level security on this app's tables (conversations/migration_sql.py):
each answers only the rows of the project the connection is in."""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

CONV = "conversations_conversation"
FORWARD = [
    *via_parent("search_conversationkey", "conversation_id", CONV),
    *via_parent("search_borrowed", "conversation_id", CONV),
]
BACKWARD = [statement for table in ["search_conversationkey", "search_borrowed"] for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("search", "0005_dates_of_indexed_rows"), ("conversations", "0010_row_level_security")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
