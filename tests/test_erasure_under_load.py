"""Agents write through gunicorn while deletion requests, deletes and prunes run.

The way production broke: the raw-byte verification opened and closed the live
SQLite files inside a worker, which dropped that worker's locks, and the other
workers then lost acknowledged appends and corrupted the file. Here several
gunicorn worker processes serve appenders in separate processes while the
maintenance doors run over HTTP; afterwards every acknowledged append must be
present exactly once with its text, no request may have answered 5xx, every
receipt the API returned must exist, and the database must check out.

It runs on both databases (DATABASE_URL). On PostgreSQL a deletion request rewrites
the tables it deleted from online (pg_repack; VACUUM FULL, which appends queue behind,
only where it is missing): the test checks that appends really ran while the deletion requests ran, and
prints the longest append wait and the 99th percentile of those that overlapped a
deletion. It asserts only that no append failed or outlived the client's timeout;
the one-second target for a writer's wait is measured in bench/, not here.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection

from conversations import api_keys
from conversations.models import Conversation, Message
from conversations.retention.models import DeletionReceipt
from conversations.search.reads import Filters, search_messages
from tests.helpers import wait_until
from tests.retention_support import ROOT, age, conversation, sqlite_integrity_check
from tests.search_support import rows_the_index_knows
from tests.server_support import free_port, start_gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

APPENDERS = 3
# Three requests: the prune runs after the second and the conversation's DELETE after the
# third, so each maintenance door overlaps the appends at least once.
SUBJECTS = 3
APPEND_TIMEOUT = 60  # seconds an appender waits for an answer before it counts a failure

APPENDER = r"""
import http.client, json, os, sys, time
port, key, cid, writer, stop = sys.argv[1:6]
timeout = int(sys.argv[6])
acked, failures, waits = [], [], []
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
i = 0
print("ready", flush=True)
while not os.path.exists(stop):
    text = f"writer {writer} append {i}"
    body = json.dumps({"kind": "user", "content": text})
    started = time.monotonic()
    try:
        conn.request("POST", f"/api/v1/conversations/{cid}/messages", body=body,
                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                              "Idempotency-Key": f"{writer}-{i}"})
        response = conn.getresponse()
        answer = response.read()
    except Exception as exc:  # the connection broke: the write may or may not have happened
        failures.append(f"{type(exc).__name__}: {exc}")
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
        i += 1
        continue
    # CLOCK_MONOTONIC is one clock for every process on the machine: the test lines
    # these up with the times its deletion requests ran.
    waits.append([started, time.monotonic() - started])
    if response.status == 201:
        acked.append([json.loads(answer)["position"], text])
    else:
        failures.append(f"{response.status}: {answer[:300]!r}")
    i += 1
print(json.dumps({"acked": acked, "failures": failures, "waits": waits}))
"""


def _call(port: int, key: str, method: str, path: str, body=None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"Authorization": f"Bearer {key}"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, f"/api/v1{path}", body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data or b"{}")


def _until_not_busy(call) -> tuple[int, dict]:
    """A second maintenance run is refused with 409 maintenance_running: wait and ask again."""
    answers = []

    def answered():
        answers.append(call())
        status, body = answers[-1]
        return status != 409 or body.get("error", {}).get("code") != "maintenance_running"

    wait_until(answered, timeout=60, interval=0.1, message="maintenance stayed busy for a minute")
    return answers[-1]


def _appends_flow(busy, since: dict[str, int] | None = None, rows: int = 3) -> dict[str, int]:
    """Wait until every busy conversation has `rows` more messages than `since` (none when
    None): its appender is writing. Returns the counts then."""
    seen = {}

    def flowing():
        seen.update({c.pk: Message.objects.of(c.pk).count() for c in busy})
        return all(n >= (since or {}).get(pk, 0) + rows for pk, n in seen.items())

    wait_until(flowing, timeout=120, message=lambda: f"an appender stopped writing: {seen} rows, since {since}")
    return dict(seen)


def _every_acknowledged_append_is_stored(busy, reports) -> tuple[int, int]:
    """Every acknowledged position once, with its own text, and nothing else; returns how many
    appends were acknowledged and how many rows are present."""
    acknowledged = present = 0
    for c, (report, err) in zip(busy, reports, strict=True):
        assert report is not None, err[-3000:]
        assert report["failures"] == [], report["failures"][:5]
        rows = list(Message.objects.of(c.pk).order_by("position").values_list("position", "content"))
        acked = sorted(report["acked"])
        assert [p for p, _ in rows] == [p for p, _ in acked] == list(range(len(acked)))
        assert all(text in content for (_, text), (_, content) in zip(acked, rows, strict=True))
        assert Conversation.objects.get(pk=c.pk).next_position == len(acked)
        acknowledged += len(acked)
        present += len(rows)
    assert acknowledged == present and acknowledged > 0
    return acknowledged, present


def _erase_while_appending(port, key, subjects, lonely):
    """A deletion request per subject, a prune after the second and a conversation's DELETE
    after the third: (receipts, answer statuses, (began, ended) of each deletion request)."""
    receipts, answers, deleting = [], [], []
    for n, subject in enumerate(subjects):
        began = time.monotonic()
        status, body = _until_not_busy(
            lambda subject=subject: _call(port, key, "POST", "/deletion-requests", {"subject": subject}))
        deleting.append((began, time.monotonic()))
        answers.append(status)
        if status == 201:
            receipts.append(body["request_id"])
        if n == 1:
            status, body = _until_not_busy(lambda: _call(port, key, "POST", "/prune", {"older_than_days": 90}))
            answers.append(status)
        if n == 2:
            status, body = _until_not_busy(lambda: _call(port, key, "DELETE", f"/conversations/{lonely.pk}"))
            answers.append(status)
            if status == 200:
                receipts.append(body["receipt_id"])
    return receipts, answers, deleting


def test_no_acknowledged_append_is_lost_while_deletions_and_prunes_run(tmp_path):
    _, key = api_keys.create_api_key(name="load", scopes=["admin"], created_by="test")
    busy = [conversation(title=f"busy {i}", subject=f"cust:busy-{i}", messages=0) for i in range(APPENDERS)]
    filler = " ".join(f"word{j}" for j in range(60))
    subjects = [f"cust:gone-{i}" for i in range(SUBJECTS)]
    for subject in subjects:
        for j in range(2):
            conversation(title=f"{subject} {j}", subject=subject, messages=40,
                         text=f"{subject} private note {{i}} {filler}")
    old = [conversation(title=f"old {i}", messages=30, text=f"stale chat {{i}} {filler}") for i in range(4)]
    for c in old:
        age(c, 100)
    lonely = conversation(title="delete me", messages=25, text="one conversation to delete {i}")

    port, stop = free_port(), tmp_path / "stop"
    server = start_gunicorn(port, tmp_path / "gunicorn.log", workers=APPENDERS)
    appenders = []
    try:
        for i, c in enumerate(busy):
            p = subprocess.Popen([sys.executable, "-c", APPENDER, str(port), key, str(c.pk), str(i), str(stop),
                                  str(APPEND_TIMEOUT)],
                                 cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert p.stdout.readline().strip() == "ready"
            appenders.append(p)
        _appends_flow(busy)

        receipts, answers, deleting = _erase_while_appending(port, key, subjects, lonely)
        _appends_flow(busy, since=_appends_flow(busy, rows=0))  # and they go on after the last one
    finally:
        stop.write_text("stop")
        reports = []
        for p in appenders:
            out, err = p.communicate(timeout=120)
            reports.append((json.loads(out.strip().splitlines()[-1]) if out.strip() else None, err))
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)

    log = (tmp_path / "gunicorn.log").read_text()
    assert "Traceback" not in log and "SIGBUS" not in log and "Worker exited" not in log, log[-3000:]
    assert answers == [201, 201, 200, 201, 200], answers  # the prune and the DELETE answer 200

    acknowledged, present = _every_acknowledged_append_is_stored(busy, reports)

    waits = [w for report, _ in reports for w in report["waits"]]
    during = sorted(wait for started, wait in waits
                    if any(started < end and started + wait > begin for begin, end in deleting))
    # The case is watched only if appends really ran while the deletion requests ran.
    assert len(during) >= len(deleting), (len(during), deleting)
    longest = max(wait for _, wait in waits)  # under APPEND_TIMEOUT: one past it is a failure, none were
    print(f"\n{connection.vendor}: {acknowledged} acknowledged appends, {present} present; "
          f"longest append {longest:.3f} s; during the {len(deleting)} deletion requests "
          f"({', '.join(f'{end - begin:.1f}' for begin, end in deleting)} s): {len(during)} appends, "
          f"longest {during[-1]:.3f} s, p99 {during[int(0.99 * (len(during) - 1))]:.3f} s")

    stored = DeletionReceipt.objects.filter(pk__in=receipts)
    assert stored.count() == len(receipts) == SUBJECTS + 1
    # On PostgreSQL, appends racing the WAL switches can leave erased text in a segment not
    # yet recycled: the receipt then says verified_except_wal and names only pg_wal segments
    # (the database files are clean). The WAL's own behaviour is tested in test_erasure_online.
    allowed = {"verified"} if connection.vendor == "sqlite" else {"verified", "verified_except_wal"}
    unclean = [r.verification for r in stored if r.verification["status"] != "verified"]
    assert {r.verification["status"] for r in stored} <= allowed, unclean
    assert all(name.startswith("pg_wal/") for u in unclean for name in u["found_in"] or []), unclean
    assert not Conversation.objects.filter(subject__in=subjects).exists()
    assert not Conversation.objects.filter(pk__in=[c.pk for c in old] + [lonely.pk]).exists()
    # The search index took every acknowledged row once, and nothing of what was deleted.
    indexed, stored_rows = rows_the_index_knows()
    assert indexed == stored_rows
    for c, (report, _) in zip(busy, reports, strict=True):
        found, cursor = [], None
        while True:
            page = search_messages("writer append", filters=Filters(conversation_id=c.pk), cursor=cursor, limit=100)
            found += [h.position for h in page.hits]
            cursor = page.next_cursor
            if not cursor:
                break
        assert found == sorted((p for p, _ in report["acked"]), reverse=True)
    assert search_messages("private").hits == [] and search_messages("stale").hits == []
    if connection.vendor == "sqlite":
        assert sqlite_integrity_check() == ["ok"]
