import pytest
from django.contrib.auth import get_user_model

from conversations import store
from conversations.roles import AUDITOR, assign_role

pytestmark = pytest.mark.django_db


@pytest.fixture
def auditor(client):
    user = get_user_model().objects.create_user("aud", password="pw-aud-123456")
    assign_role(user, AUDITOR)
    client.force_login(user)
    return user


def test_it_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_it_lists_conversations_with_counts(client, auditor):
    c = store.create_conversation(title="Refund for order 7", subject="cust:7")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "hello"})
    response = client.get("/")
    assert response.status_code == 200
    assert b"Refund for order 7" in response.content
    assert b"cust:7" in response.content
