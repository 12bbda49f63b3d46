"""The ledger as plain data: the API's shapes, a conversation's ledger for its
export, and the reconciliation export (the actions ledger across conversations,
CSV or JSONL).

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

from conversations import chain, params
from conversations import markdown as md
from conversations.errors import InvalidInput
from conversations.streams import FLUSH_CHARS, buffered

from .models import ACTION_STATUSES, Action, TaskStateEvent, WorkspaceSnapshot

BATCH = 2000
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


# -- rows as plain data (the API's shapes, also in conversation exports) ------------------------------


def state_dict(conversation_id, event: TaskStateEvent | None) -> dict:
    return {
        "conversation_id": str(conversation_id),
        "version": event.version if event else 0,
        "state": event.state_json if event else {},
        "position": event.position if event else None,
        "updated_at": params.iso(event.created_at) if event else None,
        "updated_by": event.actor if event else None,
    }


def event_dict(event: TaskStateEvent) -> dict:
    return {"version": event.version, "position": event.position, "state": event.state_json,
            "changes": event.changes_json, "actor": event.actor, "created_at": params.iso(event.created_at)}


def action_dict(action: Action) -> dict:
    return {
        "id": action.id, "conversation_id": str(action.conversation_id), "position": action.position,
        "namespace": action.namespace, "idempotency_key": action.idempotency_key, "name": action.name,
        "arguments": action.arguments_json, "result": action.result_json, "status": action.status,
        "original_id": action.original_id, "inherited_from": action.inherited_from, "actor": action.actor,
        "created_at": params.iso(action.created_at),
    }


def snapshot_dict(snapshot: WorkspaceSnapshot) -> dict:
    return {
        "id": snapshot.id, "conversation_id": str(snapshot.conversation_id), "position": snapshot.position,
        "repo": snapshot.repo, "ref": snapshot.ref, "commit": snapshot.commit_sha, "base": snapshot.base_sha,
        "files_changed": snapshot.files_changed, "insertions": snapshot.insertions,
        "deletions": snapshot.deletions, "restore": snapshot.restore_command, "actor": snapshot.actor,
        "created_at": params.iso(snapshot.created_at),
    }


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
    return ReconciliationStream(chunks=buffered(writer(qs)), content_type=content_type,
                                filename=f"actions-ledger.{ext}", filters=filters)


def _action_rows(qs) -> Iterator[Action]:
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
        "created_at": params.iso(action.created_at),
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
    for action in _action_rows(qs):
        record = _record(action)
        # The JSON payloads as stored: the exact bytes the agent's tool returned.
        out.writerow([_cell(record[c]) for c in COLUMNS[:-2]] + [_cell(action.arguments), _cell(action.result)])
        if buf.tell() >= FLUSH_CHARS:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def _jsonl_chunks(qs) -> Iterator[str]:
    for action in _action_rows(qs):
        record = _record(action)
        record["arguments"] = action.arguments_json
        record["result"] = action.result_json
        yield json.dumps(record, ensure_ascii=False) + "\n"


# -- in a conversation's export (conversations/export.py) -----------------------------


def conversation_ledger(conversation_id) -> dict:
    """Everything the ledger holds for one conversation, oldest first, each row with its place
    in its hash chain (`chain`, see chain_entry)."""
    events = list(TaskStateEvent.objects.history(conversation_id))
    return {
        "task_state": state_dict(conversation_id, events[-1] if events else None),
        "task_state_events": [event_dict(e) | {"chain": chain_entry(e, "state")} for e in events],
        "actions": [action_dict(a) | {"chain": chain_entry(a, "action")}
                    for a in Action.objects.of(conversation_id).order_by("id")],
        "workspace_snapshots": [snapshot_dict(s) | {"chain": chain_entry(s, "snapshot")}
                                for s in WorkspaceSnapshot.objects.timeline(conversation_id)],
    }


JSONL_RECORDS = {"task_state_events": "task_state_event", "actions": "action",
                 "workspace_snapshots": "workspace_snapshot"}


def conversation_jsonl(conversation_id) -> Iterator[str]:
    """One line per ledger row, after the message lines; `record` says which kind
    (message lines have none). Each carries its place in its hash chain (`chain`), so
    that `memoryui-verify` can check it offline."""
    rows = (
        ("task_state_event", "state", event_dict, TaskStateEvent.objects.history(conversation_id)),
        ("action", "action", action_dict, Action.objects.of(conversation_id).order_by("id")),
        ("workspace_snapshot", "snapshot", snapshot_dict, WorkspaceSnapshot.objects.timeline(conversation_id)),
    )
    for record, chain_type, to_dict, items in rows:
        for row in items:
            yield json.dumps({"record": record, **to_dict(row), "chain": chain_entry(row, chain_type)},
                             ensure_ascii=False) + "\n"


def chain_entry(row, chain_type: str) -> dict:
    """The row's chain fields exactly as the payload encodes them (conversations/chain.py), with its
    salt, commitment and chain hash as hex: enough to recompute the commitment and the link."""
    def hex_of(value):
        return bytes(value).hex() if value is not None else None

    return {"type": chain_type, "id": row.id,
            "fields": {name: chain.field_text(getattr(row, name)) for name in chain.FIELDS[chain_type]},
            "salt": hex_of(row.salt), "commitment": hex_of(row.commitment), "chain_hash": hex_of(row.chain_hash)}


def conversation_markdown(conversation_id) -> Iterator[str]:
    data = conversation_ledger(conversation_id)
    if not (data["task_state_events"] or data["actions"] or data["workspace_snapshots"]):
        return
    state = data["task_state"]
    yield "\n---\n\n## Task state and actions\n\n"
    if state["version"]:
        body = md.fence(json.dumps(state['state'], indent=2, ensure_ascii=False), "json")
        yield (f"Task state, version {state['version']} (by {md.escape_line(state['updated_by'] or '?')}, "
               f"after position {state['position']}):\n\n" + body + "\n")
        for e in data["task_state_events"]:
            changes = "; ".join(_markdown_change(c) for c in e["changes"])
            yield (f"- v{e['version']} · {e['created_at']} · {md.escape_line(e['actor'] or '?')} · "
                   f"after #{e['position']}: {changes}\n")
        yield "\n"
    if data["actions"]:
        yield "| id | after | when | action | idempotency key | status | retry of |\n|---|---|---|---|---|---|---|\n"
        for a in data["actions"]:
            # In a table even a code span's pipe is escaped (GitHub's rule), or it splits the cell.
            # The status is one of ACTION_STATUSES (a database constraint).
            cells = [a["id"], f"#{a['position']}", a["created_at"], md.code(a["name"]).replace("|", "\\|"),
                     md.code(a["idempotency_key"]).replace("|", "\\|"), a["status"], a["original_id"] or ""]
            yield "| " + " | ".join(str(c) for c in cells) + " |\n"
        yield "\n"
    for s in data["workspace_snapshots"]:
        yield (f"- Workspace before #{s['position']}: {md.code(s['repo'])} at {md.code(s['commit'][:10])}, "
               f"{s['files_changed']} files, +{s['insertions']} −{s['deletions']}; "
               f"restore with {md.code(s['restore'])}\n")


def _markdown_change(change: dict) -> str:
    def show(value):
        return md.escape_line(json.dumps(value, ensure_ascii=False))

    path = md.code(change["path"])
    if change["op"] == "add":
        return f"{path} added {show(change['new'])}"
    if change["op"] == "remove":
        return f"{path} removed (was {show(change['old'])})"
    return f"{path} {show(change['old'])} → {show(change['new'])}"
