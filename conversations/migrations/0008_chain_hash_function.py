"""PostgreSQL: `memoryui_chain_hash(conversation, position)`, the chain hash of one message row,
read by the append's position-reserving UPDATE in its RETURNING (conversations/store.py).

A plain subquery there would read the UPDATE's snapshot, taken before the conversation's row
lock was granted, and miss the row of the writer the UPDATE waited for. A VOLATILE function
takes a fresh snapshot for each query it runs (in READ COMMITTED), after the lock is held, so
it sees that writer's committed row. PL/pgSQL, never inlined into the calling statement, and its
plan is cached per session. SQLite needs nothing: its write lock is held from BEGIN IMMEDIATE.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION memoryui_chain_hash(cid uuid, pos bigint) RETURNS bytea
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN (SELECT chain_hash FROM conversations_message WHERE conversation_id = cid AND position = pos);
END
$$
"""
DROP = "DROP FUNCTION IF EXISTS memoryui_chain_hash(uuid, bigint)"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0007_conversation_ids_start_with_time"),
    ]

    operations = [migrations.RunPython(create, drop)]
