"""SQLite: appended rows wait in a short list and enter the full-text index 64 at a time.

FTS5 turns every transaction that touched it into a new index segment: the
segment's pages, the index's structure record, its averages and the segment's
b-tree entry, plus the merges that follow, about eight more pages written to the
WAL (and so to the disk) by every one-message append. Now the insert trigger
writes the row's index id into `search_message_pending` (one page), and when 64
are waiting a second trigger, in the same transaction as the append that made
the 64th, puts their text into the index as one segment and empties the list.

Nothing is ever unfindable: a search matches the waiting rows (at most 63) in
memory with the same tokenizer and merges them with the index's hits
(`conversations.search.reads`). The list holds integers only, never text, so a
deletion request's raw-byte check finds nothing there. Deleting a row takes it
off the list if it is waiting, and out of the index otherwise (a contentless
FTS5 'delete' of a row the index never had would corrupt it).

PostgreSQL is untouched: its GIN index is part of the append's own transaction
and costs no extra commit work of this kind.
"""

import importlib

from django.db import migrations

initial = importlib.import_module("conversations.search.migrations.0001_initial")

MSG, KEY, FTS, SPAN = initial.MSG, initial.KEY, initial.FTS, initial.SPAN
PENDING = "search_message_pending"
# Rows that wait before they enter the index as one segment. A search matches
# up to this-many-minus-one in memory; an append pays for this-many once.
FLUSH_AT = 64

FLUSH = f"""INSERT INTO {FTS}(rowid, body)
        SELECT p.id, {initial.sqlite_text('m.content')} FROM {PENDING} p
        JOIN {KEY} k ON k.seq = p.id >> 32
        JOIN {MSG} m ON m.conversation_id = k.conversation_id AND m.position = (p.id & {SPAN - 1})"""

SQLITE_FORWARD = [
    f"CREATE TABLE {PENDING} (id INTEGER PRIMARY KEY)",
    "DROP TRIGGER search_message_index",
    "DROP TRIGGER search_message_unindex",
    f"""CREATE TRIGGER search_message_index AFTER INSERT ON {MSG} WHEN NEW.position < {SPAN}
    BEGIN INSERT INTO {PENDING}(id)
        SELECT k.seq * {SPAN} + NEW.position FROM {KEY} k WHERE k.conversation_id = NEW.conversation_id;
    END""",
    f"""CREATE TRIGGER search_pending_flush AFTER INSERT ON {PENDING}
    WHEN (SELECT count(*) FROM {PENDING}) >= {FLUSH_AT}
    BEGIN {FLUSH};
        DELETE FROM {PENDING};
    END""",
    f"""CREATE TRIGGER search_message_unindex AFTER DELETE ON {MSG} WHEN OLD.position < {SPAN}
    BEGIN INSERT INTO {FTS}({FTS}, rowid, body)
        SELECT 'delete', k.seq * {SPAN} + OLD.position, {initial.sqlite_text('OLD.content')} FROM {KEY} k
        WHERE k.conversation_id = OLD.conversation_id
          AND NOT EXISTS (SELECT 1 FROM {PENDING} p WHERE p.id = k.seq * {SPAN} + OLD.position);
        DELETE FROM {PENDING} WHERE id = (
            SELECT k.seq * {SPAN} + OLD.position FROM {KEY} k WHERE k.conversation_id = OLD.conversation_id);
    END""",
]

SQLITE_BACKWARD = [
    FLUSH,
    "DROP TRIGGER search_pending_flush",
    "DROP TRIGGER search_message_index",
    "DROP TRIGGER search_message_unindex",
    f"DROP TABLE {PENDING}",
] + [sql for sql in initial.SQLITE_FORWARD if "CREATE TRIGGER search_message_" in sql]


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(
            initial._run({"sqlite": SQLITE_FORWARD, "postgresql": []}),
            initial._run({"sqlite": SQLITE_BACKWARD, "postgresql": []}),
        ),
    ]
