"""The active view in OpenAI's and Anthropic's request shapes (memoryui_client.formats)."""

import pytest

from memoryui_client import to_anthropic_messages, to_openai_messages
from tests.provider_oracle import anthropic_body, assert_valid_anthropic, assert_valid_openai, openai_body

VIEW = {
    "checkpoint": {"position": 3, "summary": "Customer wants a refund for order 7."},
    "handoff": {"kind": "system", "content": "Customer wants a refund for order 7.", "meta": {"checkpoint": {}}},
    "items": [{"position": p, "message": m} for p, m in enumerate([
        {"kind": "user", "content": "Any news?"},
        {"kind": "thought", "text": "I should check the order first."},
        {"kind": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "name": "order_status", "arguments": {"order": 7}},
            {"id": "c2", "name": "refund_status", "arguments": "{\"order\": 7}"}]},
        {"kind": "tool", "tool_call_id": "c1", "content": "delivered"},
        {"kind": "tool", "tool_call_id": "c2", "content": "no such order", "is_error": True},
        {"kind": "assistant", "content": [{"type": "text", "text": "Refund is on its way."}]},
        {"kind": "system", "content": "Be brief."},
        {"kind": "user", "content": [{"type": "text", "text": "Thanks"},
                                     {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}}]},
    ], start=4)],
}


def test_openai_shape():
    messages = to_openai_messages(VIEW)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "system",
                                            "user"]
    assert messages[0]["content"] == "Customer wants a refund for order 7."
    calls = messages[2]["tool_calls"]
    assert calls[0] == {"id": "c1", "type": "function",
                        "function": {"name": "order_status", "arguments": '{"order": 7}'}}
    assert calls[1]["function"]["arguments"] == '{"order": 7}'
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "delivered"}
    # An Anthropic image block is an image_url part for OpenAI, which has no `image` part.
    assert messages[7]["content"][1] == {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    assert_valid_openai(openai_body(messages))


def test_openai_keeps_the_journal_as_tagged_system_text_when_asked():
    messages = to_openai_messages(VIEW, journal="text")
    assert {"role": "system", "content": "[thought] I should check the order first."} in messages
    assert messages.index({"role": "system", "content": "[thought] I should check the order first."}) == 2


def test_anthropic_shape():
    request = to_anthropic_messages(VIEW)
    assert request["system"] == "Customer wants a refund for order 7.\n\nBe brief."
    turns = request["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]
    assert turns[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "c1", "name": "order_status", "input": {"order": 7}},
        {"type": "tool_use", "id": "c2", "name": "refund_status", "input": {"order": 7}},
    ]
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "delivered"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "no such order", "is_error": True},
    ]
    assert turns[4]["content"][1]["type"] == "image"
    assert_valid_anthropic(anthropic_body(request))


def test_anthropic_merges_a_kept_journal_entry_into_the_user_turn():
    turns = to_anthropic_messages(VIEW, journal="text")["messages"]
    assert turns[0]["content"] == [{"type": "text", "text": "Any news?"},
                                   {"type": "text", "text": "[thought] I should check the order first."}]


def test_a_view_without_a_checkpoint_has_no_system_for_anthropic():
    view = {"handoff": None, "items": [{"message": {"kind": "user", "content": "hi"}}]}
    assert to_anthropic_messages(view) == {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    assert to_openai_messages(view) == [{"role": "user", "content": "hi"}]


def test_an_unknown_journal_mode_is_refused():
    with pytest.raises(ValueError):
        to_openai_messages(VIEW, journal="keep")
