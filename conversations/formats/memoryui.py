"""memoryui's own JSONL export, which imports back exactly.

    {"memoryui": "conversation", "version": 1, "id": …, "title": …, "subject": …, "meta": …,
     "created_at": …, "last_activity_at": …, "pinned": …, "namespace": …, "external_id": …,
     "parent_id": …, "forked_from_position": …, "parent_relation": …, "message_count": n}
    {"position": 0, "kind": "user", "created_at": "…", "message": {…}}
    …
    {"checkpoint": {"message_position": 3, "summary": "…", "created_at": "…", "created_by": "…"}}

A header opens a conversation (a file may hold several, parents first); its rows
follow with their positions and times, and each checkpoint comes right after the
row it folds. Importing reproduces the conversation's id, rows (same bytes, same
positions, same times), checkpoints and lineage. A row that no longer decoded
when it was exported (`"broken": true`) comes back as a `note` holding the text.
"""

import json
import uuid

from ..conversation_json import conversation_fields
from .base import (
    ConvPlan,
    Entry,
    Fold,
    Line,
    Plan,
    Problem,
    content_hash,
    decode_text,
    make_row,
    parse_time,
    read_jsonl,
    split_lines,
)

NAME = "memoryui"
VERSION = 1


def detect(lines: list[Line]) -> bool:
    first = next((ln.obj for ln in lines if ln.obj is not None), None)
    return isinstance(first, dict) and first.get("memoryui") == "conversation"


# The header line's fields after its format and version, message_count last.
HEADER = ("id", "title", "subject", "meta", "created_at", "last_activity_at", "pinned", "namespace", "external_id",
          "parent_id", "forked_from_position", "parent_relation")


def header(conversation, *, message_count: int) -> dict:
    return {"memoryui": "conversation", "version": VERSION, **conversation_fields(conversation, HEADER),
            "message_count": message_count}


def render(conversation, rows, checkpoints):
    """`rows`: StoredMessage-like items in position order; `checkpoints`: by position."""
    count = conversation.next_position
    yield json.dumps(header(conversation, message_count=count), ensure_ascii=False) + "\n"
    by_position: dict[int, list] = {}
    early = []
    for cp in checkpoints:
        (early if cp.message_position >= count else by_position.setdefault(cp.message_position, [])).append(cp)
    for item in rows:
        line = {"position": item.position, "kind": item.kind, "created_at": item.created_at.isoformat()}
        if item.ok:
            line["message"] = json.loads(item.raw)
        else:
            line.update({"message": None, "raw": item.raw, "broken": True})
        yield json.dumps(line, ensure_ascii=False) + "\n"
        for cp in by_position.get(item.position, ()):
            yield json.dumps({"checkpoint": {"message_position": cp.message_position, "summary": cp.summary,
                                             "created_at": cp.created_at.isoformat(),
                                             "created_by": cp.created_by}}, ensure_ascii=False) + "\n"


def parse(data, *, subject: str = "") -> Plan:
    text = decode_text(data)
    plan = Plan(format=NAME, source_key=content_hash(text))
    conv: ConvPlan | None = None
    for seq, ln in enumerate(read_jsonl(split_lines(text))):
        if ln.error:
            plan.problems.append(Problem(ln.number, ln.error))
            if conv is not None:
                conv.problems.append(Problem(ln.number, "a line of this conversation is not JSON: positions "
                                                        "would not be exact", hard=True))
            continue
        obj = ln.obj
        if isinstance(obj, dict) and obj.get("memoryui") == "conversation":
            conv = _conversation(obj, ln.number, subject, plan)
            continue
        if conv is None:
            plan.problems.append(Problem(ln.number, "a line before any conversation header; skipped"))
            continue
        plan.entries.append(Entry(seq=seq, line=ln.number, raw=ln.text, conv=conv.key, position=conv.last_position))
        if isinstance(obj, dict) and isinstance(obj.get("checkpoint"), dict):
            cp = obj["checkpoint"]
            position, summary = cp.get("message_position"), cp.get("summary")
            if not isinstance(position, int) or isinstance(position, bool) or not isinstance(summary, str) or \
                    position > conv.last_position or position < 0:
                conv.problems.append(Problem(ln.number, "checkpoint without a valid position and summary", hard=True))
                continue
            conv.folds.append(Fold(position=position, summary=summary, at=parse_time(cp.get("created_at")),
                                   created_by=str(cp.get("created_by") or "")[:200], exact=True))
            continue
        if not isinstance(obj, dict) or "position" not in obj:
            conv.problems.append(Problem(ln.number, "neither a row nor a checkpoint", hard=True))
            continue
        if obj.get("position") != conv.next_position:
            conv.problems.append(Problem(ln.number, f"position {str(obj.get('position'))[:20]} where "
                                                    f"{conv.next_position} was expected", hard=True))
            continue
        at = parse_time(obj.get("created_at"))
        if at is None:
            conv.problems.append(Problem(ln.number, "row without a readable created_at", hard=True))
            continue
        message = obj.get("message")
        if obj.get("broken") or not isinstance(message, dict):
            conv.problems.append(Problem(ln.number, "this row no longer decoded when it was exported; it comes "
                                                    "back as a note holding the stored text"))
            message = {"kind": "note", "text": str(obj.get("raw") or "(empty)"), "meta": {"memoryui": {"broken": True}}}
        row = make_row(message, at, seq, conv.problems, ln.number)
        if row is None:
            conv.problems.append(Problem(ln.number, "a row did not validate: positions would not be exact", hard=True))
            continue
        conv.rows.append(row)
    for c in plan.conversations.values():
        expected = c.expected_count
        if isinstance(expected, int) and expected != c.next_position and not any(p.hard for p in c.problems):
            c.problems.append(Problem(None, f"the header says {expected} rows but {c.next_position} followed "
                                            "(the file is cut short)", hard=True))
    return plan


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _conversation(obj: dict, line: int, subject: str, plan: Plan) -> ConvPlan:
    key = f"c:{obj.get('id')}"
    if key in plan.conversations:
        key = f"{key}#{line}"
    meta = obj.get("meta") if isinstance(obj.get("meta"), dict) else {}
    conv = ConvPlan(
        key=key, id=obj.get("id") if isinstance(obj.get("id"), str) else None,
        title=str(obj.get("title") or "")[:300], subject=subject or str(obj.get("subject") or "")[:300],
        meta=dict(meta), created_at=parse_time(obj.get("created_at")),
        last_activity_at=parse_time(obj.get("last_activity_at")),
        external_id=obj.get("external_id") if isinstance(obj.get("external_id"), str) else None,
        parent_id=obj.get("parent_id") if isinstance(obj.get("parent_id"), str) else None,
        parent_position=obj.get("forked_from_position") if isinstance(obj.get("forked_from_position"), int) else None,
        relation=str(obj.get("parent_relation") or ("fork" if obj.get("parent_id") else ""))[:16],
    )
    for name, value in (("id", conv.id), ("parent_id", conv.parent_id)):
        if value is not None and not _is_uuid(value):
            conv.problems.append(Problem(line, f"{name} {value[:60]!r} is not a conversation id", hard=True))
            setattr(conv, name, None)
    conv.expected_count = obj.get("message_count") if isinstance(obj.get("message_count"), int) else None
    conv.namespace = obj.get("namespace") if isinstance(obj.get("namespace"), str) else ""
    conv.pinned = obj.get("pinned") is True
    plan.conversations[key] = conv
    if not plan.source_key.startswith("conversation:"):
        plan.source_key = f"conversation:{obj.get('id')}"
    return conv
