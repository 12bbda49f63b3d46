"""The Python client (clients/python) against a live server, on whichever database the suite runs.

The server is pytest-django's live_server on the loopback address; the client is
the installed package, talking HTTP only. A lost answer is made by a transport
that delivers the request and then drops the response, as a proxy timing out
after the commit would.
"""

import asyncio
import json
import threading

import httpx
import pytest

from conversations.facts import store as facts_store
from conversations.models import Conversation, IdempotencyKey, Message
from memoryui_client import (
    AsyncMemoryui,
    CheckpointSplitsToolCall,
    Forbidden,
    IdempotencyKeyReused,
    InvalidInput,
    Memoryui,
    NotFound,
    PositionConflict,
    Retries,
    TransportError,
)
from tests.api_support import make_key
from tests.claude_sdk_support import run_async

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def mui(live_server):
    key = make_key(["admin", "facts:read", "facts:write"], name="client-test")
    with Memoryui(live_server.url, api_key=key, retries=FAST) as client:
        yield client


class DropFirstResponse(httpx.HTTPTransport):
    """Delivers every request; the first write's answer is lost on the way back."""

    def __init__(self):
        super().__init__()
        self.sent: list[httpx.Request] = []
        self.dropped = 0

    def handle_request(self, request):
        self.sent.append(request)
        response = super().handle_request(request)
        if request.method == "POST" and not self.dropped:
            response.read()  # the server answered: the write is committed …
            response.close()
            self.dropped += 1
            raise httpx.ReadTimeout("the answer was lost after the commit", request=request)  # … and lost
        return response


def test_a_lost_answer_after_the_commit_is_retried_without_a_duplicate(live_server):
    key = make_key(["read", "write"])
    transport = DropFirstResponse()
    with Memoryui(live_server.url, api_key=key, retries=FAST) as plain:
        conversation = plain.create(title="lossy network")
    with Memoryui(live_server.url, api_key=key, retries=FAST, transport=transport) as lossy:
        appended = lossy.append(conversation["id"], {"kind": "did", "text": "refund sent"})

    assert appended == {"position": 0, "kind": "did"}
    assert transport.dropped == 1 and len(transport.sent) == 2
    keys = {r.headers["Idempotency-Key"] for r in transport.sent}
    assert len(keys) == 1  # the retry carried the same key
    assert Message.objects.of(conversation["id"]).count() == 1
    assert IdempotencyKey.objects.filter(key=keys.pop()).count() == 1


def test_a_lost_batch_answer_is_retried_without_a_duplicate(live_server):
    key = make_key(["read", "write"])
    transport = DropFirstResponse()
    with Memoryui(live_server.url, api_key=key, retries=FAST, transport=transport) as lossy:
        conversation = lossy.create(title="lossy")  # this one's answer is lost: still one conversation
        done = lossy.append_batch(conversation["id"], [{"kind": "note", "text": f"n{i}"} for i in range(3)])
    assert done == {"first_position": 0, "last_position": 2, "count": 3}
    assert Conversation.objects.filter(title="lossy").count() == 1
    assert Message.objects.of(conversation["id"]).count() == 3


def test_the_whole_loop(mui):
    conversation, created = mui.get_or_create(namespace="tests", external_id="session-1", title="Refund",
                                              subject="customer:42")
    again, created_again = mui.get_or_create(namespace="tests", external_id="session-1")
    assert created and not created_again and again["id"] == conversation["id"]
    assert mui.find(namespace="tests", external_id="session-1")["id"] == conversation["id"]
    assert mui.find(namespace="tests", external_id="nope") is None
    cid = conversation["id"]

    assert mui.append(cid, {"kind": "user", "content": "Where is my refund?"}, expected_position=0)["position"] == 0
    mui.append_batch(cid, [
        {"kind": "assistant", "content": "Checking.", "tool_calls": [{"id": "c1", "name": "status", "arguments": {}}]},
        {"kind": "tool", "tool_call_id": "c1", "content": "refunded"},
        {"kind": "note", "text": "polite customer"},
    ])
    assert [m["position"] for m in mui.messages(cid, page_size=2)] == [0, 1, 2, 3]
    assert [m["position"] for m in mui.messages(cid, after=1)] == [2, 3]

    with pytest.raises(CheckpointSplitsToolCall) as exc:  # between the call c1 and its result
        mui.checkpoint(cid, position=1, summary="Customer asked about a refund; checking.")
    assert exc.value.status == 409 and "0 (before) and 2 (after)" in exc.value.message
    mui.checkpoint(cid, position=2, summary="Customer asked about a refund; it was refunded.")
    view = mui.active(cid)
    assert view["handoff"]["content"].startswith("Customer asked")
    assert [i["position"] for i in view["items"]] == [3]

    child = mui.fork(cid, position=2, title="branch", external_id="session-1-b")
    assert child["parent_id"] == cid and child["external_id"] == "session-1-b"
    assert mui.get(child["id"])["message_count"] == 3

    for i in range(3):
        mui.create(title=f"filler {i}", namespace="tests")
    listed = list(mui.list(namespace="tests", page_size=2))
    assert len(listed) == 5 and len({c["id"] for c in listed}) == 5

    lines = b"".join(mui.export(cid, format="jsonl", chunk_size=64)).decode().splitlines()
    assert any('"refunded"' in line for line in lines)
    assert json.loads(b"".join(mui.export(cid, format="json")))["conversation"]["id"] == cid

    fact = mui.propose_fact(subject="customer:42", text="Prefers email over phone.", importance=4,
                            source_conversation_id=cid, source_position=0)
    assert fact["status"] == "proposed"
    assert mui.recall(subject="customer:42") == []  # a person has not approved it yet
    facts_store.approve_fact(fact_id=fact["id"], actor="user:reviewer")
    assert [r["fact"]["text"] for r in mui.recall(subject="customer:42", query="email")] == [fact["text"]]

    mui.delete(child["id"])
    with pytest.raises(NotFound) as exc:
        mui.get(child["id"])
    assert exc.value.code == "not_found" and exc.value.status == 404


def test_api_errors_are_typed_and_never_retried(live_server):
    key = make_key(["read", "write"])
    transport = DropFirstResponse()
    transport.dropped = 1  # drop nothing: just count requests
    with Memoryui(live_server.url, api_key=key, retries=FAST, transport=transport) as mui:
        cid = mui.create()["id"]
        before = len(transport.sent)
        with pytest.raises(PositionConflict) as conflict:
            mui.append(cid, {"kind": "user", "content": "late"}, expected_position=3)
        with pytest.raises(InvalidInput) as invalid:
            mui.append_batch(cid, [{"kind": "user", "content": "ok"}, {"kind": "tool", "content": "x"}])
        with pytest.raises(Forbidden):
            mui.delete(cid)
        with pytest.raises(IdempotencyKeyReused) as reused:
            mui.append(cid, {"kind": "user", "content": "a"}, idempotency_key="mine-1")
            mui.append(cid, {"kind": "user", "content": "b"}, idempotency_key="mine-1")
        assert len(transport.sent) - before == 5  # one request each, no retries
    assert (conflict.value.code, conflict.value.field) == ("position_conflict", "expected_position")
    assert (invalid.value.code, invalid.value.field) == ("invalid_message", "messages.1.tool_call_id")
    assert reused.value.field == "Idempotency-Key"


def test_the_async_client_does_the_same(live_server):
    key = make_key(["read", "write"])

    class DropFirstAsync(httpx.AsyncHTTPTransport):
        def __init__(self):
            super().__init__()
            self.sent = []

        async def handle_async_request(self, request):
            self.sent.append(request)
            response = await super().handle_async_request(request)
            if request.method == "POST" and len(self.sent) == 2:
                await response.aread()
                await response.aclose()
                raise httpx.RemoteProtocolError("connection reset after the commit", request=request)
            return response

    async def run():
        transport = DropFirstAsync()
        async with AsyncMemoryui(live_server.url, api_key=key, retries=FAST, transport=transport) as mui:
            conversation, created = await mui.get_or_create(namespace="a", external_id="s")
            cid = conversation["id"]
            await mui.append(cid, {"kind": "user", "content": "hello"})  # its answer is lost once
            await mui.append_batch(cid, [{"kind": "assistant", "content": "hi"}, {"kind": "note", "text": "x"}])
            await mui.checkpoint(cid, position=0, summary="greeted")
            view = await mui.active(cid)
            positions = [m["position"] async for m in mui.messages(cid, page_size=1)]
            listed = [c["id"] async for c in mui.list(namespace="a")]
            chunks = [c async for c in mui.export(cid, format="markdown")]
            child = await mui.fork(cid, position=1)
            return created, view, positions, listed, b"".join(chunks), child, transport

    # In a thread of its own: Playwright's sync API may hold an event loop in this one.
    out = []
    thread = threading.Thread(target=lambda: out.append(asyncio.run(run())))
    thread.start()
    thread.join(120)
    created, view, positions, listed, markdown, child, transport = out[0]
    assert created
    assert positions == [0, 1, 2]
    assert [i["position"] for i in view["items"]] == [1, 2] and view["handoff"]["content"] == "greeted"
    assert listed and b"hello" in markdown and child["forked_from_position"] == 1
    assert Message.objects.of(listed[0]).count() == 3  # the retried append landed once


# -- the retry policy, against a scripted transport ------------------------------------


def scripted(*answers):
    """A transport answering with `answers` in turn (httpx.Response or an exception to raise)."""
    seen = []

    def handler(request):
        seen.append(request)
        answer = answers[min(len(seen), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return httpx.MockTransport(handler), seen


def ok(body=None, status=201):
    return httpx.Response(status, json=body or {"position": 0, "kind": "user"})


def error(status, code="x", headers=None):
    return httpx.Response(status, json={"error": {"code": code, "message": "m"}}, headers=headers or {})


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_it_retries_busy_answers_honouring_retry_after_with_the_same_key(status):
    transport, seen = scripted(error(status, headers={"Retry-After": "7"}), error(status), ok())
    waits = []
    mui = Memoryui("http://127.0.0.1:9", api_key="k", transport=transport, sleep=waits.append,
                   retries=Retries(attempts=5, backoff=0.5, max_backoff=8))
    assert mui.append("c", {"kind": "user", "content": "x"}) == {"position": 0, "kind": "user"}
    assert len(seen) == 3
    assert waits[0] == 7.0 and 0.25 <= waits[1] <= 1.0  # Retry-After, then backoff with jitter
    assert len({r.headers["Idempotency-Key"] for r in seen}) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 415, 422, 500])
def test_it_never_retries_other_errors(status):
    transport, seen = scripted(error(status), ok())
    mui = Memoryui("http://127.0.0.1:9", api_key="k", transport=transport, sleep=lambda s: None)
    with pytest.raises(Exception) as exc:
        mui.append("c", {"kind": "user", "content": "x"})
    assert len(seen) == 1 and exc.value.status == status


def test_connection_errors_are_retried_then_raised():
    transport, seen = scripted(httpx.ConnectError("refused"))
    mui = Memoryui("http://127.0.0.1:9", transport=transport, sleep=lambda s: None, retries=Retries(attempts=3))
    with pytest.raises(TransportError):
        mui.get("c")
    assert len(seen) == 3


def test_a_refused_connection_names_the_address_it_was_for(live_server):
    from tests.server_support import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    for client in (Memoryui(closed, retries=Retries(attempts=1)), AsyncMemoryui(closed, retries=Retries(attempts=1))):
        with pytest.raises(TransportError) as refused:
            result = client.get("3f1c")
            if asyncio.iscoroutine(result):
                run_async(result)
        assert f"could not reach memoryui at {closed}/api/v1/conversations/3f1c" in str(refused.value)
        assert "ConnectError" in str(refused.value)


@pytest.mark.parametrize("make", [
    lambda: Memoryui(), lambda: AsyncMemoryui(), lambda: Memoryui(" "),
    lambda: __import__("memoryui_client.integrations.claude", fromlist=["x"]).MemoryuiSessionStore(),
    lambda: __import__("memoryui_client.integrations.openai_agents", fromlist=["x"]).MemoryuiSession("s"),
    lambda: __import__("memoryui_client.integrations.langgraph", fromlist=["x"]).MemoryuiSaver(),
], ids=["sync", "async", "blank", "claude", "openai-agents", "langgraph"])
def test_without_an_address_it_fails_clearly_instead_of_guessing_one(monkeypatch, make):
    monkeypatch.delenv("MEMORYUI_URL", raising=False)
    with pytest.raises(ValueError, match="MEMORYUI_URL"):
        make()
    monkeypatch.setenv("MEMORYUI_URL", "http://127.0.0.1:9")
    make()  # the variable is the other way to give it


def test_each_write_gets_its_own_key_and_a_given_key_is_used():
    transport, seen = scripted(ok())
    mui = Memoryui("http://127.0.0.1:9", transport=transport)
    mui.append("c", {"kind": "user", "content": "x"})
    mui.append("c", {"kind": "user", "content": "x"})
    mui.append("c", {"kind": "user", "content": "x"}, idempotency_key="ticket-7-refund")
    mui.get("c")
    keys = [r.headers.get("Idempotency-Key") for r in seen]
    assert keys[0] != keys[1] and keys[2] == "ticket-7-refund" and keys[3] is None


def test_it_retries_a_conflict_that_says_when_to_come_back_with_the_same_key():
    # An import of the same source in progress (409 import_in_progress, Retry-After: 2) passes.
    transport, seen = scripted(error(409, code="import_in_progress", headers={"Retry-After": "2"}), ok())
    waits = []
    mui = Memoryui("http://127.0.0.1:9", api_key="k", transport=transport, sleep=waits.append)
    assert mui.append("c", {"kind": "user", "content": "x"}) == {"position": 0, "kind": "user"}
    assert waits == [2.0] and len(seen) == 2
    assert len({r.headers["Idempotency-Key"] for r in seen}) == 1


def test_it_stops_retrying_a_conflict_when_the_next_wait_would_pass_its_deadline():
    transport, seen = scripted(error(409, code="import_in_progress", headers={"Retry-After": "40"}))
    waits = []
    mui = Memoryui("http://127.0.0.1:9", api_key="k", transport=transport, sleep=waits.append,
                   retries=Retries(attempts=10, deadline=100))
    with pytest.raises(Exception) as exc:
        mui.append("c", {"kind": "user", "content": "x"})
    assert exc.value.status == 409 and exc.value.code == "import_in_progress"
    assert waits == [40.0, 40.0] and len(seen) == 3  # a third wait would end at 120 s, past the 100 s deadline


def test_the_async_client_retries_a_conflict_that_says_when_to_come_back():
    answers = [error(409, code="import_in_progress", headers={"Retry-After": "1"}), ok()]
    seen, waits = [], []

    def handler(request):
        seen.append(request)
        return answers[len(seen) - 1]

    async def sleep(seconds):
        waits.append(seconds)

    async def run():
        async with AsyncMemoryui("http://127.0.0.1:9", api_key="k", transport=httpx.MockTransport(handler),
                                 sleep=sleep) as client:
            return await client.append("c", {"kind": "user", "content": "x"})

    assert run_async(run()) == {"position": 0, "kind": "user"}  # Playwright may hold a loop in this thread
    assert waits == [1.0] and len(seen) == 2
