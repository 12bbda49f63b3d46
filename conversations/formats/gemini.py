"""Gemini CLI sessions (`~/.gemini/tmp/<project>/chats/session-*.json` and `*.jsonl`).

Three shapes, one mapping:

- the JSON record of older versions: `{"sessionId", "projectHash", "startTime",
  "lastUpdated", "messages": [...], "summary"?, "kind"?}`;
- the JSON Lines log of newer ones: a metadata line, then one line per message record
  (a record written again when the message grows: its latest version counts), `{"$set":
  {...}}` lines updating the metadata (a `messages` snapshot replaces the list: after a
  `/compress` it starts with the summary turns), and `{"$rewindTo": id}` lines cutting the
  list before a message (a rewind);
- a saved chat (`/chat save`, `checkpoint-*.json`) or a checkpointing file: a history of
  `Content` turns `{"role": "user" | "model", "parts": [...]}` (alone, or under
  `clientHistory`).

Messages map as:

- `user` → a `user` row (text parts; inline images as image blocks; `functionResponse`
  parts, in a history, as `tool` rows);
- `gemini` → a `thought` row per thought summary, then one `assistant` row with its
  text and every tool call (`toolCalls[]`, or `functionCall` parts), its model and
  token usage in meta; each call's result (`functionResponse` parts, matched by id, else
  by name) is a `tool` row after it, an error or cancelled call marked `is_error`;
  thought parts (`"thought": true`) are `thought` rows;
- `info`, `error`, `warning` → what the CLI said, not the person nor the model: a
  harness row (a `user` row wrapped in `<local-command-stdout>` / `-stderr>`, as Claude
  Code records its commands' output);
- a compression (a `messages` snapshot dropping earlier messages and opening with new
  summary turns) → a checkpoint after the last row it folds, whose summary is the text
  of those turns;
- a rewind → the messages it cut become a fork at the message before them.

Every line (JSONL), message (JSON) or turn (history) is kept as an entry. The session id
is the source key (a session file grows and is imported again: its new messages are
appended); a subagent's own file (`"kind": "subagent"`) names its session in meta when
the importer knows it (its folder: `chats/<session>/<agent>.jsonl`).
"""

import uuid as uuidlib

from .base import (
    ConvPlan,
    Entry,
    Fold,
    Line,
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
    read_jsonl,
    split_lines,
)

NAME = "gemini"
MESSAGE_TYPES = ("user", "gemini", "model", "info", "error", "warning")
HARNESS_TAG = {"info": "local-command-stdout", "warning": "local-command-stderr", "error": "local-command-stderr"}
# An injected first turn holding the workspace's tree: what the model read, never a title.
SESSION_CONTEXT = "<session_context>"


def _is_metadata(obj) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("sessionId"), str) and "projectHash" in obj


def _is_record(obj) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("id"), str) and obj.get("type") in MESSAGE_TYPES


def detect(lines: list[Line]) -> bool:
    objs = [ln.obj for ln in lines if isinstance(ln.obj, dict)]
    if not objs:
        return False
    known = sum(_is_metadata(o) or _is_record(o) or isinstance(o.get("$set"), dict) or
                isinstance(o.get("$rewindTo"), str) for o in objs)
    return known * 2 > len(objs) and any(_is_metadata(o) or "$set" in o or "$rewindTo" in o for o in objs)


def _history_of(data):
    """The Content turns of a saved chat or a checkpointing file; None when it is not one."""
    if isinstance(data, dict) and isinstance(data.get("clientHistory"), list):
        data = data["clientHistory"]
    if isinstance(data, list) and data and all(
            isinstance(c, dict) and c.get("role") in ("user", "model") and isinstance(c.get("parts"), list)
            and "content" not in c for c in data):
        return data
    return None


def detect_document(data) -> bool:
    if isinstance(data, dict) and _is_metadata(data) and isinstance(data.get("messages"), list):
        return True
    return _history_of(data) is not None


# ---- reading the record stream -----------------------------------------------------------


class _Stream:
    """The messages of a session as its records built them, and what happened to them."""

    def __init__(self):
        self.meta: dict = {}
        self.live: dict[str, None] = {}  # the list the CLI holds now (a dict: ordered, found at once)
        self.main: list[str] = []  # every message of the main line, in the order first seen
        self.versions: dict[str, tuple[dict, Entry]] = {}  # id → (latest record, its entry)
        self.branches: list[dict] = []  # {"point": id | None, "ids": [...]}: what a rewind cut
        self.folds: list[dict] = []  # {"before": first kept id | None, "after": last folded id, "ids", "at"}
        self.summary_ids: set[str] = set()

    def message(self, record: dict, entry: Entry) -> None:
        mid = record["id"]
        new = mid not in self.versions
        self.versions[mid] = (record, entry)
        self.live.setdefault(mid)
        if new:
            self.main.append(mid)

    def rewind(self, mid: str, entry: Entry, problems: list) -> None:
        if mid not in self.live:
            problems.append(Problem(entry.line, f"$rewindTo names message {mid[:60]!r}, which is not in the session; "
                                                "kept, not shown"))
            return
        live = list(self.live)
        cut = set(live[live.index(mid):])
        self.live = dict.fromkeys(live[:live.index(mid)])
        ids = [m for m in self.main if m in cut]
        self.main = [m for m in self.main if m not in cut]
        point = next(reversed(self.live)) if self.live else None
        self.branches.append({"point": point, "ids": ids})

    def snapshot(self, messages: list, entry: Entry, problems: list) -> None:
        records = [m for m in messages if _is_record(m)]
        if len(records) != len(messages):
            problems.append(Problem(entry.line, "a $set messages snapshot holds items that are not message records; "
                                                "kept, not shown"))
        ids = [m["id"] for m in records]
        dropped = [m for m in self.live if m not in ids]
        leading = []
        for mid in ids:
            if mid in self.versions:
                break
            leading.append(mid)
        if dropped and leading:  # a compression: summary turns first, then what it kept
            kept = next((m for m in ids if m in self.versions), None)
            self.summary_ids.update(leading)
            self.folds.append({"before": kept, "after": dropped[-1], "ids": leading, "at": entry})
        for record in records:
            if record["id"] in self.summary_ids:
                self.versions[record["id"]] = (record, entry)
            else:
                self.message(record, entry)
        self.live = dict.fromkeys(ids)


def _read(text: str, plan: Plan) -> tuple[_Stream, list[Entry], str]:
    """The stream of a JSON record, a JSONL log or a history; and which shape it was."""
    stream = _Stream()
    entries = plan.entries
    try:
        doc = loads(text)
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        head = {k: v for k, v in doc.items() if k != "messages"}
        entries.append(Entry(seq=0, line=None, raw=dumps({"metadata": head})))
        stream.meta.update(head)
        for i, m in enumerate(doc["messages"]):
            entry = Entry(seq=i + 1, line=i + 1, raw=dumps(m))
            entries.append(entry)
            if _is_record(m):
                stream.message(m, entry)
            else:
                plan.problems.append(Problem(i + 1, "a message without id or known type; kept, not shown"))
        return stream, entries, "json"
    for seq, ln in enumerate(read_jsonl(split_lines(text))):
        entry = Entry(seq=seq, line=ln.number, raw=ln.text)
        entries.append(entry)
        obj = ln.obj
        if ln.error:
            plan.problems.append(Problem(ln.number, ln.error))
        elif isinstance(obj, dict) and isinstance(obj.get("$rewindTo"), str):
            stream.rewind(obj["$rewindTo"], entry, plan.problems)
        elif _is_record(obj):
            stream.message(obj, entry)
        elif isinstance(obj, dict) and isinstance(obj.get("$set"), dict):
            update = obj["$set"]
            if isinstance(update.get("messages"), list):
                stream.snapshot(update["messages"], entry, plan.problems)
            stream.meta.update({k: v for k, v in update.items() if k != "messages"})
        elif _is_metadata(obj):
            stream.meta.update(obj)
        else:
            plan.problems.append(Problem(ln.number, "a line that is no Gemini CLI record; kept, not shown"))
    return stream, entries, "jsonl"


# ---- messages into rows ---------------------------------------------------------------------


def _parts(content) -> list:
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    return [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []


def _block(part: dict) -> dict | None:
    """A non-text part as a memoryui content block."""
    inline = part.get("inlineData")
    if isinstance(inline, dict) and isinstance(inline.get("data"), str):
        mime = inline.get("mimeType") if isinstance(inline.get("mimeType"), str) else "application/octet-stream"
        if mime.startswith("image/"):
            return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": inline["data"]}}
        return {"type": "inline_data", "mime_type": mime, "data": inline["data"]}
    data = part.get("fileData")
    if isinstance(data, dict):
        return {"type": "file_data", **{k: v for k, v in data.items() if isinstance(k, str)}}
    for key in ("executableCode", "codeExecutionResult"):
        if isinstance(part.get(key), dict):
            return {"type": key, **part[key]}
    return None


def _usage(tokens) -> dict | None:
    """Gemini's token counts as usage: the prompt includes its cached part; thoughts are output."""
    if not isinstance(tokens, dict):
        return None
    count = {k: v for k, v in tokens.items() if isinstance(v, int) and not isinstance(v, bool)}
    usage = {"input_tokens": count.get("input", 0), "output_tokens": count.get("output", 0) + count.get("thoughts", 0)}
    if count.get("cached"):
        usage["input_tokens_details"] = {"cached_tokens": count["cached"]}
    return usage if any(usage.values()) else None


def _result_content(result, status) -> tuple[object, bool]:
    """A tool call's result parts as tool-row content, and whether it is an error."""
    error = status in ("error", "cancelled")
    texts, blocks = [], []
    for part in _parts(result):
        response = part.get("functionResponse")
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                texts.append(body["error"])
                error = True
            elif isinstance(body, dict) and isinstance(body.get("output"), str):
                texts.append(body["output"])
            elif body is not None:
                texts.append(dumps(body))
            for inner in response.get("parts") or ():
                if isinstance(inner, dict) and _block(inner):
                    blocks.append(_block(inner))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif _block(part):
            blocks.append(_block(part))
    text = clean_text("\n".join(t for t in texts if t)) or ""
    if blocks:
        return ([{"type": "text", "text": text}] if text.strip() else []) + blocks, error
    if text.strip():
        return text, error
    return f"({status})" if isinstance(status, str) and status not in ("success", "") else "(empty result)", error


class _Rows:
    """Rows of one conversation, each message's last position remembered."""

    def __init__(self, conv: ConvPlan, problems: list):
        self.conv = conv
        self.problems = problems
        self.last_of: dict[str, int] = {}
        self.open_calls: list[tuple[str, str]] = []  # (name, id) of calls in a history not answered yet

    def add(self, message: dict, at, entry: Entry) -> None:
        row = make_row(message, at, entry.seq, self.problems, entry.line)
        if row:
            self.conv.rows.append(row)

    def record(self, record: dict, entry: Entry) -> None:
        """One message record of a session."""
        kind = record.get("type")
        at = parse_time(record.get("timestamp"))
        meta = {"gemini": {"id": record["id"], "entry": entry.seq}}
        if kind == "user":
            self._user(record.get("content"), at, entry, meta)
        elif kind in ("gemini", "model"):
            self._reply(record, at, entry, meta)
        else:
            text = clean_text(first_text(record.get("content"), limit=1_000_000) if not isinstance(
                record.get("content"), str) else record["content"]) or ""
            if text.strip():
                tag = HARNESS_TAG[kind]
                self.add({"kind": "user", "content": f"<{tag}>{text}</{tag}>",
                          "meta": {"gemini": {**meta["gemini"], "type": kind, "harness": True}}}, at, entry)
            else:
                self.problems.append(Problem(entry.line, f"{kind} message without text; kept, not shown"))
        self.last_of[record["id"]] = self.conv.last_position

    def _user(self, content, at, entry: Entry, meta: dict) -> None:
        blocks, results = [], []
        for part in _parts(content):
            if isinstance(part.get("functionResponse"), dict):
                results.append(part)
            elif isinstance(part.get("text"), str):
                text = clean_text(part["text"])
                if text and text.strip():
                    blocks.append({"type": "text", "text": text})
            elif _block(part):
                blocks.append(_block(part))
        if blocks:
            body = blocks[0]["text"] if len(blocks) == 1 and blocks[0]["type"] == "text" else blocks
            if isinstance(body, str) and body.lstrip().startswith(SESSION_CONTEXT):
                meta = {"gemini": {**meta["gemini"], "session_context": True}}
            self.add({"kind": "user", "content": body, "meta": meta}, at, entry)
        for part in results:
            self._answer(part, at, entry, meta)

    def _answer(self, part: dict, at, entry: Entry, meta: dict) -> None:
        """A functionResponse part of a history: the result of its call, by id, else by name."""
        response = part["functionResponse"]
        name = response.get("name") if isinstance(response.get("name"), str) else None
        call_id = response.get("id") if isinstance(response.get("id"), str) and response["id"] else None
        if call_id is None:
            call_id = next((i for n, i in self.open_calls if n == name), None)
        if call_id is None:
            self.problems.append(Problem(entry.line, f"functionResponse {str(name)[:60]!r} answers no call; kept, "
                                                     "not shown"))
            return
        self.open_calls = [(n, i) for n, i in self.open_calls if i != call_id]
        content, error = _result_content([part], None)
        message = {"kind": "tool", "tool_call_id": call_id, "content": content, "meta": meta}
        if name:
            message["name"] = name
        if error:
            message["is_error"] = True
        self.add(message, at, entry)

    def _reply(self, record: dict, at, entry: Entry, meta: dict) -> None:
        self._thoughts(record, at, entry, meta)
        parts, calls = self._content(record, at, entry, meta)
        results, agents = self._tool_calls(record, calls, entry)
        if not parts and not calls:
            return
        out = {"kind": "assistant", "meta": {"gemini": dict(meta["gemini"])}}
        if parts:
            out["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
        if calls:
            out["tool_calls"] = calls
        if isinstance(record.get("model"), str) and record["model"]:
            out["meta"]["model"] = record["model"]
        usage = _usage(record.get("tokens"))
        if usage:
            out["meta"]["usage"] = usage
            out["meta"]["gemini"]["tokens"] = record["tokens"]
        if agents:
            out["meta"]["gemini"]["spawned"] = agents
        self.add(out, at, entry)
        for call_id, tool in results:
            if tool.get("result") is None and tool.get("status") not in ("error", "cancelled"):
                continue  # still running when the file was written: the call waits for its result
            content, error = _result_content(tool.get("result"), tool.get("status"))
            message = {"kind": "tool", "tool_call_id": call_id, "name": tool["name"], "content": content,
                       "meta": {"gemini": {**meta["gemini"], "status": tool.get("status")}}}
            if error:
                message["is_error"] = True
            self.add(message, parse_time(tool.get("timestamp")) or at, entry)

    def _thoughts(self, record: dict, at, entry: Entry, meta: dict) -> None:
        """A reply's thought summaries, a `thought` row each."""
        for thought in record.get("thoughts") or ():
            if not isinstance(thought, dict):
                continue
            subject = clean_text(thought.get("subject")) or ""
            description = clean_text(thought.get("description")) or ""
            text = f"**{subject}**\n\n{description}".strip() if subject else description.strip()
            if text:
                self.add({"kind": "thought", "text": text, "meta": meta}, parse_time(thought.get("timestamp")) or at,
                         entry)

    def _content(self, record: dict, at, entry: Entry, meta: dict) -> tuple[list, list]:
        """A reply's content parts: its text and blocks, and its functionCall parts as calls
        (thought parts go in as `thought` rows)."""
        parts, calls = [], []
        for part in _parts(record.get("content")):
            if isinstance(part.get("text"), str):
                text = clean_text(part["text"])
                if not (text and text.strip()):
                    continue
                if part.get("thought") is True:
                    self.add({"kind": "thought", "text": text, "meta": meta}, at, entry)
                else:
                    parts.append({"type": "text", "text": text})
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                name = call.get("name") if isinstance(call.get("name"), str) and call["name"] else None
                if name is None:
                    self.problems.append(Problem(entry.line, "functionCall without a name; kept, not shown"))
                    continue
                call_id = call.get("id") if isinstance(call.get("id"), str) and call["id"] else _made_id(
                    record["id"], len(calls))
                args = call.get("args")
                calls.append({"id": call_id, "name": name, "arguments": args if isinstance(args, dict) else {}})
                self.open_calls.append((name, call_id))
            elif _block(part):
                parts.append(_block(part))
        return parts, calls

    def _tool_calls(self, record: dict, calls: list, entry: Entry) -> tuple[list, list]:
        """A reply's recorded tool calls, added to `calls`: (their results to write, the agents they started)."""
        results, agents = [], []
        for i, tool in enumerate(record.get("toolCalls") or ()):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
                self.problems.append(Problem(entry.line, "a tool call without a name; kept, not shown"))
                continue
            call_id = tool.get("id") if isinstance(tool.get("id"), str) and tool["id"] else _made_id(record["id"], i)
            args = tool.get("args")
            calls.append({"id": call_id, "name": tool["name"], "arguments": args if isinstance(args, dict) else {}})
            if isinstance(tool.get("agentId"), str) and tool["agentId"]:
                agents.append(tool["agentId"])
            results.append((call_id, tool))
        return results, agents


def _made_id(message_id: str, index: int) -> str:
    """An id for a call recorded without one: the same every import."""
    return "mui_call_" + uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"gemini:{message_id}:{index}").hex[:24]


# ---- the plan ---------------------------------------------------------------------------------


def parse(data, *, subject: str = "") -> Plan:
    text = decode_text(data)
    plan = Plan(format=NAME)
    try:
        doc = loads(text)
    except (ValueError, RecursionError):
        doc = None
    history = _history_of(doc)
    if history is not None:
        return _parse_history(history, doc, text, plan, subject)
    stream, entries, shape = _read(text, plan)
    meta = stream.meta
    session = meta.get("sessionId") if isinstance(meta.get("sessionId"), str) and meta["sessionId"] else None
    plan.source_key = session or content_hash(text)
    if session is None:
        plan.problems.append(Problem(None, "no sessionId: the file is identified by its content"))
    info = {k: meta[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated", "kind", "directories")
            if meta.get(k) is not None}
    info["shape"] = shape
    main = plan.add_main(subject=subject, meta={"gemini": info})
    rows = _Rows(main, plan.problems)
    for mid in stream.main:
        record, entry = stream.versions[mid]
        rows.record(record, entry)
    _fold(stream, rows, plan)
    title = clean_text(meta.get("summary")) if isinstance(meta.get("summary"), str) else None
    if not title:
        first = next((stream.versions[m][0] for m in stream.main if stream.versions[m][0].get("type") == "user"
                      and not _text_of(stream.versions[m][0].get("content")).lstrip().startswith(SESSION_CONTEXT)),
                     None)
        title = first_text(_text_of(first.get("content"))) if first else ""
    main.title = " ".join((title or f"Gemini CLI session {plan.source_key[:8]}").split())[:300]
    if meta.get("kind") == "subagent":
        main.relation = "subagent"
        main.title = f"Subagent: {main.title}"[:300]
    _branches(stream, rows, plan, subject)
    _place_entries(plan, stream)
    return plan


def _text_of(content) -> str:
    return "\n".join(p["text"] for p in _parts(content) if isinstance(p.get("text"), str))


def _fold(stream: _Stream, rows: _Rows, plan: Plan) -> None:
    """Each compression: a checkpoint after the last row it folded."""
    for fold in stream.folds:
        summary = "\n\n".join(_text_of(stream.versions[m][0].get("content")) for m in fold["ids"]
                              if m in stream.versions).strip()
        summary = clean_text(summary) or "(compressed by Gemini CLI; no readable summary)"
        if fold["before"] in rows.last_of:
            index = stream.main.index(fold["before"])
            earlier = [rows.last_of[m] for m in stream.main[:index] if m in rows.last_of]
            position = max(earlier) if earlier else -1
        else:
            position = rows.last_of.get(fold["after"], rows.conv.last_position)
        if position < 0:
            plan.problems.append(Problem(fold["at"].line, "a compression before any message; kept, not shown"))
            continue
        rows.conv.folds.append(Fold(position=position, summary=summary, at=parse_time(
            stream.versions[fold["ids"][0]][0].get("timestamp")) if fold["ids"] else None, created_by=NAME))


def _branches(stream: _Stream, rows: _Rows, plan: Plan, subject: str) -> None:
    """What each rewind cut: a fork at the message before it."""
    where: dict[str, tuple[str, int]] = {m: ("main", p) for m, p in rows.last_of.items()}
    for n, branch in enumerate(stream.branches):
        if not branch["ids"]:
            continue
        key = f"rewind:{n + 1}"
        parent_key, position = where.get(branch["point"], ("main", -1)) if branch["point"] else ("main", -1)
        fork = ConvPlan(key=key, subject=subject, parent_key=parent_key, relation="fork",
                        parent_position=position if position >= 0 else None, copy_prefix=position >= 0,
                        base=position + 1 if position >= 0 else 0,
                        title=f"{plan.conversations['main'].title} (rewound)"[:300],
                        meta={"gemini": {"rewound_from": branch["ids"][0]}})
        plan.conversations[key] = fork
        fork_rows = _Rows(fork, plan.problems)
        for mid in branch["ids"]:
            record, entry = stream.versions[mid]
            fork_rows.record(record, entry)
        for m, p in fork_rows.last_of.items():
            where[m] = (key, p)


def _place_entries(plan: Plan, stream: _Stream) -> None:
    """Each entry's conversation and position: a message's, where its rows went (its latest
    version's); another line's, the main conversation as it stood."""
    placed = {}
    for key, conv in plan.conversations.items():
        for i, row in enumerate(conv.rows):
            placed[row.entry] = (key, conv.base + i)
    last = -1
    for entry in plan.entries:
        if entry.seq in placed:
            entry.conv, entry.position = placed[entry.seq]
            if entry.conv == "main":
                last = entry.position
        else:
            entry.conv, entry.position = "main", last


def _parse_history(history: list, doc, text: str, plan: Plan, subject: str) -> Plan:
    """A saved chat: Content turns, each kept as an entry."""
    plan.source_key = content_hash(text)
    main = plan.add_main(subject=subject, meta={"gemini": {"shape": "history"}})
    rows = _Rows(main, plan.problems)
    if isinstance(doc, dict):
        plan.entries.append(Entry(seq=0, line=None, raw=dumps({k: v for k, v in doc.items()
                                                               if k != "clientHistory"})))
    for i, content in enumerate(history):
        entry = Entry(seq=len(plan.entries), line=i + 1, raw=dumps(content))
        plan.entries.append(entry)
        meta = {"gemini": {"entry": entry.seq}}
        if content["role"] == "user":
            rows._user(content["parts"], None, entry, meta)
        else:
            rows._reply({"id": f"turn-{i}", "content": content["parts"]}, None, entry, meta)
        entry.position = main.last_position
    first = next((c for c in history if c["role"] == "user" and not _text_of(c["parts"]).lstrip().startswith(
        SESSION_CONTEXT) and _text_of(c["parts"]).strip()), None)
    main.title = first_text(_text_of(first["parts"])) if first else "Gemini CLI saved chat"
    return plan
