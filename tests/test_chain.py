"""The record's hash chains (conversations/chain.py, chain_verify.py): the canonical encoding as the
README documents it, every write door sealing its rows in the write transaction, forks
carrying the parent's chain hash, and `manage.py verify_log` in words and JSON."""

import hashlib
import json
import struct
import threading
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.apps import apps as global_apps
from django.core.management import call_command
from django.db import connection, connections, transaction

from conversations import chain, chain_verify, store
from conversations.formats.base import Row
from conversations.imports import store as import_store
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from tests.helpers import wait_until

T = datetime(2026, 3, 4, 5, 6, 7, 890, tzinfo=UTC)


def field(text: str) -> bytes:
    data = text.encode()
    return b"\x01" + struct.pack(">I", len(data)) + data


def test_the_message_payload_is_the_documented_bytes():
    # Written out from the README's description, not from the module.
    expected = (b"memoryui-chain-v1\x00message\x00" + field("7") + field("user")
                + field('{"kind":"user","content":"caf\u00e9"}') + field("2026-03-04T05:06:07.000890Z"))
    content = '{"kind":"user","content":"caf\u00e9"}'
    assert chain.message_payload(7, "user", content, T) == expected
    assert chain.payload("message", {"position": 7, "kind": "user", "content": content, "created_at": T}) == expected


def test_nulls_json_and_commitments_follow_the_definition():
    body = chain.payload("audit", [T, "user:a", "x.y", "", "7", {"b": [1, "é"], "a": None}])
    assert body.endswith(field('{"a":null,"b":[1,"é"]}'))
    assert chain.payload("action", [0, "", "k", "n", "{}", "{}", "performed", None, "", T]).count(b"\x00\x01") >= 1
    salt = bytes(range(16))
    assert chain.commitment(salt, body) == hashlib.sha256(salt + body).digest()
    c = chain.commitment(salt, body)
    assert chain.link(chain.GENESIS, c) == hashlib.sha256(bytes(32) + c).digest()


def test_an_erased_low_entropy_value_cannot_be_guessed_from_its_commitment():
    body = chain.message_payload(0, "user", '{"kind":"user","content":"ann@example.com"}', T)
    salt, commitment, _ = chain.seal(chain.GENESIS, body)
    # Whoever guesses the content exactly still needs the erased 128-bit salt.
    assert chain.commitment(chain.new_salt(), body) != commitment
    assert hashlib.sha256(body).digest() != commitment
    assert len(salt) == chain.SALT_BYTES


def _rows(n):
    prev, rows = chain.GENESIS, []
    for i in range(n):
        body = chain.message_payload(i, "user", f'"{i}"', T)
        salt, c, prev = chain.seal(prev, body)
        rows.append((i, "message", salt, c, prev, body))
    return rows


def test_verify_rows_names_the_first_break():
    rows = _rows(5)
    assert chain.verify_rows(rows, expected_rows=5).ok
    edited = list(rows)
    edited[2] = (*rows[2][:5], chain.message_payload(2, "user", '"changed"', T))
    assert (chain.verify_rows(edited).broken_at, "changed") == (2, "changed")
    assert chain.verify_rows(rows[:2] + rows[3:]).broken_at == 2
    assert chain.verify_rows(rows[:3], expected_rows=5).broken_at == 3
    erased = [(p, k, None, c, h, None) if p in (1, 2) else (p, k, s, c, h, b) for p, k, s, c, h, b in rows]
    verdict = chain.verify_rows(erased, expected_rows=5)
    assert verdict.ok and verdict.erased == [1, 2] and verdict.head == rows[-1][4]


def _stored(cid):
    return list(Message.objects.filter(conversation_id=cid).order_by("position")
                .values_list("position", "salt", "commitment", "chain_hash"))


@pytest.mark.django_db
def test_every_write_door_seals_its_rows_and_the_whole_record_verifies():
    conv = store.create_conversation(title="doors")
    store.append_message(conversation_id=conv.pk, message={"kind": "user", "content": "hello"})
    store.append_messages(conversation_id=conv.pk, messages=[{"kind": "assistant", "content": "hi"},
                                                             {"kind": "note", "text": "n"}])
    store.checkpoint_at(conversation_id=conv.pk, position=1, summary="greeted", actor="user:a")
    imported = import_store.create_imported_conversation(title="imported", created_at=T)
    end = import_store.append_imported(conversation_id=imported.pk, expected_position=0,
                                       rows=[Row(kind="user", text='{"kind":"user","content":"old"}', at=T),
                                             Row(kind="note", text='{"kind":"note","text":"x"}', at=None)])
    import_store.checkpoint_imported(conversation_id=imported.pk, position=end - 1, summary="s", created_at=T,
                                     exact=True)
    rows = _stored(conv.pk)
    assert [r[0] for r in rows] == [0, 1, 2]
    assert all(len(bytes(s)) == 16 and len(bytes(c)) == 32 and len(bytes(h)) == 32 for _p, s, c, h in rows)
    assert len({bytes(s) for _p, s, _c, _h in rows}) == 3
    report = chain_verify.verify_all()
    assert report.ok, report.as_dict()
    states = {s.conversation_id: s for s in report.conversations}
    assert states[str(conv.pk)].messages == 3 and states[str(conv.pk)].checkpoints == 1
    assert states[str(conv.pk)].head == bytes(rows[-1][3]).hex()
    assert states[str(imported.pk)].messages == 2 and states[str(imported.pk)].checkpoints == 1
    assert report.audit.rows == AuditEvent.objects.count() >= 1


@pytest.mark.django_db
def test_a_fork_records_and_carries_the_parents_chain_hash_at_the_fork_position():
    parent = store.create_conversation(title="parent")
    store.append_messages(conversation_id=parent.pk, messages=[{"kind": "user", "content": str(i)} for i in range(5)])
    store.checkpoint_at(conversation_id=parent.pk, position=1, summary="fold")
    child = store.fork_conversation(conversation_id=parent.pk, position=2, actor="user:a")
    store.append_message(conversation_id=child.pk, message={"kind": "user", "content": "branch"})
    parent_rows, child_rows = _stored(parent.pk), _stored(child.pk)
    child.refresh_from_db()
    assert bytes(child.forked_from_chain_hash) == bytes(parent_rows[2][3])
    assert child_rows[:3] == parent_rows[:3]
    assert bytes(child_rows[3][3]) != bytes(parent_rows[3][3])
    report = chain_verify.verify_all()
    assert report.ok, report.as_dict()
    assert {s.conversation_id: s.checkpoints for s in report.conversations}[str(child.pk)] == 1


@pytest.mark.django_db
def test_the_appended_chain_continues_from_the_stored_previous_hash():
    conv = store.create_conversation()
    for i in range(3):
        store.append_message(conversation_id=conv.pk, message={"kind": "user", "content": str(i)})
    rows = Message.objects.filter(conversation_id=conv.pk).order_by("position")
    prev = chain.GENESIS
    for row in rows:
        body = chain.message_payload(row.position, row.kind, row.content, row.created_at)
        assert chain.commitment(bytes(row.salt), body) == bytes(row.commitment)
        assert chain.link(prev, bytes(row.commitment)) == bytes(row.chain_hash)
        prev = bytes(row.chain_hash)


@pytest.mark.django_db
def test_verify_log_reports_in_words_and_json(capsys):
    conv = store.create_conversation(title="checked")
    store.append_message(conversation_id=conv.pk, message={"kind": "user", "content": "x"})
    call_command("verify_log")
    words = capsys.readouterr().out
    assert "1 conversations (1 verified, 0 with erased rows, 0 tampered), 1 rows" in words
    assert "audit log verified" in words
    call_command("verify_log", "--json", "--conversation", str(conv.pk))
    document = json.loads(capsys.readouterr().out)
    assert document["ok"] is True
    assert document["conversations"][0]["head"] == bytes(_stored(conv.pk)[0][3]).hex()
    assert document["conversations"][0]["state"] == "verified"


@pytest.mark.django_db
def test_verify_log_exits_1_and_names_the_position_when_a_row_was_forged(capsys):
    conv = store.create_conversation(title="forged")
    store.append_messages(conversation_id=conv.pk, messages=[{"kind": "user", "content": str(i)} for i in range(3)])
    # A row written around the store, with a chain of its own making (no trigger is dropped: the
    # insert guard lets a handed-out position through once the counter is bumped).
    Conversation.objects.filter(pk=conv.pk).update(next_position=4)
    salt, commitment, chain_hash = chain.seal(chain.GENESIS, chain.message_payload(3, "user", '"x"', T))
    Message.objects.create(conversation=conv, position=3, kind="user", content='"x"', created_at=T, salt=salt,
                           commitment=commitment, chain_hash=chain_hash)
    with pytest.raises(SystemExit) as exit_:
        call_command("verify_log")
    assert exit_.value.code == 1
    assert f"TAMPERED  {conv.pk}  tampered at #3 (messages): the chain breaks at #3" in capsys.readouterr().out


@pytest.mark.django_db
def test_rows_written_before_the_chain_are_sealed_by_the_migration():
    migration = __import__("conversations.migrations.0006_record_chain", fromlist=["chain_existing_rows"])
    conv = store.create_conversation()
    store.append_messages(conversation_id=conv.pk, messages=[{"kind": "user", "content": "a"},
                                                             {"kind": "user", "content": "b"}])
    store.checkpoint_at(conversation_id=conv.pk, position=0, summary="s")
    table = Message._meta.db_table
    editor = SimpleNamespace(connection=connection)  # all the migration's functions use of it
    if connection.vendor == "postgresql":  # the rows above were inserted in this same transaction
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    migration._triggers(editor, enable=False)
    with connection.cursor() as cursor:
        for t in (table, Checkpoint._meta.db_table, AuditEvent._meta.db_table):
            cursor.execute(f"UPDATE {t} SET salt = NULL, commitment = NULL, chain_hash = NULL")
    migration._triggers(editor, enable=True)
    assert not chain_verify.verify_all().ok
    migration.chain_existing_rows(global_apps, editor)
    assert chain_verify.verify_all().ok
    with pytest.raises(Exception, match="append-only"):
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET salt = NULL")


@pytest.mark.postgresql_only
def test_an_append_that_waited_for_another_writer_chains_after_its_row(transactional_db):
    # The UPDATE reserving the position waits for the conversation's row lock; the previous chain
    # hash it returns (memoryui_chain_hash(), migration 0008) is read after that wait, so it is the
    # hash of the row the other writer committed meanwhile, not of what its snapshot held.
    conv = store.create_conversation()
    store.append_message(conversation_id=conv.pk, message={"kind": "user", "content": "first"})
    waited = {}

    def waiter():
        try:
            waited["position"] = store.append_message(conversation_id=conv.pk,
                                                      message={"kind": "user", "content": "waiter"})
        finally:
            connections.close_all()

    thread = threading.Thread(target=waiter)
    with transaction.atomic():
        store.append_message(conversation_id=conv.pk, message={"kind": "user", "content": "holder"})
        thread.start()

        def blocked():
            with connection.cursor() as cursor:  # pg_locks is read live, not from a snapshot
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                return cursor.fetchone()[0] > 0

        wait_until(blocked, timeout=30, message="the second writer never waited for the row lock")
    thread.join(timeout=30)
    assert not thread.is_alive() and waited.get("position") == 2
    state = chain_verify.verify_conversation(Conversation.objects.get(pk=conv.pk))
    assert (state.state, state.messages) == ("verified", 3), state
