"""The entries door: a batch of entries for one session key, appended after what is stored
(how the Claude Agent SDK's SessionStore appends). Reads and deletion are in entry_streams.py."""


from django.db import IntegrityError, transaction
from django.db.models import Q

from conversations import store as conversation_store
from conversations.errors import Conflict, ImportInProgress, InvalidInput
from conversations.formats import FORMATS, claude_code
from conversations.formats.base import (
    Line,
    Plan,
    dumps,
    storable,
)
from conversations.formats.claude_code_placer import working_folder
from conversations.frameworks import store as frameworks_store
from conversations.frameworks.models import SessionSummary
from conversations.models import Conversation
from conversations.store import EXTERNAL_ID_MAX, NAMESPACE_MAX

from . import store, subagents
from .apply import apply_plan
from .continuation import existing_plans, locked_source, lookup, stored_uuid
from .models import ImportSource, SourceEntry
from .result import ImportResult


def append_entries(*, format: str, namespace: str, external_id: str, entries: list, subject: str = "",
                   actor: str = "system", title: str = "", expected_entries: int | None = None,
                   summary: dict | None = None, finish=None) -> ImportResult:
    """Append a batch of format-native entries to the stream `external_id` in `namespace`.

    For Claude Code an external id `SESSION/SUBPATH` is a subagent transcript, kept as
    a child conversation (relation "subagent") of the session `SESSION`. Entries whose
    uuid is already stored are skipped, so a retried batch writes nothing twice.

    `expected_entries`: the number of entries the caller believes are stored; another
    count is a Conflict (`entries_conflict`) and nothing is written. `summary`: the
    Claude Agent SDK's summary of a main session folded over this batch, kept verbatim
    in the same transaction (conversations.frameworks); it is kept only while it can
    describe every stored entry (the stream began with this door, or has one already).
    `finish(result)`: as for `import_text`, inside the batch's transaction."""
    if format != "claude-code":
        raise InvalidInput("entries can be appended for format claude-code; import whole files of "
                           f"{', '.join(f for f in FORMATS if f != 'claude-code')}", field="format")
    # Any JSON value, as the SDK's own InMemorySessionStore takes it: a line of a transcript
    # that is not an object is kept verbatim (load gives it back) and shown as a note.
    if not isinstance(entries, list):
        raise InvalidInput("entries must be a list", field="entries")
    namespace = (namespace or "").strip()
    external_id = (external_id or "").strip()
    if not external_id:
        raise InvalidInput("external_id must not be blank", field="external_id")
    if len(external_id) > EXTERNAL_ID_MAX or len(namespace) > NAMESPACE_MAX:
        raise InvalidInput(f"namespace is at most {NAMESPACE_MAX} characters and external_id at most "
                           f"{EXTERNAL_ID_MAX}", field="external_id")
    try:
        with transaction.atomic():
            result = _append_entries(format=format, namespace=namespace, external_id=external_id, entries=entries,
                                     subject=subject, actor=actor, title=title, expected_entries=expected_entries,
                                     summary=summary)
            if finish is not None:
                finish(result)
            return result
    except IntegrityError:
        # Two first batches of one session at once: one of them created it; the other retries.
        raise ImportInProgress("another request is writing this session right now; send the batch again",
                               field="external_id") from None


def _append_entries(*, format, namespace, external_id, entries, subject, actor, title, expected_entries,
                    summary) -> ImportResult:
    result = ImportResult(format=format, source_key=external_id, namespace=namespace)
    session, _, subpath = external_id.partition("/")
    if summary is not None and subpath:
        raise InvalidInput("a summary is kept for a main session, not for a subagent transcript", field="summary")
    source = locked_source(format, namespace, external_id)
    if source is not None and not Conversation.objects.live().filter(pk=source.conversation_id).exists():
        source = None
    stored_before = source.entries if source is not None else 0
    _expect_entries(expected_entries, stored_before)
    if source is None:
        conversation = _stream_conversation(namespace=namespace, external_id=external_id, session=session,
                                            subpath=subpath, subject=subject, title=title, entries=entries)
        # Another writer's first batch may have created the stream meanwhile (the store's
        # create-or-get waited for its commit): this batch continues it.
        source = locked_source(format, namespace, external_id)
        if source is not None and source.conversation_id == conversation.pk:
            stored_before = source.entries
            _expect_entries(expected_entries, stored_before)
        else:
            source, _ = store.get_or_create_source(format=format, namespace=namespace, source_key=external_id,
                                                   conversation_id=conversation.pk)
            state = {"placer": {"subagent_stream": bool(subpath)}, "convs": {"main": str(conversation.pk)}}
            store.save_source(source=source, entries=source.entries, state=state)
    result.conversation_id = str(source.conversation_id)
    result.stream = _stream_state(source, summary_saved=False)
    if not entries:
        result.unchanged = True
        return result
    # Retries and overlapping batches: entries whose uuid is stored already are skipped.
    uuids = [u for u in map(_uuid_of, entries) if u is not None]
    stored = set(SourceEntry.objects.filter(source_id=source.pk, uuid__in=uuids).values_list("uuid", flat=True))
    fresh, seen = [], set()
    for e in entries:
        u = _uuid_of(e)
        if u is not None and (u in stored or u in seen):
            continue
        if u is not None:
            seen.add(u)
        fresh.append(e)
    if not fresh:
        result.unchanged = True
        return result

    lines = [Line(number=source.entries + i + 1, text=dumps(e), obj=e) for i, e in enumerate(fresh)]
    plan = Plan(format=format, source_key=external_id)
    ids = existing_plans(source, plan)
    claude_code.feed_lines(plan, lines, state=source.state.get("placer"), lookup=lookup(source, ids),
                           first_seq=source.entries, whole=False, subagent_stream=bool(subpath))
    plan.state = {"placer": plan.state, "convs": ids}
    result = apply_plan(plan, source, namespace=namespace, actor=actor, result=result)
    if not subpath:
        result.linked = subagents.link_waiting(namespace=namespace, session=external_id, actor=actor)
    _name_stream(source, plan, fresh, subpath=subpath)
    saved = False
    if summary is not None:
        # A summary folded from this door's batches alone cannot describe entries that
        # another door stored before: then none is kept, and the SDK reads the session.
        if stored_before == 0 or SessionSummary.objects.filter(source_id=source.pk).exists():
            frameworks_store.save_summary(source=source, data=summary, at=source.updated_at)
            saved = True
    result.stream = _stream_state(source, summary_saved=saved)
    return result


def _expect_entries(expected: int | None, stored: int) -> None:
    if expected is not None and expected != stored:
        raise Conflict(f"the session has {stored} entries stored, the batch expected {expected}: "
                       "another writer appended meanwhile; read the session's state and send the batch again",
                       code="entries_conflict", field="expected_entries")


def _folder(entries: list) -> dict:
    """The project folder the session ran in (the first its entries name), to name its namespace by."""
    folder = next(filter(None, map(working_folder, entries)), None)
    return {"cwd": folder} if folder is not None else {}


def _placeholder_title(session: str, subpath: str) -> str:
    if subpath:
        return f"Subagent {subpath.rsplit('/', 1)[-1].removeprefix('agent-')}"
    return f"Claude Code session {session[:8]}"


def _uuid_of(entry) -> str | None:
    return stored_uuid(entry["uuid"]) if isinstance(entry, dict) and isinstance(entry.get("uuid"), str) else None


def _name_stream(source: ImportSource, plan: Plan, entries: list, *, subpath: str) -> None:
    """A stream's conversation starts with a placeholder title; its first prompt names it,
    and a title entry (`custom-title`, `ai-title`) renames it."""
    title = plan.conversations["main"].title.strip() if "main" in plan.conversations else ""
    entries = [e for e in entries if isinstance(e, dict)]
    titled = any(e.get("type") in ("custom-title", "ai-title") for e in entries)
    session = source.source_key.partition("/")[0]
    placeholder = _placeholder_title(session, subpath)
    # A subagent's sidecar (.meta.json, sent as agent_metadata) says what it was for.
    about = next((e for e in reversed(entries) if e.get("type") == "agent_metadata"), None) if subpath else None
    if about and isinstance(about.get("description"), str) and about["description"].strip():
        kind = f" ({about['agentType']})" if isinstance(about.get("agentType"), str) and about["agentType"] else ""
        title, titled = f"{placeholder}{kind}: {about['description'].strip()}", True
    if not title:
        return
    current = Conversation.objects.filter(pk=source.conversation_id).values_list("title", flat=True).first()
    if current is None or (current != placeholder and not titled):
        return
    if subpath and not titled and not title.startswith("Subagent "):
        title = f"{placeholder}: {title}"
    if title != current:
        store.retitle(conversation_id=source.conversation_id, title=title)


def _stream_state(source: ImportSource, *, summary_saved: bool) -> dict:
    return {"key": source.source_key, "entries": source.entries, "updated_ms": _ms(source.updated_at),
            "summary_saved": summary_saved}


def _ms(at) -> int:
    return int(at.timestamp() * 1000)


def _stream_conversation(*, namespace, external_id, session, subpath, subject, title, entries=()) -> Conversation:
    # One look: a first batch of the same session that commits between two looks (one for
    # live conversations, one for hidden ones) would otherwise pass for an import.
    hidden = Conversation.objects.filter(namespace=namespace, external_id=external_id).first()
    if hidden is not None and not hidden.deleting and not hidden.staged:
        return hidden
    if hidden is not None:
        staged = store.stale_stage(hidden.pk)
        hidden_still = Conversation.objects.filter(Q(deleting=True) | Q(staged=True), pk=hidden.pk).exists()
        if staged is None and not hidden_still:
            # Its file's import published it between the two looks: the batch must see that source.
            raise ImportInProgress("that session's file was imported just now; send the batch again",
                                   field="external_id")
        if staged is False:
            raise ImportInProgress("that session's file is being imported right now; send the batch again when it "
                                   "has finished", field="external_id")
        raise InvalidInput("that session is being deleted", field="external_id")
    # A subagent under the call that spawned it; one whose session is not here yet waits for
    # it, unlinked (the session's first batch links it: subagents.py), the same on every door.
    spawn = None
    about = {}
    if subpath:
        key = subagents.parse_key(external_id)
        agent = key.agent if key else subpath.rsplit("/", 1)[-1].removeprefix("agent-")
        # A workflow agent's sidecar (sent as agent_metadata) names the call that spawned it.
        sidecar = next((e for e in entries if e.get("type") == "agent_metadata"), None) or {}
        about = {k: storable(sidecar[k]) for k in ("agentType", "toolUseId", "description")
                 if isinstance(sidecar.get(k), str)}
        summary, ended = subagents.last_reply(entries) if subagents.is_compaction_agent(agent) else ("", None)
        spawn = subagents.spawn_point(namespace=namespace, session=session, agent=agent,
                                      prompt=subagents.first_prompt(entries), call_id=about.get("toolUseId"),
                                      summary=summary, ended=ended)
    # The store's create-or-get, as the API door: two first batches at once get one conversation.
    conversation, _ = conversation_store.get_or_create_conversation(
        title=" ".join(storable(title or _placeholder_title(session, subpath)).split()), subject=storable(subject),
        namespace=namespace, external_id=external_id,
        parent_id=spawn.conversation_id if spawn else None, parent_relation="subagent" if spawn else "",
        forked_from_position=spawn.position if spawn else None,
        meta={"claude_code": {"session_id": session, **({"subpath": subpath} if subpath else {}), **about,
                              **_folder(entries)}})
    return conversation
