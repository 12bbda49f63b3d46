"""An OpenAI Agents SDK `Session` kept in memoryui. Install from a memoryui checkout (the client
is not on PyPI yet): `pip install "./clients/python[openai-agents]"`.

    from agents import Agent, Runner
    from memoryui_client.integrations.openai_agents import MemoryuiSession

    session = MemoryuiSession("user-42", url="http://127.0.0.1:8000", api_key="mui_…")
    result = await Runner.run(agent, "Where is my refund?", session=session)

Each item is stored as it is produced, verbatim (`get_items` gives back what was
added, deep-equal), beside the readable row it maps to on the server (the mapping
of an imported Responses file): messages by role, `function_call` → a tool call,
`function_call_output` → a `tool` row, `reasoning` → `thought`, a `compaction`
item → a checkpoint; other items are kept and shown in the record only.

What the methods do (memoryui's log is append-only: nothing is destroyed):

- `get_items()` returns the **active view**: with a checkpoint (a `compaction` item,
  or a fold made in memoryui by an agent, the MCP server or a person), the summary
  comes first — the compaction item itself, or `{"role": "system", "content":
  summary}` — then the items after it; without one, every item. `limit` keeps the
  latest N of those.
- `add_items()` appends in one request, conditional on the stream's entry count it
  continues from, with an idempotency key derived from the items: a retry stores them
  once. When another writer (process) of the session came first, it reads the session
  again and retries after a jittered, growing wait, for up to `conflict_deadline`
  seconds (30 by default); past it the `Conflict` (`entries_conflict`) is raised.
- `pop_item()` takes the last item back: the session's items leave it out from then
  on, the conversation keeps its rows and gets a note "retracted by pop_item" (shown
  in the full record). It adds no conversation and costs the same at any size.
- `clear_session()` continues the session in a new, empty conversation, a child of
  the one it leaves, which stays as it was (lineage: "cleared").

Conversations are in `namespace` (default "openai-agents") with the session id as
external id (`SESSION#N` for the N-th restart; sessions popped before pops were
retractions have forks named so too). The key needs `read`, `write`.
"""

import asyncio
import hashlib
import json

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from .._core import Call, Retries, encode_json
from ..errors import Conflict
from ..formats import SESSION_ITEMS_MAX
from ._loop import CONFLICT_DEADLINE, ConflictBackoff, LoopBoundClient

__all__ = ["MemoryuiSession"]

FORMAT = "openai-responses"


class MemoryuiSession(LoopBoundClient):
    """The OpenAI Agents SDK's `Session` protocol over memoryui's HTTP API (see the module)."""

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, *, url: str | None = None, api_key: str | None = None,
                 project: str | None = None, namespace: str = "openai-agents", subject: str = "",
                 retries: Retries | None = None,
                 session_settings: SessionSettings | None = None, timeout=None,
                 conflict_deadline: float = CONFLICT_DEADLINE):
        if not isinstance(session_id, str) or not session_id.strip() or "#" in session_id:
            raise ValueError("session_id must be a non-empty string without '#'")
        self.session_id = session_id
        self.namespace = namespace
        self.subject = subject
        self.session_settings = session_settings or SessionSettings()
        self.conflict_deadline = conflict_deadline
        self._init_client(url, api_key=api_key, retries=retries, timeout=timeout, project=project)
        self._lock: asyncio.Lock | None = None
        self._stream: dict | None = None  # the head as last seen: {"key", "generation", "entries", …}

    # -- plumbing ----------------------------------------------------------------------

    def _on_new_loop(self) -> None:
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        """Close the HTTP connections (a client made in another, finished event loop is dropped)."""
        await self._close_client()

    async def _read(self, limit: int | None) -> list:
        params = {"namespace": self.namespace, "session_id": self.session_id}
        if limit is not None:
            params["limit"] = limit
        answer = await self._send(Call("GET", "/imports/sessions/items", params=params))
        self._stream = answer["stream"]
        return answer["items"]

    async def _held(self) -> int:
        if self._stream is None:
            await self._read(0)
        return self._stream["entries"]

    @property
    def conversation_id(self) -> str | None:
        """The conversation the session is in now (after the last call), if it has one."""
        return (self._stream or {}).get("conversation_id")

    # -- Session -----------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list:
        """The active view as items, oldest first (the latest `limit` when given)."""
        self._http()
        async with self._lock:
            return await self._read(resolve_session_limit(limit, self.session_settings))

    async def add_items(self, items: list) -> None:
        """Append items as they are produced; a retried call stores them once."""
        if not items:
            return
        items = _plain(list(items))
        encode_json(items, where="items")  # Unencodable (naming the item) before anything is sent
        self._http()
        async with self._lock:
            for start in range(0, len(items), SESSION_ITEMS_MAX):
                await self._append(items[start:start + SESSION_ITEMS_MAX])

    async def _append(self, items: list) -> None:
        backoff = ConflictBackoff(self.conflict_deadline)
        while True:
            held = await self._held()
            digest = hashlib.sha256(json.dumps([self.namespace, self.session_id, self._stream.get("key"), held,
                                                items], sort_keys=True).encode()).hexdigest()
            body = {"format": FORMAT, "namespace": self.namespace, "external_id": self.session_id, "entries": items,
                    "expected_entries": held}
            if self.subject:
                body["subject"] = self.subject
            try:
                answer = await self._send(Call("POST", "/imports", json=body, idempotency_key=f"oai-agents-{digest}"))
            except Conflict as exc:
                wait = backoff.wait() if exc.code in ("entries_conflict", "conflict") else None
                if wait is None:
                    raise
                self._stream = None  # another writer, a pop or a clear came first: read where it stands
                await asyncio.sleep(wait)
                continue
            self._stream = answer["stream"]
            return

    async def pop_item(self):
        """Take the last item back (the session's items leave it out; the conversation keeps
        its rows, with a note saying so); the item, or None when the session is empty."""
        self._http()
        async with self._lock:
            backoff = ConflictBackoff(self.conflict_deadline)
            while True:
                body = {"namespace": self.namespace, "session_id": self.session_id,
                        "expected_entries": await self._held()}
                try:
                    answer = await self._send(Call("POST", "/imports/sessions/pop", json=body,
                                                   idempotency_key=_key("pop", body, self._stream)))
                except Conflict as exc:
                    wait = backoff.wait() if exc.code == "entries_conflict" else None
                    if wait is None:
                        raise
                    self._stream = None
                    await asyncio.sleep(wait)
                    continue
                self._stream = answer["stream"]
                return answer["item"]

    async def clear_session(self) -> None:
        """Continue the session in a new, empty conversation (the old one stays as it was)."""
        self._http()
        async with self._lock:
            body = {"namespace": self.namespace, "session_id": self.session_id}
            answer = await self._send(Call("POST", "/imports/sessions/clear", json=body,
                                           idempotency_key=_key("clear", {**body, "held": await self._held()},
                                                                self._stream)))
            self._stream = answer["stream"]


def _key(op: str, body: dict, stream: dict | None) -> str:
    digest = hashlib.sha256(json.dumps([op, body, (stream or {}).get("key")], sort_keys=True).encode()).hexdigest()
    return f"oai-agents-{op}-{digest[:48]}"


def _plain(value):
    """Pydantic models (the SDK's item types) as their JSON, anywhere in the value; what
    is left that is not JSON is named by encode_json."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
