"""A LangChain chat history (`BaseChatMessageHistory`) over a conversation.

`add_messages` appends each LangChain message as the row it maps to
(`conversations.formats.langchain`), with the original message in its meta, so
`messages` gives it back exactly; rows written by others (a person's fold, an agent
through the API) read back as the LangChain message they map to. `messages` is the
active view: after a fold, the summary first as a system message. `clear` starts the
next generation (see models.LangChainHistory): nothing is erased.
"""

from django.db import transaction

from conversations import reads
from conversations import store as core
from conversations.formats.langchain import to_message
from conversations.models import Conversation

from .models import LangChainHistory

DEFAULT_NAMESPACE = "langchain"


def _key(session_id: str, generation: int) -> str:
    return session_id if generation == 0 else f"{session_id}#{generation}"


def head(*, namespace: str, session_id: str, create: bool = False) -> LangChainHistory | None:
    found = LangChainHistory.objects.filter(namespace=namespace, session_id=session_id).first()
    if found is not None or not create:
        return found
    conversation, _ = core.get_or_create_conversation(
        namespace=namespace, external_id=session_id, title=f"Chat {session_id}"[:200],
        meta={"langchain": {"session_id": session_id, "generation": 0}})
    found, _ = LangChainHistory.objects.get_or_create(
        namespace=namespace, session_id=session_id, defaults={"conversation_id": conversation.pk})
    return found


def add_messages(*, namespace: str, session_id: str, messages: list[dict]) -> LangChainHistory:
    """Append LangChain message dicts (`model_dump()`), in one batch, all or nothing."""
    rows = [to_message(m, original=True) for m in messages]
    with transaction.atomic():
        current = head(namespace=namespace, session_id=session_id, create=True)
        for start in range(0, len(rows), core.BATCH_MAX):
            core.append_messages(conversation_id=current.conversation_id, messages=rows[start:start + core.BATCH_MAX])
    return current


def clear(*, namespace: str, session_id: str) -> LangChainHistory | None:
    """The next generation, empty; the conversation it leaves stays as it was (its parent)."""
    with transaction.atomic():
        current = head(namespace=namespace, session_id=session_id)
        if current is None:
            return None
        parent = Conversation.objects.get(pk=current.conversation_id)
        if parent.next_position == 0:
            return current  # already empty: clearing it again starts nothing new
        generation = current.generation + 1
        child, _ = core.get_or_create_conversation(
            namespace=namespace, external_id=_key(session_id, generation), title=f"Chat {session_id} (cleared)"[:200],
            parent_id=parent.pk, parent_relation="fork",
            meta={"langchain": {"session_id": session_id, "generation": generation, "cleared": str(parent.pk)}})
        LangChainHistory.objects.filter(pk=current.pk).update(generation=generation, conversation_id=child.pk)
        current.refresh_from_db()
    return current


def active_messages(history: LangChainHistory) -> list[dict]:
    """The active view as LangChain message dicts (`type` and the message's fields)."""
    view = reads.list_active(history.conversation_id)
    out = []
    if view.checkpoint is not None:
        out.append({"type": "system", "content": view.checkpoint.summary})
    for item in view.page.items:
        out.extend(_langchain(item.as_json()))
    return out


def _langchain(row: dict) -> list[dict]:
    original = ((row.get("meta") or {}).get("langchain") or {}).get("original")
    if original:
        return [original]
    kind, content = row.get("kind"), row.get("content")
    if kind == "user":
        return [{"type": "human", "content": content}]
    if kind == "system":
        return [{"type": "system", "content": content}]
    if kind == "assistant":
        calls = [{"id": c["id"], "name": c["name"], "args": c["arguments"] if isinstance(c["arguments"], dict) else {},
                  "type": "tool_call"} for c in row.get("tool_calls") or []]
        return [{"type": "ai", "content": content or "", "tool_calls": calls}]
    if kind == "tool":
        return [{"type": "tool", "content": content, "tool_call_id": row.get("tool_call_id", ""),
                 "name": row.get("name"), "status": "error" if row.get("is_error") else "success"}]
    return []  # journal rows are the agent's own record, not chat
