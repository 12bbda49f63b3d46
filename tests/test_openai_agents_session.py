"""The OpenAI Agents SDK's Session kept in memoryui (clients/python, `[openai-agents]` extra),
driven by the SDK's own Runner against a live server, with a Model written here (no
network): three turns with tool calls, then what a person sees, then checkpoint, pop
and clear, which destroy nothing."""

import json

import pytest
from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from django.urls import reverse
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary

from conversations.models import Checkpoint, Conversation, Message
from memoryui_client import Memoryui, Retries
from memoryui_client.integrations.openai_agents import MemoryuiSession
from tests.api_support import login_as, make_key
from tests.claude_sdk_support import run_async

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("answer_shapes")]

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)
TEMPERATURES = {"Paris": 14, "Oslo": 3}


@function_tool
def get_weather(city: str) -> str:
    """The temperature in a city, in °C."""
    return f"{city}: {TEMPERATURES[city]} °C, light rain"


class WeatherModel(Model):
    """Answers like a model would: a tool call for a city it was asked about, then a reply
    from the tool's output. It records every input it was given."""

    def __init__(self):
        self.inputs: list[list] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        items = [input] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        n = len(self.inputs)
        last = items[-1]
        if last.get("type") == "function_call_output":
            text = f"It is {last['output']} there."
            return _response(_message(f"msg_{n}", text))
        question = last["content"] if isinstance(last.get("content"), str) else ""
        city = next((c for c in TEMPERATURES if c in question), None)
        if city is None:
            warmest = max(TEMPERATURES, key=TEMPERATURES.get)
            return _response(_message(f"msg_{n}", f"{warmest} is warmer, at {TEMPERATURES[warmest]} °C."))
        return _response(ResponseFunctionToolCall(type="function_call", id=f"fc_{n}", call_id=f"call_{city}",
                                                  name="get_weather", arguments=json.dumps({"city": city}),
                                                  status="completed"))

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("this test runs without streaming")


def _message(item_id, text):
    return ResponseOutputMessage(id=item_id, type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def _response(item):
    return ModelResponse(output=[item], usage=Usage(), response_id=None)


@pytest.fixture
def key():
    return make_key(["read", "write"], name="agents-sdk")


def rows(conversation_id):
    return [json.loads(c) for c in Message.objects.filter(conversation_id=conversation_id).order_by("position")
            .values_list("content", flat=True)]


def test_three_runner_turns_with_tool_calls_are_kept_item_by_item_and_read_as_a_conversation(live_server, key, client):
    model = WeatherModel()
    agent = Agent(name="Weather", instructions="Answer with the weather tool.", model=model, tools=[get_weather])
    session = MemoryuiSession("chat-7f2", url=live_server.url, api_key=key, retries=FAST)
    added: list = []
    original_add = session.add_items

    async def spy(items):
        added.extend(json.loads(json.dumps(items, default=lambda v: v.model_dump(mode="json", exclude_unset=True))))
        await original_add(items)

    session.add_items = spy
    config = RunConfig(tracing_disabled=True)

    async def three_turns():
        outputs = []
        for question in ("What's the weather in Paris?", "And in Oslo?", "Which one is warmer?"):
            result = await Runner.run(agent, question, session=session, run_config=config)
            outputs.append(result.final_output)
        items = await session.get_items()
        latest = await session.get_items(limit=2)
        await session.close()
        return outputs, items, latest

    outputs, items, latest = run_async(three_turns())
    assert outputs == ["It is Paris: 14 °C, light rain there.", "It is Oslo: 3 °C, light rain there.",
                       "Paris is warmer, at 14 °C."]
    # The session gave the model the earlier turns: the third call saw both tool results.
    assert sum(1 for i in model.inputs[-1] if i.get("type") == "function_call_output") == 2
    # Each item as it was added, deep-equal, in order.
    assert items == added and latest == added[-2:]
    assert [i.get("type", "message") for i in items] == [
        "message", "function_call", "function_call_output", "message"] * 2 + ["message", "message"]

    conversation = Conversation.objects.get(namespace="openai-agents", external_id="chat-7f2")
    assert conversation.title == "What's the weather in Paris?"
    got = rows(conversation.pk)
    assert [m["kind"] for m in got] == ["user", "assistant", "tool", "assistant"] * 2 + ["user", "assistant"]
    assert got[1]["tool_calls"] == [{"id": "call_Paris", "name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert got[2]["tool_call_id"] == "call_Paris" and got[2]["content"] == "Paris: 14 °C, light rain"
    assert got[-1]["content"] == "Paris is warmer, at 14 °C."

    # What a person sees: the conversation page, readable, with the tool call and its result.
    login_as(client, "auditor")
    page = client.get(reverse("conversation", args=[conversation.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    for text in ("What&#x27;s the weather in Paris?", "get_weather", "Paris: 14 °C, light rain",
                 "Paris is warmer, at 14 °C."):
        assert text in html, text


def test_every_kind_of_item_is_kept_as_given_and_mapped_to_its_row(live_server, key):
    session = MemoryuiSession("kinds-1", url=live_server.url, api_key=key, retries=FAST)
    items = [
        {"role": "developer", "content": "Answer in one sentence."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Is it raining in Oslo?"}]},
        # The SDK's own item objects are accepted as they are (stored as their JSON).
        ResponseReasoningItem(id="rs_1", type="reasoning",
                              summary=[Summary(type="summary_text", text="Oslo: check the weather tool.")]),
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA-opaque"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "Oslo weather"}},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Oslo"}', "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": "Oslo: 3 °C, light rain"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Yes, light rain at 3 °C.", "annotations": []}]},
    ]

    async def run():
        await session.add_items(items)
        out = await session.get_items()
        await session.close()
        return out

    got = run_async(run())
    as_json = json.loads(json.dumps(items, default=lambda v: v.model_dump(mode="json", exclude_unset=True)))
    assert got == as_json  # every item, the reasoning without a summary and the web search too, as given
    conversation = Conversation.objects.get(namespace="openai-agents", external_id="kinds-1")
    stored = rows(conversation.pk)
    # Rows a person reads: an encrypted reasoning item is kept, not shown; the hosted web search
    # shows as a call and its outcome, as the model's own tool calls do.
    assert [m["kind"] for m in stored] == ["system", "user", "thought", "assistant", "tool", "assistant", "tool",
                                           "assistant"]
    assert stored[0]["content"] == "Answer in one sentence."
    assert stored[1]["content"] == "Is it raining in Oslo?" and stored[2]["text"] == "Oslo: check the weather tool."
    assert stored[3]["tool_calls"] == [{"id": "ws_1", "name": "web_search",
                                        "arguments": {"type": "search", "query": "Oslo weather"}}]
    assert stored[4]["tool_call_id"] == "ws_1" and stored[4]["meta"]["openai_responses"]["hosted"] == "web_search_call"
    assert stored[5]["tool_calls"] == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    assert stored[7]["content"] == "Yes, light rain at 3 °C."


def test_get_items_with_a_checkpoint_is_the_active_view_with_the_summary_first(live_server, key):
    session = MemoryuiSession("fold-1", url=live_server.url, api_key=key, retries=FAST)
    first = [{"role": "user", "content": f"question {i}"} for i in range(4)]

    async def run():
        await session.add_items(first)
        with Memoryui(live_server.url, api_key=key, retries=FAST) as mui:  # a fold made in memoryui (or by MCP)
            mui.checkpoint(session.conversation_id, position=1, summary="The user asked questions 0 and 1.")
        await session.add_items([{"role": "user", "content": "question 4"}])
        view, limited = await session.get_items(), await session.get_items(limit=1)
        # A compaction item from the SDK folds too, and comes back as itself.
        compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"}
        await session.add_items([compaction, {"role": "user", "content": "after the compaction"}])
        return view, limited, await session.get_items(), compaction

    view, limited, after_compaction, compaction = run_async(run())
    assert view == [{"role": "system", "content": "The user asked questions 0 and 1."}, first[2], first[3],
                    {"role": "user", "content": "question 4"}]
    assert limited == [{"role": "user", "content": "question 4"}]
    assert after_compaction == [compaction, {"role": "user", "content": "after the compaction"}]
    conversation = Conversation.objects.get(external_id="fold-1")
    assert list(Checkpoint.objects.filter(conversation=conversation).order_by("id")
                .values_list("message_position", flat=True)) == [1, 4]


def test_pop_item_and_clear_session_destroy_nothing_and_the_record_shows_them(live_server, key, client):
    session = MemoryuiSession("undo-3", url=live_server.url, api_key=key, retries=FAST)
    items = [{"role": "user", "content": "book a table"}, {"role": "assistant", "content": "For how many?"},
             {"role": "user", "content": "four, at eight"}]

    async def run():
        await session.add_items(items)
        first_id = session.conversation_id
        popped = await session.pop_item()
        after_pop = await session.get_items()
        same_id = session.conversation_id
        await session.add_items([{"role": "user", "content": "four people, at half past seven"}])
        await session.clear_session()
        after_clear = await session.get_items()
        await session.add_items([{"role": "user", "content": "start over: a table for two"}])
        cleared_id = session.conversation_id
        empty = MemoryuiSession("never-used", url=live_server.url, api_key=key, retries=FAST)
        nothing = await empty.pop_item()
        await empty.clear_session()
        await session.close(), await empty.close()
        return first_id, popped, after_pop, same_id, after_clear, cleared_id, nothing

    first_id, popped, after_pop, same_id, after_clear, cleared_id, nothing = run_async(run())
    assert popped == items[-1] and after_pop == items[:-1] and after_clear == [] and nothing is None
    # The pop forked nothing: the session stayed in its conversation, which keeps every row and
    # says what was taken back (a note row, shown in the full record).
    assert same_id == first_id
    stored = rows(first_id)
    assert [m["kind"] for m in stored] == ["user", "assistant", "user", "note", "user"]
    assert [m.get("content") for m in stored if m["kind"] != "note"] == [
        "book a table", "For how many?", "four, at eight", "four people, at half past seven"]
    assert stored[3]["text"].startswith("retracted by pop_item: item 2")
    assert stored[3]["meta"] == {"retracts": {"item": 2, "position": 2}, "by": "pop_item"}
    restart = Conversation.objects.get(pk=cleared_id)
    assert restart.parent_id == Conversation.objects.get(pk=first_id).pk and restart.forked_from_position is None
    assert restart.title.endswith("(cleared)") and restart.external_id == "undo-3#1"
    assert [m["content"] for m in rows(cleared_id)] == ["start over: a table for two"]
    assert not Conversation.objects.filter(external_id__startswith="never-used").exists()
    assert Conversation.objects.filter(namespace="openai-agents", external_id__startswith="undo-3").count() == 2
    # A person sees the lineage (the restart under the first conversation) and the retraction.
    login_as(client, "auditor")
    html = client.get(reverse("conversation", args=[cleared_id])).content.decode()
    assert "started over, no rows kept" in html
    tree = client.get(reverse("conversation", args=[first_id])).content.decode()
    assert "(cleared)" in tree and "retracted by pop_item" in tree
