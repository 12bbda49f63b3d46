"""Backups that restore: `manage.py backup PATH` and `manage.py restore PATH`.

A backup is PATH (the database), PATH.manifest.json, and what the sub-apps keep beside it
(`plugins.backup_extras`: retention's erasure journal, PATH.erasure-journal, copied after the
database, so it is at least as new). The manifest says what
PATH holds as of its snapshot: every table's row count and a SHA-256 of its rows in
key order (copying.py's digests), and the migrations applied. A restore refuses a
database that is not empty, loads PATH, then checks the result against the manifest:
integrity, the migrations, every count and every digest. A backup whose manifest
does not match what came back is reported as failed, never as restored. Around the load,
`plugins.restore_prepare` may refuse it first (no erasure journal to re-apply) and
`plugins.restore_finish` re-applies every erasure newer than the backup
(retention/reapply.py) before the restored store is ready.

- **SQLite**: SQLite's online backup API, through the store's own SQLite library
  (sqlean; memoryui/sqlite/base.py says why there is one library per process), in one
  read transaction: in WAL mode writers go on appending while it copies, and what
  they commit after the snapshot is not in it. The live file is never opened any
  other way (retention/rawfiles.py says what that would cost). The manifest is
  computed from the copy itself, and the copy passes `PRAGMA integrity_check` first.
- **PostgreSQL**: `pg_dump -Fc` in a snapshot exported by a REPEATABLE READ
  transaction of this process, which computes the manifest in that same snapshot;
  pg_restore's script, run by psql in one transaction, loads it. Writers are never stopped. Without
  pg_dump and pg_restore (the PostgreSQL client tools) the commands say so and stop.
"""

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.migrations.recorder import MigrationRecorder
from sqlean import dbapi2 as Database  # the store's SQLite library (the backend's own), never Python's

from . import plugins
from .copying import _table_digest, models_in_order

FORMAT = "memoryui-backup/1"
SNAPSHOT_ALIAS = "backup_snapshot"


class BackupError(Exception):
    """Why a backup or a restore cannot be made, or did not verify."""


@dataclass
class Verification:
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)  # table → (manifest rows, restored rows)
    mismatched_tables: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # After the load verified: what the sub-apps did (notes) and could not do (unfinished).
    notes: list[str] = field(default_factory=list)
    unfinished: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return not self.mismatched_tables and not self.problems

    @property
    def rows(self) -> int:
        return sum(restored for _, restored in self.tables.values())


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def _describe(alias: str) -> dict:
    """Counts, digests and migrations of the database behind `alias`, as one snapshot sees it."""
    db = connections[alias]
    present = set(db.introspection.table_names())
    tables = {}
    for model in models_in_order():
        table = model._meta.db_table
        if table in present:
            tables[table] = {"rows": model._base_manager.using(alias).count(),
                             "sha256": _table_digest(model, alias)}
    applied = sorted(f"{app}.{name}" for app, name in
                     MigrationRecorder(db).migration_qs.values_list("app", "name"))
    return {"tables": tables, "migrations": applied}


def _sqlite_integrity(raw) -> str:
    rows = raw.execute("PRAGMA integrity_check").fetchall()
    return "ok" if rows == [("ok",)] else "; ".join(str(r[0]) for r in rows[:5])


# -- backup -----------------------------------------------------------------------------


def backup(path: Path) -> dict:
    path = Path(path).resolve()
    if path.exists() or manifest_path(path).exists():
        raise BackupError(f"{path} (or its manifest) already exists; a backup never overwrites one")
    if not path.parent.is_dir():
        raise BackupError(f"the folder {path.parent} does not exist")
    describe = _backup_sqlite if connection.vendor == "sqlite" else _backup_postgres
    partial = path.with_name(f".{path.name}.partial")
    created_at = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        described = describe(partial)
        described.update(plugins.backup_extras(path))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    manifest = {"format": FORMAT, "vendor": connection.vendor, "created_at": created_at, **described}
    _write_durably(manifest_path(path), json.dumps(manifest, indent=1, sort_keys=True).encode())
    return manifest


def _write_durably(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _backup_sqlite(target: Path) -> dict:
    connection.ensure_connection()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # 0600 before any byte is in it
    os.close(fd)
    copy = Database.connect(str(target))
    try:
        # pages=-1: one step, one read snapshot. Stepping would restart on every write
        # another process commits, and under steady appends might never finish.
        connection.connection.backup(copy, pages=-1)
        integrity = _sqlite_integrity(copy)
        if integrity != "ok":
            raise BackupError(f"the copy failed its integrity check: {integrity}")
        copy.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        copy.close()
    with _alias_for_file(target) as alias:
        return _describe(alias)


class _alias_for_file:
    """The backup file as a Django database alias, for the models to read it."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> str:
        settings = dict(connections.settings[DEFAULT_DB_ALIAS])
        settings["NAME"] = str(self.path)
        connections.settings[SNAPSHOT_ALIAS] = connections.configure_settings(
            {DEFAULT_DB_ALIAS: connections.settings[DEFAULT_DB_ALIAS], SNAPSHOT_ALIAS: settings})[SNAPSHOT_ALIAS]
        return SNAPSHOT_ALIAS

    def __exit__(self, *exc):
        connections[SNAPSHOT_ALIAS].close()
        del connections[SNAPSHOT_ALIAS]
        del connections.settings[SNAPSHOT_ALIAS]


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise BackupError(f"{name} is not installed: install the PostgreSQL client tools (Debian: postgresql-client), "
                          "or back up with your provider's snapshots (docs/operators.md, 'Backups')")
    return found


def pg_client_env() -> dict:
    """The environment for a PostgreSQL client program (pg_dump, psql, pg_repack) to
    reach the database Django is connected to: this process's own, plus PG* variables."""
    s = connection.settings_dict
    env = dict(os.environ)
    for key, var in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER"), ("PASSWORD", "PGPASSWORD")):
        if s.get(key):
            env[var] = str(s[key])
    env["PGDATABASE"] = str(s["NAME"])
    return env


# A backup holds every project. The application's role is subject to row-level security
# (conversations/migration_sql.py), and pg_dump by default refuses a table whose policies
# would filter it: it dumps through them instead, with every project seen, as the manifest
# is computed (an operator's process sees every project: conversations/projects.py).
_EVERY_PROJECT = "-c memoryui.all_projects=on"


def _backup_postgres(target: Path) -> dict:
    pg_dump = _pg_tool("pg_dump")
    # The project scope goes to the server before the snapshot's transaction: its isolation
    # level must be its first statement (memoryui/postgresql/base.py sends the scope otherwise).
    connection.ensure_connection()
    connection.sync_scope()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor.execute("SELECT pg_export_snapshot()")
            snapshot = cursor.fetchone()[0]
        # pg_dump reads the very snapshot the manifest is computed in, while this transaction holds it.
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        env = pg_client_env()
        env["PGOPTIONS"] = f"{env.get('PGOPTIONS', '')} {_EVERY_PROJECT}".strip()
        done = subprocess.run([pg_dump, "-Fc", "--no-owner", "--no-privileges", "--enable-row-security",
                               f"--snapshot={snapshot}", "-f", str(target)], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise BackupError(f"pg_dump failed: {done.stderr.strip()[-2000:]}")
        described = _describe(DEFAULT_DB_ALIAS)
    with open(target, "rb") as f:
        os.fsync(f.fileno())
    return described


# -- restore ----------------------------------------------------------------------------


def read_manifest(path: Path) -> dict:
    mpath = manifest_path(Path(path))
    try:
        manifest = json.loads(mpath.read_text())
    except FileNotFoundError:
        raise BackupError(f"{mpath} is missing: a backup is restored with the manifest it was made with") from None
    except ValueError as exc:
        raise BackupError(f"{mpath} is not a backup manifest: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{mpath} is not a {FORMAT} manifest")
    return manifest


def restore(path: Path, *, erasure_journal: Path | None = None, without_erasure_journal: bool = False) -> Verification:
    """Load the backup into the empty database, verify it, then let the sub-apps finish it
    (re-apply the erasures newer than the backup: the options say where their journal is,
    or that the restore goes on without it)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise BackupError(f"{path} is not a file")
    manifest = read_manifest(path)
    if manifest.get("vendor") != connection.vendor:
        raise BackupError(f"this is a {manifest.get('vendor')} backup and DATABASE_URL is a {connection.vendor} "
                          "database: restore into the same kind (to move to PostgreSQL, restore into SQLite, "
                          "then `manage.py copy_database`)")
    existing = connection.introspection.table_names()
    if existing:
        raise BackupError(f"the database is not empty ({len(existing)} tables, e.g. {existing[0]}); "
                          "restore into a new, empty database")
    plan = plugins.restore_prepare(path=path, manifest=manifest, erasure_journal=erasure_journal,
                                   without_erasure_journal=without_erasure_journal)
    load(path)
    result = verify(manifest)
    if result.verified:
        finished = plugins.restore_finish(plan, path=path, manifest=manifest)
        result.notes += finished["notes"]
        result.unfinished += finished["problems"]
    return result


def load(path: Path) -> None:
    """The backup's rows into the empty database, unverified and nothing re-applied: what a
    restore does first (and what restoring with other tools amounts to)."""
    if connection.vendor == "sqlite":
        _restore_sqlite(Path(path))
    else:
        _restore_postgres(Path(path))


def _restore_sqlite(path: Path) -> None:
    connection.ensure_connection()
    source = Database.connect(str(path))
    try:
        source.backup(connection.connection, pages=-1)
    finally:
        source.close()
    connection.close()  # the next query sees the restored schema on a fresh connection


# pg_restore empties the search path for safety; the search index's SQL functions call
# each other unqualified (search/migrations), so its generated column would not restore.
_EMPTY_SEARCH_PATH = b"SELECT pg_catalog.set_config('search_path', '', false);\n"
_SCHEMA_SEARCH_PATH = b"SELECT pg_catalog.set_config('search_path', 'public, pg_catalog', false);\n"


def _restore_postgres(path: Path) -> None:
    """pg_restore's script through psql in one transaction, with the search path the schema expects."""
    pg_restore, psql = _pg_tool("pg_restore"), _pg_tool("psql")
    connection.close()
    env = pg_client_env()
    # Errors to files, not pipes: a full pipe nobody reads would stall the tool writing it.
    with tempfile.TemporaryFile() as script_err, tempfile.TemporaryFile() as loader_err:
        script = subprocess.Popen([pg_restore, "--no-owner", "--no-privileges", "-f", "-", str(path)], env=env,
                                  stdout=subprocess.PIPE, stderr=script_err)
        loader = subprocess.Popen([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction",
                                   "-d", connection.settings_dict["NAME"], "-f", "-"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=loader_err)
        in_data = False
        try:
            for line in script.stdout:
                if in_data:
                    in_data = line != b"\\.\n"
                elif line.startswith(b"COPY ") and line.rstrip().endswith(b"FROM stdin;"):
                    in_data = True
                elif line == _EMPTY_SEARCH_PATH:
                    line = _SCHEMA_SEARCH_PATH
                loader.stdin.write(line)
            loader.stdin.close()
        except BrokenPipeError:  # psql stopped at the first error; its message says which
            pass
        script.stdout.close()
        script.wait()
        loader.wait()
        if script.returncode == 0 and loader.returncode == 0:
            return
        script_err.seek(0)
        loader_err.seek(0)
        why = (loader_err.read() or script_err.read()).decode(errors="replace").strip()[-2000:]
    raise BackupError(f"the restore failed and was rolled back (nothing was restored): {why}")


def verify(manifest: dict) -> Verification:
    """The restored database against the manifest: integrity, migrations, counts, digests."""
    result = Verification()
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        integrity = _sqlite_integrity(connection.connection)
        if integrity != "ok":
            result.problems.append(f"integrity check: {integrity}")
    now = _describe(DEFAULT_DB_ALIAS)
    if now["migrations"] != manifest.get("migrations"):
        result.problems.append("the applied migrations differ from the backup's")
    expected = manifest.get("tables") or {}
    for table, want in expected.items():
        got = now["tables"].get(table)
        result.tables[table] = (want["rows"], got["rows"] if got else 0)
        if got is None or got != want:
            result.mismatched_tables.append(table)
    for table in sorted(set(now["tables"]) - set(expected)):
        if now["tables"][table]["rows"]:
            result.problems.append(f"{table} holds rows the backup does not list")
    return result
