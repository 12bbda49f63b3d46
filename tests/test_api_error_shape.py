"""Under /api/ every refusal is JSON in the one error shape, whoever makes it:
ninja (405), Django (404, 500), or the size limits (413, 414) checked before a body is read."""

import pytest
from django.test import Client

from conversations.middleware import MAX_URL_LENGTH
from tests.api_support import error_of, make_key

pytestmark = pytest.mark.django_db


def assert_error_shape(response, status, code):
    assert response.status_code == status, response.content[:200]
    assert response["Content-Type"].startswith("application/json")
    assert error_of(response)["code"] == code


@pytest.mark.parametrize("method", ["put", "patch", "options", "trace"])
def test_a_method_an_endpoint_does_not_answer_is_a_json_405_with_allow(reader, method):
    response = getattr(reader.client, method)("/api/v1/conversations", headers=reader._headers(None))
    assert_error_shape(response, 405, "method_not_allowed")
    assert "GET" in response["Allow"] and "POST" in response["Allow"]


@pytest.mark.parametrize("path", ["/api/", "/api/v2/conversations", "/api/v1/no/such/thing", "/api/v1/facts/abc"])
def test_an_unknown_address_is_a_json_404(reader, path):
    assert_error_shape(reader.client.get(path, headers=reader._headers(None)), 404, "not_found")


def test_a_body_over_the_limit_is_a_json_413_before_it_is_read(admin_key, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = admin_key.post("/conversations", raw='{"title": "' + "x" * 2000 + '"}')
    assert_error_shape(response, 413, "body_too_large")
    # Also a body the idempotency layer would have read first.
    response = admin_key.post("/conversations", raw='{"title": "' + "x" * 2000 + '"}',
                              headers={"Idempotency-Key": "k-413"})
    assert_error_shape(response, 413, "body_too_large")


def test_an_address_over_the_limit_is_a_json_414(reader):
    response = reader.get("/conversations", {"subject": "x" * MAX_URL_LENGTH})
    assert_error_shape(response, 414, "uri_too_long")


def test_a_page_address_over_the_limit_is_a_plain_414(client):
    assert client.get("/?q=" + "x" * MAX_URL_LENGTH).status_code == 414


def test_head_reaches_a_get_endpoint_without_a_body(reader):
    response = reader.client.head("/api/v1/conversations", headers=reader._headers(None))
    assert response.status_code == 200 and response.content == b""
    assert int(response["Content-Length"]) > 0


def test_an_unhandled_exception_is_a_json_500(reader, monkeypatch):
    from conversations import api

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(api, "conversation_summary", explode)
    api_client = Client(raise_request_exception=False)
    from conversations import store

    store.create_conversation(title="t")
    response = api_client.get("/api/v1/conversations", headers=reader._headers(None))
    assert_error_shape(response, 500, "internal_error")
    assert "boom" not in response.content.decode()


def test_a_query_parameter_sent_twice_is_a_422_naming_it(client):
    key = make_key(["read"])
    answer = client.get("/api/v1/conversations?subject=a&subject=b", headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 422
    assert answer.json()["error"]["field"] == "subject" and "one value" in answer.json()["error"]["message"]
