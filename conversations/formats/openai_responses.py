"""OpenAI Responses API input/output items, and Conversations API item lists.

Accepted: a JSON array of items, `{"input": [...]}` (a request body), `{"output": [...]}`
(a response), `{"object": "list", "data": [...]}` (Conversations items), or JSONL
with one item per line. Items map as:

- `message` (role user / assistant / system / developer; also the short form
  `{"role", "content"}`) → that kind (developer → `system`); `input_text` and
  `output_text` parts → text, other parts stay content blocks;
- `function_call` / `custom_tool_call` / `local_shell_call` → a tool call. The items
  of one model response are one assistant row: calls that follow each other, and the
  assistant message just before them, join one row (a request body must carry
  parallel calls as one message); `*_output` → a `tool` row;
- hosted tools the API ran itself (`web_search_call`, `file_search_call`,
  `code_interpreter_call`, `image_generation_call`, `mcp_call`, Agents JS
  `hosted_tool_call`) → a tool call and its `tool` row at once, the provider's item
  in the call's meta (a generated image is the result's image block, or, when over
  the message limit, kept only in the original entry); an MCP approval request is
  a call answered by its approval response;
- `reasoning` → a `thought` row with its summary text (encrypted only: kept, not shown);
- `compaction` → a checkpoint (its `summary`, or encrypted: a placeholder summary);
- `ghost_snapshot`, `item_reference`, `mcp_list_tools` (a git snapshot, a pointer to an
  item already there, a server's tool list) → kept as entries, not shown;
- any other item → kept as an entry and reported.

A request body's `instructions` are a `system` row first; a response's `usage` goes
on its first assistant row. A body holding both `input` and `output` (a recorded
exchange) gives the input items, then the output items.

The same item mapping reads Codex `response_item` payloads (`codex.py`).
"""

import json

from ..message_schema import max_message_bytes
from .base import (
    ConvPlan,
    Entry,
    Fold,
    FormatError,
    Plan,
    Problem,
    Row,
    clean_text,
    content_blocks,
    content_hash,
    dumps,
    first_text,
    make_row,
    merge_row,
    parse_document_or_lines,
    parse_time,
)

NAME = "openai-responses"
ITEM_TYPES = {
    "message", "function_call", "function_call_output", "reasoning", "custom_tool_call", "custom_tool_call_output",
    "local_shell_call", "local_shell_call_output", "web_search_call", "file_search_call", "computer_call",
    "computer_call_output", "image_generation_call", "code_interpreter_call", "mcp_call", "mcp_list_tools",
    "mcp_approval_request", "mcp_approval_response", "compaction", "item_reference", "ghost_snapshot",
    "function_call_result", "hosted_tool_call",
}
CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "computer_call", "mcp_approval_request")
# Tools the API runs itself: the item is the call and its outcome at once.
HOSTED_TYPES = ("web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call",
                "hosted_tool_call")
HOSTED_NAMES = {"web_search_call": "web_search", "file_search_call": "file_search",
                "code_interpreter_call": "code_interpreter", "image_generation_call": "image_generation"}
# Items with no place in a conversation's rows, kept as entries: not problems.
KEPT_TYPES = ("ghost_snapshot", "item_reference", "mcp_list_tools")
ROLE_KIND = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def content_parts(content):
    """Responses content → memoryui content (a string, or blocks)."""
    if isinstance(content, str):
        return clean_text(content)
    if not isinstance(content, list):
        return None
    blocks = content_blocks(content, text_types=("input_text", "output_text", "text", "summary_text"))
    if not blocks:
        return None
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return blocks[0]["text"]
    return blocks


OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                "computer_call_output", "function_call_result", "mcp_approval_response")


def _message_item(item: dict, meta: dict, line, problems: list, source: str, model: str | None) -> list:
    kind = ROLE_KIND.get(item.get("role"))
    content = content_parts(item.get("content"))
    if kind is None:
        problems.append(Problem(line, f"message with unknown role {str(item.get('role'))[:40]!r}; kept, not shown"))
    elif content is not None:
        if item.get("role") == "developer":
            meta[source]["role"] = "developer"
        if kind == "assistant" and model:
            meta["model"] = model
        return [{"kind": kind, "content": content, "meta": meta}]
    return []


def _call_item(item: dict, itype: str, meta: dict, line, problems: list, model: str | None) -> list:
    # OpenAI Agents JS writes its items in camelCase (`callId`) beside the Responses names.
    call_id = item.get("call_id") or item.get("callId") or item.get("id")
    name = item.get("name") or {"local_shell_call": "shell", "computer_call": "computer"}.get(itype)
    # A function_call's string arguments are kept as the model wrote them: parsing could change them.
    args = item.get("arguments", item.get("input", item.get("action", {})))
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        problems.append(Problem(line, f"{itype} without call_id or name; kept, not shown"))
        return []
    if model:
        meta["model"] = model
    return [{"kind": "assistant", "tool_calls": [
        {"id": call_id, "name": name, "arguments": args if isinstance(args, (dict, str)) else {}}],
        "meta": meta}]


def _output_item(item: dict, itype: str, meta: dict, line, problems: list, source: str) -> list:
    call_id = item.get("call_id") or item.get("callId") or item.get("id")
    output = item.get("output")
    if itype == "mcp_approval_response":
        call_id = item.get("approval_request_id")
        reason = item.get("reason") if isinstance(item.get("reason"), str) else ""
        output = ("approved" if item.get("approve") else "denied") + (f": {reason}" if reason else "")
    if itype == "function_call_result" and isinstance(output, dict) and output.get("type") == "text":
        output = output.get("text")  # OpenAI Agents JS: {"type": "text", "text": …}
    if isinstance(output, dict) and "content" in output:  # Codex's {content, success}
        if output.get("success") is False:
            meta[source]["success"] = False
        output = output.get("content")
    content = content_parts(output) if not isinstance(output, str) else clean_text(output)
    if not isinstance(call_id, str) or not call_id:
        problems.append(Problem(line, f"{itype} without call_id; kept, not shown"))
        return []
    return [{"kind": "tool", "tool_call_id": call_id,
             **({"name": item["name"]} if isinstance(item.get("name"), str) and item["name"] else {}),
             "content": content if content and (not isinstance(content, str) or content.strip())
             else "(empty result)", "meta": meta}]


def _hosted_item(item: dict, itype: str, meta: dict, entry: Entry, problems: list, source: str,
                 model: str | None) -> list:
    """A tool the API ran itself: its call, then its outcome as the call's result."""
    call_id = item.get("id") or item.get("call_id") or item.get("callId")
    if itype == "hosted_tool_call":  # OpenAI Agents JS: the hosted item under its own name
        provider = item.get("providerData") if isinstance(item.get("providerData"), dict) else {}
        call_id = call_id or provider.get("id")
        name = item.get("name") if isinstance(item.get("name"), str) and item["name"] else "hosted_tool"
        name = HOSTED_NAMES.get(name, name)
        arguments = item.get("arguments", provider.get("action", {}))
        outcome, error = item.get("output", provider.get("result")), False
    elif itype == "mcp_call":
        name = item.get("name")
        arguments = item.get("arguments", {})
        error = item.get("error") not in (None, "")
        outcome = item.get("error") if error else item.get("output")
    else:
        name = HOSTED_NAMES[itype]
        arguments, outcome, error = _hosted_parts(item, itype)
    if not isinstance(call_id, str) or not call_id:
        # Codex keeps a web search without an id: one made from the entry, the same every import.
        call_id = f"mui_{itype}_{entry.seq}"
    if not isinstance(name, str) or not name:
        problems.append(Problem(entry.line, f"{itype} without a name; kept, not shown"))
        return []
    if item.get("status") in ("failed", "incomplete"):
        error = True
    call_meta = {**meta, source: {**meta[source], "hosted": itype, "item": _item_for_meta(item)}}
    if model:
        call_meta["model"] = model
    result = {"kind": "tool", "tool_call_id": call_id, "name": name, "content": _hosted_content(outcome, item),
              "meta": {source: {**meta[source], "hosted": itype}}}
    if error:
        result["is_error"] = True
    return [{"kind": "assistant", "tool_calls": [{"id": call_id, "name": name, "arguments": _arguments(arguments)}],
             "meta": call_meta}, result]


def _arguments(value):
    return value if isinstance(value, (dict, str)) else ({} if value is None else {"value": value})


def _hosted_parts(item: dict, itype: str) -> tuple[object, object, bool]:
    """(arguments, outcome, failed) of a hosted item of the Responses API."""
    if itype == "web_search_call":
        action = item.get("action") if isinstance(item.get("action"), dict) else {}
        sources = action.get("sources") or item.get("results")
        outcome = {"status": item.get("status")}
        if sources:
            outcome["sources"] = sources
        return {k: v for k, v in action.items() if k != "sources"}, outcome, False
    if itype == "file_search_call":
        outcome = item.get("results") if item.get("results") else {"status": item.get("status")}
        return {"queries": item.get("queries") or []}, outcome, False
    if itype == "code_interpreter_call":
        arguments = {k: item[k] for k in ("code", "container_id") if item.get(k) is not None}
        blocks = []
        for out in item.get("outputs") or ():
            if not isinstance(out, dict):
                continue
            if out.get("type") == "logs" and isinstance(out.get("logs"), str):
                blocks.append({"type": "text", "text": out["logs"]})
            elif out.get("type") == "image" and isinstance(out.get("url"), str):
                blocks.append({"type": "image", "source": {"type": "url", "url": out["url"]}})
        return arguments, (blocks or {"status": item.get("status")}), False
    # image_generation_call: what it was asked is the revised prompt and the options
    arguments = {k: item[k] for k in ("revised_prompt", "size", "quality", "background", "output_format")
                 if item.get(k) is not None}
    return arguments, item.get("result"), False


def _hosted_content(outcome, item: dict):
    """A hosted tool's outcome as tool-row content."""
    if item.get("type") == "image_generation_call" and isinstance(outcome, str) and outcome:
        media = f"image/{item.get('output_format') or 'png'}"
        if len(outcome) + 4096 <= max_message_bytes():
            return [{"type": "image", "source": {"type": "base64", "media_type": media, "data": outcome}}]
        return (f"(a generated {media} image of {len(outcome):,} base64 characters, over the message limit: "
                "kept in the original entry)")
    if isinstance(outcome, list) and outcome and all(isinstance(b, dict) and "type" in b for b in outcome) and \
            item.get("type") == "code_interpreter_call":
        return outcome
    if isinstance(outcome, str):
        text = clean_text(outcome)
        return text if text and text.strip() else "(empty result)"
    if outcome is None or outcome == {"status": None}:
        return f"({item.get('status') or 'no outcome recorded'})"
    return dumps(outcome)


# The longest string value of a provider's item copied into a row's meta; the whole item is its entry.
META_VALUE_LIMIT = 4096


def _item_for_meta(item: dict) -> dict:
    """The provider's item for the call's meta, long values (a base64 image) shortened."""
    out = {}
    for key, value in item.items():
        if isinstance(value, str) and len(value) > META_VALUE_LIMIT:
            value = f"({len(value):,} characters: kept in the original entry)"
        out[key] = value
    return out


def _reasoning_item(item: dict, meta: dict) -> list:
    texts = [s.get("text") for s in item.get("summary") or [] if isinstance(s, dict)]
    texts += [c.get("text") for c in item.get("content") or [] if isinstance(c, dict)]
    text = clean_text("\n\n".join(t for t in texts if isinstance(t, str) and t.strip()))
    return [{"kind": "thought", "text": text, "meta": meta}] if text else []


def item_rows(item, *, at, entry: Entry, problems: list, source: str,
              model: str | None = None) -> tuple[list, str | None]:
    """(rows, fold summary or None) for one item."""
    line = entry.line
    meta = {source: {"entry": entry.seq}}
    if isinstance(item.get("id"), str):
        meta[source]["id"] = item["id"]
    itype = item.get("type", "message" if "role" in item else None)
    out = []
    if itype == "message":
        out = _message_item(item, meta, line, problems, source, model)
    elif itype in CALL_TYPES:
        out = _call_item(item, itype, meta, line, problems, model)
    elif itype in HOSTED_TYPES:
        out = _hosted_item(item, itype, meta, entry, problems, source, model)
    elif itype in OUTPUT_TYPES:
        out = _output_item(item, itype, meta, line, problems, source)
    elif itype == "reasoning":
        out = _reasoning_item(item, meta)
        if not out and not item.get("encrypted_content"):
            problems.append(Problem(line, "reasoning item without summary or content; kept, not shown"))
    elif itype == "compaction":
        summary = clean_text(item.get("summary") or item.get("content") or "")
        return [], (summary if summary and summary.strip() else "(compacted by the API; the summary is encrypted)")
    elif itype not in KEPT_TYPES:
        what = "unknown item type" if itype not in ITEM_TYPES else "item type"
        problems.append(Problem(line, f"{what} {str(itype)[:60]!r} has no row; kept, not shown"))
    rows = []
    for message in out:
        row = make_row(message, at, entry.seq, problems, line)
        if row is None and message["kind"] == "assistant" and "item" in message["meta"].get(source, {}):
            # The provider's item made the call too large: the call alone, the item stays in its entry.
            message["meta"][source].pop("item")
            row = make_row(message, at, entry.seq, [], line)
            if row is not None:
                problems.pop()
        if row:
            rows.append(row)
    return rows, None


def _join_reply(conv: ConvPlan, row: Row, entry: Entry, source: str) -> bool:
    """Add the call of `row` to the reply in the conversation's last pending row, when that
    is the same model response: an assistant row (its text, or its calls so far) written
    by the item just before. Rows written by an earlier batch are not in `conv.rows` and
    stay as they are (the request renderers merge such a split reply)."""
    if not conv.rows or conv.rows[-1].kind != "assistant":
        return False
    last = conv.rows[-1]
    before, call = last.message, row.message
    calls = list(before.get("tool_calls") or [])
    if not isinstance(before.get("meta"), dict) or source not in before["meta"] or \
            any(c["id"] == call["tool_calls"][0]["id"] for c in calls):
        return False
    meta = dict(before["meta"])
    own = dict(meta[source])
    own["entries"] = list(own.get("entries") or [own.get("entry")]) + [entry.seq]
    if "id" in call["meta"][source]:
        own["ids"] = list(own.get("ids") or ([own["id"]] if "id" in own else [])) + [call["meta"][source]["id"]]
    if "item" in call["meta"][source]:  # a hosted call: its item stays with the row that carries it
        own["items"] = list(own.get("items") or []) + [call["meta"][source]["item"]]
    meta[source] = own
    if "model" in call["meta"] and "model" not in meta:
        meta["model"] = call["meta"]["model"]
    merged = merge_row(last, {**before, "tool_calls": calls + call["tool_calls"], "meta": meta})
    if merged is None:  # over the message limit together: the call stays a row of its own
        return False
    conv.rows[-1] = merged
    return True


def apply_item(conv: ConvPlan, item, *, at, entry: Entry, problems: list, source: str, model=None) -> None:
    rows, fold = item_rows(item, at=at, entry=entry, problems=problems, source=source, model=model)
    joinable = item.get("type") in CALL_TYPES or item.get("type") in HOSTED_TYPES
    if rows and joinable and rows[0].kind == "assistant" and _join_reply(conv, rows[0], entry, source):
        rows = rows[1:]
    if fold is not None:
        if conv.last_position < 0:
            row = make_row({"kind": "system", "content": fold, "meta": {source: {"entry": entry.seq,
                                                                                  "compaction": True}}},
                           at, entry.seq, problems, entry.line)
            if row:
                conv.rows.append(row)
        if conv.last_position >= 0:
            conv.folds.append(Fold(position=conv.last_position, summary=fold, at=at, created_by=source))
    conv.rows.extend(rows)
    entry.conv = conv.key
    entry.position = conv.last_position


def _items(data) -> tuple[list, dict | None, str, int | None]:
    """(items, the enclosing object without its items, the key they were under, how many came
    from `input` when `output` follows them). A recorded exchange holds both `input` and
    `output`: both are read (an empty `input` never hides the output); a string `input`
    is one user message."""
    if isinstance(data, list):
        return data, None, "", None
    if isinstance(data, dict):
        given = data.get("input")
        output = data.get("output")
        if isinstance(output, list) and (isinstance(given, (list, str)) or "input" not in data):
            inputs = given if isinstance(given, list) else (
                [{"role": "user", "content": given}] if isinstance(given, str) else [])
            rest = {k: v for k, v in data.items() if k not in ("input", "output")}
            if "input" not in data:
                return output, rest, "output", None
            if isinstance(given, str):
                rest["input"] = given  # kept as it came; the message made of it is item 0
            return inputs + output, rest, "input", len(inputs)
        for key in ("input", "output", "data", "items"):
            if isinstance(data.get(key), list):
                return data[key], {k: v for k, v in data.items() if k != key}, key, None
        if isinstance(given, str):
            return [{"role": "user", "content": given}], {k: v for k, v in data.items()}, "input", 1
    raise FormatError("expected a JSON array of Responses items (or an object with input/output/data)",
                      field="file")


def _looks_like_item(obj) -> bool:
    if not isinstance(obj, dict):
        return False
    if obj.get("type") in ITEM_TYPES and obj.get("type") != "message":
        return True
    content = obj.get("content")
    if obj.get("type") == "message":
        return True
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "input_image", "input_file")
        for p in content)


def detect_document(data) -> bool:
    if isinstance(data, dict) and data.get("object") == "response" and isinstance(data.get("output"), list):
        return True
    try:
        items, _, key, _split = _items(data)
    except FormatError:
        return False
    if isinstance(data, dict) and data.get("object") == "list" and key == "data":
        return bool(items) and all(isinstance(i, dict) for i in items)
    return bool(items) and any(_looks_like_item(i) for i in items)


def parse_document(data, raw_text: str, *, subject: str = "") -> Plan:
    items, envelope, key, split = _items(data)
    plan = Plan(format=NAME, source_key=content_hash(raw_text))
    conv = plan.add_main(subject=subject, meta={"openai_responses": {"envelope_key": key}})
    seq = 0
    if envelope is not None:
        head = {"envelope": envelope, "key": key}
        if split is not None:
            head["split"] = split
        entry = Entry(seq=0, line=None, raw=dumps(head), conv="main")
        plan.entries.append(entry)
        seq = 1
        _instructions(conv, envelope.get("instructions"), plan.problems)
        entry.position = conv.last_position
    model = envelope.get("model") if isinstance(envelope, dict) and isinstance(envelope.get("model"), str) else None
    usage = envelope.get("usage") if isinstance(envelope, dict) and isinstance(envelope.get("usage"), dict) else None
    created = parse_time(envelope.get("created_at")) if isinstance(envelope, dict) else None
    for i, item in enumerate(items):
        entry = Entry(seq=seq + i, line=i + 1, raw=dumps(item))
        plan.entries.append(entry)
        if not isinstance(item, dict):
            plan.problems.append(Problem(i + 1, "item is not a JSON object; kept, not shown"))
            entry.position = conv.last_position
            continue
        at = parse_time(item.get("created_at")) or created
        before = len(conv.rows)
        apply_item(conv, item, at=at, entry=entry, problems=plan.problems, source="openai_responses", model=model)
        if usage is not None and (split is None or i >= split):
            usage = None if _put_usage(conv, before, usage) else usage
        if not conv.title and item.get("role") == "user":
            conv.title = first_text(content_parts(item.get("content")))
    if not conv.title:  # a response alone: its reply names it
        said = next((r.message.get("content") for r in conv.rows if r.kind == "assistant" and r.message.get("content")),
                    None)
        ident = envelope.get("id") if isinstance(envelope, dict) and isinstance(envelope.get("id"), str) else ""
        conv.title = first_text(said) or f"OpenAI response {ident[:40]}".strip()
    return plan


def _instructions(conv: ConvPlan, instructions, problems: list) -> None:
    """A request's (or an echoed response's) instructions: the system row they are."""
    text = clean_text(instructions) if isinstance(instructions, str) else None
    if text and text.strip():
        row = make_row({"kind": "system", "content": text, "meta": {"openai_responses": {"entry": 0,
                                                                                          "instructions": True}}},
                       None, 0, problems, None)
        if row:
            conv.rows.append(row)


def _put_usage(conv: ConvPlan, since: int, usage: dict) -> bool:
    """The response's usage on the first assistant row it produced (True once placed)."""
    for i in range(since, len(conv.rows)):
        row = conv.rows[i]
        if row.kind == "assistant":
            message = row.message
            merged = merge_row(row, {**message, "meta": {**message.get("meta", {}), "usage": usage}})
            if merged is not None:
                conv.rows[i] = merged
            return True
    return False


def parse(data, *, subject: str = "") -> Plan:
    return parse_document_or_lines(data, parse_document, subject=subject)


# ---- rendering -------------------------------------------------------------------------


def render_document(originals: list[str]) -> str:
    """The stored items back in the shape they came in."""
    items, head = [], None
    for raw in originals:
        obj = json.loads(raw)
        if isinstance(obj, dict) and set(obj) in ({"envelope", "key"}, {"envelope", "key", "split"}) and \
                head is None and not items:
            head = obj
            continue
        items.append(obj)
    if head is None:
        return json.dumps(items, ensure_ascii=False)
    envelope, key, split = head["envelope"], head["key"], head.get("split")
    if split is None:
        return json.dumps({**envelope, key: items}, ensure_ascii=False)
    document = dict(envelope)
    if "input" not in envelope:  # a string input is in the envelope already
        document["input"] = items[:split]
    document["output"] = items[split:]
    return json.dumps(document, ensure_ascii=False)
