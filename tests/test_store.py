"""The store's behaviour through its own functions (writes) and the two read paths."""

import json
import logging
import uuid

import pytest

from conversations import reads, store
from conversations.errors import (
    CheckpointBeforeLatest,
    Conflict,
    InvalidInput,
    InvalidMessage,
    NotFound,
    PositionOutOfRange,
)
from conversations.models import Checkpoint, Conversation, Message
from tests.retention_support import delete_conversation

pytestmark = pytest.mark.django_db


def note(text):
    return {"kind": "note", "text": text}


@pytest.fixture
def conversation():
    return store.create_conversation(title="Ticket 1", subject="customer:1")


def fill(conversation, n, start=0):
    return [store.append_message(conversation_id=conversation.pk, message=note(f"m{start + i}")) for i in range(n)]


def texts(page):
    return [json.loads(item.raw).get("text") or json.loads(item.raw).get("content") for item in page.items]


def test_it_assigns_positions_from_zero(conversation):
    assert fill(conversation, 5) == [0, 1, 2, 3, 4]
    conversation.refresh_from_db()
    assert conversation.next_position == 5


def test_append_bumps_last_activity(conversation):
    before = conversation.last_activity_at
    fill(conversation, 1)
    conversation.refresh_from_db()
    assert conversation.last_activity_at > before


def test_reads_return_the_stored_bytes(conversation):
    store.append_message(conversation_id=conversation.pk, message='{"text": "caf\\u00e9 ☕", "kind": "note"}')
    stored = Message.objects.get(conversation=conversation).content
    page = reads.list_messages(conversation.pk)
    assert page.items[0].raw == stored == '{"kind":"note","text":"café ☕"}'


def test_expected_position_guards_against_a_concurrent_writer(conversation):
    fill(conversation, 2)
    assert store.append_message(conversation_id=conversation.pk, message=note("x"), expected_position=2) == 2
    with pytest.raises(Conflict) as exc:
        store.append_message(conversation_id=conversation.pk, message=note("y"), expected_position=2)
    assert exc.value.code == "position_conflict"
    conversation.refresh_from_db()
    assert conversation.next_position == 3
    assert Message.objects.filter(conversation=conversation).count() == 3


@pytest.mark.parametrize("bad_id", ["nope", "", "123", "00000000-0000-0000-0000-00000000000g", None,
                                    "0d6b8f0e-2c4a-4e1b-9f3d-7a5c1e8b2d46"])
def test_unknown_or_malformed_ids_are_not_found(bad_id):
    with pytest.raises(NotFound):
        store.append_message(conversation_id=bad_id, message=note("x"))
    with pytest.raises(NotFound):
        reads.list_messages(bad_id)
    with pytest.raises(NotFound):
        store.fork_conversation(conversation_id=bad_id, position=0)
    assert Message.objects.count() == 0


def test_an_invalid_message_writes_nothing(conversation):
    fill(conversation, 1)
    with pytest.raises(InvalidMessage):
        store.append_message(conversation_id=conversation.pk, message={"kind": "note", "text": " "})
    conversation.refresh_from_db()
    assert conversation.next_position == 1
    assert Message.objects.count() == 1


def test_list_pages_by_keyset(conversation):
    fill(conversation, 7)
    first = reads.list_messages(conversation.pk, limit=3)
    assert [i.position for i in first.items] == [0, 1, 2] and first.next_after == 2
    second = reads.list_messages(conversation.pk, after=first.next_after, limit=3)
    assert [i.position for i in second.items] == [3, 4, 5]
    last = reads.list_messages(conversation.pk, after=second.next_after, limit=3)
    assert [i.position for i in last.items] == [6] and last.next_after is None


@pytest.mark.parametrize("after, limit", [(-2, 10), ("1", 10), (0, 0), (0, -5), (True, 3)])
def test_bad_page_arguments_are_rejected(conversation, after, limit):
    with pytest.raises(InvalidInput):
        reads.list_messages(conversation.pk, after=after, limit=limit)


def test_active_view_without_checkpoint_is_everything(conversation):
    fill(conversation, 3)
    view = reads.list_active(conversation.pk)
    assert view.checkpoint is None and view.handoff is None
    assert texts(view.page) == ["m0", "m1", "m2"]


def test_active_view_is_the_summary_then_what_came_after(conversation):
    fill(conversation, 6)
    store.checkpoint_at(conversation_id=conversation.pk, position=3, summary="first four folded")
    view = reads.list_active(conversation.pk)
    assert view.handoff == {"kind": "system", "content": "first four folded", "meta": {"checkpoint": {"position": 3}}}
    assert texts(view.page) == ["m4", "m5"]
    # The full record still has everything: a checkpoint deletes nothing.
    assert texts(reads.list_messages(conversation.pk)) == [f"m{i}" for i in range(6)]


def test_the_latest_checkpoint_wins(conversation):
    fill(conversation, 6)
    store.checkpoint_at(conversation_id=conversation.pk, position=1, summary="early")
    store.checkpoint_at(conversation_id=conversation.pk, position=4, summary="late")
    view = reads.list_active(conversation.pk)
    assert view.checkpoint.summary == "late"
    assert texts(view.page) == ["m5"]


def test_a_checkpoint_may_sit_on_the_latest_fold_but_not_before_it(conversation):
    fill(conversation, 5)
    store.checkpoint_at(conversation_id=conversation.pk, position=3, summary="a")
    store.checkpoint_at(conversation_id=conversation.pk, position=3, summary="b")
    with pytest.raises(CheckpointBeforeLatest) as exc:
        store.checkpoint_at(conversation_id=conversation.pk, position=2, summary="c")
    assert "before the latest checkpoint at position 3" in exc.value.message
    assert Checkpoint.objects.count() == 2


@pytest.mark.parametrize("position", [-1, 5, 99])
def test_checkpoint_positions_must_exist(conversation, position):
    fill(conversation, 5)
    with pytest.raises(PositionOutOfRange) as exc:
        store.checkpoint_at(conversation_id=conversation.pk, position=position, summary="s")
    assert "between 0 and 4" in exc.value.message
    assert Checkpoint.objects.count() == 0


def test_a_checkpoint_needs_a_summary_and_an_integer_position(conversation):
    fill(conversation, 2)
    with pytest.raises(InvalidInput):
        store.checkpoint_at(conversation_id=conversation.pk, position=1, summary="  ")
    with pytest.raises(InvalidInput):
        store.checkpoint_at(conversation_id=conversation.pk, position="1", summary="s")
    assert Checkpoint.objects.count() == 0


def test_checkpoint_on_an_empty_conversation_is_out_of_range(conversation):
    with pytest.raises(PositionOutOfRange) as exc:
        store.checkpoint_at(conversation_id=conversation.pk, position=0, summary="s")
    assert "no messages" in exc.value.message


def test_fork_copies_the_prefix_with_same_bytes_and_times(conversation):
    fill(conversation, 6)
    child = store.fork_conversation(conversation_id=conversation.pk, position=3)
    parent_rows = list(Message.objects.filter(conversation=conversation, position__lte=3)
                       .order_by("position").values_list("position", "kind", "content", "created_at"))
    child_rows = list(Message.objects.filter(conversation=child)
                      .order_by("position").values_list("position", "kind", "content", "created_at"))
    assert child_rows == parent_rows
    assert child.parent_id == conversation.pk and child.forked_from_position == 3
    assert child.subject == conversation.subject
    assert child.title == "Ticket 1 (fork at 3)"
    # The child goes on from position 4; the parent is untouched.
    assert store.append_message(conversation_id=child.pk, message=note("branch")) == 4
    conversation.refresh_from_db()
    assert conversation.next_position == 6


def test_fork_takes_the_latest_checkpoint_at_or_before_the_fork(conversation):
    fill(conversation, 8)
    store.checkpoint_at(conversation_id=conversation.pk, position=2, summary="upto2")
    store.checkpoint_at(conversation_id=conversation.pk, position=4, summary="upto4")
    store.checkpoint_at(conversation_id=conversation.pk, position=6, summary="upto6")
    child = store.fork_conversation(conversation_id=conversation.pk, position=5, title="what if")
    assert list(Checkpoint.objects.filter(conversation=child).values_list("message_position", "summary")) == [
        (4, "upto4")
    ]
    assert child.title == "what if"
    assert texts(reads.list_active(child.pk).page) == ["m5"]


def test_fork_at_any_kind_of_row(conversation):
    store.append_message(conversation_id=conversation.pk, message={"kind": "user", "content": "refund?"})
    store.append_message(conversation_id=conversation.pk, message={
        "kind": "assistant", "tool_calls": [{"id": "c", "name": "refund", "arguments": {}}]})
    store.append_message(conversation_id=conversation.pk,
                         message={"kind": "tool", "tool_call_id": "c", "content": "ok"})
    for position in (1, 2):
        child = store.fork_conversation(conversation_id=conversation.pk, position=position)
        assert child.next_position == position + 1


@pytest.mark.parametrize("position", [-1, 3, 10])
def test_fork_positions_must_exist(conversation, position):
    fill(conversation, 3)
    with pytest.raises(PositionOutOfRange):
        store.fork_conversation(conversation_id=conversation.pk, position=position)
    assert Conversation.objects.count() == 1


def test_a_fork_outlives_its_parent(conversation):
    fill(conversation, 4)
    store.checkpoint_at(conversation_id=conversation.pk, position=1, summary="s")
    child = store.fork_conversation(conversation_id=conversation.pk, position=2)
    receipt = delete_conversation(conversation.pk)
    assert (receipt.counts["messages"], receipt.counts["checkpoints"]) == (4, 1)
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    child.refresh_from_db()
    assert child.parent_missing
    assert texts(reads.list_messages(child.pk)) == ["m0", "m1", "m2"]
    assert reads.list_active(child.pk).checkpoint.summary == "s"


def test_delete_of_an_unknown_conversation_is_not_found():
    with pytest.raises(NotFound):
        delete_conversation(uuid.uuid4())


def test_lineage_walks_to_the_root(conversation):
    fill(conversation, 3)
    a = store.fork_conversation(conversation_id=conversation.pk, position=2)
    b = store.fork_conversation(conversation_id=a.pk, position=1)
    assert [c.pk for c in b.lineage()] == [conversation.pk, a.pk]


def test_a_row_that_no_longer_decodes_is_skipped_and_logged(conversation, caplog):
    fill(conversation, 2)
    insert_raw_row(conversation, '{"kind": "hologram", "text": "from a future version"}')
    fill(conversation, 1, start=3)
    with caplog.at_level(logging.WARNING, logger="memoryui.reads"):
        page = reads.list_messages(conversation.pk)
    assert [i.position for i in page.items] == [0, 1, 3]
    assert page.skipped == [2]
    assert f"conversation {conversation.pk} position 2" in caplog.text
    assert reads.list_active(conversation.pk).page.skipped == [2]
    # The audit UI can ask for the hole too.
    with_holes = reads.list_messages(conversation.pk, include_broken=True)
    assert [(i.position, i.ok) for i in with_holes.items] == [(0, True), (1, True), (2, False), (3, True)]


def insert_raw_row(conversation, content):
    """Write a row the way an older or buggy writer might: valid position, undecodable text."""
    from django.db import connection, transaction
    from django.utils import timezone

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE conversations_conversation SET next_position = next_position + 1 WHERE id = %s "
            "RETURNING next_position",
            [Conversation._meta.pk.get_db_prep_value(conversation.pk, connection)],
        )
        position = cursor.fetchone()[0] - 1
        cursor.execute(
            "INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            [Conversation._meta.pk.get_db_prep_value(conversation.pk, connection), position, "note", content,
             connection.ops.adapt_datetimefield_value(timezone.now())],
        )
    return position


def test_active_before_shows_what_the_model_saw(conversation):
    fill(conversation, 4)  # 0..3
    store.checkpoint_at(conversation_id=conversation.pk, position=2, summary="fold at 2")
    fill(conversation, 3, start=4)  # 4..6
    # Row 3 was written before the checkpoint existed: the model saw 0..2 in full.
    before3 = reads.active_before(conversation.pk, 3)
    assert before3.checkpoint is None and texts(before3.page) == ["m0", "m1", "m2"]
    # Row 6 was written after it: the model saw the summary, then 3..5.
    before6 = reads.active_before(conversation.pk, 6)
    assert before6.checkpoint.summary == "fold at 2" and texts(before6.page) == ["m3", "m4", "m5"]
    with pytest.raises(PositionOutOfRange):
        reads.active_before(conversation.pk, 7)


def test_create_conversation_validates_its_fields():
    with pytest.raises(InvalidInput):
        store.create_conversation(title="x" * 301)
    with pytest.raises(InvalidInput):
        store.create_conversation(subject=5)
    with pytest.raises(InvalidInput):
        store.create_conversation(meta=["not", "an", "object"])
    assert Conversation.objects.count() == 0


def test_pinning_is_recorded(conversation):
    store.set_pinned(conversation_id=conversation.pk, pinned=True)
    conversation.refresh_from_db()
    assert conversation.pinned


def test_a_conversation_being_deleted_is_hidden_and_refuses_appends(conversation):
    fill(conversation, 2)
    Conversation.objects.filter(pk=conversation.pk).update(deleting=True)  # a prune killed halfway
    with pytest.raises(NotFound):
        reads.list_messages(conversation.pk)
    with pytest.raises(NotFound):
        store.append_message(conversation_id=conversation.pk, message=note("late"))


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"title": "a\x00b"}, "title"),
        ({"subject": "x\ud800"}, "subject"),
        ({"meta": {"k": "v\x00"}}, "meta.k"),
        ({"meta": {"k": float("inf")}}, "meta"),
        ({"meta": {"k": object()}}, "meta"),
    ],
)
def test_values_no_database_can_store_are_refused_up_front(kwargs, field):
    with pytest.raises(InvalidInput) as exc:
        store.create_conversation(**kwargs)
    assert exc.value.field == field
    assert Conversation.objects.count() == 0


@pytest.mark.parametrize(
    "message, words",
    [
        ({"kind": "note", "text": "x", "meta": {"score": float("nan")}}, "NaN"),
        ({"kind": "note", "text": "half a pair \ud800"}, "surrogate"),
    ],
)
def test_messages_no_database_can_store_are_refused(conversation, message, words):
    with pytest.raises(InvalidMessage) as exc:
        store.append_message(conversation_id=conversation.pk, message=message)
    assert words in exc.value.message
    assert Message.objects.count() == 0


def test_a_summary_with_nul_is_refused(conversation):
    fill(conversation, 1)
    with pytest.raises(InvalidInput):
        store.checkpoint_at(conversation_id=conversation.pk, position=0, summary="a\x00b")


def test_nul_inside_message_text_is_refused_naming_the_field(conversation):
    # Its JSON could hold it escaped, but the Markdown export, the full-text index and a
    # provider's request body could not: refused like NUL in a title.
    with pytest.raises(InvalidMessage) as exc:
        store.append_message(conversation_id=conversation.pk, message=note("before\x00after"))
    assert exc.value.field == "text" and "NUL" in exc.value.message
    assert Message.objects.count() == 0


def test_a_backslash_typed_before_u0000_is_text_not_nul(conversation):
    store.append_message(conversation_id=conversation.pk, message=note("C:\\u0000 is a path"))
    assert reads.list_messages(conversation.pk).items[0].message.text == "C:\\u0000 is a path"


def test_a_fork_and_a_checkpoint_by_an_actor_are_audited_in_their_transaction(conversation):
    from conversations.models import AuditEvent

    fill(conversation, 3)
    cp = store.checkpoint_at(conversation_id=conversation.pk, position=1, summary="s", actor="user:ann")
    child = store.fork_conversation(conversation_id=conversation.pk, position=2, actor="key:bot")
    assert cp.created_by == "user:ann"
    events = {e.action: e for e in AuditEvent.objects.all()}
    assert events["conversation.checkpointed"].detail == {"checkpoint_id": cp.pk, "position": 1}
    assert events["conversation.forked"].actor == "key:bot"
    assert events["conversation.forked"].detail == {"parent_id": str(conversation.pk), "position": 2, "messages": 3}
    assert events["conversation.forked"].target_id == str(child.pk)
    # Without an actor (the demo, internal callers) nothing is audited.
    store.fork_conversation(conversation_id=conversation.pk, position=0)
    assert AuditEvent.objects.filter(action="conversation.forked").count() == 1


def test_the_append_paths_timestamp_and_id_are_what_django_would_store(conversation):
    import re
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone
    from django.utils.dateparse import parse_datetime

    now = timezone.now()
    fast, django = store._db_now(connection), connection.ops.adapt_datetimefield_value(timezone.now())
    assert type(fast) is type(django)
    if connection.vendor == "sqlite":  # the stored text: naive UTC, Django's own format
        form = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?")
        assert form.fullmatch(fast) and form.fullmatch(django) and parse_datetime(fast).tzinfo is None
        assert abs(parse_datetime(fast) - now.replace(tzinfo=None)) < timedelta(seconds=5)
    for at in (now, now.replace(microsecond=0), now.astimezone(timezone.get_fixed_timezone(-330)),
               now.replace(year=1, month=1, day=1, tzinfo=timezone.get_fixed_timezone(0))):
        assert store.db_datetime(connection, at) == connection.ops.adapt_datetimefield_value(at), at
    assert store.db_id(connection, conversation.pk) == Conversation._meta.pk.get_db_prep_value(conversation.pk,
                                                                                                connection)
    position = store.append_message(conversation_id=conversation.pk, message={"kind": "user", "content": "hi"})
    row = Message.objects.get(conversation_id=conversation.pk, position=position)
    assert abs(row.created_at - now) < timedelta(seconds=5) and row.created_at.tzinfo is not None
