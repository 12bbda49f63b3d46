"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`).

One mapping serves two doors: importing a file, and the Claude Agent SDK's
SessionStore appending entries in batches (`conversations.imports`). Both feed
entries, in order, to one `Placer`, which decides for each entry which
conversation it belongs to and which rows it becomes:

- `user` text → `user` rows; `tool_result` blocks → `tool` rows (one per block);
  images and documents stay content blocks;
- `assistant`: `text` → content, `tool_use` → tool calls, `thinking` → a `thought`
  row before it, other blocks stay content blocks. Claude Code writes one line per
  content block, so a response with parallel tool calls is several lines sharing
  `message.id`: they are one reply, and one assistant row carrying its text and all
  its calls, with the response's usage once (each line repeats it). The reply's row
  is written when the reply is complete: when the next line of that conversation is
  not part of it (a tool result, a prompt, another response) or the input ends. An
  incremental append (a SessionStore batch, a slice of a grown file) holds a reply
  with tool calls open across the batch boundary (its results are still to come,
  and more calls may be), in the placer's state; one without calls is written at
  the end of the batch, and a line of it that comes later still (or after a tool
  result, from a tool that ran while the response streamed) is a continuation row
  (`claude_code.continues`, no usage) that the request renderers merge. A
  `tool_use` without an `id` gets one (`claude_code.generated_ids`), and a
  `tool_result` without a `tool_use_id` answers the oldest such call unanswered;
- a `compact_boundary` (`parentUuid: null`, pointing back with `logicalParentUuid`)
  and the `isCompactSummary` user entry after it become a checkpoint after the last
  row before the boundary, whose summary is that entry's text;
- a rewind (a second real child of one entry: a new prompt, or a response with
  another `message.id`; tool results and lines of the same response are not
  rewinds) becomes a fork at the branch point;
- sidechain entries (`isSidechain`, inline subagents of older versions, or a whole
  subagent transcript) become child conversations with relation "subagent";
- everything else (titles, summaries, file snapshots, queue operations, progress,
  system notes, unknown types) is kept as an entry and makes no row.

Every line is kept as an `Entry` with its raw text: rendering back returns them.

For a whole file, `parse` first reads the tree (uuid/parentUuid) and feeds the
chain that leads to the latest leaf first, so the main conversation is that chain
and an abandoned branch becomes the fork. An incremental append (a grown file, a
SessionStore batch) feeds entries as they come: whatever was stored first keeps
its place, and a rewind that arrives later is a fork that the session follows.
"""

import bisect
import uuid as uuidlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

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
    dumps,
    first_text,
    make_row,
    parse_time,
    read_jsonl,
    reply_message,
    split_lines,
)

NAME = "claude-code"
LINKED = {"user", "assistant", "system", "progress", "attachment"}
METADATA = {
    "summary", "custom-title", "ai-title", "file-history-snapshot", "queue-operation", "tag", "agent-name",
    "agent_metadata", "mode", "last-prompt", "pr-link", "worktree-state", "agent-setting", "content-replacement",
}
KNOWN = LINKED | METADATA
TOOL_NAMES_KEPT = 500


@dataclass(slots=True)
class Known:
    """What the placer remembers of an entry that was already placed."""

    conv: str
    position: int  # the conversation's last position once the entry was placed
    group: str | None
    has_real_child: bool = False


def _sniff(obj) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("type"), str) and (
        ("sessionId" in obj or "parentUuid" in obj or "leafUuid" in obj or "isSidechain" in obj)
        and obj["type"] in KNOWN
    )


def detect(lines: list[Line]) -> bool:
    objs = [ln.obj for ln in lines if ln.obj is not None]
    return bool(objs) and sum(_sniff(o) for o in objs) * 2 > len(objs)


def _group_of(obj) -> str | None:
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


def _is_tool_result(obj) -> bool:
    content = _blocks(obj)
    return obj.get("type") == "user" and isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _is_boundary(obj) -> bool:
    return obj.get("type") == "system" and obj.get("subtype") == "compact_boundary"


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _uuid(obj, key="uuid") -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) and value else None


class Placer:
    """Places entries, in the order fed, into conversations; keeps the state to resume from.

    `lookup(uuids)` returns `Known` for uuids placed by an earlier import (the
    importer reads them from the stored entries); a pure parse has none.
    """

    def __init__(self, plan: Plan, *, state: dict | None = None,
                 lookup: Callable[[set[str]], dict[str, Known]] | None = None, subagent_stream: bool = False):
        self.plan = plan
        state = dict(state or {})
        self.current = state.get("current", "main")
        self.pending_fold = state.get("pending_fold")  # {"conv", "position", "at", "boundary"}
        self.tool_names: dict[str, str] = dict(state.get("tool_names", {}))
        self.agents: dict[str, str] = dict(state.get("agents", {}))  # agent id → conversation key
        self.session_ids: list[str] = list(state.get("session_ids", []))
        self.title_set = bool(state.get("title_set"))
        self.known: dict[str, Known] = {}
        self.lookup = lookup
        self.subagent_stream = subagent_stream or bool(state.get("subagent_stream"))
        # (seq, conversation, position) of the entries placed outside sidechains, for spawn points.
        self.trail: list[tuple[int, str, int]] = []
        self.trail_unsorted = False
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
        if self.trail_unsorted:
            self.trail.sort()
            self.trail_unsorted = False
        if self.trail:
            i = bisect.bisect_left(self.trail, (first.seq, "", -2))
            if i:
                _seq, parent_key, spawn = self.trail[i - 1]
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
        session = obj.get("sessionId")
        if isinstance(session, str) and session and session not in self.session_ids:
            self.session_ids.append(session)
            main = self._main()
            ids = main.meta.setdefault("claude_code", {})
            ids.setdefault("session_id", session)
            if len(self.session_ids) > 1:
                ids["session_ids"] = list(self.session_ids)
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
            if parent and not _is_boundary(obj):
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
        if _is_boundary(obj):
            self._close(key)
            self.tail.pop(key, None)
            self.pending_fold = {"conv": key, "position": conv.last_position, "at": obj.get("timestamp"),
                                 "boundary": entry.uuid}
            self._keep(entry, key)
            return
        if kind == "user" or (kind == "assistant" and (_group_of(obj) is None or
                                                       self.open.get(key, {}).get("group") != _group_of(obj))):
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
            if self.trail and entry.seq < self.trail[-1][0]:
                self.trail_unsorted = True
            self.trail.append((entry.seq, key, self._last(conv)))
            self.last_placed = (key, self._last(conv))
        if conv.title == "" and kind == "user" and not _is_tool_result(obj) and not obj.get("isMeta"):
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
                call_id = block.get("tool_use_id")
                meta = self._meta(entry, obj)
                if not isinstance(call_id, str) or not call_id:
                    waiting = self.unanswered.get(conv.key)
                    if not waiting:
                        problems.append(Problem(entry.line, "tool_result without tool_use_id; kept, not shown"))
                        continue
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

    def _assistant_rows(self, entry: Entry, obj: dict, conv: ConvPlan, at) -> None:
        content = _blocks(obj)
        problems = self.plan.problems
        message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
        group = _group_of(obj)
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
                call_id, name = block.get("id"), block.get("name")
                if not (isinstance(name, str) and name):
                    problems.append(Problem(entry.line, "tool_use without a name; kept, not shown"))
                    continue
                if not (isinstance(call_id, str) and call_id):
                    # Kept with an id made up from the line, the same every time it is imported.
                    call_id = "toolu_mui_" + uuidlib.uuid5(uuidlib.NAMESPACE_URL,
                                                          f"{entry.uuid or entry.seq}:{index}").hex[:24]
                    generated[call_id] = "the transcript's tool_use block has no id"
                    self.unanswered.setdefault(conv.key, []).append(call_id)
                args = block.get("input")
                calls.append({"id": call_id, "name": name, "arguments": args if isinstance(args, (dict, str)) else {}})
                self.tool_names[call_id] = name
            elif isinstance(btype, str) and btype.strip():
                parts.append(block)
        if not parts and not calls:
            return
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
        blocks = []
        for block in content:
            if not isinstance(block, dict) or not isinstance(block.get("type"), str) or not block["type"].strip():
                continue
            if block["type"] == "text":
                text = clean_text(block.get("text"))
                if text and text.strip():
                    blocks.append({"type": "text", "text": text})
            else:
                blocks.append(block)
        if blocks:
            return blocks
    return "(empty result)"


# ---- the entry of a line --------------------------------------------------------------


def make_entry(seq: int, line: int | None, raw: str, obj) -> Entry:
    entry = Entry(seq=seq, line=line, raw=raw)
    if not isinstance(obj, dict):
        return entry
    entry.uuid = _uuid(obj)
    parent = _uuid(obj, "parentUuid")
    if parent is None and _is_boundary(obj):
        parent = _uuid(obj, "logicalParentUuid")
    entry.parent_uuid = parent
    entry.group = _group_of(obj)
    kind = obj.get("type")
    entry.real = (
        (kind == "user" and not _is_tool_result(obj) and not obj.get("isCompactSummary") and not obj.get("isMeta"))
        or (kind == "assistant")
    )
    return entry


# ---- whole files ---------------------------------------------------------------------


def new_plan(*, title: str = "", subject: str = "", source_key: str = "") -> Plan:
    plan = Plan(format=NAME, source_key=source_key)
    plan.conversations["main"] = ConvPlan(key="main", title=title, subject=subject, meta={"claude_code": {}})
    return plan


def main_line(skeleton: list[Entry], objs_kind: dict[int, tuple]) -> set[int]:
    """Seqs of the entries on the main line: per connected part of the tree (in file
    order), the chain to its latest non-sidechain message, plus what a parallel turn
    hangs off that chain (tool results, lines of the same response, notes)."""
    nodes = {e.uuid: e for e in skeleton if e.uuid and objs_kind[e.seq][0] in LINKED and not objs_kind[e.seq][1]}
    parent_of: dict[str, str | None] = {}
    for u, e in nodes.items():
        p = e.parent_uuid if e.parent_uuid in nodes else None
        parent_of[u] = p
    # Drop links that make a cycle (a logicalParentUuid pointing below its boundary): walk up
    # from each node once; a walk that meets itself cuts the link that closed the loop.
    done: set[str] = set()
    for u in parent_of:
        path, on_path, cur = [], set(), u
        while cur is not None and cur not in done:
            if cur in on_path:
                parent_of[path[-1]] = None
                break
            path.append(cur)
            on_path.add(cur)
            cur = parent_of.get(cur)
        done.update(path)
    root_of: dict[str, str] = {}

    def root(u):
        path = []
        while u not in root_of and parent_of.get(u) is not None:
            path.append(u)
            u = parent_of[u]
        r = root_of.get(u, u)
        for p in path:
            root_of[p] = r
        root_of[u] = r
        return r

    leaf_of: dict[str, Entry] = {}
    for e in sorted(nodes.values(), key=lambda e: e.seq):
        kind, _side, meta = objs_kind[e.seq]
        if kind in ("user", "assistant") and not meta:
            leaf_of[root(e.uuid)] = e
    chain: set[str] = set()
    for leaf in leaf_of.values():
        cur = leaf.uuid
        while cur is not None and cur not in chain:
            chain.add(cur)
            cur = parent_of.get(cur)
    line = set(chain)
    groups = {nodes[u].group for u in chain if nodes[u].group}
    for _ in range(3):
        for e in sorted(nodes.values(), key=lambda e: e.seq):
            if e.uuid in line:
                continue
            p = parent_of.get(e.uuid)
            if p is None or p not in line:
                if p is None and root(e.uuid) not in leaf_of:
                    line.add(e.uuid)  # a part with no message at all: notes only
                continue
            if not e.real or (e.group and e.group in groups):
                line.add(e.uuid)
    return {nodes[u].seq for u in line}


def parse(data, *, subject: str = "", subagent_stream: bool = False) -> Plan:
    """A whole transcript (text or bytes) → a plan. Raises FormatError for input that is
    not a transcript at all."""
    from .base import decode_text

    text = decode_text(data)
    lines = list(read_jsonl(split_lines(text)))
    plan = new_plan(subject=subject, source_key="")
    feed_lines(plan, lines, subagent_stream=subagent_stream)
    if not plan.source_key:
        plan.source_key = content_hash(text)
    return plan


@dataclass(slots=True)
class Skeleton:
    """What placing a whole stream needs to know before it starts: each entry's links
    and kind, without its text. A large file is read twice (importer): once into this,
    then again, entry by entry, in the order `placement` gives."""

    entries: list[Entry]
    # Per entry (same index): (type, on a sidechain of this stream, isMeta), or None for a non-object.
    kinds: list
    subagent_stream: bool = False
    agent: str | None = None
    session: str | None = None
    problems: list = None


def skeleton_of(lines: Iterable[Line], *, first_seq: int = 0, subagent_stream: bool = False, whole: bool = True,
                keep_raw: bool = True) -> Skeleton:
    """Entries (with their raw text only if `keep_raw`) and kinds of parsed lines. For a
    `whole` stream whose every linked entry is on a sidechain, it is a subagent's own file."""
    entries: list[Entry] = []
    kinds: list = []
    problems: list[Problem] = []
    all_sidechain, any_linked, agent, session = True, False, None, None
    for i, ln in enumerate(lines):
        if ln.error:
            problems.append(Problem(ln.number, ln.error))
        obj = ln.obj
        entry = make_entry(first_seq + i, ln.number, ln.text if keep_raw else "", obj)
        entries.append(entry)
        if isinstance(obj, dict):
            kind = obj.get("type")
            kinds.append((kind, bool(obj.get("isSidechain")), bool(obj.get("isMeta"))))
            if kind in LINKED and obj.get("uuid"):
                any_linked = True
                all_sidechain = all_sidechain and bool(obj.get("isSidechain"))
            if agent is None and isinstance(obj.get("agentId"), str) and obj["agentId"]:
                agent = obj["agentId"]
            if session is None and kind in LINKED and isinstance(obj.get("sessionId"), str):
                session = obj["sessionId"]
        else:
            kinds.append(None)
    if whole and not subagent_stream and any_linked and all_sidechain:
        subagent_stream = True  # a subagent's own transcript file
    if subagent_stream:  # then no entry is on a sidechain of this stream
        kinds = [(k[0], False, k[2]) if k else None for k in kinds]
    return Skeleton(entries=entries, kinds=kinds, subagent_stream=subagent_stream, agent=agent, session=session,
                    problems=problems)


def placement(skel: Skeleton) -> tuple[list[int], set[int], list[Problem]]:
    """The order to place a whole stream's entries in (indexes into skel.entries): the main
    line and metadata first, in file order; then branches; then sidechains. Returns the
    order, the seqs on the main line, and problems about the stream as a whole."""
    entries = skel.entries
    kinds = {e.seq: (k or (None, False, False)) for e, k in zip(entries, skel.kinds)}
    on_line = main_line(entries, kinds)
    linked_nodes = {e.seq for e in entries if e.uuid and kinds[e.seq][0] in LINKED and not kinds[e.seq][1]}

    def rank(i):
        seq = entries[i].seq
        if kinds[seq][1]:
            return (2, seq)
        return (0 if seq in on_line or seq not in linked_nodes else 1, seq)

    order = sorted(range(len(entries)), key=rank)
    problems = []
    if not any(e.parent_uuid for e in entries if e.seq in linked_nodes) and len(linked_nodes) > 1:
        problems.append(Problem(None, "no entry links to a parent (parentUuid); file order is used"))
    return order, on_line, problems


def finish_plan(plan: Plan, placer: "Placer", skel: Skeleton, *, hold: bool = False) -> None:
    """After the last entry: the placer's state (`hold`: a reply with calls stays open for
    the next batch), the source key, and a subagent stream's marks."""
    placer.finish(hold=hold)
    plan.state = placer.state()
    ids = plan.conversations["main"].meta.get("claude_code", {})
    if not plan.source_key and ids.get("session_id"):
        plan.source_key = ids["session_id"]
        if (skel.subagent_stream or placer.subagent_stream) and skel.agent:
            plan.source_key = f"{ids['session_id']}/subagents/agent-{skel.agent}"
    if placer.subagent_stream:
        main = plan.conversations["main"]
        main.relation = "subagent"
        if skel.agent:
            main.meta.setdefault("claude_code", {})["agent_id"] = skel.agent
            if not main.title.startswith("Subagent"):
                main.title = f"Subagent {skel.agent}: {main.title}"[:300]


def feed_lines(plan: Plan, lines: list[Line], *, subagent_stream: bool = False, state=None, lookup=None,
               first_seq: int = 0, whole: bool = True, hold: bool | None = None) -> "Placer":
    """Place parsed lines. `whole`: this is the whole stream (choose the main line first).
    `hold`: more lines will follow, so a reply with tool calls at the end stays open
    (default: when continuing a stored stream, `lookup` given)."""
    skel = skeleton_of(lines, first_seq=first_seq, subagent_stream=subagent_stream, whole=whole)
    plan.problems.extend(skel.problems)
    entries = skel.entries
    placer = Placer(plan, state=state, lookup=lookup, subagent_stream=skel.subagent_stream)
    placer.prefetch({e.parent_uuid for e in entries if e.parent_uuid})
    order, on_line = list(range(len(entries))), set()
    if whole and placer.lookup is None and entries:
        order, on_line, problems = placement(skel)
        plan.problems.extend(problems)
    for i in order:
        placer.place(entries[i], lines[i].obj, main_line=(entries[i].seq in on_line) if on_line else None)
    plan.entries.extend(entries)
    plan.entries.sort(key=lambda e: e.seq)
    finish_plan(plan, placer, skel, hold=lookup is not None if hold is None else hold)
    return placer


# ---- rendering -----------------------------------------------------------------------


def render(rows: Iterable, *, checkpoints=(), originals: Iterable[str] = (), session_id: str | None = None,
           covered: int = -1, cwd: str = "", seed: str | None = None) -> Iterator[str]:
    """A Claude Code transcript, one line per entry.

    `originals` are the stored lines of an imported session, returned as they were;
    `rows` are (position, kind, created_at, message dict) and only those after
    `covered` (the last position the originals account for) are written as new
    entries, chained to the last original by parentUuid. Checkpoints after
    `covered` become a compact boundary and its summary entry."""
    last_uuid = None
    for raw in originals:
        yield raw + "\n"
        try:
            from .base import loads
            obj = loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("uuid"), str):
            last_uuid = obj["uuid"]
            session_id = session_id or obj.get("sessionId")
    # The ids the export makes up are derived from `seed` (the conversation's id), so the same
    # conversation exports to the same lines every time, and importing a second download of
    # it finds the first (the session id is its identity).
    base = uuidlib.UUID(seed) if seed else uuidlib.uuid4()
    session_id = session_id or str(base)
    folds: dict[int, list] = {}
    for cp in checkpoints:
        if cp.message_position > covered:
            folds.setdefault(cp.message_position, []).append(cp)
    for position, kind, created_at, message in rows:
        if position <= covered:
            continue
        for obj in _entries_for(kind, message, created_at, str(uuidlib.uuid5(base, f"row:{position}"))):
            obj = {"parentUuid": last_uuid, "isSidechain": False, "userType": "external", "cwd": cwd,
                   "sessionId": session_id, **obj}
            last_uuid = obj["uuid"]
            yield dumps(obj) + "\n"
        for n, cp in enumerate(folds.get(position, ())):
            boundary = str(uuidlib.uuid5(base, f"boundary:{position}:{n}"))
            at = cp.created_at.isoformat().replace("+00:00", "Z")
            yield dumps({"parentUuid": None, "logicalParentUuid": last_uuid, "isSidechain": False, "type": "system",
                         "subtype": "compact_boundary", "content": "Conversation compacted", "sessionId": session_id,
                         "uuid": boundary, "timestamp": at, "compactMetadata": {"trigger": "memoryui"}}) + "\n"
            last_uuid = str(uuidlib.uuid5(base, f"summary:{position}:{n}"))
            yield dumps({"parentUuid": boundary, "isSidechain": False, "type": "user", "isCompactSummary": True,
                         "sessionId": session_id, "message": {"role": "user", "content": cp.summary},
                         "uuid": last_uuid, "timestamp": at}) + "\n"


def _entries_for(kind: str, message: dict, created_at, new_uuid: str) -> list[dict]:
    at = created_at.isoformat().replace("+00:00", "Z")
    meta = message.get("meta") or {}
    own = meta.get("claude_code", {}) if isinstance(meta, dict) else {}
    uid = own.get("uuid") if isinstance(own.get("uuid"), str) else new_uuid
    base = {"uuid": uid, "timestamp": at}
    if kind in ("user", "system"):
        return [{**base, "type": "user", "message": {"role": "user", "content": message.get("content")}}]
    if kind == "tool":
        block = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message.get("content")}
        if message.get("is_error"):
            block["is_error"] = True
        return [{**base, "type": "user", "message": {"role": "user", "content": [block]}}]
    if kind == "assistant":
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for call in message.get("tool_calls") or []:
            args = call.get("arguments")
            blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                           "input": args if isinstance(args, dict) else {"arguments": args}})
        body = {"role": "assistant", "type": "message", "content": blocks}
        if isinstance(meta.get("model"), str):
            body["model"] = meta["model"]
        if isinstance(meta.get("usage"), dict):
            body["usage"] = meta["usage"]
        return [{**base, "type": "assistant", "message": body}]
    if kind == "thought":
        return [{**base, "type": "assistant",
                 "message": {"role": "assistant", "type": "message",
                             "content": [{"type": "thinking", "thinking": message["text"]}]}}]
    # note, heard, said, did, woke: the journal has no Claude Code line; a meta user note keeps it.
    return [{**base, "type": "user", "isMeta": True,
             "message": {"role": "user", "content": f"[{kind}] {message.get('text', '')}"}}]


def check_is(lines: list[Line]) -> None:
    if not detect(lines):
        raise FormatError("this is not a Claude Code transcript (no line has a Claude Code entry type with "
                          "sessionId/parentUuid)", field="format")
