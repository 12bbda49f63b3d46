"""A Claude Agent SDK `SessionStore` kept in memoryui. Install from a memoryui checkout (the
client is not on PyPI yet): `pip install "./clients/python[claude]"`.

    from claude_agent_sdk import ClaudeAgentOptions, query
    from memoryui_client.integrations.claude import MemoryuiSessionStore

    store = MemoryuiSessionStore("http://127.0.0.1:8000", api_key="mui_…")
    async for message in query(prompt="…", options=ClaudeAgentOptions(session_store=store)):
        ...

How a session maps (the server does the mapping, with the same code that imports
Claude Code files: one mapping, two doors):

- `project_key` → the conversation's namespace (`namespace_prefix` + project_key),
  `session_id` → its external id; a `subpath` (a subagent transcript) →
  external id `SESSION/SUBPATH`, a child conversation of the session marked as a
  subagent;
- entries are stored verbatim beside the rows (`load` returns them deep-equal), and
  become readable rows: user and assistant text, tool calls, tool results, thinking
  as `thought`, a compaction as a checkpoint at its place;
- `append` sends each batch in one request with an idempotency key derived from the
  key, the entry count it continues from and the entries, so a retry (ours or the
  SDK's) never stores a batch twice; entries with a `uuid` are also deduplicated by
  the server;
- the SDK's session summary (`fold_session_summary`) is folded here and stored with
  its batch in the same transaction, conditional on the entry count
  (`expected_entries`): two writers of one session never lose each other's fold. A
  batch that another writer (process) beat is folded again from what that writer
  left and retried after a jittered, growing wait, for up to `conflict_deadline`
  seconds (30 by default); past it the `Conflict` (`entries_conflict`) is raised;
- `delete` goes through memoryui's deletion path: the session's conversations (its
  subagents, rewinds) are deleted, checked on disk, and a receipt is kept. It waits
  and retries while a prune or another deletion runs (409 `maintenance_running`).

The API key needs the `read` and `write` scopes, and `admin` for `delete`.
"""

import asyncio
import hashlib
import json
import time

from claude_agent_sdk import SessionStore, fold_session_summary

from .._core import Call, Retries, encode_json
from ..errors import Conflict, NotFound
from ..formats import NAMESPACE_MAX
from ._loop import CONFLICT_DEADLINE, ConflictBackoff, LoopBoundClient

__all__ = ["MemoryuiSessionStore", "namespace_for"]

# Request bodies stay well under the server's limit (twice the message limit, 2 MiB by default).
BATCH_BYTES = 1_500_000
BATCH_ENTRIES = 1000
FORMAT = "claude-code"


def namespace_for(project_key: str, prefix: str = "") -> str:
    """The namespace of a project key: `prefix + project_key`, or when that is over 200
    characters its first 183 and a hash of the whole (the server's file import uses the
    same rule for a project directory's name)."""
    name = prefix + project_key
    if len(name) <= NAMESPACE_MAX:
        return name
    # 183 characters, a hyphen and 16 hex digits: 200 again.
    return name[:NAMESPACE_MAX - 17] + "-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _external_id(key) -> str:
    session_id = key["session_id"]
    if not isinstance(session_id, str) or not session_id or "/" in session_id:
        raise ValueError(f"session_id must be a non-empty string without '/': {session_id!r}")
    subpath = key.get("subpath")
    if subpath is None:
        return session_id
    if not isinstance(subpath, str) or not subpath:
        raise ValueError("subpath must be omitted for the main transcript, or a non-empty string")
    return f"{session_id}/{subpath}"


def _chunks(entries: list) -> list[list]:
    out, chunk, size = [], [], 0
    for i, entry in enumerate(entries):
        n = len(encode_json(entry, where=f"entries.{i}"))  # Unencodable before anything is sent
        if chunk and (size + n > BATCH_BYTES or len(chunk) >= BATCH_ENTRIES):
            out.append(chunk)
            chunk, size = [], 0
        chunk.append(entry)
        size += n
    if chunk:
        out.append(chunk)
    return out


class MemoryuiSessionStore(LoopBoundClient, SessionStore):
    """The Claude Agent SDK's `SessionStore` over memoryui's HTTP API (see the module).

    `namespace_prefix` keeps several applications (or tenants) apart on one server.
    `subject` is given to each new conversation (erasure finds a person's sessions by
    it). `maintenance_wait` is how long `delete` keeps retrying while maintenance runs;
    `conflict_deadline` how long a batch keeps retrying while other writers beat it.
    """

    def __init__(self, url: str | None = None, *, api_key: str | None = None, project: str | None = None,
                 namespace_prefix: str = "", subject: str = "", retries: Retries | None = None,
                 maintenance_wait: float = 120.0, timeout=None, conflict_deadline: float = CONFLICT_DEADLINE):
        self._init_client(url, api_key=api_key, retries=retries, timeout=timeout, project=project)
        self.namespace_prefix = namespace_prefix
        self.subject = subject
        self.maintenance_wait = maintenance_wait
        self.conflict_deadline = conflict_deadline
        # Per stream: the entry count stored and the summary last stored (what the next batch continues).
        self._streams: dict[tuple[str, str], dict] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    # -- the HTTP client, one per event loop ------------------------------------------

    def _on_new_loop(self) -> None:
        self._locks = {}

    async def aclose(self) -> None:
        """Close the HTTP connections (a client made in another, finished event loop is dropped)."""
        await self._close_client()

    def _namespace(self, project_key: str) -> str:
        return namespace_for(project_key, self.namespace_prefix)

    def _lock(self, stream) -> asyncio.Lock:
        self._http()
        lock = self._locks.get(stream)
        if lock is None:
            lock = self._locks[stream] = asyncio.Lock()
        return lock

    # -- SessionStore ----------------------------------------------------------------

    async def append(self, key, entries) -> None:
        """Store a batch in call order; a retried batch is stored once."""
        if not entries:
            return
        stream = (self._namespace(key["project_key"]), _external_id(key))
        async with self._lock(stream):
            for chunk in _chunks(list(entries)):
                await self._append_chunk(key, stream, chunk)

    async def _append_chunk(self, key, stream, entries: list) -> None:
        namespace, external_id = stream
        main = key.get("subpath") is None
        backoff = ConflictBackoff(self.conflict_deadline)
        while True:
            state = self._streams.get(stream)
            if state is None:
                state = self._streams[stream] = await self._read_state(namespace, external_id)
            body = {"format": FORMAT, "namespace": namespace, "external_id": external_id, "entries": entries,
                    "expected_entries": state["entries"]}
            if self.subject:
                body["subject"] = self.subject
            folded = None
            if main:
                folded = fold_session_summary(state["summary"], key, entries)
                body["summary"] = folded["data"]
            digest = hashlib.sha256(json.dumps([namespace, external_id, state["entries"], entries], sort_keys=True,
                                               ensure_ascii=True).encode()).hexdigest()
            call = Call("POST", "/imports", json=body, idempotency_key=f"claude-sdk-{digest}")
            try:
                answer = await self._send(call)
            except Conflict as exc:
                wait = backoff.wait() if exc.code in ("entries_conflict", "conflict") else None
                if wait is None:
                    raise
                # Another writer stored a batch of this session meanwhile: fold again from what it left.
                self._streams.pop(stream, None)
                await asyncio.sleep(wait)
                continue
            after = answer.get("stream") or {}
            summary = None
            if folded is not None and after.get("summary_saved"):
                summary = {**folded, "mtime": after["updated_ms"]}
            elif folded is not None and answer.get("unchanged"):
                summary = state["summary"]  # every entry was stored already: nothing was folded in
            self._streams[stream] = {"entries": after.get("entries", state["entries"]), "summary": summary}
            return

    async def _read_state(self, namespace: str, external_id: str) -> dict:
        items = await self._send(Call("GET", "/imports/sources", params={
            "namespace": namespace, "format": FORMAT, "key": external_id},
            parse=lambda r: r.json()["items"]))
        if not items:
            return {"entries": 0, "summary": None}
        item = items[0]
        summary = item.get("summary")
        return {"entries": item["entries"],
                "summary": {"session_id": external_id, "mtime": summary["mtime"], "data": summary["data"]}
                if summary else None}

    async def load(self, key):
        """Every entry appended under the key, in order, deep-equal; None if never written."""
        namespace, external_id = self._namespace(key["project_key"]), _external_id(key)
        entries, cursor = [], None
        while True:
            query = {"namespace": namespace, "external_id": external_id, "format": FORMAT}
            try:
                page = await self._send(Call("GET", "/imports/entries", params={**query, "cursor": cursor}
                                             if cursor else query))
            except NotFound:
                return None
            entries += page["items"]
            cursor = page.get("next")
            if cursor is None:
                return entries

    async def _sources(self, project_key: str, **params) -> list[dict]:
        return await self._send(Call("GET", "/imports/sources", params={
            "namespace": self._namespace(project_key), "format": FORMAT, **params},
            parse=lambda r: r.json()["items"]))

    async def list_sessions(self, project_key: str):
        """The project's sessions (not their subagent transcripts), with epoch-ms mtimes."""
        return [{"session_id": item["key"], "mtime": item["updated_ms"]}
                for item in await self._sources(project_key, sessions="true")]

    async def list_session_summaries(self, project_key: str):
        """The summaries stored with the project's sessions (one call)."""
        return [{"session_id": item["key"], "mtime": item["summary"]["mtime"], "data": item["summary"]["data"]}
                for item in await self._sources(project_key, sessions="true") if item.get("summary")]

    async def list_subkeys(self, key):
        """The subpaths written under a session (its subagent transcripts)."""
        prefix = _external_id({"session_id": key["session_id"]}) + "/"
        return [item["key"][len(prefix):] for item in await self._sources(key["project_key"], prefix=prefix)]

    async def delete(self, key) -> None:
        """Delete a session with its subagent transcripts (or one subagent transcript)
        through the deletion path, which keeps a receipt. Nothing stored: nothing to do."""
        await self.delete_with_receipt(key)

    async def delete_with_receipt(self, key) -> dict | None:
        """As `delete`, returning the deletion receipt (None when nothing was stored)."""
        namespace, external_id = self._namespace(key["project_key"]), _external_id(key)
        deadline = time.monotonic() + self.maintenance_wait
        wait = 0.5
        while True:
            try:
                receipt = await self._send(Call("DELETE", "/imports/entries", params={
                    "namespace": namespace, "external_id": external_id, "format": FORMAT}))
            except NotFound:
                receipt = None
            except Conflict as exc:
                if exc.code != "maintenance_running" or time.monotonic() + wait > deadline:
                    raise
                retry_after = exc.response.headers.get("Retry-After") if exc.response is not None else None
                await asyncio.sleep(min(float(retry_after), 30.0) if retry_after and retry_after.isdigit() else wait)
                wait = min(wait * 2, 10.0)
                continue
            for stream in [s for s in self._streams if s[0] == namespace and (
                    s[1] == external_id or s[1].startswith(external_id + "/"))]:
                self._streams.pop(stream, None)
            return receipt
