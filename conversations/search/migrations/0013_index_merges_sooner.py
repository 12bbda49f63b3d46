"""SQLite: the message index merges its segments when two, not four, lie at one level.

A project's search asks the index for its words AND the project's token, newest first
(migration 0011). FTS5 reads that backwards through every segment of the index, and what
it costs grows with their number: at 1,000,000 messages, a page of a phrase in one project
of 20 took 0.54 ms with six segments (the nightly prune's merged one and a day's writes in
five more), 0.20 ms with three, against 0.10–0.12 ms for every project's hits. Merging at
two keeps about one segment per level; each row is merged about twice as often, in the
small batches a flush of waiting rows already does (0002). PostgreSQL has no segments.
"""

import importlib

from django.db import migrations

initial = importlib.import_module("conversations.search.migrations.0001_initial")


def _automerge(segments: int) -> list[str]:
    return [f"INSERT INTO {initial.FTS}({initial.FTS}, rank) VALUES ('automerge', {segments})"]


class Migration(migrations.Migration):
    dependencies = [("search", "0012_key_project_index")]

    operations = [
        migrations.RunPython(
            initial._run({"sqlite": _automerge(2), "postgresql": []}),
            initial._run({"sqlite": _automerge(4), "postgresql": []}),
        ),
    ]
