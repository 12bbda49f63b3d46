"""How conversations leave the database: the core's writes behind every deletion path.

Pruning, deletion requests, a delete button and an import's abandoned staging all
remove conversations through `retention.pruning`, which runs these functions in
short transactions of their own, sized by the clock, so that agents appending
elsewhere never wait long for the write lock (docs/DESIGN.md, invariant 9):

1. `mark_deleting` (or `mark_expired`, for a prune): the conversation is marked
   `deleting`. From then on every read hides it (`Conversation.objects.live()`),
   appends to it are refused (`store`, `rows.reserve_positions`), and the append-only
   guards (migration 0002, and each sub-app's own) let its rows be deleted;
2. `delete_rows`: its rows of one table (messages, checkpoints, a table registered in
   `owned.py`), a batch at a time;
3. `delete_marked_conversations`: the conversation rows, of those still marked only.

A crash between two steps leaves marked conversations: hidden, consistent, and
finished by the next prune. Sub-apps call these and never write the core's tables
themselves (tests/test_core_writes.py).
"""

import time
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Q

from .models import Conversation


def db_ids(ids) -> list:
    """Conversation ids as the database stores them, for a raw IN (…) list."""
    return [Conversation._meta.pk.get_db_prep_value(i, connection) for i in ids]


def mark_deleting(ids: list) -> int:
    """Mark the conversations `ids` for deletion, whatever their age, in one transaction;
    returns how many rows were marked. Marking is what lets their rows be deleted, so no
    row is deleted of a conversation that readers still see or agents still append to."""
    with transaction.atomic():
        return Conversation.objects.filter(pk__in=ids).update(deleting=True)


def mark_expired(ids: list, *, received_before: datetime) -> int:
    """Mark for deletion those of `ids` still received before `received_before` and not
    pinned, or staged by an import, in one transaction; returns how many. Age and pin are
    read again in the marking statement itself: an agent may have appended, or a person
    pinned, since the candidates were chosen, and such a conversation is spared."""
    with transaction.atomic():
        return Conversation.objects.filter(
            Q(received_at__lt=received_before, pinned=False) | Q(staged=True), pk__in=ids, deleting=False
        ).update(deleting=True)


def _key_columns(model) -> str:
    pk = model._meta.pk
    fields = getattr(pk, "fields", None) or [pk]
    return ", ".join(f.column for f in fields)


def delete_rows(model, ids: list, *, limit: int, timing: list | None = None) -> int:
    """Delete up to `limit` rows of `model` (messages, checkpoints, or a table registered in
    `owned.py`: anything with a `conversation_id`) belonging to the conversations `ids`, in
    one transaction; returns how many.

    `ids` must be marked (`mark_deleting`): the append-only guards refuse to delete a
    message or checkpoint of any other conversation, and the whole transaction with it.
    Appends to `timing` how long it held the write lock: the delete and its COMMIT (not the
    wait for the lock). The COMMIT can be most of it: with secure_delete and FTS5's
    secure-delete it writes every page the delete touched."""
    table = model._meta.db_table
    marks = ", ".join(["%s"] * len(ids))
    key = _key_columns(model)
    with transaction.atomic():
        started = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} "
                f"WHERE conversation_id IN ({marks}) LIMIT %s)",
                [*db_ids(ids), limit],
            )
            deleted = cursor.rowcount
    if timing is not None:
        timing.append(time.monotonic() - started)
    return deleted


def delete_marked_conversations(ids: list) -> int:
    """Delete the conversation rows of those of `ids` still marked `deleting`, in one
    transaction; returns how many. Their rows in other tables go first (`delete_rows`): a
    conversation row is the last thing of it to leave, so a crash never orphans a row."""
    marks = ", ".join(["%s"] * len(ids))
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {Conversation._meta.db_table} WHERE id IN ({marks}) AND deleting", db_ids(ids)
            )
            return cursor.rowcount
