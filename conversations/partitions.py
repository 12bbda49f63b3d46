"""PostgreSQL: the message table in hash partitions of the conversation, so erasure rewrites
and searches only the partitions that held a subject's rows (retention/erasure_scrub.py).

A deletion request must leave no copy of the deleted text in the database files. Rewriting
a whole table to do so costs what the table holds (~110 s a GB with pg_repack), however
little the subject held. With the rows of a conversation in one of N partitions chosen by a
hash of its id, a request rewrites, and its verification reads, the partitions its
conversations were in: a request costs what those partitions hold, and partitions stay the
same size when N grows with the table (`manage.py message_partitions --count N`, which
moves every row once, under an exclusive lock: a maintenance step).

`repartition` turns a table into N partitions of itself (or changes N) whatever other apps
put on it: it keeps its columns, defaults, constraints, indexes, foreign keys, triggers and
row-level security policies, read from the catalog, and copies the rows in one transaction.
SQLite has no partitions: its erasure searches the one file once per window instead.
"""

import re

from django.conf import settings
from django.db import connection, transaction

MESSAGE_TABLE = "conversations_message"
MESSAGE_KEY = "conversation_id"
# A partition's name: the table's, then its remainder.
SUFFIX = "_p"
MAX_PARTITIONS = 4096


def default_count() -> int:
    return settings.MEMORYUI_PG_MESSAGE_PARTITIONS


def count(table: str = MESSAGE_TABLE, *, cursor=None) -> int:
    """How many hash partitions `table` has (0: a plain table, or SQLite)."""
    if cursor is None and connection.vendor != "postgresql":
        return 0
    own = cursor is None
    cursor = cursor or connection.cursor()
    try:
        cursor.execute("SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent "
                       "WHERE p.relname = %s AND p.relkind = 'p'", [table])
        return int(cursor.fetchone()[0])
    finally:
        if own:
            cursor.close()


def partitions_holding(ids: list, table: str = MESSAGE_TABLE, key: str = MESSAGE_KEY) -> list[str]:
    """The partitions of `table` that hold rows of these key values (conversations), by name;
    the table itself when it is not partitioned. Read before the rows are deleted."""
    if connection.vendor != "postgresql" or not ids:
        return []
    with connection.cursor() as cursor:
        if not count(table, cursor=cursor):
            return [table]
        cursor.execute(f"SELECT DISTINCT tableoid::regclass::text FROM {table} WHERE {key} = ANY(%s)",
                       [[str(i) for i in ids]])
        return sorted(name.strip('"') for (name,) in cursor.fetchall())


def partitions_for(ids: list, table: str = MESSAGE_TABLE) -> list[str]:
    """The partitions of `table` that rows of these key values go to by their hash, whether or
    not any are there now (a deleted conversation's, say), by name; the table itself when it is
    not partitioned."""
    if connection.vendor != "postgresql" or not ids:
        return []
    with connection.cursor() as cursor:
        if not count(table, cursor=cursor):
            return [table]
        cursor.execute(
            "SELECT DISTINCT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent "
            "CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), "
            "'modulus (\\d+), remainder (\\d+)') AS b(m) "
            "CROSS JOIN unnest(%s::uuid[]) AS k(id) "
            "WHERE p.relname = %s AND satisfies_hash_partition(p.oid, b.m[1]::int, b.m[2]::int, k.id)",
            [[str(i) for i in ids], table])
        return sorted(name for (name,) in cursor.fetchall())


def leaves(table: str = MESSAGE_TABLE) -> list[str]:
    if connection.vendor != "postgresql":
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                       "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s ORDER BY c.relname", [table])
        return [name for (name,) in cursor.fetchall()]


def _fetch(cursor, sql: str, params=()) -> list:
    cursor.execute(sql, params)
    return cursor.fetchall()


def _definition(cursor, table: str) -> dict:
    """What `table` carries beside its columns, as statements that make it again."""
    oid = _fetch(cursor, "SELECT %s::regclass::oid", [table])[0][0]
    pk = _fetch(cursor, "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                        "WHERE conrelid = %s AND contype = 'p'", [oid])
    foreign = _fetch(cursor, "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                             "WHERE conrelid = %s AND contype = 'f'", [oid])
    indexes = _fetch(cursor, "SELECT i.relname, pg_get_indexdef(x.indexrelid) FROM pg_index x "
                             "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = %s AND NOT x.indisprimary",
                     [oid])
    triggers = _fetch(cursor, "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                              "WHERE tgrelid = %s AND NOT tgisinternal AND tgparentid = 0", [oid])
    policies = _fetch(cursor, "SELECT policyname, permissive, roles, cmd, qual, with_check FROM pg_policies "
                              "WHERE schemaname = current_schema() AND tablename = %s", [table])
    security = _fetch(cursor, "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s", [oid])[0]
    columns = [name for (name,) in _fetch(
        cursor, "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
                "AND attgenerated = '' ORDER BY attnum", [oid])]
    return {"pk": pk, "foreign": foreign, "indexes": indexes, "triggers": triggers, "policies": policies,
            "security": security, "columns": columns}


def _policy_sql(table: str, policy) -> str:
    name, permissive, roles, cmd, qual, with_check = policy
    sql = f'CREATE POLICY "{name}" ON {table} AS {permissive} FOR {cmd}'
    roles = [r for r in (roles or []) if r]
    if roles and roles != ["public"]:
        sql += " TO " + ", ".join(f'"{r}"' for r in roles)
    if qual:
        sql += f" USING ({qual})"
    if with_check:
        sql += f" WITH CHECK ({with_check})"
    return sql


def repartition(table: str = MESSAGE_TABLE, key: str = MESSAGE_KEY, n: int | None = None, *, db=None) -> int:
    """Make `table` N hash partitions of `key` (N ≥ 1), or give it N again; returns N. `db`: the
    connection (a migration's, which may not be the default database's).

    One transaction: the rows are copied into the new table and the old one dropped, under an
    exclusive lock held to the end (writers wait: run it in a maintenance window)."""
    db = db or connection
    if db.vendor != "postgresql":
        raise RuntimeError("partitions are a PostgreSQL feature; SQLite keeps one file")
    n = default_count() if n is None else int(n)
    if not 1 <= n <= MAX_PARTITIONS:
        raise ValueError(f"the number of partitions must be between 1 and {MAX_PARTITIONS}")
    with transaction.atomic(using=db.alias), db.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        if count(table, cursor=cursor) == n:
            return n
        found = _definition(cursor, table)
        new = f"{table}__new"
        cursor.execute(f"CREATE TABLE {new} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
                       f"INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION) PARTITION BY HASH ({key})")
        for i in range(n):
            cursor.execute(f"CREATE TABLE {table}{SUFFIX}{i}__new PARTITION OF {new} "
                           f"FOR VALUES WITH (MODULUS {n}, REMAINDER {i})")
        columns = ", ".join(f'"{c}"' for c in found["columns"])
        cursor.execute(f"INSERT INTO {new} ({columns}) SELECT {columns} FROM {table}")
        cursor.execute(f"DROP TABLE {table}")
        cursor.execute(f"ALTER TABLE {new} RENAME TO {table}")
        for i in range(n):
            cursor.execute(f"ALTER TABLE {table}{SUFFIX}{i}__new RENAME TO {table}{SUFFIX}{i}")
        for name, definition in found["pk"]:
            cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        for _, definition in found["indexes"]:
            cursor.execute(definition)
        for name, definition in found["foreign"]:
            cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
        for _, definition in found["triggers"]:
            cursor.execute(definition)
        enabled, forced = found["security"]
        if enabled:
            cursor.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        if forced:
            cursor.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        for policy in found["policies"]:
            cursor.execute(_policy_sql(table, policy))
        _fence_leaves(cursor, table, found)
        cursor.execute(f"ANALYZE {table}")
    return n


def fence_partitions(table: str = MESSAGE_TABLE, *, db=None) -> None:
    """Give each partition of `table` the table's row-level security (its migration: the
    partitions made before they carried it)."""
    db = db or connection
    if db.vendor != "postgresql":
        return
    with transaction.atomic(using=db.alias), db.cursor() as cursor:
        if count(table, cursor=cursor):
            _fence_leaves(cursor, table, _definition(cursor, table))


def _fence_leaves(cursor, table: str, found: dict) -> None:
    """The table's policies on each of its partitions too. A query through the table meets the
    table's own; one that names a partition meets only the partition's, which would otherwise
    answer every project's rows (conversations/migration_sql.py)."""
    enabled, forced = found["security"]
    leaves = [name for (name,) in _fetch(
        cursor, "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s", [table])]
    # A policy names the table's columns through the table: the partition's instead.
    own = re.compile(rf"\b{re.escape(table)}\.")
    for leaf in leaves:
        cursor.execute(f"ALTER TABLE {leaf} {'ENABLE' if enabled else 'DISABLE'} ROW LEVEL SECURITY")
        cursor.execute(f"ALTER TABLE {leaf} {'FORCE' if forced else 'NO FORCE'} ROW LEVEL SECURITY")
        for name, permissive, roles, cmd, qual, with_check in found["policies"]:
            cursor.execute(f'DROP POLICY IF EXISTS "{name}" ON {leaf}')
            cursor.execute(_policy_sql(leaf, (name, permissive, roles, cmd, qual and own.sub(f"{leaf}.", qual),
                                              with_check and own.sub(f"{leaf}.", with_check))))


def relation_bytes(name: str, size: str = "pg_total_relation_size") -> int:
    """PostgreSQL: the bytes of a table or index (`size`: pg_total_relation_size, pg_table_size or
    pg_relation_size), its partitions' summed when it is partitioned (which hold it all)."""
    if size not in ("pg_total_relation_size", "pg_table_size", "pg_relation_size"):
        raise ValueError(size)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(sum({size}(c.oid)), 0) FROM pg_class c WHERE c.oid = %s::regclass "
                       "OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = %s::regclass)", [name, name])
        return int(cursor.fetchone()[0])
