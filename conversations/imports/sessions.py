"""Sessions of Responses items (the OpenAI Agents SDK's `Session`) through the entries door.

A session id names a line of conversations, one per generation; the session is the
live one with the highest generation (its *head*). Each generation is a stream
(an `ImportSource` of format openai-responses, key `SESSION` for generation 0 and
`SESSION#N` after) whose items are kept verbatim (`SourceEntry`) beside the rows
they map to, through the same mapping as an imported Responses file
(`formats.openai_responses.apply_item`): messages by role, function calls and their
outputs, reasoning as `thought`, a `compaction` item as a checkpoint.

Nothing is ever destroyed:

- `pop_item` forks the head without its last item (the fork holds copies of the
  rows before it, and copies of the other items); the session follows the fork, and
  the conversation it left keeps every row;
- `clear_session` starts the next generation empty, recorded as a child of the
  head that kept no rows; the old conversation stays as it was.

`active_items` is what `get_items` returns: the active view. With a checkpoint (a
compaction item, or a fold made in memoryui by an agent, the MCP server or a
person) it starts with the summary — the compaction item itself when the fold came
from one, else `{"role": "system", "content": <summary>}` — followed by the items
after the checkpoint; without one, every item.
"""

import json
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations import store as conversation_store
from conversations.errors import Conflict, ImportInProgress, InvalidInput, NotFound
from conversations.formats import openai_responses
from conversations.formats.base import ConvPlan, Entry, dumps, first_text, parse_time
from conversations.models import Checkpoint, Conversation

from . import store
from .models import ImportSource, SourceEntry

FORMAT = "openai-responses"
SOURCE = "openai_responses"
ITEMS_MAX = 1000
KEY_MAX = 200


@dataclass
class Stream:
    source: ImportSource | None
    generation: int

    def as_dict(self) -> dict:
        source = self.source
        return {"key": source.source_key if source else None, "generation": self.generation,
                "conversation_id": str(source.conversation_id) if source else None,
                "entries": source.entries if source else 0}


def _key(session_id: str, generation: int) -> str:
    return session_id if generation == 0 else f"{session_id}#{generation}"


def _check_session(namespace: str, session_id: str) -> tuple[str, str]:
    namespace = (namespace or "").strip()
    session_id = (session_id or "").strip()
    if not session_id:
        raise InvalidInput("session_id must not be blank", field="session_id")
    if "#" in session_id or len(session_id) > KEY_MAX - 12:
        raise InvalidInput(f"session_id is at most {KEY_MAX - 12} characters, without '#'", field="session_id")
    if len(namespace) > 200:
        raise InvalidInput("namespace is at most 200 characters", field="namespace")
    return namespace, session_id


def head(*, namespace: str, session_id: str, lock: bool = False) -> Stream:
    """The session's live generation with the highest number (no source: none yet)."""
    namespace, session_id = _check_session(namespace, session_id)
    qs = ImportSource.objects.filter(format=FORMAT, namespace=namespace, state__session=session_id)
    if lock and connection.vendor != "sqlite":
        qs = qs.select_for_update()
    sources = sorted(qs, key=lambda s: s.state.get("generation", 0), reverse=True)
    live = set(Conversation.objects.live().filter(pk__in=[s.conversation_id for s in sources])
               .values_list("pk", flat=True))
    for source in sources:
        if source.conversation_id in live:
            return Stream(source, source.state.get("generation", 0))
    return Stream(None, max((s.state.get("generation", 0) for s in sources), default=-1) + 1)


def _new_generation(*, namespace, session_id, generation, conversation) -> ImportSource:
    source, created = store.get_or_create_source(format=FORMAT, namespace=namespace,
                                                 source_key=_key(session_id, generation),
                                                 conversation_id=conversation.pk)
    if not created:
        raise ImportInProgress("another request is writing this session right now; send it again",
                               field="session_id")
    store.save_source(source=source, entries=0, state={"session": session_id, "generation": generation,
                                                       "convs": {"main": str(conversation.pk)}})
    return source


def append_items(*, namespace: str, session_id: str, items: list, expected_entries: int | None = None,
                 subject: str = "", actor: str = "system", finish=None) -> Stream:
    """Append items to the session's head (starting generation 0 when there is none), in
    one transaction; `expected_entries` (the head's item count the caller saw) guards
    against a writer, a pop or a clear that came in between (Conflict `entries_conflict`).
    `finish(stream)`, if given, runs inside that transaction once the items are placed
    (the API renders its answer there: an answer that fails writes nothing)."""
    namespace, session_id = _check_session(namespace, session_id)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InvalidInput("entries must be a list of JSON objects (Responses items)", field="entries")
    if len(items) > ITEMS_MAX:
        raise InvalidInput(f"at most {ITEMS_MAX} items per batch", field="entries")
    try:
        return _append_items(namespace=namespace, session_id=session_id, items=items,
                             expected_entries=expected_entries, subject=subject, actor=actor, finish=finish)
    except IntegrityError:
        # Two first batches of one session at once (PostgreSQL): one of them created it.
        raise ImportInProgress("another request is writing this session right now; send it again",
                               field="session_id") from None


def _append_items(*, namespace, session_id, items, expected_entries, subject, actor, finish) -> Stream:
    with transaction.atomic():
        stream = head(namespace=namespace, session_id=session_id, lock=True)
        _expect(stream, expected_entries)
        if not items:
            return stream
        source = stream.source
        if source is None:
            title = next((first_text(openai_responses._parts(i.get("content"))) for i in items
                          if i.get("role") == "user"), "") or f"OpenAI Agents session {session_id[:40]}"
            conversation = store.create_imported_conversation(
                title=title, subject=subject, namespace=namespace,
                external_id=_key(session_id, stream.generation)[:KEY_MAX],
                meta={"openai_agents": {"session_id": session_id, "generation": stream.generation}})
            source = _new_generation(namespace=namespace, session_id=session_id, generation=stream.generation,
                                     conversation=conversation)
        _place(source, items, actor=actor)
        stream = Stream(source, stream.generation)
        if finish is not None:
            finish(stream)
        return stream


def _place(source: ImportSource, items: list, *, actor: str) -> None:
    cid = str(source.conversation_id)
    conversation = Conversation.objects.get(pk=cid)
    conv = ConvPlan(key="main", existing_id=cid, base=conversation.next_position)
    problems: list = []
    entries = []
    for i, item in enumerate(items):
        entry = Entry(seq=source.entries + i, line=None, raw=dumps(item))
        openai_responses.apply_item(conv, item, at=parse_time(item.get("created_at")) or timezone.now(),
                                    entry=entry, problems=problems, source=SOURCE)
        entries.append(entry)
    end = store.append_imported(conversation_id=cid, rows=conv.rows, expected_position=conv.base)
    for fold in conv.folds:
        store.checkpoint_imported(conversation_id=cid, position=fold.position, summary=fold.summary,
                                  created_at=fold.at, created_by="openai-agents")
    store.add_entries(source=source, entries=entries, conversation_ids={"main": cid})
    store.save_source(source=source, entries=source.entries + len(entries), state=source.state)
    store.record_import(actor=actor, conversation_id=cid, detail={
        "format": FORMAT, "messages": len(conv.rows), "checkpoints": len(conv.folds), "appended": True,
        "next_position": end, "items": len(items)})


def _items_of(source: ImportSource) -> list[tuple[int, int, dict]]:
    """(seq, position, item) of the stream, in order (position: the conversation's last
    row once the item was placed)."""
    rows = SourceEntry.objects.filter(source_id=source.pk).order_by("seq").values_list("seq", "position", "raw")
    return [(seq, pos, json.loads(raw)) for seq, pos, raw in rows.iterator(chunk_size=2000)]


def active_items(*, namespace: str, session_id: str, limit: int | None = None) -> tuple[list, Stream]:
    """What `get_items` returns (module docstring): the active view as Responses items,
    the latest `limit` of them when given."""
    stream = head(namespace=namespace, session_id=session_id)
    if stream.source is None:
        return [], stream
    everything = _items_of(stream.source)
    checkpoint = Checkpoint.objects.latest_for(stream.source.conversation_id)
    if checkpoint is None:
        items = [item for _, _, item in everything]
    else:
        folded = checkpoint.message_position
        # The item that wrote the row at the checkpoint's position, and every one before it, are folded.
        first = next((seq for seq, pos, _ in everything if pos >= folded), None)
        compaction = next((seq for seq, pos, item in reversed(everything)
                           if item.get("type") == "compaction" and pos == folded), None)
        if compaction is not None and checkpoint.created_by == "openai-agents":
            summary = next(item for seq, _, item in everything if seq == compaction)
        else:
            summary = {"role": "system", "content": checkpoint.summary}
        items = [summary] + [item for seq, _, item in everything
                             if first is not None and seq > first and seq != compaction]
    if limit is not None:
        items = items[-limit:] if limit > 0 else []
    return items, stream


def _base_title(title: str) -> str:
    for suffix in (" (last item removed)", " (cleared)"):
        while title.endswith(suffix):
            title = title[: -len(suffix)]
    return title or "OpenAI Agents session"


def _expect(stream: Stream, expected_entries: int | None) -> None:
    held = stream.source.entries if stream.source else 0
    if expected_entries is not None and expected_entries != held:
        raise Conflict(f"the session holds {held} items, the request expected {expected_entries}: it changed "
                       "meanwhile (another writer, a pop or a clear); read it and try again",
                       code="entries_conflict", field="expected_entries")


def pop_item(*, namespace: str, session_id: str, expected_entries: int | None = None,
             actor: str = "system") -> tuple[dict | None, Stream]:
    """Fork the head without its last item and make the fork the head; returns the item
    (None, and nothing written, when the session is empty)."""
    with transaction.atomic():
        stream = head(namespace=namespace, session_id=session_id, lock=True)
        _expect(stream, expected_entries)
        if stream.source is None:
            return None, stream
        source = stream.source
        entries = list(SourceEntry.objects.filter(source_id=source.pk).order_by("seq"))
        if not entries:
            return None, stream
        last, kept = entries[-1], entries[:-1]
        keep_through = max((e.position for e in kept), default=-1)
        parent = Conversation.objects.get(pk=source.conversation_id)
        generation = stream.generation + 1
        title = f"{_base_title(parent.title)} (last item removed)"
        external_id = _key(session_id, generation)[:KEY_MAX]
        if keep_through >= 0:
            child = conversation_store.fork_conversation(conversation_id=parent.pk, position=keep_through,
                                                         title=title, actor=actor, external_id=external_id)
        else:
            child = store.create_imported_conversation(
                title=title, subject=parent.subject, namespace=parent.namespace, external_id=external_id,
                parent_id=parent.pk, parent_relation="fork", forked_from_position=None)
        meta = {**(parent.meta or {}), "openai_agents": {"session_id": session_id, "generation": generation,
                                                         "popped_from": str(parent.pk)}}
        Conversation.objects.filter(pk=child.pk).update(meta=meta)
        new = _new_generation(namespace=parent.namespace, session_id=session_id, generation=generation,
                              conversation=child)
        copies = [Entry(seq=e.seq, line=e.line, raw=e.raw, position=e.position) for e in kept]
        store.add_entries(source=new, entries=copies, conversation_ids={"main": str(child.pk)})
        store.save_source(source=new, entries=len(copies), state=new.state)
        store.record_import(actor=actor, conversation_id=child.pk, detail={
            "format": FORMAT, "popped_from": str(parent.pk), "items": len(copies)})
        return json.loads(last.raw), Stream(new, generation)


def clear_session(*, namespace: str, session_id: str, actor: str = "system") -> Stream:
    """Start the next generation, empty; the head it replaces stays as it was and is
    recorded as its parent (a child that kept no rows)."""
    with transaction.atomic():
        stream = head(namespace=namespace, session_id=session_id, lock=True)
        if stream.source is None or stream.source.entries == 0:
            return stream  # nothing to clear: an empty session stays the same one
        parent = Conversation.objects.get(pk=stream.source.conversation_id)
        generation = stream.generation + 1
        child = store.create_imported_conversation(
            title=f"{_base_title(parent.title)} (cleared)", subject=parent.subject,
            namespace=parent.namespace, external_id=_key(session_id, generation)[:KEY_MAX], parent_id=parent.pk,
            parent_relation="fork", forked_from_position=None,
            meta={"openai_agents": {"session_id": session_id, "generation": generation,
                                    "cleared": str(parent.pk)}})
        new = _new_generation(namespace=parent.namespace, session_id=session_id, generation=generation,
                              conversation=child)
        store.record_import(actor=actor, conversation_id=child.pk, detail={
            "format": FORMAT, "cleared": str(parent.pk)})
        return Stream(new, generation)


def require_head(*, namespace: str, session_id: str) -> Stream:
    stream = head(namespace=namespace, session_id=session_id)
    if stream.source is None:
        raise NotFound(f"no session {session_id[:80]!r} in {namespace[:80]!r}", field="session_id")
    return stream
