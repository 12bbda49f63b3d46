import json
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import export, store
from conversations.errors import InvalidInput, NotFound
from conversations.models import AuditEvent, Message
from conversations.roles import AUDITOR
from tests.api_support import login_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation():
    c = store.create_conversation(title="Refund <b>48213</b>", subject="cust:7")
    for message in [
        {"kind": "system", "content": "Be kind."},
        {"kind": "user", "content": "My blender is cracked."},
        {"kind": "assistant", "content": "Looking it up.",
         "tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": {"order_id": "48213"}}]},
        {"kind": "tool", "tool_call_id": "c1", "name": "lookup_order", "content": '{"price": 149}', "is_error": True},
        {"kind": "thought", "text": "Refund it."},
        {"kind": "assistant", "content": "Refunded ```code``` done."},
    ]:
        store.append_message(conversation_id=c.pk, message=message)
    store.checkpoint_at(conversation_id=c.pk, position=1, summary="Early summary", created_by="user:x")
    store.checkpoint_at(conversation_id=c.pk, position=3, summary="Customer wants a refund.", created_by="user:x")
    return c


def _text(stream):
    return "".join(stream.chunks)


def test_it_exports_json_with_conversation_checkpoints_and_messages(conversation):
    stream = export.export_stream(conversation.pk, "json")
    assert stream.content_type.startswith("application/json")
    assert stream.filename == f"conversation-{conversation.pk}.json"
    data = json.loads(_text(stream))
    assert data["conversation"]["id"] == str(conversation.pk)
    assert data["conversation"]["title"] == "Refund <b>48213</b>"
    assert data["conversation"]["lineage"] == []
    assert [cp["message_position"] for cp in data["checkpoints"]] == [1, 3]
    assert [m["position"] for m in data["messages"]] == [0, 1, 2, 3, 4, 5]
    assert data["messages"][3]["message"]["is_error"] is True
    assert data["messages"][2]["message"]["tool_calls"][0]["arguments"] == {"order_id": "48213"}


def test_it_exports_jsonl_one_message_per_line(conversation):
    stream = export.export_stream(str(conversation.pk), "jsonl")
    lines = _text(stream).splitlines()
    # Six messages, the two checkpoints, and the signed head last.
    assert [json.loads(line).get("record") for line in lines] == [None] * 6 + ["checkpoint"] * 2 + ["signed_head"]
    row = json.loads(lines[4])
    assert {k: row[k] for k in ("position", "kind", "message")} == {
        "position": 4, "kind": "thought", "message": {"kind": "thought", "text": "Refund it."},
    }
    # With what offline verification needs: the stored text and the row's place in its chain.
    assert json.loads(row["stored"]) == row["message"] and len(row["salt"]) == 32 and len(row["chain_hash"]) == 64
    assert stream.filename.endswith(".jsonl")


def test_it_exports_markdown_with_the_fold_marked(conversation):
    stream = export.export_stream(conversation.pk, "markdown")
    text = _text(stream)
    assert stream.content_type.startswith("text/markdown")
    assert stream.filename.endswith(".md")
    assert text.startswith("# Refund &lt;b&gt;48213&lt;/b&gt;")
    assert "Fold: checkpoint at position 3" in text
    assert "Earlier checkpoint at position 1" in text
    # The fold is drawn after row 3 and before row 4.
    assert text.index("### #3 ") < text.index("Fold: checkpoint at position 3") < text.index("### #4 ")
    assert "Tool call `lookup_order`" in text and '"order_id": "48213"' in text
    assert "**error**" in text


def test_it_exports_lineage_of_a_fork(conversation):
    child = store.fork_conversation(conversation_id=conversation.pk, position=2, title="child")
    data = json.loads(_text(export.export_stream(child.pk, "json")))
    assert data["conversation"]["parent_id"] == str(conversation.pk)
    assert data["conversation"]["forked_from_position"] == 2
    assert data["conversation"]["lineage"][0]["id"] == str(conversation.pk)
    assert len(data["messages"]) == 3
    assert "Forked at position 2" in _text(export.export_stream(child.pk, "markdown"))


def test_it_rejects_unknown_formats_and_ids(conversation):
    with pytest.raises(InvalidInput) as exc:
        export.export_stream(conversation.pk, "csv")
    assert exc.value.field == "format"
    with pytest.raises(NotFound):
        export.export_stream(uuid.uuid4(), "json")
    with pytest.raises(NotFound):
        export.export_stream("not-a-uuid", "json")


def test_it_reads_in_keyset_batches(conversation, monkeypatch):
    monkeypatch.setattr(export, "BATCH", 2)
    stream = export.export_stream(conversation.pk, "jsonl")
    with CaptureQueriesContext(connection) as ctx:
        lines = _text(stream).splitlines()
    assert [json.loads(line)["position"] for line in lines[:6]] == [0, 1, 2, 3, 4, 5]
    # Three pages of two rows, each by position and LIMIT, never OFFSET.
    sql = [q["sql"].upper() for q in ctx.captured_queries if "CONVERSATIONS_MESSAGE" in q["sql"].upper()]
    assert len(sql) == 3
    assert all("LIMIT 2" in s and "OFFSET" not in s and '"POSITION" >' in s for s in sql)


def test_it_exports_a_broken_row_as_a_marked_hole(conversation):
    # The database refuses updates of message rows, so damage one the way a
    # schema change would: insert a row the current schema no longer accepts.
    pos = store.append_message(conversation_id=conversation.pk, message={"kind": "note", "text": "x"})
    assert pos == 6
    with connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET next_position = 8 WHERE id = %s",
                       [conversation._meta.pk.get_db_prep_value(conversation.pk, connection)])
    Message.objects.create(conversation=conversation, position=7, kind="legacy",
                           content='{"kind": "legacy", "body": "<script>x</script>"}',
                           created_at=conversation.created_at)
    lines = [json.loads(line) for line in _text(export.export_stream(conversation.pk, "jsonl")).splitlines()]
    broken = next(line for line in lines if line.get("position") == 7 and "record" not in line)
    assert broken["broken"] is True and broken["message"] is None
    assert broken["raw"] == '{"kind": "legacy", "body": "<script>x</script>"}'
    assert "Broken row" in _text(export.export_stream(conversation.pk, "markdown"))


def test_it_streams_from_the_page_with_a_filename(client, conversation):
    login_as(client, AUDITOR, "aud")
    for fmt, ext in [("json", "json"), ("jsonl", "jsonl"), ("markdown", "md")]:
        response = client.get(f"/conversations/{conversation.pk}/export.{fmt}")
        assert response.status_code == 200
        assert response.streaming
        assert f'filename="conversation-{conversation.pk}.{ext}"' in response["Content-Disposition"]
        body = b"".join(response.streaming_content).decode()
        assert "lookup_order" in body
    assert AuditEvent.objects.filter(action="conversation.exported").count() == 3
    detail = AuditEvent.objects.filter(action="conversation.exported").first().detail
    assert "Refund" not in json.dumps(detail)
    assert client.get(f"/conversations/{conversation.pk}/export.csv").status_code == 404


def test_the_export_page_checks_roles_and_ids(client, conversation):
    assert client.get(f"/conversations/{conversation.pk}/export.json").status_code == 302  # log in first
    login_as(client, None, "nobody")
    assert client.get(f"/conversations/{conversation.pk}/export.json").status_code == 403
    login_as(client, AUDITOR, "aud2")
    assert client.get(f"/conversations/{uuid.uuid4()}/export.json").status_code == 404
    assert client.get("/conversations/nope/export.json").status_code == 404
    assert not AuditEvent.objects.filter(action="conversation.exported").exists()


HOSTILE_TEXT = ("<img src=x onerror=alert(1)> ![t](https://tracker.example/p.png) [click](javascript:alert(1))\n"
                "# not a heading\n> not a quote\n- not a list\n1. not a list\n| a | b |\n    indented\n"
                "**bold** `tick` ``` fence")


def test_markdown_quotes_hostile_text_as_text(db):
    from markdown_it import MarkdownIt

    c = store.create_conversation(title="<script>alert(1)</script> # [x](javascript:1)", subject="cust:`1`<b>")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": HOSTILE_TEXT})
    store.append_message(conversation_id=c.pk, message={
        "kind": "assistant", "content": "ok",
        "tool_calls": [{"id": "c`1", "name": "<b>refund</b>`|`", "arguments": {"x": "</code><script>"}}]})
    store.append_message(conversation_id=c.pk, message={"kind": "tool", "tool_call_id": "c`1",
                                                        "name": "![i](https://t.example/x)", "content": "done"})
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": HOSTILE_TEXT})
    store.checkpoint_at(conversation_id=c.pk, position=2, summary=HOSTILE_TEXT, created_by="<i>agent</i>")
    html = MarkdownIt("commonmark").enable("table").render(_text(export.export_stream(c.pk, "markdown")))
    # No element came from the quoted text: no image, script, link, bold or italic tag.
    for markup in ("<img", "<script", "<a ", "<b>", "<i>", "<strong>"):
        assert markup not in html, markup
    # The only headings are the export's own: the title, one per message, the fold and the signed head.
    assert html.count("<h1>") == 1 and html.count("<h3>") == 4 and html.count("<h2>") == 2
    assert "<table" not in html and "<ul>" in html  # the header list only
    assert html.count("<li>") == 5  # conversation, subject, messages, created, the fold
    # The text itself is all there, readable.
    assert "onerror=alert(1)" in html and "not a heading" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
