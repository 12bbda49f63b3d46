"""Large imports: read in two passes, written in short transactions, hidden until the last one."""

import hashlib
import json
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, transaction
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from conversations.embeddings import worker as embedder
from conversations.formats import claude_code
from conversations.formats.base import split_lines
from conversations.imports import importer, textfile, writer
from conversations.imports import store as import_store
from conversations.imports.models import ImportSource, ImportStage, SourceEntry
from conversations.imports.textfile import Text
from conversations.models import Checkpoint, Conversation, Message
from conversations.retention.pruning import delete_conversations_in_batches, mark_deleting, prune_older_than
from conversations.search.models import MessageVector

FIX = Path(__file__).parent / "fixtures" / "formats"
SESSION = "5f0c7a3e-1b2d-4c8e-9f10-aa11bb22cc33"


@pytest.fixture
def small_chunks(monkeypatch):
    """Two rows per transaction: every step of the chunked path runs on the fixtures."""
    monkeypatch.setattr(writer, "CHUNK_ROWS", 2)
    monkeypatch.setattr(writer, "CHUNK_BYTES", 300)
    monkeypatch.setattr(writer.Writer, "_timed", lambda self, write, **kw: write(**kw))


def contents(conversation_id):
    return list(Message.objects.filter(conversation_id=conversation_id).order_by("position")
                .values_list("position", "kind", "content"))


# ---- reading a file line by line ----------------------------------------------------------------

_lines = st.lists(st.sampled_from(["", " ", "\r", "{}", '{"a": "é"}', "x" * 7, "日本語", "\t", "ab\r"]), max_size=12)


@hsettings(max_examples=200, deadline=None)
@given(_lines, st.booleans(), st.integers(0, 40))
def test_lines_of_a_file_are_those_of_split_lines_with_length_and_hash(tmp_path_factory, parts, newline_at_end,
                                                                        prefix):
    text = "\n".join(parts) + ("\n" if newline_at_end and parts else "")
    folder = tmp_path_factory.mktemp("t")
    path = folder / "f.jsonl"
    path.write_bytes(text.encode())
    expected = [(n, line, last) for n, line, last in split_lines(text)]
    textfile.BLOCK, saved = 3, textfile.BLOCK
    try:
        sources = [Text(text), Text(text.encode())]
        with_file = Text.open(str(path))
        with_file._file, with_file._size = open(path, "rb"), len(text.encode())  # read in blocks, however small
        sources.append(with_file)
        for source in sources:
            assert list(source.lines(prefix_chars=prefix)) == expected
            assert [source.line(i) for i in range(len(expected))] == [line for _n, line, _l in expected]
            assert source.chars == len(text)
            assert source.sha256 == hashlib.sha256(text.encode()).hexdigest()
            if prefix and prefix <= len(text):
                assert source.prefix_sha256 == hashlib.sha256(text[:prefix].encode()).hexdigest()
        with_file.close()
    finally:
        textfile.BLOCK = saved


# ---- the same conversations as a whole-file parse -------------------------------------------------


@pytest.mark.django_db
def test_a_streamed_import_in_small_chunks_writes_what_the_whole_file_parse_plans(small_chunks, tmp_path):
    path = tmp_path / "session.jsonl"
    path.write_text((FIX / "claude_code_session.jsonl").read_text())
    plan = claude_code.parse(path.read_text())
    result = importer.import_path(str(path), namespace="proj")
    assert [c["key"] for c in result.created] == list(plan.conversations)
    for info in result.created:
        planned = plan.conversations[info["key"]]
        rows = contents(info["id"])
        # A fork holds its parent's rows up to the fork point, then its own.
        own = rows[planned.base:]
        assert [(kind, text) for _p, kind, text in own] == [(r.kind, r.text) for r in planned.rows]
        assert [p for p, _k, _t in rows] == list(range(len(rows)))
        assert Checkpoint.objects.filter(conversation_id=info["id"]).count() >= len(planned.folds)
        conversation = Conversation.objects.get(pk=info["id"])
        assert not conversation.deleting and not conversation.staged and conversation.title == planned.title
    main = Conversation.objects.get(namespace="proj", external_id=SESSION)
    assert main.title == "Coupons crash checkout"
    raws = list(SourceEntry.objects.order_by("seq").values_list("raw", flat=True))
    assert raws == [line for line in path.read_text().splitlines() if line.strip()]
    assert not ImportStage.objects.exists()
    source = ImportSource.objects.get()
    assert source.entries == len(raws) and source.consumed_chars == len(path.read_text())
    # And it is recognised: importing it again creates nothing, a grown file appends.
    assert importer.import_path(str(path), namespace="proj").unchanged


@pytest.mark.django_db
def test_a_dry_run_of_a_large_import_writes_nothing_and_reports_the_same(small_chunks):
    data = (FIX / "claude_code_session.jsonl").read_text()
    dry = importer.import_text(data, namespace="proj", dry_run=True)
    assert not Conversation.objects.exists() and not ImportSource.objects.exists()
    real = importer.import_text(data, namespace="proj")
    strip = lambda infos: [{k: v for k, v in i.items() if k not in ("id", "parent_id")} for i in infos]  # noqa: E731
    assert strip(dry.created) == strip(real.created) and dry.messages == real.messages


# ---- nothing visible until the end; failures leave nothing --------------------------------------


@pytest.mark.django_db
def test_nothing_of_an_import_is_visible_before_its_last_transaction(small_chunks, monkeypatch):
    seen = []
    real_write = import_store.write_chunk

    def write_and_look(**kw):
        real_write(**kw)
        seen.append((Conversation.objects.live().count(), Message.objects.count()))

    monkeypatch.setattr(import_store, "write_chunk", write_and_look)
    importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj")
    assert len(seen) > 5
    # Rows were written chunk by chunk, but no conversation was live until the end.
    assert all(live == 0 for live, _rows in seen) and seen[-1][1] > seen[0][1]
    assert Conversation.objects.live().count() == 3


@pytest.mark.django_db
def test_an_import_that_fails_halfway_leaves_nothing(small_chunks, monkeypatch):
    calls = 0
    real_write = import_store.write_chunk

    def fail_on_the_fourth(**kw):
        nonlocal calls
        calls += 1
        if calls == 4:
            raise RuntimeError("disk full")
        real_write(**kw)

    monkeypatch.setattr(import_store, "write_chunk", fail_on_the_fourth)
    with pytest.raises(RuntimeError):
        importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj")
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert not SourceEntry.objects.exists() and not ImportSource.objects.exists() and not ImportStage.objects.exists()


def _crash_after_staging(monkeypatch):
    """An import whose process dies after writing some chunks: nothing cleans up after it."""
    monkeypatch.setattr(writer.Writer, "discard", lambda self, keys=None: None)
    monkeypatch.setattr(import_store, "publish_staged", lambda **kw: (_ for _ in ()).throw(SystemExit("killed")))
    with pytest.raises(SystemExit):
        importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj")
    monkeypatch.undo()
    assert Conversation.objects.filter(staged=True, deleting=False).count() == 3
    assert not Conversation.objects.live().exists()


@pytest.mark.django_db
def test_after_a_crash_the_next_import_of_the_source_cleans_up_and_imports(small_chunks, monkeypatch):
    _crash_after_staging(monkeypatch)
    data = (FIX / "claude_code_session.jsonl").read_text()
    # While the crashed import's process might still be writing, the source is refused.
    with pytest.raises(Exception, match="being imported"):
        importer.import_text(data, namespace="proj")
    ImportStage.objects.update(holder="elsewhere:1:dead")  # another host's process, silent for a day
    from datetime import timedelta

    from django.utils import timezone
    ImportStage.objects.update(heartbeat_at=timezone.now() - timedelta(days=1))
    result = importer.import_text(data, namespace="proj")
    assert len(result.created) == 3
    assert Conversation.objects.count() == Conversation.objects.live().count() == 3
    assert SourceEntry.objects.count() == 24 and not ImportStage.objects.exists()


@pytest.mark.django_db
def test_a_prune_finishes_what_a_crashed_import_left(small_chunks, monkeypatch):
    _crash_after_staging(monkeypatch)
    result = prune_older_than(days=90)
    assert result.conversations == 3
    assert not Conversation.objects.exists() and not Message.objects.exists() and not SourceEntry.objects.exists()
    assert not ImportStage.objects.exists() and not ImportSource.objects.exists()


@pytest.mark.django_db
def test_the_database_keeps_a_staged_conversations_rows_until_it_is_marked_for_deletion(small_chunks, monkeypatch):
    _crash_after_staging(monkeypatch)
    staged = list(Conversation.objects.filter(staged=True).values_list("pk", flat=True))
    rows = Message.objects.filter(conversation_id__in=staged).count()
    assert rows > 0
    # Staged is not being deleted: the append-only guard refuses, as for a live conversation.
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {Message._meta.db_table} WHERE conversation_id = %s",
                       [Conversation._meta.pk.get_db_prep_value(staged[0], connection)])
    assert Message.objects.filter(conversation_id__in=staged).count() == rows
    mark_deleting(staged)
    deletion = delete_conversations_in_batches(staged, batch_size=100)
    assert deletion.messages == rows and deletion.finish() == 3


@pytest.mark.django_db(transaction=True)
def test_rows_embedded_while_their_import_is_staged_keep_their_vectors(small_chunks, monkeypatch):
    real_write = import_store.write_chunk

    def write_then_embed(**kw):
        real_write(**kw)
        embedder.run_until_done()  # the background embedder, between two of the import's transactions

    monkeypatch.setattr(import_store, "write_chunk", write_then_embed)
    importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj")
    embedder.run_until_done()
    imported = list(Conversation.objects.live().values_list("pk", flat=True))
    rows = Message.objects.filter(conversation_id__in=imported).count()
    assert rows > 0 and MessageVector.objects.filter(conversation_id__in=imported).count() == rows


@pytest.mark.django_db
def test_a_deletion_that_takes_the_staged_conversations_stops_the_import(small_chunks, monkeypatch):
    calls = 0
    real_write = import_store.write_chunk

    def delete_after_the_third(**kw):
        nonlocal calls
        calls += 1
        if calls == 3:  # what a prune does with staged conversations, between two of our transactions
            staged = list(Conversation.objects.filter(staged=True).values_list("pk", flat=True))
            mark_deleting(staged)
            delete_conversations_in_batches(staged, batch_size=3).finish()
        real_write(**kw)

    monkeypatch.setattr(import_store, "write_chunk", delete_after_the_third)
    with pytest.raises(import_store.ImportInterrupted):
        importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj")
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert not SourceEntry.objects.exists() and not ImportStage.objects.exists()


@pytest.mark.django_db
def test_other_formats_are_staged_too(small_chunks, monkeypatch):
    seen = []
    real_write = import_store.write_chunk

    def write_and_look(**kw):
        real_write(**kw)
        seen.append(Conversation.objects.live().count())

    monkeypatch.setattr(import_store, "write_chunk", write_and_look)
    result = importer.import_text((FIX / "codex_rollout.jsonl").read_text())
    assert len(seen) > 3 and set(seen) == {0}
    assert Conversation.objects.get(pk=result.conversation_id).next_position == 8
    assert json.loads(Message.objects.filter(conversation_id=result.conversation_id).order_by("position")
                      .first().content)["kind"] == "user"


# ---- a grown session file: its new lines a slice per transaction ---------------------------------


def _grown_import(monkeypatch, slice_lines, fail_on=None):
    lines = (FIX / "claude_code_session.jsonl").read_text().splitlines(keepends=True)
    importer.import_text("".join(lines[:9]), namespace="proj")
    monkeypatch.setattr(importer, "SLICE_LINES", slice_lines)
    if fail_on is not None:
        calls, real_apply = 0, importer.apply_plan

        def apply_or_fail(*args, **kw):
            nonlocal calls
            calls += 1
            if calls == fail_on:
                raise RuntimeError("killed")
            return real_apply(*args, **kw)

        monkeypatch.setattr(importer, "apply_plan", apply_or_fail)
        with pytest.raises(RuntimeError):
            importer.import_text("".join(lines), namespace="proj")
        monkeypatch.setattr(importer, "apply_plan", real_apply)
    return importer.import_text("".join(lines), namespace="proj")


def _state():
    main = Conversation.objects.get(namespace="proj", external_id=SESSION)
    return {
        "main": [json.loads(c)["kind"] for _p, _k, c in contents(main.pk)],
        "conversations": sorted((c.parent_relation, c.next_position) for c in Conversation.objects.all()),
        "checkpoints": Checkpoint.objects.count(),
        "seqs": list(SourceEntry.objects.order_by("seq").values_list("seq", flat=True)),
    }


@pytest.mark.django_db
def test_a_grown_file_in_slices_writes_what_one_transaction_writes(monkeypatch):
    result = _grown_import(monkeypatch, 10 ** 6)
    at_once = _state()
    assert result.transactions == 1
    Conversation.objects.update(deleting=True)
    delete_conversations_in_batches(list(Conversation.objects.values_list("pk", flat=True)), batch_size=100).finish()
    monkeypatch.undo()
    result = _grown_import(monkeypatch, 2)
    assert result.transactions >= 3 and [a["key"] for a in result.appended] == ["main"]
    assert _state() == at_once
    assert ImportSource.objects.get().consumed_chars == len((FIX / "claude_code_session.jsonl").read_text())


@pytest.mark.django_db
def test_slow_slices_of_a_grown_file_get_smaller_never_larger(monkeypatch):
    clock = iter(range(10_000))  # every transaction of the importer "takes" a whole second

    class SlowClock:
        @staticmethod
        def monotonic():
            return float(next(clock))

    monkeypatch.setattr(importer, "time", SlowClock)
    result = _grown_import(monkeypatch, 2)
    assert result.transactions == 8  # 15 new lines, 2 per slice: a slow machine does not merge them
    assert _state()["seqs"] == list(range(24))


@pytest.mark.django_db
def test_a_grown_file_import_that_stops_halfway_is_continued_by_the_next_one(monkeypatch):
    _grown_import(monkeypatch, 2, fail_on=4)
    assert _state()["seqs"] == list(range(24))  # nothing twice, nothing missing
    source = ImportSource.objects.get()
    assert source.consumed_chars == len((FIX / "claude_code_session.jsonl").read_text())
    assert importer.import_text((FIX / "claude_code_session.jsonl").read_text(), namespace="proj").unchanged


@pytest.mark.django_db
def test_the_write_lock_is_left_free_after_each_transaction_and_the_gap_is_spent_placing(monkeypatch):
    """On SQLite the importer leaves the lock to others for a quarter of each transaction's time
    (at most GAP_SECONDS) before its next transaction, and sleeps only what its own work between
    the two did not already take. PostgreSQL has no database-wide write lock: no gap."""
    from django.db import connection

    clock, slept, began = [100.0], [], []
    monkeypatch.setattr(writer.time, "monotonic", lambda: clock[0])

    def sleep(seconds):
        slept.append(round(seconds, 6))
        clock[0] += seconds

    monkeypatch.setattr(writer.time, "sleep", sleep)

    def transaction_of(seconds):
        def write():
            began.append(clock[0])
            clock[0] += seconds
        return write

    w = writer.Writer(plan=claude_code.new_plan(), namespace="", actor="test")
    w._timed(transaction_of(0.08))   # earns a 0.02 s gap
    clock[0] += 0.005                # placing the next chunk takes 5 ms of it
    w._timed(transaction_of(0.4))    # earns the whole GAP_SECONDS
    clock[0] += 0.3                  # placing takes longer than the gap: no sleep
    w._timed(transaction_of(0.1))
    w._await_gap()                   # e.g. publish, right after
    if connection.vendor == "sqlite":
        assert slept == [0.015, 0.025]
        assert began[1] - (began[0] + 0.08) == pytest.approx(0.02)
        assert began[2] - (began[1] + 0.4) == pytest.approx(0.3)
    else:
        assert slept == []
    assert w.transactions == 3 and w.longest == pytest.approx(0.4)
