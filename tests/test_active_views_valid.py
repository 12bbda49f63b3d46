"""Every active view renders as a request body OpenAI and Anthropic accept (docs/DESIGN.md,
invariant 12): conversations written through the store with parallel calls, errors,
journal rows, folds at every allowed position and forks; every demo conversation; and
every conversation the importers make of the test fixtures. Each view is rendered by
the client's functions and the server's exports and judged by tests/provider_oracle.py."""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations import calls, store
from conversations.demo import load_demo
from conversations.errors import CheckpointSplitsToolCall
from conversations.imports import containers, importer
from conversations.models import Checkpoint, Conversation
from conversations.reads import list_active
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.django_db

FIX = Path(__file__).parent / "fixtures" / "formats"


def invalid_active_view(conversation_id) -> dict:
    view = list_active(conversation_id)
    handoff = view.checkpoint.summary if view.checkpoint else None
    return invalid_renderings(handoff, [item.as_json() for item in view.page.items])


# ---- generated conversations -------------------------------------------------------------

IDS = st.sampled_from(["toolu_", "call_", "fc:", "call.", "x"])
JOURNAL = st.sampled_from(["note", "thought", "heard", "said", "did", "woke"])


@st.composite
def steps(draw):
    """The rows of one step: a user turn, a system row (text, an image, or both), a text
    reply, or a reply with parallel calls (one row, or split one row per call as older
    imports stored it), its results in any order (some errors), and journal rows anywhere
    in between."""
    shape = draw(st.sampled_from(["user", "text", "calls", "calls", "journal", "system"]))
    if shape == "user":
        return [{"kind": "user", "content": draw(st.sampled_from(["Go on.", "Refund order 7", "Why?"]))}]
    if shape == "text":
        return [{"kind": "assistant", "content": draw(st.sampled_from(["Done.", "Checking.\n", "Here it is."]))}]
    if shape == "journal":
        return [{"kind": draw(JOURNAL), "text": "an entry of the agent's own"}]
    if shape == "system":
        # An image in a system row is named in every body, so a view of only that is sent by all.
        image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
        return [{"kind": "system", "content": draw(st.sampled_from(
            ["Be brief.", [{"type": "text", "text": "Match this:"}, image], [image]]))}]
    prefix = draw(IDS)
    ids = [f"{prefix}{draw(st.integers(0, 10**6))}-{i}" for i in range(draw(st.integers(1, 3)))]
    tool_calls = [{"id": i, "name": "lookup", "arguments": {"n": n}} for n, i in enumerate(ids)]
    text = draw(st.sampled_from([None, "Let me look."]))
    if draw(st.booleans()):
        reply = [{"kind": "assistant", "tool_calls": tool_calls, **({"content": text} if text else {})}]
    else:
        reply = ([{"kind": "assistant", "content": text}] if text else []) + [
            {"kind": "assistant", "tool_calls": [c]} for c in tool_calls]
    results = [{"kind": "tool", "tool_call_id": i, "content": "failed" if err else "ok",
                **({"is_error": True} if err else {})}
               # the flags list has 3 items; a turn with fewer calls uses the first ones
               for i, err in zip(draw(st.permutations(ids)), draw(st.lists(st.booleans(), min_size=3, max_size=3)),
                                 strict=False)]
    rows = reply + results
    for _ in range(draw(st.integers(0, 2))):
        rows.insert(draw(st.integers(1, len(rows))), {"kind": draw(JOURNAL), "text": "written mid-step"})
    return rows


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(conversation=st.lists(steps(), min_size=1, max_size=6), fork_at=st.floats(0, 1))
def test_every_active_view_of_a_generated_conversation_is_valid_for_both_providers(conversation, fork_at):
    c = store.create_conversation(title="generated")
    rows = [row for step in conversation for row in step]
    store.append_messages(conversation_id=c.pk, messages=rows)
    assert invalid_active_view(c.pk) == {}
    # A fork anywhere, even inside a call block (its view then ends on calls without results).
    child = store.fork_conversation(conversation_id=c.pk, position=int(fork_at * (len(rows) - 1)))
    assert invalid_active_view(child.pk) == {}
    # A fold at every position, in order: the allowed ones give a valid view, the others are refused.
    last = len(rows) - 1
    for position in range(len(rows)):
        split = calls.split_calls(calls.Rows(c.pk, last), position)
        if split:
            with pytest.raises(CheckpointSplitsToolCall):
                store.checkpoint_at(conversation_id=c.pk, position=position, summary=f"folded 0..{position}")
            continue
        store.checkpoint_at(conversation_id=c.pk, position=position, summary=f"folded 0..{position}")
        assert invalid_active_view(c.pk) == {}, position


def test_a_fold_is_refused_exactly_where_it_would_orphan_a_result():
    c = store.create_conversation()
    rows = [{"kind": "user", "content": "go"},
            {"kind": "assistant", "content": "Both.",
             "tool_calls": [{"id": "a", "name": "n"}, {"id": "b", "name": "n"}]},
            {"kind": "tool", "tool_call_id": "a", "content": "1"},
            {"kind": "did", "text": "half done"},
            {"kind": "tool", "tool_call_id": "b", "content": "2"},
            {"kind": "assistant", "content": "Done."}]
    store.append_messages(conversation_id=c.pk, messages=rows)
    refused = [p for p in range(len(rows)) if calls.split_calls(calls.Rows(c.pk, len(rows) - 1), p)]
    assert refused == [1, 2, 3]


# ---- demo and imports -------------------------------------------------------------------------


def test_every_demo_conversation_renders_valid():
    load_demo(coding_turns=40)
    conversations = list(Conversation.objects.live())
    assert len(conversations) >= 3
    assert {str(c.pk): invalid_active_view(c.pk) for c in conversations} == {str(c.pk): {} for c in conversations}


# Every fixture as the command takes it: folders walked, an OpenCode storage put together, a
# Cline task read with its panel (imports/containers.py).
PIECES = {str(Path(p.name).relative_to(FIX)): p for p in containers.pieces_of_folder(FIX) if not p.skipped}


@pytest.mark.parametrize("name", sorted(PIECES))
def test_every_conversation_imported_from_a_fixture_renders_valid(name):
    piece = PIECES[name]
    data = piece.data if piece.data is not None else piece.path.read_bytes()
    importer.import_text(data, namespace=f"fixture-{name}"[:200], path=piece.name, sidecar=piece.sidecar)
    conversations = list(Conversation.objects.live())
    assert conversations
    assert {c.title: invalid_active_view(c.pk) for c in conversations} == {c.title: {} for c in conversations}


def test_an_imported_compaction_between_a_call_and_its_result_moves_before_the_call_and_says_so():
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Read a.txt"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
            {"type": "compaction", "content": "The user wants a.txt read."}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]},
        {"role": "assistant", "content": "It says hello."}]}
    importer.import_text(json.dumps(body), namespace="compaction")
    c = Conversation.objects.get(namespace="compaction")
    cp = Checkpoint.objects.get(conversation=c)
    assert cp.message_position == 0
    assert cp.summary.startswith("The user wants a.txt read.")
    assert "came at position 1, between a tool call and its result; it was moved to position 0" in cp.summary
    assert invalid_active_view(c.pk) == {}
