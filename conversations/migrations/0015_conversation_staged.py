"""A conversation an import is still writing is marked `staged`, no longer `deleting`.

`deleting` meant two things: a deletion under way, and an import's conversation hidden until
it is published. The database's delete guards open for `deleting`, so a staged import's rows
could be deleted at any moment by anyone, and whatever skipped conversations being deleted
skipped imports too (the embedder dropped the vectors of rows it read while their import
was staged). `staged` hides a conversation and closes it to other writers like `deleting`
does, and opens no guard: discarding a staging marks it `deleting` first.

The column is added with plain ALTER TABLE … ADD COLUMN on both databases, as the project
column was (conversations/migration_sql.py): on SQLite Django would rebuild the table, and a
rebuild drops its triggers. A staging left from before (its import crashed, or was stopped
for the upgrade) keeps its `deleting` mark and stays hidden: the next prune, or the next
import of the same source, removes it, as it did before.
"""

from django.db import migrations, models

from conversations.migration_sql import run_sql_by_vendor

TABLE = "conversations_conversation"


class Migration(migrations.Migration):

    dependencies = [
        ("conversations", "0014_fence_idempotency_keys_and_partitions"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(
                run_sql_by_vendor(sqlite=[f"ALTER TABLE {TABLE} ADD COLUMN staged bool NOT NULL DEFAULT 0"],
                                  postgresql=[f"ALTER TABLE {TABLE} ADD COLUMN staged boolean NOT NULL DEFAULT false"]),
                run_sql_by_vendor(sqlite=[f"ALTER TABLE {TABLE} DROP COLUMN staged"],
                                  postgresql=[f"ALTER TABLE {TABLE} DROP COLUMN staged"]),
            )],
            state_operations=[migrations.AddField(model_name="conversation", name="staged",
                                                  field=models.BooleanField(default=False))],
        ),
    ]
