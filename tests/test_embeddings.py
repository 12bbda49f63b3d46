"""The embedders (conversations/embeddings): the embedded model offline, an endpoint with
batches, retries and timeouts, and the background job after a change of model."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from django.core.management import call_command

from conversations.embeddings import embedders, worker
from conversations.embeddings.models import EmbeddingModel
from conversations.facts import store as facts_store
from conversations.facts.models import FactVector


def test_the_embedded_model_loads_and_embeds_without_opening_a_socket(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    embedder = embedders.WordLlamaEmbedder()
    found = embedder.embed(["I want my money back", "refund", "nut allergy", "allergic to peanuts"])
    assert found.shape == (4, 256) and found.dtype == np.float32
    assert np.allclose(np.linalg.norm(found, axis=1), 1.0, atol=1e-5)
    assert found[0] @ found[1] > found[0] @ found[2]
    assert found[2] @ found[3] > found[2] @ found[1]


class _Fake(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/embeddings: failures first if asked, then vectors."""

    fail_first = 0
    delay = None
    seen: list = []

    def do_POST(self):  # noqa: N802 — http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, self.headers.get("Authorization"), body))
        if type(self).fail_first > 0:
            type(self).fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        if type(self).delay is not None:
            type(self).delay.wait(5)
        data = [{"index": i, "embedding": [float(len(t)), 1.0, 0.0]} for i, t in enumerate(body["input"])]
        answer = json.dumps({"object": "list", "data": data, "model": body["model"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    _Fake.fail_first, _Fake.delay, _Fake.seen = 0, None, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    if _Fake.delay is not None:
        _Fake.delay.set()
    server.shutdown()
    server.server_close()


def test_the_endpoint_embeds_in_batches_with_its_key(fake_server):
    embedder = embedders.EndpointEmbedder(fake_server, "fake-3", "k-123", batch=2)
    found = embedder.embed(["a", "bb", "ccc"])
    assert found.shape == (3, 3) and np.allclose(np.linalg.norm(found, axis=1), 1.0)
    assert [len(body["input"]) for _, _, body in _Fake.seen] == [2, 1]
    assert {(path, auth, body["model"]) for path, auth, body in _Fake.seen} == {
        ("/v1/embeddings", "Bearer k-123", "fake-3")}


def test_the_endpoint_retries_a_failing_batch(fake_server):
    _Fake.fail_first = 2
    pauses = []
    embedder = embedders.EndpointEmbedder(fake_server, "fake-3", retries=3, backoff=0.5, sleep=pauses.append)
    assert embedder.embed(["x"]).shape == (1, 3)
    assert pauses == [0.5, 1.0] and len(_Fake.seen) == 3


def test_the_endpoint_gives_up_after_its_retries_and_its_timeout(fake_server):
    _Fake.fail_first = 10
    embedder = embedders.EndpointEmbedder(fake_server, "fake-3", retries=1, sleep=lambda s: None)
    with pytest.raises(embedders.EmbeddingFailed, match="503"):
        embedder.embed(["x"])
    _Fake.fail_first, _Fake.delay = 0, threading.Event()
    slow = embedders.EndpointEmbedder(fake_server, "fake-3", retries=0, timeout=0.2)
    with pytest.raises(embedders.EmbeddingFailed):
        slow.embed(["x"])


@pytest.mark.django_db
def test_a_change_of_model_is_detected_and_embedded_again(fake_server, settings):
    fact = facts_store.propose_fact(subject="cust:1", text="Prefers a refund", importance=5, created_by="t")
    worker.run_once()
    wordllama = FactVector.objects.get(fact=fact).model
    assert wordllama.name == embedders.WordLlamaEmbedder.name and wordllama.dimension == 256
    settings.MEMORYUI_EMBEDDINGS_URL, settings.MEMORYUI_EMBEDDINGS_MODEL = fake_server, "fake-3"
    facts = next(row for row in worker.progress() if row["name"] == "facts")
    assert facts["stale"] == 1 and facts["current"] == 0
    call_command("embed")
    again = FactVector.objects.get(fact=fact)
    assert again.model.name == "fake-3" and again.model.dimension == 3 and len(bytes(again.vector)) == 12
    assert next(row for row in worker.progress() if row["name"] == "facts")["percent"] == 100.0
    assert set(EmbeddingModel.objects.values_list("name", flat=True)) >= {"fake-3", wordllama.name}


@pytest.mark.django_db
def test_a_proposal_waits_for_no_embedder_and_wakes_the_background_one(
        fake_server, settings, monkeypatch, django_capture_on_commit_callbacks):
    """A proposal commits without its vector, whatever the endpoint does; its commit wakes
    the background embedder, which gives it the vector, after a failed batch too."""
    settings.MEMORYUI_EMBEDDINGS_URL, settings.MEMORYUI_EMBEDDINGS_RETRIES = fake_server, 0
    _Fake.fail_first = 1
    woken = []
    monkeypatch.setattr(worker._wake, "set", lambda: woken.append(True))
    with django_capture_on_commit_callbacks(execute=True):
        fact = facts_store.propose_fact(subject="cust:1", text="Prefers a refund", importance=5, created_by="t")
        assert not woken  # not before the proposal is committed
    assert woken == [True]
    assert not FactVector.objects.filter(fact=fact).exists()
    with pytest.raises(embedders.EmbeddingFailed):
        worker.run_once()
    assert not FactVector.objects.filter(fact=fact).exists()  # the fact row still waits
    worker.run_once()
    assert FactVector.objects.get(fact=fact).model.dimension == 3  # the endpoint's vector


@pytest.mark.django_db
def test_recall_finds_a_fact_whose_vector_waits_and_stores_nothing():
    """Approved a moment after its proposal, before the background embedder ran, a fact is
    already found by meaning; the recall embeds it for itself and writes no vector."""
    from conversations.facts import recall as facts_recall

    refund = facts_store.propose_fact(subject="cust:1", text="Asked for a refund on order 7", importance=5,
                                      created_by="t")
    other = facts_store.propose_fact(subject="cust:1", text="Lives in Lyon", importance=5, created_by="t")
    for fact in (refund, other):
        facts_store.approve_fact(fact_id=fact.pk, actor="r")
    got = facts_recall.recall(subject="cust:1", query="money back", limit=2, fusion="meaning")
    assert [r.fact.pk for r in got][0] == refund.pk
    assert got[0].parts.cosine is not None and "meaning" in got[0].matched
    assert not FactVector.objects.exists()
    worker.run_once()
    again = facts_recall.recall(subject="cust:1", query="money back", limit=2, fusion="meaning")
    assert again[0].fact.pk == refund.pk and again[0].parts.cosine == pytest.approx(got[0].parts.cosine, abs=1e-5)


@pytest.mark.django_db
def test_a_vector_another_model_made_is_not_compared_with_the_query(fake_server, settings):
    """A stale vector of the same dimension (a former model's) would give a meaningless
    cosine: recall embeds the fact again instead of trusting it."""
    from conversations.facts import recall as facts_recall

    fact = facts_store.propose_fact(subject="cust:1", text="Asked for a refund", importance=5, created_by="t")
    facts_store.approve_fact(fact_id=fact.pk, actor="r")
    fresh = facts_recall.recall(subject="cust:1", query="money back", limit=1, fusion="meaning")[0].parts.cosine
    former = EmbeddingModel.objects.create(name="former-model", dimension=256)
    FactVector.objects.create(fact=fact, model=former, vector=(-np.ones(256, dtype=np.float32) / 16).tobytes())
    again = facts_recall.recall(subject="cust:1", query="money back", limit=1, fusion="meaning")[0].parts.cosine
    assert again == pytest.approx(fresh, abs=1e-5) and fresh > 0.3


@pytest.mark.django_db
def test_the_admin_page_shows_progress_and_only_to_superusers(client):
    """The worker and its counts are every project's: a project's admin does not see them."""
    from tests.api_support import login_as
    from tests.helpers import make_user

    facts_store.propose_fact(subject="cust:1", text="Prefers a refund", importance=5, created_by="t")
    for role in ("reviewer", "admin"):
        login_as(client, role)
        assert client.get("/admin/embeddings/").status_code == 403
        assert client.post("/admin/embeddings/start/").status_code == 403
    root = make_user(None, "root")
    root.is_superuser = True
    root.save()
    client.force_login(root)
    html = client.get("/admin/embeddings/").content.decode()
    assert embedders.WordLlamaEmbedder.name in html and "Facts" in html and "Messages" in html
    assert "Embed now" in html and "embedder-process" not in html


@pytest.mark.django_db
def test_under_gunicorn_the_page_names_the_embedding_process_and_starts_no_thread(client, monkeypatch):
    """memoryui/gunicorn_conf.py runs the loop in a process of its own and says so to the
    workers; the page then offers no button that would load the model into a worker."""
    from tests.helpers import make_user

    monkeypatch.setenv(worker.OWN_PROCESS_ENV, "1")
    started = []
    monkeypatch.setattr(worker, "start", lambda: started.append(True))
    root = make_user(None, "root")
    root.is_superuser = True
    root.save()
    client.force_login(root)
    html = client.get("/admin/embeddings/").content.decode()
    assert 'id="embedder-process"' in html and "Embed now" not in html
    assert client.post("/admin/embeddings/start/").status_code == 302 and not started


def test_the_background_thread_outlives_a_connection_that_fails_to_close(monkeypatch):
    """A dropped database may make closing its connection raise as well; the thread goes
    on embedding rather than ending until the process restarts."""
    class Stop(BaseException):
        pass

    calls = []

    def run_once():
        calls.append(1)
        if len(calls) == 3:
            raise Stop
        raise RuntimeError("the database went away")

    closes = []

    def close_fails():
        # Every other close fails: the one after each batch.
        closes.append(1)
        if len(closes) % 2 == 0:
            raise RuntimeError("the connection is gone")

    ended = []
    monkeypatch.setattr(worker, "run_once", run_once)
    monkeypatch.setattr(worker, "close_old_connections", close_fails)
    monkeypatch.setattr(worker, "IDLE_SECONDS", 0.01)
    monkeypatch.setattr(worker, "_stopping", threading.Event())
    monkeypatch.setattr(threading, "excepthook", lambda args: ended.append(args.exc_type))
    thread = threading.Thread(target=worker._loop)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert len(calls) == 3 and ended == [Stop]
    assert worker.state.last_error == "the database went away"


@pytest.mark.parametrize("text", ["Prefers a refund to store credit", "x", "", "   ", "日本語のテキスト",
                                  "Allergic to peanuts " * 400])
def test_one_text_gets_the_vector_it_gets_in_a_batch(text):
    """Proposals and queries embed one text by a path of their own; its vector must be the
    one the batch path (the background embedder's) gives the same text, or a fact would be
    found by one and not the other."""
    embedder = embedders.WordLlamaEmbedder()
    alone = embedder.embed([text])
    batch = embedder.embed(["something else first", text, "and after"])
    assert alone.shape == (1, 256) and alone.dtype == np.float32
    assert np.allclose(alone[0], batch[1], atol=1e-6)
    norm = float(np.linalg.norm(alone[0]))
    assert norm == pytest.approx(1.0, abs=1e-5) or (norm == 0.0 and not text.strip())


def test_the_background_thread_stops_between_batches_and_starts_again(monkeypatch):
    batches = []

    def run_once():
        batches.append(1)
        return 0

    monkeypatch.setattr(worker, "run_once", run_once)
    monkeypatch.setattr(worker, "close_old_connections", lambda: None)
    assert worker.start() is True
    assert worker.start() is False  # one thread a process
    assert worker.stop(timeout=10) and not worker.state.running
    seen = len(batches)
    assert seen >= 1
    assert worker.start() is True and worker.stop(timeout=10)
    assert len(batches) > seen


def test_a_batch_of_long_texts_is_embedded_in_bounded_pieces_in_its_own_order(monkeypatch):
    """The model pads a batch to its longest text: 256 tool outputs of 8,000 characters once
    cost the server's worker half a gigabyte. Each call to the model now stays within
    BATCH_CHARS, and every text still gets its own vector, in the order given."""
    embedder = embedders.WordLlamaEmbedder()
    model = embedder.model()
    real, calls = model.embed, []

    def spy(texts, **kwargs):
        calls.append((len(texts), max(len(t) for t in texts)))
        return real(texts, **kwargs)

    monkeypatch.setattr(model, "embed", spy)
    words = "refund order parcel invoice delivery courier allergy".split()
    texts = [" ".join(words[(i + j) % len(words)] for j in range(1 + (i * 37) % 1200)) for i in range(256)]
    texts[3], texts[200] = "x" * 20000, ""
    got = embedder.embed(texts)
    assert got.shape == (256, embedders.WordLlamaEmbedder.DIMENSION) and len(calls) > 1
    assert all(count * max(longest, 1) <= embedders.BATCH_CHARS or count == 1 for count, longest in calls)
    assert sum(count for count, _ in calls) == 256
    for i in (0, 3, 17, 200, 255):
        assert np.allclose(got[i], embedder.embed([texts[i]])[0], atol=1e-5)
