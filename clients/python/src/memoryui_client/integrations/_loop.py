"""The HTTP client of a framework adapter: one `AsyncMemoryui` per event loop.

Frameworks may drive one adapter object from several event loops over its life (a
script calling `asyncio.run` per turn); an httpx client belongs to the loop that made
it, so a new loop gets a new client, and the adapter's asyncio locks are made anew
(`_on_new_loop`)."""

import asyncio
import random
import time

from .._core import Call, Retries
from ..client import AsyncMemoryui, server_url

# How long an adapter keeps trying a conditional write that other writers keep beating.
CONFLICT_DEADLINE = 30.0


class ConflictBackoff:
    """Waits between tries of a conditional append (`expected_entries`) that lost to
    another writer of the same session. Immediate retries let writers collide again in
    lockstep (two processes lost batches after six); exponential waits with full jitter
    (a random wait up to 0.05 s, 0.1 s, … at most 2 s) spread them out. `wait()` is None
    once the next try would start past `deadline` seconds: the caller then raises the
    conflict it got, the client's typed error."""

    def __init__(self, deadline: float = CONFLICT_DEADLINE, *, first: float = 0.05, most: float = 2.0,
                 clock=time.monotonic):
        self._clock = clock
        self._until = clock() + deadline
        self._first, self._most = first, most
        self.tries = 0

    def wait(self) -> float | None:
        self.tries += 1
        wait = random.uniform(0, min(self._most, self._first * 2 ** (self.tries - 1)))
        return wait if self._clock() + wait <= self._until else None


class LoopBoundClient:
    def _init_client(self, url: str | None, *, api_key: str | None, retries: Retries | None, timeout,
                     project: str | None = None) -> None:
        self.url = server_url(url)  # here, not at the first call: a missing address fails where it is set
        self._api_key = api_key
        # Where an all-projects key acts (a project's key acts in its own): memoryui_client.client.
        self.project = project
        self._retries = retries
        self._timeout = timeout
        self._client: AsyncMemoryui | None = None
        self._loop = None

    def _on_new_loop(self) -> None:
        """Called when a client is made for a new event loop: locks of the old loop are dropped."""

    def _http(self) -> AsyncMemoryui:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            kw = {"timeout": self._timeout} if self._timeout is not None else {}
            self._client = AsyncMemoryui(self.url, api_key=self._api_key, project=self.project,
                                         retries=self._retries, **kw)
            self._loop = loop
            self._on_new_loop()
        return self._client

    async def _send(self, call: Call):
        return call.parse(await self._http().request(call))

    async def _close_client(self) -> None:
        """Close the HTTP connections (a client made in another, finished event loop is dropped)."""
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self._close_client()
