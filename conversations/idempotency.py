"""A retry is always safe: `Idempotency-Key` on every POST under /api/v1/.

An agent whose request timed out cannot know whether it was written. It sends
the request again with the same `Idempotency-Key` header, and:

- the same key from the same caller (API key or person) in the same project, within
  MEMORYUI_IDEMPOTENCY_HOURS, with the same method, path (query included) and
  body gets the first answer again, status and body, with
  `Idempotent-Replayed: true`; nothing is written again;
- the same key with a different request → 422 `idempotency_key_reused`.

How the key is kept with its write: `IdempotencyMiddleware` opens one
transaction around the whole handler and the insert of the key row, so the
store's transactions nest inside it (savepoints) and both commit together or not
at all; a crash leaves neither or both. Two requests racing with one key: on
SQLite the IMMEDIATE transactions queue, so the second one finds the first's row
before it starts; on PostgreSQL the second one's insert waits on the unique index
until the first commits, finds the row, rolls its own work back and replays the
first answer. Exactly one effect either way.

Only 2xx answers are kept: a 4xx or 5xx wrote nothing (the transaction rolls
back), so sending it again simply runs it again. (A streamed answer cannot be
stored; no POST streams today, and one that did would commit unguarded.)

Two operations cannot run inside one transaction: a real prune and a real
deletion request run VACUUM, and work in many short transactions so agents keep
writing meanwhile (RUN_OUTSIDE_TRANSACTION). For those the key is claimed first
(a row in its own transaction), the operation runs, and the answer is stored
after it; the same key meanwhile answers 409 `idempotency_key_in_progress`. A
claim left by a process that died is taken over after CLAIM_STALE_SECONDS; both
operations are safe to run again (a prune resumes, a deletion request deletes
what is left).

An import (`POST /api/v1/imports`) writes in many short transactions too, so that
agents' appends never wait for the whole file (imports/writer.py); holding one
transaction around it would hold SQLite's write lock for all of it. Its key is
claimed the same way, and the handler records the answer inside the import's last
transaction (`settle`), the one that publishes what it wrote: the key and the
import's final state commit together, and a crash before that leaves an unpublished
import (removed) and a claim (taken over once stale; importing again is safe).
Meanwhile the same key answers 409 `idempotency_key_in_progress` with Retry-After.

Kept: a hash of the request, never the request; the answer exactly as it was
sent. Rows expire with the prune run (`delete_expired`), and erasure deletes
the rows that reference an erased conversation or subject (`forget`).
"""

import hashlib
import json
import re
import uuid
from datetime import timedelta

from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.http import JsonResponse
from django.http.request import RawPostDataException
from django.utils import timezone

from . import projects
from .apiauth import authenticate_bearer
from .bodies import digest_of
from .errors import BodyTooLarge
from .http import error_json
from .models import ApiKey, IdempotencyKey, key_lifetime
from .rows import fetch_first, sqlite_form
from .subjects import normalize_subject

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_MAX = 255
API_PREFIX = "/api/v1/"
# Operations that must run outside a transaction (VACUUM): their key is claimed first.
RUN_OUTSIDE_TRANSACTION = frozenset({"/api/v1/prune", "/api/v1/deletion-requests"})
# Writes in short transactions whose handler records the answer in the last one (`settle`).
SETTLED_BY_HANDLER = frozenset({"/api/v1/imports"})
# Answers holding a secret shown once (a new API key's): the key row is kept, the answer is
# not; the same request sent again learns which key the first one made, never its secret.
SECRET_ANSWERS = frozenset({"/api/v1/keys"})
CLAIM_STALE_SECONDS = 15 * 60
# Rows per DELETE when expired keys are removed: each batch is one short transaction.
DELETE_BATCH = 5000
ID_CHUNK = 500

_VISIBLE_ASCII = re.compile(rf"[\x21-\x7e]{{1,{KEY_MAX}}}")
_CONVERSATION_PATH = re.compile(r"^/api/v1/conversations/([0-9a-fA-F-]{32,36})(?:/|$)")
_table = IdempotencyKey._meta.db_table


class _KeyError(Exception):
    def __init__(self, status: int, code: str, message: str, retry_after: int | None = None):
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after

    def response(self) -> JsonResponse:
        return error_json(self.status, self.message, code=self.code, field=HEADER, retry_after=self.retry_after)


def parse_key(value: str | None) -> str | None:
    """The key from the header; None when there is none. Raises _KeyError when malformed."""
    if value is None:
        return None
    if not _VISIBLE_ASCII.fullmatch(value):
        raise _KeyError(422, "invalid_input",
                        f"{HEADER} must be 1 to {KEY_MAX} visible ASCII characters (no spaces); "
                        f"got {len(value)} characters")
    return value


def caller_of(request) -> str | None:
    """Whose key space this request writes in: its API key, else the logged-in person; and,
    for a caller that acts in several projects (an all-projects key, a person), the project
    it acts in, so that the same key sent in two projects is two writes and never answers
    one project's request with another's (a key of one project has that project's only)."""
    header = request.headers.get("Authorization", "")
    if header[:7].lower() == "bearer ":
        key = authenticate_bearer(request, header[7:].strip())
        if isinstance(key, ApiKey):
            return f"key:{key.pk}" if key.project_id is not None else f"key:{key.pk}{_in_project()}"
    # No valid key: the API then admits a logged-in person by their session, if any.
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}{_in_project()}"
    return None


def _in_project() -> str:
    # `default` (and every project at once) adds nothing: the keys written before projects
    # existed, all in `default`, stay the same callers' keys.
    scope = projects.current()
    return f"@{scope.project_id}" if scope.one and scope.project_id != projects.DEFAULT_PROJECT_ID else ""


def fingerprint(request) -> str:
    digest = hashlib.sha256()
    for part in (request.method.encode(), request.get_full_path().encode()):
        digest.update(part)
        digest.update(b"\n")
    digest_of(request, digest)  # an import's body from its spool, never held whole (bodies.py)
    return digest.hexdigest()


# -- the middleware -------------------------------------------------------------------


class IdempotencyMiddleware:
    """Runs every keyed POST under /api/v1/ at most once per caller and key (module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method != "POST" or not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        try:
            key = parse_key(request.headers.get(HEADER))
        except _KeyError as exc:
            return exc.response()
        if key is None:
            return self.get_response(request)
        caller = caller_of(request)
        if caller is None:  # not authenticated: the API answers 401 and writes nothing
            return self.get_response(request)
        try:
            sent = fingerprint(request)
        except (RequestDataTooBig, RawPostDataException, BodyTooLarge):  # the API answers 413 / 415
            return self.get_response(request)
        try:
            if request.path in RUN_OUTSIDE_TRANSACTION or request.path in SETTLED_BY_HANDLER:
                return self._claimed(request, caller, key, sent)
            return self._atomic(request, caller, key, sent)
        except _KeyError as exc:
            return exc.response()

    def _atomic(self, request, caller, key, sent):
        found = _find(caller, key)
        if found is not None:
            return _replay(found, sent)
        defer = getattr(connection, "defer_next_begin", None)
        if defer is not None and not connection.in_atomic_block:
            defer()  # SQLite: take the write lock at the handler's first statement, not before its parsing
        with transaction.atomic():
            # Any error answer rolls this transaction back whole, so the store's append needs
            # no savepoint of its own inside it (store._write_rows).
            connection.request_transaction = True
            try:
                response = self.get_response(request)
            finally:
                connection.request_transaction = False
            if not 200 <= response.status_code < 300:
                transaction.set_rollback(True)
                return response
            if response.streaming:  # an answer that cannot be stored: the write stands, unguarded
                return response
            kept = _insert(caller, key, sent, response, request.path)
            if not kept:
                # Another request with this key committed first (PostgreSQL waited for
                # it on the unique index): undo this one's work, answer as that one did.
                transaction.set_rollback(True)
        if kept:
            return response
        return _replay(_find(caller, key), sent)

    def _claimed(self, request, caller, key, sent):
        found = _find(caller, key)
        if found is not None and not _stale_claim(found):
            return _replay(found, sent)
        with transaction.atomic():
            if found is not None:  # a claim left by a process that died: take it over
                IdempotencyKey.objects.filter(pk=found.pk, status=0).delete()
            if not _insert(caller, key, sent, None, request.path):
                raise _KeyError(409, "idempotency_key_in_progress",
                                "a request with this key is being processed; retry in a moment", retry_after=2)
        response = None
        request.idempotency_claim = (caller, key)
        try:
            response = self.get_response(request)
        finally:
            # A claim the handler settled already (status set) is left as it is.
            with transaction.atomic():
                claim = IdempotencyKey.objects.filter(caller=caller, key=key, status=0)
                if response is not None and _keepable(response):
                    claim.update(**_answer(response, request.path))
                else:
                    claim.delete()
        return response


def settle(request, response) -> None:
    """Record the answer to a claimed key (an import's): the handler calls this inside the
    write's last transaction, so the key is kept exactly when the write commits."""
    claim = getattr(request, "idempotency_claim", None)
    if claim is None or not _keepable(response):
        return
    caller, key = claim
    IdempotencyKey.objects.filter(caller=caller, key=key, status=0).update(**_answer(response, request.path))


def _keepable(response) -> bool:
    return 200 <= response.status_code < 300 and not response.streaming


# Public, as INSERT_KEY below: bench/w8_http.py runs a keyed append's statements alone.
FIND_KEY = f"SELECT id FROM {_table} WHERE caller = %s AND key = %s"
sqlite_form(FIND_KEY)


def _find(caller: str, key: str):
    # Every keyed write runs this first, and almost always finds nothing: one plain
    # statement, and the ORM only for a key that is there.
    found = fetch_first(FIND_KEY, [caller, key])
    if found is None:
        return None
    row = IdempotencyKey.objects.filter(pk=found[0]).first()
    if row is not None and row.created_at < timezone.now() - key_lifetime():
        IdempotencyKey.objects.filter(pk=row.pk, created_at=row.created_at).delete()
        return None
    return row


def _stale_claim(row) -> bool:
    return row.status == 0 and row.created_at < timezone.now() - timedelta(seconds=CLAIM_STALE_SECONDS)


def _replay(row, sent: str):
    if row is None:  # expired between two reads: vanishingly rare, and safe to say so
        raise _KeyError(409, "idempotency_key_in_progress", "the key changed state meanwhile; retry", retry_after=1)
    if row.fingerprint != sent:
        raise _KeyError(422, "idempotency_key_reused",
                        f"this {HEADER} was used for a different request (method, path or body) "
                        f"within the last {_hours()}; use a new key for a new request")
    if row.status == 0:
        raise _KeyError(409, "idempotency_key_in_progress",
                        "a request with this key is being processed; retry in a moment", retry_after=2)
    response = JsonResponse({}, status=row.status)
    response.content = row.body.encode("utf-8")
    response["Content-Type"] = row.content_type or "application/json"
    response[REPLAYED_HEADER] = "true"
    return response


def _hours() -> str:
    hours = key_lifetime().total_seconds() / 3600
    return f"{hours:g} hours"


def _secret_withheld(response) -> JsonResponse:
    try:
        made = json.loads(response.content)
    except ValueError:
        made = {}
    return error_json(409, f"the first request with this {HEADER} created the API key {made.get('id')} "
                           f"({str(made.get('name', ''))[:200]!r}); its secret was shown once, in that answer, and "
                           "is not kept: use it, or revoke that key and create another",
                      code="idempotency_secret_not_kept", field=HEADER)


def _answer(response, path: str) -> dict:
    """The columns describing an answer: the body as sent, and what erasure looks for."""
    if path in SECRET_ANSWERS and response.status_code == 201:
        response = _secret_withheld(response)
    try:
        body = response.content.decode("utf-8")
    except UnicodeDecodeError:
        body = response.content.decode("latin-1")
    conversation_id, subject = None, ""
    match = _CONVERSATION_PATH.match(path)
    data = None
    # The body is parsed only when something is to be found in it (not for an append's answer).
    if body.startswith("{") and (match is None or '"subject"' in body):
        try:
            data = json.loads(body)
        except ValueError:
            data = None
    if match:
        conversation_id = _uuid(match.group(1))
    elif isinstance(data, dict) and path.rstrip("/") == "/api/v1/conversations":
        conversation_id = _uuid(data.get("id"))
    if isinstance(data, dict):
        if conversation_id is None and isinstance(data.get("source"), dict):
            conversation_id = _uuid(data["source"].get("conversation_id"))
        if isinstance(data.get("subject"), str):
            subject = normalize_subject(data["subject"])
    return {
        "status": response.status_code,
        "content_type": response.get("Content-Type", "")[:100],
        "body": body,
        "conversation_id": conversation_id,
        "subject_norm": subject[:1200],
    }


def _uuid(value):
    try:
        return uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None


# A row back when the key was inserted, none when the caller already held it.
INSERT_KEY = (
    f"INSERT INTO {_table} (caller, key, fingerprint, status, content_type, body, conversation_id, "
    "subject_norm, created_at, project_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (caller, key) DO NOTHING RETURNING id"
)
sqlite_form(INSERT_KEY)


def _insert(caller: str, key: str, sent: str, response, path: str) -> bool:
    """Insert the key row; False when the caller already holds this key (a racing request)."""
    answer = _answer(response, path) if response is not None else {
        "status": 0, "content_type": "", "body": "", "conversation_id": None, "subject_norm": ""}
    field = IdempotencyKey._meta.get_field
    values = [
        caller, key, sent, answer["status"], answer["content_type"], answer["body"],
        field("conversation_id").get_db_prep_value(answer["conversation_id"], connection),
        answer["subject_norm"], connection.ops.adapt_datetimefield_value(timezone.now()),
        projects.project_of_new_row(),
    ]
    try:
        return fetch_first(INSERT_KEY, values) is not None
    except IntegrityError:  # pragma: no cover - ON CONFLICT covers the unique key
        return False


# -- expiry and erasure ---------------------------------------------------------------


def delete_expired(*, now=None, batch_size: int = DELETE_BATCH) -> int:
    """Delete keys older than MEMORYUI_IDEMPOTENCY_HOURS, `batch_size` rows per short transaction.

    Called at the end of every prune run (conversations/retention/pruning.py)."""
    cutoff = connection.ops.adapt_datetimefield_value((now or timezone.now()) - key_lifetime())
    total = 0
    while True:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    f"DELETE FROM {_table} WHERE id IN (SELECT id FROM {_table} WHERE created_at < %s "
                    "ORDER BY created_at LIMIT %s)",
                    [cutoff, batch_size],
                )
                n = cursor.rowcount
        total += n
        if n < batch_size:
            return total


def forget(*, conversation_ids=(), subject: str = "") -> int:
    """Delete the keys whose stored answer references these conversations or this subject.

    Runs inside erasure's transaction. A key references a conversation when it was
    written to it or created it, or when its answer names the conversation's id (a
    fork's lineage, a deletion preview); it references a subject when its answer
    is about that subject (a conversation, a fact). Only the keys of the request's project:
    another project's answers about a subject of the same name are that project's to erase."""
    ids = [str(i) for i in conversation_ids]
    total = 0
    norm = normalize_subject(subject) if subject else ""
    # Only the keys of the projects the deletion acts in: another project's answers stay.
    keys = projects.fence(IdempotencyKey.objects.all())
    if norm:
        total += keys.filter(subject_norm=norm).delete()[0]
    for start in range(0, len(ids), ID_CHUNK):
        chunk = ids[start:start + ID_CHUNK]
        mentions = Q(conversation_id__in=[uuid.UUID(i) for i in chunk])
        for cid in chunk:
            mentions |= Q(body__contains=cid)
        total += keys.filter(mentions).delete()[0]
    return total


def stored_subjects() -> set[str]:
    """Every subject (normal form) a stored answer is about: what a restore hashes to find the
    subjects an erasure journal names (retention/reapply.py)."""
    return set(IdempotencyKey.objects.exclude(subject_norm="").values_list("subject_norm", flat=True).distinct())


# -- documentation --------------------------------------------------------------------

HEADER_DOC = {
    "name": HEADER,
    "in": "header",
    "required": False,
    "description": (
        "Makes a retry safe. The same key from the same caller within MEMORYUI_IDEMPOTENCY_HOURS "
        "(default 24) with the same method, path and body gets the first answer again (status and body, "
        "with `Idempotent-Replayed: true`) and writes nothing; the same key with a different request is "
        "refused with 422 `idempotency_key_reused`. Only 2xx answers are kept. Reuse the key for every "
        "retry of one write, and make a new one for the next write."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": KEY_MAX, "pattern": "^[!-~]+$"},
    "example": "step-7f3a9c-append-12",
}
REPLAYED_DOC = {
    "description": "`true` when this is the stored answer to an earlier request with the same key.",
    "schema": {"type": "string", "enum": ["true"]},
}


def document(schema: dict) -> dict:
    """Add the header to every POST operation of an OpenAPI schema, and the replay header to its 2xx answers."""
    for item in schema.get("paths", {}).values():
        operation = item.get("post")
        if operation is None:
            continue
        params = operation.setdefault("parameters", [])
        if not any(p.get("name") == HEADER for p in params):
            params.append(dict(HEADER_DOC))
        for status, response in operation.get("responses", {}).items():
            if str(status).startswith("2"):
                response.setdefault("headers", {})[REPLAYED_HEADER] = dict(REPLAYED_DOC)
    return schema
