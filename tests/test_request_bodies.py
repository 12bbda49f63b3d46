"""Every rendering of an active view is a request body OpenAI and Anthropic accept: the
client's `to_openai_messages` / `to_anthropic_messages` and the server's `openai-chat` /
`anthropic` exports, judged by tests/provider_oracle.py. Pure: no database."""

import json

import pytest

from conversations.formats import anthropic, openai_chat
from memoryui_client import to_anthropic_messages, to_openai_messages
from tests.provider_oracle import invalid_renderings


def user(text):
    return {"kind": "user", "content": text}


def call(*ids, content=None, name="lookup"):
    m = {"kind": "assistant", "tool_calls": [{"id": i, "name": name, "arguments": {"q": i}} for i in ids]}
    if content:
        m["content"] = content
    return m


def result(i, content="ok", **kw):
    return {"kind": "tool", "tool_call_id": i, "content": content, **kw}


def said(text="hello"):
    return {"kind": "assistant", "content": text}


def journal(kind, text):
    return {"kind": kind, "text": text}


def view(messages, handoff=None):
    return {"handoff": {"kind": "system", "content": handoff} if handoff else None,
            "items": [{"position": i, "message": m} for i, m in enumerate(messages)]}


# A Claude Code reply with three parallel calls, as older imports stored it: one row per block.
SPLIT = [user("Read the three files"), said("Reading them."), call("toolu_a"), call("toolu_b"), call("toolu_c"),
         result("toolu_a"), result("toolu_b"), result("toolu_c"), said("All three read.")]

# The README's own example: a `did` entry written between the refund call and its result.
README_DID = [user("Where is my refund for order 7?"), call("call_7", name="refund"),
              journal("did", "refund sent"), result("call_7", "refund 7 sent"), said("Your refund is on its way.")]

SCENARIOS = {
    "a reply split over one row per call": (None, SPLIT),
    "the README's did entry between a call and its result": (None, README_DID),
    "a thought between the rows of one split reply": (None, [
        user("go"), call("a"), journal("thought", "and b too"), call("b"), result("a"), result("b")]),
    "journal entries of every kind inside a call block": (None, [
        user("go"), call("a", "b"), result("a"), *[journal(k, f"{k} entry") for k in
                                                  ("note", "thought", "heard", "said", "did", "woke")],
        result("b", "failed", is_error=True), said("done")]),
    "results in another order than the calls": (None, [user("go"), call("a", "b"), result("b"), result("a")]),
    "a call that never got its result, then the user": (None, [user("go"), call("a"), user("stop"), said("ok")]),
    "the view ends on a call without result": (None, [user("go"), call("a", "b"), result("a")]),
    "a result whose call was folded away (an old fold)": ("The user asked for a lookup.", [
        result("a"), said("Found it."), user("thanks")]),
    "a stray result inside a block": (None, [user("go"), call("a"), result("zzz"), result("a")]),
    "the view starts with the assistant after a fold": ("Summary.", [said("Where were we?"), user("refunds")]),
    "only journal rows after the fold": ("Summary.", [journal("note", "quiet"), journal("woke", "again")]),
    "tool ids Anthropic does not take": (None, [user("go"), call("function:lookup", "call.1/2"),
                                                result("function:lookup"), result("call.1/2")]),
    "two system rows and trailing white space": (None, [
        {"kind": "system", "content": "Be brief."}, user("hi"), {"kind": "system", "content": "Be kind."},
        said("Hello!\n\n")]),
    "images of both providers": (None, [
        {"kind": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}]},
        said("A cat.")]),
    "a tool result of blocks and an assistant with an unknown block": (None, [
        user("go"), {"kind": "assistant", "content": [{"type": "text", "text": "calling"},
                                                      {"type": "server_tool_use", "id": "s1"}],
                     "tool_calls": [{"id": "a", "name": "n", "arguments": "not json"}]},
        result("a", [{"type": "text", "text": "part 1"}, {"type": "document", "source": {
            "type": "text", "media_type": "text/plain", "data": "doc"}}])]),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_it_renders_each_view_as_a_body_both_providers_accept(name):
    handoff, messages = SCENARIOS[name]
    assert invalid_renderings(handoff, messages) == {}


def test_it_sends_a_split_reply_as_one_assistant_message_with_all_its_calls():
    messages = to_openai_messages(view(SPLIT))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert messages[1]["content"] == "Reading them."
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["toolu_a", "toolu_b", "toolu_c"]
    turns = to_anthropic_messages(view(SPLIT))["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in turns[1]["content"]] == ["text", "tool_use", "tool_use", "tool_use"]
    exported = json.loads("".join(openai_chat.render([(m["kind"], m) for m in SPLIT], None)))
    assert [c["id"] for c in exported[1]["tool_calls"]] == ["toolu_a", "toolu_b", "toolu_c"]


def test_it_puts_a_journal_entry_written_between_a_call_and_its_result_after_the_result():
    messages = to_openai_messages(view(README_DID), journal="text")
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "system", "assistant"]
    assert messages[3]["content"] == "[did] refund sent"
    turns = to_anthropic_messages(view(README_DID), journal="text")["messages"]
    assert turns[2]["content"] == [{"type": "tool_result", "tool_use_id": "call_7", "content": "refund 7 sent"},
                                   {"type": "text", "text": "[did] refund sent"}]
    body = json.loads("".join(anthropic.render([(m["kind"], m) for m in README_DID], None, journal="text")))
    assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "text"]


def test_it_leaves_the_journal_out_by_default():
    assert "[did] refund sent" not in json.dumps(to_openai_messages(view(README_DID)))
    assert "[did] refund sent" not in json.dumps(to_anthropic_messages(view(README_DID)))


def test_it_answers_a_call_left_without_result_with_an_error_saying_so():
    messages = to_openai_messages(view([user("go"), call("a"), user("stop")]))
    assert messages[2] == {"role": "tool", "tool_call_id": "a", "content": "(no result was recorded for this call)"}
    turns = to_anthropic_messages(view([user("go"), call("a"), user("stop")]))["messages"]
    assert turns[2]["content"][0]["is_error"] is True and turns[2]["content"][1] == {"type": "text", "text": "stop"}


def test_it_sends_a_result_whose_call_is_folded_away_as_text():
    messages = to_openai_messages(view([result("a", "42", name="lookup"), said("Found it.")], "Summary."))
    assert messages[1] == {"role": "user", "content": "[tool result lookup] 42"}


def test_it_rewrites_tool_ids_alike_in_the_call_and_its_result_for_anthropic():
    turns = to_anthropic_messages(view([user("go"), call("function:x"), result("function:x")]))["messages"]
    assert turns[1]["content"][0]["id"] == turns[2]["content"][0]["tool_use_id"] == "function_x"
