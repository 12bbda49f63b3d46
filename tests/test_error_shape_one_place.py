"""One error body, one code table, one page handler (conversations/http.py).

Every door that refuses a request names the same code for the same status, and a
page whose view lets a domain error escape gets one page with the right status and
`Vary` set, whichever view it was.
"""

import json

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from conversations import http
from conversations.errors import Conflict, ImportInProgress, InvalidInput, NotFound, StoreError
from conversations.jsonbody import BadRequest, BodyTooLarge, UnsupportedMediaType
from tests.retention_support import make_user


def test_it_names_one_code_per_status_for_every_door():
    # A body over the limit is refused by the middleware (before ninja), by jsonbody and by an
    # HttpError raised in a handler: all three answer the same code.
    assert http.code_for(413) == BodyTooLarge.code == "body_too_large"
    assert http.code_for(400) == BadRequest.code
    assert http.code_for(415) == UnsupportedMediaType.code
    assert http.code_for(404) == NotFound.code
    assert http.code_for(409) == Conflict.code
    assert http.code_for(422) == InvalidInput.code
    assert http.code_for(418) == "error"


def test_it_builds_one_body_with_an_optional_field():
    assert http.error_body("not_found", "no such row") == {"error": {"code": "not_found", "message": "no such row"}}
    assert http.error_body("invalid_input", "bad", "title") == {
        "error": {"code": "invalid_input", "message": "bad", "field": "title"}}
    assert http.store_error_body(InvalidInput("too long", field="title")) == http.error_body(
        "invalid_input", "too long", "title")


def test_it_sends_retry_after_with_a_json_error():
    response = http.error_json(409, "busy", code="idempotency_key_in_progress", field="Idempotency-Key",
                               retry_after=2)
    assert response.status_code == 409 and response["Retry-After"] == "2"
    assert json.loads(response.content) == {"error": {"code": "idempotency_key_in_progress", "message": "busy",
                                          "field": "Idempotency-Key"}}


@pytest.mark.parametrize(("exc", "status"), [
    (NotFound("no conversation with that id"), 404),
    (Conflict("a prune is running"), 409),
    (ImportInProgress("importing"), 409),
    (InvalidInput("too long", field="s"), 400),
    (StoreError("bad"), 400),
])
@pytest.mark.django_db
def test_the_page_handler_maps_each_store_error_to_one_page(exc, status):
    request = RequestFactory().get("/conversations/x/")
    request.user = make_user("auditor-1", "auditor")
    request.htmx = False
    middleware = http.StoreErrorPageMiddleware(lambda r: HttpResponse())
    response = middleware.process_exception(request, exc)
    assert response.status_code == status
    assert exc.message in response.content.decode()
    assert "HX-Request" in response["Vary"] and "HX-Target" in response["Vary"]


def test_the_page_handler_leaves_the_api_to_its_own_handlers():
    request = RequestFactory().get("/api/v1/conversations/x")
    middleware = http.StoreErrorPageMiddleware(lambda r: HttpResponse())
    assert middleware.process_exception(request, NotFound("gone")) is None
    assert middleware.process_exception(RequestFactory().get("/"), ValueError("not ours")) is None


@pytest.mark.django_db
@pytest.mark.parametrize(("role", "method", "url", "data"), [
    ("auditor", "get", "/?older=abc", None),
    ("reviewer", "get", "/facts/?reviewed=abc", None),
    ("reviewer", "post", "/facts/subject/", {"s": "x" * 10_000}),
    ("admin", "get", "/admin/prune/runs/?before=abc", None),
])
def test_every_page_answers_a_bad_parameter_with_the_one_400_page(client, role, method, url, data):
    client.force_login(make_user(f"{role}-1", role))
    response = getattr(client, method)(url, data) if data else getattr(client, method)(url)
    assert response.status_code == 400, response.content[:300]
    assert b"bad parameter" in response.content
    assert "HX-Request" in response["Vary"]


@pytest.mark.django_db
def test_a_page_takes_the_largest_position_and_refuses_one_past_it(client):
    from conversations import params, store

    client.force_login(make_user("auditor-2", "auditor"))
    convo = store.create_conversation(title="bounds")
    store.append_message(conversation_id=convo.pk, message={"kind": "user", "content": "hello"})
    for name in ("after", "until", "active_after", "active_until"):
        largest = client.get(f"/conversations/{convo.pk}/?{name}={params.MAX_POSITION}")
        assert largest.status_code == 200, (name, largest.content[:300])
        past = client.get(f"/conversations/{convo.pk}/?{name}={params.MAX_POSITION + 1}")
        assert past.status_code == 400 and b"bad parameter" in past.content, name
