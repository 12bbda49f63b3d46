"""Two and three writers of one session, each in its own process, through gunicorn's
worker processes: the Claude Agent SDK's SessionStore and the OpenAI Agents SDK's
Session, as two processes of one application would use them.

Every writer starts at once on a session that does not exist yet (so the first write
races too: the session door creates its conversation by the store's create-or-get)
and appends its batches, each conditional on the entry count it saw; a writer that
another beat reads again and retries after a jittered wait (integrations/_loop.py).
Afterwards every entry of every writer is there exactly once, in each writer's order,
in one conversation; no writer saw an error, no request answered 5xx.

Each case runs MEMORYUI_SESSION_WRITER_RUNS sessions (default 2) on one server; the
issue's figure is 20 runs on PostgreSQL:

    MEMORYUI_SESSION_WRITER_RUNS=20 DATABASE_URL=postgres:///mu_h8 \\
        .venv/bin/python -m pytest tests/test_session_writers.py
"""

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conversations import api_keys
from conversations.imports import entry_streams, sessions
from conversations.models import Conversation
from tests.retention_support import ROOT
from tests.server_support import gunicorn, nothing_failed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RUNS = int(os.environ.get("MEMORYUI_SESSION_WRITER_RUNS", "2"))
BATCHES = 5
BATCH = 20

# The writers: one process per door imports the door's SDK adapter once (seconds of CPU,
# which is not what is tested), then, for each session the test names on its standard input,
# forks one process per writer: each its own process with its own connections, as two
# processes of one application are. Each writer waits for the start file (all begin
# together), appends its batches through the adapter and writes what it sent and every error
# it saw to its report file; the parent answers "ready" once they are forked and "done" with
# how many failed once they have ended.
WRITERS = r"""
import asyncio, json, os, sys, time, traceback
from pathlib import Path
port, door, batches, size = sys.argv[1:5]
batches, size = int(batches), int(size)
url = f"http://127.0.0.1:{port}"
if door == "openai":
    from memoryui_client.integrations.openai_agents import MemoryuiSession
else:
    from memoryui_client.integrations.claude import MemoryuiSessionStore

async def main(writer, key, session):
    errors, sent = [], []
    if door == "openai":
        adapter = MemoryuiSession(session, url=url, api_key=key, namespace="writers")
        append = adapter.add_items
        close = adapter.close
        def make(b, i):
            return {"role": "user", "content": f"writer {writer} batch {b} item {i}"}
    else:
        adapter = MemoryuiSessionStore(url, api_key=key, namespace_prefix="writers/")
        sdk_key = {"project_key": "proj", "session_id": session}
        async def append(entries):
            await adapter.append(sdk_key, entries)
        close = adapter.aclose
        def make(b, i):
            return {"type": "user", "uuid": f"{session}-w{writer}-b{b}-i{i}", "sessionId": session,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": {"role": "user", "content": f"writer {writer} batch {b} item {i}"}}
    for b in range(batches):
        batch = [make(b, i) for i in range(size)]
        try:
            await append(batch)
            sent.extend(batch)
        except Exception as exc:  # reported to the test, so none can hide
            errors.append(f"{type(exc).__name__}: {exc}")
    await close()
    return sent, errors

for line in sys.stdin:
    key, session, writers, start, reports = line.split()
    children = []
    for writer in range(int(writers)):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                deadline = time.monotonic() + 60
                while not Path(start).exists() and time.monotonic() < deadline:
                    time.sleep(0.005)
                sent, errors = asyncio.run(main(writer, key, session))
                Path(reports, f"{writer}.json").write_text(json.dumps({"sent": sent, "errors": errors}))
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stderr.flush()
                os._exit(status)
        children.append(pid)
    print("ready", flush=True)
    failed = [pid for pid in children if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0]
    print("done", len(failed), flush=True)
"""


@pytest.fixture(scope="module")
def _gunicorn(django_db_setup, tmp_path_factory):
    """One server for the module: each test writes sessions of its own (names made unique)."""
    with gunicorn(tmp_path_factory.mktemp("writers") / "gunicorn.log", workers=3, threads=2) as server:
        yield server


@pytest.fixture
def server(_gunicorn):
    """Its port; what it logs during the test must hold no traceback and no dead worker."""
    with nothing_failed_in(_gunicorn):
        yield _gunicorn.port


@pytest.fixture(scope="module")
def writers(_gunicorn, tmp_path_factory):
    """`run(key, door, session, count)`: the reports of `count` writers of one session."""
    parents = {}  # door: (its process, the file its writers' errors go to)
    logs = tmp_path_factory.mktemp("writer-logs")

    def run(key: str, door: str, session: str, count: int) -> list[dict]:
        if door not in parents:
            log = open(logs / f"{door}.log", "w")
            parents[door] = (subprocess.Popen(
                [sys.executable, "-c", WRITERS, str(_gunicorn.port), door, str(BATCHES), str(BATCH)], cwd=ROOT,
                text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log), log)
        parent, log = parents[door]
        start, reports = logs / f"start-{session}", logs / f"reports-{session}"
        reports.mkdir()
        parent.stdin.write(f"{key} {session} {count} {start} {reports}\n")
        parent.stdin.flush()
        said = parent.stdout.readline().strip()
        assert said == "ready", (said, Path(log.name).read_text()[-3000:])
        start.write_text("go")
        said = parent.stdout.readline().strip()
        assert said == "done 0", (said, Path(log.name).read_text()[-3000:])
        return [json.loads((reports / f"{w}.json").read_text()) for w in range(count)]

    yield run
    for parent, log in parents.values():
        parent.stdin.close()
        parent.wait(timeout=60)
        log.close()


def _stored(door: str, session: str) -> tuple[list, int]:
    """The session's entries as stored, and how many conversations it has."""
    if door == "openai":
        items, _ = sessions.active_items(namespace="writers", session_id=session)
        count = Conversation.objects.filter(namespace="writers", external_id__startswith=session).count()
        return items, count
    _, entries = entry_streams.load_entries(format="claude-code", namespace="writers/proj", external_id=session)
    return entries, Conversation.objects.filter(namespace="writers/proj", external_id=session).count()


def _key(entry: dict) -> str:
    return json.dumps(entry, sort_keys=True)


@pytest.mark.parametrize("count", [2, 3])
@pytest.mark.parametrize("door", ["openai", "claude"])
def test_every_writer_s_entries_are_kept_once_in_one_conversation_and_no_writer_sees_an_error(
        server, writers, door, count):
    _, key = api_keys.create_api_key(name="writers", scopes=["read", "write"], created_by="test")
    failures = []
    for run in range(RUNS):
        session = f"{door}-{count}w-run{run}-{time.monotonic_ns()}"
        reports = writers(key, door, session, count)
        errors = [e for r in reports for e in r["errors"]]
        stored, conversations = _stored(door, session)
        keyed = [_key(e) for e in stored]
        in_order = True
        for report in reports:
            # Each writer's entries exactly once, in its own order.
            mine = [_key(e) for e in report["sent"]]
            in_order = in_order and [k for k in keyed if k in set(mine)] == mine
        ok = (not errors and conversations == 1 and in_order
              and len(keyed) == len(set(keyed)) == count * BATCHES * BATCH)
        if not ok:
            failures.append({"run": run, "errors": errors[:3], "conversations": conversations,
                             "stored": len(keyed), "distinct": len(set(keyed))})
    assert failures == [], failures


def _post(port: int, key: str, body: dict) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/api/v1/imports", body=json.dumps(body),
                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.parametrize("door", ["openai", "claude"])
def test_first_writes_of_a_new_session_sent_at_once_all_succeed_in_one_conversation(server, door):
    # Raw requests, no client retry: each first write must succeed by itself (before the
    # doors went through create-or-get, the losers got 500, then 409 import_in_progress).
    port = server
    _, key = api_keys.create_api_key(name="first", scopes=["read", "write"], created_by="test")
    writers, statuses = 12, []
    for run in range(RUNS):
        session = f"first-{door}-{run}-{time.monotonic_ns()}"
        bodies = []
        for w in range(writers):
            if door == "openai":
                entry = {"role": "user", "content": f"first write {w}"}
                bodies.append({"format": "openai-responses", "namespace": "writers", "external_id": session,
                               "entries": [entry]})
            else:
                entry = {"type": "user", "uuid": f"{session}-{w}", "sessionId": session,
                         "timestamp": "2026-01-01T00:00:00.000Z",
                         "message": {"role": "user", "content": f"first write {w}"}}
                bodies.append({"format": "claude-code", "namespace": "writers/proj", "external_id": session,
                               "entries": [entry]})
        barrier = threading.Barrier(writers)

        def send(body, barrier=barrier):
            barrier.wait(timeout=60)
            return _post(port, key, body)

        with ThreadPoolExecutor(writers) as pool:
            statuses += list(pool.map(send, bodies))
        stored, conversations = _stored(door, session)
        # A refused first write (409 import_in_progress) is as much a failure as a lost one.
        assert set(statuses[-writers:]) <= {200, 201}, (run, statuses[-writers:])
        assert conversations == 1
        assert sorted(_key(e) for e in stored) == sorted(_key(b["entries"][0]) for b in bodies)
    assert set(statuses) <= {200, 201}, sorted(statuses)
