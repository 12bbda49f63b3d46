"""A request filed in two phases leaves its rows' full-text entries for the window to remove
(conversations/search/unindex.py, search migration 0010): the rows go, and no search finds
them, from the moment the request is filed; the window removes their words from the index
with secure-delete, and the index stays whole. On PostgreSQL the words are a column of the
row, so nothing is queued and the same searches must still find nothing."""

import uuid
from dataclasses import asdict
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from conversations import store
from conversations.retention import erasure, window
from conversations.retention.models import DeletionReceipt
from conversations.retention.pruning import prune_older_than
from conversations.search import unindex
from conversations.search.reads import search_messages
from tests.retention_support import age, conversation, in_two_phases
from tests.search_support import assert_index_sound, index_holds, sqlite_rows

pytestmark = pytest.mark.django_db(transaction=True)

# More rows than wait outside the index at once (search migration 0002 flushes at 64).
INDEXED = 70


@pytest.fixture(autouse=True)
def two_phases(settings, tmp_path):
    in_two_phases(settings, tmp_path)


def _named_for_later() -> int:
    return sqlite_rows(unindex.LATER)


def test_phase_one_finds_nothing_and_the_window_takes_the_words_out_of_the_index():
    c = conversation(title="wren", subject="cust:wren", messages=INDEXED, text="zanzibarite kettle line {i}")
    other = conversation(title="keep", messages=3, text="zanzibarite teapot kept {i}")
    assert len(search_messages("zanzibarite", limit=100).hits) == INDEXED + 3
    kept = index_holds("teapot")

    receipt = erasure.execute_deletion(subject="cust:wren", actor="user:boss")
    assert receipt.verification["status"] == "erased"
    assert "full-text index" in receipt.verification["notes"][0]
    hits = search_messages("zanzibarite", limit=100).hits
    assert {h.conversation_id for h in hits} == {other.pk} and len(hits) == 3
    assert search_messages("kettle", limit=100).hits == []
    if connection.vendor == "sqlite":
        # The words wait in the index for the window, with the text to remove them by.
        assert unindex.waiting() == 64 and _named_for_later() == 1
        assert index_holds("kettle") == 64
    else:
        assert unindex.waiting() == 0 and index_holds("kettle") == 0

    window.run_window(actor="system:test")
    assert DeletionReceipt.objects.get(pk=receipt.pk).verification["status"] == "verified"
    assert unindex.waiting() == 0 and _named_for_later() == 0
    assert index_holds("kettle") == 0 and index_holds("zanzibarite") == kept
    assert len(search_messages("zanzibarite", limit=100).hits) == 3
    assert_index_sound()
    assert not c.__class__.objects.filter(pk=c.pk).exists()


def test_a_request_verified_at_once_removes_the_entries_as_it_deletes(settings):
    settings.MEMORYUI_ERASURE_VERIFY = "at-once"
    conversation(title="ivo", subject="cust:ivo", messages=INDEXED, text="quokkafire receipt {i}")
    receipt = erasure.execute_deletion(subject="cust:ivo", actor="user:boss")
    assert receipt.verification["status"] == "verified", receipt.verification
    assert unindex.waiting() == 0 and _named_for_later() == 0
    assert index_holds("quokkafire") == 0
    assert_index_sound()


def test_rows_still_waiting_to_enter_the_index_are_not_queued():
    conversation(title="few", subject="cust:few", messages=5, text="brindlemoss note {i}")
    erasure.execute_deletion(subject="cust:few", actor="user:boss")
    assert unindex.waiting() == 0
    assert search_messages("brindlemoss").hits == []
    window.run_window(actor="system:test")
    assert index_holds("brindlemoss") == 0 and _named_for_later() == 0
    assert_index_sound()


def test_a_prune_meanwhile_removes_its_own_rows_entries_at_once():
    conversation(title="wait", subject="cust:wait", messages=INDEXED, text="glimmerfen order {i}")
    erasure.execute_deletion(subject="cust:wait", actor="user:boss")
    old = conversation(title="old", messages=INDEXED, text="oldpantry stock {i}")
    age(old, 400)
    assert prune_older_than(days=30, actor="system:test").conversations == 1
    assert index_holds("oldpantry") == 0
    assert unindex.waiting() == (64 if connection.vendor == "sqlite" else 0)
    window.run_window(actor="system:test")
    assert index_holds("glimmerfen") == 0 and unindex.waiting() == 0
    assert_index_sound()


def test_a_fork_keeps_the_rows_it_copied_when_its_source_is_erased():
    source = conversation(title="src", messages=INDEXED, text="velvetquarry clause {i}")
    fork = store.fork_conversation(conversation_id=source.pk, position=INDEXED - 1, title="kept fork")
    erasure.execute_deletion(conversation_ids=[str(source.pk)], actor="user:boss")
    found = search_messages("velvetquarry", limit=100).hits
    assert {h.conversation_id for h in found} == {fork.pk} and len(found) == INDEXED
    window.run_window(actor="system:test")
    found = search_messages("velvetquarry", limit=100).hits
    assert {h.conversation_id for h in found} == {fork.pk} and len(found) == INDEXED
    assert_index_sound()


def test_words_left_by_a_request_that_failed_go_in_the_next_window(settings, tmp_path):
    # A crash between a request's pending file and its receipt leaves rows deleted, their words
    # queued, and a file the window drops: the words must not wait for a request that never comes.
    conversation(title="lost", subject="cust:lost", messages=INDEXED, text="ossiferant ledger {i}")
    receipt = erasure.execute_deletion(subject="cust:lost", actor="user:boss")
    (mine,) = window._load_all()
    own_folder = settings.MEMORYUI_ERASURE_PENDING_DIR
    # The window runs where another folder is (its receipt's file would be there): nothing of it waits here.
    settings.MEMORYUI_ERASURE_PENDING_DIR = tmp_path / "another-folder"
    orphan = window.Pending(**{**asdict(mine), "receipt_id": str(uuid.uuid4())})
    window.save(orphan)
    queued = 64 if connection.vendor == "sqlite" else 0
    assert unindex.waiting() == queued and index_holds("ossiferant") == queued

    out = StringIO()
    call_command("erasure_window", stdout=out, stderr=StringIO())
    assert "No deletion request is waiting" in out.getvalue()
    if connection.vendor == "sqlite":
        assert f"index entries of {queued} deleted rows" in out.getvalue()
    assert window._load_all() == []
    assert unindex.waiting() == 0 and _named_for_later() == 0 and index_holds("ossiferant") == 0
    assert search_messages("ossiferant").hits == []
    assert_index_sound()
    # Its receipt never got a verdict: it stays waiting, and turns into an alert at its deadline.
    assert list(window.waiting_receipts().values_list("pk", flat=True)) == [receipt.pk]
    # Its own folder's window finds its file gone, and checks it as far as it can without it.
    settings.MEMORYUI_ERASURE_PENDING_DIR = own_folder
    window._forget(mine)
    assert window.run_window(actor="system:test").lost == 1
    assert DeletionReceipt.objects.get(pk=receipt.pk).verification["status"] == "not_possible"


def test_a_window_with_nothing_queued_and_nothing_waiting_does_nothing():
    result = window.run_window(actor="system:test")
    assert (result.receipts, result.dropped, result.unindexed) == ([], 0, 0)
