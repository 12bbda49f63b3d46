"""Bodies sent with `Transfer-Encoding: chunked` (no Content-Length) are read, up to the
same limit as a declared length, and refused with 413 past it.

Django reads exactly CONTENT_LENGTH bytes of a WSGI body, so before the middleware
buffered them such bodies read as empty (400 "the request body is empty"). Tested
against a real gunicorn with memoryui/gunicorn_conf.py, as `make run` serves, with
http.client's own chunked encoding and hand-written chunks on a socket; and in-process,
the way gunicorn hands the body to Django (de-chunked, no length).
"""

import http.client
import io
import json
import socket

import pytest
from django.conf import settings

from conversations import api_keys, store
from conversations.models import Message
from tests.server_support import gunicorn, nothing_failed_in

LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE


@pytest.fixture(scope="module")
def _gunicorn(django_db_setup, tmp_path_factory):
    """One gunicorn over the test database for the module; each test makes its own key."""
    with gunicorn(tmp_path_factory.mktemp("gunicorn") / "gunicorn.log", workers=2) as server:
        yield server


@pytest.fixture
def server(_gunicorn):
    with nothing_failed_in(_gunicorn):
        yield _gunicorn.port


pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key():
    return api_keys.create_api_key(name="chunked", scopes=["read", "write"])[1]


@pytest.fixture
def conversation():
    return store.create_conversation(title="chunked")


def _blocks(body: bytes, size: int = 7000):
    for i in range(0, len(body), size):
        yield body[i:i + size]


def send_chunked(port, key, path, body: bytes) -> tuple[int, dict]:
    """POST `body` with http.client's chunked encoding (it sends no Content-Length)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", f"/api/v1{path}", body=_blocks(body), encode_chunked=True, headers={
            "Authorization": f"Bearer {key}", "Content-Type": "application/json", "Transfer-Encoding": "chunked"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def send_raw_chunks(port, key, path, body: bytes) -> tuple[int, dict]:
    """The same written by hand on a socket: hex sizes, CRLFs, a zero chunk; the answer read
    even when the server stops reading early (a refused body)."""
    head = (f"POST /api/v1{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        try:
            sock.sendall(head)
            for block in _blocks(body, 65536):
                sock.sendall(b"%x\r\n%s\r\n" % (len(block), block))
            sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered before the end of the body; the answer is still there
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read() or b"{}")


@pytest.mark.parametrize("send", [send_chunked, send_raw_chunks])
def test_it_reads_a_chunked_message_body(server, key, conversation, send):
    body = json.dumps({"kind": "note", "text": "sent in chunks ✓ " + "x" * 20000}, ensure_ascii=False).encode()
    status, answer = send(server, key, f"/conversations/{conversation.pk}/messages", body)
    assert status == 201, answer
    stored = Message.objects.get(conversation=conversation, position=answer["position"])
    assert json.loads(stored.content)["text"] == json.loads(body)["text"]


@pytest.mark.parametrize("send", [send_chunked, send_raw_chunks])
def test_it_reads_a_chunked_batch_close_to_the_limit_whole(server, key, conversation, send):
    text = "y" * (700 * 1024)
    messages = [{"kind": "user", "content": text}, {"kind": "note", "text": text}, {"kind": "user", "content": text}]
    body = json.dumps({"messages": messages}).encode()
    assert LIMIT - 64 * 1024 < len(body) <= LIMIT
    status, answer = send(server, key, f"/conversations/{conversation.pk}/messages/batch", body)
    assert status == 201 and answer["count"] == 3, answer
    assert [json.loads(m.content) for m in Message.objects.filter(conversation=conversation).order_by("position")] \
        == messages


@pytest.mark.parametrize("send", [send_chunked, send_raw_chunks])
def test_a_chunked_body_past_the_limit_is_413_and_writes_nothing(server, key, conversation, send):
    body = json.dumps({"messages": [{"kind": "note", "text": "z" * (LIMIT // 2)}] * 2}).encode()
    assert len(body) > LIMIT
    status, answer = send(server, key, f"/conversations/{conversation.pk}/messages/batch", body)
    assert status == 413 and answer["error"]["code"] == "body_too_large", answer
    assert not Message.objects.filter(conversation=conversation).exists()


def test_a_chunked_message_over_the_message_limit_is_413_naming_its_field(server, key, conversation):
    body = json.dumps({"messages": [{"kind": "user", "content": "fine"},
                                    {"kind": "note", "text": "n" * (1024 * 1024 + 1)}]}).encode()
    status, answer = send_chunked(server, key, f"/conversations/{conversation.pk}/messages/batch", body)
    assert status == 413 and answer["error"]["field"] == "messages.1.text", answer
    assert not Message.objects.filter(conversation=conversation).exists()


# ---- in-process: the body as gunicorn hands it to Django --------------------------------


def post_as_gunicorn_does(client, key, path, body: bytes):
    """De-chunked on wsgi.input, Transfer-Encoding kept, no Content-Length."""
    return client.generic("POST", f"/api/v1{path}", body, content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH="",
                          **{"wsgi.input": io.BytesIO(body)})


def test_in_process_a_chunked_body_is_read(client, key, conversation):
    body = json.dumps({"kind": "note", "text": "hello"}).encode()
    response = post_as_gunicorn_does(client, key, f"/conversations/{conversation.pk}/messages", body)
    assert response.status_code == 201, response.content
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_in_process_a_chunked_body_past_the_limit_is_413(client, key, conversation):
    body = json.dumps({"kind": "note", "text": "z" * LIMIT}).encode()
    response = post_as_gunicorn_does(client, key, f"/conversations/{conversation.pk}/messages", body)
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"
    assert not Message.objects.filter(conversation=conversation).exists()


def test_in_process_an_empty_chunked_body_is_still_400_empty(client, key, conversation):
    response = post_as_gunicorn_does(client, key, f"/conversations/{conversation.pk}/messages", b"")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"


def test_in_process_a_chunked_upload_to_the_import_page_past_the_api_limit_is_read(client):
    """The import page takes files far larger than one API body: its chunked uploads get its
    own limit, not the API's."""
    from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

    from tests.api_support import login_as

    login_as(client, "admin")
    lines = [json.dumps({"kind": "note", "text": f"line {i} " + "x" * 1000}) for i in range(LIMIT // 1000 + 50)]
    upload = io.BytesIO("\n".join(lines).encode())
    upload.name = "journal.jsonl"
    body = encode_multipart(BOUNDARY, {"file": upload, "format": "journal"})
    assert len(body) > LIMIT
    response = client.generic("POST", "/admin/import/", body, content_type=MULTIPART_CONTENT,
                              HTTP_TRANSFER_ENCODING="chunked", CONTENT_LENGTH="",
                              **{"wsgi.input": io.BytesIO(body)})
    assert response.status_code == 200, response.content[:500]
    assert 'name="token"' in response.content.decode()  # previewed, waiting for its confirmation


@pytest.mark.parametrize("send", [send_chunked, send_raw_chunks])
def test_a_chunked_import_past_the_other_bodies_limit_is_read_a_block_at_a_time(server, key, send):
    """An import takes MEMORYUI_MAX_IMPORT_BYTES, not the small limit of every other body."""
    lines = [json.dumps({"kind": "note", "text": f"line {i} " + "x" * 1000}) for i in range(LIMIT // 1000 + 50)]
    body = json.dumps({"content": "\n".join(lines) + "\n", "format": "journal"}).encode()
    assert len(body) > LIMIT
    status, answer = send(server, key, "/imports", body)
    assert status == 201 and answer["messages"] == len(lines), answer


def test_in_process_a_chunked_import_past_its_own_limit_is_413_naming_it(client, key, settings):
    settings.MEMORYUI_MAX_IMPORT_BYTES = 50_000
    body = json.dumps({"content": "x" * 60_000}).encode()
    response = post_as_gunicorn_does(client, key, "/imports", body)
    assert response.status_code == 413 and "MEMORYUI_MAX_IMPORT_BYTES" in response.json()["error"]["message"]


# ---- a refused body and the client's connection pool ------------------------------------------


@pytest.mark.parametrize("chunked", [True, False])
def test_a_413_before_the_body_is_read_closes_the_connection_and_a_pooled_client_goes_on(server, key,
                                                                                         conversation, chunked):
    """The body past the limit stays unread on the connection: the answer says `Connection: close`,
    so a pooled client opens a new connection for its next request instead of failing on the old one."""
    import httpx

    body = json.dumps({"messages": [{"kind": "note", "text": "z" * (LIMIT // 2)}] * 4}).encode()
    path = f"http://127.0.0.1:{server}/api/v1/conversations/{conversation.pk}/messages"
    with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        refused = http.post(path + "/batch", content=_blocks(body) if chunked else body,
                            headers={"Content-Type": "application/json"})
        assert refused.status_code == 413, refused.content
        assert refused.headers["Connection"] == "close"
        for n in range(3):  # on the same pool: each one is served
            answer = http.post(path, json={"kind": "note", "text": f"after the refused body {n}"})
            assert answer.status_code == 201, answer.content
    assert Message.objects.filter(conversation=conversation).count() == 3
