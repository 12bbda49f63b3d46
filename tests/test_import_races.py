"""Twenty identical imports at once, through gunicorn's worker processes.

The way it broke: on PostgreSQL, 7-13 of 20 concurrent `POST /api/v1/imports` of one
file answered 500 (IntegrityError on the primary key, or on (namespace,
external_id)), with and without one Idempotency-Key. Every door must answer each of
them 200/201, the first answer replayed, or 409 with Retry-After (the same request
then succeeds), and the data must be there exactly once. Threads inside one process
cannot show this: the server here is several gunicorn workers, each with its own
connection, and the requests leave all at once from a barrier.
"""

import http.client
import json
import re
import secrets
import threading
from collections import Counter

import pytest
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore

from conversations.imports.models import ImportSource, ImportStage, SourceEntry
from conversations.models import Conversation, IdempotencyKey, Message
from tests.api_support import make_key
from tests.retention_support import make_user
from tests.server_support import gunicorn, nothing_failed_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RACERS = 20
TURNS = 40
SESSION = "5a1e0c2d-7b3f-4e9a-8c6d-2f1b0a9e8d7c"


@pytest.fixture(scope="module")
def _gunicorn(django_db_setup, tmp_path_factory):
    """gunicorn over the test database, one for the module: four worker processes, four threads each."""
    folder = tmp_path_factory.mktemp("races")
    # Its own data folder (uploads), and this process's secret key, which the admin's session cookie needs.
    with gunicorn(folder / "gunicorn.log", workers=4, threads=4,
                  MEMORYUI_DATA_DIR=str(folder / "data"), SECRET_KEY=settings.SECRET_KEY) as server:
        yield server


@pytest.fixture
def server(_gunicorn):
    with nothing_failed_in(_gunicorn):
        yield _gunicorn.port


def session_lines(session=SESSION, turns=TURNS) -> list[dict]:
    lines, parent = [], None
    for n in range(turns):
        for kind, message in (("user", {"role": "user", "content": f"question {n} about the refund"}),
                              ("assistant", {"id": f"m{n}", "role": "assistant",
                                             "content": [{"type": "text", "text": f"answer {n}"}]})):
            uid = f"{session[:8]}-{len(lines):05d}"
            lines.append({"parentUuid": parent, "isSidechain": False, "sessionId": session, "type": kind,
                          "uuid": uid, "timestamp": f"2025-11-02T10:{n // 60:02d}:{n % 60:02d}.000Z",
                          "message": message})
            parent = uid
    return lines


def race(send) -> list[tuple[int, dict, dict]]:
    """RACERS calls of send() released together; (status, headers, body) of each."""
    barrier, out, lock = threading.Barrier(RACERS), [], threading.Lock()

    def one():
        barrier.wait(timeout=60)
        try:
            answer = send()
        except Exception as exc:  # reported below, so none can hide
            answer = (None, {}, repr(exc))
        with lock:
            out.append(answer)

    threads = [threading.Thread(target=one) for _ in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not any(t.is_alive() for t in threads), "a racer hung"
    return out


def call(port, method, path, *, body: bytes, headers: dict) -> tuple[int, dict, object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        kept = {k.lower(): v for k, v in response.getheaders()}
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = data.decode("utf-8", "replace")
        return response.status, kept, parsed
    finally:
        conn.close()


def api(port, key, body: dict, idempotency_key: str | None = None):
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    return call(port, "POST", "/api/v1/imports", body=json.dumps(body).encode(), headers=headers)


def outcome(status, headers, body) -> str:
    """What kind of answer this is: only the allowed ones have names without 'BAD'."""
    if status in (200, 201):
        if headers.get("idempotent-replayed") == "true":
            return "replayed"
        return "created" if status == 201 else "unchanged-or-appended"
    if status == 409 and isinstance(body, dict) and headers.get("retry-after", "").isdigit():
        return f"409 {body['error']['code']}"
    return f"BAD {status} {str(body)[:300]}"


def assert_only_allowed(answers) -> Counter:
    counts = Counter(outcome(*a) for a in answers)
    print(dict(counts))
    assert not [k for k in counts if k.startswith("BAD")], counts
    return counts


def assert_imported_once(namespace, external_id, lines):
    conversation = Conversation.objects.get(namespace=namespace, external_id=external_id)
    assert not conversation.deleting and not conversation.staged
    assert Conversation.objects.count() == Conversation.objects.live().count() and ImportStage.objects.count() == 0
    source = ImportSource.objects.get(namespace=namespace, source_key=external_id)
    seqs = list(SourceEntry.objects.filter(source_id=source.pk).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(len(lines)))
    positions = list(Message.objects.filter(conversation=conversation).order_by("position")
                     .values_list("position", flat=True))
    assert positions == list(range(len(lines))) and conversation.next_position == len(lines)
    return conversation


@pytest.mark.parametrize("keyed", [False, True], ids=["without-key", "one-key"])
def test_twenty_identical_file_imports_at_once_import_it_once(server, keyed):
    key = make_key(["read", "write"])
    lines = session_lines()
    body = {"content": "\n".join(json.dumps(line) for line in lines) + "\n", "namespace": "races"}
    answers = race(lambda: api(server, key, body, "import-the-file-once" if keyed else None))
    counts = assert_only_allowed(answers)
    assert counts["created"] == 1
    assert_imported_once("races", SESSION, lines)
    if keyed:  # every other answer is the first one again, or "come back later"
        assert set(counts) <= {"created", "replayed", "409 idempotency_key_in_progress"}
        assert IdempotencyKey.objects.filter(key="import-the-file-once", status=201).count() == 1
    # The same request sent again now succeeds, and changes nothing.
    status, headers, again = api(server, key, body, "import-the-file-once" if keyed else None)
    assert status in (200, 201) and (keyed or again["unchanged"])
    assert_imported_once("races", SESSION, lines)


@pytest.mark.parametrize("keyed", [False, True], ids=["without-key", "one-key"])
def test_twenty_identical_first_batches_of_a_session_store_it_once(server, keyed):
    key = make_key(["read", "write"])
    lines = session_lines(session="0b9c8d7e-6f5a-4b3c-9d2e-1f0a9b8c7d6e")
    body = {"entries": lines, "namespace": "races", "external_id": lines[0]["sessionId"]}
    answers = race(lambda: api(server, key, body, "the-first-batch" if keyed else None))
    counts = assert_only_allowed(answers)
    assert counts["created"] + counts["unchanged-or-appended"] + counts["replayed"] >= 1
    assert_imported_once("races", lines[0]["sessionId"], lines)


@pytest.mark.parametrize("keyed", [False, True], ids=["expected-entries", "one-key"])
def test_twenty_identical_first_batches_of_an_openai_session_store_it_once(server, keyed):
    key = make_key(["read", "write"])
    items = [{"role": "user", "content": f"item {i}"} for i in range(30)]
    # Items carry no ids: without a key, expected_entries is what makes the batch once-only.
    body = {"format": "openai-responses", "entries": items, "namespace": "races", "external_id": "oai-race",
            **({} if keyed else {"expected_entries": 0})}
    answers = race(lambda: api(server, key, body, "the-items" if keyed else None))
    counts = Counter(outcome(*a) if a[0] != 409 or a[2]["error"]["code"] != "entries_conflict"
                     else "409 entries_conflict" for a in answers)
    print(dict(counts))
    assert not [k for k in counts if k.startswith("BAD")], counts
    conversation = Conversation.objects.get(namespace="races", external_id="oai-race")
    assert Message.objects.filter(conversation=conversation).count() == len(items)
    assert conversation.next_position == len(items)


def _admin_cookies() -> dict:
    user = make_user("racer", "admin")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return {"sessionid": session.session_key, "csrftoken": secrets.token_hex(16)}


def _form(port, cookies, fields: dict, file: tuple[str, bytes] | None = None):
    boundary = secrets.token_hex(12)
    parts = []
    for name, value in {**fields, "csrfmiddlewaretoken": cookies["csrftoken"]}.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    if file:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file[0]}"\r\n'
                     "Content-Type: application/octet-stream\r\n\r\n".encode() + file[1] + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}",
               "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
               "Referer": f"http://127.0.0.1:{port}/admin/import/", "Host": f"127.0.0.1:{port}"}
    return call(port, "POST", "/admin/import/", body=body, headers=headers)


def test_twenty_confirms_of_the_same_file_on_the_upload_page_import_it_once(server):
    cookies = _admin_cookies()
    lines = session_lines(session="c0ffee00-1111-4222-8333-944455556666")
    data = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    fields = {"format": "auto", "namespace": "races", "subject": ""}
    tokens = []
    for _ in range(RACERS):  # twenty previews of one file, each its own upload
        status, _headers, page = _form(server, cookies, fields, ("session.jsonl", data))
        assert status == 200, page[-2000:]
        tokens.append(re.search(r'name="token" value="([0-9a-f]{32})"', page).group(1))
    pending = list(tokens)
    lock = threading.Lock()

    def confirm():
        with lock:
            token = pending.pop()
        return _form(server, cookies, {**fields, "confirm": "1", "token": token, "name": "session.jsonl"})

    answers = race(confirm)
    statuses = Counter(status for status, _h, _p in answers)
    print(dict(statuses))
    assert set(statuses) <= {200, 409}, [p[-1500:] for s, _h, p in answers if s not in (200, 409)][:2]
    assert all(h.get("retry-after", "").isdigit() for s, h, _p in answers if s == 409)
    assert_imported_once("races", lines[0]["sessionId"], lines)
