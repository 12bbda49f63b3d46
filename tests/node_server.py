"""A memoryui server for the TypeScript client's own `npm test`, when none is given.

`npm test` in clients/typescript runs test/run.mjs: with MEMORYUI_URL and MEMORYUI_API_KEY
set it tests that server; without them it starts this script with the repository's
virtualenv, which makes a throw-away SQLite database in a temporary folder, migrates it,
makes the keys the tests use, lays out the Claude Code session files the store's tests
import (CLAUDE_CONFIG_DIR), serves it with gunicorn as `make run` does, and prints one line
of JSON: the environment the node tests read. It stops, and removes the folder, when its
standard input closes (run.mjs closes it when the tests are done, or by exiting).

The same session files serve tests/test_typescript_client.py (`claude_sessions`).
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "formats"


def claude_sessions(config: Path) -> dict:
    """Claude Code session files under `config` (CLAUDE_CONFIG_DIR): the sample session with a
    compaction and a subagent, and the importer's fixture session."""
    from conversations.frameworks.samples import AGENT_ID, claude_agent_session
    from tests.claude_sdk_support import write_session_files

    sample = claude_agent_session()
    write_session_files(config, sample)
    fixture = (FIXTURES / "claude_code_session.jsonl").read_text()
    fixture_id = json.loads(fixture.splitlines()[1])["sessionId"]
    (config / "projects" / "-home-dev-shop").mkdir(parents=True)
    (config / "projects" / "-home-dev-shop" / f"{fixture_id}.jsonl").write_text(fixture)
    return {"sessionId": sample.session_id, "dir": "/srv/billing", "projectKey": sample.project_key,
            "namespacePrefix": f"ts-claude-import-{uuid.uuid4().hex[:8]}/",
            "agentId": AGENT_ID, "fixture": {"sessionId": fixture_id, "dir": "/home/dev/shop",
                                             "projectKey": "-home-dev-shop"}}


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="memoryui-npm-test-"))
    env = {**os.environ, "MEMORYUI_DATA_DIR": str(folder / "data"), "DJANGO_SETTINGS_MODULE": "memoryui.settings"}
    env.pop("DATABASE_URL", None)
    os.environ.update(env)
    os.environ.pop("DATABASE_URL", None)
    sys.path.insert(0, str(ROOT))
    server = None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from conversations import api_keys
        from tests.server_support import free_port, start_gunicorn

        call_command("migrate", verbosity=0)
        scopes = ["read", "write", "facts:read", "facts:write"]
        key = api_keys.create_api_key(name="npm-test", scopes=scopes, created_by="npm test")[1]
        admin = api_keys.create_api_key(name="npm-test-admin", scopes=[*scopes, "admin"], created_by="npm test")[1]
        config = folder / "claude"
        sample = claude_sessions(config)
        port = free_port()
        server = start_gunicorn(port, folder / "gunicorn.log", workers=1, threads=8,
                                DATABASE_URL="", MEMORYUI_DATA_DIR=str(folder / "data"))
        print(json.dumps({"MEMORYUI_URL": f"http://127.0.0.1:{port}", "MEMORYUI_API_KEY": key,
                          "MEMORYUI_ADMIN_KEY": admin, "CLAUDE_CONFIG_DIR": str(config),
                          "MEMORYUI_CLAUDE_SAMPLE": json.dumps(sample)}), flush=True)
        sys.stdin.read()  # until run.mjs is done
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
