"""An Idempotency-Key row records the project its write was made in (NULL: a caller that saw
every project), so that a deletion request of one project forgets that project's keys only:
another project's stored answers about a subject of the same name are that project's.
Existing keys were written in `default` (conversations/migration_sql.py adds the column in place)."""

from django.db import migrations

from conversations.migration_sql import add_project_column


class Migration(migrations.Migration):
    dependencies = [("conversations", "0012_usage_totals")]

    operations = [
        add_project_column(model_name="idempotencykey", table="conversations_idempotencykey", null=True),
    ]
