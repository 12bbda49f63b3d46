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

import uuid as uuidlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from . import claude_code_tree as tree_module
from .base import (
    ConvPlan,
    Entry,
    FormatError,
    Line,
    Plan,
    Problem,
    content_hash,
    decode_text,
    dumps,
    loads,
    read_jsonl,
    split_lines,
)
from .claude_code_placer import KNOWN, LINKED, Placer, group_of, is_boundary, is_tool_result
from .claude_code_tree import Tree

NAME = "claude-code"


def _sniff(obj) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("type"), str) and (
        ("sessionId" in obj or "parentUuid" in obj or "leafUuid" in obj or "isSidechain" in obj)
        and obj["type"] in KNOWN
    )


def detect(lines: list[Line]) -> bool:
    objs = [ln.obj for ln in lines if ln.obj is not None]
    return bool(objs) and sum(_sniff(o) for o in objs) * 2 > len(objs)


def _uuid(obj, key="uuid") -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) and value else None


# ---- the entry of a line --------------------------------------------------------------


def make_entry(seq: int, line: int | None, raw: str, obj) -> Entry:
    entry = Entry(seq=seq, line=line, raw=raw)
    if not isinstance(obj, dict):
        return entry
    entry.uuid = _uuid(obj)
    parent = _uuid(obj, "parentUuid")
    if parent is None and is_boundary(obj):
        parent = _uuid(obj, "logicalParentUuid")
    entry.parent_uuid = parent
    entry.group = group_of(obj)
    kind = obj.get("type")
    entry.real = (
        (kind == "user" and not is_tool_result(obj) and not obj.get("isCompactSummary") and not obj.get("isMeta"))
        or (kind == "assistant")
    )
    return entry


# ---- whole files ---------------------------------------------------------------------


def new_plan(*, title: str = "", subject: str = "", source_key: str = "") -> Plan:
    plan = Plan(format=NAME, source_key=source_key)
    plan.conversations["main"] = ConvPlan(key="main", title=title, subject=subject, meta={"claude_code": {}})
    return plan


def parse(data, *, subject: str = "", subagent_stream: bool = False) -> Plan:
    """A whole transcript (text or bytes) → a plan. Raises FormatError for input that is
    not a transcript at all."""
    text = decode_text(data)
    lines = list(read_jsonl(split_lines(text)))
    plan = new_plan(subject=subject, source_key="")
    feed_lines(plan, lines, subagent_stream=subagent_stream)
    if not plan.source_key:
        plan.source_key = content_hash(text)
    return plan


@dataclass(slots=True)
class Skeleton:
    """What placing a whole stream needs to know before it starts: each entry's links and
    kind, a few bytes each (claude_code_tree.Tree), and, when asked, the entries themselves
    with their text. A large file is read twice (importer): once into this, then again,
    entry by entry, in the order `placement` gives."""

    tree: Tree
    entries: list[Entry] | None  # entry i is line i (keep_raw), else made again as each line is placed
    first_seq: int = 0
    subagent_stream: bool = False
    agent: str | None = None
    session: str | None = None
    problems: list = None

    def __len__(self) -> int:
        return len(self.tree)


def _code(obj) -> int:
    kind = obj.get("type")
    if kind in tree_module.CODE:
        return tree_module.CODE[kind]
    return tree_module.METADATA_CODE if kind in KNOWN else tree_module.UNKNOWN_CODE


def skeleton_of(lines: Iterable[Line], *, first_seq: int = 0, subagent_stream: bool = False, whole: bool = True,
                keep_raw: bool = True) -> Skeleton:
    """The tree (and with `keep_raw` the entries, with their raw text) of parsed lines. For a
    `whole` stream whose every linked entry is on a sidechain, it is a subagent's own file."""
    tree = Tree()
    entries: list[Entry] | None = [] if keep_raw else None
    problems: list[Problem] = []
    all_sidechain, any_linked, agent, session = True, False, None, None
    for i, ln in enumerate(lines):
        if ln.error:
            problems.append(Problem(ln.number, ln.error))
        obj = ln.obj
        entry = make_entry(first_seq + i, ln.number, ln.text if keep_raw else "", obj)
        if entries is not None:
            entries.append(entry)
        if isinstance(obj, dict):
            kind = obj.get("type")
            flags = (tree_module.SIDECHAIN if obj.get("isSidechain") else 0) | (
                tree_module.META if obj.get("isMeta") else 0) | (tree_module.REAL if entry.real else 0)
            tree.add(uuid=entry.uuid, parent=entry.parent_uuid, group=entry.group, type_code=_code(obj), flags=flags,
                     line=ln.number)
            if kind in LINKED and obj.get("uuid"):
                any_linked = True
                all_sidechain = all_sidechain and bool(obj.get("isSidechain"))
            if agent is None and isinstance(obj.get("agentId"), str) and obj["agentId"]:
                agent = obj["agentId"]
            if session is None and kind in LINKED and isinstance(obj.get("sessionId"), str):
                session = obj["sessionId"]
        else:
            tree.add(uuid=None, parent=None, group=None, type_code=0, flags=0, line=ln.number)
    if whole and not subagent_stream and any_linked and all_sidechain:
        subagent_stream = True  # a subagent's own transcript file
    if subagent_stream:  # then no entry is on a sidechain of this stream
        for i in range(len(tree)):
            tree.flags[i] &= ~tree_module.SIDECHAIN
    return Skeleton(tree=tree, entries=entries, first_seq=first_seq, subagent_stream=subagent_stream, agent=agent,
                    session=session, problems=problems)


def placement(skel: Skeleton):
    """The order to place a whole stream's entries in (indexes into the stream): the main
    line and metadata first, in file order; then branches; then sidechains. Returns the
    order, the main line (`seq in on_line`), and problems about the stream as a whole."""
    order, on_line, unlinked = tree_module.placement(skel.tree, skel.first_seq)
    problems = [Problem(None, "no entry links to a parent (parentUuid); file order is used")] if unlinked else []
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
    order, on_line = range(len(entries)), None
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
