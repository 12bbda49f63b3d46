"""Erasure, step 8 (erasure.py): what the receipt says about the verification."""

from django.db import connection

from . import pgfiles
from .erasure_verify import FileSearch, is_wal_file


def receipt_status(search: FileSearch) -> str:
    """`verified` only when nothing was found in anything searched. On PostgreSQL erased
    text left only in WAL segments the request could not overwrite gives
    `verified_except_wal`: the database files are clean, the receipt says which segments
    still hold it and until when (`verification.wal`)."""
    if search.status == "not_possible":
        return "not_possible"
    if not search.found:
        return "verified"
    if connection.vendor != "sqlite" and search.found_in and all(is_wal_file(n) for n in search.found_in):
        return "verified_except_wal"
    return "found"


def wal_account(search: FileSearch, wal: pgfiles.WalState) -> dict:
    if connection.vendor == "sqlite":
        files = [f for f in search.files if f["file"].endswith("-wal")]
        found = [n for n in search.found_in if n.endswith("-wal")]
        # Truncated to zero bytes (or removed) before the search: then it holds nothing.
        return {"status": "still_there" if found else "gone", "files_searched": len(files),
                "bytes": sum(f["bytes"] for f in files), "still_in": found}
    return wal.as_dict()


def scope() -> str:
    # Files outside the database that may hold personal data (leftovers.py), searched after removal.
    outside = "; and the upload folder of the data directory (import previews waiting for confirmation)"
    if connection.vendor == "sqlite":
        return "the SQLite main file, its -wal and -shm files" + outside
    return ("every relation file of the database (tables, TOAST, indexes, planner statistics, all forks) under "
            "data_directory, and every segment of the write-ahead log (pg_wal)" + outside
            + "; replicas, WAL archives and backups are not covered")
