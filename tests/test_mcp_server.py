"""`memoryui-mcp` (clients/python, `[mcp]` extra): the mcp SDK's own client starts it over stdio
against a live server, lists its tools, calls each one, and the effect is in the database; it
stays inside one project (its key's, or the one it is started with for an all-projects key)."""

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from conversations import api_keys, projects, store
from conversations.facts import store as facts_store
from conversations.facts.models import Fact
from conversations.models import Checkpoint, Conversation, Message
from conversations.project_store import create_project
from tests.api_support import make_key
from tests.claude_sdk_support import run_async
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
CLIENT_SRC = ROOT / "clients" / "python" / "src"
TOOLS = {"list_conversations", "find_conversations", "read_conversation", "create_conversation", "append_messages",
         "checkpoint", "fork", "recall_facts", "propose_fact"}


def server_params(url: str, key: str | None, *, project: str | None = None) -> StdioServerParameters:
    # This checkout's client, whichever copy is installed in the environment.
    env = {"PYTHONPATH": os.pathsep.join([str(CLIENT_SRC), os.environ.get("PYTHONPATH", "")])}
    if key:
        env["MEMORYUI_API_KEY"] = key
    more = ["--project", project] if project else []
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "memoryui_client.integrations.mcp_server", "--url", url, *more], env=env)


async def session_calls(params: StdioServerParameters, calls):
    """Start the server, initialize, list the tools, then run `calls(session)`."""
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            return tools, await calls(session)


def payload(result) -> dict:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_every_tool_works_over_stdio_and_writes_what_it_says(live_server):
    key = make_key(["read", "write", "facts:read", "facts:write"], name="mcp")
    other = store.create_conversation(title="Refund for order 48213", subject="customer:maria", namespace="support")
    store.append_messages(conversation_id=other.pk, messages=[
        {"kind": "user", "content": "The blender jug arrived cracked."},
        {"kind": "assistant", "content": "Sorry about that, I will refund it."}])
    approved = facts_store.propose_fact(subject="customer:maria", text="Prefers store credit to card refunds.",
                                        importance=6, created_by="test")
    facts_store.approve_fact(fact_id=approved.pk, actor="user:reviewer")

    async def calls(session):
        out = {}
        out["created"] = payload(await session.call_tool("create_conversation", {
            "title": "Planning the Oslo trip", "namespace": "claude-code-mcp", "external_id": "trip-1",
            "subject": "customer:maria"}))
        cid = out["created"]["id"]
        out["appended"] = payload(await session.call_tool("append_messages", {"conversation_id": cid, "messages": [
            {"kind": "user", "content": "Book a hotel near the fjord for 3 nights."},
            {"kind": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "t1", "name": "search_hotels", "arguments": {"city": "Oslo", "nights": 3}}]},
            {"kind": "tool", "tool_call_id": "t1", "name": "search_hotels", "content": "Hotel Fjordlys: 1,450 NOK"},
            {"kind": "assistant", "content": "Hotel Fjordlys has rooms at 1,450 NOK a night."}]}))
        out["checkpoint"] = payload(await session.call_tool("checkpoint", {
            "conversation_id": cid, "position": 2, "summary": "Maria wants 3 nights near the fjord; Hotel "
                                                              "Fjordlys costs 1,450 NOK a night."}))
        out["view"] = payload(await session.call_tool("read_conversation", {"conversation_id": cid}))
        out["fork"] = payload(await session.call_tool("fork", {"conversation_id": cid, "position": 1,
                                                               "title": "Oslo trip, other hotels"}))
        out["listed"] = payload(await session.call_tool("list_conversations", {"namespace": "claude-code-mcp"}))
        out["found"] = payload(await session.call_tool("find_conversations", {"query": "blender cracked"}))
        out["by_id"] = payload(await session.call_tool("find_conversations", {
            "external_id": "trip-1", "namespace": "claude-code-mcp"}))
        out["recalled"] = payload(await session.call_tool("recall_facts", {"subject": "customer:maria",
                                                                           "query": "refund"}))
        out["proposed"] = payload(await session.call_tool("propose_fact", {
            "subject": "customer:maria", "text": "Travels to Oslo in March.", "importance": 4,
            "category": "observation", "source_conversation_id": cid, "source_position": 0}))
        # What the API refuses comes back as a tool error with the API's message.
        out["refused"] = await session.call_tool("checkpoint", {"conversation_id": cid, "position": 99,
                                                                "summary": "too far"})
        out["missing"] = await session.call_tool("read_conversation", {
            "conversation_id": "00000000-0000-4000-8000-000000000000"})
        out["schema_refused"] = await session.call_tool("propose_fact", {"subject": "x", "text": "y",
                                                                         "importance": 11})
        return out

    tools, out = run_async(session_calls(server_params(live_server.url, key), calls))

    by_name = {t.name: t for t in tools}
    assert set(by_name) == TOOLS
    for tool in tools:  # each says what it does and what it takes
        assert len(tool.description) > 60 and tool.input_schema["type"] == "object", tool.name
    assert by_name["append_messages"].input_schema["required"] == ["conversation_id", "messages"]
    assert "tool_call_id" in json.dumps(by_name["append_messages"].input_schema)

    cid = out["created"]["id"]
    conversation = Conversation.objects.get(pk=cid)
    assert (conversation.namespace, conversation.external_id, conversation.subject) == (
        "claude-code-mcp", "trip-1", "customer:maria")
    assert out["appended"] == {"first_position": 0, "last_position": 3, "count": 4}
    assert [json.loads(c)["kind"] for c in Message.objects.filter(conversation_id=cid).order_by("position")
            .values_list("content", flat=True)] == ["user", "assistant", "tool", "assistant"]
    assert Checkpoint.objects.get(conversation_id=cid).message_position == 2
    assert out["view"]["handoff"]["content"].startswith("Maria wants 3 nights")
    assert [i["position"] for i in out["view"]["items"]] == [3] and out["view"]["next_position"] == 4
    fork = Conversation.objects.get(pk=out["fork"]["id"])
    assert fork.parent_id == conversation.pk and fork.forked_from_position == 1 and fork.next_position == 2
    assert {(c["id"], c["message_count"]) for c in out["listed"]["items"]} == {(cid, 4), (str(fork.pk), 2)}
    assert [h["conversation_id"] for h in out["found"]["items"]] == [str(other.pk)]
    assert [c["id"] for c in out["by_id"]["items"]] == [cid]
    assert [f["fact"]["text"] for f in out["recalled"]["items"]] == ["Prefers store credit to card refunds."]
    proposed = Fact.objects.get(pk=out["proposed"]["id"])
    assert proposed.status == "proposed" and proposed.text == "Travels to Oslo in March."

    # The output shapes are an interface (models and prompts read them): pinned, and the keys
    # the lists had before `items` still hold the same lists.
    if os.environ.get("MEMORYUI_UPDATE_SHAPES") == "1":  # after a change meant to add keys
        SHAPES.write_text(json.dumps(shapes(out), indent=1, sort_keys=True) + "\n")
    assert shapes(out) == json.loads(SHAPES.read_text()), (
        f"an MCP tool's output changed shape; if that is meant, keep the old keys working and update {SHAPES}")
    for name, legacy in (("listed", "conversations"), ("by_id", "conversations"), ("found", "hits"),
                         ("recalled", "facts")):
        assert out[name][legacy] == out[name]["items"], name

    assert out["refused"].is_error and "memoryui refused" in out["refused"].content[0].text
    assert "position" in out["refused"].content[0].text
    assert out["missing"].is_error and "not_found" in out["missing"].content[0].text
    assert out["schema_refused"].is_error and "importance" in out["schema_refused"].content[0].text


SHAPES = Path(__file__).parent / "fixtures" / "mcp_output_shapes.json"


def shape(value):
    """The shape of a tool's output: keys and JSON types, a list by its first item."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}[type(value)]


def shapes(out: dict) -> dict:
    return {name: shape(value) for name, value in sorted(out.items()) if isinstance(value, dict)}


def test_without_legacy_keys_the_lists_are_items_alone(live_server):
    key = make_key(["read", "facts:read"], name="mcp-items")
    store.create_conversation(title="One", namespace="n")
    params = server_params(live_server.url, key)
    params.args.append("--no-legacy-keys")

    async def calls(session):
        return [payload(await session.call_tool("list_conversations", {})),
                payload(await session.call_tool("recall_facts", {"subject": "nobody"}))]

    _, (listed, recalled) = run_async(session_calls(params, calls))
    assert set(listed) == {"items", "next"} and len(listed["items"]) == 1
    assert recalled == {"items": [], "next": None}


def test_a_key_without_the_scope_comes_back_as_a_tool_error(live_server):
    key = make_key(["read"], name="mcp-reader")

    async def calls(session):
        return await session.call_tool("create_conversation", {"title": "nope"})

    _, result = run_async(session_calls(server_params(live_server.url, key), calls))
    assert result.is_error and "forbidden" in result.content[0].text
    assert not Conversation.objects.exists()


@pytest.fixture
def two_projects():
    """Two projects, each with a conversation only it holds."""
    made = {}
    for slug in ("mcp-alpha", "mcp-beta"):
        project = create_project(slug=slug, name=slug)
        with projects.scoped(projects.one(project.pk)):
            store.create_conversation(title=f"only in {slug}", namespace="mcp-projects")
        made[slug] = project
    return made


async def list_then_create(session):
    listed = payload(await session.call_tool("list_conversations", {"namespace": "mcp-projects"}))
    created = await session.call_tool("create_conversation", {"title": "made by the model",
                                                                "namespace": "mcp-projects"})
    return listed, created


def titles_in(project) -> set[str]:
    held = Conversation.everywhere.filter(project=project, namespace="mcp-projects")
    return set(held.values_list("title", flat=True))


def test_a_project_key_binds_it_to_that_project(live_server, two_projects):
    alpha, beta = two_projects["mcp-alpha"], two_projects["mcp-beta"]
    _, key = api_keys.create_api_key(name="mcp-alpha", scopes=["read", "write"], project=alpha)
    tools, (listed, created) = run_async(session_calls(server_params(live_server.url, key), list_then_create))
    assert [c["title"] for c in listed["items"]] == ["only in mcp-alpha"]
    assert not created.is_error, created.content
    assert titles_in(alpha) == {"only in mcp-alpha", "made by the model"}
    assert titles_in(beta) == {"only in mcp-beta"}
    # No tool lets the model name another project.
    assert not any("project" in tool.input_schema.get("properties", {}) for tool in tools)


def test_an_all_projects_key_acts_only_in_the_project_it_is_started_with(live_server, two_projects):
    alpha, beta = two_projects["mcp-alpha"], two_projects["mcp-beta"]
    _, key = api_keys.create_api_key(name="mcp-operator", scopes=["admin"], all_projects=True)
    _, (listed, created) = run_async(session_calls(server_params(live_server.url, key, project="mcp-beta"),
                                                   list_then_create))
    assert [c["title"] for c in listed["items"]] == ["only in mcp-beta"]
    assert not created.is_error, created.content
    assert titles_in(beta) == {"only in mcp-beta", "made by the model"}
    assert titles_in(alpha) == {"only in mcp-alpha"}


def test_an_all_projects_key_without_a_project_refuses_every_tool_and_writes_nothing(live_server, two_projects):
    _, key = api_keys.create_api_key(name="mcp-operator", scopes=["admin"], all_projects=True)

    async def calls(session):
        return [await session.call_tool("list_conversations", {}),
                await session.call_tool("create_conversation", {"title": "nowhere", "namespace": "mcp-projects"})]

    _, results = run_async(session_calls(server_params(live_server.url, key), calls))
    for result in results:
        assert result.is_error and "--project" in result.content[0].text, result.content
        assert "only in" not in result.content[0].text
    assert not Conversation.everywhere.filter(title="nowhere").exists()


def test_without_a_key_it_says_so_and_stops():
    env = {**os.environ, "PYTHONPATH": str(CLIENT_SRC)}
    env.pop("MEMORYUI_API_KEY", None)
    done = subprocess.run([sys.executable, "-m", "memoryui_client.integrations.mcp_server", "--url",
                           "http://127.0.0.1:9"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "MEMORYUI_API_KEY" in done.stderr


def test_without_an_address_it_says_so_and_stops():
    env = {**os.environ, "PYTHONPATH": str(CLIENT_SRC), "MEMORYUI_API_KEY": "mui_x"}
    env.pop("MEMORYUI_URL", None)
    done = subprocess.run([sys.executable, "-m", "memoryui_client.integrations.mcp_server"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--url" in done.stderr


def test_it_is_installed_as_the_memoryui_mcp_console_script():
    project = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["memoryui-mcp"] == "memoryui_client.integrations.mcp_server:main"
    assert any(d.startswith("mcp>=") for d in project["optional-dependencies"]["mcp"])
    script = shutil.which("memoryui-mcp", path=str(Path(sys.executable).parent))
    if script is None:
        skip_or_fail("memoryui-mcp is not installed in this environment (make test installs the client)")
    shown = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--url" in shown.stdout and "MEMORYUI_API_KEY" in shown.stdout
