"""Model API bodies: hosted tool calls are rows, a recorded exchange keeps its output, and
response bodies (Anthropic Messages, Chat Completions, Responses) are one assistant turn
with their usage. Pure parsing, no database; every view rendered from them is judged
with the providers' own typed request parameters."""

import json
from pathlib import Path

import pytest

from conversations import formats
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.database_independent

FIX = Path(__file__).parent / "fixtures" / "formats"


def read(name):
    return (FIX / name).read_text()


def messages(plan, key="main"):
    return [r.message for r in plan.conversation(key).rows]


def calls_and_results(rows):
    calls = {c["id"]: c for m in rows if m["kind"] == "assistant" for c in m.get("tool_calls") or ()}
    results = {m["tool_call_id"]: m for m in rows if m["kind"] == "tool"}
    return calls, results


def assert_views_valid(plan):
    for conv in plan.conversations.values():
        rows = [r.message for r in conv.rows]
        assert not invalid_renderings(None, rows), conv.key


# ---- hosted tools -----------------------------------------------------------------------------


def test_each_hosted_tool_is_a_call_answered_by_its_result_with_the_providers_item_in_meta():
    plan = formats.parse(read("openai_responses_hosted.json"))
    rows = messages(plan)
    assert [m["kind"] for m in rows] == ["system", "assistant", "tool", "assistant", "tool", "assistant", "tool",
                                         "assistant"]
    calls, results = calls_and_results(rows)
    assert {c["name"] for c in calls.values()} == {"web_search", "code_interpreter", "image_generation"}
    assert set(calls) == set(results)
    search = next(m for m in rows if m.get("tool_calls", [{}])[0].get("id") == "ws_68f0c2b7")
    item = search["meta"]["openai_responses"]["item"]
    assert item["type"] == "web_search_call" and item["action"]["query"] == "tide times Brest today"
    assert "tides.example.org/brest" in results["ws_68f0c2b7"]["content"]
    assert results["ci_68f0c2c9"]["content"] == [{"type": "text", "text": "6.9\n"}]
    image = results["ig_68f0c2d4"]["content"][0]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    # The base64 image is the result; the call's copy of the item says where it is.
    generated = next(m for m in rows if m.get("tool_calls", [{}])[0].get("id") == "ig_68f0c2d4")
    assert "kept in the original entry" in generated["meta"]["openai_responses"]["item"]["result"] or \
        len(generated["meta"]["openai_responses"]["item"]["result"]) < 4096
    assert not plan.all_problems()
    assert_views_valid(plan)


def test_a_response_with_only_a_generated_image_is_a_call_and_its_result_not_an_empty_conversation():
    plan = formats.parse(read("openai_responses_image_only.json"))
    rows = messages(plan)
    assert [m["kind"] for m in rows] == ["assistant", "tool"]
    assert rows[0]["meta"]["usage"]["output_tokens"] == 1056
    assert rows[0]["tool_calls"][0]["arguments"]["revised_prompt"] == "A lighthouse at dusk"
    assert plan.conversation("main").title == "OpenAI response resp_img01"
    assert_views_valid(plan)


def test_a_generated_image_over_the_message_limit_stays_in_its_original_entry(settings):
    settings.MEMORYUI_MAX_MESSAGE_BYTES = 8 * 1024
    body = json.loads(read("openai_responses_image_only.json"))
    body["output"][0]["result"] = "A" * 20_000
    plan = formats.parse(json.dumps(body))
    _call, result = messages(plan)
    assert "kept in the original entry" in result["content"]
    assert "A" * 20_000 in plan.entries[1].raw
    assert not plan.all_problems()


def test_codex_hosted_web_search_without_an_id_gets_one_made_from_its_line():
    plan = formats.parse(read("codex_web_search.jsonl"))
    rows = messages(plan)
    assert [m["kind"] for m in rows] == ["user", "assistant", "tool", "assistant"]
    call = rows[1]["tool_calls"][0]
    assert call == {"id": "mui_web_search_call_5", "name": "web_search",
                    "arguments": {"type": "search", "query": "tide library latest release"}}
    assert rows[2]["tool_call_id"] == call["id"]
    assert formats.parse(read("codex_web_search.jsonl")).conversation("main").rows[1].text == \
        plan.conversation("main").rows[1].text  # the same id on every import
    # The encrypted reasoning and the ghost snapshot are kept as entries: no problem to report.
    assert not plan.all_problems()


def test_an_mcp_call_carries_its_output_and_an_approval_answers_its_request():
    items = [
        {"type": "message", "role": "user", "content": "Roll two dice."},
        {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "dice", "name": "roll",
         "arguments": "{\"n\": 2}"},
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "dice", "name": "roll", "arguments": "{\"n\": 2}",
         "output": "4, 6", "error": None},
        {"type": "mcp_call", "id": "mcp_2", "server_label": "dice", "name": "roll", "arguments": "{}",
         "output": None, "error": "server unreachable"},
        {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "dice", "tools": []},
    ]
    plan = formats.parse(json.dumps(items), format="openai-responses")
    rows = messages(plan)
    calls, results = calls_and_results(rows)
    assert set(calls) == set(results) == {"mcpr_1", "mcp_1", "mcp_2"}
    assert results["mcpr_1"]["content"] == "approved"
    assert results["mcp_1"]["content"] == "4, 6" and not results["mcp_1"].get("is_error")
    assert results["mcp_2"]["content"] == "server unreachable" and results["mcp_2"]["is_error"] is True
    assert not plan.all_problems()
    assert_views_valid(plan)


def test_an_item_with_no_row_is_reported_not_dropped():
    items = [{"type": "message", "role": "user", "content": "hi"}, {"type": "computer_screenshot_v9", "id": "x"},
             {"type": "reasoning", "id": "rs_1", "summary": []}]
    plan = formats.parse(json.dumps(items), format="openai-responses")
    reasons = [p.reason for p in plan.all_problems()]
    assert any("computer_screenshot_v9" in r for r in reasons)
    assert any("reasoning item without summary" in r for r in reasons)


# ---- a body whose input is empty ------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["auto", "openai-responses"])
def test_an_empty_input_list_keeps_the_output(fmt):
    body = {"model": "gpt-4.1", "input": [], "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}]}
    plan = formats.parse(json.dumps(body), format=fmt)
    assert plan.format == "openai-responses"
    assert [(m["kind"], m["content"]) for m in messages(plan)] == [("assistant", "Done.")]


def test_a_recorded_exchange_gives_its_input_then_its_output_and_renders_back():
    body = {"model": "gpt-4.1", "instructions": "Be terse.",
            "input": [{"role": "user", "content": "Capital of Chile?"}],
            "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                              "text": "Santiago."}]}],
            "usage": {"input_tokens": 9, "output_tokens": 3}}
    text = json.dumps(body)
    plan = formats.parse(text)
    rows = messages(plan)
    assert [(m["kind"], m["content"]) for m in rows] == [("system", "Be terse."), ("user", "Capital of Chile?"),
                                                         ("assistant", "Santiago.")]
    assert rows[2]["meta"]["usage"] == {"input_tokens": 9, "output_tokens": 3}
    assert json.loads(formats.openai_responses.render_document([e.raw for e in plan.entries])) == body


# ---- response bodies -------------------------------------------------------------------------


def test_an_anthropic_response_is_one_assistant_turn_with_its_usage():
    plan = formats.parse(read("anthropic_response.json"))
    assert plan.format == "anthropic"
    thought, reply = messages(plan)
    assert thought["kind"] == "thought" and "ledger" in thought["text"]
    assert reply["content"] == "Let me look up invoice 4471."
    assert reply["tool_calls"] == [{"id": "toolu_01Ledger44", "name": "ledger_lookup", "arguments": {"invoice": 4471}}]
    assert reply["meta"]["usage"]["output_tokens"] == 96 and reply["meta"]["model"] == "claude-sonnet-4-5-20250929"
    assert reply["meta"]["anthropic"]["stop_reason"] == "tool_use"
    # No request to give back: an export renders the conversation.
    assert formats.anthropic.render_document([e.raw for e in plan.entries]) is None
    assert_views_valid(plan)


def test_a_chat_completion_is_one_assistant_turn_with_its_usage():
    plan = formats.parse(read("openai_chat_response.json"))
    assert plan.format == "openai-chat"
    [reply] = messages(plan)
    assert reply["content"].startswith("Your parcel left the depot")
    assert reply["meta"]["usage"]["total_tokens"] == 231 and reply["meta"]["model"] == "gpt-4o-2024-08-06"
    assert reply["meta"]["openai"]["finish_reason"] == "stop"
    assert plan.conversation("main").rows[0].at.isoformat() == "2025-11-01T09:00:00+00:00"
    assert formats.openai_chat.render_document([e.raw for e in plan.entries]) is None


def test_a_chat_completion_with_calls_and_other_choices_keeps_the_first_and_reports_the_rest():
    plan = formats.parse(read("openai_chat_response_tools.json"))
    [reply] = messages(plan)
    assert [c["id"] for c in reply["tool_calls"]] == ["call_track1", "call_track2"]
    [problem] = plan.all_problems()
    assert "choice 1" in problem.reason
    assert_views_valid(plan)
