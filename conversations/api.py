"""The conversations part of the agent API: every store operation over JSON.

Handlers parse, check the caller's scope, make one store call or read, and
answer. Request bodies are read by `conversations.jsonbody` rather than by ninja
so that every kind of bad body gets its own clear 4xx (wrong content type 415,
not JSON 400, too big 413, wrong shape 422) and so that a message reaches the
store exactly as the agent sent it: the store validates and encodes it once. Answers
are serialized by ninja from the `api_schemas` `*Out` models; a message goes out as its
stored bytes (`rawjson.RawJson`), never parsed and re-encoded
(tests/test_api_raw_messages.py checks the bytes).
"""

import json
import uuid
from datetime import datetime
from typing import Literal

from django.db.models import Q
from django.http import StreamingHttpResponse
from ninja import Path, Query, Router, Status

from . import keyset, params, plugins, reads, store
from .api_schemas import (
    APPEND_EXAMPLES,
    CONVERSATION_PAGE,
    CONVERSATION_PAGE_MAX,
    EXAMPLE_CHECKPOINT,
    EXAMPLE_DETAIL,
    EXAMPLE_ID,
    EXAMPLE_MESSAGES,
    EXAMPLE_SUMMARY,
    MAX_POSITION,
    MESSAGE_PAGE,
    MESSAGE_PAGE_MAX,
    ActiveOut,
    AppendOut,
    BatchOut,
    CheckpointIn,
    CheckpointList,
    CheckpointOut,
    ConversationOut,
    ConversationPage,
    CreateConversationIn,
    DeletedOut,
    ForkIn,
    MessagePage,
    errors_doc,
    example_doc,
    inline_schema,
    json_body_doc,
    merge_doc,
    message_schema,
)
from .apiauth import actor_of, scope
from .conversation_json import conversation_fields, lineage
from .errors import InvalidInput
from .export import export_stream
from .http import absolute_url, json_response
from .jsonbody import read_body, read_json
from .models import Checkpoint, Conversation, parse_conversation_id
from .params import iso as _iso
from .rawjson import RawJson

router = Router(tags=["conversations"])

# -- helpers --------------------------------------------------------------------------


def _conversation_path(conversation_id) -> str:
    return f"/api/v1/conversations/{conversation_id}"


# What a list of conversations says of each (ConversationSummary).
SUMMARY = ("id", "title", "subject", "created_at", "last_activity_at", "received_at", "message_count", "pinned",
           "namespace", "external_id", "parent_id", "forked_from_position", "parent_relation")


def conversation_summary(c: Conversation, request) -> dict:
    return {**conversation_fields(c, SUMMARY, moment=_iso), "url": absolute_url(request, _conversation_path(c.pk))}


def _checkpoint(cp: Checkpoint) -> dict:
    return {
        "id": cp.pk,
        "position": cp.message_position,
        "summary": cp.summary,
        "created_at": _iso(cp.created_at),
        "created_by": cp.created_by,
    }


def _detail(conversation_id, request) -> dict:
    c = Conversation.objects.detail_of(conversation_id)
    # Most conversations have no checkpoint: the count (from the same statement) spares the look-up.
    latest = c.latest_checkpoint() if c.checkpoint_count else None
    return {
        **conversation_summary(c, request),
        "meta": c.meta,
        "next_position": c.next_position,
        "lineage": lineage(c),
        "parent_missing": c.parent_missing,
        "fork_count": c.fork_count,
        "checkpoint_count": c.checkpoint_count,
        "latest_checkpoint": _checkpoint(latest) if latest else None,
    }


def _item(item: reads.StoredMessage) -> dict:
    return {
        "position": item.position,
        "kind": item.kind,
        "message": RawJson(item.raw),  # the stored bytes, never parsed and re-encoded
        "created_at": item.created_at,
    }


def _page(request, page: reads.Page, listing: str, *, next_position: int, limit: int) -> dict:
    cursor = keyset.cursor_of(listing, page.next_after) if page.next_after is not None else None
    return keyset.listing([_item(i) for i in page.items], cursor,
                          keyset.next_url(request, cursor, [("limit", limit)]),
                          skipped=page.skipped, next_position=next_position)


def _start(cursor: str | None, listing: str, after: int | None) -> int | None:
    """Where a message page starts: after the cursor's position when one is sent, else `after`."""
    decoded = keyset.decode(cursor, listing, int)
    return decoded[0] if decoded else after


_ORDER_FIELDS = {"recent": "last_activity_at", "created": "created_at"}


# -- conversations --------------------------------------------------------------------


@router.post(
    "/conversations",
    operation_id="create_conversation",
    summary="Create a conversation (or get the one with this external id)",
    response={201: ConversationOut, 200: ConversationOut, **errors_doc(400, 409, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(
            inline_schema(CreateConversationIn),
            {"new": {"summary": "A support conversation", "value": {
                "title": "Refund for order 7", "subject": "customer:42", "meta": {"agent": "support-bot"}}},
             "session": {"summary": "Create-or-get by your own session id", "value": {
                 "namespace": "support-bot", "external_id": "session-7f3a9c", "title": "Refund for order 7"}},
             "empty": {"summary": "Everything is optional", "value": {}}},
        ),
        example_doc(201, EXAMPLE_DETAIL | {"message_count": 0, "next_position": 0, "checkpoint_count": 0,
                                        "latest_checkpoint": None}),
        {"responses": {200: {"description": "The namespace already had this `external_id`: the existing "
                                            "conversation, unchanged (title, subject and meta sent are ignored)."}}},
    ),
)
@scope("write")
def create_conversation(request):
    """Start a conversation; `title`, `subject`, `meta`, `namespace` and `external_id` are all optional.
    With an `external_id` this is a create-or-get: 201 when it was created, 200 with the existing
    conversation when the namespace already has that id. Needs `write`."""
    body = read_body(request, CreateConversationIn)
    fields = dict(title=body.title or "", subject=body.subject or "", meta=body.meta,
                  namespace=body.namespace or "")
    if body.external_id is None:
        conversation, created = store.create_conversation(**fields), True
    else:
        conversation, created = store.get_or_create_conversation(external_id=body.external_id, **fields)
    return Status(201 if created else 200, _detail(conversation.pk, request))


@router.get(
    "/conversations",
    operation_id="list_conversations",
    summary="List conversations",
    response={200: ConversationPage, **errors_doc(400, 422)},
    openapi_extra=example_doc(200, {"items": [EXAMPLE_SUMMARY], "next": "WyJyZWNlbnQiLC4uLl0",
                                 "next_url": "http://127.0.0.1:8000/api/v1/conversations?cursor=WyJyZWNlbnQiLC4uLl0"}),
)
@scope("read")
def list_conversations(
    request,
    cursor: str | None = Query(None, max_length=1000, description="The `next` value of the previous page."),
    limit: int = Query(CONVERSATION_PAGE, ge=1, le=CONVERSATION_PAGE_MAX),
    subject: str | None = Query(None, max_length=store.SUBJECT_MAX, example="customer:42"),
    namespace: str | None = Query(None, max_length=store.NAMESPACE_MAX, example="support-bot",
                                  description="Only this namespace (with `external_id`: the default one if omitted)."),
    external_id: str | None = Query(None, max_length=store.EXTERNAL_ID_MAX, example="session-7f3a9c",
                                    description="Find the conversation with this external id (at most one item)."),
    order: Literal["recent", "created"] = Query(
        "recent", description="`recent`: latest activity first; `created`: newest first."),
):
    """Newest first, in keyset pages (no OFFSET: every page costs what the first does). Needs `read`."""
    params.check_query_text(subject, "subject")
    field = _ORDER_FIELDS[order]
    qs = Conversation.objects.live()
    if subject is not None:
        qs = qs.about(subject)
    if namespace is not None or external_id is not None:
        # Read by the rule they are written by: NFC, nothing invisible (else 422).
        namespace = params.identifier(namespace, "namespace", max_length=store.NAMESPACE_MAX)
    if external_id is not None:
        external_id = params.identifier(external_id, "external_id", max_length=store.EXTERNAL_ID_MAX)
        # The unique index (namespace, external_id): one row per spelling, found by index.
        qs = qs.with_external_id(namespace, external_id)
    elif namespace is not None:
        qs = qs.filter(namespace__in=params.identifier_forms(namespace))
    if cursor:
        at, pk = keyset.decode(cursor, order, datetime, uuid.UUID)
        qs = qs.filter(Q(**{f"{field}__lt": at}) | Q(**{field: at, "pk__lt": pk}))
    rows, next_cursor = keyset.page(qs.order_by(f"-{field}", "-pk"), limit, order, lambda c: (getattr(c, field), c.pk))
    next_url = keyset.next_url(request, next_cursor, [
        ("limit", limit), ("order", order), ("subject", subject), ("namespace", namespace),
        ("external_id", external_id)])
    return keyset.listing([conversation_summary(c, request) for c in rows], next_cursor, next_url)


ConversationId = Path(..., description="The conversation's id (a UUID).", example=EXAMPLE_ID)


@router.get(
    "/conversations/{conversation_id}",
    operation_id="get_conversation",
    summary="One conversation",
    response={200: ConversationOut, **errors_doc(404)},
    openapi_extra=example_doc(200, EXAMPLE_DETAIL),
)
@scope("read")
def get_conversation(request, conversation_id: str = ConversationId):
    """Lineage, counts and the latest checkpoint. Needs `read`."""
    return _detail(parse_conversation_id(conversation_id), request)


@router.delete(
    "/conversations/{conversation_id}",
    operation_id="delete_conversation",
    summary="Delete a conversation",
    response={200: DeletedOut, **errors_doc(404, 409)},
    openapi_extra=example_doc(200, {"deleted": EXAMPLE_ID, "messages": 7, "checkpoints": 1,
                                 "receipt_id": "5b0c8f3e-2f4e-4d36-9d8e-1f1d2c3b4a59", "verification": "verified",
                                 "receipt_url": "http://127.0.0.1:8000/api/v1/receipts/5b0c8f3e-2f4e-4d36-9d8e-1f1d2c3b4a59"}),
)
@scope("admin")
def delete_conversation(request, conversation_id: str = ConversationId):
    """Remove the conversation with its messages, checkpoints and the rows that belong to it;
    its forks keep their own copies. The same path as a deletion request: the text is made
    gone from the database files, checked, and a receipt is kept (`receipt_url`). 409
    `maintenance_running` while a prune or another deletion runs. Needs `admin`."""
    receipt = plugins.delete_conversation(conversation_id=parse_conversation_id(conversation_id),
                                          actor=actor_of(request))
    return {"deleted": receipt.conversation_ids[0], "messages": receipt.counts.get("messages", 0),
            "checkpoints": receipt.counts.get("checkpoints", 0), "receipt_id": str(receipt.pk),
            "verification": receipt.verification.get("status"),
            "receipt_url": absolute_url(request, f"/api/v1/receipts/{receipt.pk}")}


# -- messages -------------------------------------------------------------------------


@router.post(
    "/conversations/{conversation_id}/messages",
    operation_id="append_message",
    summary="Append one message",
    response={201: AppendOut, **errors_doc(400, 404, 409, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(message_schema(), APPEND_EXAMPLES,
                       "The message itself: one of the kinds, discriminated by `kind`."),
        example_doc(201, {"position": 5, "kind": "assistant"}),
        example_doc(409, {"error": {"code": "position_conflict", "field": "expected_position", "message":
                                 "expected the next position to be 5, but it is 6: another writer appended "
                                 "first; read the conversation again"}}),
    ),
)
@scope("write")
def append_message(
    request,
    conversation_id: str = ConversationId,
    expected_position: int | None = Query(
        None, ge=0, le=MAX_POSITION,
        description="When the next position is not this, answer 409 `position_conflict` and write nothing.",
    ),
):
    """Append after every settled step; the store assigns the position. Needs `write`."""
    cid = parse_conversation_id(conversation_id)
    data = read_json(request)
    position = store.append_message(conversation_id=cid, message=data, expected_position=expected_position)
    # The hottest answer of the API, built as the bytes ninja would render from AppendOut
    # (tests/test_api_append_answer.py) without its validation and renderer per request.
    return json_response({"position": position, "kind": data["kind"]}, status=201)


@router.post(
    "/conversations/{conversation_id}/messages/batch",
    operation_id="append_messages",
    summary="Append up to 1,000 messages in one transaction",
    response={201: BatchOut, **errors_doc(400, 404, 409, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(
            {"type": "object", "required": ["messages"], "additionalProperties": False,
             "properties": {"messages": {"type": "array", "minItems": 1, "maxItems": store.BATCH_MAX,
                                         "items": message_schema()}}},
            {"step": {"summary": "An assistant turn and its tool result", "value": {"messages": [
                APPEND_EXAMPLES["assistant"]["value"], APPEND_EXAMPLES["tool"]["value"]]}}},
            "The messages of one step, in order: all are written at contiguous positions, or none.",
        ),
        example_doc(201, {"first_position": 5, "last_position": 6, "count": 2}),
        example_doc(422, {"error": {"code": "invalid_message", "field": "messages.1.tool_call_id",
                                 "message": "messages.1: invalid message: tool_call_id: Field required"}}),
    ),
)
@scope("write")
def append_messages(
    request,
    conversation_id: str = ConversationId,
    expected_position: int | None = Query(
        None, ge=0, le=MAX_POSITION,
        description="The position the first message must get; otherwise 409 `position_conflict`, nothing written.",
    ),
):
    """A whole step (an assistant turn and its tool results) in one request and one transaction:
    contiguous positions, all or nothing; a bad message is named as `messages.<i>.<field>` and
    nothing is written. The whole body must fit the request size limit. Needs `write`."""
    cid = parse_conversation_id(conversation_id)
    data = read_json(request)
    unknown = sorted(set(data) - {"messages"})
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}; send {{\"messages\": [...]}}", field=unknown[0])
    if "messages" not in data:
        raise InvalidInput("messages is required: a list of 1 to 1,000 messages", field="messages")
    appended = store.append_messages(conversation_id=cid, messages=data["messages"],
                                     expected_position=expected_position)
    return json_response({"first_position": appended.first_position, "last_position": appended.last_position,
                          "count": appended.count}, status=201)


@router.get(
    "/conversations/{conversation_id}/messages",
    operation_id="list_messages",
    summary="The full record",
    response={200: MessagePage, **errors_doc(400, 404, 422)},
    openapi_extra=example_doc(200, {"items": EXAMPLE_MESSAGES, "skipped": [], "next": None, "next_url": None,
                                 "next_position": 7}),
)
@scope("read")
def list_messages(
    request,
    conversation_id: str = ConversationId,
    after: int = Query(-1, ge=-1, le=MAX_POSITION, description="Rows with a position greater than this."),
    limit: int = Query(MESSAGE_PAGE, ge=1, le=MESSAGE_PAGE_MAX),
    cursor: str | None = Query(None, max_length=params.CURSOR_MAX,
                               description="The `next` value of the previous page (replaces `after`)."),
):
    """Every message in position order, in keyset pages. Rows that no longer decode are
    left out and their positions listed in `skipped`. Needs `read`."""
    conversation = Conversation.objects.get_live(parse_conversation_id(conversation_id))
    page = reads.read_rows(conversation.pk, after=_start(cursor, "messages", after), limit=limit)
    return _page(request, page, "messages", next_position=conversation.next_position, limit=limit)


@router.get(
    "/conversations/{conversation_id}/active",
    operation_id="get_active_view",
    summary="The active view (what the model receives)",
    response={200: ActiveOut, **errors_doc(400, 404, 422)},
    openapi_extra=example_doc(200, {
        "checkpoint": {k: EXAMPLE_CHECKPOINT[k] for k in ("position", "summary", "created_at")},
        "handoff": {"kind": "system", "content": EXAMPLE_CHECKPOINT["summary"],
                    "meta": {"checkpoint": {"position": 3}}},
        "items": EXAMPLE_MESSAGES, "skipped": [], "next": None, "next_url": None, "next_position": 7,
    }),
)
@scope("read")
def get_active_view(
    request,
    conversation_id: str = ConversationId,
    after: int | None = Query(None, ge=-1, le=MAX_POSITION,
                              description="Rows after this position (and after the fold)."),
    limit: int = Query(MESSAGE_PAGE_MAX, ge=1, le=MESSAGE_PAGE_MAX),
    cursor: str | None = Query(None, max_length=params.CURSOR_MAX,
                               description="The `next` value of the previous page (replaces `after`)."),
):
    """Send `handoff` (when there is a checkpoint) and then every `items[].message` to the model.
    Needs `read`."""
    conversation = Conversation.objects.get_live(parse_conversation_id(conversation_id))
    view = reads.list_active(conversation.pk, after=_start(cursor, "active", after), limit=limit)
    cp = view.checkpoint
    return {
        "checkpoint": {"position": cp.message_position, "summary": cp.summary, "created_at": _iso(cp.created_at)}
        if cp else None,
        # Built here, not stored: encoded once, compactly, as the store encodes messages.
        "handoff": RawJson(json.dumps(view.handoff, ensure_ascii=False, separators=(",", ":")))
        if view.handoff is not None else None,
        **_page(request, view.page, "active", next_position=conversation.next_position, limit=limit),
    }


# -- checkpoints and forks ------------------------------------------------------------


@router.post(
    "/conversations/{conversation_id}/checkpoints",
    operation_id="create_checkpoint",
    summary="Fold positions 0..position into a summary",
    response={201: CheckpointOut, **errors_doc(400, 404, 409, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(inline_schema(CheckpointIn), {"fold": {"summary": "Fold the first four messages", "value": {
            "position": 3, "summary": EXAMPLE_CHECKPOINT["summary"]}}}),
        example_doc(201, EXAMPLE_CHECKPOINT),
    ),
)
@scope("write")
def create_checkpoint(request, conversation_id: str = ConversationId):
    """When the context window fills: the summary stands in for 0..position in the active view.
    Nothing is deleted; a checkpoint can only move the fold forward. Needs `write`."""
    cid = parse_conversation_id(conversation_id)
    body = read_body(request, CheckpointIn)
    checkpoint = store.checkpoint_at(conversation_id=cid, position=body.position, summary=body.summary,
                                     actor=actor_of(request))
    return Status(201, _checkpoint(checkpoint))


@router.get(
    "/conversations/{conversation_id}/checkpoints",
    operation_id="list_checkpoints",
    summary="All checkpoints, oldest first",
    response={200: CheckpointList, **errors_doc(404)},
    openapi_extra=example_doc(200, {"items": [EXAMPLE_CHECKPOINT]}),
)
@scope("read")
def list_checkpoints(request, conversation_id: str = ConversationId):
    """Needs `read`."""
    conversation = Conversation.objects.get_live(parse_conversation_id(conversation_id))
    checkpoints = Checkpoint.objects.of(conversation.pk).order_by("message_position", "created_at", "id")
    # Not paged: a conversation has few checkpoints (each moves the fold forward).
    return keyset.listing([_checkpoint(cp) for cp in checkpoints], None)


@router.post(
    "/conversations/{conversation_id}/forks",
    operation_id="fork_conversation",
    summary="Fork at a position",
    response={201: ConversationOut, **errors_doc(400, 404, 409, 413, 415, 422)},
    openapi_extra=merge_doc(
        json_body_doc(inline_schema(ForkIn), {"explore": {"summary": "Try another approach from position 3",
                                                             "value": {"position": 3, "title": "Try a voucher"}}}),
        example_doc(201, EXAMPLE_DETAIL | {"parent_id": EXAMPLE_ID, "forked_from_position": 3, "title": "Try a voucher",
                                        "lineage": [{"id": EXAMPLE_ID, "title": "Refund for order 7",
                                                     "forked_from_position": None}]}),
    ),
)
@scope("write")
def fork_conversation(request, conversation_id: str = ConversationId):
    """A new conversation holding copies of positions 0..position (same bytes and times)
    and the latest checkpoint at or before it; the parent is untouched. Needs `write`."""
    cid = parse_conversation_id(conversation_id)
    body = read_body(request, ForkIn)
    child = store.fork_conversation(conversation_id=cid, position=body.position, title=body.title,
                                    actor=actor_of(request), external_id=body.external_id)
    return Status(201, _detail(child.pk, request))


# -- export ---------------------------------------------------------------------------


@router.get(
    "/conversations/{conversation_id}/export",
    operation_id="export_conversation",
    summary="Download a conversation",
    response={200: None, **errors_doc(404, 409, 422)},
    openapi_extra={"responses": {200: {
        "description": "The conversation, streamed as a download (Content-Disposition: attachment).",
        "content": {
            # json, anthropic and gemini: an object; openai-chat: an array of messages.
            "application/json": {"schema": {"type": ["object", "array"]}},
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/markdown": {"schema": {"type": "string"}},
        },
    }}},
)
@scope("read")
def export_conversation(
    request,
    conversation_id: str = ConversationId,
    format: Literal["json", "jsonl", "markdown", "openai-chat", "anthropic", "gemini", "claude-code",
                    "memoryui"] = Query(
        "json", description="json, jsonl or markdown; openai-chat, anthropic or gemini (the active view as a "
                            "request, handoff summary first, journal left out); claude-code or memoryui (the full "
                            "record as a transcript that imports back)"),
):
    """Streamed in batches, so a long conversation exports in constant memory. Needs `read`.
    Recorded in the audit log, as exports from the pages are. 409 `nothing_to_send` for a request
    format when the active view holds nothing a model could be sent."""
    conversation = Conversation.objects.get_live(parse_conversation_id(conversation_id))
    stream = export_stream(conversation.pk, format)
    store.record_audit(actor=actor_of(request), action="conversation.exported", target_type="conversation",
                       target_id=str(conversation.pk),
                       detail={"format": format, "messages": conversation.next_position, "via": "api"})
    response = StreamingHttpResponse(stream.chunks, content_type=stream.content_type)
    response["Content-Disposition"] = f'attachment; filename="{stream.filename}"'
    return response
