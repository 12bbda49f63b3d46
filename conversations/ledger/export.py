"""The reconciliation export: the actions ledger across conversations, CSV or JSONL.

For the people who check money against the ledger. Rows are read in keyset
batches by id and written as they come, so a ledger of millions exports in the
memory of one batch. An entry a fork carried over is the same event as its
original and is written once (`ActionQuerySet.for_reconciliation`).

Used by the API and the page; nothing here knows about HTTP.
"""

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from conversations.errors import InvalidInput

from .models import ACTION_STATUSES, Action

BATCH = 2000
FLUSH_CHARS = 64 * 1024
FORMATS = {
    "csv": ("text/csv; charset=utf-8", "csv"),
    "jsonl": ("application/x-ndjson; charset=utf-8", "jsonl"),
}
COLUMNS = ("id", "created_at", "namespace", "conversation_id", "position", "idempotency_key", "name", "status",
           "original_id", "inherited_from", "actor", "arguments", "result")
# A spreadsheet runs a cell that starts with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass
class ReconciliationStream:
    chunks: Iterator[str]
    content_type: str
    filename: str
    filters: dict = field(default_factory=dict)


def reconciliation_stream(fmt: str, *, name: str | None = None, namespace: str | None = None,
                          status: str | None = None, since: datetime | None = None,
                          until: datetime | None = None) -> ReconciliationStream:
    """Checks the filters at once (InvalidInput naming the field), before anything streams."""
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown export format {str(fmt)[:40]!r}; expected one of {', '.join(FORMATS)}",
                           field="format")
    if status is not None and status not in ACTION_STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(ACTION_STATUSES)}", field="status")
    if since is not None and until is not None and since >= until:
        raise InvalidInput("since must be before until", field="until")
    qs = Action.objects.for_reconciliation()
    filters = {}
    if name:
        qs, filters["name"] = qs.filter(name=name), name
    if namespace is not None:
        qs, filters["namespace"] = qs.filter(namespace=namespace), namespace
    if status:
        qs, filters["status"] = qs.filter(status=status), status
    if since is not None:
        qs, filters["since"] = qs.filter(created_at__gte=since), since.isoformat()
    if until is not None:
        qs, filters["until"] = qs.filter(created_at__lt=until), until.isoformat()
    content_type, ext = FORMATS[fmt]
    writer = _csv_chunks if fmt == "csv" else _jsonl_chunks
    return ReconciliationStream(chunks=_buffered(writer(qs)), content_type=content_type,
                                filename=f"actions-ledger.{ext}", filters=filters)


def _rows(qs) -> Iterator[Action]:
    after = 0
    while True:
        batch = list(qs.filter(id__gt=after).order_by("id")[:BATCH])
        if not batch:
            return
        yield from batch
        after = batch[-1].id


def _record(action: Action) -> dict:
    return {
        "id": action.id,
        "created_at": action.created_at.isoformat().replace("+00:00", "Z"),
        "namespace": action.namespace,
        "conversation_id": str(action.conversation_id),
        "position": action.position,
        "idempotency_key": action.idempotency_key,
        "name": action.name,
        "status": action.status,
        "original_id": action.original_id,
        "inherited_from": action.inherited_from,
        "actor": action.actor,
    }


def _cell(value) -> str:
    if value is None:
        return ""
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _csv_chunks(qs) -> Iterator[str]:
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(COLUMNS)
    for action in _rows(qs):
        record = _record(action)
        # The JSON payloads as stored: the exact bytes the agent's tool returned.
        out.writerow([_cell(record[c]) for c in COLUMNS[:-2]] + [_cell(action.arguments), _cell(action.result)])
        if buf.tell() >= FLUSH_CHARS:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def _jsonl_chunks(qs) -> Iterator[str]:
    for action in _rows(qs):
        record = _record(action)
        record["arguments"] = action.arguments_json
        record["result"] = action.result_json
        yield json.dumps(record, ensure_ascii=False) + "\n"


def _buffered(parts: Iterator[str]) -> Iterator[str]:
    buf, size = [], 0
    for part in parts:
        buf.append(part)
        size += len(part)
        if size >= FLUSH_CHARS:
            yield "".join(buf)
            buf, size = [], 0
    if buf:
        yield "".join(buf)
