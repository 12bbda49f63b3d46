"""The append answers are built by hand (conversations/api.py), not rendered by ninja per
request: their bytes must stay the ones ninja renders from their declared schemas, since
clients parse them and an idempotent replay sends the stored bytes again."""

import pytest
from django.test import RequestFactory

from conversations.api_schemas import AppendOut, BatchOut
from memoryui.api import api

pytestmark = pytest.mark.django_db


def _rendered_by_ninja(schema, data) -> bytes:
    request = RequestFactory().post("/")
    return api.create_response(request, schema.model_validate(data).model_dump(), status=201).content


def test_it_answers_an_append_with_the_bytes_ninja_renders(writer):
    cid = writer.post("/conversations", {"title": "t"}).json()["id"]
    response = writer.post(f"/conversations/{cid}/messages", {"kind": "user", "content": "été"})
    assert response.status_code == 201
    assert response["Content-Type"] == api.get_content_type()
    assert response.content == _rendered_by_ninja(AppendOut, {"position": 0, "kind": "user"})


def test_it_answers_a_batch_with_the_bytes_ninja_renders(writer):
    cid = writer.post("/conversations", {"title": "t"}).json()["id"]
    writer.post(f"/conversations/{cid}/messages", {"kind": "user", "content": "first"})
    response = writer.post(f"/conversations/{cid}/messages/batch",
                           {"messages": [{"kind": "user", "content": "a"}, {"kind": "note", "text": "b"}]})
    assert response.status_code == 201
    assert response["Content-Type"] == api.get_content_type()
    assert response.content == _rendered_by_ninja(BatchOut, {"first_position": 1, "last_position": 2, "count": 2})


def test_it_replays_a_keyed_append_byte_for_byte(writer):
    cid = writer.post("/conversations", {"title": "t"}).json()["id"]
    headers = {"Idempotency-Key": "append-answer-1"}
    first = writer.post(f"/conversations/{cid}/messages", {"kind": "user", "content": "hi"}, headers=headers)
    again = writer.post(f"/conversations/{cid}/messages", {"kind": "user", "content": "hi"}, headers=headers)
    assert again["Idempotent-Replayed"] == "true"
    assert (again.status_code, again.content, again["Content-Type"]) == (201, first.content, first["Content-Type"])
