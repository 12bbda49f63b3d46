"""A streamed answer (an export, a ZIP) is read after the view returns, and still only in
the request's project (conversations/project_http.py)."""

import io
import zipfile

import pytest

from conversations import api_keys, projects, store
from conversations.facts import store as facts_store
from conversations.project_store import create_project
from conversations.roles import assign_role
from tests.api_support import Api
from tests.helpers import make_user

pytestmark = pytest.mark.django_db

SUBJECT = "customer:streamed"


@pytest.fixture
def two():
    a, b = create_project(slug="stream-a"), create_project(slug="stream-b")
    for project, marker in ((a, "alpha-streamed"), (b, "beta-streamed")):
        with projects.scoped(projects.one(project.pk)):
            c = store.create_conversation(title=f"{marker} talk", subject=SUBJECT)
            store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"{marker} text"})
            facts_store.propose_fact(subject=SUBJECT, text=f"{marker} fact", importance=2, created_by="test")
            store.record_audit(actor=f"{marker}-actor", action="test.marked")
    return a, b


def _streamed(response) -> bytes:
    assert response.status_code == 200 and response.streaming
    return b"".join(response.streaming_content)


def test_a_subject_export_holds_the_key_project_only(client, two):
    a, _ = two
    _, secret = api_keys.create_api_key(name="exporter", scopes=["admin"], project=a)
    body = _streamed(Api(client, secret).get("/subject-export", {"subject": SUBJECT}))
    with zipfile.ZipFile(io.BytesIO(body)) as zipped:
        text = " ".join(zipped.read(name).decode() for name in zipped.namelist())
    assert "alpha-streamed fact" in text and "alpha-streamed text" in text
    assert "beta-streamed" not in text


def test_the_audit_export_of_a_project_page_holds_its_events_only(client, two):
    a, _ = two
    person = make_user(None, "stream-admin")
    assign_role(person, "admin", a)
    client.force_login(person)
    text = _streamed(client.get("/p/stream-a/admin/audit/export.jsonl")).decode()
    assert "alpha-streamed-actor" in text and "beta-streamed" not in text
