"""Pydantic AI message history kept in memoryui (clients/python, `[pydantic-ai]` extra), driven
by Pydantic AI's own Agent.run on its TestModel and FunctionModel (no network), against a
live server: several runs feeding `message_history`, an exact round trip, readable rows."""

import asyncio
import json

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from conversations.models import Conversation, Message
from memoryui_client import Retries
from memoryui_client.integrations.pydantic_ai import MemoryuiMessageHistory
from tests.api_support import make_key
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.django_db(transaction=True)
FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)
STOCK = {"lamp": 3, "desk": 0}


@pytest.fixture
def key():
    return make_key(["read", "write"], name="pydantic-ai")


def history(live_server, key, history_id="chat-1"):
    return MemoryuiMessageHistory(history_id, url=live_server.url, api_key=key, retries=FAST)


def rows(conversation_id) -> list[dict]:
    return [json.loads(c) for c in Message.objects.filter(conversation_id=conversation_id).order_by("position")
            .values_list("content", flat=True)]


def assert_provider_valid(messages: list[dict]):
    assert invalid_renderings(None, messages) == {}


def shopkeeper(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks the stock tool about an item named in the last prompt, then answers from its result."""
    last = messages[-1].parts[-1]
    if last.part_kind == "tool-return":
        return ModelResponse(parts=[TextPart(f"We have {last.content} of those.")], model_name="shop-1")
    item = next((name for name in STOCK if name in str(last.content)), None)
    if item is None:
        return ModelResponse(parts=[TextPart("Anything else?")], model_name="shop-1")
    return ModelResponse(parts=[TextPart("Let me check."), ToolCallPart("stock", {"item": item}, f"call_{item}")],
                         model_name="shop-1")


def shop_agent() -> Agent:
    agent = Agent(FunctionModel(shopkeeper), instructions="You run a small shop.")

    @agent.tool_plain
    def stock(item: str) -> int:
        """How many of an item are in stock."""
        return STOCK[item]

    return agent


def test_three_runs_round_trip_exactly_and_read_as_a_conversation(live_server, key):
    agent = shop_agent()
    saved = history(live_server, key)
    assert saved.load() == []
    for prompt in ("Do you have a lamp?", "And a desk?", "Thanks!"):
        result = agent.run_sync(prompt, message_history=saved.load())
        saved.save(result.all_messages())
        assert saved.load() == result.all_messages()  # deep-equal ModelMessages, timestamps and all
    loaded = saved.load()
    assert len(loaded) == 10
    saved.save(loaded)  # nothing new: nothing written
    conversation = Conversation.objects.get(namespace="pydantic-ai", external_id="chat-1")
    stored = rows(conversation.pk)
    assert [r["kind"] for r in stored] == ["system", "user", "assistant", "tool", "assistant",
                                           "user", "assistant", "tool", "assistant", "user", "assistant"]
    assert stored[0]["content"] == "You run a small shop."  # instructions, once while they stay the same
    assert stored[2]["content"] == "Let me check."
    assert stored[2]["tool_calls"] == [{"id": "call_lamp", "name": "stock", "arguments": {"item": "lamp"}}]
    assert stored[3]["tool_call_id"] == "call_lamp" and stored[3]["content"] == "3"
    assert stored[4]["content"] == "We have 3 of those." and stored[4]["meta"]["model"] == "function:shopkeeper:"
    assert_provider_valid(stored)


def test_test_model_runs_with_tools_round_trip_through_append_and_async(live_server, key):
    agent = Agent(TestModel(), system_prompt="Be terse.")

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"sunny in {city}"

    saved = history(live_server, key, "async-1")

    async def turns():
        first = await agent.run("Weather?", message_history=await saved.aload())
        await saved.aappend(first.new_messages())
        second = await agent.run("Again?", message_history=await saved.aload())
        await saved.asave(second.all_messages())
        assert await saved.aload() == second.all_messages()
        return second.all_messages()

    everything = asyncio.run(turns())
    assert saved.load() == everything
    stored = rows(Conversation.objects.get(namespace="pydantic-ai", external_id="async-1").pk)
    assert stored[0] == {"kind": "system", "content": "Be terse.", "meta": stored[0]["meta"]}
    assert sum(1 for r in stored if r["kind"] == "tool") >= 1  # TestModel calls every tool once per history
    assert_provider_valid(stored)


def test_a_history_that_does_not_continue_the_stored_one_is_refused(live_server, key):
    agent = shop_agent()
    saved = history(live_server, key, "diverge")
    saved.save(agent.run_sync("Do you have a lamp?").all_messages())
    other = agent.run_sync("And a desk?").all_messages()  # a run that did not start from the stored history
    with pytest.raises(ValueError, match="does not begin with"):
        saved.save(other)
    assert len(saved.load()) == 4


def test_an_append_lands_after_what_another_writer_stored_meanwhile(live_server, key):
    agent = shop_agent()
    one, two = history(live_server, key, "race"), history(live_server, key, "race")
    one.save(agent.run_sync("Thanks!").all_messages())
    seen_by_two = two.load()
    first = agent.run_sync("Do you have a lamp?", message_history=seen_by_two).new_messages()
    one.append(first)
    later = agent.run_sync("Bye", message_history=seen_by_two).new_messages()
    two.append(later)  # planned on an older read: appended after the other writer's messages, not over them
    assert two.load() == seen_by_two + first + later


def test_a_tools_model_retry_is_stored_as_a_tool_error(live_server, key):
    # Since pydantic-ai 2.68 the tool's ModelRetry comes back as a ToolReturnPart whose outcome is
    # "retried" (no RetryPromptPart): the row the model's error was is a tool row with is_error.
    from pydantic_ai import ModelRetry

    agent = Agent(TestModel())
    tries = []

    @agent.tool_plain
    def weather(city: str) -> str:
        tries.append(city)
        if len(tries) == 1:
            raise ModelRetry("unknown city; try Oslo")
        return "sunny"

    result = agent.run_sync("What is the weather?")
    saved = history(live_server, key, "retries")
    saved.save(result.all_messages())
    stored = rows(saved.conversation_id)
    tools = [r for r in stored if r["kind"] == "tool"]
    assert [t.get("is_error", False) for t in tools] == [True, False]
    assert "unknown city; try Oslo" in tools[0]["content"] and tools[1]["content"] == "sunny"
    assert tools[0]["meta"]["outcome"] == "retried"
    assert saved.load() == result.all_messages()
    assert_provider_valid(stored)
