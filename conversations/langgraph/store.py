"""Writes of the LangGraph checkpointer's state (see models.py), and the thread's projection.

`put_checkpoint` keeps a checkpoint's blob and, in the same transaction, appends the new
messages of its `messages` channel (LangChain message dicts, mapped by
`conversations.formats.langchain`) to the thread's conversation, so the graph state and the
readable record never disagree.
Which conversation: the one its parent checkpoint's rows are in, when the parent is
where that conversation ends; otherwise the graph was replayed from an earlier
checkpoint (time travel), and the conversation is forked at the parent's last row
(`fork_conversation`: lineage "fork", visible in the lineage picture). A subgraph's
namespace (`checkpoint_ns`) reads as a child conversation ("subagent") of its thread's.
"""

import hashlib
from dataclasses import dataclass

from django.db import transaction

from conversations import store as core
from conversations.errors import InvalidInput, StoreError
from conversations.formats.langchain import to_message
from conversations.message_schema import encode_message
from conversations.models import Conversation

from .models import LangGraphCheckpoint, LangGraphWrite

NAMESPACE = "langgraph"
STRATEGIES = ("keep_latest", "delete")


def thread_external_id(thread_id: str, checkpoint_ns: str) -> str:
    """The external id of a thread's conversation in namespace `langgraph` (the lookup computes it too)."""
    # Thread ids and namespaces are any text (spaces, '|', ':'); the store's external ids
    # are stripped identifiers. A digest keys the conversation; the names are in its meta.
    digest = hashlib.sha256(f"{thread_id}\0{checkpoint_ns}".encode()).hexdigest()[:40]
    return f"thread-{digest}"


def _first_conversation(thread_id: str, checkpoint_ns: str) -> Conversation:
    meta = {"langgraph": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}}
    if not checkpoint_ns:
        conversation, _ = core.get_or_create_conversation(
            namespace=NAMESPACE, external_id=thread_external_id(thread_id, ""),
            title=f"LangGraph thread {thread_id}"[:200], meta=meta)
        return conversation
    parent = _head(thread_id, "")
    parent_id = parent.conversation_id if parent else _first_conversation(thread_id, "").pk
    parent_rows = Conversation.objects.get(pk=parent_id).next_position
    conversation, _ = core.get_or_create_conversation(
        namespace=NAMESPACE, external_id=thread_external_id(thread_id, checkpoint_ns),
        title=f"LangGraph {thread_id} / {checkpoint_ns.split(':')[0]}"[:200], meta=meta,
        parent_id=parent_id, parent_relation="subagent",
        forked_from_position=parent_rows - 1 if parent_rows else None)
    return conversation


def _head(thread_id: str, checkpoint_ns: str) -> LangGraphCheckpoint | None:
    return (LangGraphCheckpoint.objects.filter(thread_id=thread_id, checkpoint_ns=checkpoint_ns)
            .order_by("-checkpoint_id").first())


@dataclass(frozen=True)
class Projected:
    conversation_id: object
    rows: int
    forked: bool


def put_checkpoint(*, thread_id: str, checkpoint_ns: str, checkpoint_id: str, parent_checkpoint_id: str,
                   type: str, data: bytes, metadata_type: str, metadata_data: bytes, metadata: dict,
                   messages: list[dict] | None) -> tuple[LangGraphCheckpoint, Projected]:
    """Keep a checkpoint (its bytes as given) and append the messages it adds to the thread's
    conversation, forking that first when the parent is not where it ends (a replay).
    `messages`: the whole `messages` channel as [{"id", "message": a LangChain message dict}], or None when the graph
    has no such channel. Putting a checkpoint id again replaces its blob and metadata only."""
    run_id = metadata.get("run_id") if isinstance(metadata.get("run_id"), str) else ""
    blob = {"type": type, "data": data, "metadata_type": metadata_type, "metadata_data": metadata_data,
            "metadata": metadata, "run_id": run_id[:255], "parent_checkpoint_id": parent_checkpoint_id}
    with transaction.atomic():
        existing = LangGraphCheckpoint.objects.filter(
            thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id).first()
        if existing is not None:
            LangGraphCheckpoint.objects.filter(pk=existing.pk).update(**blob)
            existing.refresh_from_db()
            return existing, Projected(existing.conversation_id, existing.rows, False)
        parent = None
        if parent_checkpoint_id:
            parent = LangGraphCheckpoint.objects.filter(
                thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=parent_checkpoint_id).first()
        parent = parent or _head(thread_id, checkpoint_ns)
        forked = False
        if parent is None:
            conversation = _first_conversation(thread_id, checkpoint_ns)
            known: list = []
        else:
            conversation = Conversation.objects.get_live(parent.conversation_id)
            known = parent.message_ids
            if conversation.next_position != parent.rows:
                conversation = _fork(conversation, parent, checkpoint_id)
                forked = True
        ids = known
        if messages is not None:
            seen = set(known)
            fresh = [_row(m["message"]) for m in messages if m["id"] is None or m["id"] not in seen]
            for start in range(0, len(fresh), core.BATCH_MAX):
                core.append_messages(conversation_id=conversation.pk, messages=fresh[start:start + core.BATCH_MAX],
                                     expected_position=conversation.next_position + start)
            ids = [m["id"] for m in messages]
            rows = conversation.next_position + len(fresh)
        else:
            rows = conversation.next_position
        checkpoint = LangGraphCheckpoint.objects.create(
            thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id,
            conversation_id=conversation.pk, rows=rows, message_ids=ids, **blob)
    return checkpoint, Projected(conversation.pk, rows, forked)


def _row(message: dict) -> dict:
    """The row a LangChain message reads as; one that does not map to a valid message (a
    content block of a shape memoryui refuses) becomes a note saying so, so that the
    graph's state is still kept: the checkpoint, not the row, is what the graph needs."""
    row = to_message(message)
    try:
        encode_message(row)
    except StoreError as exc:
        return {"kind": "note", "text": f"[{message.get('type')}] not shown as a chat row: {exc.message}"[:2000],
                "meta": {"langchain": {"id": message.get("id"), "type": message.get("type")}}}
    return row


def _fork(conversation: Conversation, parent: LangGraphCheckpoint, checkpoint_id: str) -> Conversation:
    title = f"{conversation.title} (replayed from {parent.checkpoint_id[:13]})"[:200]
    if parent.rows > 0:
        return core.fork_conversation(conversation_id=conversation.pk, position=parent.rows - 1, title=title)
    # Replayed from before the first row: nothing to copy, the branch starts empty.
    child, _ = core.get_or_create_conversation(
        namespace=NAMESPACE,
        external_id=thread_external_id(parent.thread_id, f"{parent.checkpoint_ns}\0{checkpoint_id}"),
        title=title, meta=conversation.meta, parent_id=conversation.pk, parent_relation="fork")
    return child


def put_writes(*, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str, task_path: str,
               writes: list[dict]) -> int:
    """Keep a task's pending writes against a checkpoint. A write at an index the task has
    already written is kept as first written (a retried task stores nothing twice), except
    LangGraph's special channels (negative indexes: error, interrupt, resume), which
    replace. Returns how many were stored."""
    with transaction.atomic():
        owner = LangGraphCheckpoint.objects.filter(
            thread_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id).first()
        conversation_id = owner.conversation_id if owner else _first_conversation(thread_id, checkpoint_ns).pk
        stored = 0
        for write in writes:
            key = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint_id,
                   "task_id": task_id, "idx": write["idx"]}
            values = {"task_path": task_path, "channel": write["channel"], "type": write["type"],
                      "data": write["data"], "conversation_id": conversation_id}
            if write["idx"] < 0:
                LangGraphWrite.objects.update_or_create(**key, defaults=values)
                stored += 1
            elif not LangGraphWrite.objects.filter(**key).exists():
                LangGraphWrite.objects.create(**key, **values)
                stored += 1
    return stored


def delete_thread(*, thread_id: str) -> int:
    """Forget a thread's checkpoints and writes (every namespace). Its conversations stay:
    the log is append-only, and deleting it is a person's decision (admin delete, erasure)."""
    with transaction.atomic():
        LangGraphWrite.objects.filter(thread_id=thread_id).delete()
        deleted, _ = LangGraphCheckpoint.objects.filter(thread_id=thread_id).delete()
    return deleted


def delete_for_runs(*, run_ids: list[str]) -> int:
    """Forget the checkpoints whose metadata names one of `run_ids`, with their writes."""
    with transaction.atomic():
        doomed = list(LangGraphCheckpoint.objects.filter(run_id__in=run_ids)
                      .values_list("thread_id", "checkpoint_ns", "checkpoint_id"))
        for thread_id, ns, cid in doomed:
            LangGraphWrite.objects.filter(thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=cid).delete()
        LangGraphCheckpoint.objects.filter(run_id__in=run_ids).delete()
    return len(doomed)


def copy_thread(*, source_thread_id: str, target_thread_id: str) -> int:
    """Copy every checkpoint and write of one thread to another. The copies point at the
    source's conversations (the same rows); the target's first new checkpoint forks them
    there when the source has moved on since."""
    if source_thread_id == target_thread_id:
        raise InvalidInput("source and target thread are the same", field="target_thread_id")
    with transaction.atomic():
        copied = 0
        for cp in LangGraphCheckpoint.objects.filter(thread_id=source_thread_id).order_by("id"):
            cp.pk, cp.thread_id = None, target_thread_id
            cp.save(force_insert=True)
            copied += 1
        for write in LangGraphWrite.objects.filter(thread_id=source_thread_id).order_by("id"):
            write.pk, write.thread_id = None, target_thread_id
            write.save(force_insert=True)
    return copied


def prune(*, thread_ids: list[str], strategy: str) -> int:
    """`keep_latest`: keep each namespace's latest checkpoint (and its writes) of each
    thread; `delete`: forget them all. Conversations stay."""
    if strategy not in STRATEGIES:
        raise InvalidInput(f"strategy must be one of {', '.join(STRATEGIES)}", field="strategy")
    with transaction.atomic():
        if strategy == "delete":
            return sum(delete_thread(thread_id=t) for t in thread_ids)
        removed = 0
        for thread_id in thread_ids:
            namespaces = set(LangGraphCheckpoint.objects.filter(thread_id=thread_id)
                             .values_list("checkpoint_ns", flat=True))
            for ns in namespaces:
                latest = _head(thread_id, ns)
                LangGraphWrite.objects.filter(thread_id=thread_id, checkpoint_ns=ns).exclude(
                    checkpoint_id=latest.checkpoint_id).delete()
                n, _ = LangGraphCheckpoint.objects.filter(thread_id=thread_id, checkpoint_ns=ns).exclude(
                    pk=latest.pk).delete()
                removed += n
    return removed
