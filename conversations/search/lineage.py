"""A fork's copied rows in search: found through the rows they were copied from.

A fork's rows 0..N are its parent's rows 0..N, byte for byte, and the full-text
index holds them once, under the conversation that wrote them (search migration
0004, `BorrowedRows`). Two things follow for readers:

- a hit is a row of the conversation that wrote it, and it stands for the same row
  in every fork (and fork of a fork) that copied it: `holders` names them all, so a
  result shows the row once, with its conversations;
- a search inside one fork looks at its own rows and, for its copied prefix, at its
  source's rows in that prefix (and so on up the chain): `stretches`.
"""

import uuid
from dataclasses import dataclass

from conversations.models import Conversation

from .models import POSITION_SPAN, BorrowedRows, ConversationKey

# A chain of forks deeper than this is walked no further (a fork of a fork of … is
# rare; the bound only keeps a corrupted cycle from looping).
MAX_DEPTH = 64


def borrow(*, conversation_id, source_id, upto: int) -> None:
    """Inside fork_conversation's transaction, before its INSERT … SELECT: rows
    0..`upto` of the new conversation are `source_id`'s, and get no index entries."""
    BorrowedRows.objects.create(conversation_id=conversation_id, source_id=source_id, upto=upto)


def on_fork_copying(sender, *, child_id, parent_id, upto, **kwargs):
    """`conversations.store.fork_copying`'s receiver (connected in SearchConfig.ready)."""
    borrow(conversation_id=child_id, source_id=parent_id, upto=upto)


@dataclass(frozen=True)
class Holder:
    """A conversation that holds a hit's row (the one that wrote it, or a fork's copy)."""

    id: uuid.UUID
    title: str


def holders(rows: list[tuple[uuid.UUID, int]]) -> list[tuple[Holder, ...]]:
    """For each (conversation that wrote the row, position): the live conversations
    holding that row, the writer first, then its forks oldest first."""
    sources = {uuid.UUID(str(cid)) for cid, _ in rows}
    borrowers: dict[uuid.UUID, list[tuple[uuid.UUID, int]]] = {}
    frontier, seen = set(sources), set(sources)
    for _ in range(MAX_DEPTH):
        if not frontier:
            break
        found = BorrowedRows.objects.filter(source_id__in=frontier).values_list("source_id", "conversation_id", "upto")
        frontier = set()
        for source, child, upto in found:
            borrowers.setdefault(source, []).append((child, upto))
            if child not in seen:
                seen.add(child)
                frontier.add(child)
    live = {c.pk: c for c in Conversation.objects.filter(pk__in=seen, deleting=False).only("id", "title", "created_at")}
    result = []
    for cid, position in rows:
        cid = uuid.UUID(str(cid))
        found, stack = [], [cid]
        while stack:
            at = stack.pop()
            if at in found:
                continue
            found.append(at)
            stack += [child for child, upto in borrowers.get(at, ()) if position <= upto]
        forks = sorted((live[c] for c in found[1:] if c in live), key=lambda c: (c.created_at, str(c.pk)))
        ordered = ([live[cid]] if cid in live else []) + forks
        result.append(tuple(Holder(id=c.pk, title=c.title) for c in ordered))
    return result


@dataclass(frozen=True)
class Stretch:
    """Rows of one fork that the index holds under `seq` (a conversation's search key):
    its positions up to `last`, each the same row in the fork at the same position."""

    seq: int
    last: int


def stretches(conversation_id) -> list[Stretch] | None:
    """Where the index holds the rows of `conversation_id`: its own key for the rows it
    wrote, its source's for its copied prefix, and so on up the chain. None when the
    conversation has no search key (it is gone)."""
    chain, at, last = [], conversation_id, POSITION_SPAN - 1
    for _ in range(MAX_DEPTH):
        seq = ConversationKey.objects.filter(conversation_id=at).values_list("seq", flat=True).first()
        if seq is None:
            return None if not chain else chain
        chain.append(Stretch(seq=seq, last=last))
        borrowed = BorrowedRows.objects.filter(conversation_id=at).values_list("source_id", "upto").first()
        if borrowed is None:
            break
        at, last = borrowed[0], min(last, borrowed[1])
    return chain
