"""Deletion requests: delete everything about a subject, prove it is gone, keep a receipt.

Every door that deletes a conversation takes this path: a deletion request (page
and API), the delete button on a conversation page and `DELETE` in the API. Each
ends in a receipt. Agents keep writing meanwhile, so no step holds the write lock
for long, and nothing here ever opens a database file in this process (see
rawfiles.py for why that would lose other workers' writes):

1. one maintenance run at a time (lease.py): a second request, or a prune, is
   told one is running;
2. preview: every conversation about the subject (compared in normal form, so
   `Cust:42` is `cust:42`) plus the extra ids, with counts, and the facts
   store's counts;
3. before deleting, pick what to look for afterwards: the subject, short
   snippets of the texts being deleted exactly as stored, and on SQLite each
   conversation's id as stored (every row of a conversation carries it, so a
   stale copy of any of its rows is found);
4. delete: the conversations are marked `deleting` in one short transaction
   (hidden from every read from then on; the database's delete guards open for
   them), their rows go in batches of short transactions, and one last
   transaction removes the conversation rows and the subject's facts and writes
   the audit event. A crash between leaves them marked, hidden and consistent;
   the next prune (or the same request again) finishes them;
5. (see 7) a string found that data which stays still holds is set aside:
   finding it proves nothing;
6. make the text gone from disk, in steps writers can pass between: on SQLite
   secure_delete zeroes deleted cells and FTS5's secure-delete removes a deleted
   row's index entries as it goes; then the WAL is checkpointed and truncated,
   and freed pages go back by incremental vacuum; PostgreSQL rewrites the tables
   online with pg_repack, or, where it is missing, with VACUUM FULL, which appends
   wait for (pgfiles.py);
7. verify in a separate process: search the raw bytes of every database file,
   PostgreSQL's WAL segments included (segments still holding erased text are
   switched through and recycled, or named on the receipt: pgfiles.py).
   On SQLite a match left in a page's unused space (a stale copy of a row that a
   b-tree rebalance moved) is zeroed through SQLite itself, page by page, and
   the search runs again;
8. store the receipt (append-only) with its audit event in one transaction:
   ids, counts, SHA-256 of the subject and the verification — never the subject
   or a text.

Files outside the database that may hold the subject (an import preview waiting
for its confirmation: leftovers.py) are no rows: after the deletion every such file
that its own record ties to the subject or a deleted conversation, or whose bytes
hold the subject, a sampled text or a deleted conversation's id, is removed; the
rest are searched again, and the receipt lists the removed files and counts that
search in its verdict.
"""

import hashlib
import json
import logging
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, models, transaction

from conversations import idempotency, store
from conversations.errors import InvalidInput, NotFound
from conversations.message_schema import decode_message, message_text
from conversations.models import Checkpoint, Conversation, Message, parse_conversation_id
from conversations.owned import owned_tables

from . import disk, leftovers, pgfiles
from . import erased as erased_rows
from .lease import Lease, maintenance
from .models import DeletionReceipt
from .pruning import delete_conversations_in_batches, in_turn, incremental_vacuum, mark_deleting, truncate_wal

log = logging.getLogger("memoryui.retention")

SUBJECT_MAX = Conversation._meta.get_field("subject").max_length
MAX_EXTRA_IDS = 1000
# Snippets searched in the files: long enough to be distinctive, short enough
# to sit inside one database page (a string split across pages is not findable).
SNIPPET_MIN, SNIPPET_MAX = 12, 40
MESSAGES_SAMPLED_PER_CONVERSATION = 3
MESSAGES_SAMPLED = 30
MAX_STRINGS = 40
# Conversation ids searched as stored (SQLite): one needle finds a stale copy of any of its rows.
MAX_ID_NEEDLES = 200
# PostgreSQL compresses values over ~2 KB (TOAST); compressed text is not in the
# raw bytes, so only rows stored plainly are sampled there.
PG_PLAIN_LIMIT = 1800
DELETE_BATCH = 2000
# How long erasure waits for transactions older than the deletion to end (see _wait_for_older_snapshots).
SNAPSHOT_WAIT_SECONDS = 30
VERIFY_PASSES = 3
# SQLite steps that take the write lock wait at most this long for it, then retry:
# a writer never queues behind erasure for more than about this.
STEP_BUSY_MS = 250
STEP_ATTEMPTS = 40
PG_LOCK_TIMEOUT = "500ms"
# pg_statistic's fixed object id: its TOAST table is pg_toast.pg_toast_2619.
_PG_STATISTIC_OID = 2619
HELPER_TIMEOUT_SECONDS = 3600
# Text needles searched in leftover files are at least this long: a removal on a match of
# "a" would take every waiting upload. A shorter subject still matches through a file's record.
LEFTOVER_NEEDLE_MIN = 6


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
    # Rows of other tables that belong to these conversations (task state, actions, …), by table.
    owned: dict = field(default_factory=dict)

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
    store._check_storable(subject, "subject")
    if isinstance(conversation_ids, str):
        conversation_ids = conversation_ids.replace(",", " ").split()
    if not isinstance(conversation_ids, (list, tuple)) and conversation_ids is not None:
        raise InvalidInput("conversation_ids must be a list of conversation ids", field="conversation_ids")
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
    victim_ids = [uuid.UUID(r.id) for r in rows]
    owned = {}
    for table in owned_tables():
        n = table.model._base_manager.filter(conversation_id__in=victim_ids).count() if victim_ids else 0
        if n:
            owned[table.table] = n
    return DeletionPreview(
        subject=subject, conversations=rows, missing_ids=missing,
        messages=sum(r.messages for r in rows), checkpoints=sum(r.checkpoints for r in rows),
        facts=facts, requested_ids=[str(i) for i in ids], owned=owned,
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
    victim_ids = [uuid.UUID(r.id) for r in preview.conversations]
    for table in owned_tables():
        if not victim_ids or not table.text_fields:
            continue
        for values in table.model._base_manager.filter(conversation_id__in=victim_ids[:MESSAGES_SAMPLED]) \
                .values_list(*table.text_fields)[:MESSAGES_SAMPLED]:
            for value in values:
                text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False) if value else ""
                if text and _stored_plainly(text):
                    strings += _snippets(text, text)
    for text in fact_texts:
        if isinstance(text, str) and _stored_plainly(text):
            strings += _snippets(text, text)
    unique = list(dict.fromkeys(strings))
    if len(unique) > MAX_STRINGS:
        step = len(unique) / MAX_STRINGS
        unique = [unique[int(i * step)] for i in range(MAX_STRINGS)]
    return unique


def _text_columns() -> list[tuple[str, str]]:
    """(table, column) of every text that data which stays can hold."""
    columns = [(Message._meta.db_table, "content"), (Checkpoint._meta.db_table, "summary"),
               (Conversation._meta.db_table, "title"), (Conversation._meta.db_table, "subject")]
    try:
        from conversations.facts.models import Fact
    except ImportError:
        pass
    else:
        columns += [(Fact._meta.db_table, "text"), (Fact._meta.db_table, "subject"), (Fact._meta.db_table, "reason")]
    for table in owned_tables():
        for name in table.text_fields:
            columns.append((table.table, table.model._meta.get_field(name).column))
    return list(dict.fromkeys(columns))


def _strings_in_live_data(values: list[str]) -> set[str]:
    """Which of `values` still occur in rows that exist after the deletion? One pass per column."""
    if not values:
        return set()
    find = "instr(CAST({col} AS TEXT), %s) > 0" if connection.vendor == "sqlite" else "strpos({col}::text, %s) > 0"
    found: set[str] = set()
    with connection.cursor() as cursor:
        for table, column in _text_columns():
            flags = ", ".join(f"MAX(CASE WHEN {find.format(col=column)} THEN 1 ELSE 0 END)" for _ in values)
            cursor.execute(f"SELECT {flags} FROM {table}", values)
            row = cursor.fetchone() or ()
            found |= {v for v, flag in zip(values, row) if flag}
    return found


def _ids_in_live_data(ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Which conversation ids are still stored somewhere (a fork's parent_id, a fact's source, …)?"""
    if not ids:
        return set()
    found: set[uuid.UUID] = set()
    for model in apps.get_models():
        for f in model._meta.concrete_fields:
            if isinstance(f, models.UUIDField) or (
                    isinstance(f, models.ForeignKey) and isinstance(f.target_field, models.UUIDField)):
                values = model._base_manager.filter(**{f"{f.attname}__in": ids}).values_list(f.attname, flat=True)
                found |= set(values.distinct())
    return found


def _id_needle(cid: uuid.UUID) -> str:
    """How SQLite stores a conversation id (Django's UUIDField: 32 hex characters)."""
    return cid.hex


# --- searching the files, from another process -----------------------------------

@dataclass
class FileSearch:
    status: str  # "searched" or "not_possible"
    files: list[dict]
    found: bool | None
    found_in: list[str]
    found_count: int
    problem: str = ""
    # SQLite: per found needle (its index), the database pages that hold it (main file and WAL frames).
    pages: dict[int, set[int]] = field(default_factory=dict)
    # Per found needle, the files it was found in.
    found_needles: dict[int, list[str]] = field(default_factory=dict)
    # SQLite: per found needle, the files where a match lies in a row that exists.
    live: dict[int, list[str]] = field(default_factory=dict)
    passes: int = 0

    def without(self, dropped: set[int]) -> "FileSearch":
        """The same search with some needles no longer counted (set aside as still stored)."""
        kept = {i: files for i, files in self.found_needles.items() if i not in dropped}
        found_in = [name for name in self.found_in if any(name in files for files in kept.values())]
        return FileSearch(status=self.status, files=self.files, found=bool(kept) if self.found is not None else None,
                          found_in=found_in, found_count=len(kept), problem=self.problem,
                          pages={i: p for i, p in self.pages.items() if i in kept}, found_needles=kept,
                          live={i: f for i, f in self.live.items() if i in kept}, passes=self.passes)


def _run_helper(request: dict) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "conversations.retention.rawfiles"], input=json.dumps(request),
        capture_output=True, text=True, timeout=HELPER_TIMEOUT_SECONDS, cwd=str(settings.BASE_DIR),
    )
    if done.returncode != 0:
        raise RuntimeError(f"the file helper failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def checkpoint_to_disk() -> None:
    """Push everything the database holds in memory into the files searched."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        else:
            cursor.execute("CHECKPOINT")


def _page_size() -> int:
    if connection.vendor != "sqlite":
        return 0
    with connection.cursor() as cursor:
        return int(cursor.execute("PRAGMA page_size").fetchone()[0])


def search_database_files(needles: list[str | bytes]) -> FileSearch:
    """Search the raw bytes of every database file for each needle (str as UTF-8, or bytes).

    The files are read by a separate process. Found needles are counted, never
    returned: the result goes into receipts.
    """
    if connection.vendor == "sqlite":
        paths, problem = disk.sqlite_files(), None
        if not paths:
            problem = "the database file was not found"
        main = Path(str(connection.settings_dict["NAME"]))
        specs = [{"path": str(p), "name": p.name,
                  "kind": "sqlite-main" if p == main else "sqlite-wal" if p.name.endswith("-wal") else "other"}
                 for p in paths]
    else:
        paths, problem = disk.postgres_relation_files()
        specs = [{"path": str(p), "name": "/".join(p.parts[-3:]), "kind": "postgres"} for p in paths]
        if not problem:
            # The write-ahead log's segments too: a receipt is verified only for what was searched.
            wal, problem = pgfiles.wal_segment_files()
            specs += wal
    if problem:
        return FileSearch(status="not_possible", files=[], found=None, found_in=[], found_count=0, problem=problem)
    return search_files(specs, needles, page_size=_page_size(), relation_names=connection.vendor == "postgresql")


def search_files(specs: list[dict], needles: list[str | bytes], *, page_size: int = 0,
                 relation_names: bool = False) -> FileSearch:
    """Search the raw bytes of these files ({"path", "name", "kind"}) for each needle, by the file helper."""
    encoded = [n.encode("utf-8") if isinstance(n, str) else n for n in needles if n]
    try:
        answer = _run_helper({"op": "scan", "files": specs, "needles": [n.hex() for n in encoded],
                              "page_size": page_size})
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as exc:
        return FileSearch(status="not_possible", files=[], found=None, found_in=[], found_count=0,
                          problem=f"the files could not be searched ({exc})"[:500])
    files, found_in, hits, pages, live = [], [], {}, {}, {}
    for result in answer["files"]:
        if result["error"]:
            return FileSearch(status="not_possible", files=files, found=None, found_in=[], found_count=0,
                              problem=f"{result['name']} could not be read ({result['error']})")
        files.append({"file": result["name"], "bytes": result["bytes"]})
        if result["found"]:
            name = _with_relation_name(result["name"]) if relation_names else result["name"]
            found_in.append(name)
            for i in result["found"]:
                hits.setdefault(i, []).append(name)
            for i, numbers in result["pages"].items():
                pages.setdefault(int(i), set()).update(numbers)
            for i in result.get("live", []):
                live.setdefault(i, []).append(name)
    return FileSearch(status="searched", files=files, found=bool(hits), found_in=found_in, found_count=len(hits),
                      pages=pages, found_needles=hits, live=live)


def erase_leftovers(*, subject: str, conversation_ids: list[uuid.UUID], needles: list[str]) -> dict:
    """Remove the files outside the database (leftovers.py) that are about the subject or the
    conversations, by their records or by their bytes, then search what is left for the same needles.

    Returns the receipt's account: which files were removed and why, what was searched after."""
    ids = [str(c) for c in conversation_ids]
    needles = [n for n in dict.fromkeys([*needles, *ids]) if len(n.encode("utf-8")) >= LEFTOVER_NEEDLE_MIN]
    removed: list[dict] = []
    problems: list[str] = []
    for kind in leftovers.registered():
        why: dict[Path, list[str]] = {}
        for path in kind.about(subject=subject, conversation_ids=ids):
            why.setdefault(Path(path), []).append("record")
        paths = {f"{kind.name}/{Path(p).name}": Path(p) for p in kind.files()}
        if paths and needles:
            search = search_files([{"path": str(p), "name": name, "kind": "other"} for name, p in paths.items()],
                                  needles)
            if search.status != "searched":
                problems.append(search.problem)
            for name in search.found_in:
                why.setdefault(paths[name], []).append("text")
        for path, reasons in sorted(why.items()):
            removed.append({"file": f"{kind.name}/{path.name}", "bytes": kind.remove(path), "why": reasons,
                            "removed": not path.exists()})
    # What is left, searched again: the verdict covers these files too.
    left = {f"{kind.name}/{Path(p).name}": Path(p) for kind in leftovers.registered() for p in kind.files()}
    after = FileSearch(status="searched", files=[], found=False, found_in=[], found_count=0)
    if left and needles:
        after = search_files([{"path": str(p), "name": name, "kind": "other"} for name, p in left.items()], needles)
    still_about = [f"{kind.name}/{Path(p).name}" for kind in leftovers.registered()
                   for p in kind.about(subject=subject, conversation_ids=ids)]
    not_removed = [r["file"] for r in removed if not r["removed"]]
    found_in = list(dict.fromkeys(after.found_in + still_about + not_removed))
    problems += [after.problem] if after.problem else []
    return {
        "status": "not_possible" if problems else "found" if found_in else "verified",
        "folders": [kind.name for kind in leftovers.registered()],
        "strings_checked": len(needles),
        "files_searched": len(left),
        "bytes_searched": sum(f["bytes"] for f in after.files),
        "removed": removed,
        "found_in": found_in,
        "problems": [p for p in problems if p],
    }


def _with_relation_name(name: str) -> str:
    """'base/16384/2619' → 'base/16384/2619 (pg_statistic)', so a finding says where."""
    stem = name.rsplit("/", 1)[-1].split(".")[0].split("_")[0]
    if name.startswith("pg_wal/") or not stem.isascii() or not stem.isdigit():
        return name
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_filenode_relation(0, %s)::text", [int(stem)])
        row = cursor.fetchone()
    return f"{name} ({row[0]})" if row and row[0] else f"{name} (no relation: an old file)"


def searched_by_kind(files: list[dict]) -> dict:
    """How many files of each kind were searched, for the receipt: the SQLite main file,
    -wal and -shm; PostgreSQL's table files, TOAST, indexes, planner statistics, other
    relations (catalogs, sequences, old files) and WAL segments."""
    if connection.vendor == "sqlite":
        kinds = {"main file": 0, "wal": 0, "shm": 0}
        for f in files:
            name = f["file"]
            kinds["wal" if name.endswith("-wal") else "shm" if name.endswith("-shm") else "main file"] += 1
        return kinds
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_relation_filenode(c.oid), c.relkind, "
            "c.oid = 'pg_statistic'::regclass OR c.oid = (SELECT reltoastrelid FROM pg_class "
            "WHERE oid = 'pg_statistic'::regclass) FROM pg_class c WHERE pg_relation_filenode(c.oid) IS NOT NULL")
        relations = {int(node): (kind, stats) for node, kind, stats in cursor.fetchall()}
    kinds = {"table files": 0, "toast": 0, "indexes": 0, "statistics": 0, "other relation files": 0,
             "wal segments": 0}
    for f in files:
        name = f["file"]
        if name.startswith("pg_wal/"):
            kinds["wal segments"] += 1
            continue
        stem = name.rsplit("/", 1)[-1].split(".")[0].split("_")[0]
        kind, stats = relations.get(int(stem), ("", False)) if stem.isdigit() else ("", False)
        key = ("statistics" if stats else "toast" if kind == "t" else "indexes" if kind == "i"
               else "table files" if kind in ("r", "m") else "other relation files")
        kinds[key] += 1
    return kinds


def zero_unused_space(pages: list[int]) -> tuple[int, str | None]:
    """SQLite: overwrite the unused space of these pages with zeros, through SQLite, in another process."""
    try:
        answer = _run_helper({"op": "zero", "database": str(connection.settings_dict["NAME"]),
                              "pages": pages, "busy_ms": STEP_BUSY_MS * STEP_ATTEMPTS})
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as exc:
        return 0, f"pages could not be cleaned ({exc})"[:500]
    return int(answer.get("zeroed", 0)), answer.get("error")


# --- making it gone from disk ----------------------------------------------------

def _truncate_wal(notes: list[str], lease: Lease | None) -> None:
    if not truncate_wal(beat=lease.beat if lease else None):
        notes.append("the WAL could not be truncated: other connections kept reading")


def _scrub_sqlite(notes: list[str], lease: Lease | None) -> None:
    _truncate_wal(notes, lease)
    if not incremental_vacuum(busy_ms=STEP_BUSY_MS, beat=lease.beat if lease else None):
        notes.append("freed pages were not all given back: writers kept the database busy (they are zeroed)")
    _truncate_wal(notes, lease)


def _wait_for_older_snapshots(xid: int | None, notes: list[str]) -> None:
    """PostgreSQL keeps a deleted row while any transaction that may still see it is
    open (VACUUM FULL copies such "recently dead" rows into the new file): wait,
    boundedly, for transactions older than the deletion to end."""
    if xid is None:
        return
    deadline = time.monotonic() + SNAPSHOT_WAIT_SECONDS
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                # Only this database's transactions hold back its tables' dead rows: another
                # database's long transaction (a report, a second deployment) never delays this one.
                "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                "AND datname = current_database() "
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


def _vacuum_full(cursor, table: str, notes: list[str], lease: Lease | None) -> None:
    """VACUUM FULL needs an exclusive lock; asked for with a short timeout so that
    appends never queue behind a request that waits for a long reader."""
    cursor.execute(f"SET lock_timeout = '{PG_LOCK_TIMEOUT}'")
    try:
        for attempt in range(STEP_ATTEMPTS):
            try:
                cursor.execute(f'VACUUM (FULL, ANALYZE) "{table}"')
                return
            except OperationalError as exc:
                if "lock timeout" not in str(exc):
                    raise
            if lease is not None:
                lease.beat()
            time.sleep(0.05 * (attempt + 1))
        notes.append(f"{table} could not be rewritten: other sessions kept it locked")
    finally:
        cursor.execute("SET lock_timeout = 0")


def _resample_statistics(notes: list[str], lease: Lease | None) -> None:
    """PostgreSQL: planner statistics that still hold deleted text, sampled again.

    ANALYZE samples a row whose deletion is still in progress as a live row, so an
    autovacuum ANALYZE that ran during the deleting transactions can store erased text
    as a common value; and a replaced statistics row outlives VACUUM FULL while any
    transaction older than its replacement is open. Both are gone after the tables are
    analysed again, older snapshots have ended, and the catalog is rewritten."""
    with connection.cursor() as cursor:
        for table in _tables_holding_subject_data():
            cursor.execute(f'ANALYZE "{table}"')
            _clear_statistics_if_empty(cursor, table, notes)
    _wait_for_older_snapshots(_current_xid(), notes)
    with connection.cursor() as cursor:
        try:
            cursor.execute("VACUUM FULL pg_statistic")
        except Exception as exc:
            notes.append(f"pg_statistic was not vacuumed ({type(exc).__name__})")
    if lease is not None:
        lease.beat()


def _clear_statistics_if_empty(cursor, table: str, notes: list[str]) -> None:
    """ANALYZE of a table with no rows leaves its old statistics as they were, sampled
    values included: a deletion that emptied the table would leave them holding erased
    text for good. An empty table's statistics describe nothing; they are dropped (a
    superuser's right, as the file search itself needs) and rebuilt by the next ANALYZE."""
    cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}")')
    if cursor.fetchone()[0]:
        return
    try:
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [f'"{table}"'])
    except DatabaseError as exc:
        notes.append(f"the statistics of the emptied table {table} could not be cleared ({type(exc).__name__})")


def _is_statistics_file(name: str) -> bool:
    """A finding in pg_statistic or in its TOAST table (long sampled values are stored there)."""
    return name.endswith("(pg_statistic)") or name.endswith(f"(pg_toast.pg_toast_{_PG_STATISTIC_OID})")


def _scrub_postgres(xid: int | None, notes: list[str], lease: Lease | None, rewrite: dict) -> None:
    _wait_for_older_snapshots(xid, notes)
    problem = pgfiles.repack_problem()
    rewrite.update(method="pg_repack" if problem is None else "vacuum_full", tables={})
    if problem is not None:
        rewrite["writers_waited"] = True
        notes.append(f"{problem}: the tables were rewritten with VACUUM FULL, and appends waited for each rewrite")
    for table in _tables_holding_subject_data():
        failed = pgfiles.repack_table(table, lease) if problem is None else "not installed"
        with connection.cursor() as cursor:
            if failed is not None:
                if problem is None:
                    notes.append(f"{failed}; {table} was rewritten with VACUUM FULL instead (appends waited)")
                    rewrite["writers_waited"] = True
                _vacuum_full(cursor, table, notes, lease)
            rewrite["tables"][table] = "vacuum_full" if failed else "pg_repack"
            _clear_statistics_if_empty(cursor, table, notes)
    with connection.cursor() as cursor:
        try:
            # Planner statistics keep sample column values; ANALYZE (pg_repack's, or
            # VACUUM's) replaced them, this drops the dead copies.
            cursor.execute("VACUUM FULL pg_statistic")
        except Exception as exc:
            notes.append(f"pg_statistic was not vacuumed ({type(exc).__name__})")
        cursor.execute("CHECKPOINT")


def scrub_disk(xid: int | None = None, lease: Lease | None = None, rewrite: dict | None = None) -> list[str]:
    """After the deleting transactions: leave no copy of the deleted text in the files.

    On PostgreSQL `rewrite` is filled with how each table was rewritten (pgfiles.py)."""
    notes: list[str] = []
    if connection.in_atomic_block:
        return ["the files were not scrubbed: called inside a transaction"]
    if connection.vendor == "sqlite":
        _scrub_sqlite(notes, lease)
    else:
        _scrub_postgres(xid, notes, lease, rewrite if rewrite is not None else {})
    return notes


def _current_xid() -> int | None:
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT txid_current()")
        return int(cursor.fetchone()[0])


def _tables_holding_subject_data() -> list[str]:
    tables = [Message._meta.db_table, Checkpoint._meta.db_table, Conversation._meta.db_table]
    tables += [t.table for t in owned_tables()]
    try:
        for model in apps.get_app_config("facts").get_models():
            tables.append(model._meta.db_table)
    except LookupError:
        pass
    return list(dict.fromkeys(tables))


# --- the request -----------------------------------------------------------------

def execute_deletion(*, subject: str = "", conversation_ids=(), actor: str, kind: str = "subject") -> DeletionReceipt:
    """Carry out a deletion request (see the module docstring) and return its receipt.

    Raises MaintenanceRunning (409) while a prune or another deletion runs."""
    subject, ids = clean_request(subject, conversation_ids)
    with maintenance(kind="deletion", actor=actor) as lease:
        return _execute(subject, ids, actor=actor, kind=kind, lease=lease)


def _execute(subject: str, ids: list[uuid.UUID], *, actor: str, kind: str, lease: Lease) -> DeletionReceipt:
    request_id = uuid.uuid4()
    preview = _preview(subject, ids)
    erasure = _facts_erasure() if subject else None
    fact_texts = (erasure.preview_subject(subject).get("sample_texts") or []) if erasure else []
    victim_ids = [uuid.UUID(r.id) for r in preview.conversations]

    # What to look for afterwards, chosen before anything is deleted.
    candidates = ([subject] if subject else []) + _sample_strings(preview, fact_texts)

    counts = {"conversations": 0, "messages": 0, "checkpoints": 0}
    disk.ensure_fts_secure_delete()
    clock = time.monotonic()
    seconds = {}
    mark_deleting(victim_ids)
    # Their chains: final heads into the audit chain, every row's commitment kept (erased.py).
    erased_rows.record_heads(ids=victim_ids, actor=actor, reason="deletion", target_type="deletion_request",
                             target_id=str(request_id))
    erased_rows.keep_commitments(receipt_id=request_id, ids=victim_ids)
    deleted = delete_conversations_in_batches(victim_ids, batch_size=DELETE_BATCH, beat=lease.beat)
    counts.update(messages=deleted.messages, checkpoints=deleted.checkpoints)
    for table, n in deleted.owned.items():
        counts[table] = n
    def last_transaction():
        # The conversation rows, the subject's facts and the audit event: one transaction.
        with transaction.atomic():
            done = dict(counts, conversations=deleted.finish())
            # Idempotency keys whose stored answers reference what is erased (conversations/idempotency.py).
            idempotency.forget(conversation_ids=victim_ids, subject=subject)
            if erasure is not None:
                erased = erasure.erase_subject(subject)
                done.update({k: int(erased.get(k, 0)) for k in ("facts", "fact_events", "access_log")})
            done["conversation_ids_not_found"] = len(preview.missing_ids)
            store.record_audit(actor=actor, action="deletion.executed", target_type="deletion_request",
                               target_id=str(request_id),
                               detail={"kind": kind, "subject_sha256": subject_sha256(subject), "counts": done,
                                       "conversation_ids": [str(i) for i in victim_ids]})
            return done, _current_xid()

    counts, xid = in_turn(last_transaction)
    seconds["delete"] = round(time.monotonic() - clock, 3)
    # Files outside the database (an import preview's upload): see the module docstring.
    files_left = erase_leftovers(subject=subject, conversation_ids=victim_ids, needles=candidates)
    counts["uploads"] = sum(1 for r in files_left["removed"] if r["removed"])
    id_needles = []
    if connection.vendor == "sqlite":
        # A conversation id that some row still holds (a fork's parent_id, a fact's
        # source) proves nothing when found.
        still_stored = _ids_in_live_data(victim_ids)
        id_needles = [_id_needle(cid) for cid in victim_ids if cid not in still_stored][:MAX_ID_NEEDLES]

    notes: list[str] = []
    set_aside: set[str] = set()
    rewrite: dict = {}
    wal = pgfiles.WalState()
    if connection.in_atomic_block:
        # An outer transaction (a test, a caller's atomic) still holds the rows:
        # nothing can be verified, and the receipt must not claim it was.
        notes = scrub_disk(xid, lease, rewrite)
        search = FileSearch(status="not_possible", files=[], found=None, found_in=[], found_count=0,
                            problem="ran inside an outer transaction: the deletion was not yet committed")
    else:
        clock = time.monotonic()
        notes = scrub_disk(xid, lease, rewrite)
        seconds["scrub"] = round(time.monotonic() - clock, 3)
        clock = time.monotonic()
        search, set_aside = _verify(candidates + id_needles, notes, lease, wal)
        seconds["verify"] = round(time.monotonic() - clock, 3)
    searched = search.status == "searched"
    strings_checked = [c for c in candidates if c not in set_aside]
    checkable = strings_checked + id_needles
    status = receipt_status(search)
    if status in ("verified", "verified_except_wal") and files_left["status"] != "verified":
        status = files_left["status"]
    verification = {
        "database": connection.vendor,
        "status": status,
        "found": search.found or bool(files_left["found_in"]) if search.found is not None else None,
        "strings_checked": len(strings_checked) if searched else 0,
        "strings_set_aside": len(set_aside),
        "conversation_ids_checked": len(id_needles) if searched else 0,
        "subject_checked": bool(subject) and subject not in set_aside and searched,
        "files_searched": len(search.files),
        "bytes_searched": sum(f["bytes"] for f in search.files),
        "files": search.files,
        "found_in": search.found_in + files_left["found_in"],
        "found_count": search.found_count,
        "scope": _scope(),
        # What was searched, by kind of file (the WAL's segments or -wal file among them).
        "searched": searched_by_kind(search.files) if searched else {},
        "wal": _wal_account(search, wal) if searched else {"status": "not_searched"},
        "rewrite": rewrite,
        "uploads": files_left,
        "verify_passes": search.passes,
        "seconds": seconds,
        "notes": notes + ([search.problem] if search.problem else []) + files_left["problems"],
    }
    if not checkable and search.status == "searched" and files_left["status"] == "verified":
        verification["status"] = "nothing_to_check"
    def store_receipt():
        with transaction.atomic():
            receipt = DeletionReceipt.objects.create(
                id=request_id, actor=str(actor)[:200], kind=kind, subject_sha256=subject_sha256(subject),
                conversation_ids=[str(i) for i in victim_ids], counts=counts, verification=verification,
            )
            store.record_audit(actor=actor, action="deletion.receipt", target_type="deletion_receipt",
                               target_id=str(receipt.pk),
                               detail={"status": verification["status"],
                                       "strings_checked": verification["strings_checked"],
                                       "files_searched": verification["files_searched"]})
            return receipt

    receipt = in_turn(store_receipt)
    if verification["status"] != "verified":
        log.warning("deletion %s: verification %s", request_id, verification["status"])
    return receipt


def _is_wal_file(name: str) -> bool:
    return name.startswith("pg_wal/")


def _clear_wal(found_in: list[str], wal: pgfiles.WalState, lease: Lease | None) -> bool:
    """PostgreSQL: overwrite the recycled WAL segments that hold a needle by switching
    segments up to and past them (within WAL_FLUSH_MAX_BYTES), then switch and checkpoint
    so the older segments are recycled too (the next pass finds them ahead and goes past
    them). False when nothing could be done (every such segment is kept, or too far)."""
    segments = [name.rsplit("/", 1)[-1] for name in found_in if _is_wal_file(name)]
    with connection.cursor() as cursor:
        current = pgfiles._current_segment(cursor)
        segment_bytes = int(pgfiles._settings(cursor)["wal_segment_size"][0])
    ahead = [s for s in segments if pgfiles._segno(s) > pgfiles._segno(current)]
    reachable = [s for s in ahead if (pgfiles._segno(s) - pgfiles._segno(current)) * segment_bytes
                 <= pgfiles.WAL_FLUSH_MAX_BYTES]
    if reachable:
        wal.switches += pgfiles.advance_past(max(reachable, key=pgfiles._segno), lease)
    behind = len(segments) > len(ahead)
    if behind:
        pgfiles.switch_and_checkpoint()
        wal.switches += 1
    return bool(reachable) or behind


def _verify(needles: list[str], notes: list[str], lease: Lease | None,
            wal: pgfiles.WalState | None = None) -> tuple[FileSearch, set[str]]:
    """Search the files for the needles; returns the last search and the needles set aside.

    A needle found where data which stays holds it proves nothing: it is set aside.
    On SQLite the file helper tells that apart by the page structure (a match inside a
    row that exists, or in a page's unused space), and what lies in unused space is
    zeroed and searched for again. On PostgreSQL, where the tables were rewritten, the
    data itself is searched for the needles found (a full read, done only for those).
    """
    set_aside: set[str] = set()
    search = FileSearch(status="searched", files=[], found=False, found_in=[], found_count=0)
    wal = wal if wal is not None else pgfiles.WalState()
    wal_rounds = 0
    passes = 0
    while passes < VERIFY_PASSES + wal_rounds:
        passes += 1
        checkpoint_to_disk()
        search = search_database_files(needles)
        search.passes = passes
        if search.status != "searched" or not search.found:
            break
        if connection.vendor != "sqlite":
            shared = _strings_in_live_data([needles[i] for i in search.found_needles])
            set_aside |= shared
            search = search.without({i for i in search.found_needles if needles[i] in shared})
            if search.found and passes < VERIFY_PASSES + wal_rounds and all(
                    _is_statistics_file(name) or _is_wal_file(name) for name in search.found_in):
                acted = False
                if any(_is_statistics_file(name) for name in search.found_in):
                    _resample_statistics(notes, lease)
                    acted = True
                if any(_is_wal_file(name) for name in search.found_in) and wal_rounds < pgfiles.WAL_ROUNDS:
                    # Each WAL round earns one more pass, so the WAL never eats the passes
                    # the statistics need.
                    if _clear_wal(search.found_in, wal, lease):
                        wal_rounds += 1
                        acted = True
                if acted:
                    continue
            break
        main = Path(str(connection.settings_dict["NAME"])).name
        # In a row of the main file (just checkpointed): data that stays holds it, and
        # a stale copy of it may as well be of that row; it is set aside (its stale
        # copies are still cleaned). A row seen only in WAL frames may be a deleted
        # row's image from before the deletion: the WAL is emptied and searched again.
        kept = {i for i, files in search.live.items() if main in files}
        set_aside |= {needles[i] for i in kept}
        pages = sorted(set().union(*search.pages.values())) if search.pages else []
        search = search.without(kept)
        if not search.found or passes == VERIFY_PASSES:
            if pages and not search.found:
                zero_unused_space(pages)
            break
        zeroed, problem = zero_unused_space(pages)
        if problem:
            notes.append(problem)
            break
        if zeroed:
            notes.append(f"pass {passes}: zeroed unused space in {zeroed} database pages that held stale copies")
        _truncate_wal(notes, lease)
    if connection.vendor != "sqlite" and search.status == "searched":
        wal.segments_searched = sum(1 for f in search.files if _is_wal_file(f["file"]))
        wal.still_in = pgfiles.explain_segments([n for n in search.found_in if _is_wal_file(n)])
    return search, set_aside


def receipt_status(search: FileSearch) -> str:
    """`verified` only when nothing was found in anything searched. On PostgreSQL erased
    text left only in WAL segments the request could not overwrite gives
    `verified_except_wal`: the database files are clean, the receipt says which segments
    still hold it and until when (`verification.wal`)."""
    if search.status == "not_possible":
        return "not_possible"
    if not search.found:
        return "verified"
    if connection.vendor != "sqlite" and search.found_in and all(_is_wal_file(n) for n in search.found_in):
        return "verified_except_wal"
    return "found"


def _wal_account(search: FileSearch, wal: pgfiles.WalState) -> dict:
    if connection.vendor == "sqlite":
        files = [f for f in search.files if f["file"].endswith("-wal")]
        found = [n for n in search.found_in if n.endswith("-wal")]
        # Truncated to zero bytes (or removed) before the search: then it holds nothing.
        return {"status": "still_there" if found else "gone", "files_searched": len(files),
                "bytes": sum(f["bytes"] for f in files), "still_in": found}
    return wal.as_dict()


def _scope() -> str:
    # Files outside the database that may hold personal data (leftovers.py), searched after removal.
    outside = "; and the upload folder of the data directory (import previews waiting for confirmation)"
    if connection.vendor == "sqlite":
        return "the SQLite main file, its -wal and -shm files" + outside
    return ("every relation file of the database (tables, TOAST, indexes, planner statistics, all forks) under "
            "data_directory, and every segment of the write-ahead log (pg_wal)" + outside
            + "; replicas, WAL archives and backups are not covered")


def delete_one_conversation(*, conversation_id, actor: str) -> DeletionReceipt:
    """A person or key deleting one conversation (its page, the API): the same path, without a subject."""
    conversation = Conversation.objects.filter(pk=parse_conversation_id(conversation_id)).first()
    if conversation is None:
        raise NotFound(f"conversation {conversation_id} not found", field="id")
    return execute_deletion(subject="", conversation_ids=[conversation.pk], actor=actor, kind="conversation")
