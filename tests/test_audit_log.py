"""The audit log page: admin only, filters, keyset pages, JSONL export; and the log stays append-only."""

import json
from datetime import timedelta

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from conversations import api_keys, store
from conversations.models import AuditEvent
from conversations.retention import audit_views as views
from tests.retention_support import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client):
    user = make_user("boss", "admin")
    client.force_login(user)
    return user


def event(actor="user:a", action="fork.created", **detail):
    return store.record_audit(actor=actor, action=action, target_type="conversation", target_id="c1", detail=detail)


def at_days_ago(days, **kwargs):
    # Events are append-only, so a past event is inserted with its time rather than moved.
    return AuditEvent.objects.create(at=timezone.now() - timedelta(days=days), **kwargs)


@pytest.mark.parametrize("role", ["auditor", "reviewer"])
def test_it_is_for_admins_only(client, role):
    client.force_login(make_user("x", role))
    assert client.get("/admin/audit/").status_code == 403
    assert client.get("/admin/audit/export.jsonl").status_code == 403


def test_it_lists_newest_first_and_escapes(client, admin):
    event(actor="user:<script>", action="fork.created", n=1)
    event(actor="key:agent", action="checkpoint.created", n=2)
    html = client.get("/admin/audit/").content.decode()
    assert html.index("checkpoint.created") < html.index("fork.created")
    assert "user:&lt;script&gt;" in html and "user:<script>" not in html


def test_it_filters_by_actor_action_and_date(client, admin):
    at_days_ago(10, actor="user:old", action="prune.finished")
    at_days_ago(1, actor="user:alice", action="fork.created")
    at_days_ago(1, actor="key:ci", action="fork.created")
    at_days_ago(0, actor="user:alice", action="prune.started")

    def actors(query):
        response = client.get(f"/admin/audit/?{query}")
        assert response.status_code == 200
        return [e.actor for e in response.context["events"]]

    assert actors("actor=user:alice") == ["user:alice", "user:alice"]
    assert actors("actor=key:*") == ["key:ci"]
    assert (actors("action=fork.created") == ["user:alice", "key:ci"]
            or actors("action=fork.created") == ["key:ci", "user:alice"])
    assert sorted(actors("action=prune.")) == ["user:alice", "user:old"]
    today = timezone.now().date()
    assert actors(f"since={today - timedelta(days=2)}&until={today - timedelta(days=1)}") in (
        ["user:alice", "key:ci"], ["key:ci", "user:alice"])
    assert actors(f"until={today - timedelta(days=5)}") == ["user:old"]


@pytest.mark.parametrize("query", ["since=yesterday", "until=2026-13-01", "since=2026-1-1"])
def test_it_rejects_bad_dates(client, admin, query):
    assert client.get(f"/admin/audit/?{query}").status_code == 422
    assert client.get(f"/admin/audit/export.jsonl?{query}").status_code == 422


def test_it_pages_with_a_keyset_cursor(client, admin, monkeypatch):
    monkeypatch.setattr(views, "AUDIT_PAGE", 3)
    same_time = timezone.now()
    for i in range(7):
        AuditEvent.objects.create(at=same_time, actor="user:a", action=f"a.{i}")
    seen, url = [], "/admin/audit/"
    while url:
        response = client.get(url)
        seen += [e.action for e in response.context["events"]]
        url = response.context["next_url"]
    assert sorted(seen) == [f"a.{i}" for i in range(7)] and len(seen) == 7
    assert client.get("/admin/audit/?after=garbage!!").status_code == 400


def test_the_next_page_comes_as_rows_for_htmx(client, admin, monkeypatch):
    monkeypatch.setattr(views, "AUDIT_PAGE", 2)
    for i in range(3):
        event(action=f"a.{i}")
    first = client.get("/admin/audit/")
    response = client.get(first.context["next_url"], HTTP_HX_REQUEST="true", HTTP_HX_TARGET="audit-more")
    html = response.content.decode()
    assert "<tr>" in html and "<html" not in html and "a.0" in html


def test_it_exports_jsonl_with_the_same_filters(client, admin):
    event(actor="user:a", action="fork.created", count=3)
    event(actor="user:b", action="fork.created")
    event(actor="user:a", action="checkpoint.created")
    response = client.get("/admin/audit/export.jsonl?actor=user:a")
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response["Content-Disposition"].startswith("attachment;")
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [(line["actor"], line["action"]) for line in lines] == [
        ("user:a", "fork.created"), ("user:a", "checkpoint.created")]
    assert lines[0]["detail"] == {"count": 3} and set(lines[0]) == {
        "id", "at", "actor", "action", "target_type", "target_id", "detail"}


def test_audit_events_cannot_be_changed_or_removed():
    e = event()
    table = AuditEvent._meta.db_table
    for sql in (f"UPDATE {table} SET actor = 'x' WHERE id = %s", f"DELETE FROM {table} WHERE id = %s"):
        with pytest.raises((IntegrityError, DatabaseError)):
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(sql, [e.pk])
    assert AuditEvent.objects.get(pk=e.pk).actor == "user:a"


def test_every_kind_of_target_links_to_its_page(client, admin):
    from conversations.facts import store as facts
    from conversations.retention import erasure
    from conversations.retention.pruning import prune_older_than
    from tests.retention_support import conversation

    kept = store.create_conversation(title="kept")
    store.append_message(conversation_id=kept.pk, message={"kind": "user", "content": "hi"})
    store.checkpoint_at(conversation_id=kept.pk, position=0, summary="s", actor="user:boss")
    fact = facts.propose_fact(subject="cust:1", text="likes tea", importance=3, created_by="key:a")
    facts.approve_fact(fact_id=fact.pk, actor="user:boss")
    key, _ = api_keys.create_api_key(name="bot", scopes=["read"], created_by="user:boss")
    conversation(messages=1, age_days=100)
    run = prune_older_than(days=90, actor="user:boss")
    doomed = store.create_conversation(title="doomed")
    receipt = erasure.delete_one_conversation(conversation_id=doomed.pk, actor="user:boss")
    html = client.get("/admin/audit/").content.decode()
    assert f'href="/conversations/{kept.pk}/"><code>{kept.pk}</code></a>' in html
    assert f'href="/facts/{fact.pk}/"><code>{fact.pk}</code></a>' in html
    assert f'href="/keys/#key-{key.pk}"><code>{key.pk}</code></a>' in html
    assert f'href="/admin/prune/runs/{run.run_id}/"><code>{run.run_id}</code></a>' in html
    # The deletion, the final chain heads it wrote first, and its receipt all lead to the receipt.
    assert html.count(f'href="/admin/receipts/{receipt.pk}/"') == 3
    # The actor leads to everything that actor did.
    assert 'href="?actor=user%3Aboss"' in html


def test_a_target_that_is_gone_is_named_not_linked(client, admin):
    store.record_audit(actor="system", action="prune.finished", target_type="prune_run", target_id="7")
    store.record_audit(actor="user:x", action="conversation.exported", target_type="conversation",
                       target_id="0b6f0c1e-8d7a-4a53-9a57-4f1c1d0b2e11")
    store.record_audit(actor="user:x", action="fact.approved", target_type="fact", target_id="not-a-number")
    html = client.get("/admin/audit/").content.decode()
    assert "/admin/prune/runs/7/" not in html and "/conversations/0b6f0c1e" not in html
    assert html.count('<span class="muted gone">(gone)</span>') == 3
