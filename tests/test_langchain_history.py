"""LangChain's BaseChatMessageHistory kept in memoryui (clients/python,
`memoryui_client.integrations.langchain`), against a live server: messages come back as
added, rows read as the conversation, a fold made in memoryui shows in `messages`, and
`clear` erases nothing."""

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from conversations import store
from conversations.models import Conversation, Message
from memoryui_client import Memoryui, Retries
from memoryui_client.integrations.langchain import MemoryuiChatMessageHistory
from tests.api_support import make_key
from tests.provider_oracle import invalid_renderings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("answer_shapes")]

FAST = Retries(attempts=4, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def key():
    return make_key(["read", "write"], name="langchain")


def added():
    call = {"id": "call_oslo", "name": "get_weather", "args": {"city": "Oslo"}, "type": "tool_call"}
    return [
        SystemMessage("Answer in one sentence.", id="s-1"),
        HumanMessage("How cold is Oslo?", id="h-1"),
        AIMessage("", tool_calls=[call], id="ai-1", usage_metadata={"input_tokens": 12, "output_tokens": 5,
                                                                     "total_tokens": 17}),
        ToolMessage("Oslo: 3 °C", tool_call_id="call_oslo", name="get_weather", id="t-1"),
        AIMessage("It is 3 °C in Oslo.", id="ai-2"),
    ]


def rows(conversation_id):
    return [json.loads(c) for c in Message.objects.filter(conversation_id=conversation_id).order_by("position")
            .values_list("content", flat=True)]


def test_it_gives_back_the_messages_it_was_given_and_they_read_as_rows(live_server, key):
    history = MemoryuiChatMessageHistory("chat-1", url=live_server.url, api_key=key, retries=FAST)
    assert history.messages == []
    history.add_messages(added()[:2])
    history.add_messages(added()[2:])

    assert history.messages == added()
    conversation = Conversation.objects.get(namespace="langchain", external_id="chat-1")
    record = rows(conversation.pk)
    assert [r["kind"] for r in record] == ["system", "user", "assistant", "tool", "assistant"]
    assert record[2]["tool_calls"] == [{"id": "call_oslo", "name": "get_weather", "arguments": {"city": "Oslo"}}]
    assert record[2]["meta"]["usage"]["total_tokens"] == 17
    assert record[3]["tool_call_id"] == "call_oslo"
    with Memoryui(live_server.url, api_key=key, retries=FAST) as mui:
        view = mui.active(str(conversation.pk))
    assert invalid_renderings(None, [item["message"] for item in view["items"]]) == {}
    history.close()


def test_a_fold_made_in_memoryui_puts_its_summary_first(live_server, key):
    history = MemoryuiChatMessageHistory("chat-2", url=live_server.url, api_key=key, retries=FAST)
    history.add_messages(added()[1:])
    store.checkpoint_at(conversation_id=history.conversation_id, position=3, summary="Oslo is at 3 °C.")
    history.add_messages([HumanMessage("And Paris?", id="h-2")])

    assert history.messages == [SystemMessage("Oslo is at 3 °C."), HumanMessage("And Paris?", id="h-2")]
    history.close()


def test_clear_starts_an_empty_generation_and_keeps_the_old_one(live_server, key):
    history = MemoryuiChatMessageHistory("chat-3", url=live_server.url, api_key=key, retries=FAST)
    history.add_messages(added()[1:2])
    first = history.conversation_id
    history.clear()

    assert history.messages == []
    assert history.conversation_id != first
    history.add_messages([HumanMessage("A new topic.", id="h-9")])
    assert history.messages == [HumanMessage("A new topic.", id="h-9")]
    assert [r["content"] for r in rows(first)] == ["How cold is Oslo?"]  # the old generation is kept
    cleared = Conversation.objects.get(pk=history.conversation_id)
    assert str(cleared.parent_id) == first and cleared.external_id == "chat-3#1"
    history.close()


def test_it_refuses_a_message_without_its_type_naming_the_field(client, key):
    body = {"session_id": "chat-4", "messages": [{"content": "hi"}]}
    answer = client.post("/api/v1/langchain/history/messages", data=json.dumps(body),
                         content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "messages.0.type"
    assert not Conversation.objects.filter(namespace="langchain").exists()
