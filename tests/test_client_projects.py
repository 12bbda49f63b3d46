"""The Python client and its plugs in projects, against a live server: a key of one project
works unchanged (the key implies its project); an operator's all-projects key acts in the
project its `project` argument names (the X-Memoryui-Project header) and sees nothing of
another. The MCP server's binding is tested over stdio in tests/test_mcp_server.py."""

from typing import Annotated, TypedDict

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic_ai.messages import ModelRequest, UserPromptPart

from conversations import api_keys, projects
from conversations.facts import store as facts_store
from conversations.facts.models import Fact
from conversations.models import Conversation, Message
from conversations.project_store import create_project
from memoryui_client import AsyncMemoryui, Memoryui, NotFound, Retries
from memoryui_client._core import Call
from memoryui_client.client import PROJECT_HEADER
from memoryui_client.integrations.claude import MemoryuiSessionStore
from memoryui_client.integrations.langchain import MemoryuiChatMessageHistory
from memoryui_client.integrations.langgraph import MemoryuiSaver
from memoryui_client.integrations.openai_agents import MemoryuiSession
from memoryui_client.integrations.pydantic_ai import MemoryuiMessageHistory
from tests.claude_sdk_support import run_async

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(attempts=3, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def alpha():
    return create_project(slug="alpha", name="Alpha")


@pytest.fixture
def beta():
    return create_project(slug="beta", name="Beta")


@pytest.fixture
def alpha_key(alpha):
    return api_keys.create_api_key(name="alpha-agent", scopes=["read", "write", "facts:read", "facts:write"],
                                   project=alpha)[1]


@pytest.fixture
def operator_key():
    return api_keys.create_api_key(name="operator", scopes=["admin", "facts:read", "facts:write"],
                                   all_projects=True)[1]


class Recording(httpx.HTTPTransport):
    def __init__(self):
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request):
        self.sent.append(request)
        return super().handle_request(request)


def project_of(conversation_id) -> str:
    return Conversation.everywhere.select_related("project").get(pk=conversation_id).project.slug


def held(namespace: str) -> list[tuple[str, str | None, int]]:
    """(project, external id, rows) of every conversation in `namespace`, read from the database."""
    return sorted((c.project.slug, c.external_id, Message.objects.filter(conversation_id=c.pk).count())
                  for c in Conversation.everywhere.select_related("project").filter(namespace=namespace))


def test_a_project_key_works_unchanged_and_names_no_project(live_server, alpha, beta, alpha_key):
    transport = Recording()
    with Memoryui(live_server.url, api_key=alpha_key, retries=FAST, transport=transport) as mui:
        assert mui.project is None
        conversation, created = mui.get_or_create(namespace="support", external_id="ticket-1", title="Refund")
        mui.append(conversation["id"], {"kind": "user", "content": "Where is my refund?"})
        assert [c["id"] for c in mui.list(namespace="support")] == [conversation["id"]]
        assert mui.active(conversation["id"])["items"][0]["message"]["content"] == "Where is my refund?"
    assert created and project_of(conversation["id"]) == "alpha"
    assert transport.sent and not any(PROJECT_HEADER in r.headers for r in transport.sent)


def test_a_project_key_naming_its_own_project_is_the_same_and_naming_another_is_not_found(
        live_server, alpha, beta, alpha_key):
    with Memoryui(live_server.url, api_key=alpha_key, retries=FAST) as mui:
        conversation = mui.create(title="mine")
    with Memoryui(live_server.url, api_key=alpha_key, project="alpha", retries=FAST) as mine:
        assert mine.get(conversation["id"])["id"] == conversation["id"]
    with Memoryui(live_server.url, api_key=alpha_key, project="beta", retries=FAST) as elsewhere:
        with pytest.raises(NotFound):
            elsewhere.get(conversation["id"])
        with pytest.raises(NotFound):
            elsewhere.create(title="not here")
    assert not Conversation.everywhere.filter(title="not here").exists()


def test_an_all_projects_key_acts_in_the_project_it_names_and_sees_nothing_of_another(
        live_server, alpha, beta, alpha_key, operator_key):
    with Memoryui(live_server.url, api_key=alpha_key, retries=FAST) as agent:
        ours, _ = agent.get_or_create(namespace="support", external_id="ticket-1", title="alpha's ticket")
        agent.append(ours["id"], {"kind": "user", "content": "alpha's words about the blender"})
    transport = Recording()
    with Memoryui(live_server.url, api_key=operator_key, project="beta", retries=FAST, transport=transport) as ops:
        assert ops.project == "beta"
        theirs, created = ops.get_or_create(namespace="support", external_id="ticket-1", title="beta's ticket")
        ops.append(theirs["id"], {"kind": "user", "content": "beta's words about the blender"})
        assert created and theirs["id"] != ours["id"]
        assert [c["id"] for c in ops.list()] == [theirs["id"]]
        with pytest.raises(NotFound):
            ops.get(ours["id"])
        hits = ops._run(Call("GET", "/search", params={"q": "blender"}))
        assert [h["conversation_id"] for h in hits["items"]] == [theirs["id"]]
    assert {r.headers[PROJECT_HEADER] for r in transport.sent} == {"beta"}
    assert held("support") == [("alpha", "ticket-1", 1), ("beta", "ticket-1", 1)]
    # Naming `alpha`, the operator reads what the project's key wrote.
    with Memoryui(live_server.url, api_key=operator_key, project="alpha", retries=FAST) as ops:
        assert ops.find(namespace="support", external_id="ticket-1")["id"] == ours["id"]
    with Memoryui(live_server.url, api_key=operator_key, project="gamma", retries=FAST) as ops, \
            pytest.raises(NotFound):
        ops.get(ours["id"])


def test_facts_are_recalled_only_in_their_project(live_server, alpha, beta, alpha_key, operator_key):
    for project, text in ((alpha, "Prefers email."), (beta, "Prefers phone calls.")):
        with projects.scoped(projects.one(project.pk)):
            fact = facts_store.propose_fact(subject="customer:42", text=text, importance=5, created_by="test")
            facts_store.approve_fact(fact_id=fact.pk, actor="user:reviewer")
    with Memoryui(live_server.url, api_key=alpha_key, retries=FAST) as agent:
        assert [r["fact"]["text"] for r in agent.recall(subject="customer:42")] == ["Prefers email."]
    with Memoryui(live_server.url, api_key=operator_key, project="beta", retries=FAST) as ops:
        assert [r["fact"]["text"] for r in ops.recall(subject="customer:42")] == ["Prefers phone calls."]
        proposed = ops.propose_fact(subject="customer:42", text="Lives in Oslo.", importance=3)
    assert Fact.everywhere.get(pk=proposed["id"]).project_id == beta.pk


def test_memoryui_project_in_the_environment_names_the_project(live_server, monkeypatch, alpha, beta, operator_key):
    monkeypatch.setenv("MEMORYUI_PROJECT", "beta")
    with Memoryui(live_server.url, api_key=operator_key, retries=FAST) as ops:
        made = ops.create(title="from the environment")
    # An explicit argument wins over the environment.
    with Memoryui(live_server.url, api_key=operator_key, project="alpha", retries=FAST) as ops:
        other = ops.create(title="named here")
    assert (project_of(made["id"]), project_of(other["id"])) == ("beta", "alpha")


def test_the_same_idempotency_key_in_two_projects_is_two_writes(live_server, alpha, beta, operator_key):
    made = {}
    for slug in ("alpha", "beta"):
        with Memoryui(live_server.url, api_key=operator_key, project=slug, retries=FAST) as ops:
            made[slug] = ops.create(title="same request", idempotency_key="create-ticket-7")
            again = ops.create(title="same request", idempotency_key="create-ticket-7")
            assert again["id"] == made[slug]["id"]  # a retry in one project replays its answer
    assert made["alpha"]["id"] != made["beta"]["id"]
    assert (project_of(made["alpha"]["id"]), project_of(made["beta"]["id"])) == ("alpha", "beta")


def test_the_async_client_takes_the_project_too(live_server, alpha, beta, operator_key):
    async def go():
        async with AsyncMemoryui(live_server.url, api_key=operator_key, project="beta", retries=FAST) as ops:
            made = await ops.create(title="async")
            return made, [c["id"] async for c in ops.list()]

    made, listed = run_async(go())
    assert listed == [made["id"]] and project_of(made["id"]) == "beta"


class State(TypedDict):
    messages: Annotated[list, add_messages]


def one_reply_graph(saver):
    builder = StateGraph(State)
    builder.add_node("agent", lambda state: {"messages": [AIMessage("Noted.", id="ai-1")]})
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("who", ["project key", "all-projects key naming beta"])
def test_every_plug_works_in_the_project(live_server, alpha, beta, alpha_key, operator_key, who):
    """Claude Agent SDK session store, OpenAI Agents session, LangGraph saver, LangChain and
    Pydantic AI histories: the same calls with a project's key, or with the operator's key
    and `project`, store in that project."""
    access = {"api_key": alpha_key} if who == "project key" else {"api_key": operator_key, "project": "beta"}
    where = "alpha" if who == "project key" else "beta"
    url = live_server.url

    async def async_plugs():
        store = MemoryuiSessionStore(url, retries=FAST, namespace_prefix="plug/", **access)
        key = {"project_key": "-srv-app", "session_id": "claude-1"}
        entry = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "through the Claude store"}}
        await store.append(key, [entry])
        assert await store.load(key) == [entry]
        await store.aclose()
        session = MemoryuiSession("agents-1", url=url, namespace="plug-agents", retries=FAST, **access)
        await session.add_items([{"role": "user", "content": "through the OpenAI Agents session"}])
        assert [i["content"] for i in await session.get_items()] == ["through the OpenAI Agents session"]
        await session.close()

    run_async(async_plugs())
    saver = MemoryuiSaver(url=url, retries=FAST, **access)
    one_reply_graph(saver).invoke({"messages": [HumanMessage("through LangGraph", id="h-1")]},
                                  {"configurable": {"thread_id": "graph-1"}})
    saver.close()
    chat = MemoryuiChatMessageHistory("chain-1", url=url, namespace="plug-langchain", retries=FAST, **access)
    chat.add_messages([HumanMessage("through LangChain")])
    assert [m.content for m in chat.messages] == ["through LangChain"]
    chat.close()
    history = MemoryuiMessageHistory("pydantic-1", url=url, namespace="plug-pydantic", retries=FAST, **access)
    history.save([ModelRequest(parts=[UserPromptPart("through Pydantic AI")])])
    assert len(history.load()) == 1

    stored = {c.namespace: c.project.slug for c in Conversation.everywhere.select_related("project")
              .filter(namespace__in=["plug/-srv-app", "plug-agents", "langgraph", "plug-langchain", "plug-pydantic"])}
    assert stored == {"plug/-srv-app": where, "plug-agents": where, "langgraph": where, "plug-langchain": where,
                      "plug-pydantic": where}
