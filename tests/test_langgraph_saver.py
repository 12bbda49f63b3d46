"""The LangGraph checkpointer kept in memoryui (clients/python, `[langgraph]` extra),
against a live server: LangGraph's own conformance suite, unmodified, on the sync-free
async surface; then a real tool-calling `StateGraph` on LangChain's fake chat model
(no network) run, interrupted, resumed and replayed from an earlier checkpoint, read
back as the conversation and the fork a person sees."""

import json

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from conversations.models import Conversation, Message
from memoryui_client import Memoryui, Retries
from memoryui_client.integrations.langgraph import MemoryuiSaver
from tests.api_support import make_key
from tests.claude_sdk_support import run_async
from tests.provider_oracle import invalid_renderings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("answer_shapes")]

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def key():
    return make_key(["read", "write"], name="langgraph")


@pytest.mark.slow
def test_it_passes_the_langgraph_checkpoint_conformance_suite_with_every_capability(live_server, key):
    @checkpointer_test(name="MemoryuiSaver")
    async def memoryui_saver():
        saver = MemoryuiSaver(url=live_server.url, api_key=key, retries=FAST)
        yield saver
        await saver.aclose()

    report = run_async(validate(memoryui_saver))
    failures = {name: result.failures for name, result in report.results.items() if not result.passed}
    assert report.passed_all_base(), failures
    # Every extended capability is implemented, so each must have run and passed too.
    for capability in Capability:
        result = report.results[capability.value]
        assert result.passed is True and result.tests_passed > 0 and not result.tests_failed, (capability, failures)
    print({name: (r.tests_passed, r.tests_failed) for name, r in report.results.items()})


# -- a real graph ------------------------------------------------------------------------

TEMPERATURES = {"Paris": 14, "Oslo": 3}


@tool
def get_weather(city: str) -> str:
    """The temperature in a city, in °C."""
    return f"{city}: {TEMPERATURES[city]} °C, light rain"


def weather_agent(saver, replies):
    """A tool-calling agent: the model node answers from LangChain's fake chat model (its
    replies given in order), the tools node runs the calls; it stops before running a tool."""
    model = GenericFakeChatModel(messages=iter(replies))

    def agent(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState):
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([get_weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver, interrupt_before=["tools"])


def rows(conversation_id):
    return [json.loads(c) for c in Message.objects.filter(conversation_id=conversation_id).order_by("position")
            .values_list("content", flat=True)]


def shape(rows_):
    return [(r["kind"], r.get("content"), [c["name"] for c in r.get("tool_calls", [])]) for r in rows_]


def test_a_graph_run_interrupted_resumed_and_replayed_reads_as_a_conversation_with_a_fork(live_server, key):
    saver = MemoryuiSaver(url=live_server.url, api_key=key, retries=FAST)
    call = {"id": "call_paris", "name": "get_weather", "args": {"city": "Paris"}, "type": "tool_call"}
    graph = weather_agent(saver, [
        AIMessage(content="", tool_calls=[call], id="ai-1"),
        AIMessage(content="It is 14 °C in Paris, with light rain.", id="ai-2"),
        AIMessage(content="Paris: 14 °C. Take an umbrella.", id="ai-3"),
    ])
    config = {"configurable": {"thread_id": "weather-1"}}

    graph.invoke({"messages": [HumanMessage("What is the weather in Paris?", id="h-1")]}, config)
    interrupted = graph.get_state(config)
    assert interrupted.next == ("tools",)  # stopped before running the tool
    thread = Conversation.objects.get(namespace="langgraph", meta__langgraph__thread_id="weather-1")
    assert shape(rows(thread.pk)) == [("user", "What is the weather in Paris?", []),
                                      ("assistant", None, ["get_weather"])]

    graph.invoke(None, config)  # resume: the tool runs, the model answers
    done = graph.get_state(config)
    assert done.next == () and done.values["messages"][-1].content == "It is 14 °C in Paris, with light rain."
    record = rows(thread.pk)
    assert shape(record) == [
        ("user", "What is the weather in Paris?", []),
        ("assistant", None, ["get_weather"]),
        ("tool", "Paris: 14 °C, light rain", []),
        ("assistant", "It is 14 °C in Paris, with light rain.", []),
    ]
    assert record[1]["tool_calls"] == [{"id": "call_paris", "name": "get_weather", "arguments": {"city": "Paris"}}]
    assert record[2]["tool_call_id"] == "call_paris"

    # What the saver gives back is what the graph put: the state, message for message.
    assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == done.values["messages"]

    # Time travel: replay from the checkpoint where the tool's answer was in and the model not yet asked.
    before_answer = next(s for s in graph.get_state_history(config)
                         if s.next == ("agent",) and len(s.values["messages"]) == 3)
    graph.invoke(None, before_answer.config)
    replayed = graph.get_state(config)
    assert replayed.values["messages"][-1].content == "Paris: 14 °C. Take an umbrella."

    # The original conversation is untouched; the replay is a fork at the tool's row.
    assert shape(rows(thread.pk)) == shape(record)
    fork = Conversation.objects.get(parent_id=thread.pk, parent_relation="fork")
    assert fork.forked_from_position == 2
    assert shape(rows(fork.pk)) == shape(record[:3]) + [("assistant", "Paris: 14 °C. Take an umbrella.", [])]

    # Both views are what a provider accepts as a request.
    with Memoryui(live_server.url, api_key=key, retries=FAST) as mui:
        for conversation in (thread, fork):
            view = mui.active(str(conversation.pk))
            handoff = (view.get("handoff") or {}).get("content")
            assert invalid_renderings(handoff, [item["message"] for item in view["items"]]) == {}
    saver.close()


def test_the_async_surface_runs_the_same_graph(live_server, key):
    saver = MemoryuiSaver(url=live_server.url, api_key=key, retries=FAST)
    graph = weather_agent(saver, [AIMessage(content="Hello! Ask me about a city.", id="ai-1")])
    config = {"configurable": {"thread_id": "async-1"}}

    async def run():
        await graph.ainvoke({"messages": [HumanMessage("hi", id="h-1")]}, config)
        state = await graph.aget_state(config)
        history = [s async for s in graph.aget_state_history(config)]
        await saver.aclose()
        return state, history

    state, history = run_async(run())
    assert [m.content for m in state.values["messages"]] == ["hi", "Hello! Ask me about a city."]
    assert len(history) == 3  # input, after the agent, and the start
    thread = Conversation.objects.get(namespace="langgraph", meta__langgraph__thread_id="async-1")
    assert shape(rows(thread.pk)) == [("user", "hi", []), ("assistant", "Hello! Ask me about a city.", [])]


def test_a_subgraph_reads_as_a_child_conversation_of_its_thread(live_server, key):
    saver = MemoryuiSaver(url=live_server.url, api_key=key, retries=FAST)
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Researched: Oslo is 3 °C.", id="ai-sub")]))

    def research(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    inner = StateGraph(MessagesState)
    inner.add_node("research", research)
    inner.add_edge(START, "research")
    outer = StateGraph(MessagesState)
    outer.add_node("researcher", inner.compile(checkpointer=True))
    outer.add_edge(START, "researcher")
    graph = outer.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "nested-1"}}

    graph.invoke({"messages": [HumanMessage("How cold is Oslo?", id="h-1")]}, config)

    thread = Conversation.objects.get(namespace="langgraph", meta__langgraph__thread_id="nested-1",
                                      meta__langgraph__checkpoint_ns="")
    child = Conversation.objects.get(parent_id=thread.pk, parent_relation="subagent")
    assert child.meta["langgraph"]["checkpoint_ns"].startswith("researcher")
    assert shape(rows(child.pk)) == [("user", "How cold is Oslo?", []), ("assistant", "Researched: Oslo is 3 °C.", [])]
    assert shape(rows(thread.pk))[-1] == ("assistant", "Researched: Oslo is 3 °C.", [])
    saver.close()


def test_it_refuses_a_blob_that_is_not_base64_naming_the_field_and_stores_nothing(client, key):
    body = {"thread_id": "t", "checkpoint_id": "1", "checkpoint": {"type": "msgpack", "data": "not base64!"},
            "metadata": {"type": "msgpack", "data": ""}}
    answer = client.post("/api/v1/langgraph/checkpoints", data=json.dumps(body), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {key}")
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] == "checkpoint.data"
    assert not Conversation.objects.filter(namespace="langgraph").exists()


def test_it_needs_the_write_scope_to_keep_a_checkpoint(client):
    reader = make_key(["read"], name="reader")
    body = {"thread_id": "t", "checkpoint_id": "1", "checkpoint": {"type": "msgpack", "data": ""},
            "metadata": {"type": "msgpack", "data": ""}}
    answer = client.post("/api/v1/langgraph/checkpoints", data=json.dumps(body), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {reader}")
    assert answer.status_code == 403


def test_a_message_memoryui_cannot_show_as_a_chat_row_is_a_note_and_the_checkpoint_is_kept(live_server, key):
    saver = MemoryuiSaver(url=live_server.url, api_key=key, retries=FAST)
    odd = ToolMessage(content="3 °C", tool_call_id="", id="t-odd")  # answers no call
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [odd]}
    config = saver.put({"configurable": {"thread_id": "odd-1", "checkpoint_ns": ""}}, checkpoint,
                       {"source": "input", "step": -1}, {})

    assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == [odd]
    thread = Conversation.objects.get(namespace="langgraph", meta__langgraph__thread_id="odd-1")
    [row] = rows(thread.pk)
    assert row["kind"] == "note" and row["text"].startswith("[tool] not shown as a chat row")
    saver.close()


@pytest.mark.parametrize("name", ["thread_id", "checkpoint_ns", "checkpoint_id", "before"])
def test_a_listing_refuses_a_nul_in_its_query_naming_it(client, name):
    reader = make_key(["read"], name="reader")
    answer = client.get("/api/v1/langgraph/checkpoints", {name: "a\x00b"}, HTTP_AUTHORIZATION=f"Bearer {reader}")
    assert answer.status_code == 422 and answer.json()["error"]["field"] == name
