import pytest

from conversations import store
from conversations.models import AuditEvent, Conversation
from conversations.roles import ADMIN, AUDITOR, REVIEWER
from tests.api_support import login_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def convo():
    return store.create_conversation(title="Keep me", subject="cust:9")


def login(client, role):
    return login_as(client, role, f"u-{role}")


def test_an_admin_pins_and_unpins(client, convo):
    login(client, ADMIN)
    page = client.get(f"/conversations/{convo.pk}/")
    assert b">Pin<" in page.content and b"by age" in page.content
    response = client.post(f"/conversations/{convo.pk}/pin/", {"pinned": "1"})
    assert response.status_code == 302 and response["Location"] == f"/conversations/{convo.pk}/"
    convo.refresh_from_db()
    assert convo.pinned
    page = client.get(f"/conversations/{convo.pk}/")
    assert b">Unpin<" in page.content and b"pinned: never pruned" in page.content
    client.post(f"/conversations/{convo.pk}/pin/", {"pinned": "0"})
    convo.refresh_from_db()
    assert not convo.pinned
    assert list(AuditEvent.objects.order_by("id").values_list("action", "actor", "target_id")) == [
        ("conversation.pinned", "user:u-admin", str(convo.pk)),
        ("conversation.unpinned", "user:u-admin", str(convo.pk)),
    ]


@pytest.mark.parametrize("role", [AUDITOR, REVIEWER])
def test_only_admins_may_pin(client, convo, role):
    login(client, role)
    assert b">Pin<" not in client.get(f"/conversations/{convo.pk}/").content
    assert client.post(f"/conversations/{convo.pk}/pin/", {"pinned": "1"}).status_code == 403
    assert not Conversation.objects.get(pk=convo.pk).pinned


def test_pinning_is_a_post_with_csrf(convo):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    login(client, ADMIN)
    assert client.get(f"/conversations/{convo.pk}/pin/").status_code == 405
    assert client.post(f"/conversations/{convo.pk}/pin/", {"pinned": "1"}).status_code == 403
    assert not Conversation.objects.get(pk=convo.pk).pinned


@pytest.mark.parametrize("bad_id", ["nope", "00000000-0000-0000-0000-000000000000"])
def test_unknown_ids_are_404(client, bad_id):
    login(client, ADMIN)
    assert client.post(f"/conversations/{bad_id}/pin/", {"pinned": "1"}).status_code == 404
