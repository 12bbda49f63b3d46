"""Concurrent agents over real HTTP: positions stay 0..n-1, no gap, no duplicate.

A real server (pytest-django's live_server, one thread per request, each with its
own database connection) on the loopback address; the clients are plain threads
with http.client, each request bounded by a timeout and each loop by a count.
"""

import http.client
import json
import threading
from urllib.parse import urlsplit

from conversations import store
from conversations.models import Message
from tests.api_support import make_key

THREADS = 8
APPENDS_EACH = 12
TIMEOUT = 60


def _post(base, key, path, body):
    url = urlsplit(base)
    assert url.hostname in ("localhost", "127.0.0.1")  # loopback only
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT)
    try:
        conn.request("POST", "/api/v1" + path, body=json.dumps(body),
                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def _run_threads(target, count):
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * APPENDS_EACH)
    assert not any(t.is_alive() for t in threads), "a client thread hung"


def test_eight_agents_appending_at_once_get_every_position_once(live_server, transactional_db):
    key = make_key(["read", "write"])
    conversation = store.create_conversation(title="busy")
    path = f"/conversations/{conversation.pk}/messages"
    results, lock = [], threading.Lock()

    def agent(n):
        for i in range(APPENDS_EACH):
            try:
                status, body = _post(live_server.url, key, path, {"kind": "did", "text": f"agent {n} step {i}"})
            except Exception as exc:  # reported below, so no failure can hide
                status, body = None, repr(exc)
            with lock:
                results.append((n, i, status, body))

    _run_threads(agent, THREADS)

    total = THREADS * APPENDS_EACH
    failures = [r for r in results if r[2] != 201]
    assert not failures, failures[:5]
    positions = sorted(r[3]["position"] for r in results)
    assert positions == list(range(total))
    rows = list(Message.objects.filter(conversation=conversation).order_by("position")
                .values_list("position", "content"))
    assert [p for p, _ in rows] == list(range(total))
    # Each agent's own steps landed in the order it sent them.
    by_position = {r[3]["position"]: (r[0], r[1]) for r in results}
    for n in range(THREADS):
        mine = [by_position[p][1] for p in range(total) if by_position[p][0] == n]
        assert mine == list(range(APPENDS_EACH))
    for position, content in rows:
        agent_n, step = by_position[position]
        assert json.loads(content)["text"] == f"agent {agent_n} step {step}"
    conversation.refresh_from_db()
    assert conversation.next_position == total


def test_with_expected_position_exactly_one_of_the_racers_wins(live_server, transactional_db):
    key = make_key(["read", "write"])
    conversation = store.create_conversation(title="race")
    store.append_message(conversation_id=conversation.pk, message={"kind": "note", "text": "start"})
    path = f"/conversations/{conversation.pk}/messages?expected_position=1"
    statuses, lock = [], threading.Lock()

    def racer(n):
        status, body = _post(live_server.url, key, path, {"kind": "said", "text": f"racer {n}"})
        with lock:
            statuses.append((status, body))

    _run_threads(racer, THREADS)
    codes = sorted(s for s, _ in statuses)
    assert codes == [201] + [409] * (THREADS - 1), statuses
    assert all(b["error"]["code"] == "position_conflict" for s, b in statuses if s == 409)
    assert Message.objects.filter(conversation=conversation).count() == 2
