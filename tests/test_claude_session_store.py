"""The Claude Agent SDK's SessionStore kept in memoryui (clients/python, `[claude]` extra),
against a live server on whichever database the suite runs.

The SDK's own conformance suite runs unmodified with every optional method present;
the SDK's own `import_session_to_store` replays a session from disk; and what a
person then opens is a readable conversation, with its compaction as a checkpoint
and its subagent as a child conversation.
"""

import asyncio
import json

import httpx
import pytest
from claude_agent_sdk import (
    SessionStore,
    get_session_messages_from_store,
    get_subagent_messages_from_store,
    import_session_to_store,
    list_sessions_from_store,
    list_subagents_from_store,
)
from claude_agent_sdk.testing import run_session_store_conformance

from conversations.formats.base import Row  # noqa: F401  (the mapping the store relies on is the importer's)
from conversations.frameworks.models import SessionSummary
from conversations.frameworks.samples import AGENT_ID, claude_agent_session
from conversations.imports.importer import namespace_for_project
from conversations.imports.models import ImportSource, SourceEntry
from conversations.models import Checkpoint, Conversation, Message
from conversations.retention.lease import acquire, release
from conversations.retention.models import DeletionReceipt
from memoryui_client import Retries, TransportError
from memoryui_client.integrations.claude import MemoryuiSessionStore, namespace_for
from tests.api_support import make_key
from tests.claude_sdk_support import Stores, run_async, write_session_files

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("answer_shapes")]

OPTIONAL = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")


@pytest.fixture
def stores(live_server):
    return Stores(live_server.url, make_key(["read", "write", "admin"], name="claude-sdk"))


def rows(conversation) -> list[dict]:
    return [{"position": p, **json.loads(c)} for p, c in Message.objects.filter(conversation=conversation)
            .order_by("position").values_list("position", "content")]


@pytest.mark.slow
def test_it_passes_the_sdks_conformance_suite_with_no_optional_method_skipped(stores):
    probe = MemoryuiSessionStore("http://127.0.0.1:9")
    # The suite skips an optional contract when the store inherits the Protocol's default.
    assert all(getattr(type(probe), m) is not getattr(SessionStore, m) for m in OPTIONAL)

    async def run():
        await run_session_store_conformance(stores, skip_optional=frozenset())
        await stores.close()

    run_async(run())
    # It really ran against the server: stores, summaries and deletion receipts are there.
    assert ImportSource.objects.filter(namespace__endswith="/proj").exists()
    assert DeletionReceipt.objects.filter(kind="session").count() >= 4


def test_import_session_to_store_replays_a_session_with_a_compaction_and_a_subagent(stores, tmp_path, monkeypatch):
    sample = claude_agent_session()
    write_session_files(tmp_path, sample)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    store = stores(prefix="")
    subpath = f"subagents/agent-{AGENT_ID}"
    main_key = {"project_key": sample.project_key, "session_id": sample.session_id}
    sub_key = {**main_key, "subpath": subpath}

    async def replay():
        # Small batches: the compaction's boundary and its summary arrive in different appends.
        await import_session_to_store(sample.session_id, store, batch_size=4)
        return (await store.load(main_key), await store.load(sub_key), await store.list_subkeys(main_key),
                await list_sessions_from_store(store, directory="/srv/billing"),
                await get_session_messages_from_store(store, sample.session_id, directory="/srv/billing"),
                await list_subagents_from_store(store, sample.session_id, directory="/srv/billing"),
                await get_subagent_messages_from_store(store, sample.session_id, AGENT_ID, directory="/srv/billing"),
                await stores.close())

    main_loaded, sub_loaded, subkeys, listed, messages, agents, agent_messages, _ = run_async(replay())

    # load: deep-equal to the files (the subagent's .meta.json comes as an agent_metadata entry).
    assert main_loaded == sample.entries
    assert sub_loaded == sample.subagents[subpath] + [{**sample.subagent_meta[subpath], "type": "agent_metadata"}]
    assert subkeys == [subpath]
    # The SDK's own readers over the store.
    assert [(s.session_id, s.custom_title) for s in listed] == [(sample.session_id,
                                                                "Invoice export fails on discount lines")]
    assert listed[0].first_prompt.startswith("The nightly invoice export fails")
    assert messages[-1].message["content"][0]["text"].startswith("All 42 export tests pass")
    assert agents == [AGENT_ID] and agent_messages[0].type == "user"

    # What a person opens: the session, named, in its project's namespace, readable.
    main = Conversation.objects.get(namespace=sample.project_key, external_id=sample.session_id)
    assert main.title == "Invoice export fails on discount lines" and main.parent_id is None
    got = rows(main)
    # A response's text and its call (lines sharing message.id) are one reply row.
    assert [m["kind"] for m in got] == [
        "user", "thought", "assistant", "tool", "assistant", "tool", "assistant",
        "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert got[0]["content"].startswith("The nightly invoice export fails")
    assert got[1]["text"].startswith("A discount line probably has a negative amount")
    assert [c["name"] for m in got if m["kind"] == "assistant" for c in m.get("tool_calls", [])] == [
        "Grep", "Task", "Edit", "Bash"]
    task_row = next(m for m in got if any(c["name"] == "Task" for c in m.get("tool_calls", [])))
    tool_rows = [m for m in got if m["kind"] == "tool"]
    assert [(m["tool_call_id"], m["name"]) for m in tool_rows] == [
        ("toolu_01Grep", "Grep"), ("toolu_01Task", "Task"), ("toolu_02Edit", "Edit"), ("toolu_03Bash", "Bash")]
    assert "42 passed" in tool_rows[-1]["content"]
    # The compaction: a checkpoint after the last row before the boundary, its summary the summary entry's text.
    done = next(m for m in got if m["kind"] == "assistant" and str(m.get("content", "")).startswith("Done:"))
    checkpoint = Checkpoint.objects.get(conversation=main)
    assert checkpoint.message_position == done["position"]
    assert checkpoint.summary.startswith("This session is being continued") and "csv_writer.py:41" in \
        checkpoint.summary
    assert got[done["position"] + 1]["content"] == "Now run the export tests."  # the summary is no chat row
    # The subagent: a child of the session, marked as a subagent, spawned at the Task call.
    child = Conversation.objects.get(parent_id=main.pk)
    assert child.parent_relation == "subagent" and child.forked_from_position == task_row["position"]
    assert child.namespace == sample.project_key and child.external_id == f"{sample.session_id}/{subpath}"
    # Named by its first prompt, then by its .meta.json (agent_metadata), which came last.
    assert child.title == f"Subagent {AGENT_ID} (Explore): How discount lines are built"
    assert [m["kind"] for m in rows(child)] == ["user", "assistant", "tool", "assistant"]
    assert SessionSummary.objects.filter(session_id=sample.session_id).count() == 1

    # Replaying it again stores no row and no entry with a uuid twice (entries without one, like
    # titles, are appended again, as the SDK's contract says).
    with_uuid = SourceEntry.objects.exclude(uuid=None)
    counts = (Message.objects.count(), Checkpoint.objects.count(), with_uuid.count())

    async def again():
        await import_session_to_store(sample.session_id, stores(prefix=""), batch_size=7)
        await stores.close()

    run_async(again())
    assert (Message.objects.count(), Checkpoint.objects.count(), with_uuid.count()) == counts


class DropResponses(httpx.AsyncHTTPTransport):
    """Delivers every request; the answers to the first `drop` POSTs are lost after the commit."""

    def __init__(self, drop: int):
        super().__init__()
        self.drop = drop
        self.keys: list[str] = []

    async def handle_async_request(self, request):
        response = await super().handle_async_request(request)
        if request.method == "POST":
            self.keys.append(request.headers["Idempotency-Key"])
            if self.drop:
                self.drop -= 1
                await response.aread()
                await response.aclose()
                raise httpx.ReadTimeout("the answer was lost after the commit", request=request)
        return response


def test_a_retried_append_stores_its_batch_once_also_when_the_sdk_retries_it(stores):
    store = stores(retries=Retries(attempts=2, backoff=0.01))
    transport = DropResponses(drop=3)
    store._client = None
    key = {"project_key": "proj", "session_id": "s-retry"}
    batch = [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hello"}},
             {"type": "mode", "mode": "plan"},  # no uuid: only the idempotency key keeps it single
             {"type": "assistant", "uuid": "a1", "parentUuid": "u1",
              "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}}]

    async def run():
        from memoryui_client.client import AsyncMemoryui

        store._client = AsyncMemoryui(store.url, api_key=store._api_key, retries=store._retries, transport=transport)
        store._loop = asyncio.get_running_loop()
        # Two answers lost: our retries run out and the SDK gets an error …
        with pytest.raises(TransportError):
            await store.append(key, batch)
        # … so the SDK calls append again with the same batch (its own retry); one more answer is lost.
        await store.append(key, batch)
        await store.append(key, [{"type": "mode", "mode": "plan"}])  # the same entry again, now on purpose
        loaded = await store.load(key)
        await store.aclose()
        return loaded

    loaded = run_async(run())
    assert loaded == batch + [{"type": "mode", "mode": "plan"}]
    assert len(set(transport.keys[:4])) == 1  # every try of the batch carried one key
    conversation = Conversation.objects.get(external_id="s-retry")
    assert [m["kind"] for m in rows(conversation)] == ["user", "assistant"]


def test_two_writers_of_one_session_keep_each_others_entries_and_summary(stores):
    prefix = "two-writers/"
    first, second = stores(prefix=prefix), stores(prefix=prefix)
    key = {"project_key": "proj", "session_id": "s-two"}

    async def run():
        await first.append(key, [{"type": "user", "uuid": "u1", "timestamp": "2026-01-01T00:00:00.000Z",
                                  "message": {"role": "user", "content": "the first prompt"}}])
        await second.append(key, [{"type": "custom-title", "customTitle": "named by the second"}])
        # `first` still thinks one entry is stored: the server refuses, it folds again from what is there.
        await first.append(key, [{"type": "tag", "tag": "billing"}])
        out = await first.load(key), await second.list_session_summaries("proj")
        await stores.close()
        return out

    loaded, summaries = run_async(run())
    assert [e["type"] for e in loaded] == ["user", "custom-title", "tag"]
    (summary,) = summaries
    assert summary["data"]["first_prompt"] == "the first prompt"
    assert summary["data"]["custom_title"] == "named by the second" and summary["data"]["tag"] == "billing"
    assert Conversation.objects.get(namespace=prefix + "proj").title == "named by the second"


def test_delete_goes_through_the_deletion_path_waits_for_maintenance_and_leaves_a_receipt(stores):
    store = stores()
    key = {"project_key": "proj", "session_id": "s-delete"}
    sub = {**key, "subpath": "subagents/agent-x1"}
    lease = acquire(kind="prune", actor="user:janitor")  # a prune is running

    async def run():
        await store.append(key, [{"type": "user", "uuid": "u1", "message": {"role": "user", "content": "secret"}}])
        await store.append(sub, [{"type": "user", "uuid": "s1", "isSidechain": True,
                                  "message": {"role": "user", "content": "sub secret"}}])
        asyncio.get_running_loop().call_later(1.0, release, lease)  # … and ends a second later
        receipt = await store.delete_with_receipt(key)
        out = receipt, await store.load(key), await store.load(sub), await store.delete_with_receipt(key)
        await stores.close()
        return out

    receipt, main_after, sub_after, again = run_async(run())
    assert main_after is None and sub_after is None and again is None
    assert receipt["kind"] == "session" and len(receipt["conversation_ids"]) == 2
    assert receipt["counts"]["conversations"] == 2 and receipt["counts"]["messages"] == 2
    stored = DeletionReceipt.objects.get(pk=receipt["receipt_id"])
    # Checked on disk: the deleted text is in no database file.
    assert stored.verification["status"] == "verified" and stored.verification["found"] is False, stored.verification
    assert not Conversation.objects.filter(pk__in=receipt["conversation_ids"]).exists()
    assert not SourceEntry.objects.exists() and not ImportSource.objects.exists()


def test_a_long_project_key_maps_to_the_same_namespace_through_both_doors():
    long_key = "-home-" + "very-long-directory-name-" * 12 + "-abc123"
    assert len(long_key) > 200
    assert namespace_for(long_key) == namespace_for_project(long_key)
    assert len(namespace_for(long_key)) == 200 and namespace_for("short") == "short"
    assert namespace_for(long_key) != namespace_for(long_key + "x")


def test_a_key_that_cannot_be_a_session_is_refused_before_any_request():
    store = MemoryuiSessionStore("http://127.0.0.1:9", api_key="x")
    for key in ({"project_key": "p", "session_id": ""}, {"project_key": "p", "session_id": "a/b"},
                {"project_key": "p", "session_id": "s", "subpath": ""}):
        with pytest.raises(ValueError):
            run_async(store.append(key, [{"type": "x"}]))
