"""The import door of the agent API.

- `POST /imports` with `content` (a file's text) or `document` (its JSON): import a
  whole transcript of any format (`format: auto` detects it). Idempotent: the same
  file again creates nothing; a grown session appends what is new.
- `POST /imports` with `entries` and a session key (`namespace` + `external_id`):
  append a batch of Claude Code entries, as the Claude Agent SDK's SessionStore
  does (`external_id` "SESSION/subagents/agent-X" is a subagent transcript).
  Entries whose uuid is stored already are skipped, so a retried batch is safe.
- `GET /imports/entries`: the entries of one session key, in order, deep-equal to
  what was appended (the SessionStore's `load`).
- `GET /imports/sources`: the session keys of a namespace (the SessionStore's
  `list_sessions` and, with `prefix`, `list_subkeys`).
"""

import json

from django.http import JsonResponse
from ninja import Query, Router

from conversations.jsonbody import read_json
from conversations.apiauth import actor_of, require_scope
from conversations.errors import InvalidInput, NotFound
from conversations.formats import CHOICES

from . import importer
from .models import ImportSource

router = Router(tags=["imports"])
MAX_TEXT = 200


def _respond(data, status=200):
    return JsonResponse(data, status=status, safe=False, json_dumps_params={"ensure_ascii": False})


def _text(body: dict, name: str, *, default: str = "") -> str:
    value = body.get(name, default)
    if value is None:
        value = default
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", field=name)
    if len(value) > MAX_TEXT and name != "content":
        raise InvalidInput(f"{name} is at most {MAX_TEXT} characters", field=name)
    return value


@router.post("/imports", operation_id="import_transcript", summary="Import a transcript, or append entries",
             response={200: dict, 201: dict})
def import_transcript(request):
    """Import a whole transcript (`content` or `document`) or append a batch of Claude Code
    `entries` to a session key. Needs `write`. Never a 500: bad input is a 4xx naming the
    field, and problems inside the transcript come back in `problems` with line numbers."""
    require_scope(request, "write")
    body = read_json(request, allow_nul=True)
    known = {"format", "content", "document", "entries", "namespace", "external_id", "subject", "title", "dry_run"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}", field=unknown[0])
    format = _text(body, "format", default="auto")
    if format not in CHOICES:
        raise InvalidInput(f"unknown format {format[:40]!r}; expected one of {', '.join(CHOICES)}", field="format")
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InvalidInput("dry_run must be true or false", field="dry_run")
    actor = actor_of(request)
    given = [k for k in ("content", "document", "entries") if k in body]
    if len(given) != 1:
        raise InvalidInput("send exactly one of content (a file's text), document (its JSON) or entries (a batch "
                           "for one session key)", field="content")
    if "entries" in body:
        if dry_run:
            raise InvalidInput("dry_run is for whole transcripts", field="dry_run")
        result = importer.append_entries(
            format="claude-code" if format == "auto" else format, namespace=_text(body, "namespace"),
            external_id=_text(body, "external_id"), entries=body["entries"], subject=_text(body, "subject"),
            actor=actor, title=_text(body, "title"))
    else:
        if "external_id" in body:
            raise InvalidInput("external_id is for entries; a transcript's own session id identifies it",
                               field="external_id")
        data = body["content"] if "content" in body else json.dumps(body["document"], ensure_ascii=False)
        if not isinstance(data, str):
            raise InvalidInput("content must be the file's text", field="content")
        namespace = body.get("namespace")
        result = importer.import_text(data, format=format, namespace=_text(body, "namespace") if namespace is not None
                                      else None, subject=_text(body, "subject"), actor=actor, dry_run=dry_run)
    status = 201 if result.created and not result.dry_run else 200
    return _respond(result.as_dict(), status)


@router.get("/imports/entries", operation_id="load_entries", summary="The entries of one session key",
            response={200: dict})
def load_entries(request, namespace: str = Query("", max_length=MAX_TEXT),
                 external_id: str = Query(..., max_length=MAX_TEXT), format: str = Query("claude-code", max_length=40)):
    """What was appended under this key, in order, deep-equal (the SessionStore's `load`);
    404 for a key never written. Needs `read`."""
    require_scope(request, "read")
    for name, value in (("namespace", namespace), ("external_id", external_id), ("format", format)):
        if "\x00" in value:
            raise InvalidInput(f"{name} must not contain NUL characters", field=name)
    found = importer.load_entries(format=format, namespace=namespace, external_id=external_id)
    if found is None:
        raise NotFound(f"no entries stored under {namespace!r} / {external_id[:80]!r}", field="external_id")
    conversation_id, entries = found
    return _respond({"conversation_id": conversation_id, "entries": entries})


@router.get("/imports/sources", operation_id="list_sources", summary="Session keys of a namespace",
            response={200: dict})
def list_sources(request, namespace: str = Query("", max_length=MAX_TEXT), format: str = Query("claude-code",
                 max_length=40), prefix: str = Query("", max_length=MAX_TEXT)):
    """Imported streams of one namespace (a SessionStore's project), newest first; `prefix`
    "SESSION/" lists a session's subagent transcripts. Needs `read`."""
    require_scope(request, "read")
    for name, value in (("namespace", namespace), ("prefix", prefix), ("format", format)):
        if "\x00" in value:
            raise InvalidInput(f"{name} must not contain NUL characters", field=name)
    from conversations.models import Conversation

    qs = ImportSource.objects.filter(format=format, namespace=namespace)
    if prefix:
        qs = qs.filter(source_key__startswith=prefix)
    rows = list(qs.order_by("-updated_at", "-pk")[:10000])
    live = set(Conversation.objects.live().filter(pk__in=[r.conversation_id for r in rows]).values_list("pk",
                                                                                                        flat=True))
    items = [{"format": r.format, "namespace": r.namespace, "key": r.source_key,
              "conversation_id": str(r.conversation_id), "entries": r.entries,
              "created_at": r.created_at.isoformat(), "updated_at": r.updated_at.isoformat(),
              "updated_ms": int(r.updated_at.timestamp() * 1000)}
             for r in rows if r.conversation_id in live]
    return _respond({"items": items})
