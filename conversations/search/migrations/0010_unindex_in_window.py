"""SQLite: a deletion request's rows leave the full-text index in its maintenance window.

FTS5's secure-delete removes a row's entries from every segment that holds one of its
words, rewriting those pages on the spot: about 0.75 ms a row on a 1.66 GB file, 25 times
the rest of the row's deletion (bench/NOTES.md, workload 13). A request filed in two phases
(conversations/retention/window.py) must delete its rows at once and leave the cleaning of
the files to its window; so for the conversations it names in `search_unindex_later` (by
their index key), the delete trigger puts each indexed row's id and index text in
`search_unindex_queue` instead of removing its entries, and the window removes them from
the index, secure-delete on, a batch at a time (conversations/search/unindex.py).

Until then the index still holds the rows' words but finds nothing: every hit is joined to
its conversation's key and its message row, both gone, and a conversation's key is never
handed out again (AUTOINCREMENT). The queued text is the residue the window cleans, like the
freed pages it zeroes; the receipt says `erased`, not `verified`, until then.

Every other deletion (a prune, a request verified at once) removes entries as before.
PostgreSQL has nothing to do: its words are a column of the message row, and the window
rewrites the partitions that held them.
"""

import importlib

from django.db import migrations

initial = importlib.import_module("conversations.search.migrations.0001_initial")
pending = importlib.import_module("conversations.search.migrations.0002_pending_rows")
borrowing = importlib.import_module("conversations.search.migrations.0004_forks_borrow_rows")
dated = importlib.import_module("conversations.search.migrations.0005_dates_of_indexed_rows")

MSG, KEY, FTS, SPAN = initial.MSG, initial.KEY, initial.FTS, initial.SPAN
PENDING, DATES = pending.PENDING, dated.DATES
LATER = "search_unindex_later"
QUEUE = "search_unindex_queue"
_BORROWED_ROW = borrowing._BORROWED_ROW
_ROW_ID = f"k.seq * {SPAN} + OLD.position"
_NOT_WAITING = f"NOT EXISTS (SELECT 1 FROM {PENDING} p WHERE p.id = {_ROW_ID})"
_LATER = f"EXISTS (SELECT 1 FROM {LATER} u WHERE u.seq = k.seq)"

SQLITE_FORWARD = [
    f"CREATE TABLE {LATER} (seq INTEGER PRIMARY KEY)",
    f"CREATE TABLE {QUEUE} (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
    "DROP TRIGGER search_message_unindex",
    f"""CREATE TRIGGER search_message_unindex AFTER DELETE ON {MSG}
    WHEN OLD.position < {SPAN} AND NOT {_BORROWED_ROW.format(row='OLD')}
    BEGIN
        INSERT INTO {FTS}({FTS}, rowid, body)
        SELECT 'delete', {_ROW_ID}, {initial.sqlite_text('OLD.content')} FROM {KEY} k
        WHERE k.conversation_id = OLD.conversation_id AND {_NOT_WAITING} AND NOT {_LATER};
        INSERT INTO {QUEUE}(id, body)
        SELECT {_ROW_ID}, {initial.sqlite_text('OLD.content')} FROM {KEY} k
        WHERE k.conversation_id = OLD.conversation_id AND {_NOT_WAITING} AND {_LATER};
        DELETE FROM {PENDING} WHERE id = (
            SELECT {_ROW_ID} FROM {KEY} k WHERE k.conversation_id = OLD.conversation_id);
        DELETE FROM {DATES} WHERE created_at = OLD.created_at AND id = (
            SELECT {_ROW_ID} FROM {KEY} k WHERE k.conversation_id = OLD.conversation_id);
    END""",
]

# Backward: what waits leaves the index first, then migration 0005's trigger comes back.
SQLITE_BACKWARD = [
    f"INSERT INTO {FTS}({FTS}, rowid, body) SELECT 'delete', id, body FROM {QUEUE}",
    "DROP TRIGGER search_message_unindex",
    *[sql for sql in dated.SQLITE_FORWARD if sql.lstrip().startswith("CREATE TRIGGER search_message_unindex")],
    f"DROP TABLE {QUEUE}",
    f"DROP TABLE {LATER}",
]


class Migration(migrations.Migration):
    dependencies = [("search", "0009_fulltext_match_leakproof")]

    operations = [
        migrations.RunPython(
            initial._run({"sqlite": SQLITE_FORWARD, "postgresql": []}),
            initial._run({"sqlite": SQLITE_BACKWARD, "postgresql": []}),
        ),
    ]
