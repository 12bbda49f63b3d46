"""A conversation's search key carries its project, so a project's search skips another's hits early.

The full-text index holds every project's rows, newest conversation first, and a project's
search reads the index's hits in that order until it has a page of its own. Each other
project's hit was checked by reading its conversation row, and on SQLite the planner read
the hit's message row (its text, often on overflow pages) before that: at 1,000,000 messages
across 20 projects a search for two common words took 2.7 ms of statement instead of 0.2 ms
(bench/w20_project_fence.py). The key is the row each hit is joined to first, by its integer
id; with the project on it, another project's hit costs that one small look-up.

The project is the conversation's, copied once by the trigger that makes the key: a
conversation never moves to another project (conversations migration 0009). Existing keys
are given theirs here. On PostgreSQL the key's row-level security policy then reads its own
column instead of looking up the conversation.
"""

import importlib

from django.db import migrations, models

from conversations.migration_sql import own_project, postgresql_only, via_parent

initial = importlib.import_module("conversations.search.migrations.0001_initial")
CONV, KEY = initial.CONV, initial.KEY

SQLITE = [
    f"ALTER TABLE {KEY} ADD COLUMN project_id integer NOT NULL DEFAULT 1",
    f"""UPDATE {KEY} SET project_id = (SELECT c.project_id FROM {CONV} c WHERE c.id = {KEY}.conversation_id)
        WHERE project_id <> (SELECT c.project_id FROM {CONV} c WHERE c.id = {KEY}.conversation_id)""",
    "DROP TRIGGER search_key_insert",
    f"""CREATE TRIGGER search_key_insert AFTER INSERT ON {CONV}
    BEGIN INSERT INTO {KEY}(conversation_id, project_id) VALUES (NEW.id, NEW.project_id); END""",
]
POSTGRES = [
    f"ALTER TABLE {KEY} ADD COLUMN project_id bigint",
    f"UPDATE {KEY} k SET project_id = c.project_id FROM {CONV} c WHERE c.id = k.conversation_id",
    f"ALTER TABLE {KEY} ALTER COLUMN project_id SET NOT NULL",
    f"""CREATE OR REPLACE FUNCTION search_key_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO {KEY}(conversation_id, project_id) VALUES (NEW.id, NEW.project_id); RETURN NEW; END $$""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER search_key_insert",
    f"""CREATE TRIGGER search_key_insert AFTER INSERT ON {CONV}
    BEGIN INSERT INTO {KEY}(conversation_id) VALUES (NEW.id); END""",
    f"ALTER TABLE {KEY} DROP COLUMN project_id",
]
POSTGRES_BACKWARD = [
    f"""CREATE OR REPLACE FUNCTION search_key_insert() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO {KEY}(conversation_id) VALUES (NEW.id); RETURN NEW; END $$""",
    f"ALTER TABLE {KEY} DROP COLUMN project_id",
]


def _run(by_vendor):
    def run(apps, schema_editor):
        for sql in by_vendor[schema_editor.connection.vendor]:
            schema_editor.execute(sql, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("search", "0006_row_level_security")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(_run({"sqlite": SQLITE, "postgresql": POSTGRES}),
                                                      _run({"sqlite": SQLITE_BACKWARD,
                                                            "postgresql": POSTGRES_BACKWARD}))],
            state_operations=[migrations.AddField(
                model_name="conversationkey", name="project_id",
                field=models.BigIntegerField(editable=False, default=1), preserve_default=False)],
        ),
        postgresql_only(own_project(KEY), via_parent(KEY, "conversation_id", CONV)),
    ]
