"""Reads and the deletion of entry streams: what a framework's session store asks of the
entries door besides appending (the Claude Agent SDK's `load`, `list_sessions`,
`list_session_summaries`, `list_subkeys` and `delete`).

A stream is an `ImportSource` (format, namespace, key). For Claude Code the key of a
main session is its session id, and `SESSION/SUBPATH` is one of its subagent
transcripts. A stream counts while the conversation it starts in is live: a stream
whose conversation is being deleted, or was, is not listed and loads as nothing.
"""

import json
from dataclasses import dataclass

from conversations import keyset
from conversations.errors import InvalidInput, NotFound
from conversations.frameworks.models import SessionSummary
from conversations.models import Conversation
from conversations.rawjson import RawJson
from conversations.retention.erasure import MAX_EXTRA_IDS, execute_deletion

from .models import ImportSource, SourceEntry

LOAD_PAGE = 5000
LOAD_PAGE_MAX = 20000
LIST_MAX = 10000


def _ms(at) -> int:
    return int(at.timestamp() * 1000)


def _live(ids) -> set:
    return set(Conversation.objects.live().filter(pk__in=list(ids)).values_list("pk", flat=True))


def find_stream(*, format: str, namespace: str, key: str) -> ImportSource | None:
    source = ImportSource.objects.filter(format=format, namespace=namespace, source_key=key).first()
    if source is None or source.conversation_id not in _live([source.conversation_id]):
        return None
    return source


@dataclass
class EntriesPage:
    conversation_id: str
    entries: list
    next: int | None  # the seq to pass as `after` for the next page


def load_page(*, format: str, namespace: str, key: str, after: int = -1, limit: int = LOAD_PAGE) -> EntriesPage | None:
    """The stream's entries with seq > `after`, in the order appended, as their stored JSON
    text (deep-equal to what came in); None for a stream never written (or deleted)."""
    source = find_stream(format=format, namespace=namespace, key=key)
    if source is None:
        return None
    limit = max(1, min(int(limit), LOAD_PAGE_MAX))
    rows, more = keyset.take(SourceEntry.objects.filter(source_id=source.pk, seq__gt=after).order_by("seq")
                             .values_list("seq", "raw"), limit)
    # Each entry's stored text goes into the answer as it is: it was read as strict JSON when it
    # came in (formats/base.py), so it needs no parsing and re-encoding on the way out.
    return EntriesPage(conversation_id=str(source.conversation_id), entries=[RawJson(raw) for _, raw in rows],
                       next=rows[-1][0] if more else None)


def list_streams(*, format: str, namespace: str, prefix: str = "", key: str | None = None,
                 sessions_only: bool = False) -> list[dict]:
    """The live streams of a namespace, most recently written first, each with its
    mtime (`updated_ms`, epoch milliseconds: when its last batch was stored), its entry
    count and, for a Claude Code session with one, the SDK's summary (`summary`:
    {"data", "mtime"}, the mtime on the same clock)."""
    qs = ImportSource.objects.filter(format=format, namespace=namespace)
    if key is not None:
        qs = qs.filter(source_key=key)
    elif prefix:
        qs = qs.filter(source_key__startswith=prefix)
    if sessions_only:
        qs = qs.exclude(source_key__contains="/")
    rows = list(qs.order_by("-updated_at", "-pk")[:LIST_MAX])
    live = _live(r.conversation_id for r in rows)
    rows = [r for r in rows if r.conversation_id in live]
    summaries = {s.source_id: s for s in SessionSummary.objects.filter(source_id__in=[r.pk for r in rows])}
    items = []
    for r in rows:
        item = {"format": r.format, "namespace": r.namespace, "key": r.source_key,
                "conversation_id": str(r.conversation_id), "entries": r.entries,
                "created_at": r.created_at.isoformat(), "updated_at": r.updated_at.isoformat(),
                "updated_ms": _ms(r.updated_at), "summary": None}
        summary = summaries.get(r.pk)
        if summary is not None:
            item["summary"] = {"data": summary.data, "mtime": _ms(summary.updated_at)}
        items.append(item)
    return items


def session_conversation_ids(*, format: str, namespace: str, key: str) -> list:
    """Every live conversation a stream placed entries in (its forks and inline
    subagents too); for a main Claude Code session, also those of its subagent
    transcripts (`SESSION/…`) and the session's own conversation when only its
    subagents were written. Children come before their parents."""
    session, _, subpath = key.partition("/")
    streams = list(ImportSource.objects.filter(format=format, namespace=namespace, source_key=key))
    if not subpath:
        streams += list(ImportSource.objects.filter(format=format, namespace=namespace,
                                                    source_key__startswith=session + "/"))
    ids = []
    for source in streams:
        convs = (source.state or {}).get("convs") or {}
        ids += [c for k, c in convs.items() if k != "main"] + [str(source.conversation_id)]
    if not subpath:
        ids += [str(pk) for pk in Conversation.objects.filter(namespace=namespace, external_id=session)
                .values_list("pk", flat=True)]
    live = {str(pk) for pk in _live(ids)}
    out, seen = [], set()
    for cid in ids:
        if cid in live and cid not in seen:
            seen.add(cid)
            out.append(cid)
    return out


def delete_stream(*, format: str, namespace: str, key: str, actor: str):
    """Delete a session (with its subagent transcripts) or one subagent transcript through
    the deletion path: rows gone from the database files, checked, and one receipt.
    NotFound when nothing of it is stored; MaintenanceRunning (409) while a prune or
    another deletion runs."""
    if not key:
        raise InvalidInput("external_id must not be blank", field="external_id")
    ids = session_conversation_ids(format=format, namespace=namespace, key=key)
    if not ids:
        raise NotFound(f"nothing is stored under {namespace[:80]!r} / {key[:80]!r}", field="external_id")
    if len(ids) > MAX_EXTRA_IDS:
        raise InvalidInput(f"this session has {len(ids)} conversations; delete its subagent transcripts first "
                           f"(at most {MAX_EXTRA_IDS} per deletion)", field="external_id")
    return execute_deletion(conversation_ids=ids, actor=actor, kind="session")


def load_entries(*, format: str, namespace: str, external_id: str) -> tuple[str, list] | None:
    """The entries of a stream, in the order appended, parsed (deep-equal to what came in)."""
    source = ImportSource.objects.filter(format=format, namespace=(namespace or "").strip(),
                                         source_key=(external_id or "").strip()).first()
    if source is None or not Conversation.objects.live().filter(pk=source.conversation_id).exists():
        return None
    raws = SourceEntry.objects.filter(source_id=source.pk).order_by("seq").values_list("raw", flat=True)
    return str(source.conversation_id), [json.loads(raw) for raw in raws.iterator(chunk_size=2000)]
