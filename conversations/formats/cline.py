"""Cline and Roo Code task histories (`tasks/<task id>/api_conversation_history.json`).

The history is what the extension sent the model: Anthropic-shaped messages
(`{"role", "content": text or blocks}`; Roo adds `ts`, and `isSummary` on the summary a
context condensing wrote). Beside it, `ui_messages.json` is what the panel showed (`say`
and `ask` events with their times; `api_req_started` carries each request's tokens and
cost). The importer reads both when both are there (a task folder, a zip of one) and
passes them as one document, `{"api_conversation_history": [...], "ui_messages": [...],
"task_id": "..."}`, which is also what an API caller may send.

- messages map as Anthropic messages do (formats/anthropic.py): text, `tool_use` calls,
  `tool_result` rows, thinking as `thought` rows, images as blocks; tool calls written
  as XML in the text (older Cline) stay the text the model wrote;
- a summary message (`isSummary`) → a checkpoint after the last row before it, whose
  summary is its text;
- the n-th `api_req_started` of the panel gives the n-th reply its usage, cost and time;
  the other panel events are kept as entries (they repeat the history for the eye).

Every message and panel event is kept as an entry. The task is identified by its first
message (what it was asked and when), so a task folder imported again appends what the
task did since, whichever door it came through.
"""

import hashlib

from . import anthropic
from .base import (
    ConvPlan,
    Entry,
    Fold,
    FormatError,
    Plan,
    Problem,
    clean_text,
    decode_text,
    dumps,
    first_text,
    loads,
    make_row,
    parse_time,
)

NAME = "cline"
BUNDLE_KEYS = ("api_conversation_history", "ui_messages", "task_id")


def _history(data):
    if isinstance(data, dict) and isinstance(data.get("api_conversation_history"), list):
        return data["api_conversation_history"]
    return data if isinstance(data, list) else None


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def detect_document(data) -> bool:
    if isinstance(data, dict) and isinstance(data.get("api_conversation_history"), list):
        return True
    if not isinstance(data, list) or not data:
        return False
    if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in data):
        return False
    first = _text(data[0].get("content")).lstrip()
    return first.startswith("<task>") or "<environment_details>" in first or any(
        "isSummary" in m for m in data)


def task_key(history: list) -> str:
    """What identifies a task whichever door it came through: its first message."""
    first = dumps(history[0]) if history else ""
    return "cline:" + hashlib.sha256(first.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _title(history: list) -> str:
    for m in history:
        if isinstance(m, dict) and m.get("role") == "user":
            text = _text(m.get("content"))
            if "<task>" in text:
                text = text.split("<task>", 1)[1].split("</task>", 1)[0]
            elif "<environment_details>" in text:
                text = text.split("<environment_details>", 1)[0]
            return first_text(text.strip())
    return ""


def _requests(ui) -> list[dict]:
    """The panel's api_req_started events, in order: {"ts", "usage", "cost"}."""
    out = []
    for event in ui if isinstance(ui, list) else ():
        if not isinstance(event, dict) or event.get("say") != "api_req_started":
            continue
        try:
            info = loads(event.get("text") or "{}")
        except (ValueError, RecursionError):
            info = {}
        info = info if isinstance(info, dict) else {}
        usage = {}
        for field, name in (("tokensIn", "input_tokens"), ("tokensOut", "output_tokens"),
                            ("cacheWrites", "cache_creation_input_tokens"), ("cacheReads", "cache_read_input_tokens")):
            if isinstance(info.get(field), int) and not isinstance(info.get(field), bool):
                usage[name] = info[field]
        out.append({"ts": event.get("ts"), "usage": usage or None,
                    "cost": info.get("cost") if isinstance(info.get("cost"), (int, float)) else None})
    return out


def parse(data, *, subject: str = "") -> Plan:
    text = decode_text(data)
    try:
        doc = loads(text)
    except ValueError as exc:
        raise FormatError(f"a Cline task history is one JSON document: {exc}", field="file") from None
    history = _history(doc)
    if history is None:
        raise FormatError("expected a Cline task history (an array of messages, or an object with "
                          "api_conversation_history)", field="file")
    bundle = doc if isinstance(doc, dict) else {}
    ui = bundle.get("ui_messages") if isinstance(bundle.get("ui_messages"), list) else None
    plan = Plan(format=NAME, source_key=task_key(history))
    task_id = bundle.get("task_id") if isinstance(bundle.get("task_id"), str) else None
    if task_id is None and ui and isinstance(ui[0], dict) and isinstance(ui[0].get("ts"), int):
        task_id = str(ui[0]["ts"])
    info = {"task_id": task_id} if task_id else {}
    info["ui_messages"] = ui is not None
    conv = plan.add_main(subject=subject, meta={"cline": info}, title=_title(history) or "Cline task")
    if isinstance(doc, dict):
        head = {k: v for k, v in doc.items() if k not in ("api_conversation_history", "ui_messages")}
        plan.entries.append(Entry(seq=0, line=None, raw=dumps({"bundle": head}), conv="main"))
    requests = _requests(ui)
    replies = 0
    for i, m in enumerate(history):
        entry = Entry(seq=len(plan.entries), line=i + 1, raw=dumps(m), conv="main")
        plan.entries.append(entry)
        if not (isinstance(m, dict) and m.get("role") in ("user", "assistant")):
            plan.problems.append(Problem(i + 1, "message is not a user/assistant object; kept, not shown"))
        elif m.get("isSummary"):
            _summary(m, entry, conv, plan)
        else:
            at = parse_time(m.get("ts"))
            request = requests[replies] if m["role"] == "assistant" and replies < len(requests) else None
            replies += m["role"] == "assistant"
            _message(m, entry, conv, plan, at or (parse_time(request["ts"]) if request else None), request)
        entry.position = conv.last_position
    for n, event in enumerate(ui or ()):
        plan.entries.append(Entry(seq=len(plan.entries), line=None, raw=dumps(event), conv="main",
                                  position=conv.last_position, group="ui"))
        if not isinstance(event, dict):
            plan.problems.append(Problem(None, f"panel event {n} is not an object; kept, not shown"))
    if requests and replies != len(requests):
        plan.problems.append(Problem(None, f"{len(requests)} requests on the panel for {replies} replies in the "
                                           "history: usage was given in order to the replies that have one"))
    return plan


def _message(m: dict, entry: Entry, conv: ConvPlan, plan: Plan, at, request: dict | None) -> None:
    """Rows of one message, through the Anthropic mapping, under Cline's own meta."""

    def dressed(message: dict, row_at, seq, problems, line):
        meta = dict(message.get("meta") or {})
        own = dict(meta.pop("anthropic", {}))
        if message.get("kind") == "assistant" and request is not None:
            if request["usage"]:
                meta["usage"] = request["usage"]
            if request["cost"] is not None:
                own["cost"] = request["cost"]
        meta["cline"] = own
        return make_row({**message, "meta": meta}, at or row_at, seq, problems, entry.line)

    scratch = ConvPlan(key=conv.key)
    anthropic.message_rows(m, entry, scratch, plan.problems, None, make=dressed)
    conv.rows.extend(scratch.rows)


def _summary(m: dict, entry: Entry, conv: ConvPlan, plan: Plan) -> None:
    """A condensing's summary: a checkpoint over what came before it."""
    summary = clean_text(_text(m.get("content"))) or ""
    if not summary.strip():
        plan.problems.append(Problem(entry.line, "a summary message without text; no checkpoint"))
        return
    if conv.last_position < 0:
        row = make_row({"kind": "user", "content": summary, "meta": {"cline": {"entry": entry.seq, "summary": True}}},
                       parse_time(m.get("ts")), entry.seq, plan.problems, entry.line)
        if row is None:
            return
        conv.rows.append(row)
    conv.folds.append(Fold(position=conv.last_position, summary=summary, at=parse_time(m.get("ts")), created_by=NAME))
