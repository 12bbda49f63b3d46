"""The TypeScript client (clients/typescript) and its plugs, built and run from the suite.

Built with tsc after `npm ci` from the lockfile (cached: tests/typescript_support.py),
then `node --test` runs clients/typescript/test/*.test.mjs against a live server on the
database this suite runs on: the client's operations, retries and typed errors; the
Claude Agent SDK store side by side with the SDK's InMemorySessionStore; the Vercel AI
SDK persister with the SDK's mock model; the OpenAI Agents JS session beside the SDK's
MemorySession in a real run(). A missing node fails under CI=true.
"""

import json
import os
import re
import subprocess

from pathlib import Path

import pytest
from django.db import connection

from conversations.frameworks.samples import AGENT_ID, claude_agent_session
from tests.claude_sdk_support import write_session_files

from tests.api_support import make_key
from tests.typescript_support import TS, build, generate_types, tools, typecheck_against

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURES = Path(__file__).parent / "fixtures" / "formats"


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


def test_the_client_compiles_against_the_servers_openapi_document_as_served(client, built):
    # src/openapi.ts is the committed snapshot (`npm run schema`); the client must also
    # compile against what the server serves now, so a renamed field fails here.
    errors = typecheck_against(types_of(served_schema(client), "openapi"))
    assert not errors, ("The client does not compile against the server's OpenAPI document (a field it uses was "
                        f"renamed or removed); fix it and regenerate src/openapi.ts with `npm run schema`:\n{errors}")


def test_a_renamed_field_fails_the_typescript_build(client, built):
    schema = served_schema(client)
    properties = schema["components"]["schemas"]["MessagePage"]["properties"]
    properties["after_next"] = properties.pop("next")
    schema["components"]["schemas"]["MessagePage"]["required"] = [
        "after_next" if name == "next" else name for name in schema["components"]["schemas"]["MessagePage"]["required"]]
    errors = typecheck_against(types_of(schema, "renamed"))
    assert "src/client.ts" in errors and "Property 'next' does not exist on type" in errors, errors


def rows_in(namespace_prefix: str) -> list[tuple[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.external_id, COUNT(m.position) FROM conversations_conversation c "
            "LEFT JOIN conversations_message m ON m.conversation_id = c.id "
            "WHERE c.namespace LIKE %s GROUP BY c.id, c.external_id ORDER BY c.external_id",
            [namespace_prefix + "%"])
        return [(external_id or "", count) for external_id, count in cursor.fetchall()]


def claude_sessions(config: Path) -> dict:
    """Claude Code session files under `config` (CLAUDE_CONFIG_DIR): the sample session with a
    compaction and a subagent, and the importer's fixture session."""
    sample = claude_agent_session()
    write_session_files(config, sample)
    fixture = (FIXTURES / "claude_code_session.jsonl").read_text()
    fixture_id = json.loads(fixture.splitlines()[1])["sessionId"]
    (config / "projects" / "-home-dev-shop").mkdir(parents=True)
    (config / "projects" / "-home-dev-shop" / f"{fixture_id}.jsonl").write_text(fixture)
    return {"sessionId": sample.session_id, "dir": "/srv/billing", "projectKey": sample.project_key,
            "agentId": AGENT_ID, "fixture": {"sessionId": fixture_id, "dir": "/home/dev/shop",
                                             "projectKey": "-home-dev-shop"}}


def test_the_node_tests_pass_against_a_live_server(live_server, built, tmp_path):
    node, _ = tools()
    sample = claude_sessions(tmp_path)
    key = make_key(["read", "write", "facts:read", "facts:write"], name="typescript")
    admin_key = make_key(["read", "write", "admin", "facts:read", "facts:write"], name="typescript-admin")
    done = subprocess.run(
        [node, "--test", "--test-reporter=spec", "--test-concurrency=1", *sorted(
            str(p.relative_to(TS)) for p in (TS / "test").glob("*.test.mjs"))],
        cwd=TS, capture_output=True, text=True, timeout=600,
        env={**os.environ, "MEMORYUI_URL": live_server.url, "MEMORYUI_API_KEY": key,
             "MEMORYUI_ADMIN_KEY": admin_key, "NO_COLOR": "1", "CLAUDE_CONFIG_DIR": str(tmp_path),
             "MEMORYUI_CLAUDE_SAMPLE": json.dumps(sample)})
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"node --test failed:\n{output[-20000:]}"
    counts = dict(re.findall(r"^ℹ (tests|pass|fail|skipped|todo) (\d+)$", output, re.M))
    assert counts.get("fail") == "0" and counts.get("skipped") == "0" and counts.get("todo") == "0", output[-3000:]
    assert int(counts["pass"]) == int(counts["tests"]) > 0
    # What the retry test wrote, read from the database itself: three tries of a create
    # and two of a batch, each stored once.
    assert rows_in("ts-retry-") == [("lost-answers", 4)]
    assert_the_claude_session_landed_as_from_python(sample)


def assert_the_claude_session_landed_as_from_python(sample: dict) -> None:
    """The session imported through the TypeScript store is the conversation the Python
    store makes of it (tests/test_claude_session_store.py): one reply one row, the
    compaction a checkpoint, the subagent a child spawned at its Task call."""
    namespace = "ts-claude-import/" + sample["projectKey"]
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
    assert parent_id is None and title == "Invoice export fails on discount lines"
    assert kinds == ["user", "thought", "assistant", "tool", "assistant", "tool", "assistant",
                     "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert checkpoints == 1
    assert children == [(f"{sample['sessionId']}/subagents/agent-{AGENT_ID}", "subagent")]
