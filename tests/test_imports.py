"""Importing through the store: idempotent, incremental, one conversation at a time, guarded."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations import store
from conversations.errors import StoreError
from conversations.imports import entry_appends, entry_streams, importer
from conversations.imports.models import ImportSource, SourceEntry
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from tests.retention_support import delete_conversation, delete_conversations

pytestmark = pytest.mark.django_db
FIX = Path(__file__).parent / "fixtures" / "formats"
SESSION = "5f0c7a3e-1b2d-4c8e-9f10-aa11bb22cc33"


def texts(conversation):
    return [json.loads(c) for c in Message.objects.filter(conversation=conversation).order_by("position")
            .values_list("content", flat=True)]


def lines_of(name):
    return (FIX / name).read_text().splitlines(keepends=True)


@pytest.fixture
def imported():
    return importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj")


def test_it_imports_a_claude_code_session_with_its_fork_subagent_and_checkpoint(imported):
    main = Conversation.objects.get(namespace="proj", external_id=SESSION)
    # msg_01A's four lines (thinking, text, two calls) are a thought and one reply row.
    assert main.title == "Coupons crash checkout" and main.next_position == 10
    assert [m["kind"] for m in texts(main)][:5] == ["user", "thought", "assistant", "tool", "tool"]
    assert [c["id"] for c in texts(main)[2]["tool_calls"]] == ["toolu_1", "toolu_2"]
    cp = Checkpoint.objects.get(conversation=main)
    assert cp.message_position == 7 and cp.created_by == "claude-code"
    assert cp.created_at.isoformat().startswith("2025-11-02T09:10:00.100")
    fork = Conversation.objects.get(parent_id=main.pk)
    assert (fork.parent_relation, fork.forked_from_position, fork.next_position) == ("fork", 5, 10)
    # The fork holds the shared prefix (same bytes, same times) and its own branch.
    assert texts(fork)[:6] == texts(main)[:6]
    # The branch is as old as its first own row, and was last active at its last one.
    assert fork.created_at.isoformat().startswith("2025-11-02T09:01:00")
    assert fork.last_activity_at.isoformat().startswith("2025-11-02T09:01:08")
    agent = Conversation.objects.get(parent_id=fork.pk)
    assert (agent.parent_relation, agent.forked_from_position) == ("subagent", 8)
    # Rows keep the transcript's own times.
    first = Message.objects.get(conversation=main, position=0)
    assert first.created_at.isoformat().startswith("2025-11-02T09:00:00")
    assert AuditEvent.objects.filter(action="conversation.imported").count() == 3


def test_importing_the_same_file_again_creates_nothing(imported):
    counts = (Conversation.objects.count(), Message.objects.count(), SourceEntry.objects.count())
    again = importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj")
    assert again.unchanged and not again.created
    assert (Conversation.objects.count(), Message.objects.count(), SourceEntry.objects.count()) == counts


def test_a_grown_session_file_appends_only_the_new_entries():
    lines = lines_of("claude_code_session.jsonl")
    importer.import_text("".join(lines[:9]), namespace="proj")
    main = Conversation.objects.get(namespace="proj", external_id=SESSION)
    assert main.next_position == 6
    result = importer.import_text("".join(lines), namespace="proj")
    main.refresh_from_db()
    assert [a["key"] for a in result.appended] == ["main"]
    # Later lines continue the first branch; the rewind that comes after it is a fork the session follows.
    assert SourceEntry.objects.count() == len(lines)
    assert [e.seq for e in SourceEntry.objects.order_by("seq")] == list(range(len(lines)))
    assert Conversation.objects.filter(parent_relation="fork").count() == 1
    assert Conversation.objects.filter(parent_relation="subagent").count() == 1
    assert Checkpoint.objects.count() == 1
    fork = Conversation.objects.get(parent_relation="fork")  # the branch began at its prompt, 09:02
    assert fork.created_at.isoformat().startswith("2025-11-02T09:02:00")
    assert fork.last_activity_at.isoformat().startswith("2025-11-02T09:11:05")


def test_a_dry_run_writes_nothing():
    result = importer.import_text((FIX / "claude_code_session.jsonl").read_text(), dry_run=True)
    assert result.dry_run and len(result.created) == 3 and result.messages == 16
    assert not Conversation.objects.exists() and not ImportSource.objects.exists()


@pytest.mark.parametrize("name,kinds", [
    ("codex_rollout.jsonl", ["user", "user", "thought", "assistant", "tool", "assistant", "user", "assistant"]),
    ("openai_chat.json", ["system", "user", "assistant", "tool", "tool", "assistant"]),
    ("openai_responses.json", ["user", "thought", "assistant", "tool", "assistant", "tool"]),
    ("anthropic_request.json", ["system", "user", "thought", "assistant", "tool", "user", "assistant"]),
    ("journal.jsonl", ["woke", "heard", "thought", "did", "said", "note"]),
])
def test_it_imports_every_format_once(name, kinds):
    data = (FIX / name).read_text()
    result = importer.import_text(data)
    conversation = Conversation.objects.get(pk=result.conversation_id)
    assert [m["kind"] for m in texts(conversation)] == kinds
    assert importer.import_text(data).unchanged
    assert Conversation.objects.count() == 1


def test_a_codex_child_whose_parent_is_imported_gets_lineage_and_skips_the_replayed_lines():
    importer.import_text((FIX / "codex_rollout.jsonl").read_text())
    importer.import_text((FIX / "codex_child.jsonl").read_text())
    parent = Conversation.objects.get(external_id="0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
    child = Conversation.objects.get(external_id="0199a1b2-c3d4-7e5f-8a9b-ffffffff0001")
    assert (child.parent_id, child.parent_relation, child.forked_from_position) == (parent.pk, "subagent", 5)
    assert [m.get("content") for m in texts(child)] == ["Write the changelog entry.",
                                                        "Changelog: coupons now raise CouponExpired."]


def test_bad_lines_are_reported_with_line_numbers_and_the_rest_is_imported():
    text = (FIX / "claude_code_session.jsonl").read_text() + "{not json\n" + '{"type": "user", "uuid": "x'
    result = importer.import_text(text)
    assert {p.line for p in result.problems} == {25, 26}
    assert Conversation.objects.get(pk=result.conversation_id).next_position == 10


_pieces = st.sampled_from([
    '{"parentUuid":null,"type":"user","uuid":"u1","sessionId":"s1","message":{"role":"user","content":"hi"}}',
    '{"parentUuid":"u1","type":"assistant","uuid":"a1","sessionId":"s1","message":{"id":"m","content":[]}}',
    '{"parentUuid":"zz","type":"user","uuid":"u2","sessionId":"s1","isSidechain":true,"agentId":"x"}',
    '{"parentUuid":null,"logicalParentUuid":"a1","type":"system","subtype":"compact_boundary","uuid":"cb"}',
    '{"type":"session_meta","payload":{"id":"c1"}}', '{"type":"compacted","payload":{"replacement_history":7}}',
    '{"type":"response_item","payload":{"type":"function_call","call_id":5}}', '[{"role":"tool"}]',
    '{"kind":"woke","text":"x","at":"never"}', '{"memoryui":"conversation","id":"nope"}', '{"position":0}',
    '{"messages":[{"role":"user","content":[{"type":"compaction"}]}]}', "\x00", "{", "null", "1e999", "",
    '{"parentUuid":null,"type":"user","uuid":"n\\u0000","sessionId":"s\\u0000","message":{"content":"\\ud800"}}',
    '{"type":"custom-title","customTitle":"\\ud800\\u0000"}', '{"type":"summary","summary":[],"leafUuid":5}',
    '{"memoryui":"conversation","id":"0b1c2d3e-4f50-4617-8899-aabbccdd0002","parent_id":"0b1c2d3e-4f50-4617-8899-'
    'aabbccdd0003","title":"\\u0000","meta":{"\\u0000":"\\ud800"}}',
    '{"position":0,"created_at":"2025-01-01T00:00:00Z","message":{"kind":"note","text":"\\u0000"}}',
    '{"checkpoint":{"message_position":0,"summary":"\\u0000","created_by":"\\u0000"}}',
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.one_of(st.binary(max_size=300),
                 st.lists(_pieces, max_size=8).map(lambda xs: "\n".join(xs).encode())),
       st.sampled_from(["auto", "claude-code", "codex", "openai-chat", "openai-responses", "anthropic", "journal",
                        "memoryui"]))
def test_importing_arbitrary_bytes_writes_or_refuses_and_never_crashes(data, fmt):
    """Really written, not a dry run: through the streaming path and the whole-file path."""
    try:
        result = importer.import_text(data, format=fmt, namespace="fuzz")
    except StoreError as exc:  # not a transcript of that format: a 4xx naming the field
        assert exc.field and exc.message
        return
    assert result.format in ("claude-code", "codex", "openai-chat", "openai-responses", "anthropic", "journal",
                             "memoryui")
    for created in result.created:
        assert Conversation.objects.filter(pk=created["id"]).exists()


_NUL = "\\u0000"  # escaped in JSON: the decoded string holds a NUL, which PostgreSQL text and jsonb refuse


@pytest.mark.parametrize("fmt,text", [
    ("claude-code", '{"parentUuid":null,"type":"user","uuid":"u1","sessionId":"s1","message":{"role":"user",'
                    '"content":"hi"}}\n\x00\x00 not json\n'),
    ("claude-code", '{"parentUuid":null,"type":"user","uuid":"u' + _NUL + '1","sessionId":"s' + _NUL + '2","cwd":"/'
                    + _NUL + '","message":{"role":"user","content":"a' + _NUL + 'b"}}\n'
                    '{"parentUuid":"u' + _NUL + '1","type":"assistant","uuid":"a' + _NUL + '","sessionId":"s' + _NUL +
                    '2","message":{"id":"m' + _NUL + '","role":"assistant","content":[{"type":"tool_use","id":"t' +
                    _NUL + '","name":"R' + _NUL + '","input":{"p":"' + _NUL + '"}}]}}\n'
                    '{"type":"custom-title","customTitle":"T' + _NUL + '","sessionId":"s' + _NUL + '2"}\n'),
    ("codex", '{"type":"session_meta","payload":{"id":"c' + _NUL + '","cwd":"/' + _NUL + '"}}\n'
              '{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text",'
              '"text":"x' + _NUL + '"}]}}\n'),
    ("memoryui", '{"memoryui":"conversation","id":"0b1c2d3e-4f50-4617-8899-aabbccdd0001","title":"t' + _NUL +
                 '","subject":"s' + _NUL + '","meta":{"k' + _NUL + '":"v' + _NUL + '"},"message_count":1}\n'
                 '{"position":0,"created_at":"2025-01-01T00:00:00+00:00","message":{"kind":"note","text":"n' +
                 _NUL + '"}}\n'),
    ("anthropic", '{"model":"m' + _NUL + '","system":"s' + _NUL + '","messages":[{"role":"user","content":"u' +
                  _NUL + '"}]}'),
    ("openai-chat", '[{"role":"user","content":"u' + _NUL + '","name":"n' + _NUL + '"}]'),
    ("journal", '{"kind":"note","text":"x' + _NUL + '","at":"2025-01-01T00:00:00Z"}\n'),
])
def test_a_nul_character_anywhere_is_imported_on_both_databases(fmt, text):
    result = importer.import_text(text, format=fmt, namespace="nul")
    assert result.created and not result.failed
    for created in result.created:
        conversation = Conversation.objects.get(pk=created["id"])
        assert "\x00" not in conversation.title + conversation.subject + json.dumps(conversation.meta)
    assert importer.import_text(text, format=fmt, namespace="nul").unchanged or fmt == "memoryui"


def test_a_hard_error_imports_nothing_of_that_conversation_and_the_others_are_kept():
    good = store.create_conversation(title="good")
    store.append_message(conversation_id=good.pk, message={"kind": "note", "text": "kept"})
    bad = store.create_conversation(title="bad")
    for text in ("a", "b"):
        store.append_message(conversation_id=bad.pk, message={"kind": "note", "text": text})
    from conversations.export import export_stream
    dump = "".join(export_stream(good.pk, "memoryui").chunks)
    bad_dump = "".join(export_stream(bad.pk, "memoryui").chunks).splitlines(keepends=True)
    bad_dump[2] = bad_dump[2].replace('"position": 1', '"position": 5')  # a gap: positions would not be exact
    delete_conversations(good.pk, bad.pk)
    result = importer.import_text(dump + "".join(bad_dump), format="memoryui")
    assert [c["title"] for c in result.created] == ["good"]
    assert [f["title"] for f in result.failed] == ["bad"]
    assert list(Conversation.objects.values_list("title", flat=True)) == ["good"]


def test_the_import_command_reports_and_summarises(capsys):
    call_command("import", str(FIX / "journal.jsonl"), str(FIX / "codex_old.jsonl"), "--subject", "cust:7")
    out = capsys.readouterr().out
    assert "2 file(s) read" in out and "2 conversation(s) created" in out
    assert set(Conversation.objects.values_list("subject", flat=True)) == {"cust:7"}
    call_command("import", str(FIX), "--dry-run")
    assert "Dry run: nothing written" in capsys.readouterr().out


def test_the_import_command_shows_progress_within_a_session_on_a_terminal(monkeypatch):
    from conversations.imports import new_session

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(new_session, "PROGRESS_EVERY", 10)
    seen = []
    importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="other", dry_run=True,
                         progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 24), (10, 24), (20, 24), (24, 24)]
    out = Terminal()
    call_command("import", str(FIX / "claude_code_session.jsonl"), "--namespace", "proj", stdout=out)
    shown = out.getvalue()
    assert "\r[" in shown and "10/24 lines" in shown and "24/24 lines" in shown
    assert "3 conversation(s) created" in shown


# ---- the SessionStore door: entries in batches -----------------------------------------------


def batches(n=5):
    entries = [json.loads(x) for x in lines_of("claude_code_session.jsonl")]
    return [entries[i:i + n] for i in range(0, len(entries), n)], entries


def test_entries_appended_in_batches_load_back_deep_equal_and_read_as_a_conversation():
    parts, entries = batches()
    for part in parts:
        entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=part)
    cid, loaded = entry_streams.load_entries(format="claude-code", namespace="proj", external_id=SESSION)
    assert loaded == entries
    main = Conversation.objects.get(pk=cid)
    kinds = [m["kind"] for m in texts(main)]
    # msg_01A's lines straddle the first two batches (a2, a3 | a4): still one reply row.
    assert kinds[:6] == ["user", "thought", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in texts(main)[2]["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert Checkpoint.objects.filter(conversation__parent_id=main.pk).count() == 1  # folded in the live branch
    assert Conversation.objects.filter(parent_id=main.pk, parent_relation="fork").exists()


def test_a_retried_batch_writes_no_entry_with_a_uuid_twice():
    parts, _ = batches()
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=parts[0][1:])
    before = (Message.objects.count(), SourceEntry.objects.count())
    again = entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION,
                                    entries=parts[0][1:])
    assert again.unchanged and (Message.objects.count(), SourceEntry.objects.count()) == before
    # Entries without a uuid (titles, snapshots) are appended again: the SDK's contract says so.
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=parts[0])
    assert SourceEntry.objects.count() == before[1] + 1 and Message.objects.count() == before[0]


def test_opaque_entries_without_uuid_or_known_type_are_kept_in_order():
    key = {"format": "claude-code", "namespace": "A", "external_id": "s1"}
    entry_appends.append_entries(**key, entries=[{"type": "x", "n": 1}, {"type": "x", "n": 1}])
    entry_appends.append_entries(**key, entries=[])
    entry_appends.append_entries(**key, entries=[{"type": "x", "uuid": "b", "n": 2.5, "deep": {"a": [1, None]}}])
    assert entry_streams.load_entries(**key)[1] == [{"type": "x", "n": 1}, {"type": "x", "n": 1},
                                               {"type": "x", "uuid": "b", "n": 2.5, "deep": {"a": [1, None]}}]
    assert entry_streams.load_entries(format="claude-code", namespace="B", external_id="s1") is None


def test_a_subpath_transcript_is_a_subagent_child_of_its_session():
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=f"{SESSION}/subagents/agent-1",
                            entries=[{"type": "user", "uuid": "s1", "parentUuid": None, "isSidechain": True,
                                      "agentId": "1", "message": {"role": "user", "content": "Find the tests."}}])
    parts, _ = batches()
    entry_appends.append_entries(format="claude-code", namespace="proj", external_id=SESSION, entries=parts[0])
    session = Conversation.objects.get(namespace="proj", external_id=SESSION)
    agent = Conversation.objects.get(external_id=f"{SESSION}/subagents/agent-1")
    assert (agent.parent_id, agent.parent_relation) == (session.pk, "subagent")
    assert texts(agent) [0]["content"] == "Find the tests."
    assert session.next_position > 0


# ---- guards and deletion --------------------------------------------------------------------


def test_original_entries_cannot_be_updated_or_deleted_by_raw_sql(imported):
    def run(sql):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)

    with pytest.raises(DatabaseError, match="append-only"):
        run("UPDATE imports_sourceentry SET raw = '{}'")
    with pytest.raises(DatabaseError, match="append-only"):
        run("DELETE FROM imports_sourceentry")
    with pytest.raises(DatabaseError, match="append-only"):
        run("DELETE FROM imports_importsource")
    assert SourceEntry.objects.count() == 24


def test_deleting_the_conversation_removes_its_source_and_entries(imported):
    main = Conversation.objects.get(namespace="proj", external_id=SESSION)
    delete_conversation(main.pk)
    assert not ImportSource.objects.exists()
    assert not SourceEntry.objects.filter(conversation_id=main.pk).exists()
    assert entry_streams.load_entries(format="claude-code", namespace="proj", external_id=SESSION) is None


def test_a_claude_code_session_keeps_the_first_folder_it_names_by_either_door():
    """The whole file and the SessionStore batches name one session's folder alike: the first
    `cwd` that is not blank, trimmed, cut to 500 characters."""
    far = "/srv/" + "x" * 600

    def entries(session):
        cwds = ["   ", f"  {far}  ", "/elsewhere"]
        return [{"type": "user", "uuid": f"{session}-{i}", "parentUuid": f"{session}-{i - 1}" if i else None,
                 "sessionId": session, "cwd": cwd, "timestamp": f"2026-01-01T00:00:0{i}Z",
                 "message": {"role": "user", "content": f"turn {i}"}} for i, cwd in enumerate(cwds)]

    whole = importer.import_text("\n".join(json.dumps(e) for e in entries("s-file")) + "\n",
                                 format="claude-code", namespace="folders")
    batch = entry_appends.append_entries(format="claude-code", namespace="folders", external_id="s-batch",
                                         entries=entries("s-batch"))
    for result in (whole, batch):
        meta = Conversation.objects.get(pk=result.conversation_id).meta["claude_code"]
        assert meta["cwd"] == far[:500]
