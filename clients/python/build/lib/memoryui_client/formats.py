"""The active view in the request shapes of model APIs.

`to_openai_messages(view)` → the `messages` list of OpenAI's Chat Completions API.
`to_anthropic_messages(view)` → {"system": …, "messages": […]} for Anthropic's Messages API
(`client.messages.create(model=…, max_tokens=…, **to_anthropic_messages(view))`).

`view` is what `Memoryui.active()` returns (or GET /conversations/{id}/active): the
checkpoint's `handoff` comes first, then every item's message, in position order.

Mapping:

| memoryui kind | OpenAI | Anthropic |
|---|---|---|
| handoff (the checkpoint summary) | first `system` message | start of `system` |
| `system` | `system` message | appended to `system` |
| `user` | `user` (text, or content parts) | `user` (text or blocks) |
| `assistant` + `tool_calls` | `assistant` with `tool_calls` (arguments as a JSON string) | `assistant` with `text` and `tool_use` blocks (arguments as `input`) |
| `tool` | `tool` with `tool_call_id` | a `tool_result` block in a `user` message (`is_error` kept) |
| journal: `note`, `thought`, `heard`, `said`, `did`, `woke` | dropped (default) | dropped (default) |

The journal is an agent's record of its own inner life, not turns of the
conversation with the model, so by default it is left out. With
`journal="text"` each entry is kept as text tagged with its kind (`[note] …`):
a `system` message for OpenAI, a text block in the `user` turn for Anthropic.
Anthropic wants turns to alternate, so consecutive `user` content (a tool result
after another, a journal entry) is merged into one `user` message, and
consecutive `assistant` ones into one `assistant` message.
Content blocks other than text (images, documents) are passed through as stored.
"""

import json

JOURNAL_KINDS = ("note", "thought", "heard", "said", "did", "woke")
JOURNAL_MODES = ("drop", "text")


def _messages(view: dict) -> list[dict]:
    out = []
    if view.get("handoff"):
        out.append(view["handoff"])
    out += [item["message"] for item in view.get("items", ())]
    return out


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or () if isinstance(b, dict) and b.get("type") == "text")


def _check_mode(journal: str) -> None:
    if journal not in JOURNAL_MODES:
        raise ValueError(f"journal must be one of {', '.join(JOURNAL_MODES)}")


def _journal_text(message: dict) -> str:
    return f"[{message['kind']}] {message['text']}"


def to_openai_messages(view: dict, *, journal: str = "drop") -> list[dict]:
    """The active view as Chat Completions `messages` (see the module docstring)."""
    _check_mode(journal)
    out: list[dict] = []
    for m in _messages(view):
        kind = m.get("kind")
        if kind in ("system", "user"):
            out.append({"role": kind, "content": m["content"]})
        elif kind == "assistant":
            message = {"role": "assistant", "content": m.get("content")}
            if m.get("tool_calls"):
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {
                        "name": c["name"],
                        "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                        else json.dumps(c.get("arguments") or {}, ensure_ascii=False)}}
                    for c in m["tool_calls"]
                ]
            out.append(message)
        elif kind == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        elif kind in JOURNAL_KINDS and journal == "text":
            out.append({"role": "system", "content": _journal_text(m)})
    return out


def _blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [dict(b) for b in content or ()]


def to_anthropic_messages(view: dict, *, journal: str = "drop") -> dict:
    """The active view as {"system", "messages"} for the Messages API (see the module docstring)."""
    _check_mode(journal)
    system: list[str] = []
    turns: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})

    for m in _messages(view):
        kind = m.get("kind")
        if kind == "system":
            system.append(_text_of(m["content"]))
        elif kind == "user":
            add("user", _blocks(m["content"]))
        elif kind == "assistant":
            blocks = _blocks(m.get("content"))
            for c in m.get("tool_calls") or ():
                arguments = c.get("arguments")
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except ValueError:
                        arguments = {"arguments": arguments}
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["name"], "input": arguments or {}})
            add("assistant", blocks)
        elif kind == "tool":
            result = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if m.get("is_error"):
                result["is_error"] = True
            add("user", [result])
        elif kind in JOURNAL_KINDS and journal == "text":
            add("user", [{"type": "text", "text": _journal_text(m)}])
    request: dict = {"messages": turns}
    if system:
        request["system"] = "\n\n".join(s for s in system if s)
    return request
