"""Writes of the importer: conversations with their original times, rows in bulk,
checkpoints with their original times, and the original entries.

These keep the rules of `conversations.store`: the store assigns positions (the
counter is bumped with UPDATE … RETURNING before the rows are inserted, so the
database's insert guard holds), a row is validated and encoded once (by
`conversations.message_schema.encode_message`, in the parser: `formats.base.make_row`),
checkpoints only move the fold forward, and each function runs in one
transaction. The importer nests them in one transaction per conversation.
"""

from dataclasses import dataclass, field

from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from conversations import calls
from conversations.errors import CheckpointBeforeLatest, Conflict, ImportInProgress, InvalidInput, StoreError
from conversations.formats.base import Entry, Row, storable
from conversations.message_schema import KINDS, max_message_bytes
from conversations.models import Checkpoint, Conversation, Message
from conversations.store import (
    SUBJECT_MAX,
    TITLE_MAX,
    _check_meta,
    _clean_text,
    _lock_conversation,
    add_checkpoint,
    copy_prefix,
    insert_reserved,
    record_audit,
    reserve_positions,
)

from .models import ImportSource, ImportStage, SourceEntry

_MSG = Message._meta.db_table
_CONV = Conversation._meta.db_table
_ENTRY = SourceEntry._meta.db_table
BATCH = 1000


def _db_uuid(value):
    return Conversation._meta.pk.get_db_prep_value(value, connection)


def _entry_text(value: str | None) -> str | None:
    """An entry's uuid, parent or group as its column holds it (None when empty)."""
    return storable(value)[:200] if value else None


def _conversation_fields(*, id, title, subject, meta, namespace, external_id, parent_id, parent_relation,
                        forked_from_position, created_at, last_activity_at, pinned) -> dict:
    """The checked columns of a conversation as the transcript had it: its times, its
    lineage, its framework id."""
    title = _clean_text(" ".join(storable(str(title or "")).split())[:TITLE_MAX], field="title",
                        max_length=TITLE_MAX)
    subject = _clean_text(storable(subject), field="subject", max_length=SUBJECT_MAX)
    namespace = _clean_text(namespace, field="namespace", max_length=200)
    if external_id is not None:
        external_id = _clean_text(storable(external_id), field="external_id", max_length=200, required=True)
    meta = _check_meta(storable(meta))
    if parent_relation not in ("", "fork", "subagent"):
        raise InvalidInput("parent_relation must be fork or subagent", field="parent_relation")
    now = timezone.now()
    fields = dict(title=title, subject=subject, meta=meta, namespace=namespace, external_id=external_id,
                  parent_id=parent_id, parent_relation=parent_relation if parent_id else "",
                  forked_from_position=forked_from_position if parent_id else None,
                  created_at=created_at or now, last_activity_at=last_activity_at or created_at or now,
                  # Never the transcript's: retention counts from when memoryui received it.
                  received_at=now, pinned=bool(pinned))
    if id is not None:
        fields["id"] = id
    return fields


def create_imported_conversation(*, id=None, title: str = "", subject: str = "", meta: dict | None = None,
                                 namespace: str = "", external_id: str | None = None, parent_id=None,
                                 parent_relation: str = "", forked_from_position: int | None = None,
                                 created_at=None, last_activity_at=None, pinned: bool = False) -> Conversation:
    """A new conversation as the transcript had it: its times, its lineage, its framework id."""
    fields = _conversation_fields(id=id, title=title, subject=subject, meta=meta, namespace=namespace,
                                  external_id=external_id, parent_id=parent_id, parent_relation=parent_relation,
                                  forked_from_position=forked_from_position, created_at=created_at,
                                  last_activity_at=last_activity_at, pinned=pinned)
    with transaction.atomic():
        return Conversation.objects.create(**fields)


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
        conversation = _lock_conversation(conversation_id)
        if conversation.next_position != expected_position:
            raise Conflict(f"the conversation has {conversation.next_position} rows, the import expected "
                           f"{expected_position}: another writer appended meanwhile; import again",
                           code="position_conflict", field="conversation")
        last_at = max((row.at for row in rows if row.at is not None), default=now)
        start = reserve_positions(conversation_id=conversation.pk, count=len(rows),
                                  last_activity_at=max(last_at, conversation.last_activity_at), received_at=now)
        if start is None:
            Conversation.objects.get_live(conversation.pk)  # being deleted meanwhile: NotFound, nothing written
        end = start + len(rows)
        insert_reserved(conversation_id=conversation.pk, start=start,
                        rows=[(row.kind, row.text, row.at or now) for row in rows])
    return end


def checkpoint_imported(*, conversation_id, position: int, summary: str, created_at=None,
                        created_by: str = "", exact: bool = False) -> Checkpoint:
    """A fold as the transcript recorded it (its time, its author); inside a call block it
    moves to the nearest position before (conversations/calls.py), unless `exact`."""
    if not isinstance(summary, str) or not summary.strip():
        raise InvalidInput("summary must not be blank", field="summary")
    if "\x00" in summary:
        summary = summary.replace("\x00", "\ufffd")
    with transaction.atomic():
        conversation = _lock_conversation(conversation_id)
        if not 0 <= position < conversation.next_position:
            raise InvalidInput(f"checkpoint position {position} is out of range", field="position")
        latest = Checkpoint.objects.latest_for(conversation.pk)
        if latest is not None and position < latest.message_position:
            raise CheckpointBeforeLatest(f"position {position} is before the latest checkpoint", field="position")
        if not exact:
            position, summary = calls.placed_fold(conversation.pk, position, summary,
                                                  floor=latest.message_position if latest else 0)
        return add_checkpoint(conversation_id=conversation.pk, message_position=position, summary=summary,
                              created_at=created_at or timezone.now(), created_by=storable(str(created_by))[:200])


def retitle(*, conversation_id, title: str) -> None:
    """Name an imported stream's conversation (its placeholder title, or a title entry)."""
    title = _clean_text(" ".join(storable(str(title)).split())[:TITLE_MAX], field="title", max_length=TITLE_MAX)
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(title=title)


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
    _check_meta(state)
    with transaction.atomic():
        ImportSource.objects.filter(pk=source.pk).update(**fields)
    for key, value in fields.items():
        setattr(source, key, value)


def record_import(*, actor: str, conversation_id, detail: dict) -> None:
    record_audit(actor=actor or "system", action="conversation.imported", target_type="conversation",
                 target_id=str(conversation_id), detail=detail)


def link_subagent(*, conversation_id, parent_id, position: int | None, actor: str) -> bool:
    """Give a subagent that came before its session (or before its call) its link.

    Lineage is append-only: only an empty column is filled (no parent → this parent;
    this parent with no position → the position), never a link changed; the link is
    recorded as its own audit event in the same transaction. True when something was filled."""
    with transaction.atomic():
        conversation = _lock_conversation(conversation_id)
        if str(conversation.parent_id or "") not in ("", str(parent_id)) or str(conversation.pk) == str(parent_id):
            return False
        if conversation.parent_id is not None and (conversation.forked_from_position is not None or position is None):
            return False
        filled = Conversation.objects.filter(pk=conversation.pk, forked_from_position=None).filter(
            models.Q(parent_id=None) | models.Q(parent_id=parent_id)).update(
            parent_id=parent_id, parent_relation="subagent", forked_from_position=position)
        if filled:
            record_audit(actor=actor or "system", action="conversation.linked", target_type="conversation",
                         target_id=str(conversation.pk),
                         detail={"parent_id": str(parent_id), "parent_relation": "subagent",
                                 "forked_from_position": position,
                                 "filled": "position" if conversation.parent_id else "parent"})
        return bool(filled)


# ---- staged imports: short transactions, hidden until the last one -------------------------
#
# A whole file is written in chunks of a few thousand rows, one short transaction each,
# so agents' appends never wait long for the write lock. The conversations it creates
# are marked `deleting` (hidden from every read, closed to other writers) and have an
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
    qs = ImportStage.objects.filter(conversation_id__in=staged, holder=holder)
    if connection.vendor != "sqlite":  # SQLite: the IMMEDIATE transaction already holds the write lock
        qs = qs.select_for_update()
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
    """A new conversation, hidden (marked `deleting`) until the import publishes it."""
    fields = _conversation_fields(id=id, title=title, subject=subject, meta=meta, namespace=namespace,
                                  external_id=external_id, parent_id=parent_id, parent_relation=parent_relation,
                                  forked_from_position=forked_from_position, created_at=created_at,
                                  last_activity_at=last_activity_at, pinned=pinned)
    fields["deleting"] = True
    try:
        with transaction.atomic():
            _check_holds(holder, staged)
            conversation = Conversation.objects.create(**fields)
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
        if reserve_positions(conversation_id=child_id, count=count, staged=True) != start:
            raise Conflict("the fork being imported changed underneath the import", field="source")
        copied = copy_prefix(child_id=child_id, parent_id=parent_id, start=start, count=count)
        if copied != count:
            raise Conflict(f"the fork copied {copied} rows of its parent, expected {count}", field="source")
        if start + count == position + 1:
            checkpoint = Checkpoint.objects.latest_for(parent_id, at_or_before=position)
            if checkpoint is not None:
                add_checkpoint(conversation_id=child_id, message_position=checkpoint.message_position,
                               summary=checkpoint.summary, created_at=checkpoint.created_at,
                               created_by=checkpoint.created_by)
            from conversations.ledger import store as ledger

            ledger.copy_into_fork(parent_id=parent_id, child_id=child_id, position=position)


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
            if is_staged:
                start = reserve_positions(conversation_id=cid, count=len(rows), received_at=now, staged=True)
            else:
                conversation = _lock_conversation(cid)
                last_at = max(chunk.last_at.get(cid) or now, conversation.last_activity_at)
                start = reserve_positions(conversation_id=cid, count=len(rows), last_activity_at=last_at,
                                          received_at=now)
            if start != expected:
                raise Conflict(f"the conversation has {start} rows, the import expected {expected}: another "
                               "writer appended meanwhile; import again", code="position_conflict",
                               field="conversation")
            insert_reserved(conversation_id=cid, start=start,
                            rows=[(row.kind, row.text, row.at if row.at is not None else now) for row in rows])
        for cid, fold, created_by in chunk.folds:
            latest = Checkpoint.objects.latest_for(cid)
            if latest is not None and fold.position < latest.message_position:
                raise CheckpointBeforeLatest(f"position {fold.position} is before the latest checkpoint",
                                             field="position")
            summary = fold.summary.replace("\x00", "\ufffd") if "\x00" in fold.summary else fold.summary
            position = fold.position
            if not fold.exact:
                position, summary = calls.placed_fold(cid, fold.position, summary,
                                                      floor=latest.message_position if latest else 0)
            add_checkpoint(conversation_id=cid, message_position=position, summary=summary,
                           created_at=fold.at or now, created_by=storable(str(created_by))[:200])
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
            if "meta" in values:
                values["meta"] = _check_meta(storable(values["meta"]))
            if "title" in values:
                title = " ".join(storable(str(values["title"] or "")).split())[:TITLE_MAX]
                values["title"] = _clean_text(title, field="title", max_length=TITLE_MAX)
            Conversation.objects.filter(pk=cid).update(**values)
        ImportStage.objects.filter(conversation_id__in=staged, holder=holder).delete()
        # Received now: the import is complete and visible from this moment.
        Conversation.objects.filter(pk__in=staged).update(deleting=False, received_at=timezone.now())
        for cid, detail in audits:
            record_import(actor=actor, conversation_id=cid, detail=detail)
        if source is not None and source_fields:
            if "state" in source_fields:
                source_fields = {**source_fields, "state": _check_meta(storable(source_fields["state"]))}
            ImportSource.objects.filter(pk=source.pk).update(updated_at=timezone.now(), **source_fields)
        if before_commit is not None:
            before_commit()


def discard_staged(*, ids: list) -> None:
    """Remove what an import staged and could not finish, in short transactions (its
    conversations are hidden already; a crash here leaves them to the next prune)."""
    from conversations.retention.pruning import delete_conversations_in_batches

    ids = [i for i in ids if i is not None]
    if ids:
        delete_conversations_in_batches(ids, batch_size=5000).finish()


def stale_stage(conversation_id) -> bool | None:
    """None: the conversation is not being imported; else whether its import is gone (its
    process is not alive, or it has not written for STALE_AFTER)."""
    from conversations.retention.lease import STALE_AFTER, _process_gone

    stage = ImportStage.objects.filter(conversation_id=conversation_id).first()
    if stage is None:
        return None
    return _process_gone(stage.holder) or stage.heartbeat_at < timezone.now() - STALE_AFTER


def discard_abandoned(conversation_id) -> bool:
    """If an import that is gone left this conversation staged, remove everything it staged;
    True when it did (False: nothing staged there, or its import is still running)."""
    stage = ImportStage.objects.filter(conversation_id=conversation_id).first()
    if stage is None or not stale_stage(conversation_id):
        return False
    discard_staged(ids=list(ImportStage.objects.filter(holder=stage.holder).values_list("conversation_id",
                                                                                          flat=True)))
    return True
