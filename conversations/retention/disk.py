"""The database as files on disk: which files, how many bytes.

Pruning reports bytes before and after; erasure reads every file's raw bytes.
On SQLite those are the main file, its WAL and its shared-memory index; on
PostgreSQL the relation files of the current database under data_directory.
"""

import os
from pathlib import Path

from django.db import connection


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


def postgres_relation_files() -> tuple[list[Path], str | None]:
    """Every relation file of the current database (all forks and 1 GB segments).

    Returns (files, problem); problem says why the files cannot be listed or read,
    in which case the caller must not claim a verification.
    """
    with connection.cursor() as cursor:
        try:
            cursor.execute("SHOW data_directory")
            data_directory = Path(cursor.fetchone()[0])
        except Exception as exc:  # not a superuser / pg_read_all_settings
            return [], f"the data directory is not visible to this database user ({type(exc).__name__})"
        cursor.execute(
            "SELECT pg_relation_filepath(oid) FROM pg_class "
            "WHERE relkind IN ('r', 't', 'i', 'm', 'S') AND pg_relation_filepath(oid) IS NOT NULL"
        )
        relpaths = [row[0] for row in cursor.fetchall()]
    if not data_directory.is_dir() or not os.access(data_directory, os.R_OK | os.X_OK):
        return [], f"the data directory {data_directory} is not readable by this process"
    listings: dict[Path, list[str]] = {}
    files: list[Path] = []
    for rel in relpaths:
        base = data_directory / rel
        if base.parent not in listings:
            try:
                listings[base.parent] = os.listdir(base.parent) if base.parent.is_dir() else []
            except OSError as exc:
                return [], f"{base.parent} is not readable ({exc.strerror})"
        stem = base.name
        for name in listings[base.parent]:
            # 16384, 16384.1 (1 GB segments), 16384_fsm, 16384_vm, 16384_init
            if name == stem or name.startswith(stem + ".") or name.startswith(stem + "_"):
                files.append(base.parent / name)
    unreadable = [f for f in files if not os.access(f, os.R_OK)]
    if unreadable:
        return [], f"{len(unreadable)} relation files are not readable by this process"
    return sorted(set(files)), None
