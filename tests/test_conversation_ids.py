"""New conversations get ids that start with the time (UUID version 7): their rows go to
the right edge of the message table's key order, not into the middle of older ones."""

import time
import uuid

import pytest
from django.db import connection

from conversations import store
from conversations.models import new_conversation_id


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _next_millisecond():
    """Ids made in one millisecond order at random: wait for the next (at most one away)."""
    started = _now_ms()
    while _now_ms() == started:
        pass


def test_ids_are_version_7_unique_and_carry_the_time():
    before = _now_ms()
    ids = [new_conversation_id() for _ in range(2000)]
    after = _now_ms()
    assert len(set(ids)) == len(ids)
    assert all(i.version == 7 and i.variant == uuid.RFC_4122 for i in ids)
    assert all(before <= i.int >> 80 <= after for i in ids)


@pytest.mark.django_db
def test_a_newer_conversation_and_its_rows_sort_after_an_older_ones():
    older = store.create_conversation(title="older")
    _next_millisecond()
    newer = store.create_conversation(title="newer")
    for c in (newer, older):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "hello"})
    _next_millisecond()
    fork = store.fork_conversation(conversation_id=older.pk, position=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT conversation_id FROM conversations_message ORDER BY conversation_id, position")
        order = [uuid.UUID(str(cid)) for (cid,) in cursor.fetchall()]
    assert order == [older.pk, newer.pk, fork.pk]
