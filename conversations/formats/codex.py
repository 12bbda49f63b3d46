"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).

Each line is `{"timestamp", "type", "payload"}` with type `session_meta`,
`turn_context`, `response_item`, `event_msg` or `compacted`; old rollouts have no
`payload` wrapper (the first line is the session's meta, the others bare items).

- The session id is the first `session_meta`'s `payload.id`: a later one is a
  replayed parent's, inherited, and does not change it.
- `response_item` payloads map like Responses items (`openai_responses.py`);
  `turn_context` gives the model of the rows after it.
- `event_msg` lines are what the UI showed (the user's prompt again, agent
  messages, token counts): kept as entries, never rows, so a prompt that appears
  both as `event_msg` and as `response_item` is one row.
- `compacted` → a checkpoint after the last row, whose summary is its message
  and the text of its replacement history.
- `forked_from_id` (top level: a fork; under `source.subagent.thread_spawn`: a
  spawned subagent) is lineage when the importer finds the parent. The lines a
  child replays from its parent are recognised by the importer (`replayed`)
  and become the copied prefix of a fork, or are skipped for a subagent.
"""

from .base import (
    ConvPlan,
    Entry,
    Fold,
    FormatError,
    Line,
    Plan,
    Problem,
    clean_text,
    content_hash,
    decode_text,
    first_text,
    parse_time,
    read_jsonl,
    split_lines,
)
from .openai_responses import ITEM_TYPES, apply_item, content_parts

NAME = "codex"
TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}


def typed_record(obj) -> tuple[str | None, object]:
    """(type, payload), reading old rollouts without a payload wrapper too."""
    if not isinstance(obj, dict):
        return None, obj
    if obj.get("type") in TYPES and "payload" in obj:
        return obj["type"], obj["payload"]
    if obj.get("type") in ITEM_TYPES or ("role" in obj and "content" in obj):
        return "response_item", obj
    if "id" in obj and "timestamp" in obj and "type" not in obj:
        return "session_meta", obj
    if obj.get("record_type") == "state":
        return "state", obj
    return obj.get("type") if isinstance(obj.get("type"), str) else None, obj


def detect(lines: list[Line]) -> bool:
    objs = [ln.obj for ln in lines[:50] if isinstance(ln.obj, dict)]
    if not objs:
        return False
    if any(o.get("type") in TYPES and "payload" in o for o in objs):
        return True
    first = objs[0]
    return "id" in first and "timestamp" in first and "type" not in first and any(
        typed_record(o)[0] == "response_item" for o in objs[1:])


def lineage(meta: dict) -> tuple[str | None, str]:
    """(parent session id, relation) named by a session_meta payload."""
    source = meta.get("source")
    spawn = source.get("subagent", {}).get("thread_spawn") if isinstance(source, dict) and isinstance(
        source.get("subagent"), dict) else None
    if isinstance(spawn, dict):
        parent = spawn.get("forked_from_id") or spawn.get("parent_thread_id") or meta.get("forked_from_id")
        if isinstance(parent, str) and parent:
            return parent, "subagent"
    parent = meta.get("forked_from_id")
    if isinstance(parent, str) and parent:
        return parent, "fork"
    return None, ""


def response_payloads(lines: list[Line]) -> list:
    """The response_item payloads of a rollout, in order (what a child replays)."""
    return [p for t, p in (typed_record(ln.obj) for ln in lines if ln.obj is not None) if t == "response_item"]


def parse(data, *, subject: str = "", replayed: int = 0, parent_id: str | None = None,
          parent_position: int | None = None) -> Plan:
    """`replayed`: how many leading response items are the parent's (the importer
    counts them against the stored parent); `parent_position`: the parent's last
    position among them."""
    text = decode_text(data)
    lines = list(read_jsonl(split_lines(text)))
    return parse_lines(lines, text, subject=subject, replayed=replayed, parent_id=parent_id,
                       parent_position=parent_position)


def parse_lines(lines: list[Line], text: str, *, subject: str = "", replayed: int = 0, parent_id=None,
                parent_position=None) -> Plan:
    plan = Plan(format=NAME)
    conv = plan.add_main(subject=subject, meta={"codex": {}})
    model = None
    items_seen = 0
    for seq, ln in enumerate(lines):
        entry = Entry(seq=seq, line=ln.number, raw=ln.text, conv="main")
        plan.entries.append(entry)
        entry.position = conv.last_position
        if ln.error:
            plan.problems.append(Problem(ln.number, ln.error))
            continue
        kind, payload = typed_record(ln.obj)
        at = parse_time(ln.obj.get("timestamp")) if isinstance(ln.obj, dict) else None
        if kind == "session_meta" and isinstance(payload, dict):
            _session_meta(plan, conv, payload)
        elif kind == "turn_context" and isinstance(payload, dict):
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
        elif kind == "response_item" and isinstance(payload, dict):
            items_seen += 1
            if items_seen <= replayed:
                entry.conv, entry.position = "main", -1
                entry.group = "replayed"
                continue
            apply_item(conv, payload, at=at, entry=entry, problems=plan.problems, source="codex", model=model)
            if not conv.title and payload.get("role") == "user":
                text_ = first_text(content_parts(payload.get("content")))
                if text_ and not text_.startswith("<"):
                    conv.title = text_
        elif kind == "compacted" and isinstance(payload, dict):
            _compacted(plan, conv, payload, at, ln.number)
        elif kind in ("event_msg", "state"):
            pass
        else:
            plan.problems.append(Problem(ln.number, f"unknown record type {str(kind)[:60]!r}; kept, not shown"))
    if not plan.source_key:
        plan.source_key = content_hash(text)
        plan.problems.append(Problem(None, "no session_meta line: the file is identified by its content"))
    if replayed and parent_id:
        conv.parent_id = parent_id
        conv.parent_position = parent_position
        conv.relation = conv.relation or "fork"
        conv.copy_prefix = conv.relation == "fork" and parent_position is not None
        conv.base = (parent_position + 1) if conv.copy_prefix else 0
    conv.title = conv.title or f"Codex session {plan.source_key[:8]}"
    return plan


def _session_meta(plan: Plan, conv: ConvPlan, payload: dict) -> None:
    """The first session_meta names the session; later ones (a fork's parents) are only listed."""
    info = conv.meta["codex"]
    if not plan.source_key and isinstance(payload.get("id"), str) and payload["id"]:
        plan.source_key = payload["id"]
        info["session_id"] = payload["id"]
        for field in ("cwd", "cli_version", "originator", "model_provider"):
            if isinstance(payload.get(field), str):
                info[field] = payload[field]
        if isinstance(payload.get("instructions"), str) and payload["instructions"].strip():
            info["has_instructions"] = True
        parent, relation = lineage(payload)
        if parent:
            info["forked_from_id"] = parent
            info["relation"] = relation
            conv.relation = relation
    else:
        info.setdefault("inherited_session_ids", []).append(payload.get("id"))


def _compacted(plan: Plan, conv: ConvPlan, payload: dict, at, line: int) -> None:
    summary = _compacted_summary(payload)
    if conv.last_position >= 0 and summary:
        conv.folds.append(Fold(position=conv.last_position, summary=summary, at=at, created_by="codex"))
    elif summary:
        plan.problems.append(Problem(line, "compacted record before any message; kept, not shown"))


def _compacted_summary(payload: dict) -> str:
    parts = []
    message = clean_text(payload.get("message"))
    if message and message.strip():
        parts.append(message.strip())
    history = payload.get("replacement_history")
    for item in history if isinstance(history, list) else []:
        if isinstance(item, dict) and item.get("type", "message") == "message":
            content = content_parts(item.get("content"))
            text = content if isinstance(content, str) else "\n".join(
                b["text"] for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str))
            role = item.get("role") if isinstance(item.get("role"), str) else "user"
            if text and text.strip():
                parts.append(f"{clean_text(role)}: {text.strip()}")
    return "\n\n".join(parts)


def check_is(lines: list[Line]) -> None:
    if not detect(lines):
        raise FormatError("this is not a Codex rollout (no session_meta/response_item lines)", field="format")
