"""OpenAI Chat Completions message arrays.

Accepted: a JSON array of messages, a request body `{"model", "messages": [...], …}`,
or JSONL with one message per line; or a response (`{"object": "chat.completion",
"choices": [...], "usage", …}`): one assistant turn, its first choice's message, with the
model, usage, id and finish reason in its meta (other choices are reported, kept).
Roles map to kinds (`developer` → `system`,
legacy `function` → `tool`); `tool_calls[].function` → tool calls whose arguments
stay the string the model wrote; text parts → text, other parts (`image_url`,
`input_audio`, `file`) stay content blocks. Each message is kept whole as an
entry, and the request's other fields in a first entry, so rendering back gives
the same document.

Export (`render`) writes the active view: the handoff summary as the first
`system` message, then the rows as a request the API accepts (`requests.py`): a reply
split over several assistant rows is one message with all its tool calls, and the
results follow their calls directly.
"""

import json

from . import requests
from .base import (
    Entry,
    FormatError,
    Plan,
    Problem,
    clean_text,
    content_blocks,
    content_hash,
    dumps,
    first_text,
    make_row,
    messages_and_envelope,
    parse_document_or_lines,
    parse_time,
    render_messages_document,
)

NAME = "openai-chat"
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
         "function": "tool"}


def _messages(data) -> tuple[list, dict | None]:
    return messages_and_envelope(data, "a JSON array of chat messages (or a request body with messages)")


def is_response(data) -> bool:
    return isinstance(data, dict) and "messages" not in data and isinstance(data.get("choices"), list) and (
        data.get("object") == "chat.completion" or any(isinstance(c, dict) and isinstance(c.get("message"), dict)
                                                         for c in data["choices"]))


def detect_document(data) -> bool:
    if is_response(data):
        return True
    try:
        messages, envelope = _messages(data)
    except FormatError:
        return False
    if not messages or not all(isinstance(m, dict) and m.get("role") in ROLES for m in messages):
        return False
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(
                isinstance(p, dict) and p.get("type") in ("tool_use", "tool_result", "thinking", "input_text",
                                                          "output_text", "compaction") for p in content):
            return False
    return True


def _content(content):
    if isinstance(content, str):
        text = clean_text(content)
        return text if text and text.strip() else None
    if not isinstance(content, list):
        return None
    return content_blocks(content) or None


def _calls(m: dict, entry: Entry, problems: list) -> list:
    """An assistant message's `tool_calls`, then its legacy `function_call`, as memoryui calls."""
    calls = []
    for call in m.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(call.get("id"), str) and call["id"] and isinstance(
                fn.get("name"), str) and fn["name"]:
            args = fn.get("arguments", {})
            calls.append({"id": call["id"], "name": fn["name"],
                          "arguments": args if isinstance(args, (str, dict)) else {}})
        else:
            problems.append(Problem(entry.line, "tool call without id or function name; kept, not shown"))
    fc = m.get("function_call")
    if isinstance(fc, dict) and isinstance(fc.get("name"), str) and fc["name"]:
        calls.append({"id": f"function_call_{entry.seq}", "name": fc["name"],
                      "arguments": fc.get("arguments") if isinstance(fc.get("arguments"), (str, dict)) else {}})
    return calls


def message_rows(m: dict, entry: Entry, problems: list) -> list:
    role = m.get("role")
    kind = ROLES.get(role)
    meta = {"openai": {"entry": entry.seq}}
    if role in ("developer", "function"):
        meta["openai"]["role"] = role
    content = _content(m.get("content"))
    at = parse_time(m.get("created_at") or m.get("timestamp"))
    out = None
    if kind in ("system", "user"):
        if content is not None:
            out = {"kind": kind, "content": content}
    elif kind == "assistant":
        calls = _calls(m, entry, problems)
        if content is None and isinstance(m.get("refusal"), str) and m["refusal"].strip():
            content = clean_text(m["refusal"])
            meta["openai"]["refusal"] = True
        if content is not None or calls:
            out = {"kind": "assistant"}
            if content is not None:
                out["content"] = content
            if calls:
                out["tool_calls"] = calls
    elif kind == "tool":
        call_id = m.get("tool_call_id") or (f"function:{m.get('name')}" if role == "function" else None)
        if isinstance(call_id, str) and call_id:
            out = {"kind": "tool", "tool_call_id": call_id, "content": content or "(empty result)"}
            if isinstance(m.get("name"), str) and m["name"]:
                out["name"] = m["name"]
        else:
            problems.append(Problem(entry.line, "tool message without tool_call_id; kept, not shown"))
    else:
        problems.append(Problem(entry.line, f"unknown role {str(role)[:40]!r}; kept, not shown"))
    if out is None:
        return []
    out["meta"] = meta
    row = make_row(out, at, entry.seq, problems, entry.line)
    return [row] if row else []


def parse_response(data: dict, raw_text: str, *, subject: str = "") -> Plan:
    """A Chat Completions response: its first choice's message, one assistant turn."""
    plan = Plan(format=NAME, source_key=content_hash(raw_text))
    model = data.get("model") if isinstance(data.get("model"), str) else None
    conv = plan.add_main(subject=subject, meta={"openai": {"response": True}, **({"model": model} if model else {})})
    entry = Entry(seq=0, line=None, raw=dumps({"response": data}), conv="main")
    plan.entries.append(entry)
    choices = [c for c in data["choices"] if isinstance(c, dict)]
    first = choices[0] if choices else None
    message = first.get("message") if first else None
    if not isinstance(message, dict):
        plan.problems.append(Problem(None, "the response has no choice with a message; kept, not shown"))
        return plan
    at = parse_time(data.get("created"))
    for row in message_rows({**message, "role": message.get("role") or "assistant"}, entry, plan.problems):
        out = row.message
        own = {**out["meta"]["openai"], "response": True}
        for field in ("id", "system_fingerprint"):
            if isinstance(data.get(field), str):
                own[field] = data[field]
        if isinstance(first.get("finish_reason"), str):
            own["finish_reason"] = first["finish_reason"]
        meta = {**out["meta"], "openai": own}
        if model and out["kind"] == "assistant":
            meta["model"] = model
        if isinstance(data.get("usage"), dict) and out["kind"] == "assistant":
            meta["usage"] = data["usage"]
        conv.rows.append(make_row({**out, "meta": meta}, row.at or at, row.entry, plan.problems, None) or row)
    for other in choices[1:]:
        said = other.get("message") if isinstance(other.get("message"), dict) else {}
        text = first_text(said.get("content"), limit=200)
        plan.problems.append(Problem(None, f"choice {other.get('index', '?')} of the response is not imported "
                                           f"(the first choice is the assistant turn); kept in the original entry"
                                           f"{': ' + text if text else ''}"))
    entry.position = conv.last_position
    conv.title = first_text(message.get("content")) or f"Chat completion {str(data.get('id') or '')[:40]}".strip()
    return plan


def parse_document(data, raw_text: str, *, subject: str = "") -> Plan:
    if is_response(data):
        return parse_response(data, raw_text, subject=subject)
    messages, envelope = _messages(data)
    plan = Plan(format=NAME, source_key=content_hash(raw_text))
    conv = plan.add_main(subject=subject, meta={})
    seq = 0
    if envelope is not None:
        plan.entries.append(Entry(seq=0, line=None, raw=dumps({"envelope": envelope}), conv="main"))
        seq = 1
        if isinstance(envelope.get("model"), str):
            conv.meta["model"] = envelope["model"]
    for i, m in enumerate(messages):
        entry = Entry(seq=seq + i, line=i + 1, raw=dumps(m), conv="main")
        plan.entries.append(entry)
        if isinstance(m, dict):
            conv.rows.extend(message_rows(m, entry, plan.problems))
            if not conv.title and m.get("role") == "user":
                conv.title = first_text(m.get("content"))
        else:
            plan.problems.append(Problem(i + 1, "message is not a JSON object; kept, not shown"))
        entry.position = conv.last_position
    return plan


def parse(data, *, subject: str = "") -> Plan:
    return parse_document_or_lines(data, parse_document, subject=subject)


# ---- rendering -----------------------------------------------------------------------


render_document = render_messages_document


def render(active_rows, handoff: str | None, *, journal: str = "drop"):
    """Chunks of a JSON array: the active view as Chat Completions messages (formats/requests.py:
    the handoff first, one reply one assistant message, results right after their calls, the
    journal left out unless `journal="text"`). NothingToSend, before the first chunk, when the
    view has nothing to send."""
    messages = requests.openai_body(active_rows, handoff, journal=journal)
    first = next(messages)
    yield "[\n" + json.dumps(first, ensure_ascii=False)
    for message in messages:
        yield ",\n" + json.dumps(message, ensure_ascii=False)
    yield "\n]\n"
