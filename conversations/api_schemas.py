"""What the agent API documents: response shapes, request bodies, examples.

The handlers in `conversations.api` return data that ninja serializes through
these models (a message as its stored bytes: `rawjson.RawJson`); tests check
each answer against its schema (tests/answer_shapes.py), and schemathesis
checks the API against the document. The request-body models are also what
the handlers validate bodies with: strict, so a typo or a wrong type is an
error, never coerced.
"""

import uuid
from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import BaseModel, StrictInt, StrictStr, WrapSerializer, WrapValidator

from . import params, reads, store
from .jsonbody import StrictBody
from .message_schema import Message, SystemMessage, message_adapter
from .rawjson import RawJson

MAX_POSITION = params.MAX_POSITION
CONVERSATION_PAGE = 50
CONVERSATION_PAGE_MAX = 200
MESSAGE_PAGE = 100
MESSAGE_PAGE_MAX = reads.MAX_PAGE


# -- documented shapes ----------------------------------------------------------------


class ListOut(Schema):
    """The one list shape: `items` (declared by each list) and where the next page starts."""

    next: str | None = Field(..., description="Opaque cursor of the next page: pass it back unchanged as "
                             "`cursor` (with the same filters); null on the last page.")
    next_url: str | None = Field(..., description="The next page as an address; null on the last page.")


class ErrorDetail(Schema):
    code: str = Field(..., examples=["position_out_of_range"])
    message: str = Field(..., examples=["position 9 is out of range: it must be between 0 and 3"])
    field: str | None = Field(None, examples=["position"])
    # Only with code nothing_stored (a deletion request): the stored subjects close to the one sent.
    suggestions: list[dict] | None = Field(None, examples=[[{"subject": "customer:maria.keller@example.com",
                                                             "conversations": 2, "facts": 13, "why": "prefix"}]])


class ErrorOut(Schema):
    error: ErrorDetail


class LineageItem(BaseModel):
    id: uuid.UUID
    title: str
    forked_from_position: int | None


class CheckpointOut(BaseModel):
    id: int
    position: int = Field(..., description="The summary stands in for positions 0..position.")
    summary: str
    created_at: datetime
    created_by: str


class ConversationSummary(BaseModel):
    id: uuid.UUID
    title: str
    subject: str
    namespace: str = Field(..., description="The namespace of `external_id` (empty: the default one).")
    external_id: str | None = Field(
        ..., description="A framework's own id for this conversation; unique in its namespace, never changed.")
    created_at: datetime
    last_activity_at: datetime = Field(..., description="Its last row's time, as its writer or an imported "
                                       "transcript dated it.")
    received_at: datetime = Field(..., description="When memoryui received its last row: retention counts "
                                  "from here.")
    message_count: int
    pinned: bool
    parent_id: uuid.UUID | None
    forked_from_position: int | None
    parent_relation: str = Field(..., description="`fork`, `subagent`, or empty without a parent.")
    url: str


class ConversationOut(ConversationSummary):
    meta: dict[str, Any]
    next_position: int = Field(..., description="The position the next appended message will get.")
    lineage: list[LineageItem] = Field(..., description="Ancestors from the root down to the parent.")
    parent_missing: bool = Field(..., description="The parent was deleted or pruned; this fork survives it.")
    fork_count: int
    checkpoint_count: int
    latest_checkpoint: CheckpointOut | None


class ConversationPage(ListOut):
    items: list[ConversationSummary]


def _pass_raw(value, handler):
    return value if isinstance(value, RawJson) else handler(value)


def passed_raw(annotation):
    """A field documented as `annotation` whose stored JSON text (a `RawJson`) passes validation
    and serialization untouched, to be written into the answer byte for byte."""
    return Annotated[annotation, WrapValidator(_pass_raw), WrapSerializer(_pass_raw)]


# Documented as the message union.
StoredJson = passed_raw(Message)


class MessageItem(BaseModel):
    # A plain pydantic model, not a ninja Schema: no ORM-attribute lookup per field, which
    # made a page of 100 serialize slower than the hand-built JSON it replaced.
    position: int
    kind: str
    message: StoredJson = Field(..., description="The stored message, exactly as it was encoded once.")
    created_at: datetime


class MessagePage(ListOut):
    items: list[MessageItem]
    skipped: list[int] = Field(..., description="Positions of stored rows that no longer decode.")
    next_position: int = Field(..., description="The position the next append will get (read before the page).")


class ActiveCheckpoint(BaseModel):
    position: int
    summary: str
    created_at: datetime


class ActiveOut(MessagePage):
    checkpoint: ActiveCheckpoint | None
    handoff: Annotated[SystemMessage, WrapValidator(_pass_raw), WrapSerializer(_pass_raw)] | None = Field(
        ..., description="The checkpoint's summary as one system message, to send before `items`."
    )


class AppendOut(BaseModel):
    position: int
    kind: str


class BatchOut(BaseModel):
    first_position: int
    last_position: int
    count: int


class CheckpointList(ListOut):
    items: list[CheckpointOut]


class DeletedOut(Schema):
    deleted: uuid.UUID
    messages: int
    checkpoints: int
    receipt_id: uuid.UUID
    verification: str
    receipt_url: str


# -- request bodies (strict: a typo or a wrong type is an error, never coerced) --------


class CreateConversationIn(StrictBody):
    title: StrictStr | None = Field(None, max_length=store.TITLE_MAX)
    subject: StrictStr | None = Field(
        None, max_length=store.SUBJECT_MAX, description="Whom the conversation is about, e.g. `customer:42`."
    )
    meta: dict[str, Any] | None = None
    namespace: StrictStr | None = Field(
        None, max_length=store.NAMESPACE_MAX, description="Groups conversations; the scope of `external_id`.")
    external_id: StrictStr | None = Field(
        None, min_length=1, max_length=store.EXTERNAL_ID_MAX,
        description="Your own id for this conversation (a session id). When the namespace already has it, "
                    "the existing conversation is answered with 200 instead of a new one.")


class CheckpointIn(StrictBody):
    position: StrictInt = Field(..., ge=0, le=MAX_POSITION)
    summary: StrictStr = Field(..., min_length=1)


class ForkIn(StrictBody):
    position: StrictInt = Field(..., ge=0, le=MAX_POSITION)
    title: StrictStr | None = Field(None, max_length=store.TITLE_MAX)
    external_id: StrictStr | None = Field(
        None, min_length=1, max_length=store.EXTERNAL_ID_MAX,
        description="An external id for the child, in the parent's namespace.")


# -- documentation helpers ------------------------------------------------------------

EXAMPLE_ID = "3f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88"
EXAMPLE_TIME = "2026-05-04T09:30:12.512301Z"


def errors_doc(*codes: int) -> dict:
    return {code: ErrorOut for code in (401, 403, *codes)}


def json_body_doc(schema: dict, examples: dict, description: str = "") -> dict:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema, "examples": examples}},
        }
    }


def example_doc(status: int, value) -> dict:
    return {"responses": {status: {"content": {"application/json": {"example": value}}}}}


def merge_doc(*parts: dict) -> dict:
    out: dict = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge_doc(out[key], value)
            else:
                out[key] = value
    return out


def inline_schema(model: type[BaseModel]) -> dict:
    """The model's JSON schema for a request body, self-contained: a nested model (a LangGraph
    checkpoint's blobs) is written in place, since the document's components do not hold it."""
    schema = model.model_json_schema(ref_template="#/$defs/{model}")
    definitions = schema.pop("$defs", {})

    def resolved(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return resolved(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {key: resolved(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolved(value) for value in node]
        return node

    return resolved(schema)


def message_schema() -> dict:
    # The union's members are registered as components through MessageItem's
    # response schema; the request body refers to them instead of copying them.
    schema = message_adapter.json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return schema


EXAMPLE_SUMMARY = {
    "id": EXAMPLE_ID,
    "title": "Refund for order 7",
    "subject": "customer:42",
    "created_at": EXAMPLE_TIME,
    "last_activity_at": EXAMPLE_TIME,
    "received_at": EXAMPLE_TIME,
    "message_count": 4,
    "pinned": False,
    "namespace": "support-bot",
    "external_id": "session-7f3a9c",
    "parent_id": None,
    "forked_from_position": None,
    "parent_relation": "",
    "url": f"http://127.0.0.1:8000/api/v1/conversations/{EXAMPLE_ID}",
}
EXAMPLE_CHECKPOINT = {
    "id": 12,
    "position": 3,
    "summary": "The customer wants a refund for order 7; the tool confirmed it was delivered late.",
    "created_at": EXAMPLE_TIME,
    "created_by": "key:support-agent",
}
EXAMPLE_DETAIL = {
    **EXAMPLE_SUMMARY,
    "meta": {"agent": "support-bot", "model": "example-model-1"},
    "next_position": 4,
    "lineage": [],
    "parent_missing": False,
    "fork_count": 0,
    "checkpoint_count": 1,
    "latest_checkpoint": EXAMPLE_CHECKPOINT,
}
EXAMPLE_MESSAGES = [
    {"position": 4, "kind": "user", "message": {"kind": "user", "content": "Any news on my refund?"},
     "created_at": EXAMPLE_TIME},
    {"position": 5, "kind": "assistant", "message": {
        "kind": "assistant", "content": "Let me check.",
        "tool_calls": [{"id": "call_1", "name": "refund_status", "arguments": {"order": 7}}],
        "meta": {"model": "example-model-1", "usage": {"input_tokens": 812, "output_tokens": 31}}},
     "created_at": EXAMPLE_TIME},
    {"position": 6, "kind": "tool", "message": {
        "kind": "tool", "tool_call_id": "call_1", "name": "refund_status", "content": "refunded on May 3"},
     "created_at": EXAMPLE_TIME},
]
APPEND_EXAMPLES = {
    "user": {"summary": "A user turn", "value": {"kind": "user", "content": "Where is my refund for order 7?"}},
    "assistant": {"summary": "An assistant turn with a tool call", "value": {
        "kind": "assistant", "content": "Let me check.",
        "tool_calls": [{"id": "call_1", "name": "refund_status", "arguments": {"order": 7}}],
        "meta": {"model": "example-model-1", "usage": {"input_tokens": 812, "output_tokens": 31}}}},
    "tool": {"summary": "A tool result", "value": {
        "kind": "tool", "tool_call_id": "call_1", "name": "refund_status", "content": "refunded on May 3"}},
    "blocks": {"summary": "Content blocks", "value": {
        "kind": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                    {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}},
    "note": {"summary": "A journal entry", "value": {"kind": "note", "text": "Customer prefers email."}},
}
