"""The ledger's part of the agent API: task state, actions, workspace snapshots.

Handlers parse, check the caller's scope (reads `read`, writes `write`), make one
store call or read, and return data that ninja serializes through the `api_schemas`
models, as `conversations.api` does.
"""

from datetime import datetime
from typing import Literal

from django.http import StreamingHttpResponse
from ninja import Query, Router, Status

from conversations import keyset, params
from conversations import store as conversation_store
from conversations.api import ConversationId
from conversations.api_schemas import errors_doc, example_doc, inline_schema, json_body_doc, merge_doc
from conversations.apiauth import actor_of, scope
from conversations.errors import InvalidInput
from conversations.jsonbody import read_body
from conversations.models import Conversation, parse_conversation_id

from . import store
from .api_schemas import (
    EXAMPLE_ACTION,
    EXAMPLE_CHANGES,
    EXAMPLE_COMMIT,
    EXAMPLE_ID,
    EXAMPLE_KEY,
    EXAMPLE_RETRY,
    EXAMPLE_SNAPSHOT,
    EXAMPLE_STATE,
    EXAMPLE_STATE_OUT,
    LOOKUP_MAX,
    PAGE,
    PAGE_MAX,
    ActionIn,
    ActionLookup,
    ActionPage,
    RecordedOut,
    SnapshotIn,
    SnapshotList,
    SnapshotOut,
    StateHistory,
    StateIn,
    StateOut,
    StateWriteOut,
)
from .export import action_dict, event_dict, reconciliation_stream, snapshot_dict, state_dict
from .models import Action, TaskStateEvent, WorkspaceSnapshot

router = Router(tags=["task state and actions"])


def _after(cursor: str | None, listing: str, after: int) -> int:
    """Where a page starts: after the cursor's value when one is sent, else after `after`."""
    decoded = keyset.decode(cursor, listing, int)
    return decoded[0] if decoded else after


def _paged(request, rows, limit: int, listing: str, key, out) -> dict:
    rows, cursor = keyset.page(rows, limit, listing, key)
    return keyset.listing([out(r) for r in rows], cursor, keyset.next_url(request, cursor, [("limit", limit)]))


def _live(conversation_id) -> Conversation:
    return Conversation.objects.get_live(parse_conversation_id(conversation_id))


# -- task state -----------------------------------------------------------------------


@router.get(
    "/conversations/{conversation_id}/state",
    operation_id="get_task_state",
    summary="The task state",
    response={200: StateOut, **errors_doc(404)},
    openapi_extra=example_doc(200, EXAMPLE_STATE_OUT),
)
@scope("read")
def get_state(request, conversation_id: str = ConversationId):
    """The current version of the conversation's task state: what the work is about and what was
    decided. Version 0 and `{}` until it is first set. Needs `read`."""
    conversation = _live(conversation_id)
    return state_dict(conversation.pk, TaskStateEvent.objects.current(conversation.pk))


@router.put(
    "/conversations/{conversation_id}/state",
    operation_id="set_task_state",
    summary="Replace the task state",
    response={200: StateWriteOut, **errors_doc(400, 404, 409, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(inline_schema(StateIn), {"decide": {
            "summary": "Record the decision, on top of version 1",
            "value": {"state": EXAMPLE_STATE, "expected_version": 1}}}),
        example_doc(200, EXAMPLE_STATE_OUT | {"changed": True, "changes": EXAMPLE_CHANGES}),
        example_doc(409, {"error": {"code": "version_conflict", "field": "expected_version", "message":
                                 "expected the task state at version 1, but it is at version 2: another writer "
                                 "changed it; read it again and send your change with expected_version 2"}}),
    ),
)
@scope("write")
def set_state(request, conversation_id: str = ConversationId):
    """Written by code after a tool returns, never by the model. `expected_version` is the version
    you read: if another writer moved it, 409 `version_conflict` and nothing is written. Each change
    is kept as a version (who, when, at which position, what changed); checkpoints never touch it.
    Needs `write`."""
    cid = parse_conversation_id(conversation_id)
    body = read_body(request, StateIn)
    written = store.set_state(conversation_id=cid, state=body.state, expected_version=body.expected_version,
                              actor=actor_of(request))
    return {**state_dict(cid, written.event), "changed": written.changed,
            "changes": written.event.changes_json if written.changed else []}


@router.get(
    "/conversations/{conversation_id}/state/history",
    operation_id="list_task_state_versions",
    summary="Every version of the task state",
    response={200: StateHistory, **errors_doc(400, 404, 422)},
    openapi_extra=example_doc(200, {"items": [
        {"version": 1, "position": 4, "state": {"order": "SU-88421"},
         "changes": [{"op": "add", "path": "/order", "new": "SU-88421"}],
         "actor": "key:support-agent", "created_at": "2026-05-04T14:31:40Z"},
        {"version": 2, "position": 5, "state": EXAMPLE_STATE, "changes": EXAMPLE_CHANGES,
         "actor": "key:support-agent", "created_at": "2026-05-04T14:31:58Z"},
    ], "next": None, "next_url": None}),
)
@scope("read")
def list_state_versions(
    request,
    conversation_id: str = ConversationId,
    after: int = Query(0, ge=0, le=2**63 - 1, description="Versions after this one."),
    limit: int = Query(PAGE, ge=1, le=PAGE_MAX),
    cursor: str | None = Query(None, max_length=params.CURSOR_MAX,
                               description="The `next` value of the previous page (replaces `after`)."),
):
    """Oldest first, in keyset pages by version. Needs `read`."""
    conversation = _live(conversation_id)
    history = TaskStateEvent.objects.history(conversation.pk, after_version=_after(cursor, "state", after))
    return _paged(request, history, limit, "state", lambda e: (e.version,), event_dict)


# -- actions --------------------------------------------------------------------------


@router.post(
    "/conversations/{conversation_id}/actions",
    operation_id="record_action",
    summary="Record a side effect in the actions ledger",
    response={201: RecordedOut, 200: RecordedOut, **errors_doc(400, 404, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(inline_schema(ActionIn), {
            "refund": {"summary": "The refund went out", "value": {
                "idempotency_key": EXAMPLE_KEY, "name": "issue_refund",
                "arguments": EXAMPLE_ACTION["arguments"], "result": EXAMPLE_ACTION["result"], "status": "performed"}},
            "failed": {"summary": "The tool failed", "value": {
                "idempotency_key": EXAMPLE_KEY, "name": "issue_refund", "arguments": EXAMPLE_ACTION["arguments"],
                "result": {"error": "card expired"}, "status": "failed"}},
        }),
        example_doc(201, {"status": "performed", "action": EXAMPLE_ACTION, "attempt": EXAMPLE_ACTION}),
        example_doc(200, {"status": "already_performed", "action": EXAMPLE_ACTION, "attempt": EXAMPLE_RETRY}),
    ),
)
@scope("write")
def record_action(request, conversation_id: str = ConversationId):
    """Code records each side effect after the tool returns, from the tool's own response.
    The first `performed` entry for an `idempotency_key` (a business key: ticket, order, item,
    amount) in the conversation's namespace answers 201. Any later attempt with that key — a retry,
    a fork, a resumed conversation — answers 200 `already_performed` with the original entry, and is
    recorded too. Entries are never edited: a failed action is followed by another entry.
    The HTTP `Idempotency-Key` header, if sent, is a different thing (a retry of this request).
    Needs `write`."""
    cid = parse_conversation_id(conversation_id)
    body = read_body(request, ActionIn)
    recorded = store.record_action(
        conversation_id=cid, idempotency_key=body.idempotency_key, name=body.name, arguments=body.arguments,
        result=body.result, status=body.status, actor=actor_of(request),
    )
    return Status(201 if recorded.first_time else 200, {
        "status": recorded.status, "action": action_dict(recorded.action), "attempt": action_dict(recorded.attempt)})


@router.get(
    "/conversations/{conversation_id}/actions",
    operation_id="list_actions",
    summary="The conversation's actions, in the order recorded",
    response={200: ActionPage, **errors_doc(400, 404, 422)},
    openapi_extra=example_doc(200, {"items": [EXAMPLE_ACTION, EXAMPLE_RETRY], "next": None, "next_url": None}),
)
@scope("read")
def list_actions(
    request,
    conversation_id: str = ConversationId,
    after: int = Query(0, ge=0, le=2**63 - 1, description="Entries with an id greater than this."),
    limit: int = Query(PAGE, ge=1, le=PAGE_MAX),
    cursor: str | None = Query(None, max_length=params.CURSOR_MAX,
                               description="The `next` value of the previous page (replaces `after`)."),
):
    """Keyset pages by id, including the entries a fork carried from its parent. Needs `read`."""
    conversation = _live(conversation_id)
    actions = Action.objects.of(conversation.pk).filter(id__gt=_after(cursor, "actions", after)).order_by("id")
    return _paged(request, actions, limit, "actions", lambda a: (a.id,), action_dict)


@router.get(
    "/actions",
    operation_id="find_action",
    summary="Has this already been done?",
    response={200: ActionLookup, **errors_doc(404, 422)},
    openapi_extra=example_doc(200, {"namespace": "sundry", "idempotency_key": EXAMPLE_KEY, "performed": True,
                                 "action": EXAMPLE_ACTION, "entries": [EXAMPLE_ACTION, EXAMPLE_RETRY]}),
)
@scope("read")
def find_action(
    request,
    idempotency_key: str = Query(..., min_length=1, max_length=store.KEY_MAX, example=EXAMPLE_KEY),
    namespace: str | None = Query(None, max_length=200,
                                  description="The namespace to look in; default the store-wide one (\"\")."),
    conversation_id: str | None = Query(None, max_length=100,
                                        description="Or: look in this conversation's namespace."),
):
    """Answers "has this refund already gone out?" with one indexed lookup of the business key,
    across every conversation of the namespace (forks and resumed conversations included).
    Needs `read`."""
    params.check_query_text(idempotency_key, "idempotency_key")
    params.check_query_text(namespace, "namespace")
    if conversation_id is not None:
        conversation = _live(conversation_id)
        if namespace is not None and namespace != conversation.namespace:
            raise InvalidInput(
                f"conversation {conversation.pk} is in namespace {conversation.namespace!r}, not {namespace!r}",
                field="namespace")
        namespace = conversation.namespace
    namespace = namespace or ""
    entries = list(Action.objects.with_key(namespace, idempotency_key)[:LOOKUP_MAX])
    performed = [a for a in entries if a.status == "performed"]
    # The original when it still exists, else the oldest copy a fork carried.
    done = min(performed, key=lambda a: (a.inherited_from is not None, a.id)) if performed else None
    return {"namespace": namespace, "idempotency_key": idempotency_key, "performed": done is not None,
            "action": action_dict(done) if done else None, "entries": [action_dict(a) for a in entries]}


def _instant(value: str | None, field: str) -> datetime | None:
    """An ISO 8601 date or date-time; a date, or a time without an offset, is UTC."""
    if value is None or not value.strip():
        return None
    return params.instant_field(value, field)


@router.get(
    "/actions/export",
    operation_id="export_actions",
    summary="Reconciliation export of the actions ledger",
    response={200: None, **errors_doc(422)},
    openapi_extra={"responses": {200: {
        "description": "Every entry matching the filters, across conversations, oldest first, streamed as a "
                       "download. An entry a fork carried over is counted once (with its original).",
        "content": {
            "text/csv": {"schema": {"type": "string"}, "example": (
                "id,created_at,namespace,conversation_id,position,idempotency_key,name,status,original_id,"
                "inherited_from,actor,arguments,result\r\n"
                f"41,2026-05-04T14:32:07Z,sundry,{EXAMPLE_ID},6,{EXAMPLE_KEY},issue_refund,performed,,,"
                "key:support-agent,\"{\"\"order\"\":\"\"SU-88421\"\",\"\"amount_cents\"\":11800}\","
                "\"{\"\"refund_id\"\":\"\"RF-77120\"\"}\"\r\n")},
            "application/x-ndjson": {"schema": {"type": "string"}},
        },
    }}},
)
@scope("read")
def export_actions(
    request,
    format: Literal["csv", "jsonl"] = Query("csv", description="csv or jsonl"),
    name: str | None = Query(None, max_length=store.NAME_MAX, description="Only this action, e.g. issue_refund."),
    namespace: str | None = Query(None, max_length=200,
                                  description="Only this namespace (\"\" is the store-wide one)."),
    status: Literal["performed", "failed", "already_performed"] | None = Query(None),
    since: str | None = Query(None, max_length=40, example="2026-05-01",
                              description="Recorded at or after (ISO 8601; a date means midnight UTC)."),
    until: str | None = Query(None, max_length=40, example="2026-06-01",
                              description="Recorded before (ISO 8601; a date means midnight UTC)."),
):
    """For the people who check money against the ledger: read rows, not recollections.
    Streamed in batches. Needs `read`; recorded in the audit log."""
    params.check_query_text(name, "name")
    params.check_query_text(namespace, "namespace")
    stream = reconciliation_stream(format, name=name, namespace=namespace, status=status,
                                   since=_instant(since, "since"), until=_instant(until, "until"))
    conversation_store.record_audit(
        actor=actor_of(request), action="actions.exported", target_type="actions",
        detail={"format": format, "filters": stream.filters, "via": "api"})
    response = StreamingHttpResponse(stream.chunks, content_type=stream.content_type)
    response["Content-Disposition"] = f'attachment; filename="{stream.filename}"'
    return response


# -- workspace snapshots --------------------------------------------------------------


@router.post(
    "/conversations/{conversation_id}/snapshots",
    operation_id="record_snapshot",
    summary="Record a workspace snapshot for a turn",
    response={201: SnapshotOut, 200: SnapshotOut, **errors_doc(400, 404, 409, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(inline_schema(SnapshotIn), {"turn": {"summary": "The files before turn 12", "value": {
            "position": 12, "repo": "/home/dev/shop", "ref": EXAMPLE_SNAPSHOT["ref"], "commit": EXAMPLE_COMMIT,
            "base": EXAMPLE_SNAPSHOT["base"], "files_changed": 3, "insertions": 41, "deletions": 7}}}),
        example_doc(201, EXAMPLE_SNAPSHOT),
        example_doc(409, {"error": {"code": "snapshot_exists", "field": "commit", "message":
                                 "the turn at position 12 already has a snapshot of /home/dev/shop (commit "
                                 f"{EXAMPLE_COMMIT}); snapshot records are never replaced"}}),
    ),
)
@scope("write")
def record_snapshot(request, conversation_id: str = ConversationId):
    """The harness takes `git stash create` before a turn, stores it under
    `refs/memoryui/<conversation>/<position>` and records it here (the Python client's
    `snapshot_workspace` does all three). `position` may be the next one, the turn about to be
    appended. The same record again answers 200; another commit for that turn and repository is
    409 `snapshot_exists`. Needs `write`."""
    cid = parse_conversation_id(conversation_id)
    body = read_body(request, SnapshotIn)
    written = store.record_snapshot(
        conversation_id=cid, position=body.position, repo=body.repo, ref=body.ref, commit=body.commit,
        base=body.base or "", files_changed=body.files_changed, insertions=body.insertions,
        deletions=body.deletions, actor=actor_of(request),
    )
    return Status(201 if written.created else 200, snapshot_dict(written.snapshot))


@router.get(
    "/conversations/{conversation_id}/snapshots",
    operation_id="list_snapshots",
    summary="The conversation's workspace snapshots, by turn",
    response={200: SnapshotList, **errors_doc(404)},
    openapi_extra=example_doc(200, {"items": [EXAMPLE_SNAPSHOT]}),
)
@scope("read")
def list_snapshots(request, conversation_id: str = ConversationId):
    """Needs `read`."""
    conversation = _live(conversation_id)
    # Not paged: one snapshot per turn at most.
    return keyset.listing([snapshot_dict(s) for s in WorkspaceSnapshot.objects.timeline(conversation.pk)], None)
