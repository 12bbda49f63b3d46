"""Journal JSONL: one `{"kind", "text", "at"}` line per entry, the six journal kinds.

`kind` and `text` become the row; `at` its time. Any other field of the line is
kept in the row's meta (`journal`), so rendering back gives each line again.
"""

import json

from ..message_schema import JOURNAL_KINDS
from .base import (
    Entry,
    Line,
    Plan,
    Problem,
    clean_text,
    content_hash,
    decode_text,
    make_row,
    parse_time,
    read_jsonl,
    split_lines,
)

NAME = "journal"


def detect(lines: list[Line]) -> bool:
    objs = [ln.obj for ln in lines if ln.obj is not None]
    return bool(objs) and all(isinstance(o, dict) and o.get("kind") in JOURNAL_KINDS and "text" in o for o in objs)


def parse(data, *, subject: str = "") -> Plan:
    text = decode_text(data)
    plan = Plan(format=NAME, source_key=content_hash(text))
    conv = plan.add_main(subject=subject, title="Journal")
    for seq, ln in enumerate(read_jsonl(split_lines(text))):
        entry = Entry(seq=seq, line=ln.number, raw=ln.text, conv="main")
        plan.entries.append(entry)
        if ln.error:
            plan.problems.append(Problem(ln.number, ln.error))
        elif not isinstance(ln.obj, dict) or ln.obj.get("kind") not in JOURNAL_KINDS:
            plan.problems.append(Problem(ln.number, "not a journal entry (kind must be one of "
                                                    f"{', '.join(JOURNAL_KINDS)}); kept, not shown"))
        else:
            obj = ln.obj
            body = clean_text(obj.get("text"))
            if not body or not body.strip():
                plan.problems.append(Problem(ln.number, "journal entry without text; kept, not shown"))
            else:
                extra = {k: v for k, v in obj.items() if k not in ("kind", "text", "at")}
                message = {"kind": obj["kind"], "text": body}
                if extra:
                    message["meta"] = {"journal": extra}
                at = parse_time(obj.get("at"))
                if obj.get("at") is not None and at is None:
                    plan.problems.append(Problem(ln.number, f"unreadable time {str(obj.get('at'))[:40]!r}; "
                                                            "the import time is used"))
                row = make_row(message, at, seq, plan.problems, ln.number)
                if row:
                    conv.rows.append(row)
        entry.position = conv.last_position
    return plan


def render(rows):
    for _position, kind, created_at, message in rows:
        if kind not in JOURNAL_KINDS:
            continue
        line = {"kind": kind, "text": message["text"], "at": created_at.isoformat().replace("+00:00", "Z")}
        extra = (message.get("meta") or {}).get("journal")
        if isinstance(extra, dict):
            line.update(extra)
        yield json.dumps(line, ensure_ascii=False) + "\n"
