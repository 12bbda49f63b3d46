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

import importlib
import uuid
from dataclasses import dataclass

from django.db import connection, transaction

from conversations.models import Conversation, Message
from conversations.rows import set_search_vectors

from . import meaning_queue
from .models import POSITION_SPAN, BorrowedRows, ConversationKey, project_token_sql

_initial = importlib.import_module("conversations.search.migrations.0001_initial")
_DATES = importlib.import_module("conversations.search.migrations.0005_dates_of_indexed_rows").DATES
_MSG, _KEY, _FTS = Message._meta.db_table, ConversationKey._meta.db_table, _initial.FTS

# A chain of forks deeper than this is walked no further (a fork of a fork of … is
# rare; the bound only keeps a corrupted cycle from looping).
MAX_DEPTH = 64


def borrow(*, conversation_id, source_id, upto: int) -> None:
    """Inside fork_conversation's transaction, before its INSERT … SELECT: rows
    0..`upto` of the new conversation are `source_id`'s, and get no index entries."""
    BorrowedRows.objects.create(conversation_id=conversation_id, source_id=source_id, upto=upto)


def on_fork_copying(sender, *, child_id, parent_id, upto, **kwargs):
    """`plugins.fork_copying`'s receiver (registered in SearchConfig.ready)."""
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
    live = {c.pk: c for c in Conversation.objects.live().filter(pk__in=seen).only("id", "title", "created_at")}
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


# Copied rows tokenised per transaction when a source is about to be deleted: ~15 ms of
# SQLite's write lock, so appends of other agents wait no longer than that.
ADOPT_BATCH = 2000


def adopt_ahead(conversation_ids, *, batch: int = ADOPT_BATCH, run=lambda step: step()) -> int:
    """Before `conversation_ids` are marked `deleting` (prune, erasure): their forks'
    copies get their own index entries a batch per transaction, from the top of each
    borrowed prefix down; returns how many rows were tokenised.

    Marking does the same in its own transaction (search migration 0004's trigger),
    which for a fork of 200,000 rows would hold SQLite's write lock for seconds
    (docs/DESIGN.md, invariant 9: maintenance never stalls writers past a second). Done here
    first, marking finds nothing left to do, unless a fork was made in between.
    Forks that are themselves in `conversation_ids` are left alone: their rows go too.
    `run` runs each batch's transaction (retention's `in_turn` waits for the write lock
    politely).
    """
    going = {uuid.UUID(str(c)) for c in conversation_ids}
    done = 0

    def step(source):
        with transaction.atomic():
            return _adopt_step(source, going, batch)

    for source in going:
        while (count := run(lambda source=source: step(source))) is not None:
            done += count
    return done


def _adopt_step(source: uuid.UUID, going: set, batch: int) -> int | None:
    """One batch of one borrower of `source`; None when no borrower outside `going` is left."""
    borrowers = BorrowedRows.objects.for_update().filter(source_id=source).exclude(conversation_id__in=going)
    borrower = borrowers.order_by("conversation_id").first()
    if borrower is None:
        return None
    own = BorrowedRows.objects.filter(conversation_id=source).first()
    floor = own.upto if own is not None else -1  # the source's rows up to here are its source's
    low = max(floor + 1, borrower.upto - batch + 1)
    count = max(0, borrower.upto - low + 1)
    if count:
        _index_rows(borrower.conversation_id, low, borrower.upto)
    if low > floor + 1:  # more of the source's own rows to go, next transaction
        borrower.upto = low - 1
        borrower.save(update_fields=["upto"])
    elif own is not None:  # the rest is the source's source's: found through it from now on
        borrower.source_id, borrower.upto = own.source_id, min(borrower.upto, floor)
        borrower.save(update_fields=["source_id", "upto"])
    else:
        borrower.delete()
    return count


def _index_rows(conversation_id, first: int, last: int) -> None:
    """Give rows first..last of `conversation_id` their own index entries (they had none)."""
    if connection.vendor == "sqlite":
        cid = Conversation._meta.pk.get_db_prep_value(conversation_id, connection)
        span = POSITION_SPAN
        rows = (f"FROM {_MSG} m JOIN {_KEY} k ON k.conversation_id = m.conversation_id "
                f"WHERE m.conversation_id = %s AND m.position BETWEEN %s AND %s AND m.position < {span}")
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {_FTS}(rowid, body, project) SELECT k.seq * {span} + m.position, "
                           f"{_initial.sqlite_text('m.content')}, {project_token_sql('k')} {rows}", [cid, first, last])
            cursor.execute(f"INSERT INTO {_DATES}(created_at, id) SELECT m.created_at, k.seq * {span} + m.position "
                           f"{rows}", [cid, first, last])
    else:  # the words go in the core's message table, through the core's one statement for them
        set_search_vectors(conversation_id=conversation_id, first=first, last=last)
    # Their vectors were the source's too: queued for the background embedder (migration 0007).
    meaning_queue.enqueue_rows(conversation_id, first, last)
