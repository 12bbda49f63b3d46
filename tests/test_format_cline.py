"""Cline and Roo Code task histories: Anthropic-shaped messages, the panel's usage beside them,
Roo's condensed context as a checkpoint. Pure parsing."""

import json
from pathlib import Path

import pytest

from conversations import formats
from conversations.formats import cline
from conversations.imports.containers import cline_bundle
from tests.drop_support import texts_of, unplaced
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.database_independent

FIX = Path(__file__).parent / "fixtures" / "formats" / "cline"
TASK = FIX / "tasks" / "1761900000123"
ROO = FIX / "roo" / "tasks" / "b7e2c1d0-4a5f-4e3b-9c8d-7f6e5d4c3b2a"


def bundle() -> str:
    return cline_bundle((TASK / "api_conversation_history.json").read_bytes(),
                        (TASK / "ui_messages.json").read_bytes(), TASK.name).decode()


def rows(plan):
    return [r.message for r in plan.conversation("main").rows]


def test_a_history_alone_and_with_its_panel_are_detected_and_keyed_alike():
    alone = (TASK / "api_conversation_history.json").read_text()
    assert formats.detect(alone) == formats.detect(bundle()) == "cline"
    a, b = formats.parse(alone), formats.parse(bundle())
    assert a.source_key == b.source_key and a.source_key.startswith("cline:")
    assert a.conversation("main").title == "The retry helper in src/retry.ts never gives up. Make it stop after 5 " \
                                           "attempts."


def test_tool_use_and_results_map_as_anthropic_messages_under_clines_meta():
    plan = formats.parse(bundle())
    kinds = [m["kind"] for m in rows(plan)]
    assert kinds == ["user", "thought", "assistant", "tool", "user", "assistant", "tool", "user", "assistant"]
    denied = rows(plan)[6]
    assert denied["is_error"] is True and "Also rethrow the last error" in denied["content"]
    assert all("cline" in m["meta"] and "anthropic" not in m["meta"] for m in rows(plan))
    assert not plan.all_problems()


def test_the_panel_gives_each_reply_its_usage_cost_and_time_in_order():
    replies = [m for m in rows(formats.parse(bundle())) if m["kind"] == "assistant"]
    assert [r["meta"]["usage"]["output_tokens"] for r in replies] == [96, 140, 120]
    assert replies[0]["meta"]["usage"]["cache_creation_input_tokens"] == 4010
    assert replies[0]["meta"]["cline"]["cost"] == 0.0165
    plan = formats.parse(bundle())
    assert plan.conversation("main").meta["cline"]["task_id"] == "1761900000123"
    assert plan.conversation("main").rows[2].at.isoformat().startswith("2025-10-31T08:40:01")


def test_a_condensed_context_is_a_checkpoint_and_xml_tool_calls_stay_text():
    plan = formats.parse((ROO / "api_conversation_history.json").read_text())
    main = plan.conversation("main")
    [fold] = main.folds
    assert fold.position == 2 and fold.summary.startswith("## Conversation summary")
    assert "<write_to_file>" in rows(plan)[3]["content"]
    assert "Conversation summary" not in json.dumps(rows(plan))


def test_nothing_is_dropped_and_every_view_is_valid():
    for text in (bundle(), (ROO / "api_conversation_history.json").read_text()):
        plan = formats.parse(text)
        assert not plan.all_problems()
        assert not unplaced(plan, texts_of(json.loads(text).get("api_conversation_history", json.loads(text))
                                           if text.startswith("{") else json.loads(text)))
        assert not invalid_renderings(None, rows(plan))


def test_panel_requests_without_a_reply_to_match_are_reported():
    doc = json.loads(bundle())
    doc["ui_messages"].append({"ts": 1, "type": "say", "say": "api_req_started", "text": "{}"})
    reasons = [p.reason for p in cline.parse(json.dumps(doc)).all_problems()]
    assert any("4 requests on the panel for 3 replies" in r for r in reasons)
