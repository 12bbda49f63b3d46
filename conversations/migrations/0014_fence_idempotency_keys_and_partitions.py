"""Row-level security where it was missing (conversations/migration_sql.py):

- an idempotency key's stored answer is its project's data: the project it was written in
  (0013) is fenced by a policy like every other such table's;
- a partition of the message table answers a query that names it with its own policies, not
  the table's: each gets the table's (conversations/partitions.py)."""

from django.db import migrations

from conversations import partitions
from conversations.migration_sql import own_project, postgresql_only, without_row_level_security

TABLE = "conversations_idempotencykey"


def fence_partitions(apps, schema_editor):
    partitions.fence_partitions(db=schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0013_idempotency_key_project")]

    operations = [
        postgresql_only(own_project(TABLE), without_row_level_security(TABLE)),
        migrations.RunPython(fence_partitions, migrations.RunPython.noop),
    ]
