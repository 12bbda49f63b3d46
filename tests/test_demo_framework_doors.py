"""The demo data has one conversation written through each framework door, by the same
server-side code the adapters reach over HTTP."""

import json

import pytest

from conversations import demo
from conversations.frameworks import samples
from conversations.imports import entry_streams, sessions
from conversations.models import Checkpoint, Conversation, Message

pytestmark = pytest.mark.django_db


def kinds(conversation):
    return [json.loads(c)["kind"] for c in Message.objects.filter(conversation=conversation).order_by("position")
            .values_list("content", flat=True)]


@pytest.fixture
def loaded():
    return demo.load_demo(coding_turns=5)


def test_the_claude_agent_sdk_session_has_its_compaction_and_its_subagent(loaded):
    sample = samples.claude_agent_session()
    session = Conversation.objects.get(namespace=samples.PROJECT_KEY, external_id=samples.SESSION_ID)
    assert session in loaded and session.title == "Invoice export fails on discount lines"
    # Each response's text and call (lines sharing message.id) are one reply row.
    assert Checkpoint.objects.get(conversation=session).message_position == 10
    assert kinds(session)[:5] == ["user", "thought", "assistant", "tool", "assistant"]
    child = Conversation.objects.get(parent_id=session.pk)
    assert (child.parent_relation, child.forked_from_position) == ("subagent", 4)  # the Task call's reply
    # What the SessionStore's load would return: every entry, as the SDK gave it (its timestamps moved).
    _, entries = entry_streams.load_entries(format="claude-code", namespace=samples.PROJECT_KEY,
                                       external_id=samples.SESSION_ID)
    assert [e.get("uuid") for e in entries] == [e.get("uuid") for e in sample.entries]


def test_the_openai_agents_session_keeps_each_item_and_reads_as_a_conversation(loaded):
    conversation = Conversation.objects.get(namespace="openai-agents", external_id=samples.OPENAI_SESSION_ID)
    assert conversation in loaded and conversation.title.startswith("I need to be in Oslo")
    assert kinds(conversation)[:5] == ["user", "thought", "assistant", "tool", "assistant"]
    items, _ = sessions.active_items(namespace="openai-agents", session_id=samples.OPENAI_SESSION_ID)
    assert items == samples.openai_agents_items()


def test_the_mcp_written_conversation_is_there(loaded):
    conversation = Conversation.objects.get(namespace="claude-code-mcp", external_id="release-notes-4.2")
    assert conversation in loaded and conversation.title == samples.MCP_TITLE
    assert kinds(conversation) == [m["kind"] for m in samples.mcp_messages()]
