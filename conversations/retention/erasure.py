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
8. journal the request outside the database (erasure_journal.py: what a restore of
   an older backup re-applies), then store the receipt (append-only) with its
   audit event in one transaction: ids, counts, SHA-256 of the subject and the
   verification — never the subject or a text. The request was journalled once
   already, as it was filed and before step 4 (its intent): one that stops between
   is carried out again by a restore or `reapply_erasures`, and until then /readyz
   is not ready; one that cannot be journalled is refused with nothing deleted.

Files outside the database that may hold the subject (an import preview waiting
for its confirmation: `plugins.leftover_files`) are no rows: after the deletion every such file
that its own record ties to the subject or a deleted conversation, or whose bytes
hold the subject, a sampled text or a deleted conversation's id, is removed; the
rest are searched again, and the receipt lists the removed files and counts that
search in its verdict.

This module is the request (preview, delete, the receipt stored); step 6 is in
erasure_scrub.py, steps 5 and 7 in erasure_verify.py, the receipt's verdict in
erasure_receipt.py.
"""

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.utils import timezone

from conversations import idempotency, params, partitions, projects, store
from conversations.errors import InvalidInput, NotFound, StoreError
from conversations.facts import erasure as facts_erasure
from conversations.message_schema import decode_message, message_text
from conversations.models import Checkpoint, Conversation, Message, parse_conversation_id
from conversations.owned import owned_tables
from conversations.search import unindex

from . import disk, erasure_journal, erasure_receipt, erasure_scrub, erasure_verify, journal, pgfiles, window
from . import erased as erased_rows
from .lease import Lease, maintenance
from .models import DeletionReceipt
from .pruning import delete_conversations_in_batches, in_turn, mark_deleting

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
DELETE_BATCH = 2000


class JournalUnwritable(StoreError):
    """The request cannot be journalled, so nothing of it is deleted: a restore could not redo it."""

    code = "erasure_journal_unwritable"
    status = 503


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
    # Facts about the subject go with its conversations (conversations/facts/erasure.py).
    return facts_erasure


def clean_request(subject, conversation_ids) -> tuple[str, list[uuid.UUID]]:
    if subject is None:
        subject = ""
    if not isinstance(subject, str):
        raise InvalidInput("subject must be a string", field="subject")
    subject = subject.strip()
    if len(subject) > SUBJECT_MAX:
        raise InvalidInput(f"subject is {len(subject)} characters; at most {SUBJECT_MAX}", field="subject")
    params.check_text(subject, "subject")
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


def preview_deletion(*, subject: str = "", conversation_ids=(), all_projects: bool = False) -> DeletionPreview:
    """What a request would delete: in the current project, or in every project (`all_projects`)."""
    subject, ids = clean_request(subject, conversation_ids)
    with projects.acting(all_projects=all_projects):
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
        facts = {k: counts.get(k, 0) for k in ("facts", "fact_events", "access_log", "fact_vectors")}
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



# Vectors searched for (their first VECTOR_NEEDLE_BYTES bytes: 8 floats, which no other
# text or vector holds by chance), at most this many.
VECTORS_SAMPLED = 20
VECTOR_NEEDLE_BYTES = 32


def _sample_vectors(victim_ids: list[uuid.UUID], fact_vectors: list[bytes]) -> list[bytes]:
    """The first bytes of some of the vectors being deleted (messages' and facts'): a vector
    is derived personal data, and the files are searched for it like the texts."""
    found: list[bytes] = [bytes(v)[:VECTOR_NEEDLE_BYTES] for v in fact_vectors]
    for table in owned_tables():
        if not victim_ids or not table.bytes_fields:
            continue
        for values in table.model._base_manager.filter(conversation_id__in=victim_ids) \
                .values_list(*table.bytes_fields)[:VECTORS_SAMPLED]:
            found += [bytes(v)[:VECTOR_NEEDLE_BYTES] for v in values if v]
    unique = [v for v in dict.fromkeys(found) if len(v) == VECTOR_NEEDLE_BYTES and any(v)]
    return unique[:VECTORS_SAMPLED]


# --- the request -----------------------------------------------------------------

def execute_deletion(*, subject: str = "", conversation_ids=(), actor: str, kind: str = "subject",
                     all_projects: bool = False, reapplies: dict | None = None) -> DeletionReceipt:
    """Carry out a deletion request (see the module docstring) and return its receipt.

    The request erases in the current project (`default` where the caller is every project's
    and named none), or in every project with `all_projects` (a data controller's request,
    filed where every project is seen); the receipt says which. `reapplies` (reapply.py) says
    which earlier request this one carries out again after a restore; its receipt says so.
    Raises MaintenanceRunning (409) while a prune or another deletion runs."""
    subject, ids = clean_request(subject, conversation_ids)
    with projects.acting(all_projects=all_projects) as project_id, \
            maintenance(kind="deletion", actor=actor) as lease:
        return _execute(subject, ids, actor=actor, kind=kind, lease=lease, project_id=project_id,
                        reapplies=reapplies)


def _execute(subject: str, ids: list[uuid.UUID], *, actor: str, kind: str, lease: Lease,
             project_id: int | None, reapplies: dict | None = None) -> DeletionReceipt:
    request_id = uuid.uuid4()
    preview = _preview(subject, ids)
    erasure = _facts_erasure() if subject else None
    fact_sample = erasure.preview_subject(subject) if erasure else {}
    fact_texts = fact_sample.get("sample_texts") or []
    victim_ids = [uuid.UUID(r.id) for r in preview.conversations]
    # PostgreSQL: the partitions their rows are in, the only ones to rewrite and search.
    touched = set(partitions.partitions_holding(victim_ids))
    vector_needles = _sample_vectors(victim_ids, fact_sample.get("sample_vectors") or [])

    # What to look for afterwards, chosen before anything is deleted.
    candidates = ([subject] if subject else []) + _sample_strings(preview, fact_texts)

    # Journalled before anything is deleted: a request that stops half-way is redone by a restore.
    try:
        erasure_journal.record_intent(_receipt_of(request_id, subject, victim_ids, actor=actor, kind=kind,
                                                  project_id=project_id, counts={}, verification={}),
                                      subject=subject)
    except journal.JournalError as exc:
        raise JournalUnwritable(f"{exc}. Nothing was deleted: a request the erasure journal does not hold could "
                                "be undone by a restore. Make the journal writable and file it again") from None
    disk.ensure_fts_secure_delete()
    clock = time.monotonic()
    seconds = {}
    later = window.mode() == window.WINDOW
    counts, xid = _delete(request_id, subject, preview, victim_ids, erasure, actor=actor, kind=kind, lease=lease,
                          unindex_later=later)
    seconds["delete"] = round(time.monotonic() - clock, 3)
    # Files outside the database (an import preview's upload): see the module docstring.
    files_left = erasure_verify.erase_leftovers(subject=subject, conversation_ids=victim_ids, needles=candidates)
    counts["uploads"] = sum(1 for r in files_left["removed"] if r["removed"])
    id_needles = erasure_verify.id_needles(victim_ids)
    if later:
        # Phase one ends here: the files are cleaned and searched in the next window.
        filed_at = timezone.now()
        pending = window.Pending(
            receipt_id=str(request_id), filed_at=filed_at.isoformat(),
            verify_by=window.deadline_for(filed_at).isoformat(), subject_given=bool(subject),
            candidates=candidates, id_needles=id_needles, touched=sorted(touched), files_left=files_left,
            seconds=seconds, xid=xid)
        window.save(pending)
        verification = window.erased_verification(pending=pending, seconds=seconds)
        if reapplies:
            verification["reapplied"] = reapplies
        return _store_receipt(request_id, subject, victim_ids, counts, verification, actor=actor,
                              kind=kind, project_id=project_id, verify_by=window.deadline_for(filed_at))
    checked = _scrub_and_verify(candidates + id_needles + vector_needles, xid, lease, seconds, touched)
    verification = erasure_receipt.verification(
        checked, subject=subject, candidates=candidates, id_needles=id_needles, files_left=files_left, seconds=seconds,
        vector_needles=vector_needles)
    if reapplies:
        verification["reapplied"] = reapplies
    receipt = _store_receipt(request_id, subject, victim_ids, counts, verification,
                             actor=actor, kind=kind, project_id=project_id)
    if verification["status"] != "verified":
        log.warning("deletion %s: verification %s", request_id, verification["status"])
    return receipt


def _delete(request_id, subject: str, preview: DeletionPreview, victim_ids: list[uuid.UUID], erasure, *,
            actor: str, kind: str, lease: Lease, unindex_later: bool = False) -> tuple[dict, int | None]:
    """Step 4: mark, delete in batches, then the last transaction; the counts and its xid.
    With `unindex_later` (a request in two phases) the rows' full-text entries are left for
    the window to remove (conversations/search/unindex.py): on SQLite that is most of a
    deletion's cost, and the window's cleaning of the files, not the rows' going."""
    counts = {"conversations": 0, "messages": 0, "checkpoints": 0}
    with transaction.atomic():
        if unindex_later:
            unindex.defer(victim_ids)
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
                done.update({k: int(erased.get(k, 0)) for k in ("facts", "fact_events", "access_log", "fact_vectors")})
            done["conversation_ids_not_found"] = len(preview.missing_ids)
            store.record_audit(actor=actor, action="deletion.executed", target_type="deletion_request",
                               target_id=str(request_id),
                               detail={"kind": kind, "subject_sha256": subject_sha256(subject), "counts": done,
                                       "conversation_ids": [str(i) for i in victim_ids]})
            return done, erasure_scrub.current_xid()

    return in_turn(last_transaction)


def _scrub_and_verify(needles: list[str | bytes], xid: int | None, lease: Lease, seconds: dict,
                      touched: set[str] | None = None) -> erasure_receipt.Checked:
    """Steps 6 and 7: scrub the files, then search them (timed into `seconds`)."""
    rewrite: dict = {}
    wal = pgfiles.WalState()
    if connection.in_atomic_block:
        # An outer transaction (a test, a caller's atomic) still holds the rows:
        # nothing can be verified, and the receipt must not claim it was.
        notes = erasure_scrub.scrub_disk(xid, lease, rewrite, touched)
        search = erasure_verify.FileSearch(
            status="not_possible", files=[], found=None, found_in=[], found_count=0,
            problem="ran inside an outer transaction: the deletion was not yet committed")
        return erasure_receipt.Checked(search, set(), notes, rewrite, wal)
    clock = time.monotonic()
    notes = erasure_scrub.scrub_disk(xid, lease, rewrite, touched)
    seconds["scrub"] = round(time.monotonic() - clock, 3)
    clock = time.monotonic()
    search, set_aside = erasure_verify.verify(needles, notes, lease, wal, touched)
    seconds["verify"] = round(time.monotonic() - clock, 3)
    return erasure_receipt.Checked(search, set_aside, notes, rewrite, wal)


def _receipt_of(request_id, subject: str, victim_ids: list[uuid.UUID], *, actor: str, kind: str,
                project_id: int | None, counts: dict, verification: dict, verify_by=None) -> DeletionReceipt:
    """The request's receipt, not yet stored: as filed (its intent, counts and verdict still
    empty), or as step 8 stores it."""
    return DeletionReceipt(
        id=request_id, project_id=project_id, actor=str(actor)[:200], kind=kind, created_at=timezone.now(),
        subject_sha256=subject_sha256(subject), conversation_ids=[str(i) for i in victim_ids], counts=counts,
        filed_verification=verification, verify_by=verify_by)


def _store_receipt(request_id, subject: str, victim_ids: list[uuid.UUID], counts: dict, verification: dict, *,
                   actor: str, kind: str, project_id: int | None, verify_by=None) -> DeletionReceipt:
    """Step 8: the receipt's journal entry, then the receipt and its audit event in one transaction.

    The entry goes first (erasure_journal.py): a receipt never exists without it, and a crash
    between leaves an entry whose receipt is missing, which a restore re-applies all the same."""
    receipt = _receipt_of(request_id, subject, victim_ids, actor=actor, kind=kind, project_id=project_id,
                          counts=counts, verification=verification, verify_by=verify_by)
    try:
        anchor = erasure_journal.record_erasure(receipt, subject=subject)
    except journal.JournalError as exc:
        # The request's intent is journalled: a restore carries it out again all the same.
        raise JournalUnwritable(f"{exc}. The request's rows are deleted, but its receipt could not be journalled "
                                "and was not stored. Make the journal writable and file the request again for "
                                "its receipt") from None

    def insert():
        with transaction.atomic():
            receipt.save(force_insert=True)
            store.record_audit(actor=actor, action="deletion.receipt", target_type="deletion_receipt",
                               target_id=str(receipt.pk), project_id=project_id,
                               detail={"status": verification["status"],
                                       "strings_checked": verification["strings_checked"],
                                       "files_searched": verification["files_searched"],
                                       "journal": anchor})
            return receipt

    return in_turn(insert)


def delete_one_conversation(*, conversation_id, actor: str) -> DeletionReceipt:
    """A person or key deleting one conversation (its page, the API): the same path, without a subject."""
    conversation = Conversation.objects.filter(pk=parse_conversation_id(conversation_id)).first()
    if conversation is None:
        raise NotFound(f"conversation {conversation_id} not found", field="id")
    return execute_deletion(subject="", conversation_ids=[conversation.pk], actor=actor, kind="conversation")
