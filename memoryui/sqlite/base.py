"""SQLite, with the writers of one process queued on a lock instead of in SQLite's busy handler.

SQLite lets one writer at a time hold a database. A second connection that wants
to write while the first does waits in the busy handler, which sleeps and polls
(1, 2, 5, 10 … 100 ms): under a few concurrent agents most of an append's time is
spent asleep after the lock is already free. Within one process that wait is
avoidable: every write transaction (BEGIN IMMEDIATE, which is how Django opens
every transaction here, and the store's append hot path) first takes a
process-wide lock per database file, so the next writer starts the instant the
previous one commits. Writers in other processes still meet in SQLite's own lock
and busy handler, which is why `make run` serves from one process with threads.

It also runs on the SQLite of the sqlean.py package (3.50) instead of the one
Python was built with (Debian's 3.40): FTS5's secure-delete, so a deleted row
leaves no entry in a full-text index (3.42+), the sqlite_dbpage table that erasure
cleans pages through, and an integrity_check that reads WITHOUT ROWID tables
right. Every process of memoryui opens its databases through this one library:
two SQLite libraries in one process on one file would drop each other's locks.

Used as ENGINE "memoryui.sqlite" (memoryui/settings.py); everything else is
Django's SQLite backend.
"""

import datetime
import decimal
import re
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from itertools import tee

import sqlean.dbapi2 as Database
from django.db.backends.sqlite3 import base
from django.db.backends.sqlite3._functions import register as register_functions
from django.db.utils import OperationalError
from django.utils.dateparse import parse_date, parse_datetime, parse_time

# What Django registers on Python's own sqlite3 module, registered on this one.
Database.register_converter("bool", b"1".__eq__)
Database.register_converter("date", base.decoder(parse_date))
Database.register_converter("time", base.decoder(parse_time))
Database.register_converter("datetime", base.decoder(parse_datetime))
Database.register_converter("timestamp", base.decoder(parse_datetime))
Database.register_adapter(decimal.Decimal, str)
Database.register_adapter(datetime.date, base.adapt_date)
Database.register_adapter(datetime.datetime, base.adapt_datetime)

_FORMAT = re.compile(r"(?<!%)%s")


class SQLiteCursorWrapper(Database.Cursor):
    """Django's placeholders ("%s", "%(name)s") as SQLite's ("?", ":name")."""

    def execute(self, query, params=None):
        if params is None:
            return super().execute(query)
        names = list(params) if isinstance(params, Mapping) else None
        return super().execute(self.convert_query(query, param_names=names), params)

    def executemany(self, query, param_list):
        peek, param_list = tee(iter(param_list))
        first = next(peek, None)
        names = list(first) if first and isinstance(first, Mapping) else None
        return super().executemany(self.convert_query(query, param_names=names), param_list)

    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _FORMAT.sub("?", query).replace("%%", "%")
        return query % {name: f":{name}" for name in param_names}

_queues: dict[str, threading.Lock] = {}
_queues_guard = threading.Lock()


def writer_queue_for(name: str) -> threading.Lock:
    lock = _queues.get(name)  # the append path asks twice per row: no guard once it exists
    if lock is None:
        with _queues_guard:
            lock = _queues.setdefault(name, threading.Lock())
    return lock


class DatabaseWrapper(base.DatabaseWrapper):
    Database = Database
    _holds_writer_queue = False
    # Set by `deferred_begin()`: the next transaction's BEGIN IMMEDIATE (and the writer
    # lock) waits until its first statement, so what runs before it holds no lock.
    _defer_next_begin = False
    _begin_pending = False

    def get_new_connection(self, conn_params):
        conn = Database.connect(**conn_params)
        register_functions(conn)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA legacy_alter_table = OFF")
        for init_command in self.init_commands:
            if init_command := init_command.strip():
                conn.execute(init_command)
        return conn

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=SQLiteCursorWrapper)

    def _writer_lock(self) -> threading.Lock:
        return writer_queue_for(str(self.settings_dict["NAME"]))

    def _acquire_writer_queue(self) -> None:
        if self._holds_writer_queue:
            return
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        started = time.monotonic()
        if not self._writer_lock().acquire(timeout=timeout):
            raise OperationalError(
                f"database is locked: waited {time.monotonic() - started:.0f} s for another writer of this process")
        self._holds_writer_queue = True

    def _release_writer_queue(self) -> None:
        if self._holds_writer_queue:
            self._holds_writer_queue = False
            self._writer_lock().release()

    @contextmanager
    def writer_queue(self):
        """Hold this process's writer lock around a hand-made BEGIN IMMEDIATE … COMMIT."""
        if self._holds_writer_queue:
            yield
            return
        self._acquire_writer_queue()
        try:
            yield
        finally:
            self._release_writer_queue()

    def defer_next_begin(self) -> None:
        """Open the next transaction lazily: at its first statement rather than at atomic()'s entry.

        The idempotency middleware opens its transaction around a whole API handler;
        with this, request parsing and validation run before the write lock is taken."""
        self._defer_next_begin = True

    def begin_pending(self) -> None:
        """Run a deferred BEGIN IMMEDIATE now. Django's cursor does it at its first statement;
        code about to run statements on the sqlite3 connection itself calls this first."""
        if self._begin_pending:
            self._begin_pending = False
            self._begin_in_writer_queue()

    def _cursor(self, name=None):
        self.begin_pending()
        return super()._cursor(name)

    def _start_transaction_under_autocommit(self):
        if self._defer_next_begin:
            self._defer_next_begin = False
            self._begin_pending = True
            return
        self._begin_in_writer_queue()

    def _begin_in_writer_queue(self):
        """BEGIN IMMEDIATE in the writer queue, which is left again if BEGIN fails."""
        self._acquire_writer_queue()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_writer_queue()
            raise

    def _commit(self):
        return self._end_transaction(super()._commit)

    def _rollback(self):
        return self._end_transaction(super()._rollback)

    def _end_transaction(self, end):
        """Commit or roll back through `end`, then leave the writer queue."""
        if self._begin_pending:  # the transaction never ran a statement: nothing to end
            self._begin_pending = False
            return None
        try:
            return end()
        finally:
            self._release_writer_queue()

    def _close(self):
        self._begin_pending = self._defer_next_begin = False
        try:
            return super()._close()
        finally:
            self._release_writer_queue()
