"""What a conversation page polls to follow it live: a few figures that move whenever
anything it shows changes (rows, the latest checkpoint, the ledger), and their ETag."""

import hashlib
import json

from django.db.models import Max

from .ledger.models import Action, TaskStateEvent, WorkspaceSnapshot
from .models import Checkpoint, Conversation


def state_of(convo: Conversation) -> dict:
    latest = Checkpoint.objects.latest_for(convo.pk)
    # The ledger's tables only gain rows (a retry is a row of its own): the highest id of
    # each moves whenever anything is recorded.
    marks = [model.objects.of(convo.pk).aggregate(m=Max("id"))["m"] or 0
             for model in (TaskStateEvent, Action, WorkspaceSnapshot)]
    return {
        "next_position": convo.next_position,
        "checkpoint": latest.pk if latest else None,
        "fold": latest.message_position if latest else -1,
        "checkpoints": Checkpoint.objects.of(convo.pk).count(),
        "ledger": "-".join(str(m) for m in marks),
    }


def etag_of(body: dict) -> str:
    return '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20] + '"'
