"""Aider chat histories: sessions by their headers, prompts, aider's output, commands and the
model's replies, edit blocks kept as written. Pure parsing."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations import formats
from conversations.formats import aider
from tests.drop_support import unplaced
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.database_independent

HISTORY = Path(__file__).parent / "fixtures" / "formats" / "aider" / ".aider.chat.history.md"


def rows(plan, key="main"):
    return [r.message for r in plan.conversation(key).rows]


def test_it_is_detected_and_each_session_is_a_conversation():
    text = HISTORY.read_text()
    assert formats.detect(text) == "aider"
    plan = formats.parse(text)
    assert list(plan.conversations) == ["main", "session:2"]
    assert [first for first, _ in aider.sessions(text)] == [2, 62]
    assert aider.session_key(aider.sessions(text)[1][1]) == "aider:2025-03-04 17:40:52"
    assert plan.conversation("main").title == "stock levels below zero should raise, not clamp to 0"


def test_nothing_of_the_history_is_dropped():
    plan = formats.parse(HISTORY.read_text())
    assert not plan.all_problems()
    lines = [ln.removeprefix("#### ").removeprefix("> ").rstrip() for ln in HISTORY.read_text().splitlines()]
    # A command is kept as its name and its arguments, each in its wrapper.
    lines = [ln.partition(" ")[2] if ln.startswith("/") else ln for ln in lines]
    texts = [ln for ln in lines if len(ln.strip()) >= 12 and not ln.startswith("# aider chat started")
             and not ln.startswith("► **") and ln.strip("-")]
    assert not unplaced(plan, texts)


def test_prompts_replies_commands_and_output_are_what_they_are():
    main = rows(formats.parse(HISTORY.read_text()))
    kinds = [("harness" if m["meta"]["aider"].get("harness") else m["kind"]) for m in main]
    assert kinds == ["harness", "harness", "harness", "user", "assistant", "harness", "harness", "harness", "harness",
                     "user", "assistant", "harness"]
    assert main[1]["content"] == "<command-name>/add</command-name>\n<command-args>inventory/stock.py</command-args>"
    # The edit block is the model's, its REPLACE marker included; aider's "Applied edit" is aider's.
    assert ">>>>>>> REPLACE" in main[4]["content"] and "Applied edit" not in main[4]["content"]
    assert "Applied edit to inventory/stock.py" in main[5]["content"]
    # A command's output is everything up to the next message, quoted or not.
    assert "1 failed, 2 passed" in main[7]["content"] and "ValueError: stock of A1" in main[7]["content"]
    assert main[4]["meta"]["model"] == "anthropic/claude-3-7-sonnet-20250219"
    assert main[9]["content"] == "should that old test be deleted or changed?"


def test_a_reply_that_shows_its_thinking_is_a_thought_then_the_answer():
    second = rows(formats.parse(HISTORY.read_text()), "session:2")
    assert [m["kind"] for m in second[1:4]] == ["user", "thought", "assistant"]
    assert second[2]["text"].startswith("The job loads every SKU")
    assert second[3]["content"].startswith("`reorder.run` calls") and "THINKING" not in second[3]["content"]
    assert second[3]["meta"]["model"] == "o3-mini"


def test_every_view_is_a_valid_request():
    plan = formats.parse(HISTORY.read_text())
    for conv in plan.conversations.values():
        assert not invalid_renderings(None, [r.message for r in conv.rows])


def test_a_history_cut_before_its_first_header_is_a_session_too():
    text = "#### what does this do?  \n\nIt adds numbers.\n\n" + HISTORY.read_text()
    parts = aider.sessions(text)
    assert len(parts) == 3 and parts[0][1].startswith("#### what does")
    assert aider.session_key(parts[0][1]).startswith("aider:")
    assert formats.detect(text) == "aider"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([
    "# aider chat started at 2025-01-01 00:00:00", "# aider chat started at nonsense", "#### hi", "####", "> out",
    ">", "text", "", "```", "> ```", "#### /run ls", "#### !echo", "► **THINKING**", "► **ANSWER**", "\x00",
]), max_size=12).map("\n".join))
def test_it_never_crashes(text):
    aider.parse(text).summary()
