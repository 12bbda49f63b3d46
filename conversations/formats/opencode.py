"""OpenCode sessions: its storage (`storage/session/`, `message/`, `part/` JSON files), its
newer SQLite database (`opencode.db`: tables `session`, `message`, `part`), or one
session as `opencode export` writes it.

Whatever the source, a session is read as the export's shape,
`{"info": session, "messages": [{"info": message, "parts": [part, ...]}, ...]}`
(`assemble` builds it from storage files or database rows; the importer reads those).
Messages and parts are in the order of their ids (OpenCode's ids sort by time).

- a user message → a `user` row: its text parts (a synthetic one, added by OpenCode
  rather than typed, is marked in meta), images as image blocks, other files as file
  blocks, `@agent` and subtask parts as the text they stand for;
- an assistant message → per step (`step-start` … `step-finish`, one model call):
  `reasoning` parts as `thought` rows, then one `assistant` row with its text and every
  `tool` part's call (model and the step's tokens and cost in meta), then a `tool` row
  per call that completed or failed (`is_error`); a `task` call names the session it
  started in meta, and that child session (`parentID`) is a subagent under it;
- a compaction (a user message with a `compaction` part, then the assistant message
  marked `summary`) → a checkpoint after the rows before it, whose summary is that
  message's text;
- an assistant message that failed (`error`) with nothing else to show → a harness row
  saying so;
- `patch`, `snapshot`, `step-*`, `retry` and `agent` parts are kept as entries.

The session and each message with its parts are kept as entries. The session id is the
source key.
"""

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
    parse_time,
)

NAME = "opencode"
KEPT_PARTS = ("patch", "snapshot", "step-start", "step-finish", "retry", "agent")


def detect_document(data) -> bool:
    if not isinstance(data, dict) or not isinstance(data.get("info"), dict) or not isinstance(data.get("messages"),
                                                                                                 list):
        return False
    ident = data["info"].get("id")
    return (isinstance(ident, str) and ident.startswith("ses")) or all(
        isinstance(m, dict) and isinstance(m.get("info"), dict) and isinstance(m.get("parts"), list)
        for m in data["messages"])


# ---- storage files and database rows into sessions --------------------------------------------


def kind_of(obj) -> str | None:
    """Which storage record a JSON object is: "session", "message" or "part" (None: neither)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
        return None
    if isinstance(obj.get("messageID"), str) and isinstance(obj.get("type"), str):
        return "part"
    if obj.get("role") in ("user", "assistant") and isinstance(obj.get("sessionID"), str):
        return "message"
    if isinstance(obj.get("title"), str) and ("projectID" in obj or "directory" in obj or obj["id"].startswith("ses")):
        return "session"
    return None


def assemble(sessions: list[dict], messages: list[dict], parts: list[dict]) -> list[dict]:
    """Storage records (or database rows made into them) → one export-shaped document per
    session, sessions in the order of their ids; messages of an unknown session get one."""
    by_session: dict[str, list[dict]] = {}
    for m in messages:
        by_session.setdefault(m["sessionID"], []).append(m)
    by_message: dict[str, list[dict]] = {}
    for p in parts:
        by_message.setdefault(p["messageID"], []).append(p)
    known = {s["id"]: s for s in sessions}
    for sid in by_session:
        known.setdefault(sid, {"id": sid, "title": "", "missing": True})
    out = []
    for sid in sorted(known):
        msgs = sorted(by_session.get(sid, ()), key=lambda m: m["id"])
        out.append({"info": known[sid], "messages": [
            {"info": m, "parts": sorted(by_message.get(m["id"], ()), key=lambda p: p["id"])} for m in msgs]})
    return out


def database_records(rows_session, rows_message, rows_part) -> tuple[list, list, list]:
    """The SQLite tables' rows (as dicts) as storage records: the JSON `data` column with the
    ids the columns hold put back."""
    sessions = []
    for r in rows_session:
        info = {"id": r["id"], "projectID": r.get("project_id"), "directory": r.get("directory"),
                "title": r.get("title") or "", "version": r.get("version"), "slug": r.get("slug"),
                "time": {"created": r.get("time_created"), "updated": r.get("time_updated")}}
        if r.get("parent_id"):
            info["parentID"] = r["parent_id"]
        sessions.append({k: v for k, v in info.items() if v is not None})
    messages = []
    for r in rows_message:
        data = _json(r.get("data"))
        if data is not None:
            messages.append({**data, "id": r["id"], "sessionID": r["session_id"]})
    parts = []
    for r in rows_part:
        data = _json(r.get("data"))
        if data is not None:
            parts.append({**data, "id": r["id"], "messageID": r["message_id"], "sessionID": r.get("session_id")})
    return sessions, messages, parts


def _json(value):
    if isinstance(value, dict):
        return value
    try:
        obj = loads(value) if isinstance(value, (str, bytes)) else None
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


# ---- a session into rows ------------------------------------------------------------------------


def _ms(value):
    return parse_time(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _usage(tokens) -> dict | None:
    if not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}

    def n(v):
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    usage = {"input_tokens": n(tokens.get("input")),
             "output_tokens": n(tokens.get("output")) + n(tokens.get("reasoning")),
             "cache_read_input_tokens": n(cache.get("read")), "cache_creation_input_tokens": n(cache.get("write"))}
    return usage if any(usage.values()) else None


def _file_block(part: dict) -> dict:
    url, mime = part.get("url"), part.get("mime")
    if isinstance(url, str) and isinstance(mime, str) and mime.startswith("image/") and url.startswith("data:") and \
            ";base64," in url:
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": url.split(",", 1)[1]}}
    block = {"type": "file", "mime": mime if isinstance(mime, str) else "application/octet-stream"}
    for key in ("filename", "url"):
        if isinstance(part.get(key), str):
            block[key] = part[key]
    return block


class _Session:
    def __init__(self, plan: Plan, conv: ConvPlan):
        self.plan = plan
        self.conv = conv
        self.compacting: int | None = None  # the last position before a compaction request

    def add(self, message: dict, at, entry: Entry) -> None:
        row = make_row(message, at, entry.seq, self.plan.problems, entry.line)
        if row:
            self.conv.rows.append(row)

    def user(self, info: dict, parts: list[tuple[dict, Entry]], entry: Entry) -> None:
        at = _ms((info.get("time") or {}).get("created")) if isinstance(info.get("time"), dict) else None
        blocks, synthetic = [], False
        for part, _e in parts:
            kind = part.get("type")
            if kind == "text":
                text = clean_text(part.get("text"))
                if text and text.strip() and not part.get("ignored"):
                    blocks.append({"type": "text", "text": text})
                    synthetic = synthetic or bool(part.get("synthetic"))
            elif kind == "file":
                blocks.append(_file_block(part))
            elif kind == "agent" and isinstance(part.get("name"), str):
                blocks.append({"type": "text", "text": f"@{part['name']}"})
            elif kind == "subtask":
                blocks.append({"type": "text", "text": f"[subtask for {part.get('agent')}] {part.get('prompt') or ''}"})
            elif kind == "compaction":
                self.compacting = self.conv.last_position
            elif kind not in KEPT_PARTS:
                self.plan.problems.append(Problem(_e.line, f"a part of type {str(kind)[:40]!r} in a user message has "
                                                           "no row; kept, not shown"))
        if not blocks:
            return
        meta = {"opencode": {"id": info.get("id"), "entry": entry.seq}}
        if synthetic:
            meta["opencode"]["synthetic"] = True
        for field in ("agent",):
            if isinstance(info.get(field), str):
                meta["opencode"][field] = info[field]
        body = blocks[0]["text"] if len(blocks) == 1 and blocks[0]["type"] == "text" else blocks
        self.add({"kind": "user", "content": body, "meta": meta}, at, entry)
        if not self.conv.title:
            self.conv.title = first_text(body)

    def assistant(self, info: dict, parts: list[tuple[dict, Entry]], entry: Entry) -> None:
        at = _ms((info.get("time") or {}).get("created")) if isinstance(info.get("time"), dict) else None
        if info.get("summary") is True:
            self._summary(info, parts, entry, at)
            return
        model = info.get("modelID") if isinstance(info.get("modelID"), str) else None
        step: dict = {"texts": [], "calls": [], "results": [], "entry": entry}
        made = False
        for part, pentry in parts:
            kind = part.get("type")
            if kind == "step-start" and (step["texts"] or step["calls"]):
                made |= self._step(info, step, model, at)
                step = {"texts": [], "calls": [], "results": [], "entry": pentry}
            if kind == "reasoning":
                text = clean_text(part.get("text"))
                if text and text.strip():
                    self.add({"kind": "thought", "text": text, "meta": {"opencode": {"id": info.get("id"),
                                                                                       "entry": pentry.seq}}},
                             _ms((part.get("time") or {}).get("start")) if isinstance(part.get("time"), dict) else at,
                             pentry)
            elif kind == "text":
                text = clean_text(part.get("text"))
                if text and text.strip():
                    step["texts"].append(text)
            elif kind == "tool":
                self._tool(part, pentry, step)
            elif kind == "file":
                step["texts"].append(f"[file {part.get('filename') or part.get('url') or ''}]")
            elif kind == "step-finish":
                step["tokens"], step["cost"] = part.get("tokens"), part.get("cost")
                made |= self._step(info, step, model, at)
                step = {"texts": [], "calls": [], "results": [], "entry": pentry}
            elif kind not in KEPT_PARTS:
                self.plan.problems.append(Problem(pentry.line, f"a part of type {str(kind)[:40]!r} has no row; kept, "
                                                               "not shown"))
        made |= self._step(info, step, model, at)
        error = info.get("error")
        if isinstance(error, dict) and not made:
            data = error.get("data") if isinstance(error.get("data"), dict) else {}
            text = f"{error.get('name') or 'error'}: {data.get('message') or ''}".strip()
            self.add({"kind": "user", "content": f"<local-command-stderr>{clean_text(text)}</local-command-stderr>",
                      "meta": {"opencode": {"id": info.get("id"), "entry": entry.seq, "harness": True,
                                            "error": error.get("name")}}}, at, entry)

    def _tool(self, part: dict, pentry: Entry, step: dict) -> None:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        call_id, name = part.get("callID"), part.get("tool")
        if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
            self.plan.problems.append(Problem(pentry.line, "a tool part without callID or tool; kept, not shown"))
            return
        args = state.get("input")
        step["calls"].append({"id": call_id, "name": name, "arguments": args if isinstance(args, dict) else {}})
        metadata = state.get("metadata") if isinstance(state.get("metadata"), dict) else {}
        if isinstance(metadata.get("sessionId"), str):
            step.setdefault("spawned", []).append(metadata["sessionId"])
        status = state.get("status")
        if status not in ("completed", "error"):
            return  # pending or running when the session was saved: the call waits for its result
        times = state.get("time") if isinstance(state.get("time"), dict) else {}
        if status == "completed":
            output = clean_text(state.get("output")) if isinstance(state.get("output"), str) else None
            content = output if output and output.strip() else "(empty result)"
            blocks = [_file_block(a) for a in state.get("attachments") or () if isinstance(a, dict)]
            if blocks:
                content = ([{"type": "text", "text": content}] if content != "(empty result)" else []) + blocks
        else:
            content = clean_text(state.get("error")) if isinstance(state.get("error"), str) else "(error)"
        result = {"kind": "tool", "tool_call_id": call_id, "name": name, "content": content or "(error)",
                  "meta": {"opencode": {"entry": pentry.seq, "part": part.get("id")}}}
        if isinstance(state.get("title"), str):
            result["meta"]["opencode"]["title"] = state["title"]
        if status == "error":
            result["is_error"] = True
        step["results"].append((result, _ms(times.get("end")), pentry))

    def _step(self, info: dict, step: dict, model, at) -> bool:
        """The rows of one model call: its reply, then its tools' results."""
        if not step["texts"] and not step["calls"]:
            return False
        entry = step["entry"]
        meta = {"opencode": {"id": info.get("id"), "entry": entry.seq}}
        for field in ("providerID", "mode", "agent"):
            if isinstance(info.get(field), str):
                meta["opencode"][field] = info[field]
        if model:
            meta["model"] = model
        usage = _usage(step.get("tokens"))
        if usage:
            meta["usage"] = usage
        if isinstance(step.get("cost"), (int, float)) and not isinstance(step.get("cost"), bool):
            meta["opencode"]["cost"] = step["cost"]
        if step.get("spawned"):
            meta["opencode"]["spawned"] = step["spawned"]
        out = {"kind": "assistant", "meta": meta}
        if step["texts"]:
            out["content"] = "\n\n".join(step["texts"])
        if step["calls"]:
            out["tool_calls"] = step["calls"]
        self.add(out, at, entry)
        for result, when, pentry in step["results"]:
            self.add(result, when or at, pentry)
        return True

    def _summary(self, info: dict, parts: list[tuple[dict, Entry]], entry: Entry, at) -> None:
        """A compaction's summary: a checkpoint over the rows before the compaction was asked."""
        summary = "\n\n".join(clean_text(p.get("text")) or "" for p, _e in parts if p.get("type") == "text").strip()
        position = self.compacting if self.compacting is not None else self.conv.last_position
        self.compacting = None
        if not summary:
            self.plan.problems.append(Problem(entry.line, "a compaction summary without text; no checkpoint"))
            return
        if position < 0:
            self.add({"kind": "user", "content": summary, "meta": {"opencode": {"id": info.get("id"),
                                                                                  "entry": entry.seq,
                                                                                  "summary": True}}}, at, entry)
            position = self.conv.last_position
            if position < 0:
                return
        self.conv.folds.append(Fold(position=position, summary=summary, at=at, created_by=NAME))


def parse(data, *, subject: str = "") -> Plan:
    text = decode_text(data)
    try:
        doc = loads(text)
    except ValueError as exc:
        raise FormatError(f"an OpenCode session is one JSON document: {exc}", field="file") from None
    if not detect_document(doc):
        raise FormatError("expected an OpenCode session ({\"info\": session, \"messages\": [{\"info\", "
                          "\"parts\"}]}, as `opencode export` writes it; import the storage folder or opencode.db "
                          "for all sessions)",
                          field="file")
    return parse_session(doc, text, subject=subject)


def parse_session(doc: dict, text: str, *, subject: str = "") -> Plan:
    info = doc["info"]
    sid = info.get("id") if isinstance(info.get("id"), str) and info["id"] else None
    plan = Plan(format=NAME, source_key=sid or content_hash(text))
    own = {k: info[k] for k in ("id", "projectID", "directory", "version", "slug") if isinstance(info.get(k), str)}
    if isinstance(info.get("parentID"), str) and info["parentID"]:
        own["parent_session"] = info["parentID"]
    conv = plan.add_main(subject=subject, meta={"opencode": own},
                         title=clean_text(info.get("title")) if isinstance(info.get("title"), str) else "")
    if own.get("parent_session"):
        conv.relation = "subagent"
    plan.entries.append(Entry(seq=0, line=None, raw=dumps({"session": info}), conv="main"))
    if info.get("missing"):
        plan.problems.append(Problem(None, f"session {str(sid)[:60]} has messages but no session record; imported "
                                           "without its title"))
    session = _Session(plan, conv)
    for n, item in enumerate(doc["messages"], 1):
        entry = Entry(seq=len(plan.entries), line=n, raw=dumps(item), conv="main")
        plan.entries.append(entry)
        if not isinstance(item, dict) or not isinstance(item.get("info"), dict):
            plan.problems.append(Problem(n, "a message without info; kept, not shown"))
            entry.position = conv.last_position
            continue
        minfo = item["info"]
        parts = []
        for part in item.get("parts") or ():
            if isinstance(part, dict):
                parts.append((part, entry))
            else:
                plan.problems.append(Problem(n, "a part that is not an object; kept, not shown"))
        if minfo.get("role") == "user":
            session.user(minfo, parts, entry)
        elif minfo.get("role") == "assistant":
            session.assistant(minfo, parts, entry)
        else:
            plan.problems.append(Problem(n, f"a message with role {str(minfo.get('role'))[:40]!r}; kept, not shown"))
        entry.position = conv.last_position
    if not conv.title:
        conv.title = f"OpenCode session {plan.source_key[:12]}"
    conv.title = " ".join(conv.title.split())[:300]
    return plan
