"""Deletion requests: delete everything about a subject, prove it is gone, keep a receipt.

The path (also used to delete one conversation from its page):

1. preview — every conversation about the subject plus the extra ids, their
   message and checkpoint counts, and the facts store's counts;
2. before deleting, pick what to look for afterwards: the subject and short
   snippets of the texts being deleted, exactly as they are stored (a snippet
   that also occurs in data which stays is set aside: finding it would prove
   nothing);
3. delete all of it in ONE transaction (messages through the `deleting` path
   the database guards allow; facts through `conversations.facts.erasure`);
4. make the text gone from disk: full-text indexes merged, VACUUM, WAL
   truncated (SQLite, where secure_delete is on), VACUUM FULL (PostgreSQL);
5. verify: search the raw bytes of every database file for those strings;
6. store the receipt (append-only): ids, counts, SHA-256 of the subject and the
   verification result — never the subject or a text.
"""

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection, transaction

from conversations import idempotency, store
from conversations.errors import InvalidInput, NotFound
from conversations.models import Checkpoint, Conversation, Message, parse_conversation_id
from conversations.schema import decode_message, message_text

from . import disk
from .owned import owned_tables
from .models import DeletionReceipt

log = logging.getLogger("memoryui.retention")

SUBJECT_MAX = Conversation._meta.get_field("subject").max_length
MAX_EXTRA_IDS = 1000
# Snippets searched in the files: long enough to be distinctive, short enough
# to sit inside one database page (a string split across pages is not findable).
SNIPPET_MIN, SNIPPET_MAX = 12, 40
MESSAGES_SAMPLED_PER_CONVERSATION = 3
MESSAGES_SAMPLED = 30
MAX_STRINGS = 40
# PostgreSQL compresses values over ~2 KB (TOAST); compressed text is not in the
# raw bytes, so only rows stored plainly are sampled there.
PG_PLAIN_LIMIT = 1800
READ_CHUNK = 8 * 1024 * 1024
# How long erasure waits for transactions older than the deletion to end (see _wait_for_older_snapshots).
SNAPSHOT_WAIT_SECONDS = 30
SCRUB_ATTEMPTS = 2


@dataclass
class ConversationPreview:
    id: str
    title: str
    messages: int
    checkpoints: int
    pinned: bool
    about_subject: bool


@dataclass
class DeletionPreview:
    subject: str
    conversations: list[ConversationPreview]
    missing_ids: list[str]
    messages: int
    checkpoints: int
    # None when the facts store offers no erasure (then facts are not touched).
    facts: dict | None
    requested_ids: list[str] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        facts = self.facts or {}
        return not self.conversations and not any(facts.get(k) for k in ("facts", "fact_events", "access_log"))


def subject_sha256(subject: str) -> str:
    return hashlib.sha256(subject.encode("utf-8")).hexdigest() if subject else ""


def _facts_erasure():
    try:
        from conversations.facts import erasure
    except ImportError:
        return None
    return erasure if hasattr(erasure, "preview_subject") and hasattr(erasure, "erase_subject") else None


def clean_request(subject, conversation_ids) -> tuple[str, list[uuid.UUID]]:
    if subject is None:
        subject = ""
    if not isinstance(subject, str):
        raise InvalidInput("subject must be a string", field="subject")
    subject = subject.strip()
    if len(subject) > SUBJECT_MAX:
        raise InvalidInput(f"subject is {len(subject)} characters; at most {SUBJECT_MAX}", field="subject")
    if isinstance(conversation_ids, str):
        conversation_ids = conversation_ids.replace(",", " ").split()
    ids: list[uuid.UUID] = []
    for raw in conversation_ids or ():
        try:
            cid = parse_conversation_id(raw)
        except NotFound:
            raise InvalidInput(f"{str(raw)[:80]!r} is not a conversation id", field="conversation_ids") from None
        if cid not in ids:
            ids.append(cid)
    if len(ids) > MAX_EXTRA_IDS:
        raise InvalidInput(f"at most {MAX_EXTRA_IDS} conversation ids per request", field="conversation_ids")
    if not subject and not ids:
        raise InvalidInput("enter a subject or at least one conversation id", field="subject")
    return subject, ids


def preview_deletion(*, subject: str = "", conversation_ids=()) -> DeletionPreview:
    subject, ids = clean_request(subject, conversation_ids)
    return _preview(subject, ids)


def _preview(subject: str, ids: list[uuid.UUID]) -> DeletionPreview:
    about = list(Conversation.objects.about(subject).order_by("created_at", "id")) if subject else []
    seen = {c.pk for c in about}
    extra = [c for c in Conversation.objects.filter(pk__in=ids).order_by("created_at", "id") if c.pk not in seen]
    found = seen | {c.pk for c in extra}
    missing = [str(i) for i in ids if i not in found]
    rows = []
    for conversation in about + extra:
        rows.append(ConversationPreview(
            id=str(conversation.pk), title=conversation.title,
            messages=Message.objects.of(conversation.pk).count(),
            checkpoints=Checkpoint.objects.of(conversation.pk).count(),
            pinned=conversation.pinned, about_subject=conversation.pk in seen,
        ))
    facts = None
    erasure = _facts_erasure()
    if subject and erasure is not None:
        counts = erasure.preview_subject(subject)
        facts = {k: counts.get(k, 0) for k in ("facts", "fact_events", "access_log")}
    return DeletionPreview(
        subject=subject, conversations=rows, missing_ids=missing,
        messages=sum(r.messages for r in rows), checkpoints=sum(r.checkpoints for r in rows),
        facts=facts, requested_ids=[str(i) for i in ids],
    )


# --- what to look for afterwards -------------------------------------------------

def _snippets(text: str, stored: str) -> list[str]:
    """Up to two distinctive pieces of `text` that occur verbatim in the stored form."""
    text = text.strip()
    if len(text) < SNIPPET_MIN:
        return []
    picks = []
    middle = max(0, len(text) // 2 - SNIPPET_MAX // 2)
    for start in (middle, 0):
        piece = text[start:start + SNIPPET_MAX].strip()
        if len(piece) >= SNIPPET_MIN and piece in stored and piece not in picks:
            picks.append(piece)
    return picks


def _stored_plainly(value: str) -> bool:
    return connection.vendor != "postgresql" or len(value.encode("utf-8")) <= PG_PLAIN_LIMIT


def _sample_strings(preview: DeletionPreview, fact_texts: list[str]) -> list[str]:
    strings: list[str] = []
    per_conversation = max(MESSAGES_SAMPLED_PER_CONVERSATION,
                           MESSAGES_SAMPLED // max(1, len(preview.conversations)))
    for row in preview.conversations[:MESSAGES_SAMPLED]:
        # Evenly spread over the conversation, first and last included.
        n = min(per_conversation, row.messages)
        positions = sorted({round(i * (row.messages - 1) / max(1, n - 1)) for i in range(n)}) if n else []
        for message in Message.objects.of(row.id).filter(position__in=positions):
            if not _stored_plainly(message.content):
                continue
            try:
                text = message_text(decode_message(message.content))
            except Exception:  # a row that no longer decodes: its raw text still counts
                text = message.content
            strings += _snippets(text, message.content)
        checkpoint = Checkpoint.objects.latest_for(row.id)
        if checkpoint is not None and _stored_plainly(checkpoint.summary):
            strings += _snippets(checkpoint.summary, checkpoint.summary)
        if row.title and _stored_plainly(row.title):
            strings += _snippets(row.title, row.title)
    for text in fact_texts:
        if isinstance(text, str) and _stored_plainly(text):
            strings += _snippets(text, text)
    unique = list(dict.fromkeys(strings))
    if len(unique) > MAX_STRINGS:
        step = len(unique) / MAX_STRINGS
        unique = [unique[int(i * step)] for i in range(MAX_STRINGS)]
    return unique


def _strings_in_kept_data(values: list[str], subject: str, extra_ids: list) -> set[str]:
    """Which of `values` also occur in rows this request keeps? A byte search for
    those could not prove anything. One pass per table, whatever the number of strings."""
    if not values:
        return set()
    find = "instr({col}, %s) > 0" if connection.vendor == "sqlite" else "strpos({col}, %s) > 0"
    db_extra = [Conversation._meta.pk.get_db_prep_value(i, connection) for i in extra_ids]
    # "Kept" is expressed by the request itself (the subject, the extra ids), so the
    # statement stays small however many conversations the subject has.
    gone = [f"{{id}} IN (SELECT id FROM {Conversation._meta.db_table} WHERE subject = %s)"] if subject else []
    gone_params = [subject] if subject else []
    if db_extra:
        gone.append(f"{{id}} IN ({', '.join(['%s'] * len(db_extra))})")
        gone_params += db_extra
    found: set[str] = set()
    with connection.cursor() as cursor:
        for table, column, id_column in (
            (Message._meta.db_table, "content", "conversation_id"),
            (Checkpoint._meta.db_table, "summary", "conversation_id"),
            (Conversation._meta.db_table, "title", "id"),
            (Conversation._meta.db_table, "subject", "id"),
        ):
            kept = f"NOT ({' OR '.join(g.format(id=id_column) for g in gone)})" if gone else "1=1"
            flags = ", ".join(f"MAX(CASE WHEN {find.format(col=column)} THEN 1 ELSE 0 END)" for _ in values)
            cursor.execute(f"SELECT {flags} FROM {table} WHERE {kept}", [*values, *gone_params])
            row = cursor.fetchone() or ()
            found |= {v for v, flag in zip(values, row) if flag}
    return found


# --- searching the files ---------------------------------------------------------

@dataclass
class FileSearch:
    status: str  # "searched" or "not_possible"
    files: list[dict]
    found: bool | None
    found_in: list[str]
    found_count: int
    problem: str = ""


def checkpoint_to_disk() -> None:
    """Push everything the database holds in memory or in its log into the files searched."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        else:
            cursor.execute("CHECKPOINT")


def search_database_files(needles: list[str]) -> FileSearch:
    """Search the raw bytes of every database file for each needle (UTF-8).

    Found needles are counted, never returned: the result goes into receipts.
    """
    encoded = [n.encode("utf-8") for n in needles if n]
    if connection.vendor == "sqlite":
        paths, problem, root = disk.sqlite_files(), None, None
        if not paths:
            problem = "the database file was not found"
    else:
        paths, problem = disk.postgres_relation_files()
        root = None
    if problem:
        return FileSearch(status="not_possible", files=[], found=None, found_in=[], found_count=0, problem=problem)
    files, found_in, hits = [], [], set()
    for path in paths:
        name = _display_name(path, root)
        size, matched = _search_file(path, encoded)
        if size is None:
            return FileSearch(status="not_possible", files=files, found=None, found_in=[], found_count=0,
                              problem=f"{name} could not be read")
        files.append({"file": name, "bytes": size})
        if matched:
            found_in.append(name)
            hits |= matched
    if connection.vendor == "postgresql" and found_in:
        found_in = [_with_relation_name(name) for name in found_in]
    return FileSearch(status="searched", files=files, found=bool(hits), found_in=found_in, found_count=len(hits))


def _with_relation_name(name: str) -> str:
    """'base/16384/2619' → 'base/16384/2619 (pg_statistic)', so a finding says where."""
    stem = name.rsplit("/", 1)[-1].split(".")[0].split("_")[0]
    if not stem.isdigit():
        return name
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_filenode_relation(0, %s)::text", [int(stem)])
        row = cursor.fetchone()
    return f"{name} ({row[0]})" if row and row[0] else f"{name} (no relation: an old file)"


def _display_name(path: Path, root) -> str:
    if connection.vendor == "sqlite":
        return path.name
    parts = path.parts
    return "/".join(parts[-3:])  # base/<db oid>/<relfilenode>


def _search_file(path: Path, needles: list[bytes]) -> tuple[int | None, set[int]]:
    """Read in chunks (not mmap: the server may truncate a file meanwhile, and a
    mapped page past the new end kills the process)."""
    overlap = max((len(n) for n in needles), default=1) - 1
    found: set[int] = set()
    size = 0
    tail = b""
    try:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(READ_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                window = tail + chunk
                found |= {i for i, needle in enumerate(needles) if i not in found and needle in window}
                tail = window[-overlap:] if overlap else b""
    except FileNotFoundError:
        # PostgreSQL unlinks a rewritten relation's old file at checkpoint: gone is fine.
        return size, found
    except OSError:
        return None, set()
    return size, found


# --- making it gone from disk ----------------------------------------------------

def _fts5_tables(cursor) -> list[str]:
    cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")
    return [row[0] for row in cursor.fetchall()]


def _wait_for_older_snapshots(xid: int | None, notes: list[str]) -> None:
    """PostgreSQL keeps a deleted row while any transaction that may still see it is
    open (VACUUM FULL copies such "recently dead" rows into the new file): wait,
    boundedly, for transactions older than the deletion to end."""
    if xid is None:
        return
    deadline = time.monotonic() + SNAPSHOT_WAIT_SECONDS
    with connection.cursor() as cursor:
        while True:
            # Every database of the cluster: in practice a transaction elsewhere that
            # started before the deletion also holds its rows back.
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                "AND (age(backend_xmin) >= age((%s::bigint %% 4294967296)::text::xid) "
                "OR age(backend_xid) >= age((%s::bigint %% 4294967296)::text::xid))",
                [xid, xid],
            )
            if cursor.fetchone()[0] == 0:
                return
            if time.monotonic() > deadline:
                notes.append("a transaction older than the deletion was still open; rows it could see may remain")
                return
            time.sleep(0.05)


def scrub_disk(xid: int | None = None) -> list[str]:
    """After the deleting transaction: leave no copy of the deleted text in the files."""
    notes: list[str] = []
    if connection.in_atomic_block:
        return ["the files were not scrubbed: called inside a transaction"]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for table in _fts5_tables(cursor):
                # Rewrites the index's segments without the deleted terms.
                cursor.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'optimize\')')
            _truncate_wal(cursor, notes)
            cursor.execute("VACUUM")
            _truncate_wal(cursor, notes)
        else:
            _wait_for_older_snapshots(xid, notes)
            for table in _tables_holding_subject_data():
                cursor.execute(f'VACUUM (FULL, ANALYZE) "{table}"')
            try:
                # Planner statistics keep sample column values; ANALYZE above replaced
                # them, this drops the dead copies.
                cursor.execute("VACUUM FULL pg_statistic")
            except Exception as exc:
                notes.append(f"pg_statistic was not vacuumed ({type(exc).__name__})")
            cursor.execute("CHECKPOINT")
    return notes


def _current_xid() -> int | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT txid_current()")
        return int(cursor.fetchone()[0])


def _truncate_wal(cursor, notes: list[str]) -> None:
    for attempt in range(10):
        busy, _, _ = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            return
        time.sleep(0.1 * (attempt + 1))  # a reader holds an old snapshot; it finishes soon
    notes.append("the WAL could not be truncated: another connection kept reading")


def _tables_holding_subject_data() -> list[str]:
    tables = [Message._meta.db_table, Checkpoint._meta.db_table, Conversation._meta.db_table]
    tables += [owned.table for owned in owned_tables() if owned.table not in tables]
    try:
        from conversations.facts import models as facts_models
    except ImportError:
        return tables
    from django.apps import apps

    for model in apps.get_app_config("facts").get_models():
        tables.append(model._meta.db_table)
    del facts_models
    return tables


# --- the request -----------------------------------------------------------------

def execute_deletion(*, subject: str = "", conversation_ids=(), actor: str, kind: str = "subject") -> DeletionReceipt:
    """Carry out a deletion request (see the module docstring) and return its receipt."""
    subject, ids = clean_request(subject, conversation_ids)
    request_id = uuid.uuid4()
    preview = _preview(subject, ids)
    erasure = _facts_erasure() if subject else None
    fact_texts = (erasure.preview_subject(subject).get("sample_texts") or []) if erasure else []
    victim_ids = [uuid.UUID(r.id) for r in preview.conversations]

    # What to look for afterwards, chosen before anything is deleted.
    candidates = ([subject] if subject else []) + _sample_strings(preview, fact_texts)
    shared = _strings_in_kept_data(candidates, subject, ids)
    checkable = [s for s in candidates if s not in shared]
    subject_checkable = bool(subject) and subject in checkable

    counts = {"conversations": 0, "messages": 0, "checkpoints": 0}
    with transaction.atomic():
        for cid in victim_ids:
            Conversation.objects.filter(pk=cid).update(deleting=True)
            deleted = store._delete_rows(cid)
            counts["conversations"] += 1
            counts["messages"] += deleted.messages
            counts["checkpoints"] += deleted.checkpoints
        # Idempotency keys whose stored answers reference what is erased (conversations/idempotency.py).
        idempotency.forget(conversation_ids=victim_ids, subject=subject)
        if erasure is not None:
            erased = erasure.erase_subject(subject)
            counts.update({k: int(erased.get(k, 0)) for k in ("facts", "fact_events", "access_log")})
        counts["conversation_ids_not_found"] = len(preview.missing_ids)
        xid = _current_xid()
        store.record_audit(actor=actor, action="deletion.executed", target_type="deletion_request",
                           target_id=str(request_id),
                           detail={"kind": kind, "subject_sha256": subject_sha256(subject), "counts": counts,
                                   "conversation_ids": [str(i) for i in victim_ids]})

    if connection.in_atomic_block:
        # An outer transaction (a test, a caller's atomic) still holds the rows:
        # nothing can be verified, and the receipt must not claim it was.
        notes = scrub_disk(xid)
        search = FileSearch(status="not_possible", files=[], found=None, found_in=[], found_count=0,
                            problem="ran inside an outer transaction: the deletion was not yet committed")
        attempts = 1
    else:
        for attempts in range(1, SCRUB_ATTEMPTS + 1):
            # A second pass covers what a reader still holding old rows kept the first
            # one from removing (a WAL that could not be truncated, recently dead rows).
            notes = scrub_disk(xid)
            checkpoint_to_disk()
            search = search_database_files(checkable)
            if search.status != "searched" or not search.found:
                break
    verification = {
        "database": connection.vendor,
        "status": ("not_possible" if search.status == "not_possible" else "found" if search.found else "verified"),
        "found": search.found,
        "strings_checked": len(checkable) if search.status == "searched" else 0,
        "strings_set_aside": len(candidates) - len(checkable),
        "subject_checked": subject_checkable and search.status == "searched",
        "files_searched": len(search.files),
        "bytes_searched": sum(f["bytes"] for f in search.files),
        "files": search.files,
        "found_in": search.found_in,
        "found_count": search.found_count,
        "scope": _scope(),
        "scrub_passes": attempts,
        "notes": notes + ([search.problem] if search.problem else []),
    }
    if not checkable and search.status == "searched":
        verification["status"] = "nothing_to_check"
    with transaction.atomic():
        receipt = DeletionReceipt.objects.create(
            id=request_id, actor=str(actor)[:200], kind=kind, subject_sha256=subject_sha256(subject),
            conversation_ids=[str(i) for i in victim_ids], counts=counts, verification=verification,
        )
        store.record_audit(actor=actor, action="deletion.receipt", target_type="deletion_receipt",
                           target_id=str(receipt.pk),
                           detail={"status": verification["status"], "strings_checked": verification["strings_checked"],
                                   "files_searched": verification["files_searched"]})
    if verification["status"] != "verified":
        log.warning("deletion %s: verification %s", request_id, verification["status"])
    return receipt


def _scope() -> str:
    if connection.vendor == "sqlite":
        return "the SQLite main file, its -wal and -shm files"
    return ("every relation file of the database (tables, TOAST, indexes, all forks) under data_directory; "
            "PostgreSQL's write-ahead log (pg_wal), replicas and backups keep old row images until they are "
            "recycled and are not covered")


def delete_one_conversation(*, conversation_id, actor: str) -> DeletionReceipt:
    """An admin deleting one conversation from its page: the same path, without a subject."""
    conversation = Conversation.objects.filter(pk=parse_conversation_id(conversation_id)).first()
    if conversation is None:
        raise NotFound(f"conversation {conversation_id} not found", field="id")
    return execute_deletion(subject="", conversation_ids=[conversation.pk], actor=actor, kind="conversation")
