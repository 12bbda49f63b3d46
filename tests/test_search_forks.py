"""Forks that do not re-index: a fork's copied rows are found through the
rows they were copied from, one hit per row with every conversation that holds it, and
they stay findable however their ancestors go (store level, both databases; the index
counted with raw SQL)."""

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from conversations import store
from conversations.models import Conversation
from conversations.partitions import relation_bytes
from conversations.retention import erasure, pruning
from conversations.search import lineage
from conversations.search.models import BorrowedRows
from conversations.search.reads import Filters, search_messages
from tests.api_support import Api, login_as, make_key
from tests.conftest import purge_sqlite_guarded_tables
from tests.retention_support import age, delete_conversation, raw_bytes_of_database
from tests.search_support import (
    assert_index_sound,
    dated_rows,
    fold_pending_index_entries,
    fresh_word,
    index_bytes,
    into_the_index,
    migrate_everything_forward,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


@pytest.fixture(params=["waiting", "indexed"])
def where(request):
    """SQLite: the parent's rows still wait to enter the FTS5 index, or are in it."""
    return request.param


def conversation(title, texts, *, where="indexed", subject=""):
    c = store.create_conversation(title=title, subject=subject)
    append(c, *texts)
    if where == "indexed":
        into_the_index()
    return c


def append(c, *texts):
    for text in texts:
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": text})


def fork(c, position):
    return store.fork_conversation(conversation_id=c.pk, position=position)


def hits(q, **filters):
    return [(h.conversation_id, h.position) for h in search_messages(q, filters=Filters(**filters)).hits]


def holders(q):
    return [[holder.id for holder in h.conversations] for h in search_messages(q).hits]


def index_entries() -> int:
    """Rows the full-text index holds (SQLite: FTS5 documents and rows waiting to enter
    it; PostgreSQL: rows with words, which are the partial GIN index's rows)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT (SELECT count(*) FROM search_message_fts_docsize) + "
                           "(SELECT count(*) FROM search_message_pending)")
        else:
            cursor.execute("SELECT count(*) FROM conversations_message WHERE search_tsv IS NOT NULL")
        return cursor.fetchone()[0]


def index_size() -> int:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT coalesce(sum(length(block)), 0) FROM search_message_fts_data")
        else:
            fold_pending_index_entries()
            return relation_bytes("search_message_tsv_idx", "pg_relation_size")
        return cursor.fetchone()[0]


TICKET = ["the blender arrived cracked", "a refund was issued", "the parcel was lost"]


def test_a_fork_that_adds_no_rows_grows_the_index_by_nothing(where):
    parent = conversation("parent", [f"row {i} about the blender" for i in range(100)], where=where)
    entries, size = index_entries(), index_size()

    at_end = fork(parent, 99)
    fork(parent, 40)
    fork(at_end, 70)

    assert index_entries() == entries
    assert index_size() == size
    if connection.vendor == "sqlite":
        assert dated_rows() == entries
    assert hits("blender", conversation_id=at_end.pk)[:2] == [(at_end.pk, 99), (at_end.pk, 98)]
    append(at_end, "a row the fork wrote itself")
    assert index_entries() == entries + 1
    assert hits("wrote") == [(at_end.pk, 100)]
    assert_index_sound()


def test_a_shared_row_is_one_hit_with_every_conversation_that_holds_it(where):
    parent = conversation("parent", TICKET, where=where)
    child = fork(parent, 1)
    append(child, "a voucher instead")
    grandchild = fork(child, 2)
    short = fork(parent, 0)

    assert hits("blender") == [(parent.pk, 0)]
    assert holders("blender") == [[parent.pk, child.pk, grandchild.pk, short.pk]]
    assert holders("refund") == [[parent.pk, child.pk, grandchild.pk]]
    assert holders("parcel") == [[parent.pk]]
    assert hits("voucher") == [(child.pk, 2)]
    assert holders("voucher") == [[child.pk, grandchild.pk]]
    # Inside one fork: its own rows and its copies, each at its own position.
    assert hits("blender OR voucher OR parcel", conversation_id=grandchild.pk) == [(grandchild.pk, 2),
                                                                                   (grandchild.pk, 0)]
    assert hits("refund", conversation_id=short.pk) == []
    (hit,) = search_messages("refund", filters=Filters(conversation_id=grandchild.pk)).hits
    assert hit.title == grandchild.title and hit.kind == "user" and hit.snippet_text == "a refund was issued"


def test_search_inside_a_fork_pages_through_its_own_rows_and_its_copies():
    parent = conversation("parent", [f"needle {i}" for i in range(30)])
    child = fork(parent, 19)
    append(child, *[f"needle of the fork {i}" for i in range(10)])
    grandchild = fork(child, 24)
    append(grandchild, "needle of the grandchild")

    for c, last in ((child, 29), (grandchild, 25)):
        found, cursor = [], None
        while True:
            page = search_messages("needle", filters=Filters(conversation_id=c.pk), cursor=cursor, limit=7)
            found += [(h.conversation_id, h.position) for h in page.hits]
            cursor = page.next_cursor
            if not cursor:
                break
        assert found == [(c.pk, p) for p in range(last, -1, -1)]


def test_pruning_the_parent_keeps_the_forks_copies_findable(where):
    parent = conversation("parent", TICKET, where=where)
    child = fork(parent, 1)
    append(child, "a voucher instead")
    age(parent, 400)

    pruning.prune_older_than(days=90, batch_size=2)

    assert not Conversation.objects.filter(pk=parent.pk).exists()
    assert hits("blender") == [(child.pk, 0)]
    assert holders("blender OR refund OR voucher") == [[child.pk]] * 3
    assert hits("parcel") == []
    assert hits("refund", conversation_id=child.pk) == [(child.pk, 1)]
    assert BorrowedRows.objects.count() == 0
    assert_index_sound()


def test_date_filters_find_a_forks_copies_before_and_after_its_parent_goes(where):
    parent = conversation("parent", TICKET, where=where)
    child = fork(parent, 1)
    append(child, "a refund voucher instead")
    today = {"since": timezone.now() - timedelta(hours=1), "before": timezone.now() + timedelta(hours=1)}
    yesterday = {"since": timezone.now() - timedelta(days=2), "before": timezone.now() - timedelta(days=1)}
    assert hits("refund", conversation_id=child.pk, **today) == [(child.pk, 2), (child.pk, 1)]
    assert hits("refund", conversation_id=child.pk, **yesterday) == []
    assert holders("refund") == [[child.pk], [parent.pk, child.pk]]

    age(parent, 400)
    pruning.prune_older_than(days=90, batch_size=2)

    assert hits("refund", conversation_id=child.pk, **today) == [(child.pk, 2), (child.pk, 1)]
    assert hits("blender OR refund", **today) == [(child.pk, 2), (child.pk, 1), (child.pk, 0)]
    assert_index_sound()


def test_a_fork_of_a_fork_stays_findable_as_its_ancestors_go(where):
    parent = conversation("parent", TICKET, where=where)
    child = fork(parent, 2)
    append(child, "a voucher instead")
    grandchild = fork(child, 3)

    delete_conversation(child.pk)
    # The rows the child held itself are now the grandchild's; the rest still its parent's.
    assert hits("voucher") == [(grandchild.pk, 3)]
    assert holders("blender") == [[parent.pk, grandchild.pk]]
    assert BorrowedRows.objects.get(conversation_id=grandchild.pk).source_id == parent.pk
    assert_index_sound()

    delete_conversation(parent.pk)
    assert hits("blender OR voucher OR parcel") == [(grandchild.pk, 3), (grandchild.pk, 2), (grandchild.pk, 0)]
    assert BorrowedRows.objects.count() == 0
    assert_index_sound()


def test_deleting_a_fork_leaves_its_source_in_the_index(where):
    parent = conversation("parent", TICKET, where=where)
    entries = index_entries()
    child = fork(parent, 2)
    append(child, "a voucher instead")

    delete_conversation(child.pk)

    assert index_entries() == entries
    assert holders("blender") == [[parent.pk]]
    assert hits("voucher") == []
    assert BorrowedRows.objects.count() == 0
    assert_index_sound()


def test_the_api_and_the_page_show_a_shared_row_once_with_its_conversations(client):
    parent = conversation("Order 7", TICKET)
    child = store.fork_conversation(conversation_id=parent.pk, position=1, title="Order 7, <b>retried</b>")
    reader = Api(client, make_key(["read"], name="reader"))

    items = reader.get("/search", {"q": "refund"}).json()["items"]
    assert [(i["conversation_id"], i["position"]) for i in items] == [(str(parent.pk), 1)]
    assert [(c["id"], c["title"]) for c in items[0]["conversations"]] == [
        (str(parent.pk), "Order 7"), (str(child.pk), "Order 7, <b>retried</b>")]
    assert items[0]["conversations"][1]["page_url"].endswith(f"/conversations/{child.pk}/?at=1#p1")
    inside = reader.get("/search", {"q": "refund", "conversation": str(child.pk)}).json()["items"]
    assert [(i["conversation_id"], i["position"], i["conversation_title"]) for i in inside] == [
        (str(child.pk), 1, child.title)]

    login_as(client, "auditor")
    body = client.get("/search/", {"q": "refund"}).content.decode()
    assert body.count('class="hit ') == 1
    assert f'href="/conversations/{child.pk}/?at=1&amp;q=refund#p1">Order 7, &lt;b&gt;retried&lt;/b&gt;</a>' in body


def test_a_message_row_is_still_never_updated():
    parent = conversation("parent", TICKET)
    child = fork(parent, 2)
    cid = Conversation._meta.pk.get_db_prep_value(child.pk, connection)
    attempts = ["UPDATE conversations_message SET content = '{}' WHERE conversation_id = %s"]
    if connection.vendor == "postgresql":
        # The one update adoption makes is a copied row's own words; any other words fail.
        attempts.append("UPDATE conversations_message SET search_tsv = to_tsvector('simple', 'forged') "
                        "WHERE conversation_id = %s")
    for sql in attempts:
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as c:
            c.execute(sql, [cid])
    assert [m.content for m in child.messages.order_by("position")] == [
        m.content for m in parent.messages.order_by("position")]


@pytest.mark.django_db(transaction=True)
def test_a_deletion_request_takes_the_forks_copies_out_of_the_index_too():
    purge_sqlite_guarded_tables()  # the index is counted whole: start from an empty one
    term = fresh_word()
    parent = conversation("about", [f"my code word is {term}", "and a refund"], subject="cust:fork-erasure")
    child = fork(parent, 1)
    append(child, f"{term} again, in the fork")
    kept = conversation("kept", ["a refund for someone else"], subject="cust:other")
    into_the_index()
    assert holders(term) == [[child.pk], [parent.pk, child.pk]]
    assert term.encode() in index_bytes()

    receipt = erasure.execute_deletion(subject="cust:fork-erasure", actor="user:boss")

    assert receipt.verification["status"] == "verified"
    assert hits(term) == []
    assert holders("refund") == [[kept.pk]]
    assert term.encode() not in index_bytes()
    assert term.encode() not in raw_bytes_of_database()
    assert BorrowedRows.objects.count() == 0
    assert_index_sound()


@pytest.mark.django_db(transaction=True)
def test_the_migration_undone_indexes_every_copy_and_done_again_borrows_for_new_forks():
    from django.db.migrations.executor import MigrationExecutor

    def migrate(target):
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([target])

    def stored_rows():
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM conversations_message")
            return cursor.fetchone()[0]

    parent = conversation("parent", TICKET)
    child = fork(parent, 1)
    assert index_entries() == len(TICKET)
    try:
        migrate(("search", "0003_stored_words_date_index"))
        assert index_entries() == stored_rows() == len(TICKET) + 2  # the copies got their own entries
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM search_message_fts_docsize" if connection.vendor == "sqlite"
                           else "SELECT count(*) FROM conversations_message WHERE search_tsv @@ "
                                "to_tsquery('english', 'blender')")
            assert cursor.fetchone()[0] == (len(TICKET) + 2 if connection.vendor == "sqlite" else 2)
    finally:
        migrate_everything_forward()
    assert hits("blender") == [(child.pk, 0), (parent.pk, 0)]  # a fork made before 0004 keeps its entries
    newer = fork(parent, 2)
    assert index_entries() == len(TICKET) + 2
    assert holders("parcel") == [[parent.pk, newer.pk]]
    assert_index_sound()


def test_before_its_source_goes_a_fork_is_indexed_a_batch_per_transaction(where):
    """Pruning and erasure first give a victim's forks their own index entries in small
    transactions (docs/DESIGN.md, invariant 9); search stays right between the batches."""
    parent = conversation("parent", [f"needle {i}" for i in range(10)], where=where)
    child = fork(parent, 8)
    grandchild = fork(child, 8)
    copies_in = fork(parent, 3)  # a fork of the parent that is going too

    def found():
        return sorted(p for h in search_messages("needle", filters=Filters(conversation_id=grandchild.pk),
                                                 limit=20).hits for p in [h.position])

    steps = []
    done = lineage.adopt_ahead([parent.pk, copies_in.pk], batch=4, run=lambda step: steps.append(1) or step())
    assert done == 9 and len(steps) == 5  # the parent: rows 8..5, 4..1, 0, then none left; the other: none
    assert not BorrowedRows.objects.filter(conversation_id=child.pk).exists()
    assert BorrowedRows.objects.get(conversation_id=copies_in.pk).source_id == parent.pk  # going as well
    assert found() == list(range(9))
    # The child's rows are now its own hits, shared with the grandchild (until the parent
    # goes, the parent's rows are hits of their own as well).
    of_child = [h for h in search_messages("needle", limit=50).hits if h.conversation_id == child.pk]
    assert [h.position for h in of_child] == list(range(8, -1, -1))
    assert all([c.id for c in h.conversations] == [child.pk, grandchild.pk] for h in of_child)

    delete_conversation(copies_in.pk)
    delete_conversation(parent.pk)
    assert found() == list(range(9))
    assert_index_sound()


def test_relevance_order_keeps_to_the_conversation_asked_for(where):
    """order=relevance with a conversation filter answers that conversation only, its
    copied rows included, shown as its own (not every conversation with a hit)."""
    from conversations.search.query import parse_query
    from conversations.search.ranked import search_grouped

    parent = conversation("refund parent", ["refund one", "refund two", "unrelated"], where=where)
    other = conversation("refund elsewhere", ["refund three"], where=where)
    child = fork(parent, 1)
    append(child, "refund of the fork")
    for asked, expected in ((other, 1), (parent, 2), (child, 3)):
        result = search_grouped(parse_query("refund"), filters=Filters(conversation_id=asked.pk))
        assert [g.conversation_id for g in result.groups] == [asked.pk]
        assert result.groups[0].count == expected
