"""Gemini CLI sessions: the JSON record, the JSONL log with its $set and $rewindTo lines, and a
saved chat of Content turns. Pure parsing; every view rendered from them is judged with the
providers' own typed request parameters."""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations import formats
from conversations.formats import gemini
from conversations.formats.base import FormatError
from tests.drop_support import texts_of, unplaced
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.database_independent

FIX = Path(__file__).parent / "fixtures" / "formats" / "gemini"
LEGACY = FIX / "session-2025-10-14T08-01-3f6b9e2a.json"
LOG = FIX / "session-2026-01-20T14-00-8d2c4a6e.jsonl"
SUBAGENT = FIX / "8d2c4a6e-9b1f-4e3a-b5c7-d9e1f3a5b7c9" / "5e7f9a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b.jsonl"
SAVED = FIX / "checkpoint-rename.json"
ALL = [LEGACY, LOG, SUBAGENT, SAVED]


def rows(plan, key="main"):
    return [r.message for r in plan.conversation(key).rows]


def source_objects(path: Path) -> list:
    text = path.read_text()
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_it_detects_every_shape_and_drops_nothing(path):
    assert formats.detect(path.read_text()) == "gemini"
    plan = formats.parse(path.read_text())
    assert not plan.all_problems()
    assert not unplaced(plan, texts_of(source_objects(path)))
    for conv in plan.conversations.values():
        assert not invalid_renderings(None, [r.message for r in conv.rows]), conv.key


def test_a_reply_is_its_thoughts_then_one_row_with_every_call_then_the_results():
    plan = formats.parse(LEGACY.read_text())
    kinds = [m["kind"] for m in rows(plan)]
    assert kinds[:5] == ["user", "thought", "assistant", "tool", "tool"]
    reply = rows(plan)[2]
    assert [c["name"] for c in reply["tool_calls"]] == ["run_shell_command", "read_file"]
    assert reply["meta"]["model"] == "gemini-2.5-pro"
    # The prompt counts its cached part; thoughts are output.
    assert reply["meta"]["usage"] == {"input_tokens": 9214, "output_tokens": 431,
                                      "input_tokens_details": {"cached_tokens": 4096}}
    failed = rows(plan)[4]
    assert failed["is_error"] is True and "File not found" in failed["content"]
    assert rows(plan)[3]["tool_call_id"] == reply["tool_calls"][0]["id"]


def test_what_the_cli_said_is_a_harness_row():
    said = [m for m in rows(formats.parse(LEGACY.read_text())) if m["meta"]["gemini"].get("harness")]
    assert [m["content"][:25] for m in said] == ["<local-command-stdout>Swi", "<local-command-stderr>[AP"]


def test_a_message_written_again_counts_in_its_latest_version():
    plan = formats.parse(LOG.read_text())
    reply = rows(plan)[2]
    assert reply["tool_calls"][0]["id"] == "read_file_1768917609_0"
    assert rows(plan)[3]["content"].startswith("from flask import Flask")  # the result the second version added
    assert reply["meta"]["usage"]["output_tokens"] == 30 + 88


def test_a_rewind_is_a_fork_at_the_message_before_it():
    plan = formats.parse(LOG.read_text())
    fork = plan.conversation("rewind:1")
    assert (fork.parent_key, fork.parent_position, fork.relation, fork.copy_prefix) == ("main", 6, "fork", True)
    assert [m.get("content") for m in rows(plan, "rewind:1")][0] == "Also delete the tests folder."
    assert "Also delete the tests folder." not in json.dumps(rows(plan))


def test_a_compression_is_a_checkpoint_over_what_it_folded():
    plan = formats.parse(LOG.read_text())
    [fold] = plan.conversation("main").folds
    main = rows(plan)
    # It folds the rows before the first message it kept (the new prompt after the rewind).
    assert main[fold.position + 1]["content"] == "Add a test for the health check instead."
    assert fold.summary.startswith("<state_snapshot>") and "Got it." in fold.summary
    # The summary turns are the checkpoint, not rows.
    assert "state_snapshot" not in json.dumps(main)


def test_the_session_is_the_key_and_its_summary_the_title():
    plan = formats.parse(LOG.read_text())
    assert plan.source_key == "8d2c4a6e-9b1f-4e3a-b5c7-d9e1f3a5b7c9"
    assert plan.conversation("main").title == "Health check endpoint with a test"
    assert rows(plan)[0]["meta"]["gemini"]["session_context"] is True


def test_a_call_that_started_a_subagent_names_it_and_the_subagent_is_one():
    plan = formats.parse(LOG.read_text())
    spawning = next(m for m in rows(plan) if m.get("tool_calls") and len(m["tool_calls"]) == 2)
    assert spawning["meta"]["gemini"]["spawned"] == ["5e7f9a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b"]
    sub = formats.parse(SUBAGENT.read_text())
    assert sub.conversation("main").relation == "subagent"
    assert sub.source_key == "5e7f9a1b-2c3d-4e5f-8a9b-0c1d2e3f4a5b"


def test_a_saved_chat_matches_results_by_id_else_by_name():
    plan = formats.parse(SAVED.read_text())
    kinds = [m["kind"] for m in rows(plan)]
    assert kinds == ["user", "thought", "assistant", "tool", "assistant", "tool", "assistant"]
    by_name_call = rows(plan)[4]["tool_calls"][0]
    assert by_name_call["id"].startswith("mui_call_") and rows(plan)[5]["tool_call_id"] == by_name_call["id"]
    assert rows(plan)[3]["tool_call_id"] == "call-grep-1"
    # The made-up id is the same every time.
    assert formats.parse(SAVED.read_text()).conversation("main").rows[4].text == plan.conversation("main").rows[4].text


def test_a_rewind_naming_no_message_and_a_foreign_line_are_reported():
    text = LOG.read_text() + json.dumps({"$rewindTo": "no-such-id"}) + "\n" + json.dumps({"hello": "world"}) + "\n"
    reasons = [p.reason for p in formats.parse(text).all_problems()]
    assert any("no-such-id" in r for r in reasons) and any("no Gemini CLI record" in r for r in reasons)


def test_a_file_that_is_no_session_makes_no_row_and_says_why():
    plan = formats.parse('{"x": 1}\n', format="gemini")
    assert not plan.rows and plan.source_key.startswith("sha256:")
    reasons = [p.reason for p in plan.all_problems()]
    assert any("no Gemini CLI record" in r for r in reasons) and any("no sessionId" in r for r in reasons)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([
    '{"sessionId": "s", "projectHash": "p"}', '{"$set": {"messages": [1, {"id": "x", "type": "user"}]}}',
    '{"$set": {"messages": "no"}}', '{"$rewindTo": "a"}', '{"id": "a", "type": "user", "content": 5}',
    '{"id": "b", "type": "gemini", "toolCalls": [{"name": "t"}, 3, {"id": "c", "name": "u", "result": "x"}]}',
    '{"id": "c", "type": "gemini", "thoughts": [1, {"subject": 2}], "content": [{"functionCall": {}}]}',
    '{"id": "d", "type": "info"}', '[{"role": "model", "parts": [{"functionResponse": {"name": 3}}]}]',
    "{", "null", '{"$set": {"summary": 7}}',
]), max_size=8).map("\n".join))
def test_it_never_crashes(text):
    try:
        plan = gemini.parse(text)
    except FormatError:
        return
    plan.summary()
