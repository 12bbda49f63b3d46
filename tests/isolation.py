"""How a transactional test (transactional_db, live_server) leaves the database empty.

Django ends such a test with `flush`: it empties every model table, then sends
post_migrate, which writes every content type and permission back. Here the tables
are emptied and the content types and permissions are simply left in place (the rows
post_migrate would write again), which leaves the same state for a fraction of the cost.

SQLite's append-only triggers refuse the DELETEs, as they should. The purge turns
triggers off for its own connection alone, through SQLite's C interface
(SQLITE_DBCONFIG_ENABLE_TRIGGER): no SQL statement can do that, so no application code
and no person with a SQL prompt can, and every other connection stays guarded
(tests/test_invariants_sql.py and its kin check that they do). When the connection's
handle cannot be found (another Python build), the purge drops the triggers and puts
them back in its transaction instead, as it used to. PostgreSQL empties the tables that
hold rows with TRUNCATE, which row triggers do not see.
"""

import contextlib
import ctypes
import functools
import sqlite3
import sys

from django.core.management.color import no_style
from django.db import connections, transaction
from django.test import TransactionTestCase

# What post_migrate writes back after Django's flush: left in place instead. The catalogue of
# embedding models too: its rows are never deleted, and each process remembers their ids
# (conversations/embeddings/models.py), as a server does.
KEPT = {"django_migrations", "django_content_type", "auth_permission", "embeddings_embeddingmodel"}
# What a migration wrote that every test needs: the `default` project (conversations/projects.py).
# Its table is emptied of every other project after the tables that point at it.
PROJECTS, DEFAULT_PROJECT_ID = "conversations_project", 1
# Not model tables, so no flush empties them on SQLite: the search index (FTS5), the
# rows waiting to enter it (search migration 0002) and the dates of the indexed rows (0005).
SQLITE_SIDE_TABLES = ("search_message_pending", "search_message_dates")
_ENABLE_TRIGGER = 1003  # SQLITE_DBCONFIG_ENABLE_TRIGGER


def _sqlite_library(dbapi_connection):
    """The SQLite library that made this connection, or None if it cannot be told."""
    return _library_of(type(dbapi_connection))


@functools.cache  # one look through sys.modules per connection class, not one per purge
def _library_of(connection_class):
    """The SQLite library of connections of this class, or None if it cannot be told.

    It is the C extension module that defines the connection's class: Python's own
    `_sqlite3` (which links the system's libsqlite3) or a build that carries its own
    SQLite, as sqlean.py does (memoryui/sqlite/base.py). Calling one build's functions on
    another's handle is undefined behaviour: their structs differ, and sqlite3_db_config
    walks the connection's prepared statements to expire them, so a stranger's code would
    write into them wherever its own layout says."""
    for klass in connection_class.__mro__:
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None) or ""
            if getattr(module, "Connection", None) is klass and path.endswith(".so"):
                lib = ctypes.CDLL(path)  # resolves the sqlite3_* functions the module links or carries
                lib.sqlite3_libversion.restype = ctypes.c_char_p
                if lib.sqlite3_libversion().decode() != getattr(module, "sqlite_version", None):
                    return None
                lib.sqlite3_db_filename.restype = ctypes.c_char_p
                lib.sqlite3_db_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
                return lib
    return None


def _handle(dbapi_connection: sqlite3.Connection, expected_file: str):
    """The `sqlite3 *` of a Python sqlite3 connection: CPython keeps it right after the
    object header. Checked by asking SQLite for the file it opened; None if it is not."""
    lib = _sqlite_library(dbapi_connection)
    if lib is None:
        return None, None
    address = ctypes.c_void_p.from_address(id(dbapi_connection) + object.__basicsize__).value
    if not address:
        return lib, None
    opened = lib.sqlite3_db_filename(ctypes.c_void_p(address), b"main")
    same = opened is not None and opened.decode() == str(expected_file)
    return lib, ctypes.c_void_p(address) if same else None


def _set_triggers(lib, handle, on: bool) -> bool:
    now = ctypes.c_int(-1)
    rc = lib.sqlite3_db_config(handle, _ENABLE_TRIGGER, ctypes.c_int(int(on)), ctypes.byref(now))
    return rc == 0 and now.value == int(on)


@contextlib.contextmanager
def _sqlite_triggers_off(connection, cursor):
    """Triggers off for this connection only; or, failing that, dropped and put back."""
    connection.ensure_connection()
    lib, handle = _handle(connection.connection, connection.settings_dict["NAME"])
    if handle is not None and _set_triggers(lib, handle, False):
        try:
            yield
        finally:
            if not _set_triggers(lib, handle, True):
                connection.close()  # a new connection has its triggers on
        return
    triggers = cursor.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND sql IS NOT NULL").fetchall()
    for name, _ in triggers:
        cursor.execute(f'DROP TRIGGER "{name}"')
    yield
    for _, sql in triggers:
        cursor.execute(sql)


def _purge_sqlite(connection, tables: list[str]) -> None:
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute("PRAGMA defer_foreign_keys = ON")
        with _sqlite_triggers_off(connection, cursor):
            for table in tables:
                cursor.execute(f'DELETE FROM "{table}"')
            # With the triggers that keep them in step off, the FTS5 indexes would keep
            # entries for the rows just deleted.
            fts = cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'"
            ).fetchall()
            for (name,) in fts:
                try:
                    cursor.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'delete-all\')')
                except Exception:  # an FTS5 table that stores its own content
                    cursor.execute(f'DELETE FROM "{name}"')
            for side in SQLITE_SIDE_TABLES:
                if cursor.execute("SELECT 1 FROM sqlite_master WHERE name = %s", [side]).fetchone():
                    cursor.execute(f'DELETE FROM "{side}"')


def purged_tables(connection) -> list[str]:
    """The model tables a purge empties: all but what migrations and post_migrate wrote."""
    return [t for t in connection.introspection.django_table_names(only_existing=True, include_views=False)
            if t not in KEPT and t != PROJECTS]


def purge(alias: str = "default") -> None:
    """Empty every table a test may have written, keeping what migrations and post_migrate wrote."""
    connection = connections[alias]
    tables = purged_tables(connection)
    if connection.vendor == "sqlite":
        _purge_sqlite(connection, tables)
    else:
        _purge_postgresql(connection, tables)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {PROJECTS} WHERE id <> %s", [DEFAULT_PROJECT_ID])


def _purge_postgresql(connection, tables: list[str]) -> None:
    """TRUNCATE the tables that hold rows, found by one statement: a TRUNCATE gives each
    table and index it names new files, ~55 ms for all of them where a test wrote to a few.
    CASCADE takes along the empty tables whose foreign keys point at them (no kept table
    has one: a content type or a permission points at nothing that is emptied)."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(
            f"SELECT %s WHERE EXISTS (SELECT 1 FROM {quote(t)})" for t in tables), tables)
        holding = [name for (name,) in cursor.fetchall()]
    if holding:
        connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), holding, allow_cascade=True))


_django_fixture_teardown = TransactionTestCase._fixture_teardown


def _fixture_teardown(self):
    if self.available_apps is not None or self.serialized_rollback:
        return _django_fixture_teardown(self)  # Django's own flush knows these cases
    for alias in self._databases_names(include_mirrors=False):
        purge(alias)


def install() -> None:
    """Transactional tests end with `purge` instead of Django's flush."""
    TransactionTestCase._fixture_teardown = _fixture_teardown
