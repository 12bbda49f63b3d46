"""Backups that restore: a backup taken while an agent appends through gunicorn, restored
into a fresh database, holds every append acknowledged before the backup started, passes
its verification, and a server over it serves; a restore refuses a database that is not
empty, and a backup that does not match its manifest is reported, not restored."""

import http.client
import json
import os
import signal
import threading
import time

import pytest

from conversations import api_keys, store
from tests.backup_support import manage, need_pg_tools
from tests.retention_support import database_url
from tests.server_support import free_port, start_gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def post(port, path, body, key):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", path, body=json.dumps(body),
                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    response = conn.getresponse()
    data = json.loads(response.read() or b"null")
    conn.close()
    return response.status, data


def get(port, path, key):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    data = json.loads(response.read() or b"null")
    conn.close()
    return response.status, data


def test_a_backup_taken_under_writers_restores_every_acknowledged_append(tmp_path, fresh_database):
    need_pg_tools()
    _, key = api_keys.create_api_key(name="backup-agent", scopes=["read", "write"])
    c = store.create_conversation(title="under backup", subject="customer:backup@example.com")
    port = free_port()
    server = start_gunicorn(port, tmp_path / "gunicorn.log", workers=2, MEMORYUI_DATA_DIR=str(tmp_path))
    acked, stop, errors = [], threading.Event(), []

    def agent():
        n = 0
        while not stop.is_set():
            status, body = post(port, f"/api/v1/conversations/{c.pk}/messages",
                                 {"kind": "user", "content": f"step {n}"}, key)
            if status != 201:
                errors.append((status, body))
                return
            acked.append((body["position"], f"step {n}"))
            n += 1

    writer = threading.Thread(target=agent)
    writer.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 30:
            assert time.monotonic() < deadline and not errors, errors
            time.sleep(0.01)
        before = list(acked)  # acknowledged before the backup started
        backup = tmp_path / "memoryui.backup"
        done = manage("backup", str(backup), url=database_url(), data_dir=tmp_path)
        during = len(acked) - len(before)
        assert done.returncode == 0, done.stderr
        assert backup.exists() and (tmp_path / "memoryui.backup.manifest.json").exists()
        # The writer was never stopped: it kept being answered while the backup ran and after.
        settle = len(acked)
        while len(acked) < settle + 5:
            assert time.monotonic() < deadline + 60 and not errors, errors
            time.sleep(0.01)
    finally:
        stop.set()
        writer.join(timeout=60)
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    assert not errors, errors

    target = fresh_database()
    done = manage("restore", str(backup), url=target, data_dir=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Restored and verified" in done.stdout

    # A server over the restored database serves, with the key and every acknowledged append.
    port2 = free_port()
    restored = start_gunicorn(port2, tmp_path / "restored.log", workers=1, MEMORYUI_DATA_DIR=str(tmp_path),
                              DATABASE_URL=target)
    try:
        stored, after = {}, -1
        while True:
            status, page = get(port2, f"/api/v1/conversations/{c.pk}/messages?after={after}", key)
            assert status == 200, page
            stored.update({m["position"]: m["message"]["content"] for m in page["items"]})
            if not page["next"]:
                break
            after = page["items"][-1]["position"]
        for position, text in before:
            assert stored.get(position) == text, f"acknowledged append {position} is missing"
        assert sorted(stored) == list(range(len(stored)))  # a prefix of the log, no hole
        status, _ = post(port2, f"/api/v1/conversations/{c.pk}/messages", {"kind": "user", "content": "after"}, key)
        assert status == 201
    finally:
        os.killpg(restored.pid, signal.SIGTERM)
        restored.wait(timeout=30)
    print(f"\nbackup under writers: {len(before)} appends acknowledged before it, {during} while it ran, "
          f"{len(stored)} in the restored database")


def test_a_restore_refuses_a_database_that_is_not_empty_and_a_backup_that_does_not_match(tmp_path, fresh_database):
    need_pg_tools()
    c = store.create_conversation(title="kept")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "one"})
    backup = tmp_path / "b.backup"
    assert manage("backup", str(backup), url=database_url(), data_dir=tmp_path).returncode == 0
    again = manage("backup", str(backup), url=database_url(), data_dir=tmp_path)
    assert again.returncode != 0 and "never overwrites" in again.stderr

    # Into the live (non-empty) database: refused, nothing touched.
    refused = manage("restore", str(backup), url=database_url(), data_dir=tmp_path)
    assert refused.returncode != 0 and "not empty" in refused.stderr
    assert store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "two"}) == 1

    # A manifest that says otherwise than the backup holds: the restore says FAILED.
    manifest_path = tmp_path / "b.backup.manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["tables"]["conversations_message"]["rows"] += 1
    manifest_path.write_text(json.dumps(manifest))
    failed = manage("restore", str(backup), url=fresh_database(), data_dir=tmp_path)
    assert failed.returncode != 0 and "verification FAILED" in failed.stderr
    assert "conversations_message" in failed.stdout and "differs" in failed.stdout
