"""SQLite: rows whose full-text entries leave the index later, in a deletion request's window.

A request filed in two phases names its conversations here (`defer`) before it deletes their
rows; the message table's delete trigger then queues each indexed row's id, index text and
project token (migrations 0010, 0011) instead of removing its entries with FTS5's
secure-delete, the costly part of a deletion. The window removes what is queued
(`remove_batch`, secure-delete on, a batch per write transaction, paced by the caller) and
then forgets the conversations (`forget_done`).
On PostgreSQL every function does nothing: the words are a column of the message row.
"""

import time

from django.db import connection, transaction

from .models import POSITION_SPAN, ConversationKey

LATER = "search_unindex_later"
QUEUE = "search_unindex_queue"
FTS = "search_message_fts"


def _sqlite() -> bool:
    return connection.vendor == "sqlite"


def defer(conversation_ids) -> int:
    """Queue, rather than remove, the index entries of these conversations' rows when they are
    deleted; returns how many conversations were named. Call it before their rows go, in the
    transaction that marks them `deleting`."""
    if not _sqlite() or not conversation_ids:
        return 0
    seqs = list(ConversationKey.objects.filter(conversation_id__in=conversation_ids).values_list("seq", flat=True))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT OR IGNORE INTO {LATER}(seq) VALUES (%s)", [(s,) for s in seqs])
    return len(seqs)


def waiting() -> int:
    """How many rows' entries wait to leave the index."""
    if not _sqlite():
        return 0
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {QUEUE}")
        return cursor.fetchone()[0]


def remove_batch(limit: int, timing: list | None = None) -> int:
    """Remove up to `limit` queued rows' entries from the index, and their queued text, in one
    transaction; returns how many. FTS5's secure-delete must be on (the caller sees to it:
    conversations/retention/disk.py), or the entries would stay in older segments. Appends to
    `timing` how long the write took, COMMIT included."""
    if not _sqlite():
        return 0
    with transaction.atomic():
        started = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM {QUEUE} ORDER BY id LIMIT %s", [int(limit)])
            ids = [i for (i,) in cursor.fetchall()]
            if ids:
                marks = ", ".join(["%s"] * len(ids))
                cursor.execute(f"INSERT INTO {FTS}({FTS}, rowid, body, project) SELECT 'delete', id, body, project "
                               f"FROM {QUEUE} "
                               f"WHERE id IN ({marks})", ids)
                cursor.execute(f"DELETE FROM {QUEUE} WHERE id IN ({marks})", ids)
    if timing is not None:
        timing.append(time.monotonic() - started)
    return len(ids)


def forget_done() -> int:
    """Forget the named conversations that are gone and have nothing queued; returns how many.
    One still being deleted (a request cut short) stays named until its rows are all gone."""
    if not _sqlite():
        return 0
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {LATER} WHERE NOT EXISTS (SELECT 1 FROM {ConversationKey._meta.db_table} k "
            f"WHERE k.seq = {LATER}.seq) AND NOT EXISTS (SELECT 1 FROM {QUEUE} q "
            f"WHERE q.id BETWEEN {LATER}.seq * {POSITION_SPAN} "
            f"AND {LATER}.seq * {POSITION_SPAN} + {POSITION_SPAN - 1})")
        return cursor.rowcount
