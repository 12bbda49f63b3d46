"""What the model saw: the active view as it stood just before a row was written."""

import uuid

import pytest

from conversations import store, views
from conversations.roles import AUDITOR
from tests.api_support import login_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def auditor(client):
    return login_as(client, AUDITOR, "aud")


@pytest.fixture
def convo():
    c = store.create_conversation(title="Refunds")
    for i in range(4):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"row {i}"})
    store.checkpoint_at(conversation_id=c.pk, position=1, summary="Folded 0-1")
    for i in range(4, 7):
        store.append_message(conversation_id=c.pk, message={"kind": "assistant", "content": f"row {i}"})
    # A checkpoint written after row 6: it must not appear in what the model saw at row 5.
    store.checkpoint_at(conversation_id=c.pk, position=4, summary="Later fold")
    return c


def url(c, position, query=""):
    return f"/conversations/{c.pk}/saw/{position}/{query}"


def test_it_shows_the_checkpoint_of_that_time_then_the_rows_before(client, auditor, convo):
    response = client.get(url(convo, 5))
    assert response.status_code == 200
    assert response.context["checkpoint"].summary == "Folded 0-1"
    # Newest first: the rows just before #5 at the top, reading back to the fold's summary.
    assert [i.position for i in response.context["items"]] == [4, 3, 2]
    body = response.content.decode()
    assert "Later fold" not in body
    assert body.index('id="w5"') < body.index('id="s4"') < body.index('id="s2"') < body.index('id="shandoff"')
    assert "row 5" in body
    assert response.context["context_rows"] == 3
    assert "<strong>3 rows</strong> plus the handoff summary of the checkpoint at #1" in body
    chars = sum(len(m.content) for m in convo.messages.filter(position__in=[2, 3, 4])) + len("Folded 0-1")
    assert f"<strong>{chars} characters</strong>" in body
    # The legend names every kind.
    assert body.count('<li class="kind-') == 10


def test_it_shows_everything_before_when_there_was_no_checkpoint(client, auditor, convo):
    response = client.get(url(convo, 2))
    assert response.context["checkpoint"] is None
    assert [i.position for i in response.context["items"]] == [1, 0]
    assert b"No checkpoint existed then" in response.content


def test_it_says_when_the_row_was_the_first(client, auditor, convo):
    body = client.get(url(convo, 0)).content.decode()
    assert "#0 is the first row" in body and "#-1" not in body


def test_it_loads_more_by_keyset(client, auditor, convo, monkeypatch):
    monkeypatch.setattr(views, "ROW_PAGE", 2)
    response = client.get(url(convo, 5))
    assert [i.position for i in response.context["items"]] == [4, 3]
    assert response.context["more_url"] == "?until=2" and "shandoff" not in response.content.decode()
    fragment = client.get(url(convo, 5, "?until=2"), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="saw-more")
    body = fragment.content.decode()
    assert "<html" not in body and 'id="s2"' in body and 'id="s3"' not in body and "shandoff" in body
    assert "HX-Request" in fragment["Vary"]


@pytest.mark.parametrize("path", [
    lambda c: f"/conversations/{c.pk}/saw/7/",
    lambda c: f"/conversations/{c.pk}/saw/{'9' * 25}/",
    lambda c: f"/conversations/{uuid.uuid4()}/saw/0/",
    lambda c: "/conversations/xyz/saw/0/",
])
def test_it_answers_404_for_unknown_rows(client, auditor, convo, path):
    assert client.get(path(convo)).status_code == 404


def test_it_refuses_a_user_without_a_role(client, convo):
    login_as(client, None, "nobody")
    assert client.get(url(convo, 1)).status_code == 403


def test_it_answers_a_bad_cursor_with_400(client, auditor, convo):
    assert client.get(url(convo, 5, "?until=abc")).status_code == 400
