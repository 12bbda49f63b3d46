"""The Python client refuses what has no JSON form with its own error before sending
anything: a lone surrogate (not UTF-8) and a value that is not JSON raise `Unencodable`
(an `InvalidInput`, so a `MemoryuiError`) with a code, a message and the field's path,
never a raw UnicodeEncodeError or TypeError. Sync, async and the session adapters."""

import asyncio

import httpx
import pytest

from memoryui_client import AsyncMemoryui, InvalidInput, Memoryui, MemoryuiError, Unencodable
from memoryui_client.integrations.claude import MemoryuiSessionStore
from memoryui_client.integrations.openai_agents import MemoryuiSession

NOWHERE = "http://127.0.0.1:9"  # nothing listens: a request sent would be a TransportError

CASES = [
    # (what is sent, the field named)
    (lambda mui: mui.append("c1", {"kind": "user", "content": "half a pair \ud83d"}), "content"),
    (lambda mui: mui.append("c1", {"kind": "user", "content": "hi", "meta": {"tags": {"a", "b"}}}), "meta.tags"),
    (lambda mui: mui.append_batch("c1", [{"kind": "user", "content": "ok"},
                                         {"kind": "user", "content": b"bytes"}]), "messages.1.content"),
    (lambda mui: mui.create(title="t", meta={"score": float("nan")}), "meta.score"),
    (lambda mui: mui.create(title="t", meta={"key \udc80": 1}), "meta.key \\udc80"),
]


def _counting():
    sent = []

    def handler(request):
        sent.append(request)
        return httpx.Response(201, json={})

    return sent, handler


@pytest.mark.parametrize("call, field", CASES)
def test_it_raises_its_own_error_naming_the_field_before_sending(call, field):
    sent, handler = _counting()
    with Memoryui(NOWHERE, api_key="k", transport=httpx.MockTransport(handler)) as mui:
        with pytest.raises(Unencodable) as refused:
            call(mui)
    error = refused.value
    assert isinstance(error, InvalidInput) and isinstance(error, MemoryuiError)
    assert error.code == "unencodable" and error.field == field and error.status is None
    assert field in error.message and "nothing was sent" in error.message
    str(error)  # printable, even when the value itself is not
    assert sent == []


@pytest.mark.parametrize("call, field", CASES)
def test_the_async_client_raises_the_same_error(call, field):
    sent, handler = _counting()

    async def run():
        async with AsyncMemoryui(NOWHERE, api_key="k", transport=httpx.MockTransport(handler)) as mui:
            with pytest.raises(Unencodable) as refused:
                await call(mui)
            return refused.value

    error = asyncio.run(run())
    assert error.code == "unencodable" and error.field == field and sent == []


def test_what_encodes_is_sent_as_utf8_json():
    sent, handler = _counting()
    with Memoryui(NOWHERE, api_key="k", transport=httpx.MockTransport(handler)) as mui:
        mui.append("c1", {"kind": "user", "content": "Zoë 😀"})
    (request,) = sent
    assert request.headers["content-type"] == "application/json"
    assert request.content == '{"kind":"user","content":"Zoë 😀"}'.encode()


def test_the_session_adapters_raise_it_for_an_item_or_entry():
    async def run():
        session = MemoryuiSession("s1", url=NOWHERE, api_key="k")
        with pytest.raises(Unencodable) as item:
            await session.add_items([{"role": "user", "content": "ok"}, {"role": "user", "content": object()}])
        store = MemoryuiSessionStore(NOWHERE, api_key="k")
        with pytest.raises(Unencodable) as entry:
            await store.append({"project_key": "p", "session_id": "s1"},
                               [{"type": "user", "message": {"role": "user", "content": "lone \udfff"}}])
        await session.close()
        await store.aclose()
        return item.value, entry.value

    item, entry = asyncio.run(run())
    assert item.field == "items.1.content" and entry.field == "entries.0.message.content"
