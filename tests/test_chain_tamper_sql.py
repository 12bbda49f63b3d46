"""Attacks on the record with raw SQL after the append-only triggers are dropped:
each is caught by its chain, with the position named; erasure and pruning leave chains that
still verify. The same statements run on SQLite and PostgreSQL (the triggers come back when
each test's transaction rolls back)."""

import pytest
from django.db import connection

from conversations import chain_verify, store
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from conversations.retention import erasure, pruning
from conversations.retention.models import ErasedRow
from tests.retention_support import age, make_user

pytestmark = pytest.mark.django_db

MSG, CKPT, CONV, AUDIT = (m._meta.db_table for m in (Message, Checkpoint, Conversation, AuditEvent))
ERASED = ErasedRow._meta.db_table
TRIGGERS = {
    MSG: ["message_no_update", "message_guard_delete", "message_guard_insert"],
    CKPT: ["checkpoint_no_update", "checkpoint_guard_delete"],
    CONV: ["conversation_position_monotonic"],
    AUDIT: ["auditevent_no_update", "auditevent_no_delete"],
    ERASED: ["erasedrow_no_update", "erasedrow_no_delete"],
}


def sql(statement: str, params=()):
    with connection.cursor() as cursor:
        cursor.execute(statement, list(params))
        return cursor.rowcount


def drop_triggers():
    if connection.vendor == "postgresql":
        sql("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks block the DDL below
    for table, names in TRIGGERS.items():
        for name in names:
            sql(f"DROP TRIGGER {name} ON {table}" if connection.vendor == "postgresql" else f"DROP TRIGGER {name}")


def cid(conversation) -> object:
    return Conversation._meta.pk.get_db_prep_value(conversation.pk, connection)


@pytest.fixture
def conv():
    c = store.create_conversation(title="attacked")
    store.append_messages(conversation_id=c.pk,
                          messages=[{"kind": "user", "content": f"message {i}"} for i in range(6)])
    store.checkpoint_at(conversation_id=c.pk, position=1, summary="first fold")
    store.checkpoint_at(conversation_id=c.pk, position=3, summary="second fold")
    c.refresh_from_db()
    drop_triggers()
    return c


def verdict(c) -> chain_verify.ChainState:
    c.refresh_from_db()
    return chain_verify.verify_conversation(c)


def test_untouched_it_verifies(conv):
    state = verdict(conv)
    assert (state.state, state.messages, state.checkpoints) == ("verified", 6, 2)


def test_an_edited_row_is_caught_at_its_position(conv):
    assert sql(f"UPDATE {MSG} SET content = %s WHERE conversation_id = %s AND position = 4",
               ['{"kind":"user","content":"message 4, edited"}', cid(conv)]) == 1
    state = verdict(conv)
    assert (state.state, state.chain, state.broken_at) == ("tampered", "messages", 4)
    assert "changed" in state.reason


def test_an_edited_time_is_caught(conv):
    sql(f"UPDATE {MSG} SET created_at = %s WHERE conversation_id = %s AND position = 2",
        [connection.ops.adapt_datetimefield_value(Message.objects.get(conversation=conv, position=0).created_at
                                                  .replace(year=2001)), cid(conv)])
    assert (verdict(conv).state, verdict(conv).broken_at) == ("tampered", 2)


def test_a_deleted_row_is_caught(conv):
    assert sql(f"DELETE FROM {MSG} WHERE conversation_id = %s AND position = 2", [cid(conv)]) == 1
    state = verdict(conv)
    assert (state.state, state.broken_at) == ("tampered", 2)
    assert state.reason == "row #2 is missing"


def test_a_deleted_row_with_positions_renumbered_is_caught(conv):
    # Close the gap the way a careful attacker would: every later row moves down by one.
    sql(f"DELETE FROM {MSG} WHERE conversation_id = %s AND position = 2", [cid(conv)])
    for p in (3, 4, 5):
        sql(f"UPDATE {MSG} SET position = position - 1 WHERE conversation_id = %s AND position = %s", [cid(conv), p])
    sql(f"UPDATE {CONV} SET next_position = 5 WHERE id = %s", [cid(conv)])
    state = verdict(conv)
    assert (state.state, state.broken_at) == ("tampered", 2)


def test_two_swapped_rows_are_caught_at_the_first(conv):
    rows = dict(Message.objects.filter(conversation=conv, position__in=[1, 3]).values_list("position", "content"))
    for p, other in ((1, 3), (3, 1)):
        sql(f"UPDATE {MSG} SET content = %s WHERE conversation_id = %s AND position = %s", [rows[other], cid(conv), p])
    state = verdict(conv)
    assert (state.state, state.broken_at) == ("tampered", 1)


def test_two_rows_swapped_whole_with_their_hashes_are_caught(conv):
    # Salt, commitment and chain hash travel with the content: the position inside the payload gives it away.
    cols = "kind, content, created_at, salt, commitment, chain_hash"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT position, {cols} FROM {MSG} WHERE conversation_id = %s AND position IN (1, 3)",
                       [cid(conv)])
        found = {r[0]: r[1:] for r in cursor.fetchall()}
    for p, other in ((1, 3), (3, 1)):
        sql(f"UPDATE {MSG} SET kind = %s, content = %s, created_at = %s, salt = %s, commitment = %s, chain_hash = %s "
            "WHERE conversation_id = %s AND position = %s", [*found[other], cid(conv), p])
    assert (verdict(conv).state, verdict(conv).broken_at) == ("tampered", 1)


def test_a_truncated_tail_is_caught(conv):
    assert sql(f"DELETE FROM {MSG} WHERE conversation_id = %s AND position >= 4", [cid(conv)]) == 2
    state = verdict(conv)
    assert (state.state, state.broken_at) == ("tampered", 4)
    assert "rows from #4 on are missing" in state.reason


def test_a_changed_checkpoint_summary_is_caught_at_its_row(conv):
    second = Checkpoint.objects.filter(conversation=conv).order_by("id").last()
    sql(f"UPDATE {CKPT} SET summary = %s WHERE id = %s", ["a kinder summary", second.pk])
    state = verdict(conv)
    assert (state.state, state.chain, state.broken_at) == ("tampered", "checkpoints", second.pk)


def test_a_deleted_checkpoint_is_caught(conv):
    first = Checkpoint.objects.filter(conversation=conv).order_by("id").first()
    sql(f"DELETE FROM {CKPT} WHERE id = %s", [first.pk])
    state = verdict(conv)
    assert (state.state, state.chain) == ("tampered", "checkpoints")


def test_a_rewritten_audit_event_is_caught_at_its_id(conv):
    event = AuditEvent.objects.filter(action="conversation.checkpointed").order_by("id").first() or \
        store.record_audit(actor="user:a", action="x.y", target_id="1", detail={"n": 1})
    store.record_audit(actor="user:a", action="later", detail={"n": 2})
    assert chain_verify.verify_audit().ok
    sql(f"UPDATE {AUDIT} SET actor = %s WHERE id = %s", ["user:someone-else", event.pk])
    audit = chain_verify.verify_audit()
    assert (audit.ok, audit.broken_at) == (False, event.pk)
    sql(f"UPDATE {AUDIT} SET actor = %s WHERE id = %s", [event.actor, event.pk])
    assert chain_verify.verify_audit().ok
    sql(f"DELETE FROM {AUDIT} WHERE id = %s", [event.pk])
    assert not chain_verify.verify_audit().ok


def test_a_fork_whose_prefix_was_rewritten_is_caught_at_the_fork_point():
    parent = store.create_conversation(title="parent")
    store.append_messages(conversation_id=parent.pk, messages=[{"kind": "user", "content": str(i)} for i in range(4)])
    child = store.fork_conversation(conversation_id=parent.pk, position=2)
    drop_triggers()
    # Re-seal the child's whole prefix with fresh salts: a self-consistent chain, but not the parent's.
    from conversations import chain

    prev = chain.GENESIS
    for row in Message.objects.filter(conversation=child).order_by("position"):
        salt, commitment, prev = chain.seal(prev, chain.message_payload(row.position, row.kind, row.content,
                                                                        row.created_at))
        sql(f"UPDATE {MSG} SET salt = %s, commitment = %s, chain_hash = %s "
            "WHERE conversation_id = %s AND position = %s", [salt, commitment, prev, cid(child), row.position])
    state = verdict(child)
    assert (state.state, state.chain, state.broken_at) == ("tampered", "fork", 2)


def test_erasure_keeps_a_chain_that_verifies_as_erased_with_its_receipt():
    kept = store.create_conversation(title="kept", subject="other")
    store.append_message(conversation_id=kept.pk, message={"kind": "user", "content": "stays"})
    gone = store.create_conversation(title="gone", subject="ann@example.com")
    store.append_messages(conversation_id=gone.pk, messages=[{"kind": "user", "content": f"secret {i}"}
                                                             for i in range(4)])
    store.checkpoint_at(conversation_id=gone.pk, position=2, summary="secret fold")
    heads_before = chain_verify.verify_conversation(Conversation.objects.get(pk=gone.pk))
    receipt = erasure.execute_deletion(subject="ann@example.com", actor="user:boss")
    report = chain_verify.verify_all()
    assert report.ok, report.as_dict()
    [state] = report.erased
    assert (state.conversation_id, state.receipt_id, state.state) == (str(gone.pk), str(receipt.pk), "erased")
    assert state.erased_positions == [0, 1, 2, 3] and state.checkpoints == 1
    assert state.head == heads_before.head
    # Nothing of the content or the salts is kept; the audit chain holds the final head.
    columns = {f.column for f in ErasedRow._meta.concrete_fields}
    assert not columns & {"salt", "content", "summary"}
    heads = AuditEvent.objects.get(action="conversation.heads", target_id=str(receipt.pk)).detail["heads"]
    assert heads == [{"conversation_id": str(gone.pk), "position": 3, "chain_hash": heads_before.head,
                      "checkpoint_chain_hash": heads[0]["checkpoint_chain_hash"]}]
    # A kept commitment edited afterwards is tampering, named at its position.
    drop_triggers()
    sql(f"UPDATE {ERASED} SET commitment = %s WHERE receipt_id = %s AND record_type = 'message' AND position = 2",
        [b"\x00" * 32, ErasedRow._meta.get_field("receipt_id").get_db_prep_value(receipt.pk, connection)])
    [state] = chain_verify.verify_erased()
    assert (state.state, state.broken_at) == ("tampered", 2)


def test_a_pruned_conversations_final_head_goes_into_the_audit_chain_first():
    old = store.create_conversation(title="old")
    store.append_messages(conversation_id=old.pk, messages=[{"kind": "user", "content": "x"}] * 3)
    age(old, 400)
    head = chain_verify.verify_conversation(Conversation.objects.get(pk=old.pk)).head
    result = pruning.prune_older_than(days=30, actor="user:boss")
    assert result.conversations == 1
    event = AuditEvent.objects.get(action="conversation.heads")
    assert event.detail["reason"] == "prune"
    assert event.detail["heads"][0] == {"conversation_id": str(old.pk), "position": 2, "chain_hash": head,
                                        "checkpoint_chain_hash": None}
    finished = AuditEvent.objects.get(action="prune.finished")
    assert event.pk < finished.pk
    assert chain_verify.verify_all().ok


def test_the_verification_page_shows_tampered_and_erased_conversations(client):
    client.force_login(make_user("boss", "admin"))
    fine = store.create_conversation(title="fine")
    store.append_message(conversation_id=fine.pk, message={"kind": "user", "content": "ok"})
    bad = store.create_conversation(title="edited behind our back")
    store.append_messages(conversation_id=bad.pk, messages=[{"kind": "user", "content": str(i)} for i in range(3)])
    gone = store.create_conversation(title="gone", subject="bob")
    store.append_message(conversation_id=gone.pk, message={"kind": "user", "content": "bye"})
    receipt = erasure.execute_deletion(subject="bob", actor="user:boss")
    drop_triggers()
    sql(f"UPDATE {MSG} SET content = %s WHERE conversation_id = %s AND position = 1", ['"1!"', cid(bad)])
    html = client.get("/admin/verification/").content.decode()
    assert "tampering found" in html
    assert "tampered at #1" in html and "edited behind our back" in html
    assert f"{receipt.pk}" in html and "erased, chain verified" in html
    assert html.index("edited behind our back") < html.index(">fine<")
    assert client.get("/admin/verification/").status_code == 200
    client.force_login(make_user("aud", "auditor"))
    assert client.get("/admin/verification/").status_code == 403


def test_ledger_rows_are_chained_copied_into_forks_and_an_edit_is_caught():
    from conversations.ledger import store as ledger
    from conversations.ledger.models import Action, TaskStateEvent

    c = store.create_conversation(title="ledger")
    store.append_messages(conversation_id=c.pk, messages=[{"kind": "user", "content": str(i)} for i in range(3)])
    ledger.set_state(conversation_id=c.pk, state={"step": 1}, expected_version=0)
    ledger.record_action(conversation_id=c.pk, idempotency_key="refund-1", name="refund", arguments={"n": 1},
                         result={"ok": True})
    ledger.record_action(conversation_id=c.pk, idempotency_key="refund-1", name="refund", arguments={"n": 1})
    ledger.record_snapshot(conversation_id=c.pk, position=2, repo="/r", commit="a" * 40)
    ledger.set_state(conversation_id=c.pk, state={"step": 2}, expected_version=1)
    child = store.fork_conversation(conversation_id=c.pk, position=2)
    report = chain_verify.verify_all()
    assert report.ok, report.as_dict()
    states = {s.conversation_id: s for s in report.conversations}
    assert states[str(c.pk)].ledger == 5 and states[str(child.pk)].ledger == 5
    drop_triggers()
    for table in ("ledger_action", "ledger_taskstateevent"):
        for what in ("no_update", "guard_delete"):
            short = "action" if table == "ledger_action" else "taskstate"
            sql(f"DROP TRIGGER ledger_{short}_{what}" + (f" ON {table}" if connection.vendor == "postgresql" else ""))
    retry = Action.objects.filter(conversation_id=c.pk).order_by("id").last()
    sql("UPDATE ledger_action SET result = %s WHERE id = %s", ['{"ok": false}', retry.pk])
    state = verdict(c)
    assert (state.state, state.chain, state.broken_at) == ("tampered", "actions", retry.pk)
    first = TaskStateEvent.objects.filter(conversation_id=child.pk).order_by("id").first()
    sql("DELETE FROM ledger_taskstateevent WHERE id = %s", [first.pk])
    state = verdict(child)
    assert (state.state, state.chain) == ("tampered", "task state")


def test_the_page_walks_a_bounded_part_and_says_what_it_left_to_verify_log(client, monkeypatch):
    from conversations.retention import proof_views

    client.force_login(make_user("boss", "admin"))
    small = store.create_conversation(title="small one")
    store.append_message(conversation_id=small.pk, message={"kind": "user", "content": "x"})
    big = store.create_conversation(title="big one")
    store.append_messages(conversation_id=big.pk, messages=[{"kind": "user", "content": str(i)} for i in range(5)])
    for i in range(4):
        store.record_audit(actor="user:a", action="x.y", detail={"i": i})
    monkeypatch.setattr(proof_views, "PAGE_ROWS", 3)
    monkeypatch.setattr(proof_views, "PAGE_AUDIT_EVENTS", 2)
    response = client.get("/admin/verification/")
    rows = {s["state"].title: s["state"].state for s in response.context["rows"]}
    assert rows == {"small one": "verified", "big one": "unchecked"}
    assert f"manage.py verify_log --conversation {big.pk}" in response.content.decode()
    assert response.context["report"].audit.rows == 2
    # The last events are checked from the chain hash of the one before them.
    drop_triggers()
    last = AuditEvent.objects.order_by("-id").first()
    sql(f"UPDATE {AUDIT} SET detail = %s WHERE id = %s", ['{"i": 99}', last.pk])
    assert client.get("/admin/verification/").context["report"].audit.broken_at == last.pk
