"""Writes of the importer: conversations with their original times, rows in bulk,
checkpoints with their original times, and the original entries.

The core tables (conversations, messages, checkpoints) are written only through the
store's primitives (`conversations.store`, `conversations.store_recorded`), which keep
its rules: the store assigns positions, a row is validated and encoded once (by
`conversations.message_schema.encode_message`, in the parser: `formats.base.make_row`),
checkpoints only move the fold forward. Each function here runs in one transaction;
the importer nests them in one transaction per conversation. This module writes the
import's own tables (sources, original entries, stage holds) itself.
"""

from dataclasses import dataclass, field

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations import store_recorded
from conversations.errors import ImportInProgress, InvalidInput, StoreError
from conversations.formats.base import Entry, Row, storable
from conversations.message_schema import KINDS, max_message_bytes
from conversations.models import Checkpoint, Conversation
from conversations.retention.lease import STALE_AFTER, process_gone
from conversations.retention.pruning import delete_conversations_in_batches, mark_deleting
from conversations.store import check_meta, copy_fork_rows, lock_conversation, record_audit

from .models import ImportSource, ImportStage, SourceEntry

_ENTRY = SourceEntry._meta.db_table
BATCH = 1000


def _db_uuid(value):
    return Conversation._meta.pk.get_db_prep_value(value, connection)


def _entry_text(value: str | None) -> str | None:
    """An entry's uuid, parent or group as its column holds it (None when empty)."""
    return storable(value)[:200] if value else None


def create_imported_conversation(*, id=None, title: str = "", subject: str = "", meta: dict | None = None,
                                 namespace: str = "", external_id: str | None = None, parent_id=None,
                                 parent_relation: str = "", forked_from_position: int | None = None,
                                 created_at=None, last_activity_at=None, pinned: bool = False) -> Conversation:
    """A new conversation as the transcript had it: its times, its lineage, its framework id."""
    with transaction.atomic():
        return store_recorded.create_recorded_conversation(
            id=id, title=title, subject=subject, meta=meta, namespace=namespace, external_id=external_id,
            parent_id=parent_id, parent_relation=parent_relation, forked_from_position=forked_from_position,
            created_at=created_at, last_activity_at=last_activity_at, pinned=pinned)


def append_imported(*, conversation_id, rows: list[Row], expected_position: int) -> int:
    """Append encoded rows with their own times, in one transaction; returns the next position.

    The conversation must be at `expected_position` (the parser counted on it): a
    writer that appended meanwhile makes this a Conflict, and nothing is written."""
    limit = max_message_bytes()
    for row in rows:
        if not isinstance(row, Row) or row.kind not in KINDS or not isinstance(row.text, str):
            raise InvalidInput("rows must be encoded by conversations.formats.base.make_row", field="rows")
        if len(row.text.encode()) > limit:
            raise InvalidInput(f"a row is over the {limit}-byte message limit", field="rows")
    if not rows:
        return expected_position
    now = timezone.now()
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
        last_at = max((row.at for row in rows if row.at is not None), default=now)
        return store_recorded.append_rows(
            conversation_id=conversation.pk, rows=[(row.kind, row.text, row.at or now) for row in rows],
            expected_position=expected_position, last_activity_at=max(last_at, conversation.last_activity_at),
            received_at=now)


def checkpoint_imported(*, conversation_id, position: int, summary: str, created_at=None,
                        created_by: str = "", exact: bool = False) -> Checkpoint:
    """A fold as the transcript recorded it (its time, its author); inside a call block it
    moves to the nearest position before (conversations/calls.py), unless `exact`."""
    if not isinstance(summary, str) or not summary.strip():
        raise InvalidInput("summary must not be blank", field="summary")
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
        if not 0 <= position < conversation.next_position:
            raise InvalidInput(f"checkpoint position {position} is out of range", field="position")
        return store_recorded.add_recorded_checkpoint(conversation_id=conversation.pk, position=position,
                                                      summary=summary, created_at=created_at,
                                                      created_by=created_by, exact=exact)


def retitle(*, conversation_id, title: str) -> None:
    """Name an imported stream's conversation (its placeholder title, or a title entry)."""
    with transaction.atomic():
        store_recorded.set_recorded(conversation_id, title=title)


def get_or_create_source(*, format: str, namespace: str, source_key: str, conversation_id) -> tuple[ImportSource, bool]:
    with transaction.atomic():
        return ImportSource.objects.get_or_create(
            format=format, namespace=namespace, source_key=storable(source_key)[:300],
            defaults={"conversation_id": conversation_id},
        )


def add_entries(*, source: ImportSource, entries: list[Entry], conversation_ids: dict[str, str]) -> int:
    """Keep the original entries beside the rows, each with where it was placed."""
    if not entries:
        return 0
    default = conversation_ids.get("main") or str(source.conversation_id)
    params = [
        (source.pk, e.seq, _db_uuid(conversation_ids.get(e.conv, default)), e.position, e.line,
         _entry_text(e.uuid), _entry_text(e.parent_uuid), _entry_text(e.group), e.real, storable(e.raw))
        for e in entries
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        for i in range(0, len(params), BATCH):
            cursor.executemany(
                f'INSERT INTO {_ENTRY} (source_id, seq, conversation_id, position, line, uuid, parent_uuid, "group", '
                "real, raw) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", params[i:i + BATCH])
    return len(params)


def save_source(*, source: ImportSource, entries: int, state: dict, consumed_chars: int | None = None,
                consumed_hash: str | None = None) -> None:
    state = storable(state)
    fields = {"entries": entries, "state": state, "updated_at": timezone.now()}
    if consumed_chars is not None:
        fields["consumed_chars"] = consumed_chars
        fields["consumed_hash"] = consumed_hash or ""
    check_meta(state)
    with transaction.atomic():
        ImportSource.objects.filter(pk=source.pk).update(**fields)
    for key, value in fields.items():
        setattr(source, key, value)


def record_import(*, actor: str, conversation_id, detail: dict) -> None:
    record_audit(actor=actor or "system", action="conversation.imported", target_type="conversation",
                 target_id=str(conversation_id), detail=detail)


# ---- staged imports: short transactions, hidden until the last one -------------------------
#
# A whole file is written in chunks of a few thousand rows, one short transaction each,
# so agents' appends never wait long for the write lock. The conversations it creates
# are marked `staged` (hidden from every read, closed to other writers) and have an
# ImportStage row until `publish_staged` unmarks them all in one transaction. Every
# transaction here first checks that the import still holds its stage rows: a deletion
# (prune, deletion request) removes them before it deletes anything else, and the import
# then stops without writing another row.


class ImportInterrupted(StoreError):
    code = "import_interrupted"
    status = 409


def _check_holds(holder: str, staged: list) -> None:
    if not staged:
        return
    qs = ImportStage.objects.for_update().filter(conversation_id__in=staged, holder=holder)
    held = len(list(qs.values_list("conversation_id", flat=True)))
    if held != len(staged):
        raise ImportInterrupted(
            "a prune or deletion took the conversations this import was still writing; nothing of them was "
            "kept: import the file again", field="source")


def stage_conversation(*, holder: str, staged: list, source_key: str = "", id=None, title: str = "",
                       subject: str = "", meta: dict | None = None, namespace: str = "",
                       external_id: str | None = None, parent_id=None, parent_relation: str = "",
                       forked_from_position: int | None = None, created_at=None, last_activity_at=None,
                       pinned: bool = False) -> Conversation:
    """A new conversation, hidden (marked `staged`) until the import publishes it."""
    try:
        with transaction.atomic():
            _check_holds(holder, staged)
            conversation = store_recorded.create_recorded_conversation(
                id=id, title=title, subject=subject, meta=meta, namespace=namespace, external_id=external_id,
                parent_id=parent_id, parent_relation=parent_relation, forked_from_position=forked_from_position,
                created_at=created_at, last_activity_at=last_activity_at, pinned=pinned, staged=True)
            ImportStage.objects.create(conversation_id=conversation.pk, holder=holder,
                                       source_key=storable(source_key)[:300])
    except IntegrityError:
        # Its id, or its namespace and external id, were taken since the importer looked: by a
        # request importing the same file at the same moment (PostgreSQL lets both look first).
        raise ImportInProgress("this source is being imported by another request right now; try again when it "
                               "has finished", field="source") from None
    return conversation


def copy_prefix_staged(*, holder: str, staged: list, child_id, parent_id, start: int, count: int,
                       position: int) -> None:
    """Copy rows start..start+count-1 of the parent into a staged fork (same bytes, same times),
    at the positions the fork's counter hands out; the last step also copies the latest
    checkpoint at or before `position` and the parent's ledger as of it."""
    with transaction.atomic():
        _check_holds(holder, staged)
        copy_fork_rows(child_id=child_id, parent_id=parent_id, start=start, count=count, upto=position, staged=True)


@dataclass
class Chunk:
    """What one transaction of an import writes."""

    # (conversation id, the position its first row must get, rows, staged?)
    rows: list = field(default_factory=list)
    # (conversation id, Fold, created_by)
    folds: list = field(default_factory=list)
    entries: list = field(default_factory=list)  # (Entry, conversation id)
    # A live conversation appended to: the newest time of its rows, to move last_activity_at.
    last_at: dict = field(default_factory=dict)


def write_chunk(*, holder: str, staged: list, source_id: int | None, chunk: Chunk) -> None:
    """One short transaction: rows at the positions the counters hand out, checkpoints,
    original entries; staged conversations must still be held, live ones must be where
    the import expects them."""
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        _check_holds(holder, staged)
        for cid, expected, rows, is_staged in chunk.rows:
            if not rows:
                continue
            times = {"received_at": now}
            if not is_staged:
                conversation = lock_conversation(cid)
                times["last_activity_at"] = max(chunk.last_at.get(cid) or now, conversation.last_activity_at)
            store_recorded.append_rows(
                conversation_id=cid, rows=[(row.kind, row.text, row.at if row.at is not None else now) for row in rows],
                expected_position=expected, staged=is_staged, **times)
        for cid, fold, created_by in chunk.folds:
            store_recorded.add_recorded_checkpoint(conversation_id=cid, position=fold.position, summary=fold.summary,
                                                   created_at=fold.at or now, created_by=created_by, exact=fold.exact)
        if chunk.entries:
            db_ids = {cid: _db_uuid(cid) for cid in {cid for _e, cid, _raw in chunk.entries}}
            cursor.executemany(
                f'INSERT INTO {_ENTRY} (source_id, seq, conversation_id, position, line, uuid, parent_uuid, "group", '
                "real, raw) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(source_id, e.seq, db_ids[cid], e.position, e.line, _entry_text(e.uuid), _entry_text(e.parent_uuid),
                  _entry_text(e.group), e.real, storable(raw)) for e, cid, raw in chunk.entries])
        if staged:
            ImportStage.objects.filter(conversation_id__in=staged, holder=holder).update(heartbeat_at=now)


def reserve_source(*, holder: str, staged: list, format: str, namespace: str, source_key: str,
                   conversation_id) -> ImportSource:
    """The source's identity, taken before its first rows are written: a second import of the
    same source meanwhile is told so at once."""
    with transaction.atomic():
        _check_holds(holder, staged)
        source, created = ImportSource.objects.get_or_create(
            format=format, namespace=namespace, source_key=storable(source_key)[:300],
            defaults={"conversation_id": conversation_id})
    if not created:
        raise ImportInProgress("this source is being imported by another request; try again when it has finished",
                               field="source")
    return source


def publish_staged(*, holder: str, staged: list, finals: dict, actor: str, audits: list,
                   source: ImportSource | None = None, source_fields: dict | None = None,
                   before_commit=None) -> None:
    """The import's last transaction: its conversations become visible, with their final
    titles, times and meta, each with its audit event; the source records what it holds.
    `before_commit()` runs last inside it: a door renders its answer (and records its
    idempotency key) there, so an answer that cannot be given leaves nothing published."""
    with transaction.atomic():
        _check_holds(holder, staged)
        for cid, values in finals.items():
            store_recorded.set_recorded(cid, **values)
        ImportStage.objects.filter(conversation_id__in=staged, holder=holder).delete()
        store_recorded.publish_staged_conversations(staged)
        for cid, detail in audits:
            record_import(actor=actor, conversation_id=cid, detail=detail)
        if source is not None and source_fields:
            if "state" in source_fields:
                source_fields = {**source_fields, "state": check_meta(storable(source_fields["state"]))}
            ImportSource.objects.filter(pk=source.pk).update(updated_at=timezone.now(), **source_fields)
        if before_commit is not None:
            before_commit()


def discard_staged(*, ids: list) -> None:
    """Remove what an import staged and could not finish, in short transactions: marked
    `deleting` first, which opens the database's delete guards (a staging alone does not),
    so a crash here leaves them to the next prune."""
    ids = [i for i in ids if i is not None]
    if ids:
        mark_deleting(ids)
        delete_conversations_in_batches(ids, batch_size=5000).finish()


def stale_stage(conversation_id) -> bool | None:
    """None: the conversation is not being imported; else whether its import is gone (its
    process is not alive, or it has not written for STALE_AFTER)."""
    stage = ImportStage.objects.filter(conversation_id=conversation_id).first()
    if stage is None:
        return None
    return process_gone(stage.holder) or stage.heartbeat_at < timezone.now() - STALE_AFTER


def discard_abandoned(conversation_id) -> bool:
    """If an import that is gone left this conversation staged, remove everything it staged;
    True when it did (False: nothing staged there, or its import is still running)."""
    stage = ImportStage.objects.filter(conversation_id=conversation_id).first()
    if stage is None or not stale_stage(conversation_id):
        return False
    discard_staged(ids=list(ImportStage.objects.filter(holder=stage.holder).values_list("conversation_id",
                                                                                          flat=True)))
    return True
