"""The active view in the request shapes of model APIs.

`to_openai_messages(view)` → the `messages` list of OpenAI's Chat Completions API.
`to_anthropic_messages(view)` → {"system": …, "messages": […]} for Anthropic's Messages API
(`client.messages.create(model=…, max_tokens=…, **to_anthropic_messages(view))`).
`to_gemini_contents(view)` → {"systemInstruction": …, "contents": […]}, Gemini's generateContent
body (`client.models.generate_content(model=…, contents=body["contents"],
config={"system_instruction": body["systemInstruction"]})` with google-genai).

The server's exports (`openai-chat`, `anthropic`, `gemini`) follow the same rules, and a test
renders every conversation both ways and compares (tests/test_render_rules.py).

`view` is what `Memoryui.active()` returns (or GET /conversations/{id}/active): the
checkpoint's `handoff` comes first, then every item's message, in position order.

Mapping:

| memoryui kind | OpenAI | Anthropic |
|---|---|---|
| handoff (the checkpoint summary) | first `system` message | start of `system` |
| `system` | `system` message | appended to `system` (an image or other block as `[image block]` text) |
| `user` | `user` (text, or content parts) | `user` (text or blocks) |
| `assistant` + `tool_calls` | `assistant` + `tool_calls` (arguments as JSON text) | `assistant`, `tool_use` (`input`) |
| `tool` | `tool` with `tool_call_id` | a `tool_result` block in a `user` message (`is_error` kept) |
| journal: `note`, `thought`, `heard`, `said`, `did`, `woke` | dropped (default) | dropped (default) |

Gemini: the handoff and `system` rows make `systemInstruction`; `user` and `model` turns; a
reply's calls are `functionCall` parts (`args`), answered by `functionResponse` parts (matched by
name and id; `{"output": …}`, or `{"error": …}` for an error) at the start of the next user turn.

A view with nothing to send (no message and no handoff, or only journal rows left out) raises
`NothingToSend`: no body would be valid. A view with only a handoff or system text sends it, with
a `(continued)` user turn where Anthropic and Gemini need one; a `system` row holding only an
image is such text (`[image block]`), never dropped.

The journal is an agent's record of its own inner life, not turns of the
conversation with the model, so by default it is left out. With
`journal="text"` each entry is kept as text tagged with its kind (`[note] …`):
a `system` message for OpenAI, a text block in the `user` turn for Anthropic.

Every body is one the API accepts (the tests judge it with each SDK's typed
request params and the API's rules across messages):

- One reply, one message. A reply stored over several adjacent assistant rows (older
  imports kept one row per tool call) is sent as one assistant message with all its
  calls; its text parts are joined.
- Results right after their calls. The `tool` rows answering a reply's calls follow it
  as one block; a journal entry (or a stray result) written between a call and its
  result is sent after the block, never inside it. A call the view holds no result for
  gets an `is_error` result saying so, and a result whose call is not in the view (a
  fold made before folds respected calls) is sent as `[tool result …]` user text.
- Each API's own content. Anthropic `image` blocks become OpenAI `image_url` parts and
  back; a block the API has no place for is sent as `[<type> block]` text.
- Anthropic: turns alternate starting with `user` (consecutive user content, a tool
  result after another, a journal entry, is merged into one `user` message; a view that
  starts with the assistant gets a `(continued)` user turn first), tool results open
  their user turn, tool ids outside `[a-zA-Z0-9_-]` are rewritten the same way in the
  call and its result, and the last assistant text loses trailing white space.
"""

import json
import re


class NothingToSend(ValueError):
    """The view holds nothing a model could be sent: no request body would be valid."""


NOTHING = ("the active view holds nothing a model could be sent (no message and no summary; journal rows are "
           "left out unless asked for)")

# BEGIN generated from conversations/message_schema.py by tools/client_rules.py, do not edit by hand
CHAT_KINDS = ("user", "assistant", "tool", "system")
JOURNAL_KINDS = ("note", "thought", "heard", "said", "did", "woke")
KINDS = CHAT_KINDS + JOURNAL_KINDS
# The fields a message of each kind must carry, and those it may (an assistant message
# needs `content` or `tool_calls`); any other field is refused.
KIND_FIELDS = {
    "user": {"required": ("content",), "optional": ("meta",)},
    "assistant": {"required": (), "optional": ("meta", "content", "tool_calls")},
    "tool": {"required": ("tool_call_id", "content"), "optional": ("meta", "name", "is_error")},
    "system": {"required": ("content",), "optional": ("meta",)},
    "note": {"required": ("text",), "optional": ("meta",)},
    "thought": {"required": ("text",), "optional": ("meta",)},
    "heard": {"required": ("text",), "optional": ("meta",)},
    "said": {"required": ("text",), "optional": ("meta",)},
    "did": {"required": ("text",), "optional": ("meta",)},
    "woke": {"required": ("text",), "optional": ("meta",)},
}
BATCH_MAX = 1000  # messages in one append
SESSION_ITEMS_MAX = 1000  # items in one batch of a session
NAMESPACE_MAX = 200  # characters of a conversation's namespace
# END of the generated block
JOURNAL_MODES = ("drop", "text")
NO_RESULT = "(no result was recorded for this call)"
CONTINUED = "(continued)"


def _messages(view: dict) -> list[dict]:
    return [item["message"] for item in view.get("items", ())]


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or () if isinstance(b, dict) and b.get("type") == "text")


def _check_mode(journal: str) -> None:
    if journal not in JOURNAL_MODES:
        raise ValueError(f"journal must be one of {', '.join(JOURNAL_MODES)}")


def _journal_text(message: dict) -> str:
    return f"[{message['kind']}] {message['text']}"


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{text} is out of range")
    return value


def _loads(text: str):
    """Strict JSON: "NaN" or "1e999" stay strings, never a number the body cannot carry."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)


def _orphan_text(message: dict) -> str:
    return f"[tool result {message.get('name') or message['tool_call_id']}] {_text_of(message['content'])}"


def _close_block(state: dict, out: list, held: list) -> None:
    """Ends the open call block: its results (a missing one answered as an error), then what was held."""
    reply, results = state["reply"], state["results"]
    if reply is not None and state["open"]:
        results = results if results is not None else []
        results += [{"kind": "tool", "tool_call_id": i, "content": NO_RESULT, "is_error": True}
                    for i in state["open"]]
    if results:
        out.append(("results", results))
    out.extend(held)
    held.clear()
    state.update(reply=None, open=[], results=None)


def _aside(state: dict, out: list, held: list, tag: str, m: dict) -> None:
    """A row outside the call block: held back while calls are open, else placed now."""
    if state["open"]:
        held.append((tag, m))
    else:
        _close_block(state, out, held)
        out.append((tag, m))


def settle(messages, *, journal: str = "drop") -> list[tuple[str, object]]:
    """The rows of a view as request turns, in the order the APIs accept:
    ("system" | "user", message), ("assistant", {"content": [blocks], "tool_calls": [...]}),
    ("results", [tool messages]), ("journal", message), ("orphan", tool message)."""
    out: list[tuple[str, object]] = []
    held: list[tuple[str, object]] = []  # journal entries and stray results met inside a call block
    state = {"reply": None, "open": [], "results": None}

    def close() -> None:
        _close_block(state, out, held)

    def aside(tag: str, m: dict) -> None:
        _aside(state, out, held, tag, m)

    for m in messages:
        kind = m.get("kind")
        if kind == "assistant":
            reply, calls = state["reply"], list(m.get("tool_calls") or ())
            if reply is not None and state["results"] is None and (reply["tool_calls"] or calls):
                reply["content"] += _blocks(m.get("content"))  # the same reply, split over rows
                reply["tool_calls"] += calls
                state["open"] += [c["id"] for c in calls]
                continue
            close()
            reply = {"content": _blocks(m.get("content")), "tool_calls": calls}
            out.append(("assistant", reply))
            state.update(reply=reply, open=[c["id"] for c in calls])
            if not calls:
                state["reply"] = reply  # a text reply may still be followed by its calls
        elif kind == "tool":
            if m.get("tool_call_id") in state["open"]:
                state["open"].remove(m["tool_call_id"])
                state["results"] = (state["results"] or []) + [m]
                if not state["open"]:
                    close()
            else:
                aside("orphan", m)
        elif kind in JOURNAL_KINDS:
            if journal == "text":
                aside("journal", m)
        elif kind in ("system", "user"):
            close()
            out.append((kind, m))
    close()
    return out


def _blocks(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    return [dict(b) for b in content or () if isinstance(b, dict)]


def _placeholder(block: dict) -> dict:
    return {"type": "text", "text": f"[{block.get('type')} block]"}


def _image_url_of(block: dict) -> dict | None:
    """An Anthropic image block as an OpenAI image_url part."""
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return {"type": "image_url", "image_url": {"url": source["url"]}}
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        media = source.get("media_type") or "image/png"
        return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{source['data']}"}}
    return None


def _image_of(part: dict) -> dict | None:
    """An OpenAI image_url part as an Anthropic image block."""
    image = part.get("image_url") if isinstance(part.get("image_url"), dict) else {}
    url = image.get("url")
    if not isinstance(url, str):
        return None
    found = re.match(r"data:(image/[a-z]+);base64,(.*)$", url, re.S)
    if found:
        return {"type": "image", "source": {"type": "base64", "media_type": found[1], "data": found[2]}}
    return {"type": "image", "source": {"type": "url", "url": url}}


# ---- OpenAI ------------------------------------------------------------------------------


def _openai_user_content(content):
    if isinstance(content, str):
        return content
    parts = []
    for b in _blocks(content):
        if b.get("type") in ("text", "image_url", "input_audio", "file"):
            parts.append(b)
        else:
            parts.append((_image_url_of(b) if b.get("type") == "image" else None) or _placeholder(b))
    return parts


def _openai_text(content):
    """Text-only content (system, assistant, tool): a string, other blocks named."""
    blocks = [b if b.get("type") == "text" else _placeholder(b) for b in _blocks(content)]
    return "\n\n".join(b["text"] for b in blocks)


def _system_rows(settled) -> list[str]:
    """The text of each `system` row, its other blocks named as OpenAI's system message names
    them: an image left out unsaid would be a prompt the model never saw."""
    return [_openai_text(m["content"]) for turn, m in settled if turn == "system"]


def _js_numbers(value):
    """Integral floats as integers: JavaScript keeps no `.0`, so the TypeScript client writes
    `149` for a stored `149.0`; both sides write the same arguments text."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_numbers(v) for v in value]
    return value


def _arguments_text(call: dict) -> str:
    arguments = call.get("arguments")
    return arguments if isinstance(arguments, str) else json.dumps(_js_numbers(arguments or {}), ensure_ascii=False)


def to_openai_messages(view: dict, *, journal: str = "drop") -> list[dict]:
    """The active view as Chat Completions `messages` (see the module docstring)."""
    _check_mode(journal)
    out: list[dict] = []
    if view.get("handoff"):
        out.append({"role": "system", "content": _openai_text(view["handoff"]["content"])})
    for turn, m in settle(_messages(view), journal=journal):
        if turn == "system":
            out.append({"role": "system", "content": _openai_text(m["content"])})
        elif turn == "user":
            out.append({"role": "user", "content": _openai_user_content(m["content"])})
        elif turn == "assistant":
            message = {"role": "assistant", "content": _openai_text(m["content"]) or None}
            if m["tool_calls"]:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"], "arguments": _arguments_text(c)}}
                    for c in m["tool_calls"]]
            if message["content"] is not None or m["tool_calls"]:
                out.append(message)
        elif turn == "results":
            out += [{"role": "tool", "tool_call_id": r["tool_call_id"], "content": _openai_text(r["content"]) or
                     "(empty result)"} for r in m]
        elif turn == "journal":
            out.append({"role": "system", "content": _journal_text(m)})
        elif turn == "orphan":
            out.append({"role": "user", "content": _orphan_text(m)})
    if not out:
        raise NothingToSend(NOTHING)
    return out


# ---- Anthropic ---------------------------------------------------------------------------

_ANTHROPIC_USER_BLOCKS = ("text", "image", "document", "search_result")
_ANTHROPIC_RESULT_BLOCKS = ("text", "image", "document", "search_result")


def _anthropic_blocks(content, allowed) -> list[dict]:
    out = []
    for b in _blocks(content):
        if b.get("type") in allowed:
            out.append(b)
        else:
            out.append((_image_of(b) if b.get("type") == "image_url" else None) or _placeholder(b))
    return out


class _Ids:
    """Tool ids as Anthropic takes them (`^[a-zA-Z0-9_-]+$`), the same for a call and its result."""

    def __init__(self):
        self.map: dict[str, str] = {}

    def __call__(self, original: str) -> str:
        if original not in self.map:
            safe = re.sub(r"[^a-zA-Z0-9_-]", "_", original) or "_"
            taken = set(self.map.values())
            candidate, n = safe, 1
            while candidate in taken:
                n += 1
                candidate = f"{safe}_{n}"
            self.map[original] = candidate
        return self.map[original]


def anthropic_turns(settled, *, ids=None) -> list[dict]:
    """Settled turns (see `settle`) as alternating Messages API turns, without `system`."""
    ids = ids or _Ids()
    turns: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})

    for turn, m in settled:
        if turn == "user":
            add("user", _anthropic_blocks(m["content"], _ANTHROPIC_USER_BLOCKS))
        elif turn == "assistant":
            blocks = [b if b.get("type") == "text" else _placeholder(b) for b in _blocks(m["content"])]
            blocks += [{"type": "tool_use", "id": ids(c["id"]), "name": c["name"], "input": _tool_input(c)}
                       for c in m["tool_calls"]]
            add("assistant", blocks)
        elif turn == "results":
            add("user", [_tool_result_block(r, ids) for r in m])
        elif turn == "journal":
            add("user", [{"type": "text", "text": _journal_text(m)}])
        elif turn == "orphan":
            add("user", [{"type": "text", "text": _orphan_text(m)}])
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUED}]})
    if turns and turns[-1]["role"] == "assistant":
        _trim_final_text(turns[-1]["content"])
    return turns


def _tool_input(call: dict) -> dict:
    """A call's arguments as a tool_use `input` object (JSON text parsed; anything else wrapped)."""
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = _loads(arguments)
        except (ValueError, RecursionError):
            arguments = {"arguments": arguments}
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return arguments


def _tool_result_block(result: dict, ids) -> dict:
    content = result["content"] if isinstance(result["content"], str) else \
        _anthropic_blocks(result["content"], _ANTHROPIC_RESULT_BLOCKS)
    block = {"type": "tool_result", "tool_use_id": ids(result["tool_call_id"]), "content": content}
    if result.get("is_error"):
        block["is_error"] = True
    return block


def _trim_final_text(last: list[dict]) -> None:
    """The Messages API refuses a final assistant turn ending in whitespace: trim it, or drop an empty block."""
    if last[-1].get("type") == "text":
        text = last[-1]["text"].rstrip()
        if text:
            last[-1] = {**last[-1], "text": text}
        elif len(last) > 1:
            last.pop()


def to_anthropic_messages(view: dict, *, journal: str = "drop") -> dict:
    """The active view as {"system", "messages"} for the Messages API (see the module docstring)."""
    _check_mode(journal)
    system = [_text_of(view["handoff"]["content"])] if view.get("handoff") else []
    settled = settle(_messages(view), journal=journal)
    system = [s for s in system + _system_rows(settled) if s.strip()]
    messages = anthropic_turns([(t, m) for t, m in settled if t != "system"])
    if not messages:
        if not system:
            raise NothingToSend(NOTHING)
        messages = [{"role": "user", "content": [{"type": "text", "text": CONTINUED}]}]
    request: dict = {"system": "\n\n".join(system)} if system else {}
    request["messages"] = messages
    return request


# ---- Gemini ------------------------------------------------------------------------------


def _gemini_part(block: dict) -> dict:
    kind = block.get("type")
    if kind == "text":
        return {"text": block.get("text", "")}
    if kind == "image":
        source = block.get("source") if isinstance(block.get("source"), dict) else {}
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            return {"inlineData": {"mimeType": source.get("media_type") or "image/png", "data": source["data"]}}
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return {"fileData": {"fileUri": source["url"]}}
    if kind == "image_url":
        image = _image_of(block)
        if image is not None:
            return _gemini_part(image)
    return {"text": _placeholder(block)["text"]}


def _gemini_parts(content) -> list[dict]:
    return [p for p in (_gemini_part(b) for b in _blocks(content)) if p.get("text", True) != ""]


def gemini_contents(settled) -> list[dict]:
    """Settled turns (see `settle`), without `system`, as Gemini `user` / `model` contents."""
    turns: list[dict] = []
    names: dict[str, str] = {}

    def add(role: str, parts: list[dict]) -> None:
        if not parts:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["parts"] += parts
        else:
            turns.append({"role": role, "parts": parts})

    for turn, m in settled:
        if turn == "user":
            add("user", _gemini_parts(m["content"]))
        elif turn == "assistant":
            parts = [{"text": b["text"]} if b.get("type") == "text" else {"text": _placeholder(b)["text"]}
                     for b in _blocks(m["content"])]
            for c in m["tool_calls"]:
                names[c["id"]] = c["name"]
                parts.append({"functionCall": {"id": c["id"], "name": c["name"], "args": _tool_input(c)}})
            add("model", parts)
        elif turn == "results":
            add("user", [{"functionResponse": {
                "id": r["tool_call_id"], "name": names.get(r["tool_call_id"]) or r.get("name") or "tool",
                "response": ({"error": _openai_text(r["content"]) or "(empty result)"} if r.get("is_error")
                             else {"output": _openai_text(r["content"]) or "(empty result)"})}} for r in m])
        elif turn == "journal":
            add("user", [{"text": _journal_text(m)}])
        elif turn == "orphan":
            add("user", [{"text": _orphan_text(m)}])
    if turns and turns[0]["role"] == "model":
        turns.insert(0, {"role": "user", "parts": [{"text": CONTINUED}]})
    return turns


def to_gemini_contents(view: dict, *, journal: str = "drop") -> dict:
    """The active view as Gemini's generateContent body: {"systemInstruction"?, "contents"}."""
    _check_mode(journal)
    system = [_text_of(view["handoff"]["content"])] if view.get("handoff") else []
    settled = settle(_messages(view), journal=journal)
    system = [s for s in system + _system_rows(settled) if s.strip()]
    contents = gemini_contents([(t, m) for t, m in settled if t != "system"])
    if not contents:
        if not system:
            raise NothingToSend(NOTHING)
        contents = [{"role": "user", "parts": [{"text": CONTINUED}]}]
    body: dict = {"systemInstruction": {"parts": [{"text": "\n\n".join(system)}]}} if system else {}
    body["contents"] = contents
    return body
