"""The database as files on disk: which files, how many bytes.

Pruning reports bytes before and after; erasure reads every file's raw bytes.
On SQLite those are the main file, its WAL and its shared-memory index; on
PostgreSQL the relation files of the current database under data_directory.
"""

import os
from pathlib import Path

from django.db import DatabaseError, connection, transaction


def execute_if_permitted(cursor, sql: str) -> DatabaseError | None:
    """Run a statement the database role may lack the right to (SHOW data_directory,
    CHECKPOINT: a superuser's, or pg_read_all_settings's and pg_checkpoint's; the application's
    own role has neither: docs/OPERATIONS.md). None when it ran, else the refusal; inside a
    transaction a savepoint keeps a refusal from aborting it."""
    try:
        if connection.in_atomic_block:
            with transaction.atomic():
                cursor.execute(sql)
        else:
            cursor.execute(sql)
    except DatabaseError as exc:
        return exc
    return None


def sqlite_files() -> list[Path]:
    """The main file, -wal and -shm, those that exist."""
    main = Path(str(connection.settings_dict["NAME"]))
    return [p for p in (main, Path(f"{main}-wal"), Path(f"{main}-shm")) if p.exists()]


def database_bytes() -> int:
    """Bytes on disk: main file plus WAL on SQLite; pg_database_size on PostgreSQL."""
    if connection.vendor == "sqlite":
        main = Path(str(connection.settings_dict["NAME"]))
        return sum(p.stat().st_size for p in (main, Path(f"{main}-wal")) if p.exists())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return int(cursor.fetchone()[0])


# The file nodes of some relations, with their TOAST tables and every index of either.
_NODES_OF = """
WITH named AS (SELECT oid, reltoastrelid FROM pg_class WHERE relname = ANY(%s) AND relkind = 'r'),
     rels AS (SELECT oid FROM named UNION SELECT reltoastrelid FROM named WHERE reltoastrelid <> 0)
SELECT pg_relation_filenode(oid) FROM rels
UNION SELECT pg_relation_filenode(indexrelid) FROM pg_index WHERE indrelid IN (SELECT oid FROM rels)
"""


def relation_file_stem(name: str) -> str:
    """The filenode a PostgreSQL relation file belongs to, from its path or name: its fork and
    segment go ('base/16384/2619_fsm.1' → '2619')."""
    return name.rsplit("/", 1)[-1].split(".")[0].split("_")[0]


def postgres_relation_files(skip_relations=()) -> tuple[list[Path], str | None]:
    """Every file of the current database (all relations, forks and 1 GB segments), but those
    of `skip_relations` (tables, by name, with their TOAST and indexes): partitions a deletion
    request's conversations were never in (conversations/partitions.py).

    Returns (files, problem); problem says why the files cannot be listed or read,
    in which case the caller must not claim a verification.
    """
    with connection.cursor() as cursor:
        refused = execute_if_permitted(cursor, "SHOW data_directory")
        if refused is not None:  # not a superuser / pg_read_all_settings
            return [], f"the data directory is not visible to this database user ({type(refused).__name__})"
        data_directory = Path(cursor.fetchone()[0])
        cursor.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        database_oid = cursor.fetchone()[0]
        cursor.execute(
            "SELECT pg_relation_filepath(oid) FROM pg_class "
            "WHERE relkind IN ('r', 't', 'i', 'm', 'S') AND pg_relation_filepath(oid) IS NOT NULL"
        )
        relpaths = [row[0] for row in cursor.fetchall()]
        skipped = set()
        if skip_relations:
            cursor.execute(_NODES_OF, [list(skip_relations)])
            skipped = {str(node) for (node,) in cursor.fetchall() if node}
    if not data_directory.is_dir() or not os.access(data_directory, os.R_OK | os.X_OK):
        return [], f"the data directory {data_directory} is not readable by this process"
    # Every file of the database's own folder (so an orphaned or not yet unlinked
    # file is searched too), plus relations in other tablespaces.
    folders = {data_directory / "base" / str(database_oid)}
    folders |= {(data_directory / rel).parent for rel in relpaths}
    files: list[Path] = []
    for folder in sorted(folders):
        try:
            names = os.listdir(folder) if folder.is_dir() else []
        except OSError as exc:
            return [], f"{folder} is not readable ({exc.strerror})"
        if folder.name == str(database_oid) or folder.parent.name == "base":
            files += [folder / n for n in names if (folder / n).is_file()]
        else:
            stems = {(data_directory / rel).name for rel in relpaths if (data_directory / rel).parent == folder}
            files += [folder / n for n in names if relation_file_stem(n) in stems]
    files = [f for f in files if relation_file_stem(f.name) not in skipped]
    unreadable = [f for f in files if not os.access(f, os.R_OK)]
    if unreadable:
        return [], f"{len(unreadable)} relation files are not readable by this process"
    return sorted(set(files)), None


def fts5_tables(cursor) -> list[str]:
    cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")
    return [row[0] for row in cursor.fetchall()]


# The message search index (conversations/search migrations).
MESSAGE_FTS = "search_message_fts"


def _write_secure_delete(cursor, table: str, on: bool) -> None:
    cursor.execute(f"INSERT INTO \"{table}\"(\"{table}\", rank) VALUES ('secure-delete', {int(on)})")


def set_fts_secure_delete(table: str, on: bool) -> None:
    """SQLite: switch FTS5 secure-delete on or off for one index, if it exists."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        if table in fts5_tables(cursor):
            _write_secure_delete(cursor, table, on)


def ensure_fts_secure_delete() -> None:
    """SQLite: every FTS5 index removes a deleted row's entries at once (secure-delete,
    SQLite 3.42+) instead of recording the deletion and keeping the entries in older
    segments until a merge rewrites them. Set before a prune or an erasure deletes
    anything; persistent, so it is written once per index."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for table in fts5_tables(cursor):
            row = cursor.execute(f"SELECT v FROM \"{table}_config\" WHERE k = 'secure-delete'").fetchone()
            if not row or not row[0]:
                _write_secure_delete(cursor, table, True)
