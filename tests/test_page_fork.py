"""Fork from here: a confirmation page (GET) and the fork itself (POST, CSRF)."""

import uuid

import pytest
from django.test import Client

from conversations import store
from conversations.models import AuditEvent, Conversation, Message
from conversations.roles import ADMIN, AUDITOR, REVIEWER
from tests.helpers import make_user

pytestmark = pytest.mark.django_db


def _user(role, name=None):
    return make_user(role, name or f"u-{role}", password=None)


@pytest.fixture
def convo():
    c = store.create_conversation(title="Parent", subject="cust:1")
    for i in range(6):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"secret words {i}"})
    store.checkpoint_at(conversation_id=c.pk, position=1, summary="fold")
    return c


def url(c, position=3):
    return f"/conversations/{c.pk}/fork/{position}/"


def test_it_confirms_before_forking(client, convo):
    client.force_login(_user(AUDITOR))
    response = client.get(url(convo))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Fork from #3" in body and 'method="post"' in body and "csrfmiddlewaretoken" in body
    assert "secret words 3" in body  # the last row the fork keeps
    assert Conversation.objects.count() == 1


@pytest.mark.parametrize("role", [AUDITOR, REVIEWER, ADMIN])
def test_it_forks_and_lands_on_the_child(client, convo, role):
    client.force_login(_user(role))
    response = client.post(url(convo), {"title": "My branch"})
    child = Conversation.objects.get(parent_id=convo.pk)
    assert response.status_code == 302 and response["Location"] == f"/conversations/{child.pk}/"
    assert child.title == "My branch" and child.forked_from_position == 3
    assert Message.objects.filter(conversation=child).count() == 4
    page = client.get(response["Location"]).content.decode()
    assert "at #3" in page and f'href="/conversations/{convo.pk}/"' in page
    event = AuditEvent.objects.get(action="conversation.forked")
    assert event.actor == f"user:u-{role}" and event.target_id == str(child.pk)
    assert event.detail == {"parent_id": str(convo.pk), "position": 3, "messages": 4}


def test_it_makes_a_title_when_none_is_given(client, convo):
    client.force_login(_user(AUDITOR))
    client.post(url(convo), {"title": "  "})
    assert Conversation.objects.get(parent_id=convo.pk).title == "Parent (fork at 3)"


def test_it_explains_a_bad_title_and_writes_nothing(client, convo):
    client.force_login(_user(AUDITOR))
    response = client.post(url(convo), {"title": "x" * 301})
    assert response.status_code == 422
    assert b"at most 300" in response.content
    assert Conversation.objects.count() == 1


def test_it_needs_a_csrf_token():
    convo = store.create_conversation(title="p")
    store.append_message(conversation_id=convo.pk, message={"kind": "user", "content": "x"})
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user(AUDITOR))
    assert client.post(url(convo, 0), {"title": "t"}).status_code == 403
    assert Conversation.objects.count() == 1
    token = client.get(url(convo, 0)).context["csrf_token"]
    assert client.post(url(convo, 0), {"title": "t", "csrfmiddlewaretoken": str(token)}).status_code == 302
    assert Conversation.objects.count() == 2


def test_it_refuses_a_user_without_a_role(client, convo):
    client.force_login(_user(None))
    assert client.get(url(convo)).status_code == 403
    assert client.post(url(convo)).status_code == 403
    assert Conversation.objects.count() == 1


def test_it_sends_anonymous_users_to_log_in(client, convo):
    response = client.post(url(convo))
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("path", [
    lambda c: f"/conversations/{uuid.uuid4()}/fork/0/",
    lambda c: "/conversations/nope/fork/0/",
    lambda c: f"/conversations/{c.pk}/fork/6/",
    lambda c: f"/conversations/{c.pk}/fork/{'9' * 30}/",
])
def test_it_answers_404_for_unknown_conversations_and_positions(client, convo, path):
    client.force_login(_user(AUDITOR))
    assert client.get(path(convo)).status_code == 404
    assert client.post(path(convo)).status_code == 404
    assert Conversation.objects.count() == 1
