"""What deletions keep of the chains they end (conversations/chain.py, chain_verify.py).

- `record_heads`: before a prune or a deletion request deletes a conversation's rows,
  its final chain heads (the last message's and the last checkpoint's chain hash)
  go into the audit log's own chain, so what was deleted stays pinned by the log.
- `keep_commitments`: a deletion request also keeps every erased row's commitment
  and chain hash (ErasedRow), without content or salt: the erased conversation's
  chain still verifies, and reports as erased by that receipt, never as tampered.

Both run in short transactions (`in_turn`) between the marking and the deletes:
the conversations are marked `deleting`, so no append changes them meanwhile.
"""

from django.db import connection, transaction

from conversations import projects, store
from conversations.chain_verify import chained_tables
from conversations.models import Checkpoint, Conversation, Message

from .lease import in_turn
from .models import ErasedRow

HEADS_PER_EVENT = 200
COPY_BATCH = 5000

_MSG, _CKPT, _CONV = (m._meta.db_table for m in (Message, Checkpoint, Conversation))
_ERASED = ErasedRow._meta.db_table


def _db_id(value):
    return Conversation._meta.pk.get_db_prep_value(value, connection)


def heads(ids: list) -> list[dict]:
    """Each conversation's last message position and chain hash, and its last checkpoint's chain hash."""
    found = []
    with connection.cursor() as cursor:
        for i in range(0, len(ids), HEADS_PER_EVENT):
            chunk = ids[i:i + HEADS_PER_EVENT]
            marks = ", ".join(["%s"] * len(chunk))
            cursor.execute(
                f"SELECT c.id, c.next_position, m.chain_hash, (SELECT k.chain_hash FROM {_CKPT} k "
                f"WHERE k.conversation_id = c.id ORDER BY k.id DESC LIMIT 1) FROM {_CONV} c "
                f"LEFT JOIN {_MSG} m ON m.conversation_id = c.id AND m.position = c.next_position - 1 "
                f"WHERE c.id IN ({marks}) ORDER BY c.id", [_db_id(c) for c in chunk])
            for cid, next_position, message_head, checkpoint_head in cursor.fetchall():
                found.append({"conversation_id": str(Conversation._meta.pk.to_python(cid)),
                              "position": next_position - 1,
                              "chain_hash": bytes(message_head).hex() if message_head is not None else None,
                              "checkpoint_chain_hash": bytes(checkpoint_head).hex() if checkpoint_head else None})
    return found


def record_heads(*, ids: list, actor: str, reason: str, target_type: str, target_id: str) -> int:
    """Write the conversations' final heads into the audit chain ("conversation.heads" events
    of up to HEADS_PER_EVENT each) before they are deleted; returns how many events."""
    found = heads(list(ids))
    events = 0
    for i in range(0, len(found), HEADS_PER_EVENT):
        part = found[i:i + HEADS_PER_EVENT]

        def write(part=part):
            store.record_audit(actor=actor, action="conversation.heads", target_type=target_type,
                               target_id=target_id, detail={"reason": reason, "heads": part})

        in_turn(write)
        events += 1
    return events


def keep_commitments(*, receipt_id, ids: list) -> int:
    """Copy every chained row's commitment and chain hash (messages, checkpoints, ledger) of the marked conversations
    into ErasedRow under the receipt, in batches; returns how many rows were kept."""
    kept = 0
    for cid in ids:
        ref = str(cid)
        tables = [(_MSG, "message", "position")] + [(m._meta.db_table, t, "id") for _n, t, m in chained_tables()]
        for table, record_type, key in tables:
            after = -1
            while True:
                def copy(after=after, table=table, record_type=record_type, key=key, ref=ref, cid=cid):
                    # Kept before their receipt exists, whose project the policies would read.
                    with projects.unfenced(), transaction.atomic(), connection.cursor() as cursor:
                        cursor.execute(
                            f"INSERT INTO {_ERASED} (receipt_id, conversation_ref, record_type, position, commitment, "
                            f"chain_hash) SELECT %s, %s, %s, {key}, commitment, chain_hash FROM {table} "
                            f"WHERE conversation_id = %s AND {key} > %s ORDER BY {key} LIMIT %s",
                            [ErasedRow._meta.get_field("receipt_id").get_db_prep_value(receipt_id, connection),
                             ref, record_type, _db_id(cid), after, COPY_BATCH])
                        copied = cursor.rowcount
                        cursor.execute(f"SELECT MAX(position) FROM {_ERASED} WHERE receipt_id = %s AND "
                                       "conversation_ref = %s AND record_type = %s",
                                       [ErasedRow._meta.get_field("receipt_id").get_db_prep_value(
                                           receipt_id, connection), ref, record_type])
                        return copied, cursor.fetchone()[0]

                copied, after = in_turn(copy)
                kept += copied
                if copied < COPY_BATCH:
                    break
    return kept
