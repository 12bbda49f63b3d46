"""Transactions and locks: the five mechanisms, when to use each, and their helpers.

Writers meet in the database. Each mechanism below answers one kind of meeting; use the
first one that fits, and never a second lock where one already serialises the writers.

1. **One transaction per write** (`transaction.atomic()`). Every store function runs
   in one. On SQLite Django opens it as BEGIN IMMEDIATE (`transaction_mode` in
   memoryui/settings.py), so the transaction holds the database's single write lock
   from its first statement to COMMIT, and the writers of one process queue on a
   process-wide lock in front of it (`writer_queue`, memoryui/sqlite/base.py). The
   append hot path issues its own BEGIN IMMEDIATE … COMMIT under that same queue
   (`conversations.store._write_rows`). On PostgreSQL it is a READ COMMITTED
   transaction, and the mechanisms below do the serialising.
   Use for: every write. Nothing else is needed on SQLite.

2. **Row locks** (`QuerySet.for_update()`, below). PostgreSQL: SELECT … FOR UPDATE,
   held to the end of the transaction. SQLite: nothing, since the IMMEDIATE transaction
   already holds the write lock. A counter bumped with UPDATE … RETURNING locks its row
   by itself (`rows.reserve_positions`).
   Use for: reading a row and then writing because of what it says — a conversation
   before a fold, a fork or a ledger entry (`store.lock_conversation`), a fact under
   review, an import's source or stage rows, the maintenance lease, an API key.

3. **Advisory locks** (`advisory_lock(key)`, below): PostgreSQL's transaction-level
   `pg_advisory_xact_lock`; SQLite: nothing, as in 2.
   Use for: serialising writers that have no row to lock — the audit log's single chain
   (`store.AUDIT_CHAIN_LOCK`), the login throttle's reservations.

4. **The write lock taken in turn** (`retention.lease.in_turn` and `busy_timeout(ms)`,
   below). SQLite only: maintenance steps try for the write lock with no busy handler and
   poll every few milliseconds, instead of sleeping in SQLite's busy handler (up to 100 ms
   between tries) while agents take the lock back to back.
   Use for: a maintenance step (a prune or deletion batch, a WAL checkpoint, a vacuum
   step) that must neither stall writers nor wait for minutes behind them.

5. **The maintenance lease** (`retention.lease.maintenance`): one row, with a heartbeat,
   held across many short transactions by one prune or deletion request at a time in
   every process; taken over when its holder's process is gone or its heartbeat stale.
   A staged import holds its hidden conversations the same way (`imports.models.ImportStage`).
   Use for: work too long for one transaction that must not run twice at once.
"""

from contextlib import contextmanager, nullcontext

from django.db import DEFAULT_DB_ALIAS, connections, models


class LockingQuerySet(models.QuerySet):
    """A QuerySet with `for_update()`: the core models' and their sub-apps' base."""

    def for_update(self, **kwargs):
        """Lock the selected rows to the end of the transaction (mechanism 2): PostgreSQL's
        SELECT … FOR UPDATE; on SQLite the same QuerySet, as the IMMEDIATE transaction
        already holds the database's write lock."""
        if connections[self.db].vendor == "sqlite":
            return self
        return self.select_for_update(**kwargs)


def advisory_lock(key: int, *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Queue on `key` to the end of the transaction (mechanism 3); nothing on SQLite."""
    db = connections[using]
    if db.vendor == "postgresql":
        with db.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


@contextmanager
def busy_timeout(ms: int | None, *, using: str = DEFAULT_DB_ALIAS):
    """SQLite: for the block, wait at most `ms` for a lock in the busy handler (0: do not
    wait, fail at once with "database is locked"), then wait as long as before. Nothing on
    PostgreSQL, nor with `ms` None."""
    db = connections[using]
    if db.vendor != "sqlite" or ms is None:
        yield
        return
    db.ensure_connection()
    raw = db.connection
    previous = raw.execute("PRAGMA busy_timeout").fetchone()[0]
    raw.execute(f"PRAGMA busy_timeout = {int(ms)}")
    try:
        yield
    finally:
        raw.execute(f"PRAGMA busy_timeout = {int(previous)}")


def writer_queue(db):
    """This process's queue of SQLite writers (memoryui/sqlite/base.py), for a hand-made
    BEGIN IMMEDIATE … COMMIT (mechanism 1); no lock on other databases."""
    queue = getattr(db, "writer_queue", None)
    return queue() if queue is not None else nullcontext()
