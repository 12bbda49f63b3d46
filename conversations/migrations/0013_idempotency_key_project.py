"""An idempotency key's stored answer is its project's data: the key gets the project it was
written in (every existing key, `default`'s), and a row-level security policy like every other
table of project data (conversations/migration_sql.py)."""

from django.db import migrations

from conversations.migration_sql import add_project_column, own_project, postgresql_only, without_row_level_security

TABLE = "conversations_idempotencykey"


class Migration(migrations.Migration):
    dependencies = [("conversations", "0012_usage_totals")]

    operations = [
        add_project_column(model_name="idempotencykey", table=TABLE, null=True),
        postgresql_only(own_project(TABLE), without_row_level_security(TABLE)),
    ]
