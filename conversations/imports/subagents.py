"""Where a Claude Code subagent belongs: the call that spawned it, whichever door and order.

A subagent's own transcript (`<session>/subagents/agent-<id>.jsonl`, or the
SessionStore key `SESSION/subagents/agent-ID`) is its own conversation, external id
`SESSION/subagents/agent-ID` in the session's namespace. Its parent is the session
conversation (or the rewind of it) holding the Task/Agent call whose result names
the agent (`toolUseResult.agentId`); its `forked_from_position` is the row of that
call. Every door comes here: `manage.py import` (files, folders, one by one), the
upload page (several files, a zip), `POST /imports` (content or entries) and the
SessionStore, so the link is the same whichever way the files came in.

Order does not matter:

- the subagent arrives after its session: `spawn_point` finds the call in the
  session's stored entries and rows, and the subagent is created linked;
- the subagent arrives first: it is stored without a parent, waiting; the import
  of its session (any door, in the transaction that makes the session visible)
  calls `link_waiting`, which links every waiting subagent of that session.

The layouts differ only in how the call is found:

- a `Task` or `Agent` call whose result names the agent (`toolUseResult.agentId`, or
  the id in the result's text, as newer versions write it);
- a workflow's agents (`<session>/subagents/workflows/<run>/agent-<id>.jsonl`): their
  `.meta.json` sidecar (or the `agent_metadata` entry the SessionStore sends for it)
  names the call (`toolUseId`), which is kept in the subagent's meta for a later link;
- a compaction agent (`agent-acompact-<id>`): no call spawned it; it wrote the summary
  of a compaction, so it lands at that checkpoint's position (the checkpoint whose
  summary holds its last reply, else the first one after it ended).

Lineage is append-only: a link made later fills the empty parent columns once
(`store_recorded.link_subagent`: NULL → a value, never one value → another) and is recorded
as its own audit event, `conversation.linked`, with when and by which import. A
parent found without its call (the session file is still partial) is linked with
its position unknown; the position is filled, once, when the call arrives.
"""

import json
from dataclasses import dataclass

from conversations import store_recorded
from conversations.formats.base import parse_time
from conversations.models import Checkpoint, Conversation, Message

from .models import ImportSource, SourceEntry

FORMAT = "claude-code"
MARK = "/subagents/"
# The tools that spawn a subagent (Task in Claude Code 1.x, Agent in 2.x).
SPAWNING_TOOLS = ("Task", "Agent")


@dataclass(frozen=True)
class SubagentKey:
    session: str
    agent: str


def parse_key(key: str | None) -> SubagentKey | None:
    """SESSION/subagents/agent-ID (a distinct copy of it may carry a ~suffix) → its parts."""
    if not key or MARK not in key:
        return None
    session, _, rest = key.partition(MARK)
    agent = rest.rsplit("/", 1)[-1].removeprefix("agent-").split("~", 1)[0]
    if not session or not agent:
        return None
    return SubagentKey(session=session, agent=agent)


@dataclass(frozen=True)
class Spawn:
    conversation_id: str
    position: int | None  # None: the session is here, the call that spawned the agent not (yet)


def _session_source(namespace: str, session: str) -> ImportSource | None:
    return ImportSource.objects.filter(format=FORMAT, namespace=namespace, source_key=session[:300]).first()


def _session_conversation(namespace: str, session: str):
    return Conversation.objects.live().filter(namespace=namespace, external_id=session[:200]).first()


def _tool_use_id_of(obj, agent: str) -> str | None:
    """The call a tool result answers, when the result names `agent`: in `toolUseResult`, or
    (newer versions) in the result's own text."""
    if not isinstance(obj, dict):
        return None
    result = obj.get("toolUseResult")
    named = isinstance(result, dict) and result.get("agentId") == agent
    message = obj.get("message")
    blocks = message.get("content") if isinstance(message, dict) else None
    for block in blocks if isinstance(blocks, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
            if named or agent in _text_of(block.get("content")):
                return block["tool_use_id"]
    return None


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content or () if isinstance(b, dict) and isinstance(b.get("text"), str)) \
        if isinstance(content, list) else ""


def is_compaction_agent(agent: str) -> bool:
    return agent.startswith("acompact")


def _call_row(conversation_ids, *, call_id: str | None = None, prompt: str = "") -> tuple[str, int] | None:
    """(conversation, position) of the assistant row carrying the spawning call: by its id,
    else (transcripts without toolUseResult) by the prompt it gave the subagent."""
    rows = Message.objects.filter(conversation_id__in=list(conversation_ids), kind="assistant")
    if call_id:
        rows = rows.filter(content__contains=call_id)
    elif prompt:
        rows = rows.filter(content__contains='"tool_calls"')
    else:
        return None
    for cid, position, content in rows.order_by("position").values_list("conversation_id", "position",
                                                                        "content")[:500]:
        try:
            message = json.loads(content)
        except ValueError:
            continue
        for call in message.get("tool_calls") or ():
            if call_id and call.get("id") == call_id:
                return str(cid), position
            args = call.get("arguments")
            if not call_id and call.get("name") in SPAWNING_TOOLS and isinstance(args, dict) and \
                    args.get("prompt") == prompt:
                return str(cid), position
    return None


def _session_conversations(source: ImportSource) -> list[str]:
    """The session's own conversations: its main one and its rewinds (not its subagents)."""
    ids = (source.state or {}).get("convs") or {"main": str(source.conversation_id)}
    return [cid for key, cid in ids.items() if not key.startswith("agent:")] or [str(source.conversation_id)]


def spawn_point(*, namespace: str, session: str, agent: str, prompt: str = "", call_id: str | None = None,
                summary: str = "", ended=None) -> Spawn | None:
    """Where the session spawned `agent` (module docstring); None when the session is not here
    yet. `call_id`: the spawning call a sidecar names; `summary` and `ended`: a compaction
    agent's last reply and time."""
    parent = _session_conversation(namespace, session)
    if parent is None:
        return None
    source = _session_source(namespace, session)
    if source is None:
        return Spawn(str(parent.pk), None)
    if is_compaction_agent(agent):
        return _at_checkpoint(parent, source, summary=summary, ended=ended)
    if call_id:
        found = _call_row(_session_conversations(source), call_id=call_id)
        return Spawn(*found) if found else Spawn(str(parent.pk), None)
    # Progress entries name the agent too (one per step of it): only results are read.
    results = SourceEntry.objects.filter(source_id=source.pk, raw__contains="toolUseResult").filter(
        raw__contains=agent)
    for raw in results.values_list("raw", flat=True)[:200]:
        try:
            call_id = _tool_use_id_of(json.loads(raw), agent)
        except ValueError:
            continue
        if call_id:
            break
    found = _call_row(_session_conversations(source), call_id=call_id, prompt="" if call_id else prompt)
    if found is None:
        return Spawn(str(parent.pk), None)
    return Spawn(*found)


def _at_checkpoint(parent, source: ImportSource, *, summary: str, ended) -> Spawn:
    """A compaction agent: at the checkpoint it wrote (its reply in the summary), else the
    first one made after it ended; its position unknown while the session has none."""
    folds = list(Checkpoint.objects.filter(conversation_id__in=_session_conversations(source)).order_by(
        "created_at", "id").values_list("conversation_id", "message_position", "summary", "created_at"))
    wanted = " ".join(summary.split())[:2000]
    for cid, position, text, _at in folds:
        if wanted and wanted in " ".join(text.split()):
            return Spawn(str(cid), position)
    for cid, position, _text, at in folds:
        if ended is not None and at is not None and at >= ended:
            return Spawn(str(cid), position)
    return Spawn(str(parent.pk), None)


def last_reply(entries) -> tuple[str, object]:
    """A subagent transcript's last assistant text and its last time (a compaction agent's summary)."""
    text, ended = "", None
    for obj in entries:
        if not isinstance(obj, dict):
            continue
        ended = parse_time(obj.get("timestamp")) or ended
        message = obj.get("message")
        if obj.get("type") == "assistant" and isinstance(message, dict):
            said = _text_of(message.get("content"))
            text = said if said.strip() else text
    return text, ended


def first_prompt(entries) -> str:
    """The text of a subagent transcript's first user entry: what its Task call asked."""
    for obj in entries:
        if isinstance(obj, dict) and obj.get("type") == "user":
            message = obj.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
            return ""
    return ""


def _prompt_of(conversation_id) -> str:
    raw = SourceEntry.objects.filter(conversation_id=conversation_id, raw__contains='"user"').order_by(
        "source_id", "seq").values_list("raw", flat=True).first()
    try:
        return first_prompt([json.loads(raw)]) if raw else ""
    except ValueError:
        return ""


def _last_reply_of(conversation_id) -> tuple[str, object]:
    raws = SourceEntry.objects.filter(conversation_id=conversation_id, raw__contains='"assistant"').order_by(
        "-source_id", "-seq").values_list("raw", flat=True)[:20]
    entries = []
    for raw in reversed(list(raws)):
        try:
            entries.append(json.loads(raw))
        except ValueError:
            continue
    return last_reply(entries)


def waiting(*, namespace: str, session: str):
    """The session's subagent conversations still waiting for their link (no parent, or no position)."""
    prefix = session[:200] + MARK
    qs = Conversation.objects.live().filter(namespace=namespace, external_id__startswith=prefix)
    return [c for c in qs.only("id", "external_id", "parent_id", "forked_from_position", "title", "meta")
            if c.parent_id is None or c.forked_from_position is None]


def link_waiting(*, namespace: str, session: str, actor: str, dry_run: bool = False) -> list[dict]:
    """Link the session's subagents that came before it (or before their call); returns
    the links made (in a dry run: those that would be, parent known, positions not)."""
    made = []
    for conversation in waiting(namespace=namespace, session=session):
        key = parse_key(conversation.external_id)
        if key is None or key.session != session[:200]:
            continue
        if dry_run:
            made.append({"id": str(conversation.pk), "title": conversation.title, "parent_id": None,
                         "parent_position": None})
            continue
        own = conversation.meta.get("claude_code") if isinstance(conversation.meta, dict) else None
        own = own if isinstance(own, dict) else {}
        summary, ended = _last_reply_of(conversation.pk) if is_compaction_agent(key.agent) else ("", None)
        spawn = spawn_point(namespace=namespace, session=session, agent=key.agent,
                            prompt=_prompt_of(conversation.pk), call_id=own.get("toolUseId"), summary=summary,
                            ended=ended)
        if spawn is None:
            continue
        if store_recorded.link_subagent(conversation_id=conversation.pk, parent_id=spawn.conversation_id,
                               position=spawn.position, actor=actor):
            made.append({"id": str(conversation.pk), "title": conversation.title,
                         "parent_id": spawn.conversation_id, "parent_position": spawn.position})
    return made
