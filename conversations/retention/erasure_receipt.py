"""Erasure, step 8 (erasure.py): what the receipt says about the verification, and its verdict."""

from dataclasses import dataclass

from django.db import connection

from . import pgfiles
from .erasure_verify import FileSearch, is_wal_file, searched_by_kind, set_aside_in_view


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
    # Files outside the database that may hold personal data (`plugins.leftover_files`), searched after removal.
    outside = "; and the upload folder of the data directory (import previews waiting for confirmation)"
    # Backups made before still hold it: the erasure journal makes every restore erase it again (reapply.py).
    backups = ("; backups taken before still hold it, and a restore of one re-applies this erasure from the "
               "erasure journal")
    if connection.vendor == "sqlite":
        return "the SQLite main file, its -wal and -shm files" + outside + backups
    return ("every relation file of the database (tables, TOAST, indexes, planner statistics, all forks) under "
            "data_directory, and every segment of the write-ahead log (pg_wal)" + outside
            + "; streaming replicas and WAL archives are not covered (docs/SCALING.md)" + backups)


@dataclass
class Checked:
    """What scrubbing and searching the files found (erasure.py's steps 6 and 7)."""

    search: FileSearch
    set_aside: set[str]
    notes: list[str]
    rewrite: dict
    wal: pgfiles.WalState


def verification(checked: Checked, *, subject: str, candidates: list[str], id_needles: list[str],
                 files_left: dict, seconds: dict, vector_needles: list[bytes] = ()) -> dict:
    """The receipt's `verification`: what was searched, where, what was found, and the verdict."""
    search, set_aside = checked.search, set_aside_in_view(checked.set_aside)
    searched = search.status == "searched"
    strings_checked = [c for c in candidates if c not in set_aside]
    vectors_checked = [v for v in vector_needles if v not in set_aside]
    checkable = strings_checked + id_needles + vectors_checked
    status = receipt_status(search)
    if status in ("verified", "verified_except_wal") and files_left["status"] != "verified":
        status = files_left["status"]
    document = {
        "database": connection.vendor,
        "status": status,
        "found": search.found or bool(files_left["found_in"]) if search.found is not None else None,
        "strings_checked": len(strings_checked) if searched else 0,
        "strings_set_aside": len(set_aside),
        "conversation_ids_checked": len(id_needles) if searched else 0,
        # Vectors (messages' and facts': derived personal data) searched for by their first bytes.
        "vectors_checked": len(vectors_checked) if searched else 0,
        "subject_checked": bool(subject) and subject not in set_aside and searched,
        "files_searched": len(search.files),
        "bytes_searched": sum(f["bytes"] for f in search.files),
        "files": search.files,
        "found_in": search.found_in + files_left["found_in"],
        "found_count": search.found_count,
        "scope": scope(),
        # What was searched, by kind of file (the WAL's segments or -wal file among them).
        "searched": searched_by_kind(search.files) if searched else {},
        "wal": wal_account(search, checked.wal) if searched else {"status": "not_searched"},
        "rewrite": checked.rewrite,
        "uploads": files_left,
        "verify_passes": search.passes,
        "seconds": seconds,
        "notes": checked.notes + ([search.problem] if search.problem else []) + files_left["problems"],
    }
    if not checkable and search.status == "searched" and files_left["status"] == "verified":
        document["status"] = "nothing_to_check"
    return document
