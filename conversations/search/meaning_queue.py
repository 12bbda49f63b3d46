"""The queue of messages waiting for their vectors, and the job that empties it.

Search migration 0007's insert trigger queues every new row (its index id) in the
append's transaction; the background embedder (conversations/embeddings/worker.py) calls
`JOB.run` to embed a batch: the rows' index text (what full-text search holds, the same
function), their vectors and binary codes written and their queue entries removed in one
transaction. A row deleted while queued (a prune, an erasure) leaves an entry with no row:
it is dropped. The same job writes again, a batch at a time, every vector a former model
made: as a new row (a new `id`), so every server's in-memory codes take it in.
"""

from django.db import connection, transaction

from conversations import plugins
from conversations.embeddings import vectors as vec
from conversations.embeddings.models import EmbeddingModel
from conversations.models import Conversation, Message

from .highlight import index_text
from .models import POSITION_SPAN, ConversationKey, MessageVector

PENDING = "search_meaning_pending"
_KEY = ConversationKey._meta.db_table
_MSG = Message._meta.db_table
_VEC = MessageVector._meta.db_table


def enqueue_rows(conversation_id, first: int, last: int) -> None:
    """Queue rows first..last of a conversation (a fork's copies adopted ahead of a deletion)."""
    cid = Conversation._meta.pk.get_db_prep_value(conversation_id, connection)
    conflict = "" if connection.vendor == "sqlite" else " ON CONFLICT DO NOTHING"
    ignore = "OR IGNORE " if connection.vendor == "sqlite" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT {ignore}INTO {PENDING}(id) SELECT k.seq * {POSITION_SPAN} + m.position FROM {_MSG} m "
            f"JOIN {_KEY} k ON k.conversation_id = m.conversation_id WHERE m.conversation_id = %s "
            f"AND m.position BETWEEN %s AND %s AND m.position < {POSITION_SPAN}{conflict}", [cid, first, last])


def waiting_rows(limit: int, where: str = "", params=()) -> list[tuple]:
    """Up to `limit` queued rows, oldest conversation first: (index id, conversation id,
    stored content or None when the row is gone). `where` narrows them (search's fence)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT p.id, k.conversation_id, m.content FROM {PENDING} p "
            f"LEFT JOIN {_KEY} k ON k.seq = p.id / {POSITION_SPAN} "
            f"LEFT JOIN {_MSG} m ON m.conversation_id = k.conversation_id AND m.position = p.id & {POSITION_SPAN - 1} "
            f"{where} ORDER BY p.id LIMIT {int(limit)}", list(params))
        return cursor.fetchall()


def waiting() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {PENDING}")
        return cursor.fetchone()[0]


def _not_being_deleted(rows: list[tuple]) -> list[tuple]:
    """The rows whose conversation is not marked `deleting`, read in the writing transaction.

    Rows are read and embedded before that transaction (an endpoint embedder may take
    seconds); a prune or a deletion request that marked their conversation since then wins,
    or its vectors would be written back after it removed them. On SQLite the write lock
    (BEGIN IMMEDIATE) keeps the mark out until this commits; on PostgreSQL FOR SHARE does."""
    ids = sorted({cid for _, cid, _ in rows}, key=str)
    if not ids:
        return []
    lock = "" if connection.vendor == "sqlite" else " FOR SHARE"
    table = Conversation._meta.db_table
    prep = Conversation._meta.pk.get_db_prep_value
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {table} WHERE deleting = %s AND id IN ({', '.join(['%s'] * len(ids))}){lock}",
                       [False, *(prep(cid, connection) for cid in ids)])
        live = {str(Conversation._meta.pk.to_python(pk)) for (pk,) in cursor.fetchall()}
    return [r for r in rows if str(Conversation._meta.pk.to_python(r[1])) in live]


def _embedded(embedder, rows: list[tuple]) -> list:
    """The vectors of (index id, conversation id, content) rows: before any transaction, so an
    endpoint embedder's seconds hold no lock."""
    return list(embedder.embed([index_text(content) for _, _, content in rows])) if rows else []


def _store(current: int, rows: list[tuple], found: list) -> None:
    """Write the vectors of `rows` (in the caller's transaction) over any former ones, for the
    rows whose conversation is still not being deleted."""
    kept = _not_being_deleted(rows)
    if len(kept) < len(rows):
        live = {r[0] for r in kept}
        found = [v for r, v in zip(rows, found, strict=True) if r[0] in live]
        rows = kept
    if not rows:
        return
    codes = vec.binary_codes(found)
    ids = [r[0] for r in rows]
    MessageVector.objects.filter(msg__in=ids).delete()
    # One prepared statement for the batch: bulk_create builds each of its 500 values through the
    # ORM's compiler, which cost more than embedding the texts.
    uuid_of = MessageVector._meta.get_field("conversation_id")
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {_VEC} (msg, conversation_id, model_id, vector, code) VALUES (%s, %s, %s, %s, %s)",
            [(msg, uuid_of.get_db_prep_value(cid, connection), current, vec.to_bytes(v), c.tobytes())
             for (msg, cid, _), v, c in zip(rows, found, codes, strict=True)])


def _run(embedder, current: int, limit: int) -> int:
    done = 0
    rows = waiting_rows(limit)
    if rows:
        live = [r for r in rows if r[2] is not None]
        found = _embedded(embedder, live)
        with transaction.atomic():
            if live:
                _store(current, live, found)
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {PENDING} WHERE id IN ({', '.join(['%s'] * len(rows))})",
                               [r[0] for r in rows])
        done += len(rows)
    if done < limit:
        former = list(EmbeddingModel.objects.exclude(pk=current).values_list("id", flat=True))
        # Through the model index (a NOT-equal would read every vector on each batch).
        stale = [] if not former else list(MessageVector.objects.filter(model_id__in=former).order_by("id")
                     .values_list("msg", "conversation_id")[:limit - done])
        if stale:
            contents = _contents([m for m, _ in stale])
            again = [(m, cid, contents[m]) for m, cid in stale if m in contents]
            found = _embedded(embedder, again)
            with transaction.atomic():
                gone = [m for m, _ in stale if m not in contents]
                MessageVector.objects.filter(msg__in=gone).delete()
                _store(current, again, found)
            done += len(stale)
    return done


def _contents(msgs: list[int]) -> dict[int, str]:
    """index id → stored content, for the ids whose rows exist (one statement a conversation)."""
    by_seq: dict[int, list[int]] = {}
    for msg in msgs:
        by_seq.setdefault(msg // POSITION_SPAN, []).append(msg % POSITION_SPAN)
    found = {}
    with connection.cursor() as cursor:
        for seq, positions in by_seq.items():
            cursor.execute(
                f"SELECT m.position, m.content FROM {_KEY} k JOIN {_MSG} m ON m.conversation_id = k.conversation_id "
                f"WHERE k.seq = %s AND m.position IN ({', '.join(['%s'] * len(positions))})", [seq, *positions])
            found.update({seq * POSITION_SPAN + position: content for position, content in cursor.fetchall()})
    return found


def _counts(current: int) -> dict:
    total = MessageVector.objects.count()
    now = MessageVector.objects.filter(model_id=current).count()
    return {"current": now, "stale": total - now, "waiting": waiting()}


JOB = plugins.EmbeddingJob(name="messages", label="Messages", counts=_counts, run=_run)
