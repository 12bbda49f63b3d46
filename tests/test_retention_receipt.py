"""Retention counts from receipt (docs/DESIGN.md, invariant 14): an archive imported today with last
year's dates is kept for the whole period; the import doors say which conversations are
older than the policy by their own dates, and pin them on request."""

import importlib
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conversations import store
from conversations.demo import load_demo
from conversations.imports import importer
from conversations.models import AuditEvent, Conversation
from conversations.retention import pruning
from tests.api_support import Api, error_of, login_as, make_key
from tests.retention_support import age, conversation

pytestmark = pytest.mark.django_db(transaction=True)

SESSION_FILE = Path(__file__).parent / "fixtures" / "formats" / "claude_code_session.jsonl"


def _import_year_old_session(**kw):
    result = importer.import_text(SESSION_FILE.read_text(), format="claude-code", namespace="audit-archive",
                                  actor="user:auditor", **kw)
    ids = [c["id"] for c in result.created]
    assert len(ids) == 3  # the session, its rewind (a fork) and its subagent
    return result, ids


def _cutoff():
    return timezone.now() - timedelta(days=pruning.default_retention_days())


def test_it_keeps_a_year_old_imported_session_through_a_default_prune():
    result, ids = _import_year_old_session()
    imported = list(Conversation.objects.filter(pk__in=ids))
    # Not vacuous: by its own dates every conversation is older than the policy...
    assert all(c.last_activity_at < _cutoff() for c in imported)
    assert all(c.last_activity_at.year == 2025 for c in imported)
    # ...but memoryui received it just now, and that is what retention counts from.
    assert all(c.received_at > timezone.now() - timedelta(minutes=5) for c in imported)

    preview = pruning.prune_older_than(days=pruning.default_retention_days(), dry_run=True)
    assert not set(ids) & set(preview.conversation_ids)
    run = pruning.prune_older_than(days=pruning.default_retention_days())
    assert not set(ids) & set(run.conversation_ids)
    assert Conversation.objects.filter(pk__in=ids).count() == 3


def test_the_demo_data_is_pruned_as_before_beside_an_imported_archive():
    load_demo(coding_turns=20)
    demo = set(Conversation.objects.values_list("pk", flat=True))
    # What the 90-day rule took from the demo data before: conversations idle that long (none).
    idle = set(Conversation.objects.filter(last_activity_at__lt=_cutoff(), pinned=False)
               .values_list("pk", flat=True))
    _result, ids = _import_year_old_session()
    stale = conversation(title="received long ago", messages=2, age_days=400)

    preview = pruning.prune_older_than(days=pruning.default_retention_days(), dry_run=True)
    assert {str(i) for i in idle} | {str(stale.pk)} == set(preview.conversation_ids)
    pruning.prune_older_than(days=pruning.default_retention_days())
    assert set(Conversation.objects.values_list("pk", flat=True)) == (demo - idle) | {
        Conversation.objects.get(pk=i).pk for i in ids}


def test_a_conversation_received_before_the_window_is_pruned_whatever_its_own_dates_say():
    received_long_ago = conversation(title="received long ago, dated yesterday", messages=2)
    long_ago = timezone.now() - timedelta(days=120)
    # The store has no door to date a receipt in the past (it is its own clock): set it here.
    Conversation.objects.filter(pk=received_long_ago.pk).update(received_at=long_ago)
    received_now = conversation(title="received now, dated last year", messages=2)
    Conversation.objects.filter(pk=received_now.pk).update(last_activity_at=timezone.now() - timedelta(days=400))

    result = pruning.prune_older_than(days=90)

    assert result.conversation_ids == [str(received_long_ago.pk)]
    assert Conversation.objects.filter(pk=received_now.pk).exists()


def test_every_write_through_the_store_moves_the_receipt_time():
    c = conversation(title="old", messages=2, age_days=200)
    for write in (
        lambda: store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "one more"}),
        lambda: store.append_messages(conversation_id=c.pk, messages=[{"kind": "user", "content": "two"}]),
        lambda: store.checkpoint_at(conversation_id=c.pk, position=1, summary="folded"),
    ):
        age(c, 200)
        write()
        c.refresh_from_db()
        assert c.received_at > timezone.now() - timedelta(minutes=5)
    age(c, 200)
    fork = store.fork_conversation(conversation_id=c.pk, position=1)
    assert fork.received_at > timezone.now() - timedelta(minutes=5)
    assert not pruning.prune_older_than(days=90, dry_run=True).conversation_ids == [str(fork.pk)]


def test_an_import_appended_to_an_old_conversation_moves_its_receipt_time():
    result, ids = _import_year_old_session()
    for cid in ids:
        Conversation.objects.filter(pk=cid).update(received_at=timezone.now() - timedelta(days=200))
    grown = SESSION_FILE.read_text() + json.dumps({
        "parentUuid": None, "isSidechain": False, "type": "user", "uuid": "u-late-1",
        "sessionId": "5f0c7a3e-1b2d-4c8e-9f10-aa11bb22cc33", "timestamp": "2025-11-03T10:00:00.000Z",
        "message": {"role": "user", "content": "one more question, a day later"}}) + "\n"
    more = importer.import_text(grown, format="claude-code", namespace="audit-archive", actor="user:auditor")
    assert more.appended, more.as_dict()
    appended = Conversation.objects.get(pk=more.appended[0]["id"])
    assert appended.received_at > timezone.now() - timedelta(minutes=5)
    assert str(appended.pk) not in pruning.prune_older_than(days=90, dry_run=True).conversation_ids


def test_the_import_result_names_what_is_older_than_the_policy_and_pins_it_on_request():
    preview = importer.import_text(SESSION_FILE.read_text(), format="claude-code", namespace="audit-archive",
                                   actor="user:auditor", dry_run=True)
    assert len(preview.older_than_retention) == 3 and preview.as_dict()["retention_days"] == 90
    assert not Conversation.objects.exists()

    result, ids = _import_year_old_session(pin_older_than_retention=True)
    assert sorted(result.pinned) == sorted(ids)
    assert sorted(c["id"] for c in result.as_dict()["older_than_retention"]) == sorted(ids)
    assert Conversation.objects.filter(pk__in=ids, pinned=True).count() == 3
    assert AuditEvent.objects.filter(action="conversation.pinned", actor="user:auditor").count() == 3
    for cid in ids:
        Conversation.objects.filter(pk=cid).update(received_at=timezone.now() - timedelta(days=400))
    assert pruning.prune_older_than(days=90).conversations == 0  # pinned: never pruned by age


def test_a_recent_transcript_is_not_called_older_than_the_policy():
    now = timezone.now()
    lines = [json.dumps({"kind": "note", "text": f"note {i}", "at": (now - timedelta(days=1)).isoformat()})
             for i in range(2)]
    result = importer.import_text("\n".join(lines) + "\n", format="journal", actor="user:auditor",
                                  pin_older_than_retention=True)
    assert result.created and result.older_than_retention == [] and result.pinned == []
    assert not Conversation.objects.filter(pinned=True).exists()


def test_the_migration_fills_receipt_times_from_the_last_activity_or_the_last_import():
    migration = importlib.import_module("conversations.migrations.0005_conversation_received_at")
    written = conversation(title="written here", messages=1)
    result, ids = _import_year_old_session()
    imported_at = AuditEvent.objects.filter(action="conversation.imported", target_id=ids[0]).latest("at").at
    Conversation.objects.update(received_at=timezone.now() - timedelta(days=9000))  # as if unset

    migration.fill_received_at(Conversation, AuditEvent)

    written.refresh_from_db()
    assert written.received_at == written.last_activity_at
    session = Conversation.objects.get(pk=ids[0])
    assert session.received_at == imported_at and session.last_activity_at.year == 2025


# ---- the doors ---------------------------------------------------------------------------


def test_the_api_answers_what_is_older_and_pins_it_when_asked(client):
    api = Api(client, make_key(["read", "write"], name="archivist"))
    body = {"format": "claude-code", "namespace": "audit-archive", "content": SESSION_FILE.read_text()}
    preview = api.post("/imports", {**body, "dry_run": True})
    assert preview.status_code == 200
    assert len(preview.json()["older_than_retention"]) == 3 and preview.json()["pinned"] == []

    response = api.post("/imports", {**body, "pin_older_than_retention": True})
    assert response.status_code == 201, response.content
    answer = response.json()
    assert len(answer["pinned"]) == 3 and answer["retention_days"] == 90
    assert all(c["last_activity_at"].startswith("2025-") for c in answer["older_than_retention"])
    assert Conversation.objects.filter(pk__in=answer["pinned"], pinned=True).count() == 3
    summary = api.get(f"/conversations/{answer['conversation_id']}").json()
    assert summary["last_activity_at"].startswith("2025-") and summary["received_at"] > "2026"


def test_the_api_refuses_a_pin_choice_that_is_not_a_boolean_or_not_for_a_transcript(client):
    api = Api(client, make_key(["read", "write"], name="archivist"))
    bad = api.post("/imports", {"content": SESSION_FILE.read_text(), "pin_older_than_retention": "yes"})
    assert bad.status_code == 422 and error_of(bad)["field"] == "pin_older_than_retention"
    entries = api.post("/imports", {"entries": [], "external_id": "s-1", "pin_older_than_retention": True})
    assert entries.status_code == 422 and error_of(entries)["field"] == "pin_older_than_retention"
    assert not Conversation.objects.exists()


def test_the_import_page_offers_the_pin_and_pins_on_confirm(client):
    login_as(client, "admin")
    with open(SESSION_FILE, "rb") as f:
        response = client.post("/admin/import/", {"file": f, "format": "auto", "namespace": "audit-archive"})
    html = response.content.decode()
    assert response.status_code == 200 and 'id="older-than-retention"' in html
    assert "3 of these conversations are older, by their own dates, than the 90-day retention policy" in html
    assert 'name="pin_older" value="1"' in html and "Pin these 3 conversations" in html
    token = html.split('name="token" value="')[1].split('"')[0]
    done = client.post("/admin/import/", {"token": token, "confirm": "1", "format": "claude-code",
                                          "namespace": "audit-archive", "pin_older": "1"})
    assert done.status_code == 200 and 'id="pinned-count">Pinned 3<' in done.content.decode()
    assert Conversation.objects.filter(pinned=True).count() == 3


def test_the_import_page_leaves_them_unpinned_without_the_tick(client):
    login_as(client, "admin")
    with open(SESSION_FILE, "rb") as f:
        html = client.post("/admin/import/", {"file": f, "format": "auto", "namespace": "audit-archive"}
                           ).content.decode()
    token = html.split('name="token" value="')[1].split('"')[0]
    done = client.post("/admin/import/", {"token": token, "confirm": "1", "format": "claude-code",
                                          "namespace": "audit-archive"})
    assert "Not pinned" in done.content.decode()
    assert Conversation.objects.count() == 3 and not Conversation.objects.filter(pinned=True).exists()


def test_the_conversation_page_and_the_prune_preview_show_both_dates(client):
    login_as(client, "admin")
    _result, ids = _import_year_old_session()
    page = client.get(f"/conversations/{ids[0]}/").content.decode()
    session = Conversation.objects.get(pk=ids[0])
    assert 'id="received-at"' in page and session.received_at.strftime("%Y-%m-%d") in page
    assert session.last_activity_at.strftime("%Y-%m-%d") == "2025-11-02" and "2025-11-02" in page
    Conversation.objects.filter(pk=ids[0]).update(received_at=timezone.now() - timedelta(days=100))
    preview = client.get("/admin/prune/?older_than_days=90").content.decode()
    assert 'id="preview-conversations">1<' in preview
    assert "<th>Received</th><th>Last activity</th>" in preview
    received = (timezone.now() - timedelta(days=100)).strftime("%Y-%m-%d")
    assert received in preview and "2025-11-02" in preview
