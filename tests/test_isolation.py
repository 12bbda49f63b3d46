"""The purge that ends a transactional test (tests/isolation.py) empties the tables
without weakening the append-only guards for anyone else."""

import sqlite3

import pytest
import sqlean
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import DatabaseError, connection, transaction

from conversations import api_keys, store
from conversations.models import Conversation, Message
from tests import isolation
from tests.retention_support import conversation

pytestmark = pytest.mark.django_db(transaction=True)


def _refused(cursor_owner, sql: str) -> bool:
    try:
        cursor_owner.execute(sql)
    except (DatabaseError, connection.Database.DatabaseError) as exc:
        return "append-only" in str(exc)
    return False


def test_the_purge_empties_the_written_tables_and_keeps_what_post_migrate_writes():
    conversation(title="left behind", messages=3)
    permissions, content_types = Permission.objects.count(), ContentType.objects.count()
    isolation.purge()
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert (Permission.objects.count(), ContentType.objects.count()) == (permissions, content_types) != (0, 0)


def test_after_the_purge_every_table_but_the_kept_ones_is_empty():
    # On PostgreSQL the purge truncates only the tables that hold rows: rows in several
    # tables linked by foreign keys (a conversation, its messages, a fork and its lineage)
    # and in one a test rarely writes (an API key) must all be found. Each table is read
    # here on its own, not through the purge's own look-up.
    c = conversation(title="two tables", messages=2)
    store.fork_conversation(conversation_id=c.pk, position=0)
    api_keys.create_api_key(name="left", scopes=["read"], created_by="test")
    tables = isolation.purged_tables(connection)
    isolation.purge()
    holding = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT 1 FROM {connection.ops.quote_name(table)} LIMIT 1")
            if cursor.fetchone():
                holding.append(table)
    assert holding == []


def test_no_other_connection_is_unguarded_during_a_purge_nor_this_one_after_it():
    conversation(title="guarded", messages=2)
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        _, handle = isolation._handle(connection.connection, connection.settings_dict["NAME"])
        assert handle is not None, "the purge fell back to dropping and recreating the triggers"
        # Through the connection's own SQLite build: the system's, closing its descriptors,
        # would drop this process's locks on the file and delete the WAL still in use.
        other = connection.Database.connect(connection.settings_dict["NAME"], timeout=30)
        try:
            with connection.cursor() as cursor, isolation._sqlite_triggers_off(connection, cursor):
                # Triggers are off for the purging connection, and for it alone.
                assert _refused(other, "DELETE FROM conversations_message")
                other.rollback()
        finally:
            other.close()
    else:
        isolation.purge()  # TRUNCATE: row triggers do not see it, and stay in place
        conversation(title="guarded", messages=2)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM conversations_message")
    assert Message.objects.count() == 2


def test_the_purge_calls_the_sqlite_build_that_made_the_connection():
    # Another build's functions on this connection's handle would write into its statements
    # by a foreign struct layout (memoryui runs on sqlean.py's SQLite, not the system's).
    if connection.vendor != "sqlite":
        return
    connection.ensure_connection()
    lib = isolation._sqlite_library(connection.connection)
    assert lib is not None
    assert lib.sqlite3_libversion().decode() == connection.Database.sqlite_version


def test_the_system_sqlite_may_not_open_the_live_database():
    """tests/conftest.py refuses it: see the test below for what it would do."""
    if connection.vendor != "sqlite":
        return
    connection.ensure_connection()
    with pytest.raises(AssertionError, match="connection.Database.connect"):
        sqlite3.connect(connection.settings_dict["NAME"])


@pytest.mark.database_independent
def test_a_second_sqlite_library_closing_its_connection_deletes_the_wal_in_use(tmp_path):
    """Why: the system's SQLite, closing its only connection, takes itself for the last
    one (the process's own locks never conflict), folds the WAL in and deletes it, while
    the store's connection, from sqlean.py's build, still has it open."""
    path = tmp_path / "two-libraries.sqlite3"
    store = sqlean.connect(path, isolation_level=None)
    try:
        store.execute("PRAGMA journal_mode = wal")
        store.execute("CREATE TABLE t (x)")
        store.execute("INSERT INTO t VALUES (1)")
        assert (tmp_path / "two-libraries.sqlite3-wal").exists()
        same_library = sqlean.connect(path)
        same_library.execute("SELECT count(*) FROM t").fetchone()
        same_library.close()
        assert (tmp_path / "two-libraries.sqlite3-wal").exists()  # one library knows its own locks
        other_library = sqlite3.connect(path)
        other_library.execute("SELECT count(*) FROM t").fetchone()
        other_library.close()
        assert not (tmp_path / "two-libraries.sqlite3-wal").exists()
    finally:
        store.close()
