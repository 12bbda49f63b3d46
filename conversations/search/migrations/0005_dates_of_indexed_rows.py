"""SQLite: the dates search filters on are kept for indexed rows only, beside the index.

Migration 0003 put a B-tree on the message table's `created_at` so that a narrow date
filter starts from its rows. Only search reads it, and only for rows the full-text
index holds; but as an index on the table it took an entry for every row written,
a fork's 50,000 copies included (after migration 0004, a tenth of what a fork costs
beyond the raw copy). `search_message_dates` holds (created_at, index id) for the
rows the index holds, written and deleted by the same triggers that keep the index
(a fork's copies are skipped by the same condition, an adopted copy gets its date
when it gets its words), and read by `conversations.search.reads` for date filters:
a range of it gives each row's conversation key and position without touching the
message table. It holds no text.

PostgreSQL keeps migration 0003's index: its date-fenced search reads message rows
(their stored words) in the range anyway.
"""

import importlib

from django.db import migrations

initial = importlib.import_module("conversations.search.migrations.0001_initial")
pending = importlib.import_module("conversations.search.migrations.0002_pending_rows")
dated = importlib.import_module("conversations.search.migrations.0003_stored_words_date_index")
borrowing = importlib.import_module("conversations.search.migrations.0004_forks_borrow_rows")

MSG, CONV, KEY, FTS, SPAN = initial.MSG, initial.CONV, initial.KEY, initial.FTS, initial.SPAN
PENDING, BORROWED = pending.PENDING, borrowing.BORROWED
DATES = "search_message_dates"
_BORROWED_ROW, _NEW_PREFIX, _REPOINT = borrowing._BORROWED_ROW, borrowing._NEW_PREFIX, borrowing._REPOINT

SQLITE_FORWARD = [
    f"""CREATE TABLE {DATES} (created_at TEXT NOT NULL, id INTEGER NOT NULL,
        PRIMARY KEY (created_at, id)) WITHOUT ROWID""",
    f"""INSERT INTO {DATES}(created_at, id)
        SELECT m.created_at, k.seq * {SPAN} + m.position FROM {MSG} m
        JOIN {KEY} k ON k.conversation_id = m.conversation_id
        WHERE m.position < {SPAN} AND NOT {_BORROWED_ROW.format(row='m')}""",
    f"DROP INDEX {dated.CREATED_INDEX}",
    "DROP TRIGGER search_message_index",
    "DROP TRIGGER search_message_unindex",
    "DROP TRIGGER search_borrowers_adopt",
    f"""CREATE TRIGGER search_message_index AFTER INSERT ON {MSG}
    WHEN NEW.position < {SPAN} AND NOT {_BORROWED_ROW.format(row='NEW')}
    BEGIN
        INSERT INTO {PENDING}(id)
        SELECT k.seq * {SPAN} + NEW.position FROM {KEY} k WHERE k.conversation_id = NEW.conversation_id;
        INSERT INTO {DATES}(created_at, id)
        SELECT NEW.created_at, k.seq * {SPAN} + NEW.position FROM {KEY} k WHERE k.conversation_id = NEW.conversation_id;
    END""",
    f"""CREATE TRIGGER search_message_unindex AFTER DELETE ON {MSG}
    WHEN OLD.position < {SPAN} AND NOT {_BORROWED_ROW.format(row='OLD')}
    BEGIN
        INSERT INTO {FTS}({FTS}, rowid, body)
        SELECT 'delete', k.seq * {SPAN} + OLD.position, {initial.sqlite_text('OLD.content')} FROM {KEY} k
        WHERE k.conversation_id = OLD.conversation_id
          AND NOT EXISTS (SELECT 1 FROM {PENDING} p WHERE p.id = k.seq * {SPAN} + OLD.position);
        DELETE FROM {PENDING} WHERE id = (
            SELECT k.seq * {SPAN} + OLD.position FROM {KEY} k WHERE k.conversation_id = OLD.conversation_id);
        DELETE FROM {DATES} WHERE created_at = OLD.created_at AND id = (
            SELECT k.seq * {SPAN} + OLD.position FROM {KEY} k WHERE k.conversation_id = OLD.conversation_id);
    END""",
    f"""CREATE TRIGGER search_borrowers_adopt AFTER UPDATE OF deleting ON {CONV}
    WHEN NEW.deleting AND NOT OLD.deleting
    BEGIN
        INSERT INTO {FTS}(rowid, body)
        SELECT k.seq * {SPAN} + m.position, {initial.sqlite_text('m.content')} FROM {BORROWED} b
        JOIN {KEY} k ON k.conversation_id = b.conversation_id
        JOIN {MSG} m ON m.conversation_id = b.conversation_id AND m.position <= b.upto
            AND m.position > {_NEW_PREFIX} AND m.position < {SPAN}
        WHERE b.source_id = NEW.id;
        INSERT INTO {DATES}(created_at, id)
        SELECT m.created_at, k.seq * {SPAN} + m.position FROM {BORROWED} b
        JOIN {KEY} k ON k.conversation_id = b.conversation_id
        JOIN {MSG} m ON m.conversation_id = b.conversation_id AND m.position <= b.upto
            AND m.position > {_NEW_PREFIX} AND m.position < {SPAN}
        WHERE b.source_id = NEW.id;
        {_REPOINT};
        DELETE FROM {BORROWED} WHERE source_id = NEW.id;
    END""",
]

# Backward: migration 0004's triggers and migration 0003's index on the table.
SQLITE_BACKWARD = [
    "DROP TRIGGER search_message_index",
    "DROP TRIGGER search_message_unindex",
    "DROP TRIGGER search_borrowers_adopt",
] + [sql for sql in borrowing.SQLITE_FORWARD if sql.lstrip().startswith("CREATE TRIGGER search_")
     and "search_borrowed_forget" not in sql] + [
    f"DROP TABLE {DATES}",
] + dated.SQLITE_FORWARD


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0004_forks_borrow_rows"),
    ]

    operations = [
        migrations.RunPython(
            initial._run({"sqlite": SQLITE_FORWARD, "postgresql": []}),
            initial._run({"sqlite": SQLITE_BACKWARD, "postgresql": []}),
        ),
    ]
