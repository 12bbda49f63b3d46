"""PostgreSQL erasure on disk: rewriting tables while agents keep writing, and the WAL.

A deleted row's bytes stay in its table's pages (and in its TOAST and index pages)
until the table is rewritten. `VACUUM FULL` rewrites it under an ACCESS EXCLUSIVE
lock held for the whole rewrite, index builds included: on 1,000,000 messages the
full-text GIN index alone took ~366 s, and every append, to any conversation, waited
that long. So tables are rewritten with pg_repack when it is installed:
it copies the live rows into a new table while writers go on (their changes are
logged by a trigger and replayed), builds the new table's indexes where nobody waits
for them, and takes the exclusive lock only twice, briefly, to start and to swap the
files. It is run with `--no-kill-backend` (a maintenance task never cancels another
connection) and asks for those locks with growing timeouts of at most a second.

Without pg_repack (the binary or the server extension missing, or a database user
that may not use it) erasure falls back to VACUUM FULL: the text is still made gone,
but writers wait for each rewrite, and the receipt says so (`rewrite.method`).

The WAL: every insert of a row, and a full image of every page it sat in when that
page was first changed after a checkpoint, is in `pg_wal`. A checkpoint does not
delete old segments but renames them for reuse, contents and all, so erased text
survives in "future" segments until the log reaches them. `clear_wal` forces segment
switches (PostgreSQL zero-fills the rest of a segment it switches away from) through
every such segment that still holds a needle, and checkpoints so the segments before
the switch are recycled in turn. What it cannot reach (kept by `wal_keep_size`, a
replication slot, or too far ahead) is reported with why and until when, and the
receipt then says `verified_except_wal`, never `verified`.
"""

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, connection

from conversations.backups import pg_client_env

from . import disk
from .lease import Lease

# pg_repack gives up on a table whose exclusive lock it could not get for this long
# (a long transaction holding the table); the table is then rewritten by VACUUM FULL.
REPACK_WAIT_SECONDS = 60
REPACK_TIMEOUT_SECONDS = 3600
# How often a long pg_repack wakes its caller to say the run is alive (lease.BEAT_EVERY_SECONDS).
REPACK_BEAT_SECONDS = 1.0
# GIN builds are far faster with more memory; pg_repack's own session only.
REPACK_MAINTENANCE_WORK_MEM = "256MB"
# At most this many bytes of WAL are switched through to reach a recycled segment.
WAL_FLUSH_MAX_BYTES = 2 * 1024 ** 3
WAL_ROUNDS = 5


def repack_binary() -> str | None:
    configured = settings.MEMORYUI_PG_REPACK
    return shutil.which(configured) if configured else None


def repack_problem() -> str | None:
    """None when pg_repack can rewrite this database's tables; else why not."""
    if repack_binary() is None:
        return "pg_repack is not installed (Debian: postgresql-15-repack)"
    with connection.cursor() as cursor:
        cursor.execute("SELECT default_version, installed_version FROM pg_available_extensions "
                       "WHERE name = 'pg_repack'")
        row = cursor.fetchone()
        if row is None:
            return "the server has no pg_repack extension (Debian: postgresql-15-repack)"
        if row[1] is None:
            try:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_repack")
            except DatabaseError as exc:
                return f"the pg_repack extension could not be created in this database ({type(exc).__name__})"
    return None


def _client_environment() -> dict:
    env = pg_client_env()
    env["PGOPTIONS"] = f"-c maintenance_work_mem={REPACK_MAINTENANCE_WORK_MEM}"
    return env


def repack_tables(tables: list[str], lease: Lease | None) -> dict[str, str | None]:
    """Rewrite these tables online with one pg_repack run: one process and one connection for
    them all, one table after another, each with its own lock wait and its own swap. (A run per
    table cost a deletion request 60-90 ms a table: a process, a connection and the extension's
    checks each time.) Returns, per table, None when pg_repack rewrote it, else what went
    wrong; the caller rewrites that table with VACUUM FULL instead."""
    command = [repack_binary(), "--no-kill-backend", f"--wait-timeout={REPACK_WAIT_SECONDS}",
               "--no-superuser-check", "--dbname", str(connection.settings_dict["NAME"])]
    for table in tables:
        command += ["--table", table]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=_client_environment())
    deadline = time.monotonic() + REPACK_TIMEOUT_SECONDS
    # Waits for the process itself (a small table is rewritten in tens of milliseconds: polling
    # every 0.2 s cost a deletion request most of its time), waking to beat the lease.
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            process.terminate()
            out, _ = process.communicate()
            return repack_outcomes(tables, 1, f"{out}\nERROR: stopped after {REPACK_TIMEOUT_SECONDS} s")
        try:
            out, _ = process.communicate(timeout=min(REPACK_BEAT_SECONDS, left))
            break
        except subprocess.TimeoutExpired:
            if lease is not None:
                lease.beat()
    return repack_outcomes(tables, process.returncode, out)


# pg_repack says `INFO: repacking table "public.name"` as it starts each table (in an order of its
# own, not the order given).
_STARTED = re.compile(r'repacking table "(?:[^"]*\.)?([^".]+)"')
# What it says of a table it did not rewrite: its lock wait ran out (with --no-kill-backend it
# skips the table and goes on, exit status 0), or an error (which ends the run).
_FAILED = ("ERROR", "timed out", "Skipping repack")


def repack_outcomes(tables: list[str], returncode: int, output: str) -> dict[str, str | None]:
    """Which tables one pg_repack run rewrote, from what it printed (repack_tables).

    A table counts as rewritten only when its part of the output names no failure and the run
    went on past it or ended well; anything else (an error before any table, a run stopped in
    the middle, a table never started) is a failure for that table, with the words that say why."""
    before: list[str] = []
    parts: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        started = _STARTED.search(line)
        if started:
            current = started.group(1)
            parts[current] = []
        elif line.strip():
            (parts[current] if current else before).append(line.strip())
    said = " ".join(" ".join(before).split())[-300:]
    outcomes: dict[str, str | None] = {}
    for table in tables:
        lines = parts.get(table)
        if lines is None:
            outcomes[table] = f"pg_repack did not reach {table} (exit status {returncode})" + \
                (f": {said}" if said else "")
            continue
        text = " ".join(" ".join(lines).split())
        last = table == current
        if any(word in text for word in _FAILED) or (last and returncode != 0):
            outcomes[table] = f"pg_repack of {table} failed: {text[-300:]}"
        else:
            outcomes[table] = None
    return outcomes


# --- the WAL ---------------------------------------------------------------------

def segment_number(name: str, segment_bytes: int) -> int:
    """A WAL segment's number on its timeline, counted in segments from the cluster's start.

    A segment's name is its timeline, then the 4 GB "log" it falls in and its place within
    that log (8 hex digits each): a log holds 2^32 / segment_bytes segments (256 of 16 MB),
    so the name read as one number jumps by 2^32 at every 4 GB of WAL and a segment past
    the boundary seemed petabytes ahead, out of reach."""
    return int(name[8:16], 16) * (2 ** 32 // segment_bytes) + int(name[16:24], 16)


def segment_bytes(cursor) -> int:
    return int(_settings(cursor)["wal_segment_size"][0])


def wal_directory() -> tuple[str | None, str | None]:
    with connection.cursor() as cursor:
        refused = disk.execute_if_permitted(cursor, "SHOW data_directory")
        if refused is not None:
            return None, f"the data directory is not visible to this database user ({type(refused).__name__})"
        path = os.path.join(cursor.fetchone()[0], "pg_wal")
    if not os.access(path, os.R_OK | os.X_OK):
        return None, f"{path} is not readable by this process"
    return path, None


def wal_segment_files() -> tuple[list[dict], str | None]:
    """Every WAL segment file in pg_wal, as file specs for the file helper."""
    path, problem = wal_directory()
    if problem:
        return [], problem
    names = sorted(n for n in os.listdir(path) if len(n) == 24 and all(c in "0123456789ABCDEF" for c in n))
    return [{"path": os.path.join(path, n), "name": f"pg_wal/{n}", "kind": "postgres-wal"} for n in names], None


def wal_position() -> int | None:
    """PostgreSQL: bytes of WAL written since the cluster began (None on SQLite)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
        return int(cursor.fetchone()[0])


def _current_segment(cursor) -> str:
    cursor.execute("SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
    return cursor.fetchone()[0]


def checkpoint(notes: list[str] | None = None) -> bool:
    """CHECKPOINT: what the server holds in memory goes into the files searched. It needs a
    superuser or the pg_checkpoint role; the application's own role, which row-level security
    applies to, may have neither (docs/OPERATIONS.md). Without it the files are searched as the
    server last wrote them, and `notes` says why; False then."""
    with connection.cursor() as cursor:
        refused = disk.execute_if_permitted(cursor, "CHECKPOINT")
    if refused is None:
        return True
    if getattr(refused.__cause__, "sqlstate", None) != "42501":  # insufficient_privilege
        raise refused
    if notes is not None and NO_CHECKPOINT not in notes:
        notes.append(NO_CHECKPOINT)
    return False


NO_CHECKPOINT = ("no CHECKPOINT: the database role needs the pg_checkpoint role (or to be a superuser) "
                 "to push what the server holds in memory into the files searched")


def switch_and_checkpoint() -> None:
    """End the current segment and checkpoint: every segment before it may be recycled."""
    with connection.cursor() as cursor:
        # A switch with nothing written since the last one is a no-op: write a tiny record first.
        cursor.execute("SELECT pg_logical_emit_message(false, 'memoryui', 'erasure')")
        cursor.execute("SELECT pg_switch_wal()")
    checkpoint()


def advance_past(segment: str, lease: Lease | None) -> int:
    """Switch segments until the log has written past `segment` (a recycled file ahead of
    it), which overwrites it. Returns the number of switches."""
    switches = 0
    with connection.cursor() as cursor:
        size = segment_bytes(cursor)
        target = segment_number(segment, size)
        while segment_number(_current_segment(cursor), size) <= target:
            cursor.execute("SELECT pg_logical_emit_message(false, 'memoryui', 'erasure')")
            cursor.execute("SELECT pg_switch_wal()")
            switches += 1
            if lease is not None:
                lease.beat()
    return switches


@dataclass
class WalState:
    """What the WAL still holds after erasure, for the receipt."""

    segments_searched: int = 0
    still_in: list[dict] = field(default_factory=list)
    switches: int = 0

    @property
    def status(self) -> str:
        return "still_there" if self.still_in else "gone"

    def as_dict(self) -> dict:
        return {"status": self.status, "segments_searched": self.segments_searched,
                "segment_switches": self.switches, "still_in": self.still_in}


def _settings(cursor) -> dict:
    cursor.execute("SELECT name, setting, unit FROM pg_settings WHERE name IN "
                   "('wal_segment_size', 'wal_keep_size', 'max_wal_size', 'checkpoint_timeout', 'archive_mode')")
    return {name: (value, unit) for name, value, unit in cursor.fetchall()}


def explain_segments(names: list[str]) -> list[dict]:
    """For each WAL segment file that still holds erased text: why it is still there and until when."""
    if not names:
        return []
    with connection.cursor() as cursor:
        current = _current_segment(cursor)
        conf = _settings(cursor)
        size = int(conf["wal_segment_size"][0])
        cursor.execute("SELECT slot_name, pg_walfile_name(restart_lsn) FROM pg_replication_slots "
                       "WHERE restart_lsn IS NOT NULL")
        slots = cursor.fetchall()
    keep_mb = int(conf["wal_keep_size"][0])
    out = []
    for name in sorted(set(names)):
        file = name.rsplit("/", 1)[-1]
        ahead = segment_number(file, size) - segment_number(current, size)
        if ahead > 0:
            mb = ahead * size // 2 ** 20
            why = "a recycled segment, kept for reuse with its old contents"
            until = (f"overwritten when the log reaches it, after about {mb} MB more WAL "
                     f"(more than the {WAL_FLUSH_MAX_BYTES // 2 ** 20} MB a request switches through)")
        else:
            holding = [slot for slot, restart in slots
                       if restart and segment_number(restart, size) <= segment_number(file, size)]
            if holding:
                why = f"kept by replication slot{'s' if len(holding) > 1 else ''} {', '.join(holding)}"
                until = "the slot's consumer has read past it; then the next checkpoint recycles it"
            elif keep_mb:
                why = f"kept by wal_keep_size ({keep_mb} MB)"
                until = (f"about {keep_mb} MB more WAL has been written; then a checkpoint recycles it and the "
                         "log overwrites it when it reaches it again")
            elif conf.get("archive_mode", ("off",))[0] != "off":
                why = "waiting to be archived (archive_mode)"
                until = "the archiver has copied it (the archive then holds the text); then a checkpoint recycles it"
            else:
                why = "still needed for crash recovery"
                until = f"the next checkpoints (at most checkpoint_timeout, {conf['checkpoint_timeout'][0]} s)"
        out.append({"file": name, "why": why, "until": until})
    return out
