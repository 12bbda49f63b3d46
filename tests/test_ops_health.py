"""/healthz and /readyz in the process: JSON, no login, nothing stored in the answer, and
each of /readyz's checks failing on its own (tests/test_ops_outage.py stops the database
under a running server)."""

import json
import uuid
from datetime import timedelta

import pytest
from django.db.utils import OperationalError
from django.utils import timezone

from conversations.retention import erasure_journal, lease
from conversations.retention.models import DeletionReceipt, MaintenanceLease
from memoryui import health
from tests.retention_support import conversation

pytestmark = pytest.mark.django_db


def test_it_answers_healthz_without_a_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-store" in response["Cache-Control"]


def test_it_is_ready_with_the_database_migrated_and_no_lease(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ready",
                               "checks": {"database": "ok", "migrations": "ok", "erasures": "ok",
                                          "maintenance": "ok"}}
    assert "no-store" in response["Cache-Control"]


def test_it_says_nothing_of_what_is_stored(client):
    conversation(title="Secret title", subject="customer:hidden@example.com", messages=2)
    body = client.get("/readyz").content + client.get("/healthz").content
    assert b"hidden@example.com" not in body and b"Secret title" not in body


def test_it_is_ready_while_a_live_maintenance_run_holds_the_lease(client):
    held = lease.acquire(kind="prune", actor="test")
    try:
        assert client.get("/readyz").status_code == 200
    finally:
        lease.release(held)


def test_it_is_not_ready_while_a_dead_run_holds_the_lease(client):
    lease.acquire(kind="prune", actor="a prune that crashed")
    # Its heartbeat stopped long ago (the store has no door for the past: set here).
    MaintenanceLease.objects.update(heartbeat_at=timezone.now() - lease.STALE_AFTER - timedelta(minutes=1))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["maintenance"] == "stuck"
    assert b"a prune that crashed" not in response.content


def test_it_is_not_ready_while_the_erasure_journal_holds_an_erasure_the_database_does_not_show(client, journal_file):
    # As after restoring a backup older than a deletion request: the journal has it, the database not
    # (tests/test_erasure_journal.py and tests/test_ops_restore_erasures.py go through all of it).
    receipt = DeletionReceipt(id=uuid.uuid4(), project_id=1, actor="user:boss", kind="subject", counts={},
                              created_at=timezone.now(), conversation_ids=[], filed_verification={"status": "verified"})
    erasure_journal.record_erasure(receipt, subject="customer:hidden@example.com")
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["erasures"] == "not_reapplied"
    assert b"hidden" not in response.content and str(receipt.pk).encode() not in response.content
    receipt.save(force_insert=True)
    assert client.get("/readyz").status_code == 200


def test_it_is_not_ready_with_a_migration_unapplied(client, monkeypatch):
    class Pending:
        def __init__(self, connection):
            self.loader = type("L", (), {"graph": type("G", (), {"leaf_nodes": lambda self: []})()})()

        def migration_plan(self, targets):
            return [("conversations", "9999_not_applied")]

    monkeypatch.setattr(health, "_migrated", False)
    monkeypatch.setattr(health, "MigrationExecutor", Pending)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["migrations"] == "pending"


def test_it_is_not_ready_when_the_database_does_not_answer(client, monkeypatch):
    class Down:
        def cursor(self):
            raise OperationalError("could not connect to server")

        def close(self):
            pass

    monkeypatch.setattr(health, "connection", Down())
    response = client.get("/readyz")
    assert response.status_code == 503
    assert json.loads(response.content) == {
        "status": "not_ready", "checks": {"database": "unavailable", "migrations": "unknown",
                                          "erasures": "unknown", "maintenance": "unknown"}}


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_it_rejects_other_methods(client, method):
    assert getattr(client, method)("/readyz").status_code == 405
