"""GET /api/v1/conversations/{id}/export: streamed downloads."""

import json
import uuid

import pytest
from django.http import StreamingHttpResponse

from conversations.models import AuditEvent
from tests.api_support import Api, error_of, make_key

pytestmark = pytest.mark.django_db


def _body(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


def test_it_streams_json_by_default(reader, convo):
    response = reader.get(f"/conversations/{convo.pk}/export")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"] == f'attachment; filename="conversation-{convo.pk}.json"'
    data = json.loads(_body(response))
    assert data["conversation"]["id"] == str(convo.pk)


def test_it_streams_jsonl_with_the_stored_messages(reader, convo):
    response = reader.get(f"/conversations/{convo.pk}/export", {"format": "jsonl"})
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response["Content-Disposition"].endswith('.jsonl"')
    lines = [json.loads(line) for line in _body(response).splitlines()]
    listed = reader.get(f"/conversations/{convo.pk}/messages").json()["items"]
    assert [line["message"] for line in lines if "record" not in line] == [i["message"] for i in listed]
    assert lines[-1]["record"] == "signed_head"  # the signed head closes the file


def test_it_streams_markdown(reader, convo):
    response = reader.get(f"/conversations/{convo.pk}/export", {"format": "markdown"})
    assert response["Content-Type"].startswith("text/markdown")
    assert response["Content-Disposition"].endswith('.md"')
    assert "Where is my refund?" in _body(response)


@pytest.mark.parametrize("fmt", ["csv", "", "JSON", "json,jsonl"])
def test_an_unknown_format_is_422(reader, convo, fmt):
    response = reader.get(f"/conversations/{convo.pk}/export", {"format": fmt})
    assert response.status_code == 422
    assert error_of(response)["field"] == "format"


def test_an_unknown_or_malformed_conversation_is_404(reader):
    assert reader.get(f"/conversations/{uuid.uuid4()}/export").status_code == 404
    assert reader.get("/conversations/abc/export", {"format": "jsonl"}).status_code == 404


def test_export_needs_the_read_scope(client, convo):
    response = Api(client, make_key(["write"])).get(f"/conversations/{convo.pk}/export")
    assert response.status_code == 403
    assert Api(client, None).get(f"/conversations/{convo.pk}/export").status_code == 401


def test_it_records_the_export_in_the_audit_log(reader, convo):
    _body(reader.get(f"/conversations/{convo.pk}/export", {"format": "jsonl"}))
    event = AuditEvent.objects.get(action="conversation.exported")
    assert (event.actor, event.target_id) == ("key:reader", str(convo.pk))
    assert event.detail["format"] == "jsonl" and event.detail["messages"] == 4


def test_a_refused_export_is_not_recorded(reader, convo):
    reader.get(f"/conversations/{convo.pk}/export", {"format": "csv"})
    reader.get(f"/conversations/{uuid.uuid4()}/export")
    assert not AuditEvent.objects.filter(action="conversation.exported").exists()
