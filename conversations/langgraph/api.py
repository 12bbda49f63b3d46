"""The LangGraph checkpointer's part of the agent API (the client's `MemoryuiSaver` calls it).

Blobs travel as base64 text (`{"type", "data"}`, LangGraph's `dumps_typed` pair) and are
stored as the bytes they encode. Reads need `read`; writes need `write`. Deleting and
pruning forget checkpoints, never messages, so they need `write` too.
"""

import base64
import binascii
import json
import uuid
from typing import Any

from ninja import Router, Schema, Status
from pydantic import BaseModel, Field, StrictInt, StrictStr

from conversations import keyset
from conversations.api_schemas import ListOut, inline_schema, json_body_doc
from conversations.apiauth import scope
from conversations.errors import InvalidInput
from conversations.jsonbody import StrictBody, read_body
from conversations.params import BadParameter, check_query_text, identifier, int_param

from . import history, store
from .models import ID_MAX, KEY_MAX, LangGraphCheckpoint, LangGraphWrite

router = Router(tags=["LangGraph checkpoints"])

LIST_MAX = 1000
BLOB_MAX = 16 * 1024 * 1024


class Blob(StrictBody):
    type: StrictStr = Field(..., max_length=64)
    data: StrictStr = Field(..., description="base64 of the serialised bytes")


class ProjectedMessage(StrictBody):
    id: StrictStr | None = Field(None, max_length=KEY_MAX)
    message: dict[str, Any]


class CheckpointIn(StrictBody):
    thread_id: StrictStr = Field(..., min_length=1, max_length=KEY_MAX)
    checkpoint_ns: StrictStr = Field("", max_length=KEY_MAX)
    checkpoint_id: StrictStr = Field(..., min_length=1, max_length=ID_MAX)
    parent_checkpoint_id: StrictStr = Field("", max_length=ID_MAX)
    checkpoint: Blob
    metadata: Blob
    metadata_json: dict[str, Any] = Field(default_factory=dict)
    messages: list[ProjectedMessage] | None = None


class WriteIn(StrictBody):
    idx: StrictInt
    channel: StrictStr = Field(..., max_length=KEY_MAX)
    value: Blob


class WritesIn(StrictBody):
    thread_id: StrictStr = Field(..., min_length=1, max_length=KEY_MAX)
    checkpoint_ns: StrictStr = Field("", max_length=KEY_MAX)
    checkpoint_id: StrictStr = Field(..., min_length=1, max_length=ID_MAX)
    task_id: StrictStr = Field(..., max_length=KEY_MAX)
    task_path: StrictStr = Field("", max_length=KEY_MAX * 4)
    writes: list[WriteIn] = Field(..., max_length=10_000)


class ThreadIn(StrictBody):
    thread_id: StrictStr = Field(..., min_length=1, max_length=KEY_MAX)


class RunsIn(StrictBody):
    run_ids: list[StrictStr] = Field(..., max_length=10_000)


class CopyIn(StrictBody):
    source_thread_id: StrictStr = Field(..., min_length=1, max_length=KEY_MAX)
    target_thread_id: StrictStr = Field(..., min_length=1, max_length=KEY_MAX)


class PruneIn(StrictBody):
    thread_ids: list[StrictStr] = Field(..., max_length=10_000)
    strategy: StrictStr = "keep_latest"


def _body(model, summary: str, value: dict) -> dict:
    """The operation's request body in the OpenAPI document (read_body parses it, not ninja)."""
    return json_body_doc(inline_schema(model), {"example": {"summary": summary, "value": value}})


def _query(*parameters: tuple[str, str], required: tuple[str, ...] = ()) -> dict:
    """Query parameters a handler reads itself (LangGraph's list protocol), in the OpenAPI document."""
    return {"parameters": [{"in": "query", "name": name, "required": name in required, "schema": {"type": "string"},
                            "description": description} for name, description in parameters]}


EXAMPLE_THREAD = "thread-7f3a9c"
EXAMPLE_BLOB = {"type": "msgpack", "data": "gqF2AQ=="}


# Answers: the list items are plain pydantic models (not ninja Schemas), which a page of 1,000 serializes
# without an attribute look-up per field, as conversations.api_schemas does.
class BlobOut(BaseModel):
    type: str
    data: str = Field(..., description="base64 of the stored bytes")


class CheckpointPutOut(Schema):
    checkpoint_id: str
    conversation_id: uuid.UUID = Field(..., description="The conversation holding the thread's messages.")
    rows: int = Field(..., description="How many rows that conversation had as of this checkpoint.")
    forked: bool = Field(..., description="The graph was replayed from an earlier checkpoint: a fork took the rows.")


class WritesOut(Schema):
    stored: int


class PendingWriteOut(BaseModel):
    task_id: str
    task_path: str
    idx: int
    channel: str
    value: BlobOut


class StoredCheckpointOut(BaseModel):
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: BlobOut
    metadata: BlobOut
    conversation_id: uuid.UUID
    rows: int
    pending_writes: list[PendingWriteOut]


class StoredCheckpointList(ListOut):
    items: list[StoredCheckpointOut]


class CheckpointsDeletedOut(Schema):
    deleted: int = Field(..., description="Checkpoints forgotten (their conversations stay).")


class CopiedOut(Schema):
    copied: int


def _bytes(blob: Blob, field: str) -> bytes:
    try:
        data = base64.b64decode(blob.data, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{field}.data is not base64", field=f"{field}.data") from None
    if len(data) > BLOB_MAX:
        raise InvalidInput(f"{field} is {len(data)} bytes; at most {BLOB_MAX}", field=f"{field}.data")
    return data


def _b64(data) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


@router.post("/langgraph/checkpoints", operation_id="put_langgraph_checkpoint",
             summary="Keep a LangGraph checkpoint and project its messages", response={201: CheckpointPutOut},
             openapi_extra=_body(CheckpointIn, "The first checkpoint of a thread, with its one message", {
                 "thread_id": EXAMPLE_THREAD, "checkpoint_ns": "", "checkpoint_id": "1ef4f797-8335-6428-8001",
                 "checkpoint": EXAMPLE_BLOB, "metadata": EXAMPLE_BLOB,
                 "metadata_json": {"source": "input", "step": -1},
                 "messages": [{"id": "h-1", "message": {"type": "human", "content": "How cold is Oslo?"}}]}))
@scope("write")
def put_checkpoint(request):
    """Store a checkpoint's serialised bytes as given; the new messages of its `messages`
    channel (mapped by the client) become rows of the thread's conversation, forked when
    the graph was replayed from an earlier checkpoint. Needs `write`."""
    body = read_body(request, CheckpointIn)
    checkpoint, projected = store.put_checkpoint(
        thread_id=body.thread_id, checkpoint_ns=body.checkpoint_ns, checkpoint_id=body.checkpoint_id,
        parent_checkpoint_id=body.parent_checkpoint_id, type=body.checkpoint.type,
        data=_bytes(body.checkpoint, "checkpoint"), metadata_type=body.metadata.type,
        metadata_data=_bytes(body.metadata, "metadata"), metadata=body.metadata_json,
        messages=None if body.messages is None else [m.model_dump() for m in body.messages])
    return Status(201, {"checkpoint_id": checkpoint.checkpoint_id, "conversation_id": str(projected.conversation_id),
                        "rows": projected.rows, "forked": projected.forked})


@router.post("/langgraph/writes", operation_id="put_langgraph_writes", summary="Keep a task's pending writes",
             response={201: WritesOut},
             openapi_extra=_body(WritesIn, "One task's write to the messages channel", {
                 "thread_id": EXAMPLE_THREAD, "checkpoint_ns": "", "checkpoint_id": "1ef4f797-8335-6428-8001",
                 "task_id": "task-1", "writes": [{"idx": 0, "channel": "messages", "value": EXAMPLE_BLOB}]}))
@scope("write")
def put_writes(request):
    """Needs `write`."""
    body = read_body(request, WritesIn)
    writes = [{"idx": w.idx, "channel": w.channel, "type": w.value.type, "data": _bytes(w.value, f"writes.{i}.value")}
              for i, w in enumerate(body.writes)]
    stored = store.put_writes(thread_id=body.thread_id, checkpoint_ns=body.checkpoint_ns,
                              checkpoint_id=body.checkpoint_id, task_id=body.task_id, task_path=body.task_path,
                              writes=writes)
    return Status(201, {"stored": stored})


@router.get("/langgraph/checkpoints", operation_id="list_langgraph_checkpoints",
            summary="LangGraph checkpoints, newest first, with their pending writes",
            response=StoredCheckpointList,
            openapi_extra=_query(("thread_id", "Only this thread's."),
                                 ("checkpoint_ns", "Only this namespace's (absent: every namespace)."),
                                 ("checkpoint_id", "Only this checkpoint."),
                                 ("before", "Only checkpoints older than this checkpoint id."),
                                 ("filter", "A JSON object the checkpoint's metadata must match."),
                                 ("limit", f"At most this many (1 to {LIST_MAX}).")))
@scope("read")
def list_checkpoints(request):
    """Query: `thread_id`, `checkpoint_ns` (absent: every namespace), `checkpoint_id`,
    `before` (a checkpoint id), `filter` (a JSON object the metadata must match), `limit`.
    Needs `read`."""
    q = request.GET
    for name in ("thread_id", "checkpoint_ns", "checkpoint_id", "before"):
        check_query_text(q.get(name), name)  # a NUL no database stores: 400, not PostgreSQL's 500
    found = LangGraphCheckpoint.objects.all()
    for name in ("thread_id", "checkpoint_ns", "checkpoint_id"):
        if name in q:
            found = found.filter(**{name: q[name]})
    if q.get("before"):
        found = found.filter(checkpoint_id__lt=q["before"])
    wanted = {}
    if q.get("filter"):
        try:
            wanted = json.loads(q["filter"])
        except ValueError:
            raise BadParameter("filter is not JSON", field="filter") from None
        if not isinstance(wanted, dict):
            raise BadParameter("filter must be a JSON object", field="filter")
    limit = int_param(q, "limit", default=LIST_MAX, minimum=1, maximum=LIST_MAX)
    picked = []
    # Metadata filters compare JSON values, in Python: the same test on SQLite and PostgreSQL.
    for cp in found.order_by("-checkpoint_id", "checkpoint_ns", "thread_id").iterator(chunk_size=200):
        if all(cp.metadata.get(k) == v for k, v in wanted.items()):
            picked.append(cp)
            if len(picked) >= limit:
                break
    # The pending writes of every picked checkpoint in one query, not one per checkpoint.
    writes: dict[tuple, list] = {}
    if picked:
        for w in LangGraphWrite.objects.filter(thread_id__in={cp.thread_id for cp in picked},
                                               checkpoint_id__in={cp.checkpoint_id for cp in picked}):
            writes.setdefault((w.thread_id, w.checkpoint_ns, w.checkpoint_id), []).append(w)
    # LangGraph's own list protocol pages with `before` and `limit`: `next` is always null.
    return keyset.listing([
        _checkpoint_dict(cp, writes.get((cp.thread_id, cp.checkpoint_ns, cp.checkpoint_id), [])) for cp in picked],
        None)


def _checkpoint_dict(cp: LangGraphCheckpoint, writes: list) -> dict:
    return {
        "thread_id": cp.thread_id, "checkpoint_ns": cp.checkpoint_ns, "checkpoint_id": cp.checkpoint_id,
        "parent_checkpoint_id": cp.parent_checkpoint_id or None,
        "checkpoint": {"type": cp.type, "data": _b64(cp.data)},
        "metadata": {"type": cp.metadata_type, "data": _b64(cp.metadata_data)},
        "conversation_id": str(cp.conversation_id), "rows": cp.rows,
        "pending_writes": [{"task_id": w.task_id, "task_path": w.task_path, "idx": w.idx, "channel": w.channel,
                            "value": {"type": w.type, "data": _b64(w.data)}}
                           for w in sorted(writes, key=lambda w: (w.task_path, w.task_id, w.idx))],
    }


@router.post("/langgraph/threads/delete", operation_id="delete_langgraph_thread",
             summary="Forget a thread's checkpoints (its conversations stay)", response=CheckpointsDeletedOut,
             openapi_extra=_body(ThreadIn, "Forget one thread", {"thread_id": EXAMPLE_THREAD}))
@scope("write")
def delete_thread(request):
    body = read_body(request, ThreadIn)
    return {"deleted": store.delete_thread(thread_id=body.thread_id)}


@router.post("/langgraph/runs/delete", operation_id="delete_langgraph_runs",
             summary="Forget the checkpoints of some runs", response=CheckpointsDeletedOut,
             openapi_extra=_body(RunsIn, "Forget one run's checkpoints", {"run_ids": ["run-1"]}))
@scope("write")
def delete_for_runs(request):
    body = read_body(request, RunsIn)
    return {"deleted": store.delete_for_runs(run_ids=body.run_ids)}


@router.post("/langgraph/threads/copy", operation_id="copy_langgraph_thread", summary="Copy a thread's checkpoints",
             response=CopiedOut,
             openapi_extra=_body(CopyIn, "Copy a thread", {"source_thread_id": EXAMPLE_THREAD,
                                                           "target_thread_id": "thread-copy"}))
@scope("write")
def copy_thread(request):
    body = read_body(request, CopyIn)
    return {"copied": store.copy_thread(source_thread_id=body.source_thread_id,
                                        target_thread_id=body.target_thread_id)}


@router.post("/langgraph/threads/prune", operation_id="prune_langgraph_threads", summary="Prune threads' checkpoints",
             response=CheckpointsDeletedOut,
             openapi_extra=_body(PruneIn, "Keep each thread's latest checkpoint",
                                 {"thread_ids": [EXAMPLE_THREAD], "strategy": "keep_latest"}))
@scope("write")
def prune(request):
    body = read_body(request, PruneIn)
    return {"deleted": store.prune(thread_ids=body.thread_ids, strategy=body.strategy)}


# -- LangChain chat history (MemoryuiChatMessageHistory) ------------------------------


class HistoryIn(StrictBody):
    namespace: StrictStr = Field(history.DEFAULT_NAMESPACE, max_length=200)
    session_id: StrictStr = Field(..., min_length=1, max_length=KEY_MAX - 12)


class HistoryMessagesIn(HistoryIn):
    messages: list[dict[str, Any]] = Field(..., min_length=1, max_length=1000,
                                           description="LangChain messages as `model_dump()` JSON (with `type`)")


class HistoryHeadOut(Schema):
    conversation_id: uuid.UUID | None = Field(..., description="The current generation's conversation (or null).")
    generation: int = Field(..., description="0, then one more each time the history is cleared.")


class HistoryOut(HistoryHeadOut):
    messages: list[dict[str, Any]] = Field(..., description="The active view as LangChain message dicts.")


def _history_key(namespace, session_id) -> tuple[str, str]:
    return (identifier(namespace, "namespace", max_length=200, required=True),
            identifier(session_id, "session_id", max_length=KEY_MAX - 12, required=True))


def _history_dict(current) -> dict:
    return {"conversation_id": str(current.conversation_id) if current else None,
            "generation": current.generation if current else 0,
            "messages": history.active_messages(current) if current else []}


@router.get("/langchain/history", operation_id="get_langchain_history", summary="A LangChain chat history",
            response=HistoryOut,
            openapi_extra=_query(("session_id", "The history's session id."),
                                 ("namespace", f"Its namespace (default {history.DEFAULT_NAMESPACE!r})."),
                                 required=("session_id",)))
@scope("read")
def get_history(request):
    """Query: `session_id`, `namespace` (default "langchain"). The active view as LangChain
    message dicts; no history yet: none. Needs `read`."""
    namespace, session_id = _history_key(request.GET.get("namespace", history.DEFAULT_NAMESPACE),
                                         request.GET.get("session_id", ""))
    return _history_dict(history.head(namespace=namespace, session_id=session_id))


@router.post("/langchain/history/messages", operation_id="add_langchain_messages",
             summary="Append to a LangChain chat history", response={201: HistoryHeadOut},
             openapi_extra=_body(HistoryMessagesIn, "A question", {
                 "namespace": history.DEFAULT_NAMESPACE, "session_id": "session-7f3a9c",
                 "messages": [{"type": "human", "content": "How cold is Oslo?"}]}))
@scope("write")
def add_history_messages(request):
    """Each message becomes the row it maps to, with the original kept in its meta. Needs `write`."""
    body = read_body(request, HistoryMessagesIn)
    namespace, session_id = _history_key(body.namespace, body.session_id)
    for i, message in enumerate(body.messages):
        if not isinstance(message.get("type"), str):
            raise InvalidInput("a LangChain message needs its type", field=f"messages.{i}.type")
    current = history.add_messages(namespace=namespace, session_id=session_id, messages=body.messages)
    return Status(201, {"conversation_id": str(current.conversation_id), "generation": current.generation})


@router.post("/langchain/history/clear", operation_id="clear_langchain_history",
             summary="Start a LangChain chat history's next generation", response=HistoryHeadOut,
             openapi_extra=_body(HistoryIn, "Clear a history", {"namespace": history.DEFAULT_NAMESPACE,
                                                                "session_id": "session-7f3a9c"}))
@scope("write")
def clear_history(request):
    """The history continues empty in a new conversation; the old one stays. Needs `write`."""
    body = read_body(request, HistoryIn)
    namespace, session_id = _history_key(body.namespace, body.session_id)
    current = history.clear(namespace=namespace, session_id=session_id)
    return {"conversation_id": str(current.conversation_id) if current else None,
            "generation": current.generation if current else 0}
