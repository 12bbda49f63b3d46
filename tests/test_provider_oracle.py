"""The judge itself: tests/provider_oracle.py accepts what the providers accept and
refuses each thing they refuse. A judge that passes everything would make every
validity test in the suite worthless."""

import copy

import pytest

from tests.provider_oracle import anthropic_problems, gemini_problems, openai_problems

OPENAI_OK = {"model": "gpt-4o", "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Refund order 7"},
                                 {"type": "image_url", "image_url": {"url": "https://x/a.png"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "order_status", "arguments": "{\"order\": 7}"}},
        {"id": "c2", "type": "function", "function": {"name": "refund", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "sent"},
    {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "delivered"}]},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Thanks"},
]}

ANTHROPIC_OK = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "Be brief.", "messages": [
    {"role": "user", "content": "Refund order 7"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "order_status", "input": {"order": 7}},
        {"type": "tool_use", "id": "toolu_2", "name": "refund", "input": {}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "sent"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such order", "is_error": True},
        {"type": "text", "text": "[did] refund sent"}]},
    {"role": "assistant", "content": "Done."},
]}


def _with(body, change):
    body = copy.deepcopy(body)
    change(body)
    return body


GEMINI_OK = {"systemInstruction": {"parts": [{"text": "Be brief."}]}, "contents": [
    {"role": "user", "parts": [{"text": "Refund order 7"},
                               {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]},
    {"role": "model", "parts": [
        {"text": "Checking."},
        {"functionCall": {"id": "c1", "name": "order_status", "args": {"order": 7}}},
        {"functionCall": {"id": "c2", "name": "refund", "args": {}}}]},
    {"role": "user", "parts": [
        {"functionResponse": {"id": "c2", "name": "refund", "response": {"output": "sent"}}},
        {"functionResponse": {"id": "c1", "name": "order_status", "response": {"error": "no such order"}}},
        {"text": "[did] refund sent"}]},
    {"role": "model", "parts": [{"text": "Done."}]},
]}


def test_it_accepts_valid_bodies():
    assert openai_problems(OPENAI_OK) == []
    assert anthropic_problems(ANTHROPIC_OK) == []
    assert gemini_problems(GEMINI_OK) == []


OPENAI_BAD = {
    "an unknown top-level key": lambda b: b.update(bogus=1),
    "no model": lambda b: b.pop("model"),
    "an unknown key in a message": lambda b: b["messages"][0].update(kind="system"),
    "an unknown role": lambda b: b["messages"][0].update(role="note"),
    "a number as content": lambda b: b["messages"][6].update(content=5),
    "an Anthropic image block in a user message": lambda b: b["messages"][1]["content"].append(
        {"type": "image", "source": {"type": "url", "url": "https://x"}}),
    "arguments as an object": lambda b: b["messages"][2]["tool_calls"][0]["function"].update(arguments={}),
    "a tool call without type": lambda b: b["messages"][2]["tool_calls"][0].pop("type"),
    "a tool message without tool_call_id": lambda b: b["messages"][3].pop("tool_call_id"),
    "a call left unanswered": lambda b: b["messages"].pop(3),
    "calls split over two assistant messages": lambda b: b["messages"].__setitem__(slice(2, 3), [
        {"role": "assistant", "content": None, "tool_calls": [b["messages"][2]["tool_calls"][0]]},
        {"role": "assistant", "content": None, "tool_calls": [b["messages"][2]["tool_calls"][1]]}]),
    "a system message between the calls and their results": lambda b: b["messages"].insert(
        3, {"role": "system", "content": "[did] refund sent"}),
    "a tool result with no call": lambda b: b["messages"].insert(1, {"role": "tool", "tool_call_id": "c1",
                                                                     "content": "x"}),
    "a result answering an unknown id": lambda b: b["messages"][3].update(tool_call_id="c9"),
    "a result after the block ended": lambda b: b["messages"].insert(6, {"role": "tool", "tool_call_id": "c1",
                                                                         "content": "again"}),
    "no messages": lambda b: b.update(messages=[]),
    "a string as stream flag": lambda b: b.update(stream="no"),
}


@pytest.mark.parametrize("name", list(OPENAI_BAD))
def test_it_refuses_each_invalid_openai_body(name):
    assert openai_problems(_with(OPENAI_OK, OPENAI_BAD[name])), name


ANTHROPIC_BAD = {
    "an unknown top-level key": lambda b: b.update(bogus=1),
    "no max_tokens": lambda b: b.pop("max_tokens"),
    "an unknown key in a message": lambda b: b["messages"][0].update(name="x"),
    "a system message in messages": lambda b: b["messages"].insert(0, {"role": "system", "content": "s"}),
    "starting with the assistant": lambda b: b["messages"].insert(0, {"role": "assistant", "content": "hi"}),
    "two user messages in a row": lambda b: b["messages"].insert(0, {"role": "user", "content": "hi"}),
    "an OpenAI image_url block": lambda b: b["messages"][2]["content"].append(
        {"type": "image_url", "image_url": {"url": "https://x"}}),
    "tool_use input as a string": lambda b: b["messages"][1]["content"][1].update(input="{}"),
    "text before the tool results": lambda b: b["messages"][2]["content"].insert(
        0, {"type": "text", "text": "[did] refund sent"}),
    "a tool_use left unanswered": lambda b: b["messages"][2]["content"].pop(1),
    "a tool_result with no tool_use": lambda b: b["messages"][0].update(
        content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]),
    "a tool_use id with a colon": lambda b: (b["messages"][1]["content"][1].update(id="function:x"),
                                             b["messages"][2]["content"][1].update(tool_use_id="function:x")),
    "an empty text block": lambda b: b["messages"][0].update(content=[{"type": "text", "text": " "}]),
    "an empty message": lambda b: b["messages"][0].update(content=[]),
    "a tool_result in an assistant message": lambda b: b["messages"][3].update(
        content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]),
    "a final assistant message ending in white space": lambda b: b["messages"][3].update(content="Done. "),
    "the results in a later user message": lambda b: b["messages"].__setitem__(slice(2, 2), [
        {"role": "user", "content": "wait"}, {"role": "assistant", "content": "ok"}]),
}


@pytest.mark.parametrize("name", list(ANTHROPIC_BAD))
def test_it_refuses_each_invalid_anthropic_body(name):
    assert anthropic_problems(_with(ANTHROPIC_OK, ANTHROPIC_BAD[name])), name


def test_it_names_where_the_body_is_wrong():
    problems = openai_problems(_with(OPENAI_OK, OPENAI_BAD["an unknown key in a message"]))
    assert problems == ["body.messages[0]: unknown key 'kind' in ChatCompletionSystemMessageParam"]


GEMINI_BAD = {
    "an unknown top-level key": lambda b: b.update(messages=[]),
    "no contents": lambda b: b.update(contents=[]),
    "an unknown key in a part": lambda b: b["contents"][0]["parts"][0].update(kind="user"),
    "an Anthropic image block": lambda b: b["contents"][0]["parts"].append(
        {"type": "image", "source": {"type": "url", "url": "https://x"}}),
    "a role of OpenAI's": lambda b: b["contents"][1].update(role="assistant"),
    "starting with the model": lambda b: b["contents"].insert(0, {"role": "model", "parts": [{"text": "hi"}]}),
    "a call left unanswered": lambda b: b["contents"][2]["parts"].pop(1),
    "an answer to no call": lambda b: b["contents"][0]["parts"].insert(
        0, {"functionResponse": {"id": "c9", "name": "x", "response": {}}}),
    "text before the answers": lambda b: b["contents"][2]["parts"].insert(0, {"text": "first"}),
    "an answer under another name": lambda b: b["contents"][2]["parts"][0]["functionResponse"].update(name="x"),
    "an empty turn": lambda b: b["contents"][3].update(parts=[]),
    "an empty text part": lambda b: b["contents"][3].update(parts=[{"text": " "}]),
    "args as a string": lambda b: b["contents"][1]["parts"][1]["functionCall"].update(args="{}"),
    "a system instruction with an unknown key": lambda b: b["systemInstruction"].update(text="x"),
}


@pytest.mark.parametrize("name", list(GEMINI_BAD))
def test_it_refuses_each_invalid_gemini_body(name):
    assert gemini_problems(_with(GEMINI_OK, GEMINI_BAD[name])), name
