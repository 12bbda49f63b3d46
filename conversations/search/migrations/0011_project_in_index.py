"""SQLite: every entry of the full-text index carries its conversation's project.

The index holds every project's rows, newest conversation first, and a project's search
used to read every hit until it had a page of its own: with 20 projects, 19 of every 20
hits were another project's, each looked up and dropped (bench/NOTES.md, workload 20: a
phrase 1.26x the same search without the fence). The index now has a second column,
`project`, holding one token per row (`p` and the project's id), and a
project's search asks for its words in `body` AND its token in `project`: FTS5 merges the
two doclists and skips another project's conversations whole, before any row is read.

A contentless index cannot gain a column: this migration drops it and builds it again from
the message rows (about a minute per 1,000,000 messages), with the triggers that fill and
empty it writing the token too. The connection's secure_delete zeroes the old index's pages
as it drops them. What a deletion request queued for its window (migration 0010) was in the
old index only and is not in the new one: the queue is emptied, and it keeps each row's
token from now on, which a contentless index needs to delete the row.

PostgreSQL has nothing to do: its search reads the message rows, which know their
conversation.
"""

import importlib

from django.db import migrations

initial = importlib.import_module("conversations.search.migrations.0001_initial")
pending = importlib.import_module("conversations.search.migrations.0002_pending_rows")
borrowing = importlib.import_module("conversations.search.migrations.0004_forks_borrow_rows")
vectors = importlib.import_module("conversations.search.migrations.0008_message_vectors")
window = importlib.import_module("conversations.search.migrations.0010_unindex_in_window")

MSG, KEY, FTS, SPAN = initial.MSG, initial.KEY, initial.FTS, initial.SPAN
PENDING, QUEUE = pending.PENDING, window.QUEUE
TOKENIZE = "porter unicode61 remove_diacritics 2"


def _token(key: str) -> str:
    """The project's token for the key row `key` (a row of search_conversationkey): the SQL
    of `conversations.search.models.project_token`, which searches ask for."""
    return f"'p' || {key}.project_id"


def _statement(statements: list[str], marker: str) -> str:
    return next(sql for sql in statements if sql.lstrip().startswith(marker))


def _with_token(sql: str, text: str, key: str = "k", count: int = 1) -> str:
    """`sql` with each insert into the index writing the project's token after `text` (the
    row's indexed text), from the key row `key`; fails unless it changed `count` of each."""
    inserts = [(f"INSERT INTO {FTS}(rowid, body)", f"INSERT INTO {FTS}(rowid, body, project)"),
               (f"INSERT INTO {FTS}({FTS}, rowid, body)", f"INSERT INTO {FTS}({FTS}, rowid, body, project)")]
    changed = 0
    for old, new in inserts:
        changed += sql.count(old)
        sql = sql.replace(old, new)
    found = sql.count(f"{text} FROM")
    if changed != count or found < count:
        raise RuntimeError(f"the statement has {changed} inserts into the index and {found} texts, not {count}")
    return sql.replace(f"{text} FROM", f"{text}, {_token(key)} FROM")


_OLD_FLUSH = _statement(pending.SQLITE_FORWARD, "CREATE TRIGGER search_pending_flush")
_OLD_ADOPT = _statement(vectors.SQLITE_FORWARD, "CREATE TRIGGER search_borrowers_adopt")
_OLD_UNINDEX = _statement(window.SQLITE_FORWARD, "CREATE TRIGGER search_message_unindex")

_FLUSH = _with_token(_OLD_FLUSH, initial.sqlite_text("m.content"))
# The flush on its own, for what must empty the pending table at once (tests, workload 11).
FLUSH = _with_token(pending.FLUSH, initial.sqlite_text("m.content"))
_ADOPT = _with_token(_OLD_ADOPT, initial.sqlite_text("m.content"))
# The delete that removes at once, and the queue that keeps the token for the window's.
_UNINDEX = _with_token(_OLD_UNINDEX, initial.sqlite_text("OLD.content")).replace(
    f"INSERT INTO {QUEUE}(id, body)", f"INSERT INTO {QUEUE}(id, body, project)")

_TRIGGERS = ("search_pending_flush", "search_borrowers_adopt", "search_message_unindex")


def _rebuild(columns: str, token: str) -> list[str]:
    """The index made again with `columns`, filled from the message rows it holds: a fork's
    copied prefix is its source's rows (migration 0004), and a row waiting in the pending
    table enters with the next flush."""
    return [
        f"DROP TABLE {FTS}",
        f"CREATE VIRTUAL TABLE {FTS} USING fts5({columns}, content='', tokenize='{TOKENIZE}')",
        f"""INSERT INTO {FTS}(rowid, {columns})
        SELECT k.seq * {SPAN} + m.position, {initial.sqlite_text('m.content')}{token}
        FROM {MSG} m JOIN {KEY} k ON k.conversation_id = m.conversation_id
        WHERE m.position < {SPAN} AND NOT {borrowing._BORROWED_ROW.format(row='m')}
          AND NOT EXISTS (SELECT 1 FROM {PENDING} p WHERE p.id = k.seq * {SPAN} + m.position)""",
        # Deletions leave no entry behind in older segments (conversations/retention/disk.py).
        f"INSERT INTO {FTS}({FTS}, rank) VALUES ('secure-delete', 1)",
    ]


SQLITE_FORWARD = [
    *[f"DROP TRIGGER {name}" for name in _TRIGGERS],
    *_rebuild("body, project", f", {_token('k')}"),
    f"DROP TABLE {QUEUE}",
    f"CREATE TABLE {QUEUE} (id INTEGER PRIMARY KEY, body TEXT NOT NULL, project TEXT NOT NULL)",
    _FLUSH, _ADOPT, _UNINDEX,
]
SQLITE_BACKWARD = [
    *[f"DROP TRIGGER {name}" for name in _TRIGGERS],
    *_rebuild("body", ""),
    f"DROP TABLE {QUEUE}",
    f"CREATE TABLE {QUEUE} (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
    _OLD_FLUSH, _OLD_ADOPT, _OLD_UNINDEX,
]


class Migration(migrations.Migration):
    dependencies = [("search", "0010_unindex_in_window")]

    operations = [
        migrations.RunPython(
            initial._run({"sqlite": SQLITE_FORWARD, "postgresql": []}),
            initial._run({"sqlite": SQLITE_BACKWARD, "postgresql": []}),
        ),
    ]
