"""Checkpoint here: admins only, POST with CSRF, the new fold shows at once."""

import pytest
from django.test import Client

from conversations import store
from conversations.models import AuditEvent, Checkpoint
from conversations.roles import ADMIN, AUDITOR, REVIEWER
from tests.helpers import make_user

pytestmark = pytest.mark.django_db


def _user(role):
    return make_user(role, f"u-{role}", password=None)


@pytest.fixture
def convo():
    c = store.create_conversation(title="Parent")
    for i in range(6):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"row {i}"})
    return c


def url(c, position=3):
    return f"/conversations/{c.pk}/checkpoint/{position}/"


def test_it_shows_the_form_to_admins(client, convo):
    client.force_login(_user(ADMIN))
    response = client.get(url(convo))
    assert response.status_code == 200
    assert b"<textarea" in response.content and b"row 3" in response.content


def test_it_creates_a_checkpoint_that_shows_in_both_views(client, convo):
    client.force_login(_user(ADMIN))
    response = client.post(url(convo), {"summary": "The user said rows 0 to 3."})
    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{convo.pk}/?at=3#p3"
    cp = Checkpoint.objects.get(conversation_id=convo.pk)
    assert cp.message_position == 3 and cp.created_by == "user:u-admin"
    page = client.get(f"/conversations/{convo.pk}/")
    assert 'id="fold"' in page.content.decode() and "The user said rows 0 to 3." in page.content.decode()
    assert [i.position for i in page.context["active"].page.items] == [4, 5]
    event = AuditEvent.objects.get(action="conversation.checkpointed")
    assert event.detail == {"checkpoint_id": cp.pk, "position": 3}
    assert event.target_id == str(convo.pk)


@pytest.mark.parametrize("role", [AUDITOR, REVIEWER, None])
def test_it_refuses_everyone_but_admins(client, convo, role):
    client.force_login(_user(role))
    assert client.get(url(convo)).status_code == 403
    assert client.post(url(convo), {"summary": "s"}).status_code == 403
    assert not Checkpoint.objects.exists()


def test_it_explains_a_blank_summary(client, convo):
    client.force_login(_user(ADMIN))
    response = client.post(url(convo), {"summary": "   "})
    assert response.status_code == 422 and b"summary must not be blank" in response.content
    assert not Checkpoint.objects.exists()


def test_it_refuses_to_move_the_fold_backwards(client, convo):
    store.checkpoint_at(conversation_id=convo.pk, position=4, summary="later")
    client.force_login(_user(ADMIN))
    response = client.post(url(convo, 2), {"summary": "earlier"})
    assert response.status_code == 409 and b"before the latest checkpoint" in response.content
    assert Checkpoint.objects.count() == 1


def test_it_needs_a_csrf_token(convo):
    client = Client(enforce_csrf_checks=True)
    client.force_login(_user(ADMIN))
    assert client.post(url(convo), {"summary": "s"}).status_code == 403
    token = client.get(url(convo)).context["csrf_token"]
    assert client.post(url(convo), {"summary": "s", "csrfmiddlewaretoken": str(token)}).status_code == 302
    assert Checkpoint.objects.count() == 1


def test_it_answers_404_for_positions_out_of_range(client, convo):
    client.force_login(_user(ADMIN))
    assert client.get(url(convo, 6)).status_code == 404
    assert client.post(url(convo, 60), {"summary": "s"}).status_code == 404
    assert client.get("/conversations/bad/checkpoint/0/").status_code == 404


@pytest.fixture
def calling():
    """0 user, 1 assistant calling c1, 2 a note, 3 the result of c1, 4 assistant."""
    c = store.create_conversation(title="Calls")
    for m in ({"kind": "user", "content": "refund order 7"},
              {"kind": "assistant", "tool_calls": [{"id": "c1", "name": "refund", "arguments": {"order": 7}}]},
              {"kind": "note", "text": "refund sent"},
              {"kind": "tool", "tool_call_id": "c1", "content": "ok"},
              {"kind": "assistant", "content": "Done."}):
        store.append_message(conversation_id=c.pk, message=m)
    return c


def test_the_page_says_why_checkpoint_here_is_unavailable_inside_a_call_block(client, calling):
    client.force_login(_user(ADMIN))
    html = client.get(f"/conversations/{calling.pk}/").content.decode()
    for position in (0, 3, 4):
        assert f'href="checkpoint/{position}/"' in html  # relative to the conversation page
    for position in (1, 2):
        assert f'href="checkpoint/{position}/"' not in html
    # In the full record; the active view equals it (no checkpoint) and repeats no row.
    assert html.count("Checkpoint here: unavailable between a tool call and its result") == 2


def test_the_form_refuses_a_fold_inside_a_call_block_and_names_the_nearest_positions(client, calling):
    client.force_login(_user(ADMIN))
    page = client.get(url(calling, 1)).content.decode()
    assert "would separate the call c1 from its result" in page and "disabled" in page
    response = client.post(url(calling, 1), {"summary": "s"})
    assert response.status_code == 409
    assert "0 (before) and 3 (after)" in response.content.decode()
    assert not Checkpoint.objects.filter(conversation_id=calling.pk).exists()
