"""The import door of the agent API.

- `POST /imports` with `content` (a file's text) or `document` (its JSON): import a
  whole transcript of any format (`format: auto` detects it); `sidecar`: a Claude Code
  subagent's `.meta.json`, which names the call that spawned it. Or the file itself as
  the body (a transcript, a zip of a folder, an OpenCode database), options in the query
  string (imports/body.py). Bodies up to MEMORYUI_MAX_IMPORT_BYTES, read a block at a time. Idempotent: the same
  file again creates nothing; a grown session appends what is new. The answer's
  `older_than_retention` lists the conversations whose own dates are older than the
  retention period (counted from receipt, they are kept that long from now);
  `pin_older_than_retention: true` pins them in the import's own transaction (`pinned`).
- `POST /imports` with `entries` and a session key (`namespace` + `external_id`):
  append a batch of Claude Code entries, as the Claude Agent SDK's SessionStore
  does (`external_id` "SESSION/subagents/agent-X" is a subagent transcript).
  Entries whose uuid is stored already are skipped, so a retried batch is safe.
  `expected_entries` makes the batch conditional on the count stored, and `summary`
  keeps the SDK's folded session summary with it, in the same transaction.
- `GET /imports/entries`: the entries of one session key, in order, deep-equal to
  what was appended (the SessionStore's `load`), a page at a time.
- `GET /imports/sources`: the session keys of a namespace with their mtimes, entry
  counts and summaries (the SessionStore's `list_sessions`, `list_session_summaries`
  and, with `prefix`, `list_subkeys`).
- `DELETE /imports/entries`: delete a session with its subagent transcripts, or one
  subagent transcript, through the deletion path; answers the deletion receipt.
- Sessions of Responses items (the OpenAI Agents SDK's `Session`, imports/sessions.py):
  `POST /imports` with format `openai-responses`, `external_id` the session id and
  `entries` the items appends to the session; `GET /imports/sessions/items` is its
  active view as items; `POST /imports/sessions/pop` takes its last item back (a
  retraction record and a note row: nothing is removed);
  `POST /imports/sessions/clear` starts its next conversation. Nothing is destroyed.
"""

import json
import os
import uuid
from typing import Any

from django.conf import settings
from ninja import Field, Query, Router, Schema
from pydantic import BaseModel

from conversations import bodies, idempotency, keyset, params
from conversations.api import EXAMPLE_SUMMARY, conversation_summary
from conversations.api_schemas import (
    ConversationSummary,
    ListOut,
    errors_doc,
    example_doc,
    json_body_doc,
    merge_doc,
    passed_raw,
)
from conversations.apiauth import actor_of, scope
from conversations.errors import InvalidInput, NotFound, UnsupportedMediaType
from conversations.formats import CHOICES
from conversations.http import json_response
from conversations.jsonbody import read_json

from . import archives, containers, entry_appends, entry_streams, importer, lookup, sessions
from . import body as body_reader
from .result import merged
from .textfile import Text

router = Router(tags=["imports"])
MAX_TEXT = 200


class StreamOut(Schema):
    key: str | None = Field(..., description="The stream's key (null: the session has none yet).")
    generation: int
    conversation_id: uuid.UUID | None
    entries: int
    items: int


class EntryPage(ListOut):
    items: list[passed_raw(Any)] = Field(..., description="The entries, in the order appended, each exactly "
                                                           "as it was stored: the line or item as it came in.")
    conversation_id: uuid.UUID


class EntriesDeletedOut(Schema):
    # The deletion receipt as the document a person downloads, with where to read it again.
    request_id: str
    created_at: str
    actor: str
    kind: str
    project: str | None
    all_projects: bool
    subject_sha256: str | None
    conversation_ids: list[str]
    counts: dict[str, Any]
    verification: dict[str, Any]
    verify_by: str | None
    # Set on a request that carried out an earlier one again after a restore (retention/reapply.py).
    reapplied: dict[str, Any] | None = None
    receipt_id: str
    receipt_url: str


# A source is a plain pydantic model (not a ninja Schema): a list of many serializes without an
# attribute look-up per field, as conversations.api_schemas does.
class SummaryOut(BaseModel):
    data: Any
    mtime: int = Field(..., description="Epoch milliseconds.")


class ImportSourceOut(BaseModel):
    format: str
    namespace: str
    key: str
    conversation_id: uuid.UUID
    entries: int
    created_at: str
    updated_at: str
    updated_ms: int = Field(..., description="Epoch milliseconds of its last stored batch.")
    summary: SummaryOut | None


class SourceList(ListOut):
    items: list[ImportSourceOut]


class SessionItems(ListOut):
    items: list[dict[str, Any]]
    stream: StreamOut


class PoppedOut(Schema):
    item: dict[str, Any] | None = Field(..., description="The item taken back (null: the session was empty).")
    stream: StreamOut


class ClearedOut(Schema):
    stream: StreamOut


def _text(body: dict, name: str, *, default: str = "") -> str:
    value = body.get(name, default)
    if value is None:
        value = default
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string", field=name)
    if name in _IDENTIFIERS:
        return params.identifier(value, name, max_length=MAX_TEXT)
    if len(value) > MAX_TEXT and name != "content":
        raise InvalidInput(f"{name} is at most {MAX_TEXT} characters", field=name)
    return value


# Names a session is found by: NFC, nothing invisible, by the rule of conversations' ids.
_IDENTIFIERS = ("namespace", "external_id", "session_id", "prefix", "key")


def _ids(**values) -> list[str]:
    return [params.identifier(value, name, max_length=MAX_TEXT) for name, value in values.items()]


_TEXT = {"type": "string", "maxLength": MAX_TEXT}
_EXAMPLE_SESSION = "session-7f3a9c"
IMPORT_BODY = json_body_doc(
    {"type": "object", "additionalProperties": False, "properties": {
        "format": {"type": "string", "enum": list(CHOICES), "default": "auto"},
        "content": {"type": "string", "description": "A transcript file's text."},
        "document": {"type": ["object", "array"], "description": "A transcript that is one JSON document."},
        "entries": {"type": "array", "description": "A batch of entries (Claude Code) or items (openai-responses) "
                                                   "appended to the session key `namespace` + `external_id`."},
        "namespace": _TEXT, "external_id": _TEXT, "subject": _TEXT, "title": _TEXT,
        "dry_run": {"type": "boolean", "default": False},
        "expected_entries": {"type": "integer", "minimum": 0},
        "summary": {"type": "object", "description": "The SDK's folded session summary (Claude Code)."},
        "pin_older_than_retention": {"type": "boolean", "default": False},
        "allow_empty": {"type": "boolean", "default": False,
                        "description": "Keep a transcript that makes no message as an empty conversation."},
        "sidecar": {"type": "object", "description": "A Claude Code subagent's .meta.json, beside its transcript."}}},
    {"transcript": {"summary": "A whole transcript (an OpenAI chat request)", "value": {
        "format": "openai-chat", "namespace": "support-bot", "subject": "customer:42", "document": {"messages": [
            {"role": "user", "content": "Where is my refund for order 7?"},
            {"role": "assistant", "content": "It was refunded on May 3."}]}}},
     "entries": {"summary": "Claude Code entries appended to a session", "value": {
         "namespace": "claude-code", "external_id": _EXAMPLE_SESSION, "subject": "customer:42", "entries": [
             {"type": "user", "uuid": "6f1c2a9e-8d4b-4c61-9a57-0b7e6f2d1c88", "sessionId": _EXAMPLE_SESSION,
              "message": {"role": "user", "content": "Fix the failing test"}}],
         "summary": {"first_prompt": "Fix the failing test"}}},
     "items": {"summary": "Responses items appended to an OpenAI Agents session", "value": {
         "format": "openai-responses", "namespace": "agents", "external_id": _EXAMPLE_SESSION,
         "entries": [{"role": "user", "content": "Where is my refund?"}]}}},
    "Exactly one of `content`, `document` or `entries`; or the file itself as the body (text, JSON "
    "Lines, Markdown, a zip, an SQLite database) with its options in the query string.")
IMPORT_DOC = merge_doc(IMPORT_BODY, {
    "parameters": [{"name": name, "in": "query", "required": False, "schema": schema,
                    "description": "With the file itself as the body: the option a JSON body names."}
                   for name, schema in (("format", {"type": "string", "enum": list(CHOICES)}),
                                        ("namespace", _TEXT), ("subject", _TEXT), ("dry_run", {"type": "boolean"}),
                                        ("allow_empty", {"type": "boolean"}),
                                        ("pin_older_than_retention", {"type": "boolean"}))],
    "requestBody": {"content": {kind: {"schema": {"type": "string", "format": "binary"}}
                                for kind in body_reader.RAW_TYPES}}})
SESSION_BODY = json_body_doc(
    {"type": "object", "additionalProperties": False, "required": ["session_id"], "properties": {
        "namespace": _TEXT, "session_id": _TEXT, "expected_entries": {"type": "integer", "minimum": 0}}},
    {"session": {"summary": "An OpenAI Agents session", "value": {"namespace": "agents",
                                                                  "session_id": _EXAMPLE_SESSION}}})


@router.post("/imports", operation_id="import_transcript", summary="Import a transcript, or append entries",
             response={200: dict, 201: dict}, openapi_extra=IMPORT_DOC)
@scope("write")
def import_transcript(request):
    """Import a whole transcript (`content` or `document`) or append a batch of Claude Code
    `entries` to a session key; or send the file itself as the body (any other content type
    than JSON: text, JSON Lines, Markdown, a zip, a database), its options in the query
    string. A body of up to MEMORYUI_MAX_IMPORT_BYTES is read a block at a time, never held
    whole. Needs `write`. Never a 500: bad input is a 4xx naming the field, and problems
    inside the transcript come back in `problems` with line numbers."""
    spooled = bodies.spool(request)
    content_type = (request.content_type or "").lower()
    if content_type and content_type != "application/json" and not content_type.endswith("+json"):
        if content_type not in body_reader.RAW_TYPES:
            raise UnsupportedMediaType(
                f"send a JSON body ('Content-Type: application/json') or the file itself as one of "
                f"{', '.join(body_reader.RAW_TYPES)} (got {content_type[:80]!r})", field="body")
        return _raw_import(request, spooled)
    read = body_reader.read_json_body(spooled)
    try:
        return _json_import(request, read)
    finally:
        read.close()


def _json_import(request, read):
    body = dict(read.fields)
    if read.content is not None:
        body["content"] = Text.open(read.content)
    answers = []

    def finish(result):
        # Inside the import's last transaction: an answer that cannot be rendered undoes it,
        # and a keyed request's answer is kept with it (conversations/idempotency.py).
        answers.append(_answer(request, result))

    format, dry_run, pin_old, allow_empty = _import_options(body)
    actor = actor_of(request)
    if "entries" in body:
        if dry_run or pin_old or allow_empty:
            # A session's entries arrive as it runs: they are received, and dated, now.
            name = "dry_run" if dry_run else "pin_older_than_retention" if pin_old else "allow_empty"
            raise InvalidInput(f"{name} is for whole transcripts", field=name)
        return _entries_import(request, body, format, actor, finish, answers)
    else:
        for name in ("expected_entries", "summary"):
            if name in body:
                raise InvalidInput(f"{name} is for entries appended to a session key", field=name)
        if "external_id" in body:
            raise InvalidInput("external_id is for entries; a transcript's own session id identifies it",
                               field="external_id")
        data = body["content"] if "content" in body else json.dumps(body["document"], ensure_ascii=False)
        if not isinstance(data, (str, Text)):
            raise InvalidInput("content must be the file's text", field="content")
        namespace = body.get("namespace")
        sidecar = body.get("sidecar")
        if sidecar is not None and not isinstance(sidecar, dict):
            raise InvalidInput("sidecar must be a JSON object (a subagent's .meta.json)", field="sidecar")
        try:
            result = importer.import_text(data, format=format, namespace=_text(body, "namespace")
                                          if namespace is not None else None, subject=_text(body, "subject"),
                                          actor=actor, dry_run=dry_run, finish=finish,
                                          pin_older_than_retention=pin_old, allow_empty=allow_empty,
                                          sidecar=sidecar)
        finally:
            if isinstance(data, Text):
                data.close()
    # Nothing written (unchanged, a dry run): answered here; the middleware keeps a key's answer.
    return answers[0] if answers else _answer(request, result)


def _entries_import(request, body: dict, format: str, actor: str, finish, answers: list):
    """A batch of entries for one session key (a SessionStore's, an Agents SDK Session's)."""
    expected = body.get("expected_entries")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int) or expected < 0):
        raise InvalidInput("expected_entries must be a whole number, 0 or more", field="expected_entries")
    summary = body.get("summary")
    if summary is not None and not isinstance(summary, dict):
        raise InvalidInput("summary must be a JSON object (the SDK's summary data)", field="summary")
    if format == "openai-responses":
        if "summary" in body:
            raise InvalidInput("a summary is kept for Claude Code sessions", field="summary")

        def finish_items(stream):
            response = json_response({"format": format, "stream": stream.as_dict()})
            idempotency.settle(request, response)
            answers.append(response)

        stream = sessions.append_items(namespace=_text(body, "namespace"), session_id=_text(body, "external_id"),
                                       items=body["entries"], expected_entries=expected,
                                       subject=_text(body, "subject"), actor=actor, finish=finish_items)
        return answers[0] if answers else json_response({"format": format, "stream": stream.as_dict()})
    result = entry_appends.append_entries(
        format="claude-code" if format == "auto" else format, namespace=_text(body, "namespace"),
        external_id=_text(body, "external_id"), entries=body["entries"], subject=_text(body, "subject"),
        actor=actor, title=_text(body, "title"), expected_entries=expected, summary=summary, finish=finish)
    return answers[0] if answers else _answer(request, result)


def _raw_import(request, spooled):
    """The body is the file: a transcript, a zip of a folder, an OpenCode database."""
    body = body_reader.query_options(request.GET)
    format, dry_run, pin_old, allow_empty = _import_options({**body, "content": ""})
    namespace = _text(body, "namespace") if body.get("namespace") is not None else None
    kw = dict(format=format, namespace=namespace, subject=_text(body, "subject"), actor=actor_of(request),
              dry_run=dry_run, pin_older_than_retention=pin_old, allow_empty=allow_empty)
    answers = []

    def finish(result):
        answers.append(_answer(request, result))

    head = spooled.file.read(16)
    spooled.file.seek(0)
    if head.startswith(b"PK\x03\x04"):
        result = _zip_import(spooled, kw)
    elif head == containers.SQLITE_MAGIC:
        result = _database_import(spooled, kw)
    else:
        text = Text.of_file(spooled.file, spooled.size)
        result = importer.import_text(text, finish=finish, **kw)
    # Several files of a zip or a database: their answer is given after the last one's writes.
    return answers[0] if answers else _answer(request, result)


def _zip_import(spooled, kw):
    archive, members = archives.open_archive(spooled.file, max_bytes=settings.MEMORYUI_MAX_IMPORT_BYTES)
    budget = archives.Budget(settings.MEMORYUI_MAX_IMPORT_BYTES)
    results = []
    with archive:
        for name, member_body, sidecar in containers.pieces_of_archive(
                archive, members, lambda m: archives.read_member(archive, m, budget)):
            if sidecar and sidecar.get("skipped"):
                continue
            if sidecar and sidecar.get("database"):
                path = body_reader.spool_to_file(member_body)
                try:
                    results += [importer.import_text(doc, path=f"{name}/{n}", **kw)
                                for n, doc in enumerate(containers.opencode_database(path))]
                finally:
                    os.unlink(path)
                continue
            path = body_reader.spool_to_file([member_body] if isinstance(member_body, bytes) else member_body)
            text = Text.open(path)
            try:
                results.append(importer.import_text(text, path=name, sidecar=sidecar, **kw))
            finally:
                text.close()
                os.unlink(path)
    if not results:
        raise InvalidInput("the zip holds no transcript", field="body")
    return merged(results)


def _database_import(spooled, kw):
    path = body_reader.spool_to_file(spooled.blocks())
    try:
        docs = containers.opencode_database(path)
    finally:
        os.unlink(path)
    if not docs:
        raise InvalidInput("the database holds no session", field="body")
    return merged([importer.import_text(doc, **kw) for doc in docs])


def _import_options(body) -> tuple[str, bool, bool, bool]:
    """What every import names: its format, dry_run, pin_older_than_retention and allow_empty, and
    exactly one of content, document or entries; any other field is refused."""
    known = {"format", "content", "document", "entries", "namespace", "external_id", "subject", "title", "dry_run",
             "expected_entries", "summary", "pin_older_than_retention", "allow_empty", "sidecar"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}", field=unknown[0])
    format = _text(body, "format", default="auto")
    if format not in CHOICES:
        raise InvalidInput(f"unknown format {format[:40]!r}; expected one of {', '.join(CHOICES)}", field="format")
    dry_run = body.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise InvalidInput("dry_run must be true or false", field="dry_run")
    pin_old = body.get("pin_older_than_retention", False)
    if not isinstance(pin_old, bool):
        raise InvalidInput("pin_older_than_retention must be true or false", field="pin_older_than_retention")
    allow_empty = body.get("allow_empty", False)
    if not isinstance(allow_empty, bool):
        raise InvalidInput("allow_empty must be true or false", field="allow_empty")
    given = [k for k in ("content", "document", "entries") if k in body]
    if len(given) != 1:
        raise InvalidInput("send exactly one of content (a file's text), document (its JSON) or entries (a batch "
                           "for one session key)", field="content")
    return format, dry_run, pin_old, allow_empty


def _answer(request, result):
    response = json_response(result.as_dict(), 201 if result.created and not result.dry_run else 200)
    idempotency.settle(request, response)
    return response


def _check_nul(**values) -> None:
    for name, value in values.items():
        if "\x00" in value:
            raise InvalidInput(f"{name} must not contain NUL characters", field=name)


@router.get("/imports/entries", operation_id="load_entries", summary="The entries of one session key",
            response={200: EntryPage})
@scope("read")
def load_entries(request, namespace: str = Query("", max_length=MAX_TEXT),
                 external_id: str = Query(..., max_length=MAX_TEXT), format: str = Query("claude-code", max_length=40),
                 after: int = Query(-1, ge=-1),
                 limit: int = Query(entry_streams.LOAD_PAGE, ge=1, le=entry_streams.LOAD_PAGE_MAX),
                 cursor: str | None = Query(None, max_length=params.CURSOR_MAX)):
    """What was appended under this key, in order, deep-equal (the SessionStore's `load`), as
    `items`; `next` is the cursor of the next page, null on the last. 404 for a key never
    written. Needs `read`."""
    _check_nul(format=format)
    namespace, external_id = _ids(namespace=namespace, external_id=external_id)
    start = keyset.decode(cursor, "entries", int)
    page = entry_streams.load_page(format=format, namespace=namespace, key=external_id,
                                   after=start[0] if start else after, limit=limit)
    if page is None:
        raise NotFound(f"no entries stored under {namespace!r} / {external_id[:80]!r}", field="external_id")
    next_cursor = keyset.cursor_of("entries", page.next) if page.next is not None else None
    return keyset.listing(page.entries, next_cursor, keyset.next_url(request, next_cursor, keyset.same_query(request)),
                          conversation_id=page.conversation_id)


@router.delete("/imports/entries", operation_id="delete_entries", summary="Delete a session key's conversations",
               response={200: EntriesDeletedOut})
@scope("admin")
def delete_entries(request, namespace: str = Query("", max_length=MAX_TEXT),
                   external_id: str = Query(..., max_length=MAX_TEXT),
                   format: str = Query("claude-code", max_length=40)):
    """Delete what a session key wrote, through the deletion path (the SessionStore's
    `delete`): a main session with its subagent transcripts, rewinds and inline
    subagents, or one subagent transcript (`SESSION/SUBPATH`). Gone from the database
    files, checked, one receipt (`receipt_url`). 404 when nothing is stored under the
    key; 409 `maintenance_running` while a prune or another deletion runs (retry
    later). Needs `admin`."""
    _check_nul(format=format)
    namespace, external_id = _ids(namespace=namespace, external_id=external_id)
    receipt = entry_streams.delete_stream(format=format, namespace=namespace, key=external_id, actor=actor_of(request))
    return {**receipt.as_document(), "receipt_id": str(receipt.pk),
            "receipt_url": request.build_absolute_uri(f"/api/v1/receipts/{receipt.pk}")}


@router.get("/imports/sources", operation_id="list_sources", summary="Session keys of a namespace",
            response={200: SourceList})
@scope("read")
def list_sources(request, namespace: str = Query("", max_length=MAX_TEXT), format: str = Query("claude-code",
                 max_length=40), prefix: str = Query("", max_length=MAX_TEXT),
                 key: str | None = Query(None, max_length=MAX_TEXT), sessions: bool = Query(False)):
    """Imported streams of one namespace (a SessionStore's project), newest first, each
    with `updated_ms` (epoch ms of its last stored batch), `entries` (how many) and
    `summary` ({"data", "mtime"} or null). `prefix` "SESSION/" lists a session's
    subagent transcripts; `key` one stream; `sessions=true` only main sessions (keys
    without "/"). Needs `read`."""
    _check_nul(format=format)
    namespace, prefix = _ids(namespace=namespace, prefix=prefix)
    items = entry_streams.list_streams(format=format, namespace=namespace, prefix=prefix,
                                       key=_ids(key=key)[0] if key is not None else None, sessions_only=sessions)
    # Not paged: at most entry_streams.LIST_MAX streams, narrowed by `prefix` or `key`.
    return keyset.listing(items, None)


def _session_body(request) -> tuple[str, str, int | None]:
    body = read_json(request)
    unknown = sorted(set(body) - {"namespace", "session_id", "expected_entries"})
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}", field=unknown[0])
    expected = body.get("expected_entries")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int) or expected < 0):
        raise InvalidInput("expected_entries must be a whole number, 0 or more", field="expected_entries")
    return _text(body, "namespace"), _text(body, "session_id"), expected


@router.get("/imports/sessions/items", operation_id="session_items", summary="A session's active view as items",
            response={200: SessionItems})
@scope("read")
def session_items(request, namespace: str = Query("", max_length=MAX_TEXT),
                  session_id: str = Query(..., max_length=MAX_TEXT), limit: int | None = Query(None, ge=0)):
    """The OpenAI Agents SDK's `get_items`: the head conversation's active view as Responses
    items (with a checkpoint: its summary first, then the items after it), the latest
    `limit` of them when given; `stream` says which generation is the head and how many
    items it holds. Needs `read`."""
    namespace, session_id = _ids(namespace=namespace, session_id=session_id)
    items, stream = sessions.active_items(namespace=namespace, session_id=session_id, limit=limit)
    # Not paged: the SDK asks for the whole view or its latest `limit` items.
    return keyset.listing(items, None, stream=stream.as_dict())


@router.post("/imports/sessions/pop", operation_id="session_pop", summary="Take a session's last item back",
             response={200: PoppedOut}, openapi_extra=SESSION_BODY)
@scope("write")
def session_pop(request):
    """The OpenAI Agents SDK's `pop_item`, destroying nothing: a retraction record joins the
    session's stream and a note "retracted by pop_item" its conversation; the session's
    items leave the item out. Answers the item (null when the session is empty). With
    `expected_entries`, only if the head still holds that many items (409 `entries_conflict`).
    Needs `write`."""
    namespace, session_id, expected = _session_body(request)
    item, stream = sessions.pop_item(namespace=namespace, session_id=session_id, expected_entries=expected,
                                     actor=actor_of(request))
    return {"item": item, "stream": stream.as_dict()}


@router.post("/imports/sessions/clear", operation_id="session_clear", summary="Start a session's next conversation",
             response={200: ClearedOut}, openapi_extra=SESSION_BODY)
@scope("write")
def session_clear(request):
    """The OpenAI Agents SDK's `clear_session`, destroying nothing: the session continues in a
    new, empty conversation, a child of the one it leaves (which keeps every row).
    Needs `write`."""
    namespace, session_id, _ = _session_body(request)
    stream = sessions.clear_session(namespace=namespace, session_id=session_id, actor=actor_of(request))
    return {"stream": stream.as_dict()}


class LookupPage(ListOut):
    items: list[ConversationSummary]


@router.get(
    "/lookup",
    operation_id="lookup_conversations",
    summary="Find conversations by a framework's id",
    response={200: LookupPage, **errors_doc(422)},
    openapi_extra=example_doc(200, {"items": [EXAMPLE_SUMMARY], "next": None, "next_url": None}),
)
@scope("read")
def lookup_conversations(
    request,
    framework: str = Query(..., max_length=40, description=f"One of {', '.join(lookup.FRAMEWORKS)}.",
                           example="langgraph"),
    id: str = Query(..., max_length=lookup.ID_MAX, description=(
        "The framework's own id: a LangGraph thread id, a Claude or OpenAI Agents session id, an OTel "
        "gen_ai.conversation.id or trace id, a Pydantic AI history id, a LangChain session id."), example="t-42"),
    checkpoint_ns: str | None = Query(None, max_length=255, description=(
        "LangGraph: the checkpoint namespace (\"\" the root graph; omitted: the root and every subgraph).")),
):
    """The conversations a framework knows by this id, the one where it stands now first (a
    LangGraph thread after time travel: the fork its latest checkpoint is in; an OpenAI Agents
    session after clear_session: its live generation). Needs `read`."""
    found = lookup.find(framework, id, checkpoint_ns=checkpoint_ns)
    return keyset.listing([conversation_summary(c, request) for c in found], None, None)
