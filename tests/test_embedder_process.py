"""Under gunicorn the background embedder runs in one process of its own beside the web
workers (memoryui/gunicorn_conf.py): the workers load no model and run no embedding
thread, what agents append still gets its vectors, a process that dies is started again,
and stopping the server stops it."""

import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from conversations import api_keys, store
from conversations.search.models import MessageVector
from tests.helpers import wait_until
from tests.server_support import free_port, start_gunicorn

pytestmark = pytest.mark.django_db(transaction=True)


def _children(pid: int) -> dict[int, str]:
    """pid → command line of the processes whose parent is `pid`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        ppid = int(next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1])
        if ppid == pid:
            found[int(entry.name)] = cmdline
    return found


def _embedders(pid: int) -> list[int]:
    return [child for child, cmd in _children(pid).items() if "embed --follow" in cmd]


def _threads(pid: int) -> set[str]:
    names = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names.add((task / "comm").read_text().strip())
        except OSError:
            pass
    return names


def _append(port: int, key: str, conversation_id, text: str) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/v1/conversations/{conversation_id}/messages",
        data=json.dumps({"kind": "user", "content": text}).encode(), method="POST",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return answer.status


def test_one_embedding_process_runs_beside_the_workers_and_is_restarted(tmp_path):
    key = api_keys.create_api_key(name="embedder", scopes=["read", "write"])[1]
    conversation = store.create_conversation(title="embedder process")
    port = free_port()
    proc = start_gunicorn(port, tmp_path / "gunicorn.log", workers=2)
    try:
        wait_until(lambda: len(_embedders(proc.pid)) == 1, timeout=30,
                   message=lambda: f"no embedding process beside the workers: {_children(proc.pid)}")
        first = _embedders(proc.pid)[0]
        workers = [child for child in _children(proc.pid) if child != first]
        assert len(workers) == 2
        for worker in workers:
            # The thread's name is set by Python; Linux keeps its first 15 characters.
            assert not any(name.startswith("memoryui-embed") for name in _threads(worker))
        assert _append(port, key, conversation.id, "the parcel arrived broken") == 201
        wait_until(lambda: MessageVector.objects.filter(conversation_id=conversation.id).count() == 1, timeout=60,
                   message=lambda: "the appended message got no vector from the embedding process")

        os.kill(first, signal.SIGKILL)
        # Read once per try: the list may change between two reads while the process restarts.
        wait_until(lambda: any(pid != first for pid in _embedders(proc.pid)), timeout=30,
                   message=lambda: "the embedding process was not started again")
        assert _append(port, key, conversation.id, "a refund was asked for") == 201
        wait_until(lambda: MessageVector.objects.filter(conversation_id=conversation.id).count() == 2, timeout=60,
                   message=lambda: "the restarted embedding process gave the new message no vector")
        second = next(pid for pid in _embedders(proc.pid) if pid != first)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{second}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{second}").exists(), "the embedding process outlived the server"
    assert "Traceback" not in (tmp_path / "gunicorn.log").read_text()
