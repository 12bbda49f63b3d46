"""Racing retries over real HTTP: one business key, exactly one `performed`.

A real server (live_server, a thread and a database connection per request);
the racers are threads released together by a barrier, each request bounded by
a timeout.
"""

import threading

import pytest

from conversations import store
from conversations.ledger.models import Action
from tests.api_support import make_key
from tests.test_api_concurrency import TIMEOUT, _post

RACERS = 8
KEY = "refund:T-40219:SU-88421:oak-shelf:11800"


def _race(base, key, paths):
    barrier = threading.Barrier(len(paths))
    results, lock = [], threading.Lock()

    def racer(n):
        barrier.wait(TIMEOUT)
        try:
            status, body = _post(base, key, paths[n], {
                "idempotency_key": KEY, "name": "issue_refund", "arguments": {"amount_cents": 11800},
                "result": {"racer": n}, "status": "performed"})
        except Exception as exc:  # reported below, so no failure can hide
            status, body = None, repr(exc)
        with lock:
            results.append((status, body))

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(len(paths))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    assert not any(t.is_alive() for t in threads), "a racer hung"
    return results


def _check_one_performed(results):
    statuses = sorted(s for s, _ in results)
    assert statuses == [200] * (len(results) - 1) + [201], results
    winner = next(b for s, b in results if s == 201)
    assert winner["status"] == "performed"
    for status, body in results:
        if status == 200:
            assert body["status"] == "already_performed"
            assert body["action"]["id"] == winner["action"]["id"]
            assert body["attempt"]["original_id"] == winner["action"]["id"]
    assert Action.objects.filter(idempotency_key=KEY, status="performed").count() == 1
    assert Action.objects.filter(idempotency_key=KEY, status="already_performed").count() == len(results) - 1


@pytest.mark.slow
def test_two_requests_with_one_key_record_exactly_one_performed(live_server, transactional_db):
    key = make_key(["read", "write"])
    conversation = store.create_conversation(title="refund race")
    path = f"/conversations/{conversation.pk}/actions"
    _check_one_performed(_race(live_server.url, key, [path, path]))


@pytest.mark.slow
def test_racers_in_different_conversations_of_a_namespace_record_exactly_one_performed(live_server, transactional_db):
    # Different conversations lock different rows: only the unique index can decide.
    key = make_key(["read", "write"])
    paths = []
    for n in range(RACERS):
        c = store.create_conversation(title=f"resumed thread {n}")
        paths.append(f"/conversations/{c.pk}/actions")
    _check_one_performed(_race(live_server.url, key, paths))
