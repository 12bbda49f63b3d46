"""The TypeScript client (clients/typescript) and its plugs, built and run from the suite.

Built with tsc after `npm ci` from the lockfile (cached: tests/typescript_support.py),
then `node --test` runs clients/typescript/test/*.test.mjs against a live server on the
database this suite runs on: the client's operations, retries and typed errors; the
Claude Agent SDK store side by side with the SDK's InMemorySessionStore; the Vercel AI
SDK persister with the SDK's mock model; the OpenAI Agents JS session beside the SDK's
MemorySession in a real run(); the client and each plug with a project's key and with an
all-projects key naming a project. A missing node fails under CI=true.
"""

import json
import os
import random
import re
import subprocess
import warnings
from pathlib import Path

import pytest
from django.db import connection

from conversations.roles import AUDITOR
from memoryui_client import to_anthropic_messages, to_openai_messages
from tests.api_support import Api, make_key
from tests.node_server import claude_sessions
from tests.provider_oracle import anthropic_body, anthropic_problems, openai_body, openai_problems
from tests.render_support import NOTHING, generated_view
from tests.typescript_support import TS, build, generate_types, tools, two_projects, typecheck_against

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def built():
    build()
    return TS


def served_schema(client) -> dict:
    answer = client.get("/api/v1/openapi.json")
    assert answer.status_code == 200
    return answer.json()


def types_of(schema: dict, name: str):
    out = TS / "build"
    out.mkdir(exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(schema))
    generate_types(out / f"{name}.json", out / f"{name}.ts")
    return out / f"{name}.ts"


@pytest.mark.database_independent
def test_the_client_compiles_against_the_servers_openapi_document_as_served(client, built):
    # src/openapi.ts is the committed snapshot (`npm run schema`); the client must also
    # compile against what the server serves now, so a renamed field fails here.
    served = types_of(served_schema(client), "openapi")
    if served.read_text() == (TS / "src" / "openapi.ts").read_text():
        return  # the build compiled the client against exactly this
    errors = typecheck_against(served)
    if not errors:
        warnings.warn("the API's OpenAPI document changed since clients/typescript/src/openapi.ts was generated; "
                      "the client still compiles against it (regenerate it with `npm run schema`)", stacklevel=1)
    assert not errors, ("The client does not compile against the server's OpenAPI document (a field it uses was "
                        f"renamed or removed); fix it and regenerate src/openapi.ts with `npm run schema`:\n{errors}")


@pytest.mark.database_independent
def test_a_renamed_field_fails_the_typescript_build(client, built):
    schema = served_schema(client)
    properties = schema["components"]["schemas"]["MessagePage"]["properties"]
    properties["after_next"] = properties.pop("next")
    schema["components"]["schemas"]["MessagePage"]["required"] = [
        "after_next" if name == "next" else name for name in schema["components"]["schemas"]["MessagePage"]["required"]]
    errors = typecheck_against(types_of(schema, "renamed"))
    assert "src/client.ts" in errors and "Property 'next' does not exist on type" in errors, errors


def test_openai_agents_js_items_read_as_a_conversation(client):
    # OpenAI Agents JS writes camelCase items (`callId`, `function_call_result` with {type, text}):
    # the server maps them as it maps the Python SDK's Responses items. In-process, so this
    # holds even where node is not run.
    api = Api(client, make_key(["read", "write"], name="agents-js"))
    items = [{"role": "user", "content": "Weather in Oslo?"},
             {"type": "function_call", "id": "fc_1", "callId": "call_oslo", "name": "get_weather",
              "arguments": '{"city":"Oslo"}', "status": "completed"},
             {"type": "function_call_result", "callId": "call_oslo", "name": "get_weather", "status": "completed",
              "output": {"type": "text", "text": "Oslo: 3 °C"}},
             {"type": "message", "role": "assistant", "status": "completed", "id": "msg_2",
              "content": [{"type": "output_text", "text": "It is 3 °C in Oslo."}]}]
    answer = api.post("/imports", {"format": "openai-responses", "namespace": "agents-js", "external_id": "chat-1",
                                   "entries": items, "expected_entries": 0})
    assert answer.status_code in (200, 201), answer.content
    with connection.cursor() as cursor:
        cursor.execute("SELECT m.content FROM conversations_message m JOIN conversations_conversation c ON "
                       "c.id = m.conversation_id WHERE c.namespace = 'agents-js' ORDER BY m.position")
        rows = [json.loads(content) for (content,) in cursor.fetchall()]
    assert [r["kind"] for r in rows] == ["user", "assistant", "tool", "assistant"]
    assert rows[1]["tool_calls"] == [{"id": "call_oslo", "name": "get_weather", "arguments": '{"city":"Oslo"}'}]
    assert (rows[2]["tool_call_id"], rows[2]["name"], rows[2]["content"]) == ("call_oslo", "get_weather", "Oslo: 3 °C")
    assert api.get("/imports/sessions/items", {"namespace": "agents-js", "session_id": "chat-1"}).json()[
        "items"] == items  # kept verbatim beside the rows


# ---- the formats: the same bodies as the Python client's, which providers accept ----------

@pytest.mark.database_independent
def test_the_typescript_formats_render_every_view_as_the_python_client_does_and_providers_accept_it(built):
    # … and as ModelMessages the AI SDK's own schema accepts, every call answered right after it.
    # (That the server's exports render them alike too is tests/test_render_rules.py's.)
    rng = random.Random(25)
    views = [generated_view(rng) for _ in range(400)]
    path = TS / "build" / "views.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(views))
    node, _ = tools()
    done = subprocess.run([node, "test/render-views.mjs", str(path)], cwd=TS, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    rendered = json.loads(done.stdout)
    judged = 0
    for view, got in zip(views, rendered, strict=True):
        assert "error" not in got, (view, got)
        assert got["ai"] == [], (view, got["ai"])  # valid Vercel AI SDK ModelMessages too
        for journal in ("drop", "text"):
            if got["openai"][journal] == NOTHING:
                continue
            openai = to_openai_messages(view, journal=journal)
            anthropic = to_anthropic_messages(view, journal=journal)
            assert got["openai"][journal] == openai, (view, journal)
            assert got["anthropic"][journal] == anthropic, (view, journal)
            assert not openai_problems(openai_body(got["openai"][journal])), view
            assert not anthropic_problems(anthropic_body(got["anthropic"][journal])), view
            judged += 1
    assert judged > 600


def rows_in(namespace_prefix: str) -> list[tuple[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.external_id, COUNT(m.position) FROM conversations_conversation c "
            "LEFT JOIN conversations_message m ON m.conversation_id = c.id "
            "WHERE c.namespace LIKE %s GROUP BY c.id, c.external_id ORDER BY c.external_id",
            [namespace_prefix + "%"])
        return [(external_id or "", count) for external_id, count in cursor.fetchall()]


@pytest.mark.slow
def test_the_node_tests_pass_against_a_live_server(live_server, built, tmp_path):
    node, _ = tools()
    sample = claude_sessions(tmp_path)
    key = make_key(["read", "write", "facts:read", "facts:write"], name="typescript")
    admin_key = make_key(["read", "write", "admin", "facts:read", "facts:write"], name="typescript-admin")
    projects = two_projects()
    # What `npm test` runs (test/run.mjs: the *.test.mjs files), given this suite's live server.
    done = subprocess.run(
        [node, "test/run.mjs", "--test-reporter=spec"],
        cwd=TS, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MEMORYUI_URL": live_server.url, "MEMORYUI_API_KEY": key,
             "MEMORYUI_ADMIN_KEY": admin_key, "NO_COLOR": "1", "CLAUDE_CONFIG_DIR": str(tmp_path),
             "MEMORYUI_CLAUDE_SAMPLE": json.dumps(sample), "MEMORYUI_PROJECTS": json.dumps(projects)})
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"node --test failed:\n{output[-20000:]}"
    counts = dict(re.findall(r"^ℹ (tests|pass|fail|skipped|todo) (\d+)$", output, re.M))
    assert counts.get("fail") == "0" and counts.get("skipped") == "0" and counts.get("todo") == "0", output[-3000:]
    assert int(counts["pass"]) == int(counts["tests"]) > 0
    # What the retry test wrote, read from the database itself: three tries of a create
    # and two of a batch, each stored once.
    assert rows_in("ts-retry-") == [("lost-answers", 4)]
    assert_the_claude_session_landed_as_from_python(sample)
    assert_each_project_holds_its_own(projects)


def assert_each_project_holds_its_own(projects: dict) -> None:
    """Read from the database: what the project's key wrote is in its project, what the operator
    wrote naming the other project is in that one, each plug's session in both, apart."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.slug, c.namespace, c.external_id, COUNT(m.position) FROM conversations_conversation c "
            "JOIN conversations_project p ON p.id = c.project_id "
            "LEFT JOIN conversations_message m ON m.conversation_id = c.id "
            "WHERE c.namespace LIKE %s GROUP BY p.slug, c.id, c.namespace, c.external_id "
            "ORDER BY p.slug, c.namespace, c.external_id", [projects["namespace"] + "%"])
        held = [(slug, namespace.removeprefix(projects["namespace"]), external_id, count)
                for slug, namespace, external_id, count in cursor.fetchall()]
    mine, other = projects["mine"], projects["other"]
    assert held == [
        (mine, "", "same-id", 1),
        (mine, "-agents", "plug-chat", 1),
        (mine, "/-srv-app", "plug-session", 1),
        (other, "", "same-id", 2),
        (other, "-agents", "plug-chat", 1),
        (other, "-ai", None, 1),
        (other, "/-srv-app", "plug-session", 1),
    ], held


def assert_the_claude_session_landed_as_from_python(sample: dict) -> None:
    """The session imported through the TypeScript store is the conversation the Python
    store makes of it (tests/test_claude_session_store.py): one reply one row, the
    compaction a checkpoint, the subagent a child spawned at its Task call."""
    namespace = sample["namespacePrefix"] + sample["projectKey"]
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, parent_id, title FROM conversations_conversation WHERE namespace = %s AND "
                       "external_id = %s", [namespace, sample["sessionId"]])
        [(main_id, parent_id, title)] = cursor.fetchall()
        cursor.execute("SELECT kind FROM conversations_message WHERE conversation_id = %s ORDER BY position",
                       [main_id])
        kinds = [kind for (kind,) in cursor.fetchall()]
        cursor.execute("SELECT COUNT(*) FROM conversations_checkpoint WHERE conversation_id = %s", [main_id])
        [(checkpoints,)] = cursor.fetchall()
        cursor.execute("SELECT external_id, parent_relation FROM conversations_conversation WHERE parent_id = %s",
                       [main_id])
        children = cursor.fetchall()
    # Named by the SDK's renameSession through the store, as the SDK's listSessions names it too.
    assert parent_id is None and title == "Discount lines break the invoice export"
    assert kinds == ["user", "thought", "assistant", "tool", "assistant", "tool", "assistant",
                     "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert checkpoints == 1
    assert children == [(f"{sample['sessionId']}/subagents/agent-{sample['agentId']}", "subagent")]


# ---- the README's snippets, and what a person sees of a conversation written from TypeScript ----

README = Path(__file__).resolve().parent.parent / "docs" / "agents.md"  # the agent developers' guide
SHOTS = Path(__file__).resolve().parent.parent / "docs" / "screenshots"


def readme_snippets() -> list[str]:
    text = README.read_text()
    section = text.split("\n## Use it from TypeScript\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```js\n(.*?)```", section, re.S)


@pytest.mark.browser
def test_the_readme_snippets_run_and_the_conversation_reads_on_its_page(live_server, built, logged_in_page, tmp_path):
    from playwright.sync_api import expect  # imported here: without playwright the `page` fixture says so

    node, _ = tools()
    snippets = readme_snippets()
    assert len(snippets) == 4
    claude_sessions(tmp_path)
    env = {**os.environ, "MEMORYUI_URL": live_server.url, "CLAUDE_CONFIG_DIR": str(tmp_path),
           "MEMORYUI_API_KEY": make_key(["read", "write"], name="typescript-readme")}
    folder = TS / "build" / "readme"
    folder.mkdir(parents=True, exist_ok=True)
    outputs = []
    for n, snippet in enumerate(snippets):
        path = folder / f"snippet-{n}.mjs"  # inside the package: "@memoryui/client" resolves to itself
        path.write_text(snippet)
        done = subprocess.run([node, str(path)], cwd=TS, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"README snippet {n + 1} failed:\n{snippet}\n{done.stdout}{done.stderr}"
        outputs.append(done.stdout)
    assert outputs[0].split() == ["0", "user", "1", "assistant", "2", "tool", "3", "assistant", "4", "user", "5",
                                  "assistant"]
    assert outputs[1].strip() == "[ 'Invoice export fails on discount lines' ]"
    assert outputs[2].startswith("3 to 5 days. 2")
    assert outputs[3].startswith("Refunds take 3 to 5 days. 2")

    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM conversations_conversation WHERE namespace = 'my-agent' AND "
                       "external_id = 'session-ts-42'")
        [(conversation_id,)] = cursor.fetchall()
    page = logged_in_page(AUDITOR, f"/conversations/{conversation_id}/", username="tess")
    assert page.locator("h1").inner_text() == "Refund for order 7, from TypeScript"
    record = page.locator("#record")
    for seen in ("Where is my refund for order 7?", "order_status", '"status": "refunded"',
                 "Order 7 was refunded on 2 December", "You're welcome!"):
        expect(record).to_contain_text(seen, use_inner_text=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "typescript-conversation.png"), full_page=True)
