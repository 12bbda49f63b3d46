import pytest

pytestmark = pytest.mark.django_db


def test_an_expired_session_sends_htmx_to_the_login_page_as_a_whole_page(client):
    response = client.get("/", headers={"HX-Request": "true", "HX-Target": "conversation-list"})
    assert response.status_code == 204
    assert response["HX-Redirect"].startswith("/login/?next=/")
    assert "Location" not in response


def test_a_plain_request_still_gets_the_redirect(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_pages_answer_head_like_get(client, user):
    client.force_login(user("auditor"))
    assert client.head("/").status_code == 200
