"""Importing the session files other agents keep: Gemini CLI, Aider, OpenCode and Cline.

Each such file (an Aider history: each session in it) is one agent session that grows
between imports, and is identified by that session rather than by its content: a
Gemini or OpenCode session id, an Aider session's start, a Cline task's first message
(`formats.<format>` gives the key). So:

- a session never imported is written as a new conversation (staged, chunked, visible
  at once: apply_new_plan), with every original entry;
- the same file again creates nothing (its length and hash are those recorded);
- a grown file — the rows it makes begin with exactly the rows stored — appends the
  rest, and its new checkpoints, conversations (a rewind's fork) and entries, in one
  transaction (rows are compared as stored, byte for byte);
- a file that reuses the session's key but does not continue it (rewritten, or another
  file) is a conversation of its own under `<key>~<hash>`, reported;
- subagents: a session started by a call of another one (an OpenCode child session, a
  Gemini subagent's own file) lands under that call, whichever is imported first. The
  parent's row carrying the call names the session it started (meta `spawned`); the
  child, when it knows its parent (`parent_session` in meta: OpenCode's `parentID`, a
  Gemini subagent's folder), is created under it, and a parent imported later links
  the children it names that are waiting (`store_recorded.link_subagent`, once).
"""

import hashlib
import json
import uuid
from pathlib import PurePosixPath

from django.db import transaction

from conversations import store_recorded
from conversations.errors import Conflict
from conversations.formats import MODULES, aider
from conversations.formats.base import ConvPlan, Plan, Problem
from conversations.models import Checkpoint, Conversation, Message

from .apply import apply_new_plan, apply_plan
from .continuation import locked_source
from .models import ImportSource
from .result import ImportResult

# How much of a distinct file's hash names it, as for Claude Code sessions.
DISTINCT_HASH = 12


class _DryRun(Exception):
    pass


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def parse_file(text: str, *, format: str, subject: str, path: str | None = None, first_line: int = 1) -> Plan:
    """The plan of one session file (an Aider session from `first_line` of its history), with
    what the path tells: a Gemini subagent file's session is the folder it lies in."""
    if format == "aider":
        return aider.parse_session(text, first_line=first_line, subject=subject)
    plan = MODULES[format].parse(text, subject=subject)
    main = plan.conversations["main"]
    own = main.meta.get(format)
    if format == "gemini" and path and main.relation == "subagent" and isinstance(own, dict):
        folder = PurePosixPath(path.replace("\\", "/")).parent.name
        if folder and folder != "chats" and folder != own.get("sessionId"):
            own["parent_session"] = folder
    return plan


def import_session_file(text: str, *, format: str, namespace: str, subject: str, actor: str, dry_run: bool,
                        finish=None, allow_empty: bool = False, path: str | None = None,
                        first_line: int = 1, empty_result=None) -> ImportResult:
    """Import one session file (module docstring). `empty_result(plan)` answers a file that
    makes no row (importer.empty_result)."""
    plan = parse_file(text, format=format, subject=subject, path=path, first_line=first_line)
    key = plan.source_key[:300]
    consumed = (len(text), _hash(text))
    for _copy in range(2):
        source = ImportSource.objects.filter(format=format, namespace=namespace, source_key=key).first()
        if source is not None and not Conversation.objects.live().filter(pk=source.conversation_id).exists():
            source = None  # its conversation was deleted: imported anew
        if source is None:
            break
        if source.consumed_chars == consumed[0] and source.consumed_hash == consumed[1]:
            return ImportResult(format=format, source_key=key, namespace=namespace, dry_run=dry_run, unchanged=True,
                                conversation_id=str(source.conversation_id))
        continued = _continuation(plan, source)
        if continued is not None:
            return _append(continued, source, format=format, namespace=namespace, actor=actor, dry_run=dry_run,
                           finish=finish, consumed=consumed)
        if "~" in key:
            break  # a distinct copy that changed again: a copy of its own too, by its new hash
        plan.problems.append(Problem(None, f"this file has the session key {key[:80]!r} of a conversation imported "
                                           "before, but does not continue it: imported as a conversation of its own"))
        key = f"{key}~{consumed[1][:DISTINCT_HASH]}"
    plan.source_key = key
    if not allow_empty and not plan.rows and not plan.folds:
        return empty_result(plan)
    _place_under_parent(plan, format=format, namespace=namespace)
    spawned = spawned_rows(plan, format)  # read before the writer takes the rows
    return apply_new_plan(plan, namespace=namespace, actor=actor, consumed=consumed, dry_run=dry_run,
                          finish=None if dry_run else _linking(finish, spawned, namespace=namespace, actor=actor))


def _continuation(plan: Plan, source: ImportSource) -> Plan | None:
    """A plan appending what `plan` has beyond the stored rows of its conversations, or None
    when the stored rows are not where `plan`'s begin."""
    ids = dict((source.state or {}).get("convs") or {"main": str(source.conversation_id)})
    out = Plan(format=plan.format, source_key=source.source_key, problems=list(plan.problems))
    live = dict(Conversation.objects.live().filter(pk__in=list(ids.values())).values_list("pk", "next_position"))
    for key, conv in plan.conversations.items():
        cid = ids.get(key)
        stored_next = live.get(_uuid(cid)) if cid else None
        if cid is None or stored_next is None:
            if key == "main":
                return None
            out.conversations[key] = conv  # new since: a conversation of its own (a rewind's fork)
            continue
        own = stored_next - conv.base  # rows of this conversation's own, stored (after a copied prefix)
        if own > len(conv.rows) or not _same_rows(cid, conv, own):
            if key == "main":
                return None
            out.problems.append(Problem(None, f"conversation {conv.title[:60]!r} of this session changed since it was "
                                              "imported; its stored rows are kept as they are"))
            continue
        stored_folds = set(Checkpoint.objects.of(cid).values_list("message_position", "summary"))
        folds = [f for f in conv.folds if (f.position, f.summary) not in stored_folds and f.position >= conv.base]
        rows = conv.rows[own:]
        if not rows and not folds:
            continue
        out.conversations[key] = ConvPlan(key=key, title=conv.title, existing_id=cid, base=stored_next, rows=rows,
                                          folds=folds)
    if "main" not in out.conversations:
        out.conversations["main"] = ConvPlan(key="main", existing_id=ids["main"], base=live[_uuid(ids["main"])])
    # The entries stored are the file's first ones (a session file grows at its end): the rest are new.
    out.entries = [e for e in plan.entries if e.seq >= source.entries]
    out.state = {"placer": plan.state, "convs": ids}
    return out


def _uuid(value):
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _same_rows(cid: str, conv: ConvPlan, own: int) -> bool:
    """Whether the conversation's stored own rows are the first `own` rows of the plan, byte for byte."""
    stored = Message.objects.filter(conversation_id=cid, position__gte=conv.base).order_by("position").values_list(
        "content", flat=True)
    count = 0
    for text, row in zip(stored.iterator(chunk_size=2000), conv.rows, strict=False):
        if text != row.text:
            return False
        count += 1
    return count == own


def _append(plan: Plan, source: ImportSource, *, format: str, namespace: str, actor: str, dry_run: bool, finish,
            consumed) -> ImportResult:
    result = ImportResult(format=format, source_key=source.source_key, namespace=namespace,
                          conversation_id=str(source.conversation_id))
    try:
        with transaction.atomic():
            locked = locked_source(format, namespace, source.source_key)
            if locked is None or locked.entries != source.entries:
                raise Conflict("another import of this session ran meanwhile; import it again", field="source",
                               code="conflict")
            spawned = spawned_rows(plan, format)
            apply_plan(plan, locked, namespace=namespace, actor=actor, consumed=consumed, result=result)
            result.unchanged = not result.appended and not result.created
            ids = {c["key"]: c["id"] for c in result.created + result.appended}
            link_spawned(spawned, ids, namespace=namespace, actor=actor, result=result)
            if dry_run:
                raise _DryRun()
            if finish is not None and not result.unchanged:
                finish(result)
    except _DryRun:
        result.dry_run = True
    return result


# ---- subagents ------------------------------------------------------------------------------


def _parent_session(plan: Plan, format: str) -> str | None:
    own = plan.conversations["main"].meta.get(format)
    value = own.get("parent_session") if isinstance(own, dict) else None
    return value if isinstance(value, str) and value else None


def _spawned(message_text: str, format: str) -> list[str]:
    try:
        meta = json.loads(message_text).get("meta") or {}
    except ValueError:
        return []
    own = meta.get(format) if isinstance(meta, dict) else None
    spawned = own.get("spawned") if isinstance(own, dict) else None
    return [s for s in spawned if isinstance(s, str)] if isinstance(spawned, list) else []


def spawn_point(*, format: str, namespace: str, child: str, parent: str | None) -> tuple[str, int | None] | None:
    """(parent conversation, position of the row whose call started `child`), the position
    None when the parent is here without that call; None when no parent is found."""
    rows = Message.objects.filter(kind="assistant", content__contains=f'"{child}"')
    if parent is not None:
        conversation = Conversation.objects.live().filter(namespace=namespace, external_id=parent[:200]).first()
        if conversation is None:
            return None
        rows = rows.filter(conversation_id=conversation.pk)
    else:
        # The scope's own conversations only (a message has no project of its own: it is reached
        # through its conversation's fence).
        rows = rows.filter(conversation__in=Conversation.objects.live().filter(namespace=namespace))
    for cid, position, text in rows.order_by("position").values_list("conversation_id", "position", "content")[:50]:
        if child in _spawned(text, format):
            return str(cid), position
    return (str(conversation.pk), None) if parent is not None else None


def _place_under_parent(plan: Plan, *, format: str, namespace: str) -> None:
    """A child session whose parent is here: created under the call that started it."""
    main = plan.conversations["main"]
    if main.relation != "subagent" or main.parent_id or plan.source_key.startswith("sha256:"):
        return
    found = spawn_point(format=format, namespace=namespace, child=plan.source_key.split("~", 1)[0],
                        parent=_parent_session(plan, format))
    if found is not None:
        main.parent_id, main.parent_position = found


def spawned_rows(plan: Plan, format: str) -> list[tuple[str, str | None, int, str]]:
    """(conversation key, its stored id if any, position, child session) of each call in the
    plan's rows that started a session of its own."""
    out = []
    for key, conv in plan.conversations.items():
        for i, row in enumerate(conv.rows):
            if row.kind == "assistant":
                out.extend((key, conv.existing_id, conv.base + i, child) for child in _spawned(row.text, format))
    return out


def _linking(finish, spawned, *, namespace: str, actor: str):
    def link_then_finish(result):
        link_spawned(spawned, {c["key"]: c["id"] for c in result.created}, namespace=namespace, actor=actor,
                     result=result)
        if finish is not None:
            finish(result)

    return link_then_finish


def link_spawned(spawned, ids: dict, *, namespace: str, actor: str, result: ImportResult) -> None:
    """Link the child sessions these calls started that were imported before, waiting."""
    for key, existing, position, child in spawned:
        cid = ids.get(key) or existing
        if cid is None:
            continue
        waiting = Conversation.objects.live().filter(namespace=namespace, external_id=child[:200]).first()
        if waiting is None or str(waiting.pk) == str(cid):
            continue
        if waiting.parent_id is not None and waiting.forked_from_position is not None:
            continue
        if store_recorded.link_subagent(conversation_id=waiting.pk, parent_id=cid, position=position, actor=actor):
            result.linked.append({"id": str(waiting.pk), "title": waiting.title, "parent_id": str(cid),
                                  "parent_position": position})
