"""GET /api/v1/lookup (`Memoryui.lookup`): a conversation found by the id its framework knows it
by, against a live server, written through each plug as an app writes it; and the search box,
which finds the same conversations when that id is typed in."""

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from conversations.api_keys import create_api_key
from conversations.project_store import create_project
from memoryui_client import InvalidInput, Memoryui
from tests.api_support import login_as, make_key
from tests.claude_sdk_support import FAST
from tests.test_langgraph_saver import weather_agent
from tests.test_otlp_checks import request_of
from tests.test_otlp_traces import URL, chat_span

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key():
    return make_key(["read", "write"], name="lookup")


@pytest.fixture
def mui(live_server, key):
    with Memoryui(live_server.url, api_key=key, retries=FAST) as client:
        yield client


def ids(found: list[dict]) -> list[str]:
    return [c["id"] for c in found]


def test_a_langgraph_thread_is_found_by_its_thread_id_also_after_time_travel(live_server, key, mui):
    from memoryui_client.integrations.langgraph import MemoryuiSaver

    saver = MemoryuiSaver(url=live_server.url, api_key=key, retries=FAST)
    call = {"id": "call_paris", "name": "get_weather", "args": {"city": "Paris"}, "type": "tool_call"}
    graph = weather_agent(saver, [AIMessage(content="", tool_calls=[call], id="ai-1"),
                                  AIMessage(content="14 °C in Paris.", id="ai-2"),
                                  AIMessage(content="Paris: 14 °C, take an umbrella.", id="ai-3")])
    config = {"configurable": {"thread_id": "support thread 42"}}  # any text: spaces included
    graph.invoke({"messages": [HumanMessage("Weather in Paris?", id="h-1")]}, config)
    graph.invoke(None, config)
    [first] = mui.lookup("langgraph", "support thread 42")
    assert first["namespace"] == "langgraph" and first["message_count"] == 4
    assert mui.lookup("langgraph", "support thread 42", checkpoint_ns="") == [first]

    # Time travel: the thread now goes on in a fork, which is found first; its first conversation after it.
    before_answer = next(s for s in graph.get_state_history(config)
                         if s.next == ("agent",) and len(s.values["messages"]) == 3)
    graph.invoke(None, before_answer.config)
    now, then = mui.lookup("langgraph", "support thread 42")
    assert then["id"] == first["id"] and now["parent_id"] == first["id"] and now["parent_relation"] == "fork"

    # delete_thread forgets the checkpoints, never the conversations: the first one is still found.
    saver.delete_thread("support thread 42")
    assert ids(mui.lookup("langgraph", "support thread 42")) == [first["id"]]
    assert mui.lookup("langgraph", "another thread") == []
    saver.close()


def test_a_claude_session_is_found_by_its_session_id(live_server, key, mui):
    from memoryui_client.integrations.claude import MemoryuiSessionStore

    store = MemoryuiSessionStore(live_server.url, api_key=key, retries=FAST)
    entry = {"type": "user", "uuid": "u1", "sessionId": "7c1e5b2a", "timestamp": "2026-01-01T00:00:00.000Z",
             "message": {"role": "user", "content": "Why does the export fail?"}}
    asyncio.run(store.append({"project_key": "-srv-billing", "session_id": "7c1e5b2a"}, [entry]))
    [found] = mui.lookup("claude", "7c1e5b2a")
    assert (found["namespace"], found["external_id"]) == ("-srv-billing", "7c1e5b2a")


def test_an_openai_agents_session_is_found_by_its_session_id_its_live_generation_first(live_server, key, mui):
    from memoryui_client.integrations.openai_agents import MemoryuiSession

    session = MemoryuiSession("user-42", url=live_server.url, api_key=key, retries=FAST)

    async def write():
        await session.add_items([{"role": "user", "content": "Book Oslo."}])
        await session.clear_session()
        await session.add_items([{"role": "user", "content": "Book Bergen."}])

    asyncio.run(write())
    live, cleared = mui.lookup("openai-agents", "user-42")
    assert (live["external_id"], cleared["external_id"]) == ("user-42#1", "user-42")
    assert live["parent_id"] == cleared["id"]


def test_an_otel_conversation_is_found_by_its_conversation_id_and_by_its_trace_id(live_server, key, mui):
    import httpx

    long_id = "tenant-7/" + "x" * 300
    spans = [chat_span("0000000000000001", conversation="conv-1"),
             chat_span("0000000000000002", conversation=long_id),
             chat_span("0000000000000003", conversation=None, trace_id="ab" * 16)]
    answer = httpx.post(live_server.url + URL, content=request_of(*spans), headers={
        "Authorization": f"Bearer {make_key(['write'], name='otel')}", "Content-Type": "application/json"})
    assert answer.status_code == 200, answer.content
    [by_id] = mui.lookup("otel", "conv-1")
    [by_long_id] = mui.lookup("otel", long_id)  # kept whole (keyed by its digest), found by the id itself
    [by_own_trace] = mui.lookup("otel", "ab" * 16)
    assert by_id["external_id"] == "conv-1" and by_long_id["external_id"].startswith("sha256:")
    # The trace the first two came in: both conversations, found by its id.
    assert set(ids(mui.lookup("otel", "4bf92f3577b34da6a3ce929d0e0e4736"))) == {by_id["id"], by_long_id["id"]}
    assert by_own_trace["external_id"] == "ab" * 16


def test_a_pydantic_ai_history_is_found_by_its_history_id(live_server, key, mui):
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from memoryui_client.integrations.pydantic_ai import MemoryuiMessageHistory

    history = MemoryuiMessageHistory("chat-7", url=live_server.url, api_key=key, retries=FAST)
    history.save(Agent(TestModel()).run_sync("Hi").all_messages())
    [found] = mui.lookup("pydantic-ai", "chat-7")
    assert found["id"] == history.conversation_id


def test_it_refuses_an_unknown_framework_and_a_bad_id_naming_the_field(mui):
    with pytest.raises(InvalidInput) as bad:
        mui.lookup("autogen", "x")
    assert bad.value.field == "framework"
    with pytest.raises(InvalidInput) as bad:
        mui.lookup("otel", "a\u200bb")
    assert bad.value.field == "id"
    with pytest.raises(InvalidInput) as bad:
        mui.lookup("claude", "s", checkpoint_ns="")
    assert bad.value.field == "checkpoint_ns"


def test_another_projects_conversation_is_never_found(live_server, mui):
    import httpx

    other = create_project(slug="other", name="Other")
    _, secret = create_api_key(name="other-otel", scopes=["write"], project=other)
    body = request_of(chat_span("0000000000000009", conversation="shared-id"))
    assert httpx.post(live_server.url + URL, content=body, headers={
        "Authorization": f"Bearer {secret}", "Content-Type": "application/json"}).status_code == 200
    assert mui.lookup("otel", "shared-id") == []
    assert mui.lookup("otel", "4bf92f3577b34da6a3ce929d0e0e4736") == []


def test_the_search_box_finds_a_conversation_by_its_framework_id(client, live_server):
    import httpx

    body = request_of(chat_span("0000000000000001", conversation="thread-from-otel"))
    assert httpx.post(live_server.url + URL, content=body, headers={
        "Authorization": f"Bearer {make_key(['write'], name='otel')}",
        "Content-Type": "application/json"}).status_code == 200
    login_as(client, "auditor")
    page = client.get("/search/", {"q": "thread-from-otel"}).content.decode()
    assert "Known by this id" in page and '<span class="badge">otel</span>' in page
    assert "Known by this id" not in client.get("/search/", {"q": "nothing-by-that-id"}).content.decode()
