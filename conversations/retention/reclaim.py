"""Giving freed space back to the file system while agents keep writing (step 3 of a prune,
and of a deletion request): on SQLite FTS5 segments merged, an incremental vacuum in short
steps and the WAL truncated, each step leaving the write lock free for about as long as
it held it; on PostgreSQL `VACUUM`."""

import time
from collections.abc import Callable

from django.db import connection, transaction

from conversations.db import busy_timeout
from conversations.models import Checkpoint, Conversation, Message
from conversations.owned import owned_tables

from . import disk
from .lease import LOCK_POLL_SECONDS, in_turn

BATCH_SECONDS = 0.1

# Row deletes per transaction start here and adapt so that one takes about BATCH_SECONDS.
# Small, because nothing is measured yet: with FTS5's secure-delete one 100-row batch held
# the write lock 1.0-1.5 s on a 335 MB file; a handful of rows is never slow,
# and the size grows at most GROW_AT_MOST times a batch towards the measured target.
FIRST_BATCH = 8
GROW_AT_MOST = 4


def next_batch_size(size: int, done: int, took: float, cap: int) -> int:
    """The size of the next batch of row writes, after one of `size` that wrote `done` rows
    in `took` seconds (the write lock held): aimed at BATCH_SECONDS, never above `cap`.
    A batch that found fewer rows than it asked for says nothing of their cost."""
    if done < size:
        return size
    if took > BATCH_SECONDS:
        return max(1, int(size * BATCH_SECONDS / took))
    if took < BATCH_SECONDS / 2:
        grow = min(GROW_AT_MOST, BATCH_SECONDS / max(took, 0.001) / 2)
        return min(cap, max(size + 1, int(size * grow)))
    return size


def in_timed_batches(write: Callable[[int, list], int], *, cap: int, size: int = FIRST_BATCH,
                     after_each: Callable[[int], None] | None = None) -> tuple[int, int]:
    """Call `write(limit, timing)` (a write transaction of at most `limit` rows that appends to
    `timing` how long it held the write lock) in its turn, batch after batch, each sized by the
    last (`next_batch_size`, never above `cap`) with a pause for writers between, until a batch
    writes fewer rows than it asked for; `after_each(rows)` after every batch. Returns the rows
    written and the size the next batch would have had."""
    written = 0
    while True:
        limit, timing = size, []
        n = in_turn(lambda limit=limit, timing=timing: write(limit, timing))
        took = timing[-1] if timing else 0.0
        size = next_batch_size(limit, n, took, cap)
        written += n
        if after_each:
            after_each(n)
        if n < limit:
            return written, size
        yield_to_writers(took)


YIELD_SECONDS = 0.1


# How long a WAL truncation keeps trying to find a moment with no writer and no old reader.
TRUNCATE_WAIT_SECONDS = 10


# SQLite pages given back per incremental-vacuum step (4 MiB with 4 KiB pages):
# each step is one short write transaction, so appends never queue for long.
VACUUM_PAGES_PER_STEP = 1024


def yield_to_writers(took: float) -> None:
    """SQLite: after a step that held the write lock, leave it free for about as long.

    A writer of another process waiting for the lock sleeps in SQLite's busy handler
    (up to 100 ms at a time) and would lose every race against steps run back to back;
    a pause as long as the step, and at least one sleep of the handler, lets it in."""
    if connection.vendor == "sqlite":
        time.sleep(min(1.0, max(YIELD_SECONDS, took)))


FTS_MERGE_FIRST_PAGES = 256


def compact_fts_index(table: str, *, beat: Callable[[], None] | None = None) -> bool:
    """SQLite: merge an FTS5 index's segments into one, a few hundred pages per write
    transaction, each followed by a pause for other writers. The entries of rows that
    were deleted without secure-delete go with the segments that held them (their pages
    are freed, and zeroed: `secure_delete=ON`).

    Agents appending meanwhile add segments all the time, so "one segment" may never
    come: the work is bounded by twice the pages the index had when it started (enough
    to rewrite every one of them). False when that ran out first: what was there is
    merged, a few of the newest segments are not, and the next prune goes on."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return True
    with connection.cursor() as cursor:
        if table not in disk.fts5_tables(cursor):
            return True
        cursor.execute(f'SELECT count(*) FROM "{table}_data"')
        budget = 2 * cursor.fetchone()[0] + FTS_MERGE_FIRST_PAGES
    pages = FTS_MERGE_FIRST_PAGES

    def step():
        with transaction.atomic():
            raw = connection.connection
            before = raw.total_changes
            # A negative count merges every segment, whatever its level, as 'optimize'
            # would, but only about that many pages at a time.
            raw.execute(f"INSERT INTO \"{table}\"(\"{table}\", rank) VALUES ('merge', ?)", (-pages,))
            return raw.total_changes - before

    while budget > 0:
        started = time.monotonic()
        changed = in_turn(step)
        took = time.monotonic() - started
        if changed < 2:  # FTS5: fewer than two changes means nothing was left to merge
            return True
        budget -= pages
        if beat:
            beat()
        pages = max(16, min(8192, int(pages * BATCH_SECONDS / max(took, 0.001))))
        yield_to_writers(took)
    return False


def reclaim_space() -> list[str]:
    """Give freed pages back to the file system; returns notes on what could not be done.

    SQLite: incremental vacuum in short steps, then the WAL truncated; PostgreSQL:
    plain VACUUM. Neither blocks writers for more than a step.
    """
    notes: list[str] = []
    if connection.in_atomic_block:
        # VACUUM and checkpoints cannot run inside a transaction; the caller's
        # transaction (a test, or an outer atomic) owns the connection.
        return ["space not reclaimed: called inside a transaction"]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            mode = cursor.execute("PRAGMA auto_vacuum").fetchone()[0]
        if mode == 2:
            if not incremental_vacuum():
                notes.append("not every freed page was given back: writers kept the database busy")
        else:
            notes.append(
                "this SQLite file was created without auto_vacuum=INCREMENTAL: freed pages are reused "
                "but the file does not shrink until a full VACUUM"
            )
        with connection.cursor() as cursor:
            busy, _, _ = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            notes.append("the WAL could not be truncated: another connection was reading; it shrinks later")
    else:
        tables = [t.table for t in owned_tables()] + [Message._meta.db_table, Checkpoint._meta.db_table,
                                                       Conversation._meta.db_table]
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"VACUUM (ANALYZE) {table}")
        notes.append("PostgreSQL: VACUUM makes the freed space reusable inside the tables; "
                     "the files shrink only where whole pages at their end were freed")
    return notes


def truncate_wal(*, beat: Callable[[], None] | None = None) -> bool:
    """SQLite: checkpoint everything and cut the WAL to zero bytes (old page images
    live there, and a grown WAL is disk not given back). False when it found no moment
    to do it within TRUNCATE_WAIT_SECONDS, and on PostgreSQL or inside a transaction.

    A TRUNCATE checkpoint takes the write lock first and then waits, in the busy
    handler, for readers to reach the latest snapshot: every writer waits meanwhile.
    So it is tried with no busy handler at all, every few milliseconds, between other
    connections' transactions (as `in_turn` takes the write lock)."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return False
    from django.db import OperationalError

    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()  # most of the work, without blocking anyone
        with busy_timeout(0):
            deadline = time.monotonic() + TRUNCATE_WAIT_SECONDS
            last_beat = time.monotonic()
            while True:
                try:
                    busy, _, _ = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                except OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    busy = 1
                if not busy:
                    return True
                if time.monotonic() > deadline:
                    return False
                if beat is not None and time.monotonic() - last_beat > 1:
                    beat()
                    last_beat = time.monotonic()
                time.sleep(LOCK_POLL_SECONDS)


def incremental_vacuum(*, busy_ms: int | None = None, beat: Callable[[], None] | None = None,
                       attempts: int = 40) -> bool:
    """SQLite: give free pages back to the file system, VACUUM_PAGES_PER_STEP per step.

    Each step is its own short write transaction, so writers wait for at most one
    step. With `busy_ms`, a step waits at most that long for the lock and is tried
    again later. False when it had to stop before the free list was empty.
    """
    from django.db import OperationalError

    connection.ensure_connection()
    raw = connection.connection
    with busy_timeout(busy_ms):
        previous, failures = None, 0
        while True:
            free = raw.execute("PRAGMA freelist_count").fetchone()[0]
            if free == 0 or (previous is not None and free >= previous and failures == 0):
                return free == 0
            previous = free
            try:
                started = time.monotonic()
                # Through a cursor, Python's sqlite3 steps this pragma once, which frees a
                # single page; executescript runs it to the end.
                with connection.wrap_database_errors:
                    raw.executescript(f"PRAGMA incremental_vacuum({VACUUM_PAGES_PER_STEP});")
                failures = 0
                yield_to_writers(time.monotonic() - started)
            except OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                failures += 1
                if failures >= attempts:
                    return False
                time.sleep(0.02 * failures)
            if beat:
                beat()
