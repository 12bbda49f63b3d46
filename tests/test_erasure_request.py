"""Deletion requests: everything about a subject goes, the files are searched, the receipt says so.

These tests read the raw bytes of the database files: on SQLite the test
database file with its -wal and -shm; on PostgreSQL every file of the test
database under data_directory (the tests run as a superuser on the same host).
"""

import pytest
from django.db import DatabaseError, IntegrityError, connection, connections, transaction

from conversations import store
from conversations.errors import InvalidInput
from conversations.models import AuditEvent, Checkpoint, Conversation, Message
from conversations.retention import erasure, erasure_scrub, erasure_verify
from conversations.retention.models import DeletionReceipt
from tests.retention_support import conversation, raw_bytes_of_database

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("answer_shapes")]

SUBJECT = "cust:erasure-7f3a9c"
TEXTS = [
    "Jadwiga Roe-Kowalczyk lives at 42 Quartz Lane, Springfield",
    "her card ends in 5521 and she prefers calls after 6pm",
    "Summary: Jadwiga asked for a refund of order Q-88213-ZX",
]
FACT_TEXT = "Jadwiga Roe-Kowalczyk is allergic to penicillin"
KEPT_TEXT = "Another customer entirely: Bartholomew from Upper Dell"


@pytest.fixture
def subject_data():
    about = conversation(title="Refund for Jadwiga", subject=SUBJECT, messages=0)
    for text in TEXTS[:2]:
        store.append_message(conversation_id=about.pk, message={"kind": "user", "content": text})
    store.checkpoint_at(conversation_id=about.pk, position=1, summary=TEXTS[2])
    fork = store.fork_conversation(conversation_id=about.pk, position=0)
    kept = conversation(title="Bartholomew", subject="cust:other", messages=0)
    store.append_message(conversation_id=kept.pk, message={"kind": "user", "content": KEPT_TEXT})
    facts = pytest.importorskip("conversations.facts.store")
    fact = facts.propose_fact(subject=SUBJECT, text=FACT_TEXT, importance=4, created_by="key:agent",
                              source_conversation_id=about.pk, source_position=0)
    facts.approve_fact(fact_id=fact.pk, actor="user:rev")
    facts.record_access(actor="user:rev", subject=SUBJECT)
    from conversations.embeddings import worker

    worker.run_once()  # the fact's vector, as the server's background embedder writes it
    return {"about": about, "fork": fork, "kept": kept, "fact": fact}


def _needles():
    return [SUBJECT.encode(), *(t.encode() for t in TEXTS), FACT_TEXT.encode()]


def test_the_check_finds_the_strings_before_deletion(subject_data):
    # Proves the search is not vacuous: the same files, the same strings, before.
    erasure_verify.checkpoint_to_disk()
    found = erasure_verify.search_database_files([SUBJECT, *TEXTS, FACT_TEXT])
    assert found.status == "searched" and found.found and found.found_count == 5
    data = raw_bytes_of_database()
    assert all(n in data for n in _needles())


def test_it_previews_everything_about_the_subject(subject_data):
    extra = conversation(title="mentions her", subject="", messages=2)
    preview = erasure.preview_deletion(subject=SUBJECT, conversation_ids=[str(extra.pk), str(extra.pk)])
    ids = {c.id for c in preview.conversations}
    assert ids == {str(subject_data["about"].pk), str(subject_data["fork"].pk), str(extra.pk)}
    assert preview.messages == 2 + 1 + 2 and preview.checkpoints == 1 + 0
    assert preview.facts == {"facts": 1, "fact_events": preview.facts["fact_events"], "access_log": 1,
                             "fact_vectors": 1}
    assert preview.facts["fact_events"] >= 1
    assert Message.objects.count() == 2 + 1 + 2 + 1  # nothing deleted


def test_it_deletes_everything_and_the_text_is_gone_from_the_files(subject_data):
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")

    assert not Conversation.objects.filter(subject=SUBJECT).exists()
    assert Conversation.objects.filter(pk=subject_data["kept"].pk).exists()
    assert Message.objects.count() == 1
    from conversations.facts.models import Fact, FactAccess
    assert not Fact.objects.filter(subject=SUBJECT).exists()
    assert not FactAccess.objects.filter(subject=SUBJECT).exists()

    data = raw_bytes_of_database()
    for needle in _needles():
        assert needle not in data, needle
    assert KEPT_TEXT.encode() in data  # the search really read the data that stays

    v = receipt.verification
    assert v["status"] == "verified" and v["found"] is False
    assert v["subject_checked"] is True and v["strings_checked"] >= 4
    assert v["files_searched"] >= 1 and v["bytes_searched"] > 0
    assert receipt.counts["conversations"] == 2 and receipt.counts["messages"] == 3
    assert receipt.counts["checkpoints"] == 1 and receipt.counts["facts"] == 1 and receipt.counts["access_log"] == 1
    assert receipt.subject_sha256 == erasure.subject_sha256(SUBJECT)
    assert receipt.actor == "user:boss"


def test_the_receipt_and_the_audit_log_hold_no_personal_data(subject_data):
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")
    document = str(DeletionReceipt.objects.get(pk=receipt.pk).as_document())
    audit = repr(list(AuditEvent.objects.values_list("actor", "action", "target_type", "target_id", "detail")))
    for text in [SUBJECT, *TEXTS, FACT_TEXT, "Jadwiga", "Refund for Jadwiga"]:
        assert text not in document and text not in audit
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"deletion.executed", "deletion.receipt"} <= actions


def test_receipts_are_append_only_in_the_database(subject_data):
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")
    table = DeletionReceipt._meta.db_table
    for sql in (f"UPDATE {table} SET actor = 'x'", f"DELETE FROM {table}"):
        with pytest.raises((IntegrityError, DatabaseError)):
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(sql)
    assert DeletionReceipt.objects.get(pk=receipt.pk).actor == "user:boss"


def test_a_string_that_also_occurs_in_kept_data_is_set_aside_not_claimed():
    conversation(title="a", subject="cust:7", messages=1, text="shared sentence that both customers wrote")
    # The kept copy is also the kept conversation's title: on PostgreSQL a request searches only
    # the message partitions its own rows were in, so a kept message elsewhere is found only
    # while the WAL still holds it; the conversation table is always searched.
    conversation(title="b: shared sentence that both customers wrote", subject="cust:77", messages=1,
                 text="shared sentence that both customers wrote")
    receipt = erasure.execute_deletion(subject="cust:7", actor="user:boss")
    v = receipt.verification
    # "cust:7" is inside "cust:77", and the text is in the kept conversation too.
    assert v["subject_checked"] is False and v["strings_set_aside"] >= 2
    assert v["found"] is False
    assert Conversation.objects.filter(subject="cust:77").exists()


def test_deleting_one_conversation_takes_the_same_path(subject_data):
    about = subject_data["about"]
    receipt = erasure.delete_one_conversation(conversation_id=about.pk, actor="user:boss")
    assert receipt.kind == "conversation" and receipt.subject_sha256 == ""
    assert receipt.conversation_ids == [str(about.pk)]
    assert receipt.verification["status"] == "verified"
    assert not Conversation.objects.filter(pk=about.pk).exists()
    assert Conversation.objects.get(pk=subject_data["fork"].pk).parent_missing
    assert not Checkpoint.objects.filter(conversation_id=about.pk).exists()
    # Facts about the subject stay: only the conversation was asked for.
    from conversations.facts.models import Fact
    assert Fact.objects.filter(pk=subject_data["fact"].pk).exists()
    assert TEXTS[1].encode() not in raw_bytes_of_database()


def test_it_rejects_bad_requests_and_writes_nothing():
    c = conversation(title="x", subject="cust:1", messages=1)
    for subject, ids in [("", []), ("  ", ""), ("x" * 301, []), ("", ["not-a-uuid"]), (5, [])]:
        with pytest.raises(InvalidInput):
            erasure.execute_deletion(subject=subject, conversation_ids=ids, actor="user:boss")
    assert Conversation.objects.filter(pk=c.pk).exists() and not DeletionReceipt.objects.exists()


def test_unknown_extra_ids_are_reported_not_fatal():
    import uuid

    missing = uuid.uuid4()
    receipt = erasure.execute_deletion(subject="", conversation_ids=[str(missing)], actor="user:boss")
    assert receipt.counts["conversation_ids_not_found"] == 1 and receipt.counts["conversations"] == 0
    assert receipt.verification["status"] == "nothing_to_check"


def test_a_deletion_inside_an_outer_transaction_does_not_claim_verification():
    conversation(title="x", subject="cust:inner", messages=1, text="inner transaction text here")
    with transaction.atomic():
        receipt = erasure.execute_deletion(subject="cust:inner", actor="user:boss")
    assert receipt.verification["status"] == "not_possible" and receipt.verification["found"] is None


def test_the_receipt_reports_text_left_on_disk(subject_data, monkeypatch):
    # Skip the scrubbing: the deleted rows' old images stay in the files (the
    # SQLite WAL, PostgreSQL's dead tuples), and the receipt must say so.
    monkeypatch.setattr(erasure_scrub, "scrub_disk", lambda *args, **kwargs: [])
    monkeypatch.setattr(erasure_verify, "VERIFY_PASSES", 1)
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")
    v = receipt.verification
    assert v["status"] == "found" and v["found"] is True and v["found_count"] >= 1 and v["found_in"]
    assert SUBJECT not in str(v)


def _finding(where: str) -> erasure_verify.FileSearch:
    return erasure_verify.FileSearch(status="searched", files=[{"file": where, "bytes": 8192}], found=True,
                                     found_in=[where], found_count=1, found_needles={0: [where]})


@pytest.mark.parametrize("where, resampled", [("base/5/2619 (pg_statistic)", True),
                                               ("base/5/2840 (pg_toast.pg_toast_2619)", True),
                                               ("base/5/16401", False)])
def test_postgresql_text_found_only_in_planner_statistics_is_sampled_again(monkeypatch, where, resampled):
    """An autovacuum ANALYZE that runs while the deleting transactions are in progress
    samples the rows being deleted as live, and can store erased text as a common value;
    a found string only in pg_statistic gets the statistics sampled again and the files
    searched again. A finding anywhere else stands. (On PostgreSQL the resampling runs
    for real; the verification's other steps are replaced so both databases run this.)"""
    vendor = connection.vendor
    searches = iter([_finding(where), erasure_verify.FileSearch(status="searched", files=[], found=False,
                                                                found_in=[], found_count=0)])
    resamples = []
    real_resample = erasure_scrub.resample_statistics

    def resample(notes, lease, touched=None):
        resamples.append(1)
        if vendor == "postgresql":
            real_resample(notes, lease, touched)

    monkeypatch.setattr(erasure_verify, "search_database_files", lambda *_, **__: next(searches))
    monkeypatch.setattr(erasure_verify, "checkpoint_to_disk", lambda: None)
    monkeypatch.setattr(erasure_verify, "_strings_in_live_data", lambda values: set())
    monkeypatch.setattr(erasure_scrub, "resample_statistics", resample)
    monkeypatch.setattr(type(connections["default"]), "vendor", "postgresql")
    notes = []
    search, set_aside = erasure_verify.verify(["the erased words"], notes, None)
    monkeypatch.undo()
    assert bool(resamples) == resampled
    assert search.found is (not resampled) and search.passes == (2 if resampled else 1)
    assert set_aside == set()


def _wal_finding() -> erasure_verify.FileSearch:
    return _finding("pg_wal/000000010000000000000042")


@pytest.mark.parametrize("after_clearing, asked", [(False, []), (True, [["the erased words"]])])
def test_postgresql_text_found_only_in_the_wal_is_cleared_before_rows_that_stay_are_read(
        monkeypatch, after_clearing, asked):
    """The deletion's own WAL records hold the erased text after every request. Asking whether
    rows that stay hold it reads every text column of the database (a cost that grows with it),
    so the WAL is cleared and searched again first; only a needle still found is asked about."""
    found_again = _wal_finding() if after_clearing else erasure_verify.FileSearch(
        status="searched", files=[], found=False, found_in=[], found_count=0)
    searches = iter([_wal_finding(), found_again])
    cleared, questions = [], []

    def live(values):
        questions.append(list(values))
        return set(values)  # rows that stay hold it: the finding proves nothing

    monkeypatch.setattr(erasure_verify, "search_database_files", lambda *_, **__: next(searches))
    monkeypatch.setattr(erasure_verify, "checkpoint_to_disk", lambda: None)
    monkeypatch.setattr(erasure_verify, "_clear_wal", lambda found_in, wal, lease: cleared.append(found_in) or True)
    monkeypatch.setattr(erasure_verify, "_strings_in_live_data", live)
    monkeypatch.setattr(type(connections["default"]), "vendor", "postgresql")
    search, set_aside = erasure_verify.verify(["the erased words"], [], None)
    monkeypatch.undo()
    assert len(cleared) == 1 and search.passes == 2
    assert questions == asked
    assert search.found is False
    assert set_aside == ({"the erased words"} if after_clearing else set())


def test_postgresql_a_second_pass_reads_only_what_clearing_the_wal_can_change(monkeypatch):
    """After a CHECKPOINT, a pass that finds a needle only in the WAL (the deletion's own
    records) is followed, once the WAL is cleared, by a pass over the WAL segments and the
    statistics alone: the other files were searched clean and nothing between the passes
    writes erased text into them. The receipt still counts every file searched."""
    if connection.vendor != "postgresql":
        return  # SQLite searches its file once per pass, with nothing to leave out
    searched = []
    real_search_files = erasure_verify.search_files

    def recording(specs, needles, **options):
        if any(s.get("kind") == "postgres" for s in specs) or any(s["name"].startswith("pg_wal/") for s in specs):
            searched.append([s["name"] for s in specs])
        return real_search_files(specs, needles, **options)

    monkeypatch.setattr(erasure_verify, "search_files", recording)
    text = "Wilhelmina Oyelaran-Strandberg disputed charge 8812-KT on the phone"
    about = conversation(title="w", messages=0)
    conversation(title="stays", messages=5, text="an unrelated line {i} that stays")
    for _ in range(30):
        store.append_message(conversation_id=about.pk, message={"kind": "user", "content": text})
    receipt = erasure.delete_one_conversation(conversation_id=about.pk, actor="user:boss")
    v = receipt.verification
    assert v["status"] == "verified", v
    # The deletion's own WAL records hold the text: the first pass finds them there, always.
    assert len(searched) == v["verify_passes"] >= 2
    first, second = searched[0], searched[1]
    relation_files = [n for n in first if not n.startswith("pg_wal/")]
    assert any(n.startswith("pg_wal/") for n in second)
    assert len([n for n in second if not n.startswith("pg_wal/")]) < len(relation_files) / 2
    assert v["files_searched"] >= len(relation_files) - 5  # an old file may be unlinked between passes


def test_postgresql_a_partitioned_tables_own_statistics_keep_no_text_of_a_deletion():
    """A partitioned table's own statistics sample every partition: its text columns' are
    dropped after a deletion rather than analysed again (which would analyse every partition),
    and its other columns' stay."""
    if connection.vendor != "postgresql":
        return  # SQLite keeps no sampled values
    text = "Philippa Quenneville-Ashdown returned order 5521-ZR twice"
    kept = conversation(title="k", messages=40, text="an unrelated line {i} that stays")
    gone = conversation(title="g", messages=0)
    for _ in range(40):
        store.append_message(conversation_id=gone.pk, message={"kind": "user", "content": text})
    table = Message._meta.db_table

    def parent_statistics():
        cursor.execute("SELECT a.attname, strpos(s.stavalues1::text || coalesce(s.stavalues2::text, '') || "
                       "coalesce(s.stavalues3::text, ''), %s) > 0 FROM pg_statistic s JOIN pg_attribute a "
                       "ON a.attrelid = s.starelid AND a.attnum = s.staattnum WHERE s.starelid = %s::regclass",
                       ["Quenneville", table])
        return dict(cursor.fetchall())

    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{table}"')
        before = parent_statistics()
        assert before["content"] is True and "conversation_id" in before
    receipt = erasure.delete_one_conversation(conversation_id=gone.pk, actor="user:boss")
    assert receipt.verification["status"] == "verified", receipt.verification
    with connection.cursor() as cursor:
        after = parent_statistics()
    assert "content" not in after and "search_tsv" not in after and not any(after.values())
    assert "conversation_id" in after and Message.objects.of(kept.pk).count() == 40


def test_a_deletion_that_empties_a_table_leaves_no_erased_text_in_its_planner_statistics():
    """PostgreSQL's ANALYZE of a table with no rows keeps the table's old statistics,
    sampled common values included. When a deletion leaves a table empty, statistics
    gathered while the erased rows were live would hold their text for good: the
    deletion drops them. (SQLite keeps no sampled values: there this is the plain path.)"""
    text = "Ottoline Brackenbury-Vasquez asked about invoice 7731-QX for the third time"
    about = conversation(title="o", messages=0)
    for _ in range(40):
        store.append_message(conversation_id=about.pk, message={"kind": "user", "content": text})
    assert Message.objects.count() == 40 and Conversation.objects.count() == 1
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f'ANALYZE "{Message._meta.db_table}"')
            cursor.execute("SELECT count(*) FROM pg_stats WHERE tablename = %s"
                           " AND strpos(most_common_vals::text, %s) > 0",
                           [Message._meta.db_table, "Brackenbury-Vasquez"])
            assert cursor.fetchone()[0] >= 1  # the statistics hold the text before the deletion

    receipt = erasure.delete_one_conversation(conversation_id=about.pk, actor="user:boss")
    v = receipt.verification
    assert v["status"] == "verified" and v["found"] is False and v["strings_checked"] >= 1, v
    assert Message.objects.count() == 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_statistic WHERE starelid = %s::regclass",
                           [Message._meta.db_table])
            assert cursor.fetchone()[0] == 0
    erasure_verify.checkpoint_to_disk()
    assert text.encode()[:40] not in raw_bytes_of_database()
