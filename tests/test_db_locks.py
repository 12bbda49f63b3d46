"""conversations/db.py: one helper per lock mechanism, and nothing where the database needs nothing."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from conversations import store
from conversations.db import advisory_lock, busy_timeout
from conversations.facts.models import Fact
from conversations.imports.models import ImportSource, ImportStage
from conversations.models import ApiKey, Conversation
from conversations.retention.models import MaintenanceLease
from conversations.search.models import BorrowedRows

pytestmark = pytest.mark.django_db


def test_it_locks_the_conversation_row_on_postgresql_only():
    conversation = store.create_conversation(title="locked")
    with transaction.atomic(), CaptureQueriesContext(connection) as seen:
        assert store.lock_conversation(conversation.pk).pk == conversation.pk
    assert ("FOR UPDATE" in seen.captured_queries[-1]["sql"]) == (connection.vendor == "postgresql")


@pytest.mark.parametrize("model", [Conversation, ApiKey, Fact, MaintenanceLease, BorrowedRows, ImportSource,
                                   ImportStage])
def test_each_model_read_under_a_lock_has_for_update(model):
    with transaction.atomic(), CaptureQueriesContext(connection) as seen:
        assert list(model.objects.for_update()[:1]) == []
    assert ("FOR UPDATE" in seen.captured_queries[-1]["sql"]) == (connection.vendor == "postgresql")


def _busy_timeout() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        return cursor.fetchone()[0]


def test_busy_timeout_holds_for_the_block_and_is_restored_after_an_error():
    if connection.vendor != "sqlite":
        with busy_timeout(0), connection.cursor() as cursor:  # no PRAGMA is sent to PostgreSQL
            cursor.execute("SELECT 1")
        return
    before = _busy_timeout()
    with busy_timeout(7):
        assert _busy_timeout() == 7
    assert _busy_timeout() == before
    with pytest.raises(RuntimeError), busy_timeout(0):
        raise RuntimeError("the step failed")
    assert _busy_timeout() == before
    with busy_timeout(None):
        assert _busy_timeout() == before


def test_an_advisory_lock_is_taken_in_the_transaction():
    with transaction.atomic(), CaptureQueriesContext(connection) as seen:
        advisory_lock(store.AUDIT_CHAIN_LOCK)
    taken = [q["sql"] for q in seen.captured_queries if "pg_advisory_xact_lock" in q["sql"]]
    assert len(taken) == (1 if connection.vendor == "postgresql" else 0)
