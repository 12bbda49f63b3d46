"""prune_older_than: what goes, what stays, dry runs, interrupted runs, the command."""

import io

import pytest
from django.core.management import call_command
from django.db import connection

from conversations import deletion, store
from conversations.errors import InvalidInput
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from conversations.retention import pruning
from conversations.retention.models import PruneRun
from tests.retention_support import age, conversation

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_prunes_old_unpinned_conversations_and_keeps_the_rest():
    old = conversation(title="old", messages=4, age_days=120)
    store.checkpoint_at(conversation_id=old.pk, position=1, summary="folded")
    age(old, 120)
    pinned = conversation(title="pinned", messages=2, age_days=400, pinned=True)
    fresh = conversation(title="fresh", messages=2, age_days=10)

    result = pruning.prune_older_than(days=90)

    assert (result.conversations, result.messages, result.checkpoints) == (1, 4, 1)
    assert result.conversation_ids == [str(old.pk)]
    assert not Conversation.objects.filter(pk=old.pk).exists()
    assert not Message.objects.filter(conversation_id=old.pk).exists()
    assert not Checkpoint.objects.filter(conversation_id=old.pk).exists()
    assert set(Conversation.objects.values_list("pk", flat=True)) == {pinned.pk, fresh.pk}
    assert Message.objects.filter(conversation_id=pinned.pk).count() == 2
    assert result.bytes_before > 0 and result.bytes_after > 0
    run = PruneRun.objects.get(pk=result.run_id)
    assert run.status == PruneRun.FINISHED and run.conversations == 1 and run.bytes_after == result.bytes_after


def test_a_dry_run_changes_nothing_and_estimates():
    old = conversation(title="old", messages=5, text="x" * 1000 + " {i}", age_days=100)
    before = AuditEvent.objects.count()

    result = pruning.prune_older_than(days=90, dry_run=True)

    assert result.dry_run and (result.conversations, result.messages) == (1, 5)
    assert result.estimated_bytes >= 5000
    assert result.bytes_after == result.bytes_before
    assert Message.objects.filter(conversation_id=old.pk).count() == 5
    assert not Conversation.objects.filter(deleting=True).exists()
    assert not PruneRun.objects.exists() and AuditEvent.objects.count() == before


def test_forks_of_a_pruned_conversation_stay_whole():
    parent = conversation(title="parent", messages=5, age_days=200)
    child = store.fork_conversation(conversation_id=parent.pk, position=2)
    age(parent, 200)

    pruning.prune_older_than(days=90)

    child = Conversation.objects.get(pk=child.pk)
    assert child.parent_missing
    assert list(Message.objects.of(child.pk).order_by("position").values_list("position", flat=True)) == [0, 1, 2]


def test_facts_whose_source_was_pruned_stay():
    facts_store = pytest.importorskip("conversations.facts.store")
    from conversations.facts.models import Fact

    source = conversation(title="source", subject="cust:1", messages=2, age_days=200)
    fact = facts_store.propose_fact(subject="cust:1", text="prefers email", importance=3, created_by="key:a",
                                    source_conversation_id=source.pk, source_position=1)
    age(source, 200)

    pruning.prune_older_than(days=90)

    assert Fact.objects.filter(pk=fact.pk).exists()
    assert not Conversation.objects.filter(pk=source.pk).exists()


def test_it_records_the_run_in_the_audit_log_without_text():
    conversation(title="secret title", subject="cust:secret", messages=2, age_days=100)
    result = pruning.prune_older_than(days=90, actor="user:root")
    events = list(AuditEvent.objects.filter(target_type="prune_run", target_id=str(result.run_id)))
    # The pruned conversations' final chain heads go into the audit chain before their rows go.
    assert [e.action for e in sorted(events, key=lambda e: e.pk)] == ["prune.started", "conversation.heads",
                                                                      "prune.finished"]
    assert all(e.actor == "user:root" for e in events)
    assert "secret" not in repr([(e.detail, e.target_id) for e in events])
    assert events[-1].detail["conversations"] == 1


def test_it_reports_progress_per_batch():
    conversation(title="a", messages=12, age_days=100)
    calls = []
    pruning.prune_older_than(days=90, batch_size=5, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 13) and calls[-1] == (13, 13)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert len(calls) >= 4


def test_a_prune_killed_halfway_leaves_a_consistent_database_and_the_next_run_finishes(monkeypatch):
    victims = [conversation(title=f"old {i}", messages=20, age_days=100) for i in range(2)]
    survivor = conversation(title="new", messages=3)
    real = deletion.delete_rows
    calls = {"n": 0}

    def dies_after_three_batches(model, *args, **kwargs):
        if model is Message:  # other tables' rows go first; count the message batches
            calls["n"] += 1
            if calls["n"] > 3:
                raise KeyboardInterrupt("killed")
        return real(model, *args, **kwargs)

    monkeypatch.setattr(deletion, "delete_rows", dies_after_three_batches)
    with pytest.raises(KeyboardInterrupt):
        pruning.prune_older_than(days=90, batch_size=5)
    monkeypatch.setattr(deletion, "delete_rows", real)

    # Half done: the victims are hidden, some of their rows are gone, nothing else changed.
    assert Message.objects.filter(conversation_id__in=[v.pk for v in victims]).count() == 40 - 15
    assert not Conversation.objects.live().filter(pk__in=[v.pk for v in victims]).exists()
    assert Conversation.objects.filter(deleting=True).count() == 2
    assert Message.objects.of(survivor.pk).count() == 3 == Conversation.objects.get(pk=survivor.pk).next_position
    run = PruneRun.objects.get()
    assert run.status == PruneRun.FAILED and "killed" in run.error
    assert AuditEvent.objects.filter(action="prune.failed").exists()
    _assert_no_orphans()

    # Nothing is old enough any more at 1000 days, yet the marked ones are finished.
    result = pruning.prune_older_than(days=1000, batch_size=5)
    assert result.resumed == 2 and result.conversations == 2 and result.messages == 25
    assert not Conversation.objects.filter(pk__in=[v.pk for v in victims]).exists()
    assert not Message.objects.filter(conversation_id__in=[v.pk for v in victims]).exists()
    assert Conversation.objects.filter(pk=survivor.pk).exists()
    _assert_no_orphans()


def _assert_no_orphans():
    conversations = set(Conversation.objects.values_list("pk", flat=True))
    assert set(Message.objects.values_list("conversation_id", flat=True)) <= conversations
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            assert cursor.execute("PRAGMA foreign_key_check").fetchall() == []


def test_a_conversation_active_since_the_candidates_were_read_is_spared(monkeypatch):
    c = conversation(title="revived", messages=2, age_days=100)
    real = pruning._mark_victims

    def append_first(ids, cutoff):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "back again"})
        real(ids, cutoff)

    monkeypatch.setattr(pruning, "_mark_victims", append_first)
    result = pruning.prune_older_than(days=90)
    assert result.conversations == 0
    assert Message.objects.of(c.pk).count() == 3


def test_it_refuses_bad_arguments():
    for days in (0, -1, "x", None, 10**9):
        with pytest.raises(InvalidInput):
            pruning.prune_older_than(days=days)
    with pytest.raises(InvalidInput):
        pruning.prune_older_than(days=5, batch_size=0)


def test_the_command_prunes_with_a_progress_bar_on_stderr():
    conversation(title="old", messages=6, age_days=100)
    out, err = io.StringIO(), io.StringIO()
    call_command("prune", "--dry-run", "--older-than-days", "90", stdout=out, stderr=err)
    assert "would prune 1 conversations (6 messages" in out.getvalue()
    assert Conversation.objects.count() == 1

    out, err = io.StringIO(), io.StringIO()
    call_command("prune", "--older-than-days", "90", "--batch-size", "2", "--progress", stdout=out, stderr=err)
    assert "pruned 1 conversations (6 messages" in out.getvalue()
    assert "100.0%" in err.getvalue() and "[####" in err.getvalue()
    assert Conversation.objects.count() == 0


def test_the_command_uses_the_retention_setting(settings):
    settings.MEMORYUI_RETENTION_DAYS = 30
    conversation(title="a month and a bit", messages=1, age_days=40)
    out = io.StringIO()
    call_command("prune", stdout=out, stderr=io.StringIO())
    assert "pruned 1 conversations" in out.getvalue()


def test_the_command_rejects_a_bad_period():
    from django.core.management.base import CommandError

    for bad in ("0", "²", "٣", "99999999999999999999999"):
        with pytest.raises(CommandError, match="older-than-days"):
            call_command("prune", "--older-than-days", bad, stdout=io.StringIO(), stderr=io.StringIO())


def test_a_run_that_never_recorded_its_end_is_marked_by_the_next_run():
    from django.utils import timezone

    stale = PruneRun.objects.create(actor="system", older_than_days=90, cutoff=timezone.now(), batch_size=10)
    conversation(title="old", messages=1, age_days=100)
    result = pruning.prune_older_than(days=90)
    stale.refresh_from_db()
    assert stale.status == PruneRun.FAILED and "interrupted" in stale.error
    assert PruneRun.objects.get(pk=result.run_id).status == PruneRun.FINISHED
