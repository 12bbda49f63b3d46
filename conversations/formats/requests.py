"""The active view as request bodies the model APIs accept: the one set of rules the exports
(`openai-chat`, `anthropic`, `gemini`) and both clients' renderers follow.

`openai_body`, `anthropic_body` and `gemini_body` write what `settle` orders. The clients'
`to_openai_messages` / `to_anthropic_messages` / `to_gemini_contents` (clients/python and
clients/typescript, which cannot import the server) keep the same rules, and one
differential test renders every generated and every real conversation all three ways and
compares (tests/test_render_rules.py); the providers' own typed request models judge each
body (tests/provider_oracle.py).

- The handoff (a checkpoint's summary) comes first: OpenAI's first `system` message, the
  start of Anthropic's `system`, of Gemini's `systemInstruction`; `system` rows follow it.
- The journal (note, thought, heard, said, did, woke) is an agent's record of its own inner
  life, not a turn: left out, unless asked for (`journal="text"`), then kept as `[kind] text`
  (an OpenAI `system` message; text in the user turn for Anthropic and Gemini). Never as the
  user's words.
- A view with nothing to send (no message, no summary; or only journal rows left out) has no
  valid body: `NothingToSend`. One with only a summary or system text sends it, with a
  `(continued)` user turn where the API needs one. A `system` row is text in all three
  bodies, its other blocks named as `[<type> block]` (`openai_text`): a system row holding
  only an image sends `[image block]`, never nothing.
- A model name goes only into a body of its own provider (`provider_of`).

- One reply, one message: a reply stored over several adjacent assistant rows (older
  imports kept one row per tool call) is one assistant message with all its calls.
- Results right after their calls: the `tool` rows answering a reply follow it as one
  block; a journal entry (or a stray result) written between a call and its result
  comes after the block. A call without a result in the view gets an `is_error` result
  saying so; a result whose call is not in the view is sent as `[tool result …]` text.
- Each API's own content: Anthropic `image` blocks become OpenAI `image_url` parts and
  back; a block the API has no place for is sent as `[<type> block]` text.
- Anthropic: turns alternate starting with `user`, tool results open their user turn,
  tool ids outside `[a-zA-Z0-9_-]` are rewritten alike in the call and its result, and
  the last assistant text loses trailing white space.
"""

import json
import re

from ..errors import InvalidInput, NothingToSend
from ..message_schema import JOURNAL_KINDS
from .base import loads

NO_RESULT = "(no result was recorded for this call)"
CONTINUED = "(continued)"
JOURNAL_MODES = ("drop", "text")
NOTHING = ("the active view holds nothing a model could be sent (no message and no summary; journal rows are "
           "left out unless asked for)")
# Which provider a model name is of: its body alone carries it.
_PROVIDERS = (("anthropic", ("claude",)), ("gemini", ("gemini", "models/gemini")),
              ("openai", ("gpt", "chatgpt", "o1", "o3", "o4", "codex", "ft:gpt", "davinci", "text-")))


def provider_of(model) -> str | None:
    """"anthropic", "openai" or "gemini" for a model name of theirs, else None."""
    if not isinstance(model, str):
        return None
    name = model.strip().lower()
    for provider, prefixes in _PROVIDERS:
        if name.startswith(prefixes):
            return provider
    return None


def check_journal(journal: str) -> str:
    if journal not in JOURNAL_MODES:
        raise InvalidInput(f"journal must be one of {', '.join(JOURNAL_MODES)}", field="journal")
    return journal


def _chosen(rows, journal: str):
    """The rows a body is made of: journal rows left out unless kept as text."""
    check_journal(journal)
    return ((kind, m) for kind, m in rows if journal == "text" or kind not in JOURNAL_KINDS)


def settle(rows):
    """(kind, message) rows as request turns, in the order the APIs accept, yielded as
    they settle (a long view streams): ("system" | "user", message), ("assistant",
    {"content": [blocks], "tool_calls": [...], "meta": …}), ("results", [tool messages]),
    ("journal", message), ("orphan", tool message). Every journal row given is kept;
    leave out the ones not wanted before."""
    held: list[tuple[str, object]] = []  # journal entries and stray results met inside a call block
    state = {"reply": None, "open": [], "results": None}
    pending: list[tuple[str, object]] = []  # the reply being gathered, not yet yielded

    def close() -> list[tuple[str, object]]:
        reply, results = state["reply"], state["results"]
        if reply is not None and state["open"]:
            results = results if results is not None else []
            results += [{"kind": "tool", "tool_call_id": i, "content": NO_RESULT, "is_error": True}
                        for i in state["open"]]
        out = pending[:]
        if results:
            out.append(("results", results))
        out += held
        pending.clear()
        held.clear()
        state.update(reply=None, open=[], results=None)
        return out

    for kind, m in rows:
        if kind == "assistant":
            reply, calls = state["reply"], list(m.get("tool_calls") or ())
            if reply is not None and state["results"] is None and (reply["tool_calls"] or calls):
                reply["content"] += blocks_of(m.get("content"))  # the same reply, split over rows
                reply["tool_calls"] += calls
                state["open"] += [c["id"] for c in calls]
                continue
            yield from close()
            reply = {"content": blocks_of(m.get("content")), "tool_calls": calls, "meta": m.get("meta")}
            pending.append(("assistant", reply))
            state.update(reply=reply, open=[c["id"] for c in calls])
        elif kind == "tool":
            if m.get("tool_call_id") in state["open"]:
                state["open"].remove(m["tool_call_id"])
                state["results"] = (state["results"] or []) + [m]
                if not state["open"]:
                    yield from close()
            elif state["open"]:
                held.append(("orphan", m))
            else:
                yield from close()
                yield "orphan", m
        elif kind in JOURNAL_KINDS:
            if state["open"]:
                held.append(("journal", m))
            else:
                yield from close()
                yield "journal", m
        elif kind in ("system", "user"):
            yield from close()
            yield kind, m
    yield from close()


def blocks_of(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    return [dict(b) for b in content or () if isinstance(b, dict)]


def text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or () if isinstance(b, dict) and b.get("type") == "text")


def journal_text(message: dict) -> str:
    return f"[{message['kind']}] {message.get('text', '')}"


def orphan_text(message: dict) -> str:
    return f"[tool result {message.get('name') or message['tool_call_id']}] {text_of(message['content'])}"


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


# ---- OpenAI Chat Completions ---------------------------------------------------------------


def openai_user_content(content):
    if isinstance(content, str):
        return content
    parts = []
    for b in blocks_of(content):
        if b.get("type") in ("text", "image_url", "input_audio", "file"):
            parts.append(b)
        else:
            parts.append((_image_url_of(b) if b.get("type") == "image" else None) or _placeholder(b))
    return parts


def openai_text(content) -> str:
    """Text-only content (system, assistant, tool): a string, other blocks named."""
    return "\n\n".join(b["text"] if b.get("type") == "text" else _placeholder(b)["text"] for b in blocks_of(content))


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


def arguments_text(call: dict) -> str:
    arguments = call.get("arguments")
    return arguments if isinstance(arguments, str) else json.dumps(_js_numbers(arguments or {}), ensure_ascii=False)


def openai_messages(settled, *, journal_role: str = "system"):
    """Settled turns as Chat Completions messages, yielded one by one."""
    for turn, m in settled:
        if turn == "system":
            yield {"role": "system", "content": openai_text(m["content"])}
        elif turn == "user":
            yield {"role": "user", "content": openai_user_content(m["content"])}
        elif turn == "assistant":
            message = {"role": "assistant", "content": openai_text(m["content"]) or None}
            if m["tool_calls"]:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": arguments_text(c)}}
                    for c in m["tool_calls"]]
            if message["content"] is not None or m["tool_calls"]:
                yield message
        elif turn == "results":
            for r in m:
                yield {"role": "tool", "tool_call_id": r["tool_call_id"],
                       "content": openai_text(r["content"]) or "(empty result)"}
        elif turn == "journal":
            yield {"role": journal_role, "content": journal_text(m)}
        elif turn == "orphan":
            yield {"role": "user", "content": orphan_text(m)}


# ---- Anthropic Messages ----------------------------------------------------------------------

_ANTHROPIC_BLOCKS = ("text", "image", "document", "search_result")


def _anthropic_blocks(content) -> list[dict]:
    out = []
    for b in blocks_of(content):
        if b.get("type") in _ANTHROPIC_BLOCKS:
            out.append(b)
        else:
            out.append((_image_of(b) if b.get("type") == "image_url" else None) or _placeholder(b))
    return out


class AnthropicIds:
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


def _input_of(call: dict) -> dict:
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments)  # strict: "NaN" stays a string, never a NaN the body cannot carry
        except (ValueError, RecursionError):
            arguments = {"arguments": arguments}
    return arguments if isinstance(arguments, dict) else {"arguments": arguments}


def anthropic_messages(settled, *, lead: list[dict] | None = None) -> list[dict]:
    """Settled turns (without system ones) as alternating Messages API turns; `lead`:
    user blocks that open the conversation (the handoff, for the export)."""
    ids = AnthropicIds()
    turns: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})

    add("user", list(lead or ()))
    for turn, m in settled:
        if turn == "user":
            add("user", _anthropic_blocks(m["content"]))
        elif turn == "assistant":
            blocks = [b if b.get("type") == "text" else _placeholder(b) for b in blocks_of(m["content"])]
            blocks += [{"type": "tool_use", "id": ids(c["id"]), "name": c["name"], "input": _input_of(c)}
                       for c in m["tool_calls"]]
            add("assistant", blocks)
        elif turn == "results":
            add("user", [_tool_result_block(r, ids) for r in m])
        elif turn == "journal":
            add("user", [{"type": "text", "text": journal_text(m)}])
        elif turn == "orphan":
            add("user", [{"type": "text", "text": orphan_text(m)}])
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUED}]})
    if turns and turns[-1]["role"] == "assistant":
        _trim_final_text(turns[-1]["content"])
    return turns


def _tool_result_block(result: dict, ids) -> dict:
    content = result["content"] if isinstance(result["content"], str) else _anthropic_blocks(result["content"])
    block = {"type": "tool_result", "tool_use_id": ids(result["tool_call_id"]), "content": content}
    if result.get("is_error"):
        block["is_error"] = True
    return block


def _trim_final_text(last: list[dict]) -> None:
    """The Messages API refuses a final assistant turn ending in whitespace: trim it, or drop an empty block."""
    if last[-1].get("type") == "text" and last[-1]["text"] != last[-1]["text"].rstrip():
        if last[-1]["text"].strip():
            last[-1] = {**last[-1], "text": last[-1]["text"].rstrip()}
        elif len(last) > 1:
            last.pop()


# ---- the three bodies ------------------------------------------------------------------------


def openai_body(rows, handoff: str | None, *, journal: str = "drop"):
    """Chat Completions messages, yielded one by one (a long view streams); NothingToSend,
    before anything is yielded, when there is nothing to send."""
    messages = openai_messages(settle(_chosen(rows, journal)), journal_role="system")
    first = next(messages, None)
    if handoff:
        yield {"role": "system", "content": handoff}
    elif first is None:
        raise NothingToSend(NOTHING)
    if first is not None:
        yield first
        yield from messages


def _system_and_turns(rows, handoff: str | None, journal: str) -> tuple[list[str], list]:
    system = [handoff] if handoff else []
    settled = []
    for turn, m in settle(_chosen(rows, journal)):
        if turn == "system":
            # Named as OpenAI's system message names them: an image dropped here unsaid would
            # be a prompt the model never saw, and no sign that it was left out.
            system.append(openai_text(m.get("content")))
        else:
            settled.append((turn, m))
    return [s for s in system if s.strip()], settled


def anthropic_body(rows, handoff: str | None, *, journal: str = "drop") -> dict:
    """{"system"?, "messages"} for the Messages API."""
    system, settled = _system_and_turns(rows, handoff, journal)
    messages = anthropic_messages(settled)
    if not messages:
        if not system:
            raise NothingToSend(NOTHING)
        messages = [{"role": "user", "content": [{"type": "text", "text": CONTINUED}]}]
    body = {"system": "\n\n".join(system)} if system else {}
    body["messages"] = messages
    return body


def gemini_body(rows, handoff: str | None, *, journal: str = "drop") -> dict:
    """{"systemInstruction"?, "contents"} for Gemini's generateContent (its REST form)."""
    system, settled = _system_and_turns(rows, handoff, journal)
    contents = gemini_contents(settled)
    if not contents:
        if not system:
            raise NothingToSend(NOTHING)
        contents = [{"role": "user", "parts": [{"text": CONTINUED}]}]
    body = {"systemInstruction": {"parts": [{"text": "\n\n".join(system)}]}} if system else {}
    body["contents"] = contents
    return body


# ---- Gemini ----------------------------------------------------------------------------------


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
    return [p for p in (_gemini_part(b) for b in blocks_of(content)) if p.get("text", True) != ""]


def _response_of(result: dict) -> dict:
    text = openai_text(result["content"]) or "(empty result)"
    return {"error": text} if result.get("is_error") else {"output": text}


def gemini_contents(settled) -> list[dict]:
    """Settled turns (without system ones) as Gemini contents: `user` and `model` turns, a
    reply's calls as `functionCall` parts answered by `functionResponse` parts (by name and
    id) at the start of the next user turn."""
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
                     for b in blocks_of(m["content"])]
            for c in m["tool_calls"]:
                names[c["id"]] = c["name"]
                parts.append({"functionCall": {"id": c["id"], "name": c["name"], "args": _input_of(c)}})
            add("model", parts)
        elif turn == "results":
            add("user", [{"functionResponse": {"id": r["tool_call_id"],
                                               "name": names.get(r["tool_call_id"]) or r.get("name") or "tool",
                                               "response": _response_of(r)}} for r in m])
        elif turn == "journal":
            add("user", [{"text": journal_text(m)}])
        elif turn == "orphan":
            add("user", [{"text": orphan_text(m)}])
    if turns and turns[0]["role"] == "model":
        turns.insert(0, {"role": "user", "parts": [{"text": CONTINUED}]})
    return turns
