"""Writes of what frameworks keep beside their sessions (see models.py).

`save_summary` is called inside the transaction that stores the batch the summary
folds, so a summary never describes entries that are not stored, nor misses ones
that are.
"""

import json

from django.db import transaction

from conversations.errors import InvalidInput
from conversations.store import check_meta

from .models import SessionSummary

DATA_MAX_BYTES = 64 * 1024


def save_summary(*, source, data: dict, at) -> SessionSummary:
    """Keep the SDK's folded summary of the main stream `source` (an ImportSource),
    verbatim, stamped with `at`: the stream's own `updated_at`, one clock for both."""
    if not isinstance(data, dict):
        raise InvalidInput("summary must be a JSON object (the SDK's summary data)", field="summary")
    data = check_meta(data)
    if len(json.dumps(data, ensure_ascii=False).encode()) > DATA_MAX_BYTES:
        raise InvalidInput(f"summary is over {DATA_MAX_BYTES} bytes", field="summary")
    with transaction.atomic():
        summary, _ = SessionSummary.objects.update_or_create(
            source_id=source.pk,
            defaults={"namespace": source.namespace, "session_id": source.source_key,
                      "conversation_id": source.conversation_id, "data": data, "updated_at": at},
        )
    return summary
