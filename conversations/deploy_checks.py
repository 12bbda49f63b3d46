"""`manage.py check --deploy`: what memoryui itself asks of a production deployment.

memoryui.W001: the application connects to PostgreSQL as a role that row-level security does
not apply to (a superuser, or a role with BYPASSRLS). The policies (conversations/
migration_sql.py) are the database's own fence between projects, for when a query forgets the
application's; such a role reads every project's rows whatever the policies say.

memoryui.W002: `tsvector @@ tsquery` is not declared LEAKPROOF in this database, so a search
under the policies cannot use its index (search migration 0009 declares it when a superuser
runs the migrations).

memoryui.W003: PostgreSQL recycles old WAL segments (`wal_recycle = on`, its default): it
renames them for reuse with what they held, so a deletion request's erased text outlives the
checkpoint in them, and each request's window writes WAL until the log has overwritten every
such segment (up to max_wal_size, over 1 GB per request in bench/NOTES.md, workload 19).
With `wal_recycle = off` a checkpoint removes them instead.
"""

from django.core.checks import Tags, Warning, register
from django.db import DatabaseError, connection

W001 = "memoryui.W001"
W002 = "memoryui.W002"
W003 = "memoryui.W003"


def _ask_postgres(question):
    """`question()`'s answer on PostgreSQL; None on SQLite, or with no database to ask (a build
    step: /readyz says so when it matters)."""
    if connection.vendor != "postgresql":
        return None
    try:
        return question()
    except DatabaseError:
        return None


def role_bypassing_row_security() -> str | None:
    """The name of the role the application connects as when it bypasses row-level security, else None."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolname FROM pg_roles WHERE rolname = current_user AND (rolsuper OR rolbypassrls)")
        found = cursor.fetchone()
    return found[0] if found else None


@register(Tags.security, deploy=True)
def check_row_level_security_applies(app_configs=None, **kwargs):
    role = _ask_postgres(role_bypassing_row_security)
    if role is None:
        return []
    return [Warning(
        f"memoryui connects to PostgreSQL as {role!r}, a superuser or a role with BYPASSRLS: row-level security "
        "does not apply to it, so the database does not fence projects apart when a query forgets to.",
        hint="Connect as a role without SUPERUSER and BYPASSRLS that owns the database and ran the migrations "
             "(docs/OPERATIONS.md, \"The application's database role\").",
        id=W001,
    )]


def fulltext_match_is_leakproof() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT proleakproof FROM pg_proc WHERE oid = 'pg_catalog.ts_match_vq(tsvector, tsquery)'"
                       "::regprocedure")
        found = cursor.fetchone()
    return bool(found and found[0])


@register(Tags.database, deploy=True)
def check_fulltext_search_uses_its_index(app_configs=None, **kwargs):
    if _ask_postgres(fulltext_match_is_leakproof) is not False:
        return []
    return [Warning(
        "tsvector @@ tsquery is not declared LEAKPROOF in this database: under row-level security a search "
        "reads every row of the project instead of its full-text index (slower as the project grows).",
        hint="As a superuser, once per database: ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) "
             "LEAKPROOF (search migration 0009 does it when a superuser runs the migrations).",
        id=W002,
    )]


def wal_recycled() -> bool:
    """Whether the server renames old WAL segments for reuse instead of removing them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'wal_recycle'")
        found = cursor.fetchone()
    return bool(found and found[0] == "on")


@register(Tags.database, deploy=True)
def check_old_wal_is_removed(app_configs=None, **kwargs):
    if not _ask_postgres(wal_recycled):
        return []
    return [Warning(
        "wal_recycle is on: PostgreSQL keeps old WAL segments, with what they held, to write over later, so "
        "each deletion request's maintenance window writes WAL (up to max_wal_size) until the log has "
        "overwritten every segment that still holds erased text, and every standby and archive receives it.",
        hint="Set wal_recycle = off (postgresql.conf, or ALTER SYSTEM SET wal_recycle = off; SELECT "
             "pg_reload_conf()): a checkpoint then removes old segments (docs/operators.md, \"Erasure and "
             "the WAL\").",
        id=W003,
    )]
