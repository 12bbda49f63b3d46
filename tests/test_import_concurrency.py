"""Agents keep appending, from another process, while a large transcript is imported."""

import json
import subprocess
import sys
import time

import pytest

from conversations.imports import importer, writer
from conversations.imports import store as import_store
from conversations.models import Conversation, Message
from tests.helpers import wait_until
from tests.retention_support import ROOT, conversation, database_url, subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

APPENDER = """
import json, os, sys, time, django
django.setup()
from conversations import store
cid, stop = sys.argv[1], sys.argv[2]
latencies, errors = [], []
print("ready", flush=True)
while not os.path.exists(stop):
    started = time.monotonic()
    try:
        store.append_message(conversation_id=cid, message={"kind": "note", "text": f"still here {len(latencies)}"})
    except Exception as exc:
        errors.append(repr(exc))
        break
    latencies.append(time.monotonic() - started)
    time.sleep(0.01)
print(json.dumps({"appends": len(latencies), "errors": errors, "max_wait": max(latencies, default=0)}))
"""

SESSION = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"


def write_session(path, turns: int) -> int:
    """A Claude Code session: prompt, thinking, two parallel tool calls, their results, an answer."""
    lines, parent = [], None

    def put(kind, n, **kw):
        nonlocal parent
        uid = f"u{len(lines):07d}"
        lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": SESSION, "type": kind,
                                 "uuid": uid, "timestamp": f"2025-11-02T10:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
                                 **kw}))
        parent = uid

    filler = "the cart total applies the coupon before the refund is checked " * 12
    for n in range(turns):
        put("user", n, message={"role": "user", "content": f"step {n}: fix the next failing test"})
        mid = f"msg_{n}"
        put("assistant", n, message={"id": mid, "role": "assistant", "content": [
            {"type": "thinking", "thinking": f"plan {n} " + filler}]})
        owners = []
        for c in range(2):
            put("assistant", n, message={"id": mid, "role": "assistant", "content": [
                {"type": "tool_use", "id": f"t{n}_{c}", "name": "Read", "input": {"file_path": f"f{c}.py"}}]})
            owners.append(parent)
        for c in range(2):
            parent = owners[c]
            put("user", n, message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{n}_{c}", "content": f"result {n}.{c} " + filler}]})
        put("assistant", n, message={"id": mid + "b", "role": "assistant", "content": [
            {"type": "text", "text": f"done {n}"}]})
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def test_appends_from_another_process_keep_succeeding_while_a_large_import_runs(tmp_path, monkeypatch):
    path = tmp_path / "session.jsonl"
    lines = write_session(path, 1500)
    busy = conversation(title="busy agent", messages=1)
    stop = tmp_path / "stop"
    appender = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(busy.pk), str(stop)], cwd=ROOT, text=True,
        env=subprocess_env(DATABASE_URL=database_url()), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    chunks, between = 0, 0
    real_write = import_store.write_chunk

    def write_then_let_an_append_in(**kw):
        nonlocal chunks, between
        real_write(**kw)
        chunks += 1
        seen = Message.objects.filter(conversation_id=busy.pk).count()
        # Between every two of the import's transactions, the other process gets its append in.
        wait_until(lambda: Message.objects.filter(conversation_id=busy.pk).count() > seen, timeout=60,
                   interval=0.005, message="an append between two of the import's transactions")
        between += 1

    monkeypatch.setattr(import_store, "write_chunk", write_then_let_an_append_in)
    try:
        assert appender.stdout.readline().strip() == "ready"
        started = time.monotonic()
        result = importer.import_path(str(path), namespace="proj")
        seconds = time.monotonic() - started
    finally:
        stop.write_text("stop")
        out, err = appender.communicate(timeout=60)
    report = json.loads(out.strip().splitlines()[-1])
    assert report["errors"] == [], err
    # Never one transaction: at most CHUNK_ROWS rows per transaction whatever the machine's speed
    # (a fast machine grows the chunks to that cap, a slow one shrinks them).
    rows = 1500 * 6  # seven lines a turn; the two tool_use lines of one message.id are one reply row
    assert between == chunks >= -(-rows // writer.CHUNK_ROWS)
    main = Conversation.objects.get(namespace="proj", external_id=SESSION)
    assert main.next_position == result.messages == rows and not main.deleting and not main.staged
    # The busy conversation's positions are still 0..n-1, one per append.
    positions = list(Message.objects.filter(conversation_id=busy.pk).order_by("position")
                     .values_list("position", flat=True))
    assert positions == list(range(1 + report["appends"]))
    # No append waited for the whole import: the lock is held a chunk at a time, and an append got in
    # after every chunk (above). How long one waits is the machine's speed: bench/w12_import.py measures it.
    summary = (f"{lines} lines imported in {seconds:.1f} s in {result.transactions} transactions (the longest "
               f"{result.longest_transaction:.3f} s); {report['appends']} appends meanwhile, the longest waited "
               f"{report['max_wait']:.3f} s")
    print(summary)
