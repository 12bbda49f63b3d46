"""Two app servers over one database, as two machines behind a load balancer would be.

Two gunicorn instances on different ports share one DATABASE_URL (and one SECRET_KEY,
as a deployment shares it); every client sends its requests round-robin across
them. What one server knows only in its own memory would show here: every rule
an agent or a person depends on must hold across both, because each one is kept
by the database (docs/SCALING.md).
"""

import contextlib
import http.client
import json
import threading
import uuid
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.db import transaction

from conversations import store
from conversations.models import Conversation, Message
from conversations.retention.models import MaintenanceLease
from tests.api_support import make_key
from tests.helpers import wait_until
from tests.retention_support import conversation, make_user
from tests.server_support import gunicorn, nothing_failed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CLIENTS = 6
APPENDS = 16
LOGIN_LIMIT = 4


@pytest.fixture(scope="module")
def _gunicorns(django_db_setup, tmp_path_factory):
    """Two gunicorn instances over the test database (two workers each), for the module."""
    folder = tmp_path_factory.mktemp("two-servers")
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(gunicorn(
            folder / f"gunicorn-{name}.log", workers=2, threads=4,
            MEMORYUI_DATA_DIR=str(folder / f"data-{name}"), SECRET_KEY=settings.SECRET_KEY,
            MEMORYUI_LOGIN_FAILURES_PER_USER=str(LOGIN_LIMIT), MEMORYUI_LOGIN_FAILURES_PER_IP="1000"))
            for name in ("a", "b")]


@pytest.fixture
def servers(_gunicorns):
    """Their ports; what either logs during the test must hold no traceback and no dead worker."""
    with nothing_failed_in(*_gunicorns):
        yield [server.port for server in _gunicorns]


def call(port, method, path, body=None, *, key=None, headers=None, conn=None):
    """(status, headers, parsed body) of one API request; `conn` is kept alive when given."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    sent = {"Content-Type": "application/json", **(headers or {})}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    conn.request(method, f"/api/v1{path}", body=json.dumps(body) if body is not None else None, headers=sent)
    response = conn.getresponse()
    payload = response.read()
    if own:
        conn.close()
    return response.status, dict(response.getheaders()), json.loads(payload or b"{}")


def test_appends_round_robin_across_two_servers_are_gapless_and_none_is_lost_or_doubled(servers):
    key = make_key(["read", "write"])
    cids = [str(store.create_conversation(title=f"shared {n}").pk) for n in range(3)]
    answers, lock = [], threading.Lock()
    start = threading.Barrier(CLIENTS)

    def client(i):
        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120) for port in servers]
        mine = []
        start.wait(60)
        try:
            for j in range(APPENDS):
                # Every request to the other server than the last one, and the clients all over the same
                # three conversations.
                server, cid = (i + j) % 2, cids[(i + j) % 3]
                text = f"client {i} message {j}"
                status, _, body = call(servers[server], "POST", f"/conversations/{cid}/messages",
                                       {"kind": "user", "content": text}, key=key, conn=conns[server],
                                       headers={"Idempotency-Key": uuid.uuid4().hex})
                mine.append((status, cid, text, body.get("position")))
        finally:
            for c in conns:
                c.close()
            with lock:
                answers.extend(mine)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a client hung"
    assert len(answers) == CLIENTS * APPENDS
    assert [a for a in answers if a[0] != 201] == []
    for cid in cids:
        stored = list(Message.objects.filter(conversation_id=cid).order_by("position")
                      .values_list("position", "content"))
        acked = {(position, text) for _, c, text, position in answers if c == cid}
        assert [p for p, _ in stored] == list(range(len(stored)))  # gapless, each position once
        assert {(p, json.loads(content)["content"]) for p, content in stored} == acked  # none lost, none extra
        assert len(acked) == len({text for _, text in acked})


def test_a_retry_sent_to_the_other_server_replays_the_first_answer(servers):
    key = make_key(["read", "write"])
    cid = str(store.create_conversation(title="retry").pk)
    message, idem = {"kind": "user", "content": "sent once, retried elsewhere"}, {"Idempotency-Key": "retry-1"}
    first = call(servers[0], "POST", f"/conversations/{cid}/messages", message, key=key, headers=idem)
    again = call(servers[1], "POST", f"/conversations/{cid}/messages", message, key=key, headers=idem)
    assert first[0] == 201 and "Idempotent-Replayed" not in first[1]
    assert again[0] == 201 and again[1].get("Idempotent-Replayed") == "true"
    assert again[2] == first[2]
    assert Message.objects.filter(conversation_id=cid).count() == 1
    # The same key with another body is refused on the other server too: the key is the database's.
    other = call(servers[1], "POST", f"/conversations/{cid}/messages", {"kind": "user", "content": "else"},
                 key=key, headers=idem)
    assert other[0] == 422 and other[2]["error"]["code"] == "idempotency_key_reused"


# Holding the prune half-way needs a row lock; SQLite's one write lock would hold both runs.
@pytest.mark.postgresql_only
def test_a_prune_on_one_server_and_a_deletion_request_on_the_other_never_both_run(servers):
    key = make_key(["admin"])
    old = conversation(title="old", messages=2, age_days=400)
    kept = conversation(title="asked to be deleted", messages=2)
    pruned = {}

    def prune():
        pruned["answer"] = call(servers[0], "POST", "/prune", {"older_than_days": 90}, key=key)

    with transaction.atomic():
        # The prune takes the maintenance lease, then waits here to mark the old conversation.
        Conversation.objects.select_for_update().get(pk=old.pk)
        runner = threading.Thread(target=prune)
        runner.start()
        wait_until(lambda: MaintenanceLease.objects.filter(kind="prune").exists(), timeout=60,
                   message="the prune never took the maintenance lease")
        refused = call(servers[1], "POST", "/deletion-requests", {"conversation_ids": [str(kept.pk)]}, key=key)
    runner.join(120)
    assert not runner.is_alive(), "the prune never finished"
    assert refused[0] == 409 and refused[2]["error"]["code"] == "maintenance_running", refused
    assert pruned["answer"][0] == 200 and pruned["answer"][2]["conversations"] == 1, pruned
    assert not Conversation.objects.filter(pk=old.pk).exists()
    assert Message.objects.filter(conversation_id=kept.pk).count() == 2  # the refused request deleted nothing
    # Once the prune is over, the deletion request runs (on either server).
    done = call(servers[1], "POST", "/deletion-requests", {"conversation_ids": [str(kept.pk)]}, key=key)
    assert done[0] == 201, done
    assert not Conversation.objects.filter(pk=kept.pk).exists()


def _login_form(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/login/")
    response = conn.getresponse()
    page = response.read().decode()
    conn.close()
    cookie = response.getheader("Set-Cookie").split("csrftoken=", 1)[1].split(";", 1)[0]
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    return cookie, token


def test_login_failures_count_across_both_servers(servers):
    make_user("ann", "auditor")
    cookie, token = _login_form(servers[0])

    def attempt(port, n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/login/", body=urlencode({"username": "ann", "password": f"wrong-{n}",
                                                          "csrfmiddlewaretoken": token}),
                     headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={cookie}"})
        response = conn.getresponse()
        text = response.read().decode()
        conn.close()
        return response.status, "Too many failed logins" in text

    # Alternating servers: neither alone saw the limit, and both pause the account once it is reached.
    answers = [attempt(servers[n % 2], n) for n in range(LOGIN_LIMIT + 2)]
    assert answers == [(200, False)] * LOGIN_LIMIT + [(429, True)] * 2
