"""What the API tests share: keys with given scopes, a JSON client, sample data.

Its fixtures are registered for every test module by tests/conftest.py (`pytest_plugins`):
a test names them as arguments; only the plain helpers (Api, make_key, error_of, login_as)
are imported.
"""

import json

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from conversations import api_keys, store
from conversations.models import Conversation
from tests.answer_shapes import Recorder
from tests.helpers import make_user

BASE = "/api/v1"


def make_key(scopes, name="test-agent") -> str:
    _, secret = api_keys.create_api_key(name=name, scopes=scopes, created_by="test")
    return secret


class Api:
    """A Django test client speaking JSON with one bearer key."""

    def __init__(self, client, key: str | None):
        self.client = client
        self.key = key

    def _headers(self, headers):
        out = dict(headers or {})
        if self.key:
            out.setdefault("Authorization", f"Bearer {self.key}")
        return out

    def get(self, path, params=None, headers=None):
        return self.client.get(BASE + path, params or {}, headers=self._headers(headers))

    def post(self, path, body=None, *, raw=None, content_type="application/json", headers=None):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(BASE + path, data, content_type=content_type, headers=self._headers(headers))

    def put(self, path, body=None, *, raw=None, content_type="application/json", headers=None):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.put(BASE + path, data, content_type=content_type, headers=self._headers(headers))

    def delete(self, path, headers=None):
        return self.client.delete(BASE + path, headers=self._headers(headers))


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["code"] and body["error"]["message"], body
    return body["error"]


@pytest.fixture
def api_client(client, db):
    """`api_client(scopes, name="test-agent")`: a JSON client for /api/v1 holding a new key of those scopes."""

    def make(scopes, name="test-agent"):
        return Api(client, make_key(list(scopes), name=name))

    return make


@pytest.fixture
def reader(api_client):
    return api_client(["read"], name="reader")


@pytest.fixture
def writer(api_client):
    return api_client(["read", "write"], name="writer")


@pytest.fixture
def admin_key(api_client):
    return api_client(["admin"], name="janitor")


@pytest.fixture
def anonymous(client):
    return Api(client, None)


@pytest.fixture
def convo():
    """A conversation with four messages at positions 0..3."""
    c = store.create_conversation(title="Refund for order 7", subject="customer:42", meta={"agent": "bot"})
    for message in (
        {"kind": "system", "content": "You are a support agent."},
        {"kind": "user", "content": "Where is my refund?"},
        {"kind": "assistant", "content": "Let me check.",
         "tool_calls": [{"id": "c1", "name": "refund_status", "arguments": {"order": 7}}]},
        {"kind": "tool", "tool_call_id": "c1", "content": "refunded on May 3"},
    ):
        store.append_message(conversation_id=c.pk, message=message)
    c.refresh_from_db()
    return c


def login_as(client, role: str | None, username: str | None = None):
    """The Django test client signed in (force_login, no form) as a new user with that role
    (None or "none" for no role), named after the role unless named."""
    role = None if role == "none" else role
    user = make_user(role, username or role or "nobody", password=None)
    client.force_login(user)
    return user


# ---- schemathesis (tests/test_*schemathesis.py) ------------------------------------------------


@pytest.fixture
def keep_the_test_connection():
    """For an app called in this thread, inside the test's transaction (schemathesis' WSGI
    calls): Django would close that connection around each request (its own test client
    prevents that the same way)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def agent_key(db):
    return make_key(["admin"], name="schemathesis")


@pytest.fixture
def sample_conversation(db):
    """A conversation with a few messages and a checkpoint; a new one once deleted."""
    made = []

    def get(fresh: bool = False):
        if made and not fresh and Conversation.objects.live().filter(pk=made[-1].pk).exists():
            return made[-1]
        c = store.create_conversation(title="fuzzed", subject="customer:1")
        for text in ("one", "two", "three"):
            store.append_message(conversation_id=c.pk, message={"kind": "note", "text": text})
        store.checkpoint_at(conversation_id=c.pk, position=0, summary="folded")
        made.append(c)
        return c

    return get


# ---- answer shapes (tests/answer_shapes.py) ----------------------------------------------------


@pytest.fixture
def answer_shapes(monkeypatch):
    """Use it in a module (`pytest.mark.usefixtures("answer_shapes")`): each test fails when a 2xx
    answer it got had fields other than its OpenAPI schema's."""
    recorder = Recorder()
    recorder.install(monkeypatch)
    yield recorder
    problems = recorder.problems()
    assert not problems, "answers and their schemas differ:\n" + "\n".join(problems[:20])
