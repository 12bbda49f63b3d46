"""A conversation as JSON: each field's encoding written once, for the API's answers, the
exports (and the proof bundles built on them) and memoryui's own transcript format.

Each reader picks the fields it shows, in its own order, and how it writes a moment: the
API in UTC with a `Z` (`params.iso`), the exports and the transcript format with Python's
`+00:00`, as every export made so far did (a signed export must read the same again).
"""

from collections.abc import Callable

from .models import Conversation


def _offset(value) -> str | None:
    return value.isoformat() if value else None


def lineage(conversation: Conversation) -> list[dict]:
    """Its ancestors, the root first: what a fork was forked from, and where."""
    return [{"id": str(a.pk), "title": a.title, "forked_from_position": a.forked_from_position}
            for a in conversation.lineage()]


FIELDS: dict[str, Callable[[Conversation, Callable], object]] = {
    "id": lambda c, moment: str(c.pk),
    "title": lambda c, moment: c.title,
    "subject": lambda c, moment: c.subject,
    "meta": lambda c, moment: c.meta,
    "created_at": lambda c, moment: moment(c.created_at),
    "last_activity_at": lambda c, moment: moment(c.last_activity_at),
    "received_at": lambda c, moment: moment(c.received_at),
    "pinned": lambda c, moment: c.pinned,
    "message_count": lambda c, moment: c.next_position,
    "namespace": lambda c, moment: c.namespace,
    "external_id": lambda c, moment: c.external_id,
    "parent_id": lambda c, moment: str(c.parent_id) if c.parent_id else None,
    "forked_from_position": lambda c, moment: c.forked_from_position,
    "parent_relation": lambda c, moment: c.parent_relation,
    "parent_missing": lambda c, moment: c.parent_missing,
    "lineage": lambda c, moment: lineage(c),
}


def conversation_fields(conversation: Conversation, names, *, moment: Callable = _offset) -> dict:
    """`names` of FIELDS, in that order, each encoded as every reader encodes it."""
    return {name: FIELDS[name](conversation, moment) for name in names}
