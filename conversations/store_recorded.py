"""The store's writes of conversations as a transcript recorded them (conversations/store.py).

Imports, sessions and OTLP write conversations with the ids, times, lineage, rows and folds
their transcripts carry; these functions are how. They keep the store's rules: the store
assigns positions (the counter hands them out before the rows go in, so the database's
insert guard holds), rows are encoded once (by the parser, `formats.base.make_row`), a fold
only moves forward, lineage is only ever filled in, and a conversation is received when
memoryui receives it, whatever the transcript says. Each runs in the caller's transaction,
which holds the conversation (`store.lock_conversation`, or a staged import's hold).
"""

from django.db import models, transaction
from django.utils import timezone

from . import calls
from .errors import Conflict, InvalidInput, NotFound
from .formats.base import storable
from .models import Checkpoint, Conversation
from .rows import add_checkpoint, insert_reserved, reserve_positions
from .store import (
    EXTERNAL_ID_MAX,
    NAMESPACE_MAX,
    PARENT_RELATIONS,
    SUBJECT_MAX,
    TITLE_MAX,
    _project_for,
    check_meta,
    clean_text,
    fold_floor,
    lock_conversation,
    record_audit,
)


def create_recorded_conversation(*, id=None, title: str = "", subject: str = "", meta: dict | None = None,
                                 namespace: str = "", external_id: str | None = None, parent_id=None,
                                 parent_relation: str = "", forked_from_position: int | None = None,
                                 created_at=None, last_activity_at=None, pinned: bool = False,
                                 staged: bool = False, project_id: int | None = None) -> Conversation:
    """A new conversation as a transcript had it: its id, its times, its lineage, its
    framework id, with what no database holds replaced (formats.base.storable). Received
    now, never at the transcript's time: retention counts from receipt. `staged` creates it
    hidden and closed to other writers (marked `staged`) for an import that publishes it with
    `publish_staged_conversations`."""
    title = clean_text(" ".join(storable(str(title or "")).split())[:TITLE_MAX], field="title",
                       max_length=TITLE_MAX)
    subject = clean_text(storable(subject), field="subject", max_length=SUBJECT_MAX)
    namespace = clean_text(namespace, field="namespace", max_length=NAMESPACE_MAX)
    if external_id is not None:
        external_id = clean_text(storable(external_id), field="external_id", max_length=EXTERNAL_ID_MAX, required=True)
    meta = check_meta(storable(meta))
    if parent_relation not in ("", *PARENT_RELATIONS):
        raise InvalidInput("parent_relation must be fork or subagent", field="parent_relation")
    now = timezone.now()
    fields = dict(title=title, subject=subject, meta=meta, namespace=namespace, external_id=external_id,
                  parent_id=parent_id, parent_relation=parent_relation if parent_id else "",
                  forked_from_position=forked_from_position if parent_id else None,
                  created_at=created_at or now, last_activity_at=last_activity_at or created_at or now,
                  received_at=now, pinned=bool(pinned), staged=bool(staged))
    if id is not None:
        fields["id"] = id
    fields["project_id"] = project_id if project_id is not None else _project_for(namespace, parent_id)
    return Conversation.objects.create(**fields)


def set_recorded(conversation_id, **values) -> None:
    """Give a conversation the title, meta or times its transcript ends up with (an import's
    last step); the title and meta are checked as `create_recorded_conversation` does."""
    unknown = set(values) - {"title", "meta", "created_at", "last_activity_at"}
    if unknown:
        raise InvalidInput(f"{', '.join(sorted(unknown))} cannot be set on a conversation", field="conversation")
    if "meta" in values:
        values["meta"] = check_meta(storable(values["meta"]))
    if "title" in values:
        title = " ".join(storable(str(values["title"] or "")).split())[:TITLE_MAX]
        values["title"] = clean_text(title, field="title", max_length=TITLE_MAX)
    if values:
        Conversation.objects.filter(pk=conversation_id).update(**values)


def publish_staged_conversations(ids: list) -> None:
    """Staged conversations become visible, received now (their import is complete from this moment)."""
    Conversation.objects.filter(pk__in=ids).update(staged=False, received_at=timezone.now())


def append_rows(*, conversation_id, rows, expected_position: int, staged: bool = False,
                last_activity_at=None, received_at=None) -> int:
    """Reserve positions for encoded rows (kind, text, time) and insert them there, chained;
    returns the next position. The counter must hand out `expected_position` (where the
    caller's parser placed the rows): another writer that appended meanwhile makes this a
    Conflict, and a conversation being deleted a NotFound; the caller rolls back."""
    start = reserve_positions(conversation_id=conversation_id, count=len(rows), last_activity_at=last_activity_at,
                              received_at=received_at, staged=staged)
    if start is None:
        Conversation.objects.get_live(conversation_id)  # being deleted meanwhile: NotFound
        raise NotFound(f"conversation {conversation_id} not found", field="conversation")
    if start != expected_position:
        raise Conflict(f"the conversation has {start} rows, the import expected {expected_position}: another "
                       "writer appended meanwhile; import again", code="position_conflict", field="conversation")
    insert_reserved(conversation_id=conversation_id, start=start, rows=rows)
    return start + len(rows)


def add_recorded_checkpoint(*, conversation_id, position: int, summary: str, created_at=None,
                            created_by: str = "", exact: bool = False) -> Checkpoint:
    """A fold as a transcript recorded it (its time, its author). It only moves the fold
    forward; inside a call block it moves to the nearest position before
    (conversations/calls.py), unless `exact`. The caller checked that `position` is written."""
    floor = fold_floor(conversation_id, position)
    if "\x00" in summary:
        summary = summary.replace("\x00", "\ufffd")
    if not exact:
        position, summary = calls.placed_fold(conversation_id, position, summary, floor=floor)
    return add_checkpoint(conversation_id=conversation_id, message_position=position, summary=summary,
                          created_at=created_at or timezone.now(), created_by=storable(str(created_by))[:200])


def link_subagent(*, conversation_id, parent_id, position: int | None, actor: str) -> bool:
    """Give a subagent that came before its session (or before its call) its link.

    Lineage is append-only: only an empty column is filled (no parent → this parent;
    this parent with no position → the position), never a link changed; the link is
    recorded as its own audit event in the same transaction. True when something was filled."""
    with transaction.atomic():
        conversation = lock_conversation(conversation_id)
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
