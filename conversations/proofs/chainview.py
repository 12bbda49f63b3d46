"""The one place the proofs read the conversations' hash chains (conversations/chain.py).

A signed head covers a conversation's message chain (its last position and chain hash),
its checkpoint chain and its three ledger chains (task state, actions, workspace
snapshots: how many rows, and the last one's chain hash), so that no message, fold
summary or ledger entry can be changed, dropped or reordered offline without breaking a
signature.
"""

from conversations import chain
from conversations.ledger.models import Action, TaskStateEvent, WorkspaceSnapshot
from conversations.models import Checkpoint, Conversation, Message


def _hex(value) -> str:
    return bytes(value).hex() if value is not None else ""


def head_at(conversation: Conversation, upto: int | None) -> dict:
    """The chain heads as they stand at message position `upto` (default: the last row).
    Position -1 and the genesis hash for a conversation without messages."""
    last = conversation.next_position - 1 if upto is None else min(upto, conversation.next_position - 1)
    chain_hash = chain.GENESIS.hex()
    if last >= 0:
        found = (Message.objects.filter(conversation_id=conversation.pk, position=last)
                 .values_list("chain_hash", flat=True).first())
        chain_hash = _hex(found)
    checkpoints = Checkpoint.objects.filter(conversation_id=conversation.pk)
    latest = checkpoints.order_by("-id").values_list("chain_hash", flat=True).first()
    return {"position": last, "chain_hash": chain_hash, "checkpoints": checkpoints.count(),
            "checkpoint_chain_hash": _hex(latest) if latest is not None else chain.GENESIS.hex(),
            "ledger_chains": ledger_heads(conversation.pk)}


def ledger_heads(conversation_id) -> dict:
    """Each ledger chain of the conversation: how many rows, and the last one's chain hash."""
    out = {}
    for chain_type, model in (("state", TaskStateEvent), ("action", Action), ("snapshot", WorkspaceSnapshot)):
        rows = model.objects.filter(conversation_id=conversation_id)
        latest = rows.order_by("-id").values_list("chain_hash", flat=True).first()
        out[chain_type] = {"rows": rows.count(),
                           "chain_hash": _hex(latest) if latest is not None else chain.GENESIS.hex()}
    return out
