"""`Memoryui` (sync) and `AsyncMemoryui` (asyncio): the same methods over the JSON API.

    from memoryui_client import Memoryui

    with Memoryui("http://127.0.0.1:8000", api_key="mui_…") as mui:
        conversation, created = mui.get_or_create(namespace="my-agent", external_id=session_id)
        mui.append(conversation["id"], {"kind": "user", "content": "Where is my refund?"})
        view = mui.active(conversation["id"])

A key of one project acts in its project: nothing to pass. An operator's all-projects key
acts in every project unless `project` (or MEMORYUI_PROJECT) names one, by its slug:

    Memoryui(url, api_key=ops_key, project="support")   # sent as the X-Memoryui-Project header

Answers are the API's JSON as dicts. Errors are raised as the typed exceptions of
`memoryui_client.errors`. Every write carries an Idempotency-Key (pass your own,
derived from business values, to make a restarted process's retry safe too); it is
reused by that write's retries, which happen on connection errors, on 429, 502,
503, 504, and on a 409 carrying Retry-After (an import in progress), never on another 4xx.
"""

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Iterator

import httpx

from . import _core, workspace
from ._core import Call, Retries
from .errors import TransportError, error_from_response

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
USER_AGENT = "memoryui-client/0.1"
# The project a request acts in, by its slug: needed only with an all-projects key (a key of
# one project acts in its own; naming another answers 404). The server's answer to a request
# that acted in every project carries it too, as "*".
PROJECT_HEADER = "X-Memoryui-Project"
EVERY_PROJECT = "*"


def _base_url(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/api/v1") else url + "/api/v1"


def _headers(api_key: str | None, project: str | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if project:
        headers[PROJECT_HEADER] = project
    return headers


def project_of(project: str | None) -> str | None:
    """The project slug a client sends: the one given, else MEMORYUI_PROJECT; None for neither."""
    named = project if project is not None else os.environ.get("MEMORYUI_PROJECT", "")
    return named.strip() or None


def server_url(url: str | None) -> str:
    """The server to talk to: `url`, else MEMORYUI_URL; never a guess, since a default address would
    send an agent's memory to whatever answers there (or fail far from the cause)."""
    url = (url or "").strip() or (os.environ.get("MEMORYUI_URL") or "").strip()
    if not url:
        raise ValueError("no memoryui server given: pass its URL (Memoryui(\"http://127.0.0.1:8000\")) "
                         "or set MEMORYUI_URL")
    return url


def _unreachable(exc: httpx.TransportError, http, call: Call) -> TransportError:
    """A connection that failed, naming the address it was for (a refused connection says nothing else)."""
    url = str(http.base_url).rstrip("/") + call.path
    return TransportError(f"could not reach memoryui at {url}: {type(exc).__name__}: {exc}", code="transport_error")


def _retry_wait(retries: Retries, attempt: int, response: httpx.Response, waited: float) -> float | None:
    return retries.wait_before_retry(attempt, response.status_code, response.headers.get("Retry-After"), waited)


class _Operations:
    """The methods both clients have; `_run` sends a Call (and is a coroutine in AsyncMemoryui)."""

    def _connect(self, client_class, url: str | None, *, api_key, project, retries, timeout, transport, sleep):
        """Open the httpx client to `url` (or MEMORYUI_URL) with the key (or MEMORYUI_API_KEY),
        in `project` (or MEMORYUI_PROJECT) if one is named."""
        url = server_url(url)
        self.retries = retries or Retries()
        self.project = project_of(project)
        self._sleep = sleep
        self._http = client_class(base_url=_base_url(url), headers=_headers(api_key or os.environ.get(
            "MEMORYUI_API_KEY"), self.project), timeout=timeout, transport=transport)

    def _run(self, call: Call):  # pragma: no cover - implemented by each client
        raise NotImplementedError

    # conversations
    def create(self, *, title: str | None = None, subject: str | None = None, meta: dict | None = None,
               namespace: str | None = None, external_id: str | None = None, idempotency_key: str | None = None):
        """A new conversation (with `external_id`: the existing one if the namespace has it)."""
        return self._run(_core.create(title=title, subject=subject, meta=meta, namespace=namespace,
                                      external_id=external_id, idempotency_key=idempotency_key))

    def get_or_create(self, *, external_id: str, namespace: str = "", title: str | None = None,
                      subject: str | None = None, meta: dict | None = None, idempotency_key: str | None = None):
        """(conversation, created): the conversation with this external id, created when there is none."""
        return self._run(_core.get_or_create(external_id=external_id, namespace=namespace, title=title,
                                             subject=subject, meta=meta, idempotency_key=idempotency_key))

    def find(self, *, external_id: str, namespace: str = ""):
        """The conversation with this external id, or None."""
        return self._run(_core.find(external_id=external_id, namespace=namespace))

    def lookup(self, framework: str, id: str, *, checkpoint_ns: str | None = None) -> list[dict]:
        """The conversations a framework knows by its own id, where it stands now first:
        `framework` "langgraph" (a thread id; `checkpoint_ns` "" for the root graph, omitted for
        all), "claude" or "openai-agents" (a session id), "otel" (a gen_ai.conversation.id or a
        trace id), "pydantic-ai" (a history id), "langchain" (a session id)."""
        return self._run(_core.lookup(framework=framework, id=id, checkpoint_ns=checkpoint_ns))

    def get(self, conversation_id):
        return self._run(_core.get(conversation_id))

    def delete(self, conversation_id):
        """Delete a conversation (needs the `admin` scope)."""
        return self._run(_core.delete(conversation_id))

    # messages
    def append(self, conversation_id, message: dict, *, expected_position: int | None = None,
               idempotency_key: str | None = None):
        """Append one message; returns {"position", "kind"}."""
        return self._run(_core.append(conversation_id, message, expected_position=expected_position,
                                      idempotency_key=idempotency_key))

    def append_batch(self, conversation_id, messages: list[dict], *, expected_position: int | None = None,
                     idempotency_key: str | None = None):
        """Append 1..1,000 messages in one transaction; returns {"first_position", "last_position", "count"}."""
        return self._run(_core.append_batch(conversation_id, messages, expected_position=expected_position,
                                            idempotency_key=idempotency_key))

    def checkpoint(self, conversation_id, *, position: int, summary: str, idempotency_key: str | None = None):
        """Fold positions 0..position into `summary` (the active view then starts with it)."""
        return self._run(_core.checkpoint(conversation_id, position=position, summary=summary,
                                          idempotency_key=idempotency_key))

    def fork(self, conversation_id, *, position: int, title: str | None = None, external_id: str | None = None,
             idempotency_key: str | None = None):
        """A new conversation holding copies of positions 0..position."""
        return self._run(_core.fork(conversation_id, position=position, title=title, external_id=external_id,
                                    idempotency_key=idempotency_key))

    # facts
    def propose_fact(self, *, subject: str, text: str, importance: int, idempotency_key: str | None = None, **more):
        """Propose a long-term fact (a person reviews it before it is ever recalled)."""
        return self._run(_core.propose_fact(subject=subject, text=text, importance=importance,
                                            idempotency_key=idempotency_key, **more))

    def recall(self, *, subject: str, query: str = "", limit: int = 10):
        """The best approved facts about a subject: a list of {"fact", "score", "parts"}."""
        return self._run(_core.recall(subject=subject, query=query, limit=limit))


    # imports
    def import_file(self, source, *, format: str | None = None, namespace: str | None = None,
                    subject: str | None = None, dry_run: bool | None = None, allow_empty: bool | None = None,
                    pin_older_than_retention: bool | None = None, content_type: str | None = None,
                    idempotency_key: str | None = None) -> dict:
        """Import a file as it is: `source` a path (streamed from disk a block at a time) or bytes,
        sent as the body itself (a transcript of any format, a zip of a folder, an OpenCode
        SQLite database; `format` "auto" by default finds out). The import's answer:
        {"format", "conversation_id", "created", "messages", "problems", …}. Importing the
        same file again creates nothing; a grown session appends what is new."""
        return self._run(_core.import_file(
            source, format=format, namespace=namespace, subject=subject, dry_run=dry_run, allow_empty=allow_empty,
            pin_older_than_retention=pin_older_than_retention, content_type=content_type,
            idempotency_key=idempotency_key))

    # task state, the actions ledger, workspace snapshots (written by code after a tool returns)
    def state(self, conversation_id):
        """The task state: {"version", "state", "position", "updated_at", "updated_by", …}."""
        return self._run(_core.state(conversation_id))

    def set_state(self, conversation_id, state: dict, *, expected_version: int):
        """Replace the task state if it is still at `expected_version` (else Conflict `version_conflict`).
        Safe to retry: sending the state it already has changes nothing."""
        return self._run(_core.set_state(conversation_id, state=state, expected_version=expected_version))

    def record_action(self, conversation_id, *, key: str, name: str, arguments=None, result=None,
                      status: str = "performed", idempotency_key: str | None = None):
        """Record a side effect under its business `key`: {"status": "performed" | "failed" |
        "already_performed", "action": the entry that counts, "attempt": this one}."""
        return self._run(_core.record_action(conversation_id, key=key, name=name, arguments=arguments, result=result,
                                             status=status, idempotency_key=idempotency_key))

    def find_action(self, key: str, *, namespace: str | None = None, conversation_id=None):
        """Has it been done? {"performed", "action", "entries"} for a business key."""
        return self._run(_core.find_action(key=key, namespace=namespace, conversation_id=conversation_id))

    def record_snapshot(self, conversation_id, snapshot: workspace.Snapshot, *, position: int,
                        idempotency_key: str | None = None):
        """Record a snapshot taken with `workspace.take_snapshot` on the turn at `position`."""
        return self._run(_core.record_snapshot(conversation_id, snapshot.as_record(position),
                                               idempotency_key=idempotency_key))


class Memoryui(_Operations):
    """The synchronous client. `url` is the server (…/api/v1 is added); the key comes from
    `api_key` or MEMORYUI_API_KEY; `project` (or MEMORYUI_PROJECT), a project's slug, is
    where an all-projects key acts (a project's key needs none). `transport` is an httpx
    transport (tests, proxies)."""

    def __init__(self, url: str | None = None, *, api_key: str | None = None, project: str | None = None,
                 retries: Retries | None = None, timeout=DEFAULT_TIMEOUT, transport: httpx.BaseTransport | None = None,
                 sleep=time.sleep):
        self._connect(httpx.Client, url, api_key=api_key, project=project, retries=retries, timeout=timeout,
                      transport=transport, sleep=sleep)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, call: Call) -> httpx.Response:
        """Send a Call with the retry policy; returns the successful response or raises."""
        attempt, waited, body = 0, 0.0, call.body()
        while True:
            attempt += 1
            try:
                with call.upload.opened() if call.upload else contextlib.nullcontext(body) as content:
                    response = self._http.request(call.method, call.path, params=call.params or None,
                                                  content=content, headers=call.headers())
            except httpx.TransportError as exc:
                if attempt >= self.retries.attempts:
                    raise _unreachable(exc, self._http, call) from exc
                self._sleep(self.retries.delay(attempt))
                continue
            if response.is_success:
                return response
            wait = _retry_wait(self.retries, attempt, response, waited)
            if wait is not None:
                self._sleep(wait)
                waited += wait
                continue
            raise error_from_response(response)

    def _run(self, call: Call):
        return call.parse(self.request(call))

    def snapshot_workspace(self, conversation_id, workdir, *, position: int) -> dict | None:
        """Before a turn: snapshot the git working tree at `workdir` under
        refs/memoryui/<conversation>/<position> and record it on that turn. None when
        nothing changed (see memoryui_client.workspace)."""
        snapshot = workspace.take_snapshot(workdir, conversation_id, position)
        return None if snapshot is None else self.record_snapshot(conversation_id, snapshot, position=position)

    def list(self, *, subject: str | None = None, namespace: str | None = None, order: str | None = None,
             page_size: int | None = None) -> Iterator[dict]:
        """Every conversation (newest activity first), following the cursors page by page."""
        cursor = None
        while True:
            page = self._run(_core.list_page(cursor=cursor, limit=page_size, subject=subject, namespace=namespace,
                                             order=order))
            yield from page["items"]
            cursor = page["next"]
            if not cursor:
                return

    def messages(self, conversation_id, *, after: int = -1, page_size: int | None = None) -> Iterator[dict]:
        """The full record from position `after`+1 on: items {"position", "kind", "message", "created_at"}."""
        cursor = None
        while True:
            page = self._run(_core.messages_page(conversation_id, after=after, cursor=cursor, limit=page_size))
            yield from page["items"]
            cursor = page["next"]
            if cursor is None:
                return

    def active(self, conversation_id) -> dict:
        """The active view (what to send the model): {"checkpoint", "handoff", "items", "next_position", …}."""
        first = self._run(_core.active_page(conversation_id))
        pages, page = [], first
        while page["next"] is not None:
            page = self._run(_core.active_page(conversation_id, cursor=page["next"]))
            pages.append(page)
        return _core.merge_active_pages(first, pages)

    def export(self, conversation_id, *, format: str = "jsonl", chunk_size: int = 65536) -> Iterator[bytes]:
        """The conversation as a streamed download (json, jsonl or markdown), chunk by chunk."""
        call = _core.export(conversation_id, format=format)
        attempt, started, waited = 0, False, 0.0
        while True:
            attempt += 1
            try:
                with self._http.stream("GET", call.path, params=call.params) as response:
                    if not response.is_success:
                        response.read()
                        wait = _retry_wait(self.retries, attempt, response, waited)
                        if wait is not None:
                            self._sleep(wait)
                            waited += wait
                            continue
                        raise error_from_response(response)
                    for chunk in response.iter_bytes(chunk_size):
                        started = True
                        yield chunk
                    return
            except httpx.TransportError as exc:  # only before the first byte is a retry clean
                if started or attempt >= self.retries.attempts:
                    raise _unreachable(exc, self._http, call) from exc
                self._sleep(self.retries.delay(attempt))


class AsyncMemoryui(_Operations):
    """The asyncio client: the same methods as `Memoryui`, awaited (iterators are async iterators)."""

    def __init__(self, url: str | None = None, *, api_key: str | None = None, project: str | None = None,
                 retries: Retries | None = None, timeout=DEFAULT_TIMEOUT,
                 transport: httpx.AsyncBaseTransport | None = None, sleep=asyncio.sleep):
        self._connect(httpx.AsyncClient, url, api_key=api_key, project=project, retries=retries, timeout=timeout,
                      transport=transport, sleep=sleep)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def request(self, call: Call) -> httpx.Response:
        attempt, waited, body = 0, 0.0, call.body()
        while True:
            attempt += 1
            try:
                response = await self._http.request(call.method, call.path, params=call.params or None,
                                                    content=call.upload.blocks() if call.upload else body,
                                                    headers=call.headers())
            except httpx.TransportError as exc:
                if attempt >= self.retries.attempts:
                    raise _unreachable(exc, self._http, call) from exc
                await self._sleep(self.retries.delay(attempt))
                continue
            if response.is_success:
                return response
            wait = _retry_wait(self.retries, attempt, response, waited)
            if wait is not None:
                await self._sleep(wait)
                waited += wait
                continue
            raise error_from_response(response)

    async def _run(self, call: Call):
        return call.parse(await self.request(call))

    async def snapshot_workspace(self, conversation_id, workdir, *, position: int) -> dict | None:
        """As Memoryui.snapshot_workspace; git runs in a worker thread."""
        snapshot = await asyncio.to_thread(workspace.take_snapshot, workdir, conversation_id, position)
        return None if snapshot is None else await self.record_snapshot(conversation_id, snapshot, position=position)

    async def list(self, *, subject: str | None = None, namespace: str | None = None, order: str | None = None,
                   page_size: int | None = None) -> AsyncIterator[dict]:
        cursor = None
        while True:
            page = await self._run(_core.list_page(cursor=cursor, limit=page_size, subject=subject,
                                                   namespace=namespace, order=order))
            for item in page["items"]:
                yield item
            cursor = page["next"]
            if not cursor:
                return

    async def messages(self, conversation_id, *, after: int = -1, page_size: int | None = None) -> AsyncIterator[dict]:
        cursor = None
        while True:
            page = await self._run(_core.messages_page(conversation_id, after=after, cursor=cursor, limit=page_size))
            for item in page["items"]:
                yield item
            cursor = page["next"]
            if cursor is None:
                return

    async def active(self, conversation_id) -> dict:
        first = await self._run(_core.active_page(conversation_id))
        pages, page = [], first
        while page["next"] is not None:
            page = await self._run(_core.active_page(conversation_id, cursor=page["next"]))
            pages.append(page)
        return _core.merge_active_pages(first, pages)

    async def export(self, conversation_id, *, format: str = "jsonl", chunk_size: int = 65536) -> AsyncIterator[bytes]:
        call = _core.export(conversation_id, format=format)
        attempt, started, waited = 0, False, 0.0
        while True:
            attempt += 1
            try:
                async with self._http.stream("GET", call.path, params=call.params) as response:
                    if not response.is_success:
                        await response.aread()
                        wait = _retry_wait(self.retries, attempt, response, waited)
                        if wait is not None:
                            await self._sleep(wait)
                            waited += wait
                            continue
                        raise error_from_response(response)
                    async for chunk in response.aiter_bytes(chunk_size):
                        started = True
                        yield chunk
                    return
            except httpx.TransportError as exc:
                if started or attempt >= self.retries.attempts:
                    raise _unreachable(exc, self._http, call) from exc
                await self._sleep(self.retries.delay(attempt))
