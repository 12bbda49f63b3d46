"""PostgreSQL: the conversation keys of one project, newest first, from an index.

A project's search for common words walks the project's conversations newest first
(conversations/search/reads.py, `_postgres_walk`); without an index that leads with the
project it read every project's keys and sorted the project's. SQLite's search reads its
full-text index, which carries the project itself (migration 0011).
"""

import importlib

from django.db import migrations

initial = importlib.import_module("conversations.search.migrations.0001_initial")

INDEX = "search_key_project_seq_idx"

POSTGRES_FORWARD = [f"CREATE INDEX IF NOT EXISTS {INDEX} ON {initial.KEY} (project_id, seq)"]
POSTGRES_BACKWARD = [f"DROP INDEX IF EXISTS {INDEX}"]


class Migration(migrations.Migration):
    dependencies = [("search", "0011_project_in_index")]

    operations = [
        migrations.RunPython(
            initial._run({"sqlite": [], "postgresql": POSTGRES_FORWARD}),
            initial._run({"sqlite": [], "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
