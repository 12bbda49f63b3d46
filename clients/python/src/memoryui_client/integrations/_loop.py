"""The HTTP client of a framework adapter: one `AsyncMemoryui` per event loop.

Frameworks may drive one adapter object from several event loops over its life (a
script calling `asyncio.run` per turn); an httpx client belongs to the loop that made
it, so a new loop gets a new client, and the adapter's asyncio locks are made anew
(`_on_new_loop`)."""

import asyncio

from .._core import Call, Retries
from ..client import AsyncMemoryui


class LoopBoundClient:
    def _init_client(self, url: str | None, *, api_key: str | None, retries: Retries | None, timeout) -> None:
        self.url = url
        self._api_key = api_key
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
            self._client = AsyncMemoryui(self.url, api_key=self._api_key, retries=self._retries, **kw)
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
