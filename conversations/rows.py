"""How rows of the conversation log are inserted and sealed into their chains.

The primitives every door writes message and checkpoint rows through (the store's
appends, forks and checkpoints, the importer's chunks, the ledger's entries): each
row gets its salt, commitment and chain hash (conversations/chain.py) in the
transaction that inserts it, from the previous row's chain hash read in that same
transaction. `conversations.store` re-exports them; callers hold the conversation
(its row lock on PostgreSQL, the write lock on SQLite, or a staged import's hold).
"""

import hashlib
import uuid
from datetime import UTC, datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.utils import timezone

from . import chain, projects
from .models import Checkpoint, Conversation, Message, parse_conversation_id

# Rows per INSERT statement (executemany) when a door inserts many.
ROW_BATCH = 1000

_message_table = Message._meta.db_table

_PREV_CHAIN = f"SELECT chain_hash FROM {_message_table} WHERE conversation_id = %s AND position = %s"
INSERT_MESSAGE = (
    f"INSERT INTO {_message_table} (conversation_id, position, kind, content, created_at, salt, commitment, "
    "chain_hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)
# Statements run on SQLite's own connection, in its `?` form (see _execute_one).
SQLITE_FORM: dict[str, str] = {}


def sqlite_form(*statements: str) -> dict[str, str]:
    """Register statements for _execute_one (their SQLite `?` form); returns the shared table."""
    SQLITE_FORM.update({sql: sql.replace("%s", "?") for sql in statements})
    return SQLITE_FORM


sqlite_form(_PREV_CHAIN, INSERT_MESSAGE)


def _db_uuid(value):
    return Conversation._meta.pk.get_db_prep_value(value, connection)


def _execute_one(db, sql: str, params: list, *, scoped: bool = True):
    """Run one statement of the append hot path; returns its first row, if any. `scoped`:
    the statement reads a table under row-level security, so the server must hold the
    current project scope first (fetch_first says when it need not).

    On SQLite the statement goes straight to the sqlite3 connection, inside the
    transaction Django opened: Django's cursor wrapper (placeholder rewriting, debug
    hooks) costs about as much as the statement itself here.
    """
    if db.vendor == "sqlite":
        with db.wrap_database_errors:
            return db.connection.execute(SQLITE_FORM[sql], params).fetchone()
    # On PostgreSQL through a server-side binding cursor, so that the statement is prepared once
    # per connection and then only bound and executed: the server's parsing and planning of the
    # append's five statements were 40 % of its CPU per append (bench/NOTES.md). Django's own
    # cursors bind on the client and are never prepared; MEMORYUI_PG_PREPARE=0 turns this off
    # for a connection pooler that cannot carry prepared statements (memoryui/settings.py).
    # The cursor class comes from the backend's own driver module (psycopg), which a SQLite
    # process then never imports.
    db.ensure_connection()
    db.validate_no_broken_transaction()
    if scoped:
        db.sync_scope()  # the project the row-level security policies read (memoryui/postgresql/base.py)
    with db.wrap_database_errors, db.Database.Cursor(db.connection) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() if cursor.description else None


def fetch_first(sql: str, params: list, *, outside_projects: bool = False):
    """The first row of a read every API request makes (its key, its idempotency key), or None:
    through _execute_one, so on SQLite without Django's cursor wrapper. `sql` is registered
    with sqlite_form. `outside_projects`: the table has no row-level security (the API keys,
    read before the request's project is known), so the statement goes under whatever scope
    the connection holds: sending the scope of no request yet would only make the request's
    own statements send theirs again, two round trips on every request."""
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor == "sqlite":
        db.ensure_connection()
        db.begin_pending()  # inside a transaction whose BEGIN waits for its first statement
    return _execute_one(db, sql, params, scoped=not outside_projects)


def _prev_chain(db, db_cid, position: int) -> bytes:
    """The chain hash of the row before `position` (GENESIS before the first row)."""
    if position <= 0:
        return chain.GENESIS
    found = _execute_one(db, _PREV_CHAIN, [db_cid, position - 1])
    return bytes(found[0]) if found and found[0] is not None else chain.GENESIS


def seal_rows(rows: list[list], position: int, prev: bytes, stamps) -> None:
    """Give rows [cid, None, kind, text, at, None, None, None] their positions from
    `position` on, and their salts, commitments and chain hashes (conversations/chain.py)."""
    sha, salt_of, encode = hashlib.sha256, chain.new_salt, chain.message_payload
    for offset, row in enumerate(rows):
        row[1] = position + offset
        salt = salt_of()
        commitment = sha(salt + encode(row[1], row[2], row[3], stamps[offset])).digest()
        prev = sha(prev + commitment).digest()
        row[5], row[6], row[7] = salt, commitment, prev


def _insert_rows(db, rows: list[list]) -> None:
    if len(rows) == 1:
        _execute_one(db, INSERT_MESSAGE, rows[0])
    elif db.vendor == "sqlite":
        with db.wrap_database_errors:
            db.connection.executemany(SQLITE_FORM[INSERT_MESSAGE], rows)
    else:
        with db.cursor() as cursor:
            cursor.executemany(INSERT_MESSAGE, rows)


def db_id(db, cid: uuid.UUID):
    """The conversation id as the database takes it (what UUIDField would hand it)."""
    return cid.hex if db.vendor == "sqlite" else Conversation._meta.pk.get_db_prep_value(cid, db)


def _stores_naive_utc_text(db) -> bool:
    """Whether a DateTimeField goes to this database as naive UTC text (SQLite, UTC)."""
    return db.vendor == "sqlite" and db.timezone_name == "UTC" and settings.USE_TZ


def _db_now(db):
    """Now, as a DateTimeField hands it to the database. On SQLite with UTC storage
    that is the naive UTC time as text, made here directly: Django's adapter costs a
    tenth of an append (tests/test_store.py keeps the two equal)."""
    if _stores_naive_utc_text(db):
        return str(datetime.now(UTC).replace(tzinfo=None))
    return db.ops.adapt_datetimefield_value(timezone.now())


def db_now_stamped(db) -> tuple:
    """Now as the database takes it, and as the chain's payload writes it (chain.canonical_time)."""
    if _stores_naive_utc_text(db):
        now = datetime.now(UTC).replace(tzinfo=None)
        return str(now), now.isoformat(timespec="microseconds") + "Z"
    now = timezone.now()
    return db.ops.adapt_datetimefield_value(now), chain.canonical_time(now)


def db_datetime(db, value: datetime):
    """An aware time as a DateTimeField hands it to the database; on SQLite with UTC
    storage made directly, as `_db_now` does (an import adapts one per row)."""
    if value.tzinfo is not None and _stores_naive_utc_text(db):
        return str(value.astimezone(UTC).replace(tzinfo=None))
    return db.ops.adapt_datetimefield_value(value)


def reserve_positions(*, conversation_id, count: int, last_activity_at=None, received_at=None,
                      staged: bool = False) -> int | None:
    """Bump the conversation's counter by `count` in the caller's transaction and return the
    first position handed out (None when there is no such conversation). A conversation being
    deleted or staged by an import hands out nothing, unless `staged`: the caller is the import
    that staged it. Times given are set with it (what the transcript and memoryui's clock
    say). The rows then go in with insert_reserved or copy_prefix."""
    sets, params = ["next_position = next_position + %s"], [count]
    for column, value in (("last_activity_at", last_activity_at), ("received_at", received_at)):
        if value is not None:
            sets.append(f"{column} = %s")
            params.append(connection.ops.adapt_datetimefield_value(value))
    live = "" if staged else " AND NOT deleting AND NOT staged"
    fence, fenced = projects.sql_fence("project_id", "namespace")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Conversation._meta.db_table} SET {', '.join(sets)} WHERE id = %s{live}{fence} "
                       "RETURNING next_position", [*params, _db_uuid(conversation_id), *fenced])
        found = cursor.fetchone()
    return found[0] - count if found is not None else None


def insert_reserved(*, conversation_id, start: int, rows) -> None:
    """Insert encoded rows (kind, text, time or None for now) at positions start, start+1, …,
    which the caller reserved in this transaction by bumping the conversation's counter.
    Each row is sealed into the chain after the row before `start` (conversations/chain.py)."""
    db = connections[DEFAULT_DB_ALIAS]
    db_cid = db_id(db, parse_conversation_id(conversation_id))
    now = timezone.now()
    params, stamps = [], []
    for kind, text, at in rows:
        at = at or now
        params.append([db_cid, None, kind, text, db_datetime(db, at), None, None, None])
        stamps.append(chain.canonical_time(at))
    if not params:
        return
    db.ensure_connection()
    seal_rows(params, start, _prev_chain(db, db_cid, start), stamps)
    for i in range(0, len(params), ROW_BATCH):
        _insert_rows(db, params[i:i + ROW_BATCH])


def copy_prefix(*, child_id, parent_id, start: int, count: int) -> int:
    """Copy the parent's rows start..start+count-1 into the child at the same positions (reserved
    by the caller), with the same bytes, times, salts, commitments and chain hashes; returns
    how many were copied."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {_message_table} (conversation_id, position, kind, content, created_at, salt, "
            "commitment, chain_hash) SELECT %s, position, kind, content, created_at, salt, commitment, chain_hash "
            f"FROM {_message_table} WHERE conversation_id = %s AND position >= %s AND position < %s "
            "ORDER BY position",
            [_db_uuid(child_id), _db_uuid(parent_id), start, start + count],
        )
        return cursor.rowcount


def sealed(model, record_type: str, conversation_id, values: dict) -> dict:
    """The salt, commitment and chain hash of a new `model` row with `values`, chained after the
    conversation's last row of that table (conversations/chain.py). The caller holds the
    conversation (its lock, or a staged import's hold) and inserts the row in this transaction."""
    prev = model._base_manager.filter(conversation_id=conversation_id).order_by("-id").values_list(
        "chain_hash", flat=True).first()
    salt, commitment, chain_hash = chain.seal(bytes(prev) if prev is not None else chain.GENESIS,
                                              chain.payload(record_type, values))
    return {"salt": salt, "commitment": commitment, "chain_hash": chain_hash}


def add_checkpoint(*, conversation_id, message_position: int, summary: str, created_at=None,
                   created_by: str = "") -> Checkpoint:
    """Insert a checkpoint row, sealed into its conversation's checkpoint chain. The caller has
    checked it and holds the conversation (its lock, or a staged import's hold)."""
    values = {"message_position": message_position, "summary": summary, "created_at": created_at or timezone.now(),
              "created_by": str(created_by)[:200]}
    return Checkpoint.objects.create(conversation_id=conversation_id, **values,
                                     **sealed(Checkpoint, "checkpoint", conversation_id, values))


def set_search_vectors(*, conversation_id, first: int, last: int) -> int:
    """PostgreSQL: fill the `search_tsv` of rows first..last of a conversation where it is still
    NULL (a fork's rows borrowed from a source that is about to be deleted), in the caller's
    transaction; returns how many rows. The column and `search_message_tsvector` are the search
    app's (its migrations 0003 and 0004); the message table's append-only guard allows this
    one UPDATE, NULL to the row's own words, and refuses every other, so it is written once,
    here. SQLite keeps these words in the search app's own tables."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {_message_table} SET search_tsv = search_message_tsvector(content) "
                       "WHERE conversation_id = %s AND position BETWEEN %s AND %s AND search_tsv IS NULL",
                       [_db_uuid(conversation_id), first, last])
        return cursor.rowcount
