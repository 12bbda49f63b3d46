"""The append path's statements are prepared once per PostgreSQL connection (conversations/rows.py),
and MEMORYUI_PG_PREPARE=0 sends them unprepared, for a pooler that cannot carry prepared statements."""

import pytest
from django.db import connection

from conversations.models import Message
from memoryui import settings as memoryui_settings

pytestmark = [pytest.mark.postgresql_only, pytest.mark.django_db(transaction=True)]

STEP = {"kind": "user", "content": "Where is order 7?"}


def _prepared() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return {row[0] for row in cursor.fetchall()}


def test_a_keyed_append_prepares_its_statements_once_and_reuses_them(writer, convo):
    path = f"/conversations/{convo.pk}/messages"
    assert writer.post(path, STEP, headers={"Idempotency-Key": "one"}).status_code == 201
    first = _prepared()
    joined = "\n".join(first)
    for table in ("conversations_apikey", "conversations_idempotencykey", "conversations_conversation",
                  "conversations_message"):
        assert table in joined, f"no prepared statement reads or writes {table}"

    for n in range(3):
        assert writer.post(path, STEP, headers={"Idempotency-Key": f"again-{n}"}).status_code == 201
    assert _prepared() == first
    assert [m.position for m in Message.objects.of(convo.pk)][-4:] == [4, 5, 6, 7]


def test_prepared_statements_still_serve_after_the_table_is_rewritten(writer, convo):
    # Erasure rewrites tables (pg_repack, or VACUUM FULL): the server replans what it prepared.
    path = f"/conversations/{convo.pk}/messages"
    assert writer.post(path, STEP).status_code == 201
    with connection.cursor() as cursor:
        cursor.execute("VACUUM FULL conversations_message")
        cursor.execute("VACUUM FULL conversations_conversation")
    answer = writer.post(path, STEP)
    assert answer.status_code == 201 and answer.json()["position"] == 5


def test_with_prepare_off_nothing_is_prepared_and_appends_still_work(writer, convo, monkeypatch):
    monkeypatch.setenv("MEMORYUI_PG_PREPARE", "0")
    monkeypatch.setenv("DATABASE_URL", "postgres:///anything")
    assert memoryui_settings._database()["OPTIONS"]["prepare_threshold"] is None
    monkeypatch.delenv("MEMORYUI_PG_PREPARE")
    assert memoryui_settings._database()["OPTIONS"]["prepare_threshold"] == 0

    # A connection opened with the threshold that setting gives.
    connection.close()
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "prepare_threshold", None)
    path = f"/conversations/{convo.pk}/messages"
    for n in range(3):
        assert writer.post(path, STEP, headers={"Idempotency-Key": f"off-{n}"}).status_code == 201
    assert _prepared() == set()
    assert Message.objects.of(convo.pk).count() == 7
    connection.close()  # the next test's connection prepares again
