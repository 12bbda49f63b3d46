"""What a conversation page polls to follow it live: a few figures that move whenever
anything it shows changes (rows, the latest checkpoint, the ledger), and their ETag."""

import hashlib
import json

from . import plugins
from .models import Checkpoint, Conversation


def state_of(convo: Conversation, *, latest=..., checkpoints: int | None = None) -> dict:
    """The figures; `latest` (the latest checkpoint, or None) and `checkpoints` (their count)
    are read here unless the caller (the conversation page) has read them already."""
    if latest is ...:
        latest = Checkpoint.objects.latest_for(convo.pk)
    if checkpoints is None:
        checkpoints = Checkpoint.objects.of(convo.pk).count()
    return {
        "next_position": convo.next_position,
        "checkpoint": latest.pk if latest else None,
        "fold": latest.message_position if latest else -1,
        "checkpoints": checkpoints,
        "ledger": plugins.ledger_mark(convo.pk),
    }


def etag_of(body: dict) -> str:
    return '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20] + '"'
