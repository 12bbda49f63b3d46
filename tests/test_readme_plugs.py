"""Every README snippet of every plug runs as written, in environments installed as a user installs
them, at the lowest and the highest tested release of each framework range, against a live server.

The snippets are the ```python and ```js blocks of README.md's "Use it from Python", "Use it from
TypeScript", "Use it from your agent framework" and "OpenTelemetry" sections and of the two
clients' READMEs; the ```toml block (Codex's MCP configuration) is started as written too, and
the ```sh lines of the OpenTelemetry section are what the environment installs and exports.
Two words are replaced, the placeholders a reader replaces too: `http://127.0.0.1:8000` by the
live server's address and `mui_…` by a key. Nothing else is changed.

Besides the snippets, each end runs the suites the README's plug table names: the Claude Agent
SDK's `run_session_store_conformance` and `langgraph-checkpoint-conformance` in the Python
virtualenv, the TypeScript client's node suite (the Claude store beside InMemorySessionStore,
the AI SDK's mock model, OpenAI Agents JS's MemorySession) on the packed package. The
environments are made once and kept (tests/plug_envs.py).
"""

import json
import os
import re
import shutil
import subprocess
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conversations.models import Conversation, Message
from tests import plug_envs
from tests.api_support import make_key
from tests.claude_sdk_support import run_async
from tests.node_server import claude_sessions
from tests.typescript_support import TS, tools, two_projects

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "docs" / "agents.md"  # the agent developers' guide: its snippets and install lines
PLACEHOLDER_URL = "http://127.0.0.1:8000"
PLACEHOLDER_KEY = "mui_…"
PYTHON_SECTIONS = ("Use it from Python", "Use it from your agent framework", "OpenTelemetry")


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def python_snippets() -> list[str]:
    text = README.read_text()
    found = [b for title in PYTHON_SECTIONS for b in blocks(section(text, title), "python")]
    return found + blocks((ROOT / "clients" / "python" / "README.md").read_text(), "python")


def js_snippets() -> list[str]:
    return blocks(section(README.read_text(), "Use it from TypeScript"), "js") + blocks(
        (TS / "README.md").read_text(), "js")


def exports() -> dict[str, str]:
    """The `export NAME=value` lines of the OpenTelemetry section, as the reader's shell has them."""
    return dict(re.findall(r"^export (\w+)=(\S+)$", section(README.read_text(), "OpenTelemetry"), re.M))


def filled(snippet: str, url: str, key: str) -> str:
    return snippet.replace(PLACEHOLDER_URL, url).replace(PLACEHOLDER_KEY, key)


@pytest.fixture(params=plug_envs.ENDS)
def end(request):
    return request.param


@pytest.fixture
def key():
    return make_key(["read", "write", "admin", "facts:read", "facts:write"], name="readme")


# ---- a stand-in for OpenAI's API (the OpenTelemetry snippet's client talks to it) -----------------


class _OpenAI(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        body = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600,
                           "model": f"{request.get('model', 'gpt')}-2026",
                           "choices": [{"index": 0, "finish_reason": "stop", "message": {
                               "role": "assistant", "content": "It was refunded on 3 May."}}],
                           "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def openai_stand_in():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def git_checkout(folder: Path) -> Path:
    """A repository with a change in it: the working tree the task-state snippet snapshots."""
    folder.mkdir()
    git = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "notes.txt").write_text("first\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (folder / "notes.txt").write_text("first\nsecond\n")
    return folder


# ---- Python ------------------------------------------------------------------------------------------


# The snippets and the packed package judge the README's text and what an install from the
# checkout brings; the API they call is judged on both databases by the API tests, by the
# conformance suites below and by the client's node tests (test_typescript_client).
@pytest.mark.same_on_every_database
def test_the_python_snippets_run_as_written_in_a_fresh_virtualenv(end, live_server, key, tmp_path,
                                                                   openai_stand_in):
    env_dir = plug_envs.python_env(end)
    expected = {name: versions[plug_envs.ENDS.index(end)] for name, versions in plug_envs.python_ranges().items()}
    assert plug_envs.installed_versions(env_dir, expected) == expected
    claude_sessions(tmp_path / "claude")
    workdir = git_checkout(tmp_path / "work")
    env = {**os.environ, **exports(), "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "OPENAI_API_KEY": "sk-test",
           "OPENAI_BASE_URL": openai_stand_in, "PYTHONPATH": ""}
    for name in ("MEMORYUI_URL", "MEMORYUI_API_KEY", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE"):
        env.pop(name, None)
    snippets = python_snippets()
    assert len(snippets) == 12
    for n, snippet in enumerate(snippets):
        path = tmp_path / f"snippet_{n}.py"
        path.write_text(filled(snippet, live_server.url, key))
        done = subprocess.run([str(env_dir / "bin" / "python"), str(path)], cwd=workdir, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"README snippet failed ({end}):\n{snippet}\n{done.stdout}{done.stderr[-4000:]}"

    # What they wrote is there: the LangGraph thread, and the OpenAI call traced with its messages.
    assert Conversation.objects.filter(namespace="langgraph", meta__langgraph__thread_id="t-42").exists()
    traced = [json.loads(c) for c in Message.objects.filter(conversation__namespace="otel").order_by(
        "conversation__created_at", "position").values_list("content", flat=True)]
    assert {"kind": "user", "content": "Where is my refund?"} in traced
    assert any(r["kind"] == "assistant" and r.get("content") == "It was refunded on 3 May." for r in traced)
    # Codex's configuration (```toml) starts the server it names, as Codex would.
    assert_the_codex_configuration_starts_the_mcp_server(env, live_server.url, key)


def assert_the_codex_configuration_starts_the_mcp_server(env: dict, url: str, key: str) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    [toml] = blocks(section(README.read_text(), "Use it from your agent framework"), "toml")
    server = tomllib.loads(filled(toml, url, key))["mcp_servers"]["memoryui"]
    command = shutil.which(server["command"], path=env["PATH"])
    assert command, f"{server['command']} is not installed with the [mcp] extra"
    params = StdioServerParameters(command=command, args=server["args"], env={**env, **server["env"]})

    async def tools_of():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return [tool.name for tool in (await session.list_tools()).tools]

    assert "read_conversation" in run_async(tools_of())


CONFORMANCE = '''
import asyncio, json, sys, uuid
from claude_agent_sdk.testing import run_session_store_conformance
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from memoryui_client.integrations.claude import MemoryuiSessionStore
from memoryui_client.integrations.langgraph import MemoryuiSaver

url, key = sys.argv[1:3]

async def claude():
    made = []
    def store():
        made.append(MemoryuiSessionStore(url, api_key=key, namespace_prefix=f"c-{uuid.uuid4().hex[:10]}/"))
        return made[-1]
    await run_session_store_conformance(store, skip_optional=frozenset())
    for s in made:
        await s.aclose()

@checkpointer_test(name="MemoryuiSaver")
async def saver():
    s = MemoryuiSaver(url=url, api_key=key)
    yield s
    await s.aclose()

asyncio.run(claude())
report = asyncio.run(validate(saver))
failed = {n: r.failures for n, r in report.results.items() if not r.passed}
assert report.passed_all_base() and not failed, failed
print(json.dumps({c.value: report.results[c.value].tests_passed for c in Capability}))
'''


def test_the_python_plugs_pass_their_suites_in_a_fresh_virtualenv(end, live_server, key, tmp_path):
    env_dir = plug_envs.python_env(end)
    script = tmp_path / "conformance.py"
    script.write_text(CONFORMANCE)
    done = subprocess.run([str(env_dir / "bin" / "python"), str(script), live_server.url, key], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    passed = json.loads(done.stdout.strip().splitlines()[-1])
    assert passed and all(count > 0 for count in passed.values()), passed


# ---- TypeScript ---------------------------------------------------------------------------------------


def node_env(live_server, key, config: Path) -> dict:
    """What the node tests read (support.mjs): a key without `admin` (a test counts on its 403), and one with it."""
    writer = make_key(["read", "write", "facts:read", "facts:write"], name="readme-node")
    return {**os.environ, "MEMORYUI_URL": live_server.url, "MEMORYUI_API_KEY": writer, "MEMORYUI_ADMIN_KEY": key,
            "CLAUDE_CONFIG_DIR": str(config), "NO_COLOR": "1"}


@pytest.mark.same_on_every_database
def test_the_typescript_snippets_run_as_written_in_a_fresh_npm_project(end, live_server, key, tmp_path):
    project = plug_envs.node_project(end)
    node, _ = tools()
    claude_sessions(tmp_path / "claude")
    snippets = js_snippets()
    assert len(snippets) == 5
    outputs = []
    for n, snippet in enumerate(snippets):
        path = project / f"snippet-{n}-{tmp_path.name}.mjs"  # "@memoryui/client" from node_modules, as an app has it
        path.write_text(filled(snippet, live_server.url, key))
        try:
            done = subprocess.run([node, str(path)], cwd=project, env=node_env(live_server, key, tmp_path / "claude"),
                                  capture_output=True, text=True, timeout=180)
        finally:
            path.unlink()
        assert done.returncode == 0, f"README snippet failed ({end}):\n{snippet}\n{done.stdout}{done.stderr[-4000:]}"
        outputs.append(done.stdout)
    assert outputs[0].split() == ["0", "user", "1", "assistant", "2", "tool", "3", "assistant", "4", "user", "5",
                                  "assistant"]


IMPORTS = {"../dist/index.js": "@memoryui/client", "../dist/ai.js": "@memoryui/client/ai",
           "../dist/claude-agent-sdk.js": "@memoryui/client/claude-agent-sdk",
           "../dist/openai-agents.js": "@memoryui/client/openai-agents"}


@pytest.mark.same_on_every_database
def test_the_typescript_node_suite_passes_on_the_packed_package(end, live_server, key, tmp_path):
    project = plug_envs.node_project(end)
    node, _ = tools()
    sample = claude_sessions(tmp_path / "claude")
    suite = project / f"test-{tmp_path.name}"
    suite.mkdir()
    for source in (TS / "test").glob("*.mjs"):
        text = source.read_text()
        for local, published in IMPORTS.items():
            text = text.replace(f'"{local}"', f'"{published}"')
        assert "../dist/" not in text, source.name
        (suite / source.name).write_text(text)
    try:
        done = subprocess.run([node, str(suite / "run.mjs"), "--test-reporter=spec"], cwd=project, timeout=600,
                              capture_output=True, text=True,
                              env={**node_env(live_server, key, tmp_path / "claude"),
                                   "MEMORYUI_CLAUDE_SAMPLE": json.dumps(sample),
                                   "MEMORYUI_PROJECTS": json.dumps(two_projects())})
    finally:
        shutil.rmtree(suite)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"node --test failed ({end}):\n{output[-20000:]}"
    counts = dict(re.findall(r"^ℹ (tests|pass|fail|skipped|todo) (\d+)$", output, re.M))
    assert counts.get("fail") == "0" and counts.get("skipped") == "0", output[-3000:]
    assert int(counts["pass"]) == int(counts["tests"]) > 0


# ---- the table, and the checkout ------------------------------------------------------------------


@pytest.mark.database_independent
def test_the_plug_table_names_the_ends_that_are_installed_and_tested():
    table = section(README.read_text(), "Use it from your agent framework").split(
        "### What each plug is tested with", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in [line for line in table.splitlines() if line.startswith("|")][2:]:
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        rows[cells[1]] = (cells[2], cells[3])
    assert rows == {**plug_envs.python_ranges(), **plug_envs.typescript_ranges()}


@pytest.mark.database_independent
def test_installing_the_client_from_the_checkout_writes_nothing_into_it(tmp_path):
    def untracked() -> set[str]:
        done = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "."],
                              cwd=plug_envs.CLIENT, capture_output=True, text=True, check=True)
        return {line[3:] for line in done.stdout.splitlines() if "__pycache__" not in line}

    before = untracked()
    venv = tmp_path / "venv"
    subprocess.run([shutil.which("python3") or "python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    uv = plug_envs._uv()
    if uv is not None:
        binary, flags, env = uv
        args = [str(binary), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *flags,
                "--no-deps", str(plug_envs.CLIENT)]
    else:
        subprocess.run([str(venv / "bin" / "python"), "-m", "ensurepip", "-q"], check=True)
        args, env = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(plug_envs.CLIENT)], {}
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert untracked() == before  # no build/, no *.egg-info
