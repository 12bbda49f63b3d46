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

Lineage is append-only: a link made later fills the empty parent columns once
(`store_recorded.link_subagent`: NULL → a value, never one value → another) and is recorded
as its own audit event, `conversation.linked`, with when and by which import. A
parent found without its call (the session file is still partial) is linked with
its position unknown; the position is filled, once, when the call arrives.
"""

import json
from dataclasses import dataclass

from conversations import store_recorded
from conversations.models import Conversation, Message

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
    result = obj.get("toolUseResult") if isinstance(obj, dict) else None
    if not isinstance(result, dict) or result.get("agentId") != agent:
        return None
    message = obj.get("message")
    blocks = message.get("content") if isinstance(message, dict) else None
    for block in blocks if isinstance(blocks, list) else ():
        if isinstance(block, dict) and block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
            return block["tool_use_id"]
    return None


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


def spawn_point(*, namespace: str, session: str, agent: str, prompt: str = "") -> Spawn | None:
    """Where the session spawned `agent`; None when the session is not here yet."""
    parent = _session_conversation(namespace, session)
    if parent is None:
        return None
    source = _session_source(namespace, session)
    if source is None:
        return Spawn(str(parent.pk), None)
    call_id = None
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


def waiting(*, namespace: str, session: str):
    """The session's subagent conversations still waiting for their link (no parent, or no position)."""
    prefix = session[:200] + MARK
    qs = Conversation.objects.live().filter(namespace=namespace, external_id__startswith=prefix)
    return [c for c in qs.only("id", "external_id", "parent_id", "forked_from_position", "title")
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
        spawn = spawn_point(namespace=namespace, session=session, agent=key.agent,
                            prompt=_prompt_of(conversation.pk))
        if spawn is None:
            continue
        if store_recorded.link_subagent(conversation_id=conversation.pk, parent_id=spawn.conversation_id,
                               position=spawn.position, actor=actor):
            made.append({"id": str(conversation.pk), "title": conversation.title,
                         "parent_id": spawn.conversation_id, "parent_position": spawn.position})
    return made
