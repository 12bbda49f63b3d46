"""The SQLite search index's waiting list (search migration 0002), for tests on both databases."""

import importlib
import random
import string

from django.db import connection, transaction

from conversations.search.models import POSITION_SPAN, project_token

PENDING_MIGRATION = importlib.import_module("conversations.search.migrations.0002_pending_rows")
# The flush as the index's latest columns need it (the project's token, migration 0011).
INDEX_MIGRATION = importlib.import_module("conversations.search.migrations.0011_project_in_index")


def sqlite_rows(table: str) -> int:
    """Rows in one of the SQLite index's own tables (PostgreSQL has none of them: 0)."""
    if connection.vendor != "sqlite":
        return 0
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return cursor.fetchone()[0]


def waiting_rows() -> int:
    """Rows appended but not yet in the FTS5 index (always 0 on PostgreSQL)."""
    return sqlite_rows(PENDING_MIGRATION.PENDING)


def into_the_index():
    """What the 64th waiting row's trigger does: the waiting rows go into the index."""
    if connection.vendor == "sqlite":
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(INDEX_MIGRATION.FLUSH)
            cursor.execute(f"DELETE FROM {PENDING_MIGRATION.PENDING}")
        assert waiting_rows() == 0


# A message row `m` that is not a fork's copy of its source's row (search migration 0004).
_NOT_A_COPY = ("NOT EXISTS (SELECT 1 FROM search_borrowed b WHERE b.conversation_id = m.conversation_id "
               "AND m.position <= b.upto)")


def rows_the_index_knows() -> tuple[int, int]:
    """(rows in the index plus rows waiting to enter it, message rows that are not a fork's
    copies). The two are equal exactly when every row is indexed once, no deleted row
    lingers, and no copy is indexed again (search migration 0004: a fork's copied rows
    are found through the rows they were copied from)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM conversations_message m WHERE {_NOT_A_COPY}")
        own = cursor.fetchone()[0]
        if connection.vendor != "sqlite":
            cursor.execute("SELECT count(*) FROM conversations_message WHERE search_tsv IS NOT NULL")
            return cursor.fetchone()[0], own
        cursor.execute(f"SELECT (SELECT count(*) FROM search_message_fts_docsize) + "
                       f"(SELECT count(*) FROM {PENDING_MIGRATION.PENDING})")
        return cursor.fetchone()[0], own


def assert_index_sound():
    """Every row that is not a fork's copy indexed once, nothing else; SQLite's FTS5
    index structure intact (a 'delete' of a row it never had would break it)."""
    indexed, own = rows_the_index_knows()
    assert indexed == own
    if connection.vendor == "sqlite":
        assert dated_rows() == own  # the dates date filters start from (search migration 0005)
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO search_message_fts(search_message_fts) VALUES ('integrity-check')")
        assert rows_by_project_token() == rows_by_project()


def rows_by_project_token() -> dict[int, int]:
    """SQLite: project id → index entries holding its token (search migration 0011)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT project_id FROM search_conversationkey")
        ids = [i for (i,) in cursor.fetchall()]
        counts = {}
        for project_id in ids:
            cursor.execute("SELECT count(*) FROM search_message_fts WHERE search_message_fts MATCH %s",
                           [f'project : "{project_token(project_id)}"'])
            counts[project_id] = cursor.fetchone()[0]
    return {i: n for i, n in counts.items() if n}


def rows_by_project() -> dict[int, int]:
    """SQLite: project id → its rows in the index (not waiting, not a fork's copies)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT k.project_id, count(*) FROM conversations_message m "
            f"JOIN search_conversationkey k ON k.conversation_id = m.conversation_id "
            f"WHERE {_NOT_A_COPY} AND NOT EXISTS (SELECT 1 FROM {PENDING_MIGRATION.PENDING} p "
            f"WHERE p.id = k.seq * {POSITION_SPAN} + m.position) GROUP BY k.project_id")
        return dict(cursor.fetchall())


def index_setting(name: str):
    """SQLite: one of the message index's FTS5 settings ('automerge', 'secure-delete'), or None
    where FTS5 keeps its default."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT v FROM search_message_fts_config WHERE k = %s", [name])
        found = cursor.fetchone()
    return found[0] if found else None


def dated_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_message_dates")
        return cursor.fetchone()[0]


# PostgreSQL: the search index's files: the index itself, or, on the partitioned message table,
# each partition's index (the partitioned index has no file of its own).
_PG_INDEX_FILES = ("(i.oid = 'search_message_tsv_idx'::regclass OR i.oid IN (SELECT inhrelid FROM pg_inherits "
                   "WHERE inhparent = 'search_message_tsv_idx'::regclass)) AND i.relkind = 'i'")


def fold_pending_index_entries() -> None:
    """PostgreSQL: fold the GIN index's pending list into its tree. New entries wait in that
    list until a VACUUM (or autovacuum's analyze) folds them, at any moment, which can take new
    pages; folded first, a measurement of the index's size sees the tree alone."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT gin_clean_pending_list(i.oid) FROM pg_class i WHERE {_PG_INDEX_FILES}")


def index_bytes() -> bytes:
    """The bytes of the search index's own storage (not the message table)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT block FROM search_message_fts_data")
            return b"".join(bytes(row[0]) for row in cursor.fetchall() if row[0] is not None)
        cursor.execute("CHECKPOINT")
        cursor.execute("SELECT current_setting('data_directory') || '/' || pg_relation_filepath(i.oid) "
                       f"FROM pg_class i WHERE {_PG_INDEX_FILES}")
        paths = [row[0] for row in cursor.fetchall()]
    out = b""
    for path in paths:
        with open(path, "rb") as f:
            out += f.read()
    return out


def migrate_everything_forward():
    """Every app to its latest migration: going back in search also undid the migrations of
    other apps that depend on it (conversations' partitions and project columns), which a
    forward migration of search alone would leave undone."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def fresh_word() -> str:
    """A word for an erasure test to find and erase. It starts with "zz", so no other indexed
    word shares its first letters and the index stores it whole; it ends in "quorblet", which no
    stemmer shortens (the index holds the stem); its middle is drawn for each call, because
    PostgreSQL's WAL is the cluster's, and a word another test wrote may still be in a segment
    an erasure cannot reach, which its receipt would rightly report."""
    return "zzyzx" + "".join(random.choice(string.ascii_lowercase) for _ in range(6)) + "quorblet"


def index_holds(word: str) -> int:
    """Rows the index itself says hold `word` (raw SQL, not the code under test): the FTS5
    index's own answer on SQLite, before any join; the rows' stored words on PostgreSQL."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT count(*) FROM search_message_fts WHERE search_message_fts MATCH %s", [word])
        else:
            cursor.execute("SELECT count(*) FROM conversations_message "
                           "WHERE search_tsv @@ plainto_tsquery('english', %s)", [word])
        return cursor.fetchone()[0]
