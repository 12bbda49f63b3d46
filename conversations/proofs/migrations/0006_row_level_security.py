"""PostgreSQL row-level security on this app's tables (conversations/migration_sql.py):
each answers only the rows of the project the connection is in."""

from django.db import migrations

from conversations.migration_sql import own_project, postgresql_only, via_parent, without_row_level_security

CONV = "conversations_conversation"
FORWARD = [
    *via_parent("proofs_signedhead", "conversation_id", CONV, cast="::text"),
]
BACKWARD = [statement for table in ["proofs_signedhead"] for statement in without_row_level_security(table)]


class Migration(migrations.Migration):
    dependencies = [("proofs", "0005_conversation_id_as_text"), ("conversations", "0010_row_level_security")]

    operations = [postgresql_only(FORWARD, BACKWARD)]
