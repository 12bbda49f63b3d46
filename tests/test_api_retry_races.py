"""Races over real HTTP (pytest-django's live_server, a thread and a connection per
request): one key sent by many clients at once has one effect; concurrent
create-or-gets of one external id find one conversation; batches stay contiguous
among single appends. Loopback only, each request bounded by a timeout.
"""

import http.client
import json
import threading
from urllib.parse import urlsplit

from conversations import store
from conversations.models import Conversation, IdempotencyKey, Message
from tests.api_support import make_key

THREADS = 8
TIMEOUT = 60


def _post(base, key, path, body, headers=None):
    url = urlsplit(base)
    assert url.hostname in ("localhost", "127.0.0.1")  # loopback only
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=TIMEOUT)
    try:
        conn.request("POST", "/api/v1" + path, body=json.dumps(body),
                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                              **(headers or {})})
        response = conn.getresponse()
        return response.status, response.getheader("Idempotent-Replayed"), json.loads(response.read() or b"null")
    finally:
        conn.close()


def _all_at_once(target, count=THREADS):
    """Run target(i) in `count` threads released together; returns their results in order."""
    results = [None] * count
    start = threading.Barrier(count)

    def run(i):
        start.wait(TIMEOUT)
        try:
            results[i] = target(i)
        except Exception as exc:  # reported by the caller's asserts
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    return results


def test_one_key_sent_by_many_clients_at_once_appends_once(live_server, transactional_db):
    key = make_key(["read", "write"])
    conversation = store.create_conversation(title="race")
    path = f"/conversations/{conversation.pk}/messages"
    body = {"kind": "did", "text": "refund sent"}

    results = _all_at_once(lambda i: _post(live_server.url, key, path, body, {"Idempotency-Key": "step-42"}))

    assert all(r[0] == 201 for r in results), results
    assert {r[2]["position"] for r in results} == {0}
    assert [r[1] for r in results].count(None) == 1  # one ran, the others were replays
    assert Message.objects.of(conversation.pk).count() == 1
    assert IdempotencyKey.objects.count() == 1


def test_one_key_racing_a_batch_and_a_create_has_one_effect_each(live_server, transactional_db):
    key = make_key(["read", "write"])
    conversation = store.create_conversation(title="race")
    batch = {"messages": [{"kind": "did", "text": f"part {i}"} for i in range(5)]}

    batches = _all_at_once(lambda i: _post(live_server.url, key, f"/conversations/{conversation.pk}/messages/batch",
                                           batch, {"Idempotency-Key": "batch-1"}))
    creates = _all_at_once(lambda i: _post(live_server.url, key, "/conversations", {"title": "once"},
                                           {"Idempotency-Key": "create-1"}))

    assert {(r[0], json.dumps(r[2])) for r in batches} == {
        (201, json.dumps({"first_position": 0, "last_position": 4, "count": 5}))}
    assert Message.objects.of(conversation.pk).count() == 5
    assert {r[0] for r in creates} == {201}
    assert len({r[2]["id"] for r in creates}) == 1
    assert Conversation.objects.filter(title="once").count() == 1


def test_racing_create_or_gets_of_one_external_id_find_one_conversation(live_server, transactional_db):
    key = make_key(["read", "write"])
    body = {"namespace": "claude-agent", "external_id": "session-1", "title": "first"}

    results = _all_at_once(lambda i: _post(live_server.url, key, "/conversations", body))

    assert sorted(r[0] for r in results) == [200] * (THREADS - 1) + [201], results
    assert len({r[2]["id"] for r in results}) == 1
    assert Conversation.objects.filter(external_id="session-1").count() == 1


def test_batches_stay_contiguous_among_single_appends(live_server, transactional_db):
    key = make_key(["read", "write"])
    conversation = store.create_conversation(title="busy")
    path = f"/conversations/{conversation.pk}"

    def agent(i):
        out = []
        for step in range(4):
            if i % 2:
                out.append(_post(live_server.url, key, path + "/messages/batch", {"messages": [
                    {"kind": "did", "text": f"agent {i} step {step} part {p}"} for p in range(3)]}))
            else:
                out.append(_post(live_server.url, key, path + "/messages",
                                 {"kind": "did", "text": f"agent {i} step {step}"}))
        return out

    results = [r for rs in _all_at_once(agent) for r in rs]
    assert all(r[0] == 201 for r in results), results
    rows = list(Message.objects.of(conversation.pk).order_by("position").values_list("position", "content"))
    assert [p for p, _ in rows] == list(range(len(rows))) == list(range(THREADS // 2 * 4 * 4))
    texts = [json.loads(c)["text"] for _, c in rows]
    for r in results:
        if "first_position" in r[2]:
            first = r[2]["first_position"]
            parts = texts[first:first + 3]
            prefix = parts[0].rsplit(" part ", 1)[0]
            assert parts == [f"{prefix} part {p}" for p in range(3)]
