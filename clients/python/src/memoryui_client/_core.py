"""What the sync and async clients share: the operations as request descriptions, and the retry policy.

Each operation of the API is a function returning a `Call` (method, path, query,
body, whether it writes, how to read the answer). `Memoryui` and `AsyncMemoryui`
only differ in how they send a Call, so both have the same methods with the same
behaviour, and an adapter (framework integrations) can build on `Call` too.
"""

import asyncio
import contextlib
import email.utils
import json
import math
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .errors import Unencodable

# The statuses worth another try: the server was busy or a proxy could not reach it.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"


@dataclass(frozen=True)
class Retries:
    """How a request is tried again: on connection errors, on 429, 502, 503, 504, and on a
    409 that carries Retry-After (a conflict that passes: an import of the same source
    in progress, a request with the same Idempotency-Key still running).

    Never on another 4xx. Waits `backoff · 2^(n-1)` seconds (with jitter, at most
    `max_backoff`) before try n+1, or what the server's Retry-After says (at most
    `max_retry_after`); no retry is made whose wait would take the call's waiting past
    `deadline` seconds. A write keeps its Idempotency-Key across all its tries.
    """

    attempts: int = 5
    backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    deadline: float = 120.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        waited = parse_retry_after(retry_after)
        if waited is not None:
            return min(waited, self.max_retry_after)
        base = min(self.max_backoff, self.backoff * (2 ** (attempt - 1)))
        return base * (0.5 + random.random() / 2)

    def wait_before_retry(self, attempt: int, status: int, retry_after: str | None, waited: float) -> float | None:
        """Seconds to wait before trying an answered request again; None: do not retry it."""
        if attempt >= self.attempts or not retryable(status, retry_after):
            return None
        wait = self.delay(attempt, retry_after)
        return wait if waited + wait <= self.deadline else None


def retryable(status: int, retry_after: str | None) -> bool:
    return status in RETRY_STATUSES or (status == 409 and parse_retry_after(retry_after) is not None)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def encode_json(value: Any, *, where: str = "") -> bytes:
    """A request body as UTF-8 JSON, or `Unencodable` naming the first value that has no
    JSON form, so the caller gets the client's own error before anything is sent (not a
    TypeError from json or a UnicodeEncodeError from the transport). `where`: the path of
    `value` in the body, when it is a part of one."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        field, problem = _first_unencodable(value, where, set()) or (where, "cannot be encoded as JSON")
        raise Unencodable(f"{field or 'the body'} {problem}; nothing was sent", code="unencodable",
                          field=field or None) from None


def _first_unencodable(value: Any, where: str, seen: set) -> tuple[str, str] | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where, "holds an unpaired surrogate, which is not valid Unicode"
        return None
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (where, f"is {value}, which JSON has no form for")
    if isinstance(value, (dict, list, tuple)):
        if id(value) in seen:
            return where, "contains itself"
        seen.add(id(value))
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in pairs:
            # A key with a lone surrogate is named escaped, so the error itself can be printed.
            name = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
            path = f"{where}.{name}" if where else name
            if isinstance(value, dict):
                if not isinstance(key, (str, int, float, bool)) and key is not None:
                    return where, f"has a key of type {type(key).__name__}, which JSON has no form for"
                found = _first_unencodable(key, path, seen) if isinstance(key, str) else None
                if found:
                    return found[0], "has a key that holds an unpaired surrogate, which is not valid Unicode"
            found = _first_unencodable(item, path, seen)
            if found:
                return found
        seen.discard(id(value))
        return None
    return where, f"is a {type(value).__name__}, which is not JSON"


def new_idempotency_key() -> str:
    return f"mui-{uuid.uuid4()}"


RAW_TYPE = "application/octet-stream"
READ = 64 * 1024


@dataclass(frozen=True)
class Upload:
    """A file sent as the request body itself: `data`, or the file at `path`, read a block at
    a time on each try (a retry sends it again from its start), never held whole."""

    data: bytes | None = None
    path: str | None = None
    content_type: str = RAW_TYPE

    def size(self) -> int:
        return len(self.data) if self.data is not None else os.path.getsize(self.path)

    @contextlib.contextmanager
    def opened(self) -> Iterator[Any]:
        if self.data is not None:
            yield self.data
        else:
            with open(self.path, "rb") as file:
                yield file

    async def blocks(self) -> AsyncIterator[bytes]:
        """The body for an async client, which takes no blocking file: read in a worker thread."""
        if self.data is not None:
            yield self.data
            return
        with open(self.path, "rb") as file:
            while block := await asyncio.to_thread(file.read, READ):
                yield block


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    # Writes carry an Idempotency-Key, made once per call and reused by its retries.
    idempotency_key: str | None = None
    # How to read a successful answer (an httpx.Response) into what the method returns.
    parse: Callable[[Any], Any] = lambda response: response.json()
    # A file as the body itself, instead of `json`.
    upload: Upload | None = None

    def headers(self) -> dict[str, str]:
        headers = {IDEMPOTENCY_HEADER: self.idempotency_key} if self.idempotency_key else {}
        if self.json is not None:
            headers["Content-Type"] = "application/json"
        if self.upload is not None:
            # Its length up front: a server behind WSGI reads no chunked body.
            headers.update({"Content-Type": self.upload.content_type, "Content-Length": str(self.upload.size())})
        return headers

    def body(self) -> bytes | None:
        """The JSON body, encoded once for all tries (Unencodable before anything is sent)."""
        return None if self.json is None else encode_json(self.json)


def _id(conversation_id) -> str:
    return quote(str(conversation_id), safe="")


def _clean(params: dict) -> dict:
    return {k: v for k, v in params.items() if v is not None}


def _write(method: str, path: str, body, idempotency_key: str | None, **kw) -> Call:
    return Call(method, path, json=body, idempotency_key=idempotency_key or new_idempotency_key(), **kw)


# -- the operations -----------------------------------------------------------------------


def create(*, title=None, subject=None, meta=None, namespace=None, external_id=None, idempotency_key=None) -> Call:
    body = _clean({"title": title, "subject": subject, "meta": meta, "namespace": namespace,
                   "external_id": external_id})
    return _write("POST", "/conversations", body, idempotency_key)


def get_or_create(*, external_id, namespace="", title=None, subject=None, meta=None, idempotency_key=None) -> Call:
    call = create(title=title, subject=subject, meta=meta, namespace=namespace, external_id=external_id,
                  idempotency_key=idempotency_key)
    call.parse = lambda response: (response.json(), response.status_code == 201)
    return call


def find(*, external_id, namespace="") -> Call:
    def first(response):
        items = response.json()["items"]
        return items[0] if items else None

    return Call("GET", "/conversations", params={"namespace": namespace, "external_id": external_id}, parse=first)


def lookup(*, framework, id, checkpoint_ns=None) -> Call:
    return Call("GET", "/lookup", params=_clean({"framework": framework, "id": id, "checkpoint_ns": checkpoint_ns}),
                parse=lambda response: response.json()["items"])


def list_page(*, cursor=None, limit=None, subject=None, namespace=None, order=None) -> Call:
    return Call("GET", "/conversations", params=_clean({"cursor": cursor, "limit": limit, "subject": subject,
                                                         "namespace": namespace, "order": order}))


def get(conversation_id) -> Call:
    return Call("GET", f"/conversations/{_id(conversation_id)}")


def delete(conversation_id) -> Call:
    return Call("DELETE", f"/conversations/{_id(conversation_id)}")


def append(conversation_id, message: dict, *, expected_position=None, idempotency_key=None) -> Call:
    call = _write("POST", f"/conversations/{_id(conversation_id)}/messages", message, idempotency_key)
    call.params = _clean({"expected_position": expected_position})
    return call


def append_batch(conversation_id, messages: list, *, expected_position=None, idempotency_key=None) -> Call:
    call = _write("POST", f"/conversations/{_id(conversation_id)}/messages/batch", {"messages": list(messages)},
                  idempotency_key)
    call.params = _clean({"expected_position": expected_position})
    return call


def messages_page(conversation_id, *, after=-1, cursor=None, limit=None) -> Call:
    # The first page starts after `after`; later ones pass the previous page's `next` as `cursor`.
    query = {"cursor": cursor} if cursor else {"after": after}
    return Call("GET", f"/conversations/{_id(conversation_id)}/messages", params=_clean({**query, "limit": limit}))


def active_page(conversation_id, *, cursor=None) -> Call:
    return Call("GET", f"/conversations/{_id(conversation_id)}/active", params=_clean({"cursor": cursor}))


def checkpoint(conversation_id, *, position: int, summary: str, idempotency_key=None) -> Call:
    return _write("POST", f"/conversations/{_id(conversation_id)}/checkpoints",
                  {"position": position, "summary": summary}, idempotency_key)


def fork(conversation_id, *, position: int, title=None, external_id=None, idempotency_key=None) -> Call:
    return _write("POST", f"/conversations/{_id(conversation_id)}/forks",
                  _clean({"position": position, "title": title, "external_id": external_id}), idempotency_key)


def export(conversation_id, *, format="jsonl") -> Call:
    return Call("GET", f"/conversations/{_id(conversation_id)}/export", params={"format": format})


def propose_fact(*, subject, text, importance, category=None, source_conversation_id=None, source_position=None,
                 valid_from=None, expires_at=None, retention_days=None, idempotency_key=None) -> Call:
    body = _clean({"subject": subject, "text": text, "importance": importance, "category": category,
                   "source_conversation_id": str(source_conversation_id) if source_conversation_id else None,
                   "source_position": source_position, "valid_from": valid_from, "expires_at": expires_at,
                   "retention_days": retention_days})
    return _write("POST", "/facts", body, idempotency_key)


def recall(*, subject, query="", limit=10) -> Call:
    return Call("GET", "/facts/recall", params={"subject": subject, "query": query, "limit": limit},
                parse=lambda response: response.json()["items"])


# task state, the actions ledger, workspace snapshots


def state(conversation_id) -> Call:
    return Call("GET", f"/conversations/{_id(conversation_id)}/state")


def set_state(conversation_id, *, state: dict, expected_version: int) -> Call:
    # No Idempotency-Key: a PUT is its own retry (the state it already has is a no-op).
    return Call("PUT", f"/conversations/{_id(conversation_id)}/state",
                json={"state": state, "expected_version": expected_version})


def record_action(conversation_id, *, key: str, name: str, arguments=None, result=None, status="performed",
                  idempotency_key=None) -> Call:
    # `key` is the action's business key, in the body; `idempotency_key` is the request's header.
    return _write("POST", f"/conversations/{_id(conversation_id)}/actions",
                  {"idempotency_key": key, "name": name, "arguments": arguments, "result": result,
                   "status": status}, idempotency_key)


def find_action(*, key: str, namespace=None, conversation_id=None) -> Call:
    return Call("GET", "/actions", params=_clean({"idempotency_key": key, "namespace": namespace,
                                                  "conversation_id": str(conversation_id) if conversation_id
                                                  else None}))


def record_snapshot(conversation_id, record: dict, idempotency_key=None) -> Call:
    return _write("POST", f"/conversations/{_id(conversation_id)}/snapshots", record, idempotency_key)


IMPORT_OPTIONS = ("format", "namespace", "subject", "dry_run", "allow_empty", "pin_older_than_retention")


def import_file(source, *, content_type=None, idempotency_key=None, **options) -> Call:
    """POST /imports with the file itself as the body, its options in the query string."""
    unknown = sorted(set(options) - set(IMPORT_OPTIONS))
    if unknown:
        raise TypeError(f"import_file() got an unexpected option {unknown[0]!r}")
    kind = content_type or RAW_TYPE
    if isinstance(source, (bytes, bytearray, memoryview)):
        upload = Upload(data=bytes(source), content_type=kind)
    elif isinstance(source, (str, os.PathLike)):
        upload = Upload(path=os.fspath(source), content_type=kind)
    else:
        raise TypeError("import_file() takes a path or bytes, not " + type(source).__name__)
    return Call("POST", "/imports", params=_clean(options), upload=upload,
                idempotency_key=idempotency_key or new_idempotency_key())


def merge_active_pages(first: dict, more: list[dict]) -> dict:
    """One active view from its pages: checkpoint and handoff of the first, every item in order."""
    view = dict(first)
    view["items"] = list(first["items"])
    view["skipped"] = list(first.get("skipped") or [])
    for page in more:
        view["items"] += page["items"]
        view["skipped"] += page.get("skipped") or []
    view["next"] = view["next_url"] = None
    return view
