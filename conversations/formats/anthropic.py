"""Anthropic Messages API request and response bodies.

Accepted: `{"model", "system", "messages": [...], …}` or a bare array of messages; or a
response (`{"type": "message", "role": "assistant", "content", "usage", …}`), which is
one assistant turn (its thinking as `thought` rows before it) with the model, usage,
id and stop reason in its meta.
`system` (a string or text blocks) → a `system` row first; in messages, `text`
blocks → content, `tool_use` → tool calls, `tool_result` → `tool` rows,
`thinking` → `thought`, `image`/`document`/others stay content blocks, and a
`compaction` block → a checkpoint after the rows before it, whose summary is the
block's content. Each message is kept whole as an entry, and the request's
other fields in a first entry.

Export (`render`) writes the active view as a request body ready to send again:
the handoff summary first (as the first user turn), `system` rows in `system`,
and the rest as `requests.py` settles it: one reply one message, tool results
opening the next user turn, consecutive rows of one role merged, as the API wants.
"""

import json

from . import requests
from .base import (
    ConvPlan,
    Entry,
    Fold,
    FormatError,
    Plan,
    Problem,
    clean_text,
    content_hash,
    decode_text,
    dumps,
    first_text,
    loads,
    make_row,
    messages_and_envelope,
    parse_time,
    render_messages_document,
)

NAME = "anthropic"
BLOCKS = {"text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document", "compaction",
          "server_tool_use", "web_search_tool_result", "search_result", "container_upload", "mcp_tool_use",
          "mcp_tool_result"}


def _messages(data) -> tuple[list, dict | None]:
    return messages_and_envelope(data, "an Anthropic Messages request body (an object with messages)")


def is_response(data) -> bool:
    return isinstance(data, dict) and data.get("type") == "message" and data.get("role") == "assistant" and \
        isinstance(data.get("content"), list) and "messages" not in data


def detect_document(data) -> bool:
    if is_response(data):
        return True
    try:
        messages, envelope = _messages(data)
    except FormatError:
        return False
    if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in messages):
        return False
    if envelope is not None and ("max_tokens" in envelope or "system" in envelope):
        return True
    return any(isinstance(m.get("content"), list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result", "thinking", "compaction", "image")
        and "image_url" not in b for b in m["content"]) for m in messages)


def _text_blocks(value):
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return "\n\n".join(b.get("text", "") for b in value if isinstance(b, dict) and isinstance(b.get("text"), str))
    return None


def message_rows(m: dict, entry: Entry, conv: ConvPlan, problems: list, model: str | None, *,
                 make=make_row) -> None:
    """The rows of one message into `conv`. `make` validates and encodes each (`make_row`'s
    arguments): a format that wraps this mapping (Cline) dresses the message there, so each
    row is encoded once."""
    role = m.get("role")
    content = m.get("content")
    at = parse_time(m.get("created_at"))
    meta = {"anthropic": {"entry": entry.seq}}
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        problems.append(Problem(entry.line, "message without content; kept, not shown"))
        return
    parts, calls = [], []

    def flush():
        nonlocal parts, calls
        if parts or calls:
            _append(_content_row(role, meta, parts, calls, model), at, entry, conv, problems, make)
        parts, calls = [], []

    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str) or not block["type"].strip():
            continue
        btype = block["type"]
        if btype == "text":
            text = clean_text(block.get("text"))
            if text and text.strip():
                parts.append({"type": "text", "text": text})
        elif btype == "tool_use" and role == "assistant":
            _tool_use(block, calls, entry, problems)
        elif btype == "tool_result":
            flush()
            _tool_result_row(block, at, meta, entry, conv, problems, make)
        elif btype == "thinking":
            flush()
            _thinking_row(block, at, meta, entry, conv, problems, make)
        elif btype == "redacted_thinking":
            continue
        elif btype == "compaction":
            flush()
            _compaction(block, at, entry, conv, problems, make)
        else:
            if btype not in BLOCKS:
                problems.append(Problem(entry.line, f"unknown content block type {btype[:40]!r}; kept as a block"))
            parts.append(block)
    flush()


def _content_row(role, meta: dict, parts: list, calls: list, model: str | None) -> dict:
    """The message a run of content blocks and calls makes (a user's calls are kept as a plain user row)."""
    out = {"kind": role, "meta": dict(meta)}
    if parts:
        out["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
    if calls:
        out["tool_calls"] = calls
    if role == "assistant" and model:
        out["meta"]["model"] = model
    if role == "user" and calls:
        out = {"kind": "user", "content": parts or "(tool calls)", "meta": meta}
    return out


def _append(message: dict, at, entry: Entry, conv: ConvPlan, problems: list, make=make_row) -> None:
    row = make(message, at, entry.seq, problems, entry.line)
    if row:
        conv.rows.append(row)


def _thinking_row(block: dict, at, meta: dict, entry: Entry, conv: ConvPlan, problems: list, make=make_row) -> None:
    text = clean_text(block.get("thinking"))
    if text and text.strip():
        _append({"kind": "thought", "text": text, "meta": meta}, at, entry, conv, problems, make)


def _tool_use(block: dict, calls: list, entry: Entry, problems: list) -> None:
    """A `tool_use` block as a call of the assistant row (one without an id or name is a problem)."""
    if (isinstance(block.get("id"), str) and block["id"]
            and isinstance(block.get("name"), str) and block["name"]):
        args = block.get("input")
        calls.append({"id": block["id"], "name": block["name"],
                      "arguments": args if isinstance(args, (dict, str)) else {}})
    else:
        problems.append(Problem(entry.line, "tool_use without id or name; kept, not shown"))


def _tool_result_row(block: dict, at, meta: dict, entry: Entry, conv: ConvPlan, problems: list,
                     make=make_row) -> None:
    """A `tool_result` block: a `tool` row answering its call."""
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        problems.append(Problem(entry.line, "tool_result without tool_use_id; kept, not shown"))
        return
    result = block.get("content")
    if isinstance(result, list):
        result = [b for b in result if isinstance(b, dict) and isinstance(b.get("type"), str)
                  and (b["type"] != "text" or (isinstance(b.get("text"), str) and b["text"].strip()))]
    elif isinstance(result, str):
        result = clean_text(result)
    out = {"kind": "tool", "tool_call_id": call_id, "content": result or "(empty result)", "meta": meta}
    if block.get("is_error") is True:
        out["is_error"] = True
    _append(out, at, entry, conv, problems, make)


def _compaction(block: dict, at, entry: Entry, conv: ConvPlan, problems: list, make=make_row) -> None:
    """A `compaction` block: a fold after the rows so far (a `system` row when there are none)."""
    summary = _text_blocks(block.get("content")) or ""
    if not summary.strip():
        summary = "(compacted by the API; no readable summary)"
    if conv.last_position < 0:
        _append({"kind": "system", "content": summary, "meta": {"anthropic": {"entry": entry.seq, "compaction": True}}},
                at, entry, conv, problems, make)
    if conv.last_position >= 0:
        conv.folds.append(Fold(position=conv.last_position, summary=summary, at=at, created_by="anthropic"))


def parse_response(data: dict, raw_text: str, *, subject: str = "") -> Plan:
    """A Messages API response: one assistant turn, usage and all."""
    plan = Plan(format=NAME, source_key=content_hash(raw_text))
    model = data.get("model") if isinstance(data.get("model"), str) else None
    conv = plan.add_main(subject=subject, meta={"anthropic": {"response": True}, **({"model": model} if model else {})})
    entry = Entry(seq=0, line=None, raw=dumps({"response": data}), conv="main")
    plan.entries.append(entry)
    message_rows(data, entry, conv, plan.problems, model)
    for i, row in enumerate(conv.rows):
        if row.kind == "assistant":
            message = row.message
            own = {**message["meta"]["anthropic"], "response": True}
            for field in ("id", "stop_reason", "stop_sequence"):
                if isinstance(data.get(field), str):
                    own[field] = data[field]
            meta = {**message["meta"], "anthropic": own}
            if isinstance(data.get("usage"), dict):
                meta["usage"] = data["usage"]
            conv.rows[i] = make_row({**message, "meta": meta}, row.at, row.entry, plan.problems, None) or row
            break
    entry.position = conv.last_position
    conv.title = first_text(data.get("content")) or f"Anthropic response {str(data.get('id') or '')[:40]}".strip()
    return plan


def parse_document(data, raw_text: str, *, subject: str = "") -> Plan:
    if is_response(data):
        return parse_response(data, raw_text, subject=subject)
    messages, envelope = _messages(data)
    plan = Plan(format=NAME, source_key=content_hash(raw_text))
    conv = plan.add_main(subject=subject, meta={})
    seq = 0
    model = None
    if envelope is not None:
        entry = Entry(seq=0, line=None, raw=dumps({"envelope": envelope}), conv="main")
        plan.entries.append(entry)
        seq = 1
        model = envelope.get("model") if isinstance(envelope.get("model"), str) else None
        if model:
            conv.meta["model"] = model
        system = _text_blocks(envelope.get("system"))
        if system and system.strip():
            row = make_row({"kind": "system", "content": system, "meta": {"anthropic": {"entry": 0}}}, None, 0,
                           plan.problems, None)
            if row:
                conv.rows.append(row)
        entry.position = conv.last_position
    for i, m in enumerate(messages):
        entry = Entry(seq=seq + i, line=i + 1, raw=dumps(m), conv="main")
        plan.entries.append(entry)
        if isinstance(m, dict) and m.get("role") in ("user", "assistant"):
            message_rows(m, entry, conv, plan.problems, model)
            if not conv.title and m.get("role") == "user":
                conv.title = first_text(m.get("content"))
        else:
            plan.problems.append(Problem(i + 1, "message is not a user/assistant object; kept, not shown"))
        entry.position = conv.last_position
    return plan


def parse(data, *, subject: str = "") -> Plan:
    text = decode_text(data)
    try:
        doc = loads(text)
    except ValueError as exc:
        raise FormatError(f"an Anthropic request body is one JSON document: {exc}", field="file") from None
    return parse_document(doc, text, subject=subject)


# ---- rendering -----------------------------------------------------------------------


render_document = render_messages_document


DEFAULT_MODEL = "claude-sonnet-4-5"


def render(active_rows, handoff: str | None, *, model: str | None = None, max_tokens: int = 4096,
           journal: str = "drop"):
    """Chunks of one JSON request body: the active view, ready to send again (formats/requests.py).
    The model is the last Anthropic model the view's replies name (else `model`, else a default):
    a model of another provider never goes into an Anthropic body."""
    rows = []
    for kind, message in active_rows:
        rows.append((kind, message))
        named = message.get("meta", {}).get("model") if isinstance(message.get("meta"), dict) else None
        if kind == "assistant" and requests.provider_of(named) == "anthropic":
            model = named
    body = {"model": model if requests.provider_of(model) == "anthropic" else DEFAULT_MODEL,
            "max_tokens": max_tokens, **requests.anthropic_body(rows, handoff, journal=journal)}
    yield json.dumps(body, ensure_ascii=False, indent=1) + "\n"
