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

Used as ENGINE "memoryui.sqlite" (memoryui/settings.py); everything else is
Django's SQLite backend.
"""

import threading
import time
from contextlib import contextmanager

from django.db.backends.sqlite3 import base
from django.db.utils import OperationalError

_queues: dict[str, threading.Lock] = {}
_queues_guard = threading.Lock()


def writer_queue_for(name: str) -> threading.Lock:
    with _queues_guard:
        return _queues.setdefault(name, threading.Lock())


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_writer_queue = False
    # Set by `deferred_begin()`: the next transaction's BEGIN IMMEDIATE (and the writer
    # lock) waits until its first statement, so what runs before it holds no lock.
    _defer_next_begin = False
    _begin_pending = False

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

    def _cursor(self, name=None):
        if self._begin_pending:
            self._begin_pending = False
            self._acquire_writer_queue()
            try:
                super()._start_transaction_under_autocommit()
            except BaseException:
                self._release_writer_queue()
                raise
        return super()._cursor(name)

    def _start_transaction_under_autocommit(self):
        if self._defer_next_begin:
            self._defer_next_begin = False
            self._begin_pending = True
            return
        self._acquire_writer_queue()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_writer_queue()
            raise

    def _commit(self):
        if self._begin_pending:  # the transaction never ran a statement: nothing to commit
            self._begin_pending = False
            return None
        try:
            return super()._commit()
        finally:
            self._release_writer_queue()

    def _rollback(self):
        if self._begin_pending:
            self._begin_pending = False
            return None
        try:
            return super()._rollback()
        finally:
            self._release_writer_queue()

    def _close(self):
        self._begin_pending = self._defer_next_begin = False
        try:
            return super()._close()
        finally:
            self._release_writer_queue()
