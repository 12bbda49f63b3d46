"""The two read paths over the log: the full record and the active view.

Both read in keyset pages (`after` a position, up to `limit` rows), so page N of
a million-message conversation costs what page 1 costs. A stored row that no
longer decodes is logged and reported in `skipped`, never raised: one bad row
must not make a conversation unreadable.
"""

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime

from . import keyset
from .errors import InvalidInput, InvalidMessage, PositionOutOfRange
from .message_schema import decode_message
from .models import Checkpoint, Conversation, Message

log = logging.getLogger("memoryui.reads")

MAX_PAGE = 1000


@dataclass(frozen=True)
class StoredMessage:
    position: int
    kind: str
    created_at: datetime
    raw: str  # the stored text, byte for byte
    message: object | None  # the decoded model; None when the row no longer decodes
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.message is not None

    def as_json(self):
        """The stored text parsed as JSON: what an agent re-sends, unchanged."""
        return json.loads(self.raw)


@dataclass
class Page:
    items: list[StoredMessage]
    skipped: list[int] = field(default_factory=list)
    # The position to pass as `after` for the next page; None at the end.
    next_after: int | None = None


@dataclass
class ActiveView:
    checkpoint: Checkpoint | None
    page: Page
    # The position the page's rows follow: the fold, or the caller's `after` when later.
    start: int

    @property
    def handoff(self) -> dict | None:
        """The checkpoint's summary as the one message that stands in for the fold."""
        if self.checkpoint is None:
            return None
        return handoff_message(self.checkpoint)


def handoff_message(checkpoint: Checkpoint) -> dict:
    return {
        "kind": "system",
        "content": checkpoint.summary,
        "meta": {"checkpoint": {"position": checkpoint.message_position}},
    }


def decode_row(conversation_id, position: int, kind: str, created_at, raw: str) -> StoredMessage:
    try:
        model = decode_message(raw)
        return StoredMessage(position, kind, created_at, raw, model)
    except InvalidMessage as exc:
        log.warning(
            "conversation %s position %s no longer decodes and is skipped: %s",
            conversation_id,
            position,
            exc.message,
        )
        return StoredMessage(position, kind, created_at, raw, None, exc.message)


def _check_page_args(after, limit):
    if isinstance(after, bool) or not isinstance(after, int) or after < -1:
        raise InvalidInput("after must be an integer position, -1 or more", field="after")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInput("limit must be a positive integer", field="limit")


def read_rows(conversation_id, *, after: int = -1, limit: int | None = None, until: int | None = None,
              kinds=None, include_broken: bool = False, errors_only: bool = False, tool: str | None = None,
              descending: bool = False) -> Page:
    """Rows after `after` (and up to `until`), decoded.

    `errors_only`: tool results marked is_error; `tool`: calls of and results from
    that tool (matched in the stored encoding, which is canonical). `descending`
    reads from `until` down to `after`; `next_after` is then the next `until`.

    Broken rows are listed in `skipped`; with include_broken they are also kept
    in `items` (marked not ok) for the audit UI.
    """
    _check_page_args(after, limit)
    qs = Message.objects.page(conversation_id, after=after, until=until)
    if kinds:
        qs = qs.filter(kind__in=list(kinds))
    if errors_only:
        qs = qs.filter(kind="tool", content__contains='"is_error":true')
    if tool:
        name = '"name":' + json.dumps(tool, ensure_ascii=False)
        qs = qs.filter(kind__in=("tool", "assistant"), content__contains=name)
    if descending:
        qs = qs.order_by("-position")
    qs = qs.values_list("position", "kind", "created_at", "content")
    rows, more = (list(qs), False) if limit is None else keyset.take(qs, limit)
    items, skipped = [], []
    for position, kind, created_at, raw in rows:
        item = decode_row(conversation_id, position, kind, created_at, raw)
        if not item.ok:
            skipped.append(position)
            if not include_broken:
                continue
        items.append(item)
    next_after = rows[-1][0] if more and rows else None
    return Page(items=items, skipped=skipped, next_after=next_after)


def list_messages(conversation_id, *, after: int = -1, limit: int | None = None, **kw) -> Page:
    """The full record (or a keyset page of it)."""
    conversation = Conversation.objects.get_live(conversation_id)
    return read_rows(conversation.pk, after=after, limit=limit, **kw)


def list_active(conversation_id, *, after: int | None = None, limit: int | None = None, **kw) -> ActiveView:
    """What the model receives next turn: the latest checkpoint's summary as one
    handoff message, then the rows after its position. No checkpoint: everything."""
    conversation = Conversation.objects.get_live(conversation_id)
    return active_from(conversation.pk, Checkpoint.objects.latest_for(conversation.pk), after=after, limit=limit,
                       **kw)


def active_from(conversation_id, checkpoint, *, after: int | None = None, **kw) -> ActiveView:
    """The active view over `checkpoint` (the latest that counts, or None), read by the
    caller: its summary, then the rows after its fold (or after `after`, if later)."""
    fold = checkpoint.message_position if checkpoint else -1
    start = fold if after is None else max(after, fold)
    return ActiveView(checkpoint, read_rows(conversation_id, after=start, **kw), start)


def active_before(conversation_id, position: int, *, limit: int | None = None, after: int | None = None,
                  **kw) -> ActiveView:
    """The active view as it stood just before `position` was written: the latest
    checkpoint created before that row, then the rows between its fold and the row."""
    conversation = Conversation.objects.get_live(conversation_id)
    row = Message.objects.filter(conversation=conversation, position=position).values("created_at").first()
    if row is None:
        raise PositionOutOfRange(f"position {position} does not exist in this conversation", field="position")
    checkpoint = Checkpoint.objects.latest_for(
        conversation.pk, at_or_before=position - 1, created_before=row["created_at"]
    )
    return active_from(conversation.pk, checkpoint, after=after, until=position - 1, limit=limit, **kw)
