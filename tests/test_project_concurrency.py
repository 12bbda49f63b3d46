"""Two projects' agents at once, through gunicorn (several worker processes): the same external
id and the same Idempotency-Key, sent by both at the same moment, are two projects' own writes.
Each project gets its own conversation, nothing answers 5xx, nothing crosses, and every write
acknowledged is stored where it was acknowledged."""

import contextlib
import http.client
import json
import threading

import pytest
from django.conf import settings

from conversations import api_keys
from conversations.models import Conversation, Message
from conversations.project_store import create_project
from tests.server_support import gunicorn, nothing_failed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CLIENTS = 4  # per project
APPENDS = 6
SESSION = {"namespace": "support-bot", "external_id": "session-7f3a9c", "title": "Refund for order 7"}


@pytest.fixture(scope="module")
def _gunicorn(django_db_setup, tmp_path_factory):
    folder = tmp_path_factory.mktemp("projects-at-once")
    with gunicorn(folder / "gunicorn.log", workers=3, threads=4, MEMORYUI_DATA_DIR=str(folder / "data"),
                  SECRET_KEY=settings.SECRET_KEY) as server:
        yield server


@pytest.fixture
def port(_gunicorn):
    with nothing_failed_in(_gunicorn):
        yield _gunicorn.port


def call(conn, method, path, body, *, key, idempotency_key):
    """(status, replayed, parsed body); a write that says to come back (409 in progress, 503
    busy, with Retry-After) is sent again, as a client does."""
    while True:
        conn.request(method, f"/api/v1{path}", body=json.dumps(body),
                     headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}",
                              "Idempotency-Key": idempotency_key})
        response = conn.getresponse()
        payload = json.loads(response.read() or b"{}")
        if response.status in (409, 503) and response.getheader("Retry-After"):
            continue
        return response.status, response.getheader("Idempotent-Replayed") == "true", payload


def test_two_projects_writing_the_same_external_id_and_keys_at_once_each_get_their_own(port):
    projects = {slug: create_project(slug=slug) for slug in ("alpha", "beta")}
    keys = {slug: api_keys.create_api_key(name=f"{slug}-agent", scopes=["read", "write"], project=project)[1]
            for slug, project in projects.items()}
    start = threading.Barrier(CLIENTS * len(projects))
    answers, lock = [], threading.Lock()

    def agent(slug: str, i: int):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        mine = []
        try:
            start.wait(60)
            # Every agent of both projects: the same session id, the same Idempotency-Key.
            status, _, made = call(conn, "POST", "/conversations", SESSION, key=keys[slug],
                                   idempotency_key="create-session-7f3a9c")
            mine.append((slug, "create", status, made.get("id"), None))
            for j in range(APPENDS):
                text = f"{slug} agent {i} step {j}"
                status, replayed, body = call(conn, "POST", f"/conversations/{made.get('id')}/messages",
                                              {"kind": "user", "content": text}, key=keys[slug],
                                              idempotency_key=f"step-{i}-{j}")
                mine.append((slug, text, status, made.get("id"), body.get("position")))
        finally:
            conn.close()
            with lock:
                answers.extend(mine)

    threads = [threading.Thread(target=agent, args=(slug, i)) for slug in projects for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "an agent hung"
    assert len(answers) == len(threads) * (1 + APPENDS)
    assert [a for a in answers if a[2] not in (200, 201)] == []

    made = {slug: {a[3] for a in answers if a[0] == slug and a[1] == "create"} for slug in projects}
    assert all(len(ids) == 1 for ids in made.values()), made  # one conversation per project
    assert made["alpha"] != made["beta"]
    for slug, project in projects.items():
        [cid] = made[slug]
        conversation = Conversation.everywhere.get(pk=cid)
        assert conversation.project_id == project.pk and conversation.external_id == SESSION["external_id"]
        stored = list(Message.objects.filter(conversation_id=cid).order_by("position").values_list("position",
                                                                                                   "content"))
        assert [p for p, _ in stored] == list(range(len(stored)))
        acked = {(position, text) for s, text, status, _, position in answers if s == slug and text != "create"}
        assert {(p, json.loads(content)["content"]) for p, content in stored} == acked  # none lost, none crossed
        assert len(stored) == CLIENTS * APPENDS
    assert Conversation.everywhere.filter(external_id=SESSION["external_id"]).count() == 2


def test_the_same_key_racing_in_two_projects_replays_within_each_never_across(port):
    """Every agent of a project sends the very same keyed write at once: each project's answers
    are one write (the first, then replays of it), and the two projects' are two."""
    projects = {slug: create_project(slug=slug) for slug in ("alpha", "beta")}
    keys = {slug: api_keys.create_api_key(name=f"{slug}-agent", scopes=["read", "write"], project=project)[1]
            for slug, project in projects.items()}
    start = threading.Barrier(CLIENTS * len(projects))
    answers, lock = [], threading.Lock()

    def agent(slug: str):
        with contextlib.closing(http.client.HTTPConnection("127.0.0.1", port, timeout=120)) as conn:
            start.wait(60)
            answer = call(conn, "POST", "/conversations", {"title": "one per project", "subject": "customer:42"},
                          key=keys[slug], idempotency_key="create-once")
        with lock:
            answers.append((slug, *answer))

    threads = [threading.Thread(target=agent, args=(slug,)) for slug in projects for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(answers) == len(threads) and {a[1] for a in answers} == {201}
    for slug, project in projects.items():
        ids = {a[3]["id"] for a in answers if a[0] == slug}
        assert len(ids) == 1
        assert sum(not a[2] for a in answers if a[0] == slug) == 1  # one first answer, the rest replays
        assert Conversation.everywhere.get(pk=ids.pop()).project_id == project.pk
    assert Conversation.everywhere.filter(title="one per project").count() == 2
