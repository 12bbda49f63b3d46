"""One model reply is one assistant row carrying its text and all its tool calls, on
every door (docs/DESIGN.md, invariant 12): Claude Code's lines of one
message.id through the file import, `manage.py import`, POST /api/v1/imports, a grown
file and the SessionStore's batches cut anywhere; the items of one response from
Codex, Responses files and the OpenAI Agents session; the client and MCP, which take
the reply whole. The original lines stay kept, the usage is counted once per reply,
and the active view renders as a body both providers accept."""

import json
import os
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from conversations import store
from conversations.formats import parse
from conversations.imports import entry_appends, importer, sessions
from conversations.imports.models import SourceEntry
from conversations.models import Conversation, Message
from conversations.reads import list_active
from memoryui_client import to_openai_messages
from tests.api_support import Api, make_key
from tests.claude_sdk_support import run_async
from tests.provider_oracle import invalid_renderings

pytestmark = pytest.mark.django_db

SESSION = "3b9e4c1a-5d6f-4a7b-8c9d-0e1f2a3b4c5d"
USAGE = {"input_tokens": 210, "output_tokens": 64, "cache_read_input_tokens": 1800}
SERVICES = ("api", "billing", "search")
ORDER = ["u1", "a1", "a2", "a3", "a4", "r1", "r2", "r3", "a5"]


def cc(uuid, parent, kind, content, mid=None, **extra) -> dict:
    obj = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/srv/ops", "sessionId": SESSION,
           "version": "2.1.3", "type": kind, "uuid": uuid,
           "timestamp": f"2025-11-03T10:00:{ORDER.index(uuid) * 2:02d}.000Z"}
    if kind == "user":
        obj["message"] = {"role": "user", "content": content}
    else:
        # Claude Code repeats the response's usage on every line of it.
        obj["message"] = {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                          "content": content, "stop_reason": None, "usage": dict(USAGE)}
    obj.update(extra)
    return obj


def session_entries() -> list[dict]:
    """A prompt; one response (msg_P) written as four lines: its text, then three parallel
    tool_use blocks; the three results; the closing answer (msg_Q)."""
    calls = [cc(f"a{n}", f"a{n - 1}" if n > 2 else "a1", "assistant",
                [{"type": "tool_use", "id": f"toolu_{s}", "name": "status", "input": {"service": s}}], "msg_P")
             for n, s in enumerate(SERVICES, start=2)]
    results = [cc(f"r{n}", f"a{n + 1}", "user", [{"type": "tool_result", "tool_use_id": f"toolu_{s}",
                                                   "content": f"{s}: up"}])
               for n, s in enumerate(SERVICES, start=1)]
    return [cc("u1", None, "user", "Are the three services up?"),
            cc("a1", "u1", "assistant", [{"type": "text", "text": "Checking all three."}], "msg_P"),
            *calls, *results,
            cc("a5", "r3", "assistant", [{"type": "text", "text": "All three are up."}], "msg_Q")]


def session_text(entries=None) -> str:
    return "".join(json.dumps(e) + "\n" for e in (entries or session_entries()))


def rows(conversation_id) -> list[dict]:
    return [json.loads(c) for c in Message.objects.filter(conversation_id=conversation_id).order_by("position")
            .values_list("content", flat=True)]


def invalid_active_view(conversation_id) -> dict:
    view = list_active(conversation_id)
    return invalid_renderings(view.checkpoint.summary if view.checkpoint else None,
                              [item.as_json() for item in view.page.items])


def assert_one_reply_row(conversation_id, calls=tuple(f"toolu_{s}" for s in SERVICES)):
    got = rows(conversation_id)
    assert [m["kind"] for m in got] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    reply = got[1]
    assert reply["content"] == "Checking all three."
    assert [c["id"] for c in reply["tool_calls"]] == list(calls)
    assert [m["tool_call_id"] for m in got[2:5]] == list(calls)
    # The usage once per reply (msg_P and msg_Q), not once per line of it.
    assert [m["meta"]["usage"] for m in got if "usage" in m.get("meta", {})] == [USAGE, USAGE]
    assert invalid_active_view(conversation_id) == {}
    return got


def assert_originals_kept(conversation_id, entries):
    raws = SourceEntry.objects.filter(conversation_id=conversation_id).order_by("seq").values_list("raw", flat=True)
    assert [json.loads(r) for r in raws] == entries


def session_conversation() -> Conversation:
    return Conversation.objects.get(namespace="proj", external_id=SESSION)


# ---- Claude Code: the file doors ---------------------------------------------------------------


def test_it_parses_the_lines_of_one_message_id_as_one_reply_placed_at_its_row():
    plan = parse(session_text(), format="claude-code")
    main = plan.conversation("main")
    assert [r.kind for r in main.rows] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    reply = main.rows[1].message
    assert reply["meta"]["claude_code"]["uuids"] == ["a1", "a2", "a3", "a4"]
    assert reply["meta"]["claude_code"]["message_id"] == "msg_P"
    # Every line of the reply points at the reply's row; the results at theirs.
    assert [(e.uuid, e.position) for e in plan.entries] == [
        ("u1", 0), ("a1", 1), ("a2", 1), ("a3", 1), ("a4", 1), ("r1", 2), ("r2", 3), ("r3", 4), ("a5", 5)]


def test_it_stores_a_reply_of_three_parallel_calls_as_one_row_through_a_file_import():
    result = importer.import_text(session_text(), namespace="proj")
    assert result.messages == 6
    assert_one_reply_row(result.conversation_id)
    assert_originals_kept(result.conversation_id, session_entries())


def test_it_stores_one_row_through_manage_py_import(tmp_path):
    path = tmp_path / "proj" / f"{SESSION}.jsonl"
    path.parent.mkdir()
    path.write_text(session_text())
    call_command("import", str(path), stdout=open(os.devnull, "w"))
    assert_one_reply_row(session_conversation().pk)
    assert_originals_kept(session_conversation().pk, session_entries())


def test_it_stores_one_row_through_post_imports(client):
    api = Api(client, make_key(["read", "write"]))
    answer = api.post("/imports", {"format": "claude-code", "namespace": "proj", "content": session_text()})
    assert answer.status_code == 201, answer.content
    assert answer.json()["messages"] == 6
    assert_one_reply_row(answer.json()["conversation_id"])


@pytest.mark.parametrize("cut", [2, 3, 4, 5, 6])
def test_a_grown_file_continues_a_reply_its_first_import_ended_in_with_a_continuation_row(cut):
    entries = session_entries()
    importer.import_text(session_text(entries[:cut]), namespace="proj")
    importer.import_text(session_text(entries), namespace="proj")
    if cut < 5:
        # The first import ended inside the reply: a new file's import writes every reply it holds
        # (a session that ended there, killed, would otherwise never show its last reply), so the
        # lines that came later are a continuation row of it.
        assert_continued(session_conversation().pk, first_calls=cut - 2)
    else:
        assert_one_reply_row(session_conversation().pk)
    assert_originals_kept(session_conversation().pk, entries)


# ---- Claude Code: the SessionStore door, batches cut anywhere ---------------------------------------


def cuts_of(n: int) -> list[tuple[int, ...]]:
    """Every way to cut n entries into two batches, and into batches of 1, 2 and 3."""
    out = [(c,) for c in range(1, n)]
    out += [tuple(range(size, n, size)) for size in (1, 2, 3)]
    return out


def batches_at(entries, cuts):
    bounds = [0, *cuts, len(entries)]
    return [entries[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def assert_continued(conversation_id, first_calls=0):
    """The reply's row was written before all its lines came (a batch that ended right
    after its text: a reply without calls is written at the end of a batch, since it may
    be the session's last answer): the rest is a continuation row, with no usage again,
    and requests send the two rows as one message."""
    got = rows(conversation_id)
    assert [m["kind"] for m in got] == ["user", "assistant", "assistant", "tool", "tool", "tool", "assistant"]
    assert len(got[1].get("tool_calls", [])) == first_calls and len(got[2]["tool_calls"]) == 3 - first_calls
    assert got[2]["meta"]["claude_code"]["continues"] is True and "usage" not in got[2]["meta"]
    assert [m["meta"]["usage"] for m in got if "usage" in m.get("meta", {})] == [USAGE, USAGE]
    assert invalid_active_view(conversation_id) == {}
    view = {"handoff": None, "items": [{"position": i, "message": m} for i, m in enumerate(got)]}
    sent = to_openai_messages(view)
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert sent[1]["content"] == "Checking all three." and len(sent[1]["tool_calls"]) == 3


@pytest.mark.parametrize("cuts", cuts_of(9), ids=str)
def test_the_session_store_door_stores_one_row_whichever_batches_the_reply_straddles(cuts):
    entries = session_entries()
    for batch in batches_at(entries, cuts):
        entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=batch)
    if 2 in cuts:
        assert_continued(session_conversation().pk)
    else:
        assert_one_reply_row(session_conversation().pk)
    assert_originals_kept(session_conversation().pk, entries)


def test_a_reply_with_calls_is_held_open_between_batches_and_written_when_its_results_come():
    entries = session_entries()
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=entries[:4])
    # Two of the three calls are in: the reply waits (its lines are kept, placed at the row it will be).
    assert [m["kind"] for m in rows(session_conversation().pk)] == ["user"]
    assert SourceEntry.objects.filter(conversation_id=session_conversation().pk).count() == 4
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=entries[4:6])
    # The last call and the first result: the reply is complete and written, then the result.
    assert [m["kind"] for m in rows(session_conversation().pk)] == ["user", "assistant", "tool"]
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=entries[6:])
    assert_one_reply_row(session_conversation().pk)
    positions = dict(SourceEntry.objects.filter(conversation_id=session_conversation().pk).values_list("uuid",
                                                                                                       "position"))
    assert [positions[u] for u in ("a1", "a2", "a3", "a4", "r1")] == [1, 1, 1, 1, 2]


def test_a_retried_batch_inside_a_held_reply_adds_no_call_twice():
    entries = session_entries()
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=entries[:3])
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=entries[:3])
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=entries[2:])
    assert_one_reply_row(session_conversation().pk)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("cuts", [(3,), (1, 3, 4, 5, 6, 7, 8)], ids=str)  # a batch per line from the first call
def test_the_api_entries_door_stores_one_row_across_batches(client, cuts):
    api = Api(client, make_key(["read", "write"]))
    entries, held = session_entries(), 0
    for batch in batches_at(entries, cuts):
        answer = api.post("/imports", {"format": "claude-code", "namespace": "proj", "external_id": SESSION,
                                       "entries": batch, "expected_entries": held})
        assert answer.status_code in (200, 201), answer.content
        held = answer.json()["stream"]["entries"]
    assert_one_reply_row(session_conversation().pk)


# ---- Claude Code: a tool_use without an id ---------------------------------------------------


def without_ids() -> list[dict]:
    entries = session_entries()
    del entries[3]["message"]["content"][0]["id"]  # toolu_billing's call
    del entries[6]["message"]["content"][0]["tool_use_id"]  # and its result
    return entries


def test_a_tool_use_without_an_id_is_kept_with_a_generated_id_and_its_result_linked():
    result = importer.import_text(session_text(without_ids()), namespace="proj")
    got = rows(result.conversation_id)
    generated = got[1]["tool_calls"][1]["id"]
    assert generated.startswith("toolu_mui_")
    assert got[1]["meta"]["claude_code"]["generated_ids"] == {generated: "the transcript's tool_use block has no id"}
    assert_one_reply_row(result.conversation_id, calls=("toolu_api", generated, "toolu_search"))
    assert got[3]["meta"]["claude_code"]["generated_id"] is True
    assert not [p for p in result.problems if "tool_use" in p.reason or "tool_result" in p.reason]
    # The same id on every import of the same lines (a second download finds the same rows).
    again = parse(session_text(without_ids()), format="claude-code").conversation("main").rows[1].message
    assert again["tool_calls"][1]["id"] == generated


def test_a_tool_use_without_an_id_across_batches_is_linked_to_its_result():
    entries = without_ids()
    for batch in batches_at(entries, (3, 6)):
        entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=batch)
    got = rows(session_conversation().pk)
    generated = got[1]["tool_calls"][1]["id"]
    assert generated.startswith("toolu_mui_") and got[3]["tool_call_id"] == generated
    assert invalid_active_view(session_conversation().pk) == {}


def test_a_result_without_an_id_and_no_call_waiting_is_reported_not_guessed():
    entries = session_entries()
    del entries[6]["message"]["content"][0]["tool_use_id"]
    plan = parse(session_text(entries), format="claude-code")
    assert [r.kind for r in plan.conversation("main").rows].count("tool") == 2
    assert any("tool_result without tool_use_id" in p.reason for p in plan.all_problems())


# ---- the items of one response: Codex, Responses files, the OpenAI Agents session -------------------


def response_items() -> list[dict]:
    """A prompt, one response (its message and three parallel function calls), the
    three outputs, the closing answer: as the Responses API and the Agents SDK give them."""
    calls = [{"type": "function_call", "id": f"fc_{s}", "call_id": f"call_{s}", "name": "status",
              "arguments": json.dumps({"service": s}), "status": "completed"} for s in SERVICES]
    outputs = [{"type": "function_call_output", "call_id": f"call_{s}", "output": f"{s}: up"} for s in SERVICES]
    return [{"role": "user", "content": "Are the three services up?"},
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "Checking all three.", "annotations": []}]},
            *calls, *outputs,
            {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "All three are up.", "annotations": []}]}]


def assert_one_response_row(conversation_id, source):
    got = rows(conversation_id)
    assert [m["kind"] for m in got] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    reply = got[1]
    assert reply["content"] == "Checking all three."
    assert [c["id"] for c in reply["tool_calls"]] == [f"call_{s}" for s in SERVICES]
    assert reply["meta"][source]["ids"] == ["msg_1"] + [f"fc_{s}" for s in SERVICES]
    assert invalid_active_view(conversation_id) == {}


def codex_text() -> str:
    lines = [{"timestamp": "2025-11-03T10:00:00.000Z", "type": "session_meta",
              "payload": {"id": "0199b2c3-d4e5-7f60-8a9b-0c1d2e3f4a5b", "cwd": "/srv/ops", "cli_version": "0.50.0"}},
             {"timestamp": "2025-11-03T10:00:00.100Z", "type": "turn_context", "payload": {"model": "gpt-5-codex"}}]
    lines += [{"timestamp": f"2025-11-03T10:00:{n + 1:02d}.000Z", "type": "response_item", "payload": item}
              for n, item in enumerate(response_items())]
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_codex_stores_the_items_of_one_response_as_one_row_through_the_file_door():
    result = importer.import_text(codex_text())
    assert_one_response_row(result.conversation_id, "codex")
    assert SourceEntry.objects.filter(conversation_id=result.conversation_id).count() == 11


def test_codex_stores_one_row_through_post_imports(client):
    answer = Api(client, make_key(["write"])).post("/imports", {"format": "codex", "content": codex_text()})
    assert answer.status_code == 201, answer.content
    assert_one_response_row(answer.json()["conversation_id"], "codex")


def test_responses_items_store_one_row_through_the_file_door_and_post_imports(client):
    result = importer.import_text(json.dumps(response_items()))
    assert_one_response_row(result.conversation_id, "openai_responses")
    answer = Api(client, make_key(["write"])).post("/imports", {"format": "openai-responses",
                                                                "document": {"input": response_items()}})
    assert answer.status_code == 201, answer.content
    assert_one_response_row(answer.json()["conversation_id"], "openai_responses")


def test_a_call_after_reasoning_or_after_a_result_starts_a_row_of_its_own():
    items = response_items()
    # Two responses in a row: calls, their outputs, then calls again: two replies, two rows.
    plan = parse(json.dumps(items[:5] + items[5:8] + [dict(items[2], call_id="call_again", id="fc_again")]),
                 format="openai-responses")
    kinds = [r.kind for r in plan.conversation("main").rows]
    assert kinds == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert [len(r.message.get("tool_calls", [])) for r in plan.conversation("main").rows if r.kind == "assistant"] \
        == [3, 1]


def test_the_openai_agents_session_door_stores_a_parallel_step_as_one_row(client):
    api = Api(client, make_key(["read", "write"]))
    answer = api.post("/imports", {"format": "openai-responses", "namespace": "openai-agents", "external_id": "ops-1",
                                   "entries": response_items(), "expected_entries": 0})
    assert answer.status_code in (200, 201), answer.content
    cid = answer.json()["stream"]["conversation_id"]
    assert_one_response_row(cid, "openai_responses")
    items, _ = sessions.active_items(namespace="openai-agents", session_id="ops-1")
    assert items == response_items()  # what get_items returns: every item as it was added


@pytest.mark.django_db(transaction=True)
def test_the_agents_sdk_runner_with_a_parallel_step_stores_one_row(live_server):
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from memoryui_client import Retries
    from memoryui_client.integrations.openai_agents import MemoryuiSession
    @function_tool
    def status(service: str) -> str:
        """Whether a service is up."""
        return f"{service}: up"

    def message(item_id, text):
        return ResponseOutputMessage(id=item_id, type="message", role="assistant", status="completed",
                                     content=[ResponseOutputText(type="output_text", text=text, annotations=[])])

    class ParallelModel(Model):
        """One response with its text and three parallel calls, then the answer."""

        async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                               tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
            items = [input] if isinstance(input, str) else list(input)
            if items[-1].get("type") == "function_call_output":
                return ModelResponse(output=[message("msg_2", "All three are up.")], usage=Usage(), response_id=None)
            calls = [ResponseFunctionToolCall(type="function_call", id=f"fc_{s}", call_id=f"call_{s}", name="status",
                                              arguments=json.dumps({"service": s}), status="completed")
                     for s in SERVICES]
            return ModelResponse(output=[message("msg_1", "Checking all three."), *calls], usage=Usage(),
                                 response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("this test runs without streaming")

    agent = Agent(name="Ops", instructions="Check with the status tool.", model=ParallelModel(), tools=[status])
    session = MemoryuiSession("ops-7", url=live_server.url, api_key=make_key(["read", "write"]),
                              retries=Retries(attempts=4, backoff=0.01, max_backoff=0.05))

    async def run():
        result = await Runner.run(agent, "Are the three services up?", session=session,
                                  run_config=RunConfig(tracing_disabled=True))
        await session.close()
        return result.final_output

    assert run_async(run()) == "All three are up."
    conversation = Conversation.objects.get(namespace="openai-agents", external_id="ops-7")
    got = rows(conversation.pk)
    assert [m["kind"] for m in got] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert [c["id"] for c in got[1]["tool_calls"]] == [f"call_{s}" for s in SERVICES]
    assert got[1]["content"] == "Checking all three."
    assert invalid_active_view(conversation.pk) == {}


# ---- the client and MCP take a reply whole ----------------------------------------------------------

REPLY = {"kind": "assistant", "content": "Checking all three.", "meta": {"usage": USAGE},
         "tool_calls": [{"id": f"toolu_{s}", "name": "status", "arguments": {"service": s}} for s in SERVICES]}
RESULTS = [{"kind": "tool", "tool_call_id": f"toolu_{s}", "content": f"{s}: up"} for s in SERVICES]


@pytest.mark.django_db(transaction=True)
def test_the_client_appends_a_reply_with_three_calls_as_one_row(live_server):
    from memoryui_client import Memoryui

    mui = Memoryui(live_server.url, api_key=make_key(["read", "write"]))
    conversation, _ = mui.get_or_create(namespace="ops", external_id="client-1")
    mui.append_batch(conversation["id"], [{"kind": "user", "content": "Are the three services up?"}, REPLY, *RESULTS,
                                          {"kind": "assistant", "content": "All three are up.",
                                           "meta": {"usage": USAGE}}])
    assert_one_reply_row(conversation["id"])


@pytest.mark.django_db(transaction=True)
def test_mcp_appends_a_reply_with_three_calls_as_one_row(live_server):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    conversation = store.create_conversation(title="Ops check")
    client_src = Path(__file__).resolve().parent.parent / "clients" / "python" / "src"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memoryui_client.integrations.mcp_server", "--url", live_server.url],
        env={"PYTHONPATH": os.pathsep.join([str(client_src), os.environ.get("PYTHONPATH", "")]),
             "MEMORYUI_API_KEY": make_key(["read", "write"])})

    async def append():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("append_messages", {"conversation_id": str(conversation.pk),
                                                                   "messages": [
                    {"kind": "user", "content": "Are the three services up?"}, REPLY, *RESULTS,
                    {"kind": "assistant", "content": "All three are up.", "meta": {"usage": USAGE}}]})

    result = run_async(append())
    assert not result.is_error, result.content
    assert_one_reply_row(conversation.pk)


def test_a_line_of_the_reply_after_a_result_is_a_continuation_without_its_usage_again():
    # A tool that ran while the response was still streaming: its result came between two calls.
    entries = session_entries()
    entries.insert(3, entries.pop(5))  # r1 right after a2 (toolu_api's call)
    plan = parse(session_text(entries), format="claude-code")
    got = [r.message for r in plan.conversation("main").rows]
    assert [m["kind"] for m in got] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in got[3]["tool_calls"]] == ["toolu_billing", "toolu_search"]
    assert got[3]["meta"]["claude_code"]["continues"] is True
    assert [m["meta"]["usage"] for m in got if "usage" in m.get("meta", {})] == [USAGE, USAGE]
    assert invalid_renderings(None, got) == {}
