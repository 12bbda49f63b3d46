"""Moving to PostgreSQL: copy everything from the embedded SQLite database to an empty PostgreSQL one.

`copy_database(target_url)` (the `copy_database` command):

1. refuses unless the source is SQLite and the target an *empty* PostgreSQL database;
2. migrates the target (the same migrations: tables, guards, indexes, triggers), then
   empties what the migrations themselves filled (content types, permissions, roles),
   so every row arrives with its source id;
3. copies every table of every installed app — enumerated from the models, so tables
   that other apps add are copied too — parents before children, each table in
   primary-key order, all in ONE target transaction. The append-only guards stay on:
   rows are only inserted, in the order they were first inserted, and a conversation
   arrives with its final `next_position`, so each guard accepts exactly the rows it
   accepted the first time (positions, bytes, timestamps and ids unchanged). A table
   that the target's own triggers fill while others are copied (the search index's
   conversation keys) is emptied at its turn and copied from the source;
4. resets the target's id sequences past the copied ids;
5. verifies: the row count of every table, and a digest of every table's rows and of
   each conversation's content (its row, messages, checkpoints) on both sides.

The source is only read, inside one read transaction (a consistent snapshot; writers
are not blocked, but anything they write meanwhile is not copied: stop the server
first).
"""

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

import dj_database_url
from django.apps import apps
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from .models import Checkpoint, Conversation, Message

TARGET = "copy_target"
BATCH = 2000

Progress = Callable[[int, int, str], None]


class CopyError(Exception):
    """Why the copy cannot start (nothing was changed anywhere)."""


@dataclass
class CopyReport:
    tables: dict[str, tuple[int, int]] = field(default_factory=dict)  # table → (source rows, target rows)
    conversations_checked: int = 0
    mismatched_tables: list[str] = field(default_factory=list)
    mismatched_conversations: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        counts_equal = all(a == b for a, b in self.tables.values())
        return counts_equal and not self.mismatched_tables and not self.mismatched_conversations

    @property
    def rows(self) -> int:
        return sum(a for a, _ in self.tables.values())


# -- the plan ---------------------------------------------------------------------------


def models_in_order() -> list:
    """Every concrete model with a table, parents (foreign-key targets) before children."""
    models = [m for m in apps.get_models(include_auto_created=True)
              if m._meta.managed and not m._meta.proxy and not m._meta.swapped]
    by_label = {m._meta.label: m for m in models}
    ordered, seen = [], set()

    def visit(model, path=()):
        if model._meta.label in seen:
            return
        if model._meta.label in path:  # a cycle of foreign keys: the deferred constraints allow it
            return
        for f in model._meta.concrete_fields:
            target = getattr(f, "related_model", None)
            if target is not None and target is not model and target._meta.label in by_label:
                visit(by_label[target._meta.label], path + (model._meta.label,))
        seen.add(model._meta.label)
        ordered.append(model)

    for model in sorted(models, key=lambda m: m._meta.label):
        visit(model)
    return ordered


def _fields(model) -> list:
    return [f for f in model._meta.concrete_fields if getattr(f, "column", None)]


def _order(model) -> list[str]:
    pk_fields = getattr(model._meta, "pk_fields", None) or [model._meta.pk]
    return [f.attname for f in pk_fields]


# -- the target -------------------------------------------------------------------------


def register_target(url: str) -> None:
    config = dj_database_url.parse(url)
    if config.get("ENGINE") != "django.db.backends.postgresql":
        raise CopyError(f"the target must be a PostgreSQL database (postgres:///NAME), not {url!r}")
    databases = {DEFAULT_DB_ALIAS: connections.settings[DEFAULT_DB_ALIAS], TARGET: config}
    connections.settings[TARGET] = connections.configure_settings(databases)[TARGET]


def check_source_and_target() -> None:
    source = connections[DEFAULT_DB_ALIAS]
    if source.vendor != "sqlite":
        raise CopyError("the source (this installation's database) must be the embedded SQLite database; "
                        "unset DATABASE_URL or point it at the SQLite file")
    target = connections[TARGET]
    try:
        tables = target.introspection.table_names()
    except Exception as exc:
        raise CopyError(f"cannot reach the target database: {exc}") from None
    if tables:
        raise CopyError(f"the target database is not empty ({len(tables)} tables, e.g. {tables[0]}); "
                        "copy into a new database: createdb NAME")


# -- copying ----------------------------------------------------------------------------


def copy_database(target_url: str, *, progress: Progress | None = None, batch: int = BATCH) -> CopyReport:
    register_target(target_url)
    check_source_and_target()
    call_command("migrate", database=TARGET, verbosity=0, interactive=False)
    models = models_in_order()
    source, target = connections[DEFAULT_DB_ALIAS], connections[TARGET]
    source_tables = set(source.introspection.table_names())
    models = [m for m in models if m._meta.db_table in source_tables]
    report = CopyReport()
    with _snapshot(source):
        counts = {m._meta.db_table: m._base_manager.using(DEFAULT_DB_ALIAS).count() for m in models}
        total, done = sum(counts.values()), 0
        if progress:
            progress(0, total, "")
        with transaction.atomic(using=TARGET):
            with target.cursor() as cursor:
                names = ", ".join(target.ops.quote_name(m._meta.db_table) for m in models)
                # Content types, permissions and roles the migrations made: the source's rows replace them.
                cursor.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
            for model in models:
                table = model._meta.db_table
                with target.cursor() as cursor:
                    cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {target.ops.quote_name(table)})")
                    if cursor.fetchone()[0]:  # filled by the target's triggers while its parents were copied
                        cursor.execute(f"TRUNCATE {target.ops.quote_name(table)} CASCADE")
                for n in _copy_table(model, batch):
                    done += n
                    if progress:
                        progress(done, total, table)
            with target.cursor() as cursor:
                for sql in target.ops.sequence_reset_sql(no_style(), models):
                    cursor.execute(sql)
        for model in models:
            table = model._meta.db_table
            report.tables[table] = (counts[table], model._base_manager.using(TARGET).count())
        report.mismatched_tables = [m._meta.db_table for m in models if _table_digest(m, DEFAULT_DB_ALIAS)
                                    != _table_digest(m, TARGET)]
        ids = list(Conversation._base_manager.using(DEFAULT_DB_ALIAS).order_by("pk").values_list("pk", flat=True))
        for cid in ids:
            if _conversation_digest(cid, DEFAULT_DB_ALIAS) != _conversation_digest(cid, TARGET):
                report.mismatched_conversations.append(str(cid))
        report.conversations_checked = len(ids)
    return report


class _snapshot:
    """One read transaction on the SQLite source: every table is read as of the same moment."""

    def __init__(self, connection):
        self.connection = connection

    def __enter__(self):
        self.connection.ensure_connection()
        self.connection.connection.execute("BEGIN DEFERRED")

    def __exit__(self, *exc):
        self.connection.connection.execute("ROLLBACK")


def _copy_table(model, batch: int):
    """Insert the source's rows of one model into the target, in primary-key order; yields rows per batch."""
    target = connections[TARGET]
    fields = _fields(model)
    columns = ", ".join(target.ops.quote_name(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {target.ops.quote_name(model._meta.db_table)} ({columns}) VALUES ({marks})"
    rows = (model._base_manager.using(DEFAULT_DB_ALIAS).order_by(*_order(model))
            .values_list(*[f.attname for f in fields]).iterator(chunk_size=batch))
    pending = []
    with target.cursor() as cursor:
        for row in rows:
            pending.append([f.get_db_prep_save(v, connection=target) for f, v in zip(fields, row, strict=True)])
            if len(pending) >= batch:
                cursor.executemany(sql, pending)
                yield len(pending)
                pending = []
        if pending:
            cursor.executemany(sql, pending)
            yield len(pending)


# -- verification -----------------------------------------------------------------------


def _plain(value):
    """A value as both databases' rows must agree on it, whatever the driver's types."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat() if value.tzinfo else value.isoformat()
    if isinstance(value, (date, uuid.UUID, Decimal)):
        return str(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def _digest_rows(rows) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps([_plain(v) for v in row], ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _table_digest(model, alias: str) -> str:
    fields = [f.attname for f in _fields(model)]
    return _digest_rows(model._base_manager.using(alias).order_by(*_order(model)).values_list(*fields)
                        .iterator(chunk_size=BATCH))


def _conversation_digest(cid, alias: str) -> str:
    """A conversation's own row, its messages (position, kind, bytes, time) and checkpoints."""
    parts = [
        Conversation._base_manager.using(alias).filter(pk=cid).values_list(*[f.attname for f in _fields(Conversation)]),
        Message._base_manager.using(alias).filter(conversation_id=cid).order_by("position")
        .values_list("position", "kind", "content", "created_at").iterator(chunk_size=BATCH),
        Checkpoint._base_manager.using(alias).filter(conversation_id=cid).order_by("id")
        .values_list("id", "message_position", "summary", "created_at", "created_by"),
    ]
    return "/".join(_digest_rows(rows) for rows in parts)
