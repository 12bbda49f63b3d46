"""The Claude Code placer: for each entry, in order, which conversation it belongs to and
which rows it becomes (the mapping is described in claude_code.py, which feeds it for
whole files and for SessionStore batches alike)."""

import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass

from .base import (
    ConvPlan,
    Entry,
    Fold,
    Plan,
    Problem,
    clean_text,
    content_blocks,
    first_text,
    make_row,
    parse_time,
    reply_message,
)
from .claude_code_tree import Trail

LINKED = {"user", "assistant", "system", "progress", "attachment"}
FOLDER_MAX = 500


def working_folder(entry) -> str | None:
    """The project folder a Claude Code entry ran in: its `cwd` trimmed and storable, at most
    FOLDER_MAX characters, or None when it names none. A session's folder is the first one
    its entries name (the list names the session's namespace by it), whether the session
    came as a whole file (the placer) or in SessionStore batches (imports.entry_appends)."""
    cwd = entry.get("cwd") if isinstance(entry, dict) else None
    if not isinstance(cwd, str) or not cwd.strip():
        return None
    return clean_text(cwd.strip())[:FOLDER_MAX]


METADATA = {
    "summary", "custom-title", "ai-title", "file-history-snapshot", "queue-operation", "tag", "agent-name",
    "agent_metadata", "mode", "last-prompt", "pr-link", "worktree-state", "agent-setting", "content-replacement",
}


KNOWN = LINKED | METADATA


TOOL_NAMES_KEPT = 500
# While placing, the names of the latest calls are remembered (a result names its call's tool);
# a session of a million lines does not keep every one of them.
TOOL_NAMES_HELD = 2_000


@dataclass(slots=True)
class Known:
    """What the placer remembers of an entry that was already placed."""

    conv: str
    position: int  # the conversation's last position once the entry was placed
    group: str | None
    has_real_child: bool = False


def group_of(obj) -> str | None:
    if obj.get("type") != "assistant":
        return None
    message = obj.get("message")
    mid = message.get("id") if isinstance(message, dict) else None
    return mid if isinstance(mid, str) and mid else None


def _blocks(obj) -> list | str | None:
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    return message.get("content")


def is_tool_result(obj) -> bool:
    content = _blocks(obj)
    return obj.get("type") == "user" and isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def is_boundary(obj) -> bool:
    return obj.get("type") == "system" and obj.get("subtype") == "compact_boundary"


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


class Placer:
    """Places entries, in the order fed, into conversations; keeps the state to resume from.

    `lookup(uuids)` returns `Known` for uuids placed by an earlier import (the
    importer reads them from the stored entries); a pure parse has none.
    """

    def __init__(self, plan: Plan, *, state: dict | None = None,
                 lookup: Callable[[set[str]], dict[str, Known]] | None = None, subagent_stream: bool = False,
                 known=None, spawn_points: bool = True):
        self.plan = plan
        state = dict(state or {})
        self.current = state.get("current", "main")
        self.pending_fold = state.get("pending_fold")  # {"conv", "position", "at", "boundary"}
        self.tool_names: dict[str, str] = dict(state.get("tool_names", {}))
        self.agents: dict[str, str] = dict(state.get("agents", {}))  # agent id → conversation key
        self.session_ids: list[str] = list(state.get("session_ids", []))
        self.title_set = bool(state.get("title_set"))
        # uuid → Known; a whole file's import keeps it in a claude_code_tree.KnownTable (a few bytes each).
        self.known = known if known is not None else {}
        self.lookup = lookup
        self.subagent_stream = subagent_stream or bool(state.get("subagent_stream"))
        # Where the entries placed outside sidechains went, for spawn points (not kept when the
        # caller knows no sidechain will ask: a whole file with none).
        self.trail = Trail()
        self.spawn_points = spawn_points
        self.last_placed: tuple[str, int] | None = None
        self.forks = int(state.get("forks", 0))
        # Per conversation key: the reply whose row is not written yet (`_open_reply`), the
        # message id of the reply that is its last row, and calls whose id was made up
        # here and not answered yet.
        self.open: dict[str, dict] = dict(state.get("open", {}))
        self.tail: dict[str, str] = dict(state.get("tail", {}))
        self.unanswered: dict[str, list[str]] = {k: list(v) for k, v in state.get("unanswered", {}).items()}

    # -- state ---------------------------------------------------------------------

    def state(self) -> dict:
        names = list(self.tool_names.items())[-TOOL_NAMES_KEPT:]
        return {
            "current": self.current,
            "pending_fold": self.pending_fold,
            "tool_names": dict(names),
            "agents": self.agents,
            "session_ids": self.session_ids,
            "title_set": self.title_set,
            "subagent_stream": self.subagent_stream,
            "forks": self.forks,
            "open": self.open,
            "tail": self.tail,
            "unanswered": self.unanswered,
        }

    def prefetch(self, uuids: set[str]) -> None:
        missing = {u for u in uuids if u not in self.known}
        if missing and self.lookup:
            self.known.update(self.lookup(missing))

    # -- conversations ----------------------------------------------------------------

    def conv(self, key: str) -> ConvPlan:
        return self.plan.conversations[key]

    def _main(self) -> ConvPlan:
        return self.conv("main")

    def _fork(self, parent_key: str, position: int, first: Entry) -> str:
        # The fork copies the parent's rows up to the branch point: a reply held open there is written first.
        self._close(parent_key)
        self.forks += 1
        key = f"fork:{first.uuid or first.seq}"
        parent = self.conv(parent_key)
        self.plan.conversations[key] = ConvPlan(
            key=key,
            title=f"{parent.title or 'Claude Code session'} (rewind at #{position})"[:300],
            subject=parent.subject,
            meta={"claude_code": {"rewind_of": parent.meta.get("claude_code", {}).get("session_id"),
                                  "branch_uuid": first.uuid}},
            parent_key=parent_key,
            parent_position=position if position >= 0 else None,
            relation="fork",
            copy_prefix=position >= 0,
            base=position + 1 if position >= 0 else 0,
        )
        return key

    def _subagent(self, agent: str, first: Entry, obj: dict) -> str:
        key = self.agents.get(agent)
        if key:
            return key
        key = f"agent:{agent}"
        main = self._main()
        # Spawned by the entry written just before it (the Task call), wherever that was placed.
        parent_key, spawn = self.last_placed or ("main", self._last(main))
        before = self.trail.before(first.seq)
        if before is not None:
            parent_key, spawn = before
        prompt = first_text(_blocks(obj)) if obj.get("type") == "user" else ""
        self.plan.conversations[key] = ConvPlan(
            key=key,
            title=(f"Subagent {agent}" + (f": {prompt}" if prompt else ""))[:300],
            subject=main.subject,
            meta={"claude_code": {"agent_id": agent, "session_id": obj.get("sessionId")}},
            parent_key=parent_key,
            parent_position=spawn if spawn >= 0 else None,
            relation="subagent",
        )
        self.agents[agent] = key
        return key

    # -- one entry -----------------------------------------------------------------

    def _note_session(self, obj: dict) -> None:
        """The session ids an entry names, and the project folder it ran in (the list names the
        session's namespace by that folder), on the main conversation."""
        session, folder = obj.get("sessionId"), working_folder(obj)
        new_session = isinstance(session, str) and session and session not in self.session_ids
        if not new_session and folder is None:
            return
        ids = self._main().meta.setdefault("claude_code", {})
        if new_session:
            self.session_ids.append(session)
            ids.setdefault("session_id", session)
            if len(self.session_ids) > 1:
                ids["session_ids"] = list(self.session_ids)
        if folder is not None and "cwd" not in ids:
            ids["cwd"] = folder

    def place(self, entry: Entry, obj, *, main_line: bool | None = None) -> None:
        """Place one entry. `main_line` (whole-file parse only) says it is on the main chain."""
        problems = self.plan.problems
        if not isinstance(obj, dict):
            entry.conv = self.current
            entry.position = self._last(self.conv(entry.conv))
            if obj is not None:  # a line that is not JSON was reported when it was read
                problems.append(Problem(entry.line, f"entry is not a JSON object ({type(obj).__name__}); kept, "
                                                    "not shown"))
            return
        kind = obj.get("type")
        self._note_session(obj)
        if kind not in KNOWN:
            problems.append(Problem(entry.line, f"unknown entry type {str(kind)[:60]!r}; kept, not shown"))
            self._keep(entry, self.current)
            return
        if kind in METADATA or kind not in LINKED or entry.uuid is None:
            self._metadata(entry, obj)
            return

        sidechain = bool(obj.get("isSidechain")) and not self.subagent_stream
        parent = entry.parent_uuid
        if sidechain:
            agent = obj.get("agentId") if isinstance(obj.get("agentId"), str) else None
            if agent is None:
                known = self.known.get(parent) if parent else None
                agent = known.conv.removeprefix("agent:") if known and known.conv.startswith("agent:") else (
                    entry.uuid)
            target = self._subagent(agent, entry, obj)
        elif parent and parent in self.known:
            known = self.known[parent]
            target = known.conv
            rewind = entry.real and known.has_real_child and not main_line
            if rewind:
                target = self._fork(known.conv, known.position, entry)
            if entry.real:
                known.has_real_child = True
            if not target.startswith("agent:"):
                self.current = target
        else:
            # A subagent's first entry may hang off the entry of its session that started it.
            if parent and not is_boundary(obj) and not (self.subagent_stream and not self.known):
                problems.append(Problem(entry.line, f"parentUuid {parent[:80]} is not in this session; "
                                                    "the entry continues the conversation in file order"))
            target = self.current
        self._rows(entry, obj, target)
        if entry.uuid:
            self.known[entry.uuid] = Known(entry.conv, entry.position, entry.group)

    def _keep(self, entry: Entry, key: str) -> None:
        entry.conv = key
        entry.position = self._last(self.conv(key))

    # -- replies: the lines of one message.id ------------------------------------------

    def _last(self, conv: ConvPlan) -> int:
        """The conversation's last position, counting a reply held open (its lines are
        placed at the position its row will have)."""
        return conv.last_position + (1 if conv.key in self.open else 0)

    def _close(self, key: str) -> None:
        """Write the reply held open in conversation `key` as its row."""
        reply = self.open.pop(key, None)
        if reply is None:
            return
        conv = self.conv(key)
        message = reply_message(reply["parts"], reply["calls"], reply["meta"])
        row = make_row(message, parse_time(reply["at"]), reply["entry"], self.plan.problems, reply["line"])
        if row:
            conv.rows.append(row)
        self.tail[key] = reply["group"]

    def close_replies(self, *, hold: bool) -> None:
        """The input ends: write the replies held open; with `hold` (more lines of the
        stream will come), keep those with tool calls open (their results are still to come)."""
        for key in list(self.open):
            if not (hold and self.open[key]["calls"]) and key in self.plan.conversations:
                self._close(key)

    def _metadata(self, entry: Entry, obj: dict) -> None:
        main = self._main()
        kind = obj.get("type")
        target = "main"
        if kind == "agent_metadata" and self.subagent_stream:
            info = main.meta.setdefault("claude_code", {})
            for field in ("agentType", "toolUseId", "parentAgentId", "description"):
                if isinstance(obj.get(field), str):
                    info[field] = obj[field]
        title = None
        if kind in ("custom-title", "ai-title"):
            title = clean_text(obj.get("customTitle") or obj.get("aiTitle") or obj.get("title"))
        elif kind == "summary":
            title = clean_text(obj.get("summary"))
            leaf = obj.get("leafUuid")
            if isinstance(leaf, str) and leaf not in self.known and self.lookup is None:
                # Summaries often name a leaf of another file (the session that was resumed).
                main.meta.setdefault("claude_code", {}).setdefault("foreign_leaves", 0)
                main.meta["claude_code"]["foreign_leaves"] += 1
        if title and title.strip() and (kind != "summary" or not self.title_set):
            main.title = " ".join(title.split())[:300]
            self.title_set = self.title_set or kind != "summary"
        self._keep(entry, target)

    def _rows(self, entry: Entry, obj: dict, key: str) -> None:
        conv = self.conv(key)
        kind = obj.get("type")
        at = parse_time(obj.get("timestamp"))
        if is_boundary(obj):
            self._close(key)
            self.tail.pop(key, None)
            self.pending_fold = {"conv": key, "position": conv.last_position, "at": obj.get("timestamp"),
                                 "boundary": entry.uuid}
            self._keep(entry, key)
            return
        if kind == "user" or (kind == "assistant" and (group_of(obj) is None or
                                                       self.open.get(key, {}).get("group") != group_of(obj))):
            self._close(key)  # the reply held open is complete: this line is not part of it
        if kind == "user" and obj.get("isCompactSummary"):
            self._compact_summary(entry, obj, conv, at)
            return
        if kind == "user":
            self._user_rows(entry, obj, conv, at)
        elif kind == "assistant":
            self._assistant_rows(entry, obj, conv, at)
        self._keep(entry, key)
        if not key.startswith("agent:") or self.subagent_stream:
            if self.spawn_points:
                self.trail.append(entry.seq, key, self._last(conv))
            self.last_placed = (key, self._last(conv))
        if conv.title == "" and kind == "user" and not is_tool_result(obj) and not obj.get("isMeta"):
            conv.title = first_text(_blocks(obj))

    def _compact_summary(self, entry: Entry, obj: dict, conv: ConvPlan, at) -> None:
        summary = clean_text(_text_of(_blocks(obj))) or ""
        pending = self.pending_fold if self.pending_fold and self.pending_fold.get("conv") == conv.key else None
        position = pending["position"] if pending else conv.last_position
        self.pending_fold = None
        if not summary.strip():
            self.plan.problems.append(Problem(entry.line, "compact summary without text; no checkpoint"))
            self._keep(entry, conv.key)
            return
        if position < 0:
            # Nothing before the boundary to fold (the older part is in another file):
            # the summary becomes the first row, and the checkpoint folds it.
            row = make_row({"kind": "user", "content": summary, "meta": self._meta(entry, obj, compact_summary=True)},
                           at, entry.seq, self.plan.problems, entry.line)
            if row is None:
                self._keep(entry, conv.key)
                return
            conv.rows.append(row)
            position = conv.last_position
        conv.folds.append(Fold(position=position, summary=summary, at=at or parse_time((pending or {}).get("at")),
                               created_by="claude-code"))
        self._keep(entry, conv.key)

    def _meta(self, entry: Entry, obj: dict, **extra) -> dict:
        info = {"uuid": entry.uuid, "entry": entry.seq}
        if obj.get("isMeta"):
            info["isMeta"] = True
        info.update(extra)
        return {"claude_code": info}

    def _user_rows(self, entry: Entry, obj: dict, conv: ConvPlan, at) -> None:
        content = _blocks(obj)
        problems = self.plan.problems
        if isinstance(content, str):
            text = clean_text(content)
            if text and text.strip():
                row = make_row({"kind": "user", "content": text, "meta": self._meta(entry, obj)}, at, entry.seq,
                               problems, entry.line)
                if row:
                    conv.rows.append(row)
            return
        if not isinstance(content, list):
            problems.append(Problem(entry.line, "user entry without message content; kept, not shown"))
            return
        others = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                self._tool_result_row(entry, obj, conv, at, block)
            elif block.get("type") == "text":
                text = clean_text(block.get("text"))
                if text and text.strip():
                    others.append({"type": "text", "text": text})
            elif isinstance(block.get("type"), str) and block["type"].strip():
                others.append(block)
        if others:
            body = others[0]["text"] if len(others) == 1 and others[0].get("type") == "text" else others
            row = make_row({"kind": "user", "content": body, "meta": self._meta(entry, obj)}, at, entry.seq,
                           problems, entry.line)
            if row:
                conv.rows.append(row)

    def _tool_result_row(self, entry: Entry, obj: dict, conv: ConvPlan, at, block: dict) -> None:
        """A tool_result block: a `tool` row answering its call (one without an id: the oldest
        call that had no id either)."""
        problems = self.plan.problems
        call_id = block.get("tool_use_id")
        meta = self._meta(entry, obj)
        if not isinstance(call_id, str) or not call_id:
            waiting = self.unanswered.get(conv.key)
            if not waiting:
                problems.append(Problem(entry.line, "tool_result without tool_use_id; kept, not shown"))
                return
            # The result of a call that had no id either: the oldest such call not answered yet.
            call_id = waiting.pop(0)
            meta["claude_code"]["generated_id"] = True
        elif call_id in self.unanswered.get(conv.key, ()):
            self.unanswered[conv.key].remove(call_id)
        if not self.unanswered.get(conv.key):
            self.unanswered.pop(conv.key, None)
        message = {"kind": "tool", "tool_call_id": call_id, "content": _result_content(block.get("content")),
                   "meta": meta}
        if self.tool_names.get(call_id):
            message["name"] = self.tool_names[call_id]
        if block.get("is_error") is True:
            message["is_error"] = True
        row = make_row(message, at, entry.seq, problems, entry.line)
        if row:
            conv.rows.append(row)

    def _assistant_rows(self, entry: Entry, obj: dict, conv: ConvPlan, at) -> None:
        content = _blocks(obj)
        problems = self.plan.problems
        message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
        group = group_of(obj)
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            problems.append(Problem(entry.line, "assistant entry without message content; kept, not shown"))
            return
        parts, calls, generated = [], [], {}
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "thinking":
                text = clean_text(block.get("thinking"))
                if text and text.strip():
                    # A thought row goes before the reply's row: a reply already open is written first.
                    self._close(conv.key)
                    row = make_row({"kind": "thought", "text": text, "meta": self._meta(entry, obj)}, at, entry.seq,
                                   problems, entry.line)
                    if row:
                        conv.rows.append(row)
            elif btype == "redacted_thinking":
                continue
            elif btype == "text":
                text = clean_text(block.get("text"))
                if text and text.strip():
                    parts.append({"type": "text", "text": text})
            elif btype == "tool_use":
                self._tool_use(entry, conv, block, index, calls, generated)
            elif isinstance(btype, str) and btype.strip():
                parts.append(block)
        if not parts and not calls:
            return
        self._add_to_reply(entry, obj, conv, group, message, parts=parts, calls=calls, generated=generated)

    def _tool_use(self, entry: Entry, conv: ConvPlan, block: dict, index: int, calls: list, generated: dict) -> None:
        """A tool_use block as a call of the reply (one without an id gets one made up from the line)."""
        call_id, name = block.get("id"), block.get("name")
        if not (isinstance(name, str) and name):
            self.plan.problems.append(Problem(entry.line, "tool_use without a name; kept, not shown"))
            return
        if not (isinstance(call_id, str) and call_id):
            # Kept with an id made up from the line, the same every time it is imported.
            call_id = "toolu_mui_" + uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                                                  f"{entry.uuid or entry.seq}:{index}").hex[:24]
            generated[call_id] = "the transcript's tool_use block has no id"
            self.unanswered.setdefault(conv.key, []).append(call_id)
        args = block.get("input")
        calls.append({"id": call_id, "name": name, "arguments": args if isinstance(args, (dict, str)) else {}})
        self.tool_names[call_id] = name
        if len(self.tool_names) > 2 * TOOL_NAMES_HELD:
            self.tool_names = dict(list(self.tool_names.items())[-TOOL_NAMES_HELD:])

    def _add_to_reply(self, entry: Entry, obj: dict, conv: ConvPlan, group: str | None, message: dict, *,
                      parts: list, calls: list, generated: dict) -> None:
        """Add a line's text and calls to the reply it is part of (opened here if it is the first)."""
        problems = self.plan.problems
        reply = self.open.get(conv.key)
        if reply is None:
            meta = self._meta(entry, obj)
            own = meta["claude_code"]
            if group is not None:
                own["message_id"] = group
            if group is not None and self.tail.get(conv.key) == group:
                # More of a reply whose row was written at the end of an earlier batch: the log is
                # append-only, so this is a row of its own; its usage was counted on that row.
                own["continues"] = True
            else:
                if isinstance(message.get("model"), str):
                    meta["model"] = message["model"]
                if isinstance(message.get("usage"), dict):
                    meta["usage"] = message["usage"]
            reply = {"group": group, "parts": [], "calls": [], "meta": meta, "at": obj.get("timestamp"),
                     "entry": entry.seq, "line": entry.line}
            self.open[conv.key] = reply
        else:
            own = reply["meta"]["claude_code"]
            own.setdefault("uuids", [own["uuid"]]).append(entry.uuid)
            own.setdefault("entries", [own["entry"]]).append(entry.seq)
            # Each line of a response repeats its usage: the latest one is the most complete.
            if "usage" in reply["meta"] and isinstance(message.get("usage"), dict):
                reply["meta"]["usage"] = message["usage"]
        taken = {c["id"] for c in reply["calls"]}
        for call in calls:
            if call["id"] in taken:
                problems.append(Problem(entry.line, f"tool_use id {call['id'][:80]} repeats a call of the same "
                                                    "reply; kept, not shown twice"))
                continue
            reply["calls"].append(call)
        reply["parts"].extend(parts)
        if generated:
            reply["meta"]["claude_code"].setdefault("generated_ids", {}).update(generated)
        if group is None:
            self._close(conv.key)  # no message id: nothing else can be part of this reply

    def finish(self, *, hold: bool = False) -> None:
        """The end of the input: replies held open are written (`hold`: see `close_replies`);
        at the end of a whole-file parse, a boundary whose summary never came still folds."""
        self.close_replies(hold=hold)
        if self.pending_fold and self.lookup is None:
            fold = self.pending_fold
            conv = self.plan.conversations.get(fold["conv"])
            if conv is not None and fold["position"] >= 0:
                conv.folds.append(Fold(position=fold["position"], summary="Conversation compacted (the summary entry "
                                       "is missing from the transcript)", at=parse_time(fold.get("at")),
                                       created_by="claude-code"))
                self.plan.problems.append(Problem(None, "a compact boundary has no summary entry after it"))
            self.pending_fold = None


def _result_content(content):
    if isinstance(content, str):
        text = clean_text(content)
        return text if text and text.strip() else "(empty result)"
    if isinstance(content, list):
        blocks = content_blocks(content)
        if blocks:
            return blocks
    return "(empty result)"
