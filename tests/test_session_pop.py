"""`pop_item` of a session of Responses items (imports/sessions.py, the OpenAI Agents
SDK's `Session`): it takes the last item back with a retraction record, so the log stays
append-only, the session stays in its one conversation, and a pop costs the same at any
size. Judged against the SDK's own session (`agents.SQLiteSession` in memory) doing the
same operations."""

import asyncio
import json

import pytest
from agents import SQLiteSession
from agents.run_internal.session_persistence import rewind_session_items
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.errors import InvalidInput
from conversations.imports import sessions
from conversations.models import Conversation, Message
from memoryui_client import Retries
from memoryui_client.integrations.openai_agents import MemoryuiSession
from tests.api_support import login_as, make_key
from tests.claude_sdk_support import run_async

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)


def _turn(n: int) -> list[dict]:
    """A user question, a tool call, its output and the answer: four items."""
    return [{"role": "user", "content": f"question {n}"},
            {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "lookup",
             "arguments": json.dumps({"n": n}), "status": "completed"},
            {"type": "function_call_output", "call_id": f"call_{n}", "output": f"result {n}"},
            {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}]}]


def _sqlite_session(name: str) -> SQLiteSession:
    return SQLiteSession(name)  # in memory


@pytest.mark.django_db(transaction=True)
def test_the_sdks_rewind_of_seventeen_items_keeps_one_conversation_and_the_items_the_sdk_keeps(live_server,
                                                                                              client):
    key = make_key(["read", "write"], name="agents-sdk")
    items = [item for n in range(8) for item in _turn(n)]

    async def run():
        ours, theirs = MemoryuiSession("rewind-17", url=live_server.url, api_key=key, retries=FAST), \
            _sqlite_session("rewind-17")
        for session in (ours, theirs):
            await session.add_items(items)
            # The SDK's own rewind: pop_item in a loop until the retried suffix is gone.
            await rewind_session_items(session, items[-17:])
        out = await ours.get_items(), await theirs.get_items(), ours.conversation_id
        await ours.close()
        theirs.close()
        return out

    ours, theirs, conversation_id = run_async(run())
    assert ours == theirs == items[:-17]
    assert Conversation.objects.filter(namespace="openai-agents").count() == 1
    # Nothing destroyed: every row is kept, and each pop left a note saying what it took back.
    kinds = list(Message.objects.filter(conversation_id=conversation_id).order_by("position")
                 .values_list("kind", flat=True))
    assert kinds.count("note") == 17 and kinds[-17:] == ["note"] * 17
    login_as(client, "auditor")
    html = client.get(reverse("conversation", args=[conversation_id])).content.decode()
    for item in range(len(items) - 17, len(items)):  # the full record names each item taken back
        assert f"retracted by pop_item: item {item} (" in html


operations = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(min_value=1, max_value=6)),
    st.tuples(st.just("pop"), st.just(0)),
    st.tuples(st.just("get"), st.integers(min_value=1, max_value=5)),
), min_size=1, max_size=25)


@pytest.mark.django_db
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_pops_adds_and_reads_give_what_the_sdks_own_session_gives(ops):
    name = f"diff-{abs(hash(tuple(ops)))}-{len(ops)}"
    theirs = _sqlite_session(name)
    made = iter(item for n in range(10_000) for item in _turn(n))

    sdk = asyncio.run  # the SDK's session is async; the store is called outside its loop
    try:
        for op, n in ops:
            if op == "add":
                batch = [next(made) for _ in range(n)]
                sessions.append_items(namespace="diff", session_id=name, items=batch)
                sdk(theirs.add_items(batch))
            elif op == "pop":
                popped, _ = sessions.pop_item(namespace="diff", session_id=name)
                assert popped == sdk(theirs.pop_item())
            else:
                mine, _ = sessions.active_items(namespace="diff", session_id=name, limit=n)
                assert mine == sdk(theirs.get_items(limit=n))
        mine, stream = sessions.active_items(namespace="diff", session_id=name)
        assert mine == sdk(theirs.get_items())
        assert (stream.as_dict()["items"] if stream.source else 0) == len(mine)
    finally:
        theirs.close()
    assert Conversation.objects.filter(namespace="diff", external_id__startswith=name).count() <= 1


def _queries_of_a_pop(name: str, size: int) -> int:
    items = [item for n in range(size // 4) for item in _turn(n)]
    for start in range(0, len(items), 1000):
        sessions.append_items(namespace="cost", session_id=name, items=items[start:start + 1000])
    with CaptureQueriesContext(connection) as queries:
        popped, _ = sessions.pop_item(namespace="cost", session_id=name)
    assert popped == items[-1]
    return len(queries.captured_queries)


@pytest.mark.django_db
def test_a_pop_on_two_thousand_items_does_the_same_work_as_on_eight():
    # Not a clock (bench/ measures time): the same statements, none of them copying the
    # session, whatever its size. The fork it replaced inserted a copy of every row and item.
    assert _queries_of_a_pop("big", 2000) == _queries_of_a_pop("small", 8)
    assert Conversation.objects.filter(namespace="cost").count() == 2


@pytest.mark.django_db
def test_the_retraction_record_s_type_is_refused_as_an_item_naming_it():
    with pytest.raises(InvalidInput) as refused:
        sessions.append_items(namespace="x", session_id="s", items=[
            {"role": "user", "content": "hi"}, {"type": sessions.RETRACTION, "retracts": 0}])
    assert refused.value.field == "entries.1.type"
    assert not Conversation.objects.filter(namespace="x").exists()


@pytest.mark.django_db
def test_a_popped_tool_output_leaves_the_conversation_s_call_with_its_result():
    # The conversation keeps the retracted row, so what it re-sends still has the call's
    # result; the session's items are the SDK's (without the output).
    sessions.append_items(namespace="t", session_id="s", items=_turn(0)[:3])
    popped, stream = sessions.pop_item(namespace="t", session_id="s")
    assert popped["type"] == "function_call_output"
    items, _ = sessions.active_items(namespace="t", session_id="s")
    assert [i.get("type", "message") for i in items] == ["message", "function_call"]
    rows = [json.loads(c) for c in Message.objects.filter(conversation_id=stream.source.conversation_id)
            .order_by("position").values_list("content", flat=True)]
    assert [r["kind"] for r in rows] == ["user", "assistant", "tool", "note"]
    assert rows[2]["tool_call_id"] == "call_0"
