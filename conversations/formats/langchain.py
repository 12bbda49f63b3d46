"""LangChain messages (as `message.model_dump()` JSON: `type` "human", "ai", "tool",
"system", …) mapped to memoryui messages. Used by the LangGraph checkpointer's projection
of a thread's `messages` channel and by the LangChain chat-history door.

One AI message is one assistant row with all its tool calls (`tool_calls[].args` →
`arguments`); a tool message is a `tool` row (`status: "error"` → `is_error`). Kinds
with no chat equivalent (a `chat` message with a custom role, a function message, a
`remove` marker) become notes saying what they were, so the record shows them and
the active view stays valid. The LangChain id and type ride in `meta.langchain`; the
chat-history door adds the whole original there (`original`) to give it back exactly.
"""

from typing import Any

CHAT = {"human": "user", "system": "system"}


def _content(content: Any):
    """Text, or blocks with text blocks reduced to memoryui's {type, text}; None when empty."""
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, list):
        blocks = []
        for block in content:
            if isinstance(block, str):
                block = {"type": "text", "text": block}
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                if str(block.get("text") or "").strip():
                    blocks.append({"type": "text", "text": str(block["text"])})
            elif str(block.get("type") or "").strip():
                blocks.append(block)
        return blocks or None
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content)
    return ""


def to_message(lc: dict, *, original: bool = False) -> dict:
    """One memoryui message for one LangChain message dict."""
    kind = lc.get("type")
    meta: dict = {"langchain": {"id": lc.get("id"), "type": kind}}
    if original:
        meta["langchain"]["original"] = lc
    content = _content(lc.get("content"))
    if kind in CHAT:
        return {"kind": CHAT[kind], "content": content or "(empty)", "meta": meta}
    if kind in ("ai", "AIMessageChunk"):
        calls = [{"id": str(c.get("id") or f"call_{i}"), "name": str(c.get("name") or "tool"),
                  "arguments": c.get("args") if isinstance(c.get("args"), dict) else {}}
                 for i, c in enumerate(lc.get("tool_calls") or []) if isinstance(c, dict)]
        model = (lc.get("response_metadata") or {}).get("model_name")
        if model:
            meta["model"] = model
        if lc.get("usage_metadata"):
            meta["usage"] = lc["usage_metadata"]
        message = {"kind": "assistant", "content": content, "meta": meta}
        if calls:
            message["tool_calls"] = calls
        elif content is None:
            message["content"] = "(empty reply)"
        return message
    if kind == "tool":
        message = {"kind": "tool", "tool_call_id": str(lc.get("tool_call_id") or ""), "content": content or "(empty)",
                   "meta": meta}
        if lc.get("name"):
            message["name"] = str(lc["name"])
        if lc.get("status") == "error":
            message["is_error"] = True
        return message
    return {"kind": "note", "text": f"[{kind}] {_text(lc.get('content'))}".strip(), "meta": meta}
