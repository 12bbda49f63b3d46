"""/metrics: off (404) without MEMORYUI_METRICS_TOKEN, 401 without the token, and under
gunicorn the workers' counts add up; nothing a client sent (a subject, a message's text,
an API key, an idempotency key) is ever in a scrape; what counts a project's data says
which project."""

import http.client
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from prometheus_client.mmap_dict import MmapedDict

from conversations import api_keys, projects, store
from conversations.project_store import create_project
from tests.api_support import Api
from tests.server_support import free_port, start_gunicorn

TOKEN = "scrape-token-for-tests"
MARK_SUBJECT = "customer:metrics-marker-subject@example.com"
MARK_TEXT = "metrics-marker-text-7731"
MARK_IDEMPOTENCY = "metrics-marker-idem-5512"
MARK_EXTERNAL = "metrics-marker-external-9930"


@pytest.mark.django_db
def test_it_is_off_without_a_token(client, settings):
    settings.MEMORYUI_METRICS_TOKEN = ""
    response = client.get("/metrics", headers={"Authorization": "Bearer anything"})
    assert response.status_code == 404
    assert "no-store" in response["Cache-Control"]


@pytest.mark.django_db
def test_it_refuses_a_scrape_without_the_token(client, settings):
    settings.MEMORYUI_METRICS_TOKEN = TOKEN
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": TOKEN}).status_code == 401
    ok = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain")
    assert b"memoryui_database_bytes" in ok.content


def request(port, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response, data


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape: (name, labels) → value."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)", line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(found, name, **labels) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in found.items() if n == name and want <= set(ls))


def workers_that_counted(folder: Path, route: str) -> set[str]:
    """The worker pids whose own files hold requests to `route` (each worker writes its own)."""
    pids = set()
    for path in folder.glob("counter_*.db"):
        for key, count, *_ in MmapedDict.read_all_values_from_file(str(path)):
            name, _, labels, _ = json.loads(key)
            if name == "memoryui_http_requests" and labels.get("route") == route and count > 0:
                pids.add(path.stem.split("_")[1])
    return pids


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_workers_add_up_and_no_label_holds_what_a_client_sent(tmp_path):
    _, key = api_keys.create_api_key(name="metrics-agent", scopes=["read", "write"])
    c = store.create_conversation(title="metrics", subject=MARK_SUBJECT)
    port = free_port()
    proc = start_gunicorn(port, tmp_path / "gunicorn.log", workers=2, threads=2, MEMORYUI_METRICS_TOKEN=TOKEN,
                          MEMORYUI_DATA_DIR=str(tmp_path))
    try:
        auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        path = f"/api/v1/conversations/{c.pk}/messages"
        sent, lock = {"appends": 0, "batches": 0}, threading.Lock()

        def agent(n):
            for i in range(6):
                r, _ = request(port, "POST", path, {"kind": "user", "content": f"{MARK_TEXT} {n}.{i}"}, auth)
                assert r.status == 201
                with lock:
                    sent["appends"] += 1

        # Until both workers have answered appends: they add up only if both counted some.
        folder = tmp_path / "prometheus" / str(proc.pid)
        deadline = time.monotonic() + 60
        while len(workers_that_counted(folder, "api/v1/conversations/<conversation_id>/messages")) < 2:
            assert time.monotonic() < deadline, "one worker answered every request"
            threads = [threading.Thread(target=agent, args=(n,)) for n in range(6)]
            [t.start() for t in threads]
            [t.join() for t in threads]

        batch = [{"kind": "user", "content": f"{MARK_TEXT} batch {i}"} for i in range(5)]
        r, _ = request(port, "POST", path + "/batch", {"messages": batch}, auth)
        assert r.status == 201
        keyed = {**auth, "Idempotency-Key": MARK_IDEMPOTENCY}
        first, _ = request(port, "POST", path, {"kind": "user", "content": MARK_TEXT}, keyed)
        again, _ = request(port, "POST", path, {"kind": "user", "content": MARK_TEXT}, keyed)
        assert first.status == 201 and again.status == 201 and again.getheader("Idempotent-Replayed") == "true"
        request(port, "GET", f"/api/v1/conversations?subject={MARK_SUBJECT}&q={MARK_TEXT}", headers=auth)
        request(port, "POST", "/api/v1/conversations", {"title": MARK_TEXT, "subject": MARK_SUBJECT,
                                                       "external_id": MARK_EXTERNAL}, auth)

        r, body = request(port, "GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status == 200
        text = body.decode()
        found = samples(text)
        route = "api/v1/conversations/<conversation_id>/messages"
        # Every single append this test sent, whichever worker answered it, plus the keyed one.
        assert value(found, "memoryui_http_requests_total", route=route, method="POST", status="201") \
            == sent["appends"] + 2
        assert value(found, "memoryui_http_request_duration_seconds_count", route=route, method="POST") \
            == sent["appends"] + 2
        assert value(found, "memoryui_appended_messages_total") == sent["appends"] + 5 + 1
        assert value(found, "memoryui_append_batch_size_count") == sent["appends"] + 1 + 1
        assert value(found, "memoryui_append_batch_size_bucket", le="5.0") == sent["appends"] + 1 + 1
        assert value(found, "memoryui_idempotent_replays_total") == 1
        assert value(found, "memoryui_database_bytes") > 0

        for secret in (MARK_SUBJECT, "metrics-marker-subject", MARK_TEXT, MARK_IDEMPOTENCY, MARK_EXTERNAL, key,
                       key[:12], str(c.pk), c.pk.hex):
            assert secret not in text, f"{secret!r} is in a scrape"
        routes = {dict(ls).get("route") for (n, ls) in found if n == "memoryui_http_requests_total"}
        assert routes <= {route, route + "/batch", "api/v1/conversations", "login/", "metrics", "unmatched"}, routes
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert not (tmp_path / "prometheus" / str(proc.pid)).exists(), "the server's metrics folder outlived it"


@pytest.mark.django_db
def test_what_counts_a_projects_data_carries_the_project(client, settings):
    """Appends, conversations, facts, imports, replays, prunes and receipts, by project; the
    operator's work for every project as `*`."""
    settings.MEMORYUI_METRICS_TOKEN = TOKEN
    scrape_headers = {"Authorization": f"Bearer {TOKEN}"}
    before = samples(client.get("/metrics", headers=scrape_headers).content.decode())
    alpha, beta = create_project(slug="metrics-alpha"), create_project(slug="metrics-beta")
    for project, appends in ((alpha, 3), (beta, 1)):
        _, secret = api_keys.create_api_key(name=f"m-{project.slug}", project=project,
                                            scopes=["read", "write", "admin", "facts:write"])
        api = Api(client, secret)
        made = api.post("/conversations", {"title": MARK_TEXT, "subject": MARK_SUBJECT}).json()
        for i in range(appends):
            keyed = {"Idempotency-Key": f"{MARK_IDEMPOTENCY}-{i}"}
            body = {"kind": "user", "content": f"{MARK_TEXT} {i}"}
            assert api.post(f"/conversations/{made['id']}/messages", body, headers=keyed).status_code == 201
        assert api.post(f"/conversations/{made['id']}/messages", body, headers=keyed)["Idempotent-Replayed"] == "true"
        assert api.post("/facts", {"subject": MARK_SUBJECT, "text": MARK_TEXT, "importance": 1}).status_code == 201
        journal = json.dumps({"kind": "note", "text": f"imported into {project.slug}"}) + "\n"
        assert api.post("/imports", {"format": "journal", "content": journal}).status_code in (200, 201)
        assert api.post("/prune", {}).status_code == 200
    # An operator's process appends where every project is seen: the conversation's project counts it.
    with projects.scoped(projects.one(beta.pk)):
        theirs = store.create_conversation(title="by the operator")
    store.append_message(conversation_id=theirs.pk, message={"kind": "note", "text": "operator"})
    _, secret = api_keys.create_api_key(name="m-ops", scopes=["admin"], all_projects=True)
    erased = Api(client, secret).post("/deletion-requests", {"subject": MARK_SUBJECT, "all_projects": True})
    assert erased.status_code == 201

    text = client.get("/metrics", headers=scrape_headers).content.decode()
    after = samples(text)

    def grew(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    for slug, appends, made in (("metrics-alpha", 3, 2), ("metrics-beta", 1 + 1, 3)):
        assert grew("memoryui_appended_messages_total", project=slug) == appends
        assert grew("memoryui_conversations_created_total", project=slug) == made
        assert grew("memoryui_facts_written_total", project=slug, status="proposed") == 1
        assert grew("memoryui_idempotent_replays_total", project=slug) == 1
        assert grew("memoryui_imports_total", project=slug, format="journal") == 1
        assert grew("memoryui_maintenance_runs_total", project=slug, kind="prune", outcome="finished") == 1
    assert grew("memoryui_maintenance_runs_total", project="*", kind="deletion", outcome="finished") == 1
    assert grew("memoryui_erasure_verifications_total", project="*") == 1
    for secret_text in (MARK_SUBJECT, MARK_TEXT, MARK_IDEMPOTENCY):
        assert secret_text not in text
