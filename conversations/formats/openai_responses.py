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
- `reasoning` → a `thought` row with its summary text (none: kept, not shown);
- `compaction` → a checkpoint (its `summary`, or encrypted: a placeholder summary);
- any other item → kept as an entry, not shown.

The same item mapping reads Codex `response_item` payloads (`codex.py`).
"""

import json

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
CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call", "mcp_call")
ROLE_KIND = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _parts(content):
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
                "computer_call_output", "function_call_result")


def _message_item(item: dict, meta: dict, line, problems: list, source: str, model: str | None) -> list:
    kind = ROLE_KIND.get(item.get("role"))
    content = _parts(item.get("content"))
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
    name = item.get("name") or ("shell" if itype == "local_shell_call" else None)
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
    if itype == "function_call_result" and isinstance(output, dict) and output.get("type") == "text":
        output = output.get("text")  # OpenAI Agents JS: {"type": "text", "text": …}
    if isinstance(output, dict) and "content" in output:  # Codex's {content, success}
        if output.get("success") is False:
            meta[source]["success"] = False
        output = output.get("content")
    content = _parts(output) if not isinstance(output, str) else clean_text(output)
    if not isinstance(call_id, str) or not call_id:
        problems.append(Problem(line, f"{itype} without call_id; kept, not shown"))
        return []
    return [{"kind": "tool", "tool_call_id": call_id,
             **({"name": item["name"]} if isinstance(item.get("name"), str) and item["name"] else {}),
             "content": content if content and (not isinstance(content, str) or content.strip())
             else "(empty result)", "meta": meta}]


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
    elif itype in OUTPUT_TYPES:
        out = _output_item(item, itype, meta, line, problems, source)
    elif itype == "reasoning":
        out = _reasoning_item(item, meta)
    elif itype == "compaction":
        summary = clean_text(item.get("summary") or item.get("content") or "")
        return [], (summary if summary and summary.strip() else "(compacted by the API; the summary is encrypted)")
    elif itype not in ITEM_TYPES:
        problems.append(Problem(line, f"unknown item type {str(itype)[:60]!r}; kept, not shown"))
    rows = []
    for message in out:
        row = make_row(message, at, entry.seq, problems, line)
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
    if len(rows) == 1 and item.get("type") in CALL_TYPES and _join_reply(conv, rows[0], entry, source):
        rows = []
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


def _items(data) -> tuple[list, dict | None, str]:
    """(items, the enclosing object without its items, the key they were under)."""
    if isinstance(data, list):
        return data, None, ""
    if isinstance(data, dict):
        for key in ("input", "output", "data", "items"):
            if isinstance(data.get(key), list):
                return data[key], {k: v for k, v in data.items() if k != key}, key
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
    try:
        items, _, key = _items(data)
    except FormatError:
        return False
    if isinstance(data, dict) and data.get("object") == "list" and key == "data":
        return bool(items) and all(isinstance(i, dict) for i in items)
    return bool(items) and any(_looks_like_item(i) for i in items)


def parse_document(data, raw_text: str, *, subject: str = "") -> Plan:
    items, envelope, key = _items(data)
    plan = Plan(format=NAME, source_key=content_hash(raw_text))
    conv = plan.add_main(subject=subject, meta={"openai_responses": {"envelope_key": key}})
    seq = 0
    if envelope is not None:
        plan.entries.append(Entry(seq=0, line=None, raw=dumps({"envelope": envelope, "key": key}), conv="main"))
        seq = 1
    model = envelope.get("model") if isinstance(envelope, dict) and isinstance(envelope.get("model"), str) else None
    for i, item in enumerate(items):
        entry = Entry(seq=seq + i, line=i + 1, raw=dumps(item))
        plan.entries.append(entry)
        if not isinstance(item, dict):
            plan.problems.append(Problem(i + 1, "item is not a JSON object; kept, not shown"))
            entry.position = conv.last_position
            continue
        at = parse_time(item.get("created_at"))
        apply_item(conv, item, at=at, entry=entry, problems=plan.problems, source="openai_responses", model=model)
        if not conv.title and item.get("role") == "user":
            conv.title = first_text(_parts(item.get("content")))
    return plan


def parse(data, *, subject: str = "") -> Plan:
    return parse_document_or_lines(data, parse_document, subject=subject)


# ---- rendering -------------------------------------------------------------------------


def render_document(originals: list[str]) -> str:
    """The stored items back in the shape they came in."""
    items, envelope, key = [], None, ""
    for raw in originals:
        obj = json.loads(raw)
        if isinstance(obj, dict) and set(obj) == {"envelope", "key"} and envelope is None and not items:
            envelope, key = obj["envelope"], obj["key"]
            continue
        items.append(obj)
    if envelope is None:
        return json.dumps(items, ensure_ascii=False)
    return json.dumps({**envelope, key: items}, ensure_ascii=False)
