"""Writes of the importer: conversations with their original times, rows in bulk,
checkpoints with their original times, and the original entries.

These keep the rules of `conversations.store`: the store assigns positions (the
counter is bumped with UPDATE … RETURNING before the rows are inserted, so the
database's insert guard holds), a row is validated and encoded once (by
`conversations.schema.encode_message`, in the parser: `formats.base.make_row`),
checkpoints only move the fold forward, and each function runs in one
transaction. The importer nests them in one transaction per conversation.
"""

from django.db import connection, transaction
from django.utils import timezone

from conversations.errors import CheckpointBeforeLatest, Conflict, InvalidInput
from conversations.formats.base import Entry, Row
from conversations.models import Checkpoint, Conversation, Message
from conversations.schema import KINDS, max_message_bytes
from conversations.store import SUBJECT_MAX, TITLE_MAX, _check_meta, _clean_text, _lock_conversation, record_audit

from .models import ImportSource, SourceEntry

_MSG = Message._meta.db_table
_CONV = Conversation._meta.db_table
_ENTRY = SourceEntry._meta.db_table
BATCH = 1000


def _db_uuid(value):
    return Conversation._meta.pk.get_db_prep_value(value, connection)


def create_imported_conversation(*, id=None, title: str = "", subject: str = "", meta: dict | None = None,
                                 namespace: str = "", external_id: str | None = None, parent_id=None,
                                 parent_relation: str = "", forked_from_position: int | None = None,
                                 created_at=None, last_activity_at=None, pinned: bool = False) -> Conversation:
    """A new conversation as the transcript had it: its times, its lineage, its framework id."""
    title = _clean_text(" ".join(str(title or "").split())[:TITLE_MAX], field="title", max_length=TITLE_MAX)
    subject = _clean_text(subject, field="subject", max_length=SUBJECT_MAX)
    namespace = _clean_text(namespace, field="namespace", max_length=200)
    if external_id is not None:
        external_id = _clean_text(external_id, field="external_id", max_length=200, required=True)
    meta = _check_meta(meta)
    if parent_relation not in ("", "fork", "subagent"):
        raise InvalidInput("parent_relation must be fork or subagent", field="parent_relation")
    now = timezone.now()
    fields = dict(title=title, subject=subject, meta=meta, namespace=namespace, external_id=external_id,
                  parent_id=parent_id, parent_relation=parent_relation if parent_id else "",
                  forked_from_position=forked_from_position if parent_id else None,
                  created_at=created_at or now, last_activity_at=last_activity_at or created_at or now,
                  pinned=bool(pinned))
    if id is not None:
        fields["id"] = id
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
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {_CONV} SET next_position = next_position + %s, last_activity_at = %s "
                "WHERE id = %s AND NOT deleting RETURNING next_position",
                [len(rows), connection.ops.adapt_datetimefield_value(max(last_at, conversation.last_activity_at)),
                 _db_uuid(conversation.pk)],
            )
            end = cursor.fetchone()[0]
            start = end - len(rows)
            cid = _db_uuid(conversation.pk)
            adapt = connection.ops.adapt_datetimefield_value
            params = [(cid, start + i, row.kind, row.text, adapt(row.at or now)) for i, row in enumerate(rows)]
            for i in range(0, len(params), BATCH):
                cursor.executemany(
                    f"INSERT INTO {_MSG} (conversation_id, position, kind, content, created_at) "
                    "VALUES (%s, %s, %s, %s, %s)", params[i:i + BATCH])
    return end


def checkpoint_imported(*, conversation_id, position: int, summary: str, created_at=None,
                        created_by: str = "") -> Checkpoint:
    """A fold as the transcript recorded it (its time, its author)."""
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
        return Checkpoint.objects.create(conversation=conversation, message_position=position, summary=summary,
                                         created_at=created_at or timezone.now(), created_by=str(created_by)[:200])


def retitle(*, conversation_id, title: str) -> None:
    """Name an imported stream's conversation (its placeholder title, or a title entry)."""
    title = _clean_text(" ".join(str(title).split())[:TITLE_MAX], field="title", max_length=TITLE_MAX)
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(title=title)


def get_or_create_source(*, format: str, namespace: str, source_key: str, conversation_id) -> tuple[ImportSource, bool]:
    with transaction.atomic():
        return ImportSource.objects.get_or_create(
            format=format, namespace=namespace, source_key=source_key[:300],
            defaults={"conversation_id": conversation_id},
        )


def add_entries(*, source: ImportSource, entries: list[Entry], conversation_ids: dict[str, str]) -> int:
    """Keep the original entries beside the rows, each with where it was placed."""
    if not entries:
        return 0
    default = conversation_ids.get("main") or str(source.conversation_id)
    params = [
        (source.pk, e.seq, _db_uuid(conversation_ids.get(e.conv, default)), e.position, e.line,
         (e.uuid or None) and e.uuid[:200], (e.parent_uuid or None) and e.parent_uuid[:200],
         (e.group or None) and e.group[:200], e.real, e.raw)
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
