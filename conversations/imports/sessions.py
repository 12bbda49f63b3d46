"""Sessions of Responses items (the OpenAI Agents SDK's `Session`) through the entries door.

A session id names a line of conversations, one per generation; the session is the
live one with the highest generation (its *head*). Each generation is a stream
(an `ImportSource` of format openai-responses, key `SESSION` for generation 0 and
`SESSION#N` after) whose items are kept verbatim (`SourceEntry`) beside the rows
they map to, through the same mapping as an imported Responses file
(`formats.openai_responses.apply_item`): messages by role, function calls and their
outputs, reasoning as `thought`, a `compaction` item as a checkpoint.

A generation's conversation is made by the store's create-or-get
(`conversations.store.get_or_create_conversation`, the API door's): two first writes
of a session at once get one conversation on both databases, and the one that did
not create it continues the stream the other started.

Nothing is ever destroyed:

- `pop_item` appends a retraction record to the stream (an entry of type
  `memoryui.retraction` naming the item it takes back) and a `note` row
  "retracted by pop_item" to the conversation, in one transaction. The session's
  items skip a retracted item; the conversation keeps its rows, so what it re-sends
  never loses a tool result it had. The stream's state keeps the seqs of the live
  items as ranges, so a pop reads one entry whatever the session's size;
- `clear_session` starts the next generation empty, recorded as a child of the
  head that kept no rows; the old conversation stays as it was.

`active_items` is what `get_items` returns: the active view. With a checkpoint (a
compaction item, or a fold made in memoryui by an agent, the MCP server or a
person) it starts with the summary — the compaction item itself when the fold came
from one, else `{"role": "system", "content": <summary>}` — followed by the items
after the checkpoint; without one, every item. Retracted items are left out.
"""

import json
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations import store as conversation_store
from conversations.errors import Conflict, ImportInProgress, InvalidInput
from conversations.formats import openai_responses
from conversations.formats.base import ConvPlan, Entry, dumps, first_text, make_row, parse_time, storable
from conversations.models import Checkpoint, Conversation
from conversations.store import EXTERNAL_ID_MAX, NAMESPACE_MAX, TITLE_MAX

from . import store
from .models import ImportSource, SourceEntry

FORMAT = "openai-responses"
SOURCE = "openai_responses"
ITEMS_MAX = 1000
# The type of a stream's retraction record; an item of the SDK may not carry it.
RETRACTION = "memoryui.retraction"


@dataclass
class Stream:
    source: ImportSource | None
    generation: int

    def as_dict(self) -> dict:
        source = self.source
        return {"key": source.source_key if source else None, "generation": self.generation,
                "conversation_id": str(source.conversation_id) if source else None,
                "entries": source.entries if source else 0,
                "items": sum(end - start + 1 for start, end in _live_ranges(source)) if source else 0}


def _key(session_id: str, generation: int) -> str:
    return session_id if generation == 0 else f"{session_id}#{generation}"


def _check_session(namespace: str, session_id: str) -> tuple[str, str]:
    namespace = (namespace or "").strip()
    session_id = (session_id or "").strip()
    if not session_id:
        raise InvalidInput("session_id must not be blank", field="session_id")
    if "#" in session_id or len(session_id) > EXTERNAL_ID_MAX - 12:
        raise InvalidInput(f"session_id is at most {EXTERNAL_ID_MAX - 12} characters, without '#'", field="session_id")
    if len(namespace) > NAMESPACE_MAX:
        raise InvalidInput(f"namespace is at most {NAMESPACE_MAX} characters", field="namespace")
    return namespace, session_id


def head(*, namespace: str, session_id: str, lock: bool = False) -> Stream:
    """The session's live generation with the highest number (no source: none yet)."""
    namespace, session_id = _check_session(namespace, session_id)
    qs = ImportSource.objects.filter(format=FORMAT, namespace=namespace, state__session=session_id)
    if lock:
        qs = qs.for_update()
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
    for i, item in enumerate(items):
        if item.get("type") == RETRACTION:
            raise InvalidInput(f"the item type {RETRACTION!r} is memoryui's own (pop_item writes it)",
                               field=f"entries.{i}.type")
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
        if stream.source is None:
            stream = _open_generation(namespace=namespace, session_id=session_id, generation=stream.generation,
                                      items=items, subject=subject)
            _expect(stream, expected_entries)
        source = stream.source
        _place(source, items, actor=actor)
        stream = Stream(source, stream.generation)
        if finish is not None:
            finish(stream)
        return stream


def _open_generation(*, namespace, session_id, generation, items, subject) -> Stream:
    """The generation's conversation by the store's create-or-get. When another writer
    created it first, its transaction has committed (PostgreSQL made our insert wait on
    the unique index), so the stream it started is read again and continued."""
    title = next((first_text(openai_responses.content_parts(i.get("content"))) for i in items
                  if i.get("role") == "user"), "") or f"OpenAI Agents session {session_id[:40]}"
    conversation, created = conversation_store.get_or_create_conversation(
        namespace=namespace, external_id=_key(session_id, generation)[:EXTERNAL_ID_MAX],
        title=" ".join(storable(title).split())[:TITLE_MAX], subject=storable(subject),
        meta={"openai_agents": {"session_id": session_id, "generation": generation}})
    if not created:
        stream = head(namespace=namespace, session_id=session_id, lock=True)
        if stream.source is not None:
            return stream
    # Created now, or made by another door (the API) with this id: the session starts in it.
    source = _new_generation(namespace=namespace, session_id=session_id, generation=generation,
                             conversation=conversation)
    return Stream(source, generation)


def _live_ranges(source: ImportSource) -> list[list[int]]:
    """The seqs of the stream's live items, as [first, last] ranges in order. A stream
    written before retractions existed has every entry live."""
    live = (source.state or {}).get("live")
    if live is None:
        return [[0, source.entries - 1]] if source.entries else []
    return [list(r) for r in live]


def _with_appended(ranges: list[list[int]], first: int, count: int) -> list[list[int]]:
    if count <= 0:
        return ranges
    if ranges and ranges[-1][1] == first - 1:
        return ranges[:-1] + [[ranges[-1][0], first + count - 1]]
    return ranges + [[first, first + count - 1]]


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
    live = _with_appended(_live_ranges(source), source.entries, len(entries))
    store.save_source(source=source, entries=source.entries + len(entries), state={**source.state, "live": live})
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
    live = _live(everything)
    checkpoint = Checkpoint.objects.latest_for(stream.source.conversation_id)
    if checkpoint is None:
        items = [item for _, _, item in live]
    else:
        folded = checkpoint.message_position
        # The entry that wrote the row at the checkpoint's position, and every one before it, are folded.
        first = next((seq for seq, pos, _ in everything if pos >= folded), None)
        compaction = next((seq for seq, pos, item in reversed(live)
                           if item.get("type") == "compaction" and pos == folded), None)
        if compaction is not None and checkpoint.created_by == "openai-agents":
            summary = next(item for seq, _, item in live if seq == compaction)
        else:
            summary = {"role": "system", "content": checkpoint.summary}
        items = [summary] + [item for seq, _, item in live
                             if first is not None and seq > first and seq != compaction]
    if limit is not None:
        items = items[-limit:] if limit > 0 else []
    return items, stream


def _live(everything: list[tuple[int, int, dict]]) -> list[tuple[int, int, dict]]:
    """The entries not taken back: a retraction record takes back the item it names,
    always the last one still live (pop_item). The record is the truth; the state's
    ranges only find the last live item without reading the stream."""
    live: list = []
    for entry in everything:
        item = entry[2]
        if item.get("type") == RETRACTION:
            if live and live[-1][0] == item.get("retracts"):
                live.pop()
            continue
        live.append(entry)
    return live


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
    """Take back the session's last item and return it (None, and nothing written, when
    it has none). Append-only: a retraction record joins the stream and a `note` row
    "retracted by pop_item" the conversation, in one transaction; the item and its rows
    stay. Costs the same whatever the session's size: the state's ranges name the item."""
    with transaction.atomic():
        stream = head(namespace=namespace, session_id=session_id, lock=True)
        _expect(stream, expected_entries)
        source = stream.source
        if source is None:
            return None, stream
        live = _live_ranges(source)
        if not live:
            return None, stream
        seq = live[-1][1]
        taken = SourceEntry.objects.get(source_id=source.pk, seq=seq)
        item = json.loads(taken.raw)
        cid = str(source.conversation_id)
        conversation = Conversation.objects.get(pk=cid)
        what = item.get("type") or item.get("role") or "item"
        note = make_row({"kind": "note", "text": f"retracted by pop_item: item {seq} ({what}), written up to row "
                                                 f"#{taken.position}; the session's items leave it out",
                         "meta": {"retracts": {"item": seq, "position": taken.position}, "by": "pop_item"}},
                        timezone.now(), source.entries, [], None)
        end = store.append_imported(conversation_id=cid, rows=[note], expected_position=conversation.next_position)
        record = Entry(seq=source.entries, line=None, position=end - 1,
                       raw=dumps({"type": RETRACTION, "retracts": seq, "by": "pop_item"}))
        store.add_entries(source=source, entries=[record], conversation_ids={"main": cid})
        left = live[:-1] + ([[live[-1][0], seq - 1]] if live[-1][0] < seq else [])
        store.save_source(source=source, entries=source.entries + 1, state={**source.state, "live": left})
        store.record_import(actor=actor, conversation_id=cid, detail={
            "format": FORMAT, "retracted": seq, "by": "pop_item", "next_position": end})
        return item, Stream(source, stream.generation)


def clear_session(*, namespace: str, session_id: str, actor: str = "system") -> Stream:
    """Start the next generation, empty; the head it replaces stays as it was and is
    recorded as its parent (a child that kept no rows)."""
    with transaction.atomic():
        stream = head(namespace=namespace, session_id=session_id, lock=True)
        if stream.source is None or not _live_ranges(stream.source):
            return stream  # nothing to clear: an empty session stays the same one
        parent = Conversation.objects.get(pk=stream.source.conversation_id)
        generation = stream.generation + 1
        child, created = conversation_store.get_or_create_conversation(
            title=f"{_base_title(parent.title)[:TITLE_MAX - 10]} (cleared)", subject=parent.subject,
            namespace=parent.namespace, external_id=_key(session_id, generation)[:EXTERNAL_ID_MAX], parent_id=parent.pk,
            parent_relation="fork", meta={"openai_agents": {"session_id": session_id, "generation": generation,
                                                           "cleared": str(parent.pk)}})
        if not created:  # a clear of the same head came first (PostgreSQL): the session is cleared already
            return head(namespace=namespace, session_id=session_id, lock=True)
        new = _new_generation(namespace=parent.namespace, session_id=session_id, generation=generation,
                              conversation=child)
        store.record_import(actor=actor, conversation_id=child.pk, detail={
            "format": FORMAT, "cleared": str(parent.pk)})
        return Stream(new, generation)
