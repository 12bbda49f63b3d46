"""Erasure, step 6 (erasure.py): leave no copy of the deleted text in the database files,
in steps writers can pass between. On SQLite the entries a request filed in two phases left
in the full-text index are removed (conversations/search/unindex.py), the WAL is
checkpointed and truncated and freed pages go back by incremental vacuum; PostgreSQL
rewrites the tables online with pg_repack, or with VACUUM FULL where it is missing
(pgfiles.py), and drops planner statistics that sampled erased text.
"""

import time

from django.apps import apps
from django.db import DatabaseError, OperationalError, connection

from conversations import partitions
from conversations.models import Checkpoint, Conversation, Message
from conversations.owned import owned_tables
from conversations.search import unindex

from . import disk, pgfiles
from .lease import Lease, in_turn
from .reclaim import in_timed_batches, incremental_vacuum, truncate_wal

# How long erasure waits for transactions older than the deletion to end (see _wait_for_older_snapshots).
SNAPSHOT_WAIT_SECONDS = 30
# SQLite steps that take the write lock wait at most this long for it, then retry:
# a writer never queues behind erasure for more than about this.
STEP_BUSY_MS = 250
STEP_ATTEMPTS = 40
PG_LOCK_TIMEOUT = "500ms"
# pg_statistic's fixed object id: its TOAST table is pg_toast.pg_toast_2619.
_PG_STATISTIC_OID = 2619


def truncate_wal_or_note(notes: list[str], lease: Lease | None) -> bool:
    if not truncate_wal(beat=lease.beat if lease else None):
        notes.append("the WAL could not be truncated: other connections kept reading")
        return False
    return True


# Queued index entries removed per write transaction at most (each batch is timed: reclaim.py).
UNINDEX_BATCH = 2000


def remove_deferred_index_entries(lease: Lease | None) -> int:
    """SQLite: remove from the full-text index the entries of rows that requests filed in two
    phases deleted (conversations/search/unindex.py), secure-delete on, in batches timed like
    a deletion's, with a pause for writers after each; returns how many rows' entries."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return 0
    disk.ensure_fts_secure_delete()
    removed, _ = in_timed_batches(unindex.remove_batch, cap=UNINDEX_BATCH,
                                  after_each=(lambda n: lease.beat()) if lease else None)
    in_turn(unindex.forget_done)
    return removed


def _scrub_sqlite(notes: list[str], lease: Lease | None) -> None:
    remove_deferred_index_entries(lease)
    truncate_wal_or_note(notes, lease)
    if not incremental_vacuum(busy_ms=STEP_BUSY_MS, beat=lease.beat if lease else None):
        notes.append("freed pages were not all given back: writers kept the database busy (they are zeroed)")
    truncate_wal_or_note(notes, lease)


def _wait_for_older_snapshots(xid: int | None, notes: list[str]) -> None:
    """PostgreSQL keeps a deleted row while any transaction that may still see it is
    open (VACUUM FULL copies such "recently dead" rows into the new file): wait,
    boundedly, for transactions older than the deletion to end."""
    if xid is None:
        return
    deadline = time.monotonic() + SNAPSHOT_WAIT_SECONDS
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                # Only this database's transactions hold back its tables' dead rows: another
                # database's long transaction (a report, a second deployment) never delays this one.
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                "AND datname = current_database() "
                "AND (age(backend_xmin) >= age((%s::bigint %% 4294967296)::text::xid) "
                "OR age(backend_xid) >= age((%s::bigint %% 4294967296)::text::xid))",
                [xid, xid],
            )
            if cursor.fetchone()[0] == 0:
                return
            if time.monotonic() > deadline:
                notes.append("a transaction older than the deletion was still open; rows it could see may remain")
                return
            time.sleep(0.05)


def _vacuum_full(cursor, table: str, notes: list[str], lease: Lease | None) -> None:
    """VACUUM FULL needs an exclusive lock; asked for with a short timeout so that
    appends never queue behind a request that waits for a long reader."""
    cursor.execute(f"SET lock_timeout = '{PG_LOCK_TIMEOUT}'")
    try:
        for attempt in range(STEP_ATTEMPTS):
            try:
                cursor.execute(f'VACUUM (FULL, ANALYZE) "{table}"')
                return
            except OperationalError as exc:
                if "lock timeout" not in str(exc):
                    raise
            if lease is not None:
                lease.beat()
            time.sleep(0.05 * (attempt + 1))
        notes.append(f"{table} could not be rewritten: other sessions kept it locked")
    finally:
        cursor.execute("SET lock_timeout = 0")


def resample_statistics(notes: list[str], lease: Lease | None, touched: set[str] | None = None) -> None:
    """PostgreSQL: planner statistics that still hold deleted text, sampled again.

    ANALYZE samples a row whose deletion is still in progress as a live row, so an
    autovacuum ANALYZE that ran during the deleting transactions can store erased text
    as a common value; and a replaced statistics row outlives VACUUM FULL while any
    transaction older than its replacement is open. Both are gone after the tables are
    analysed again, older snapshots have ended, and the catalog is rewritten."""
    with connection.cursor() as cursor:
        for table in _tables_holding_subject_data(touched):
            cursor.execute(f'ANALYZE "{table}"')
            _clear_statistics_if_empty(cursor, table, notes)
        _partitioned_statistics(cursor, notes)
    _wait_for_older_snapshots(current_xid(), notes)
    with connection.cursor() as cursor:
        _vacuum_statistics(cursor, notes)
    if lease is not None:
        lease.beat()


# Column types whose sampled values can hold a row's text or words.
_TEXT_TYPES = ("text", "json", "jsonb", "tsvector", "bytea")


def _drop_sampled_text_of_partitioned(cursor, parent: str) -> None:
    """A partitioned table's own statistics, sampled across its partitions, can hold text and
    words of deleted rows. ANALYZE of it would analyse every partition again as well (PostgreSQL
    recurses), a cost that grows with the database; so its statistics of the columns that can
    hold text are dropped instead. The planner plans each partition's scan with that
    partition's statistics, which pg_repack took again; a manual ANALYZE brings the dropped ones
    back (autovacuum never analyses a partitioned table). A role that may not write the catalog
    (no superuser) analyses the table as before."""
    try:
        cursor.execute(
            "DELETE FROM pg_statistic s USING pg_attribute a WHERE s.starelid = %s::regclass "
            "AND a.attrelid = s.starelid AND a.attnum = s.staattnum AND a.atttypid::regtype::text = ANY(%s)",
            [f'"{parent}"', list(_TEXT_TYPES)])
    except DatabaseError:
        cursor.execute(f'ANALYZE "{parent}"')


def _partitioned_statistics(cursor, notes: list[str]) -> None:
    """Every partitioned table's own statistics: their sampled text dropped, or, when the table
    holds nothing, all of them."""
    for parent in _partitioned_parents():
        _drop_sampled_text_of_partitioned(cursor, parent)
        _clear_statistics_if_empty(cursor, parent, notes)


def _vacuum_statistics(cursor, notes: list[str]) -> None:
    """Planner statistics keep sample column values; ANALYZE (pg_repack's, VACUUM's, or ours)
    replaced them, and this drops the dead copies."""
    try:
        cursor.execute("VACUUM FULL pg_statistic")
    except Exception as exc:
        notes.append(f"pg_statistic was not vacuumed ({type(exc).__name__})")


def _clear_statistics_if_empty(cursor, table: str, notes: list[str]) -> None:
    """ANALYZE of a table with no rows leaves its old statistics as they were, sampled
    values included: a deletion that emptied the table would leave them holding erased
    text for good. An empty table's statistics describe nothing; they are dropped (a
    superuser's right, as the file search itself needs) and rebuilt by the next ANALYZE."""
    cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')
    if cursor.fetchone()[0]:
        return
    try:
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [f'"{table}"'])
    except DatabaseError as exc:
        notes.append(f"the statistics of the emptied table {table} could not be cleared ({type(exc).__name__})")


def is_statistics_file(name: str) -> bool:
    """A finding in pg_statistic or in its TOAST table (long sampled values are stored there)."""
    return name.endswith("(pg_statistic)") or name.endswith(f"(pg_toast.pg_toast_{_PG_STATISTIC_OID})")


def _scrub_postgres(xid: int | None, notes: list[str], lease: Lease | None, rewrite: dict,
                    touched: set[str] | None) -> None:
    steps: dict[str, float] = {}
    clock = time.monotonic()

    def step(name: str) -> None:
        nonlocal clock
        steps[name] = round(time.monotonic() - clock, 3)
        clock = time.monotonic()

    _wait_for_older_snapshots(xid, notes)
    step("older_transactions")
    problem = pgfiles.repack_problem()
    # How long each step took, on the receipt: what a request's rewrite costs, and where.
    rewrite.update(method="pg_repack" if problem is None else "vacuum_full", tables={}, seconds=steps)
    if problem is not None:
        rewrite["writers_waited"] = True
        notes.append(f"{problem}: the tables were rewritten with VACUUM FULL, and appends waited for each rewrite")
    tables = _tables_holding_subject_data(touched)
    failures = pgfiles.repack_tables(tables, lease) if problem is None else dict.fromkeys(tables, "not installed")
    for table in tables:
        failed = failures[table]
        with connection.cursor() as cursor:
            if failed is not None:
                if problem is None:
                    notes.append(f"{failed}; {table} was rewritten with VACUUM FULL instead (appends waited)")
                    rewrite["writers_waited"] = True
                _vacuum_full(cursor, table, notes, lease)
            rewrite["tables"][table] = "vacuum_full" if failed else "pg_repack"
            _clear_statistics_if_empty(cursor, table, notes)
    step("rewrite")
    with connection.cursor() as cursor:
        _partitioned_statistics(cursor, notes)
        _vacuum_statistics(cursor, notes)
    step("statistics")
    pgfiles.checkpoint(notes)
    step("checkpoint")


def scrub_disk(xid: int | None = None, lease: Lease | None = None, rewrite: dict | None = None,
               touched: set[str] | None = None) -> list[str]:
    """After the deleting transactions: leave no copy of the deleted text in the files.

    On PostgreSQL `rewrite` is filled with how each table was rewritten (pgfiles.py); of a
    partitioned table only the partitions in `touched` are (all of them when it is None)."""
    notes: list[str] = []
    if connection.in_atomic_block:
        return ["the files were not scrubbed: called inside a transaction"]
    if connection.vendor == "sqlite":
        _scrub_sqlite(notes, lease)
    else:
        _scrub_postgres(xid, notes, lease, rewrite if rewrite is not None else {}, touched)
    return notes


def current_xid() -> int | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT txid_current()")
        return int(cursor.fetchone()[0])


def _tables_holding_subject_data(touched: set[str] | None = None) -> list[str]:
    """The tables a request rewrites: a partitioned table's partitions in place of itself,
    only those in `touched` (the partitions its conversations were in) when it is given."""
    tables = [Message._meta.db_table, Checkpoint._meta.db_table, Conversation._meta.db_table]
    tables += [t.table for t in owned_tables()]
    try:
        for model in apps.get_app_config("facts").get_models():
            tables.append(model._meta.db_table)
    except LookupError:
        pass
    out = []
    for table in dict.fromkeys(tables):
        leaves = partitions.leaves(table)
        out += [leaf for leaf in leaves if touched is None or leaf in touched] if leaves else [table]
    return out


def _partitioned_parents() -> list[str]:
    return [t for t in (Message._meta.db_table,) if partitions.leaves(t)]
