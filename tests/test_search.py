"""Full-text search over message content: the index the database keeps, the query
language, filters, keyset paging and snippets (store level, both databases)."""

import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from conversations import store
from conversations.models import Conversation, Message
from conversations.retention import pruning
from conversations.search import highlight
from conversations.search.query import InvalidQuery, parse_query
from conversations.search.reads import BadSearch, Filters, search_messages
from tests.retention_support import delete_conversation
from tests.search_support import index_bytes, index_setting, into_the_index, rows_the_index_knows, waiting_rows

pytestmark = pytest.mark.django_db

TICKET = [
    {"kind": "system", "content": "You are a support agent."},
    {"kind": "user", "content": "My blender arrived cracked. I want a refund!"},
    {"kind": "assistant", "content": "Let me look up the order.",
     "tool_calls": [{"id": "c1", "name": "lookup_order", "arguments": {"order_id": "A-48213"}}]},
    {"kind": "tool", "tool_call_id": "c1", "name": "lookup_order", "content": '{"price": 149, "status": "delivered"}'},
    {"kind": "assistant", "content": [{"type": "text", "text": "I issued a full refund of 149 EUR."}]},
    {"kind": "thought", "text": "Refunded; the customer was polite."},
    {"kind": "user", "content": "Thanks, café au lait for everyone <script>alert(1)</script>"},
]


# SQLite: a fixture's rows either still wait to enter the FTS5 index (fewer than 64
# appended) or have been moved into it; every test that uses them runs both ways.
@pytest.fixture(params=["waiting", "indexed"])
def where(request):
    return request.param


@pytest.fixture
def ticket(where):
    c = store.create_conversation(title="Order A-48213", subject="Customer:7")
    for m in TICKET:
        store.append_message(conversation_id=c.pk, message=m)
    if where == "indexed":
        into_the_index()
    return c


@pytest.fixture
def other(where):
    c = store.create_conversation(title="Shipping", subject="customer:9")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "Where is my refund parcel?"})
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "voucher sent instead of refund"})
    if where == "indexed":
        into_the_index()
    return c


def hits(q, **filters):
    return [(str(h.conversation_id), h.position) for h in search_messages(q, filters=Filters(**filters)).hits]


def fts_rows() -> int:
    """How many documents the index holds (SQLite: the FTS5 index itself, and the rows
    waiting to enter it)."""
    return rows_the_index_knows()[0]


def test_it_finds_words_in_message_text_with_stems(ticket, other):
    t, o = str(ticket.pk), str(other.pk)
    # Newest conversation first, latest row first inside one.
    assert hits("refund") == [(o, 1), (o, 0), (t, 5), (t, 4), (t, 1)]
    assert hits("refunded") == hits("refund")  # stems match


def test_it_indexes_text_not_the_json_envelope(ticket):
    t = str(ticket.pk)
    assert hits("kind") == [] and hits("content") == [] and hits("tool_calls") == []
    # Tool call names and arguments, tool result names, text blocks, journal text.
    assert hits('"A-48213"') == [(t, 2)]
    assert hits("lookup_order") == [(t, 3), (t, 2)]
    assert hits("issued") == [(t, 4)]
    assert hits("polite") == [(t, 5)]
    assert hits("café") == [(t, 6)]
    if connection.vendor == "sqlite":
        assert hits("cafe") == [(t, 6)]  # FTS5 folds diacritics; PostgreSQL's english configuration does not


def test_it_searches_phrases_prefixes_or_and_exclusions(ticket, other):
    t, o = str(ticket.pk), str(other.pk)
    assert hits('"full refund"') == [(t, 4)]
    assert hits('"refund full"') == []
    assert hits("blend*") == [(t, 1)]
    assert hits("blender OR parcel") == [(o, 0), (t, 1)]
    assert hits("refund -voucher") == [(o, 0), (t, 5), (t, 4), (t, 1)]
    assert hits("refund NOT voucher") == hits("refund -voucher")
    assert hits("refund cracked") == [(t, 1)]


@pytest.mark.parametrize("q, says", [
    ('"full refund', "quote is not closed"),
    ("refund OR", "OR needs a word"),
    ("OR refund", "OR needs a word"),
    ("-refund", "at least one word"),
    ("", "type something"),
    ("   ", "type something"),
    ("*", "no letters or digits"),
    ("r*", "at least 2 letters"),
    ("re*fund", "at the end of a word"),
    ('"-"', "no letters or digits"),
    ("refund NOT", "NOT needs a word"),
    ("x" * 301, "at most 300"),
    (" ".join(["w"] * 17), "at most 16"),
])
def test_it_refuses_queries_that_cannot_mean_anything(q, says):
    with pytest.raises(InvalidQuery) as exc:
        parse_query(q)
    assert says in exc.value.message and exc.value.field == "q" and exc.value.status == 400


@pytest.mark.parametrize("q", ['NEAR(a b)', 'a:b', '^refund', 'refund +', '(refund', 'refund)', '{body}: x',
                               "it's", 'a AND', 'AND', '"""', "ü*", "\\", "%", "_", "'"])
def test_fts5_syntax_in_a_query_is_a_word_or_a_400_never_a_database_error(ticket, q):
    try:
        search_messages(q)
    except InvalidQuery:
        pass


def test_it_filters_by_kind_subject_namespace_and_conversation(ticket, other):
    t, o = str(ticket.pk), str(other.pk)
    assert hits("refund", kinds=("user",)) == [(o, 0), (t, 1)]
    assert hits("refund", subject="customer:7") == [(t, 5), (t, 4), (t, 1)]  # compared case-folded
    assert hits("refund", conversation_id=other.pk) == [(o, 1), (o, 0)]
    assert hits("refund", conversation_id=uuid.uuid4()) == []
    Conversation.objects.filter(pk=other.pk).update(namespace="shop")
    assert hits("refund", namespace="shop") == [(o, 1), (o, 0)]
    with pytest.raises(BadSearch) as exc:
        search_messages("refund", filters=Filters(kinds=("letter",)))
    assert exc.value.field == "kind"


def test_it_filters_by_date(ticket):
    t = str(ticket.pk)
    now = timezone.now()
    assert hits("refund", since=now - timedelta(minutes=5)) == [(t, 5), (t, 4), (t, 1)]
    assert hits("refund", since=now + timedelta(minutes=5)) == []
    assert hits("refund", before=now - timedelta(minutes=5)) == []


def test_it_pages_by_keyset_without_repeats_or_gaps(ticket):
    for i in range(45):
        store.append_message(conversation_id=ticket.pk, message={"kind": "note", "text": f"refund step {i}"})
    seen, cursor = [], None
    while True:
        page = search_messages("refund", cursor=cursor, limit=10)
        seen += [h.position for h in page.hits]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
        # A row appended between pages never shifts what the next page shows.
        store.append_message(conversation_id=ticket.pk, message={"kind": "note", "text": "refund later"})
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 48
    with pytest.raises(BadSearch) as exc:
        search_messages("refund", cursor="not-a-cursor")
    assert exc.value.field == "cursor"


def test_snippets_mark_the_matched_words_and_stay_text(ticket):
    page = search_messages("everyone")
    (hit,) = page.hits
    assert ("everyone", True) in hit.snippet
    # The <script> is text in a piece, to be escaped by whoever renders it.
    assert "<script>alert(1)</script>" in hit.snippet_text
    assert [hit.snippet_text[a:b] for a, b in hit.highlights] == ["everyone"]
    (phrase,) = search_messages('"full refund"').hits
    assert [text for text, marked in phrase.snippet if marked] == ["full refund"]


@pytest.mark.parametrize("message", TICKET + [
    {"kind": "assistant", "tool_calls": [{"id": "1", "name": "run", "arguments": "ls -la"}]},
    {"kind": "user", "content": [{"type": "image", "source": "x"}, {"type": "text", "text": "caption"}]},
    {"kind": "note", "text": "é\u0301 ünïcode", "meta": {"model": "m-1"}},
])
def test_the_highlighter_reads_the_same_words_the_index_holds(message):
    import importlib
    import re

    from conversations.message_schema import encode_message

    _, stored = encode_message(message)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            migration = importlib.import_module("conversations.search.migrations.0001_initial")
            cursor.execute(f"WITH t(c) AS (SELECT %s) SELECT {migration.sqlite_text('t.c')} FROM t", [stored])
        else:
            cursor.execute("SELECT search_message_text(%s)", [stored])
        in_sql = cursor.fetchone()[0]
    assert re.findall(r"\w+", in_sql) == re.findall(r"\w+", highlight.index_text(stored))


def test_a_broken_row_is_indexed_as_stored_and_never_fails_the_insert(ticket):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET next_position = next_position + 2 WHERE id = %s",
                       [Conversation._meta.pk.get_db_prep_value(ticket.pk, connection)])
        for position, content in ((7, "not json at all: zebracorn"), (8, '["zebracorn", 1]')):
            cursor.execute(
                "INSERT INTO conversations_message (conversation_id, position, kind, content, created_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                [Conversation._meta.pk.get_db_prep_value(ticket.pk, connection), position, "note", content,
                 connection.ops.adapt_datetimefield_value(timezone.now())])
    assert hits("zebracorn") == [(str(ticket.pk), 8), (str(ticket.pk), 7)]


def test_a_huge_message_is_indexed(ticket):
    words = " ".join(f"w{i}x{i * 7919 % 100003}" for i in range(60_000))  # ~700 kB of distinct words
    store.append_message(conversation_id=ticket.pk, message={"kind": "note", "text": words + " needle"})
    assert hits("w5x39595") == [(str(ticket.pk), 7)]


def test_a_row_a_fork_copied_is_one_hit_with_both_conversations(ticket):
    child = store.fork_conversation(conversation_id=ticket.pk, position=2)
    assert hits("blender") == [(str(ticket.pk), 1)]
    (hit,) = search_messages("blender").hits
    assert [h.id for h in hit.conversations] == [ticket.pk, child.pk]
    assert hits("blender", conversation_id=child.pk) == [(str(child.pk), 1)]


def test_deleting_a_conversation_removes_its_rows_from_the_index(ticket, other):
    before = fts_rows()
    delete_conversation(ticket.pk)
    assert hits("refund") == [(str(other.pk), 1), (str(other.pk), 0)]
    assert fts_rows() == before - len(TICKET)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, search_message_fts, row)")
            cursor.execute("SELECT term FROM temp.v WHERE term IN ('blender', 'cafe', 'polit')")
            assert cursor.fetchall() == []  # the terms only the deleted rows had are gone from the index
            cursor.execute("DROP TABLE temp.v")


def test_pruning_removes_rows_from_the_index(ticket, other):
    old = timezone.now() - timedelta(days=400)
    Conversation.objects.filter(pk=ticket.pk).update(last_activity_at=old, received_at=old)
    pruning.prune_older_than(days=90, batch_size=3)
    assert hits("refund") == [(str(other.pk), 1), (str(other.pk), 0)]
    assert hits("blender") == []
    assert fts_rows() == 2


def test_raw_sql_deletes_go_through_the_index_triggers(ticket):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET deleting = %s WHERE id = %s",
                       [True, Conversation._meta.pk.get_db_prep_value(ticket.pk, connection)])
        cursor.execute("DELETE FROM conversations_message WHERE conversation_id = %s AND position = 1",
                       [Conversation._meta.pk.get_db_prep_value(ticket.pk, connection)])
    assert Message.objects.filter(conversation_id=ticket.pk).count() == len(TICKET) - 1
    assert fts_rows() == len(TICKET) - 1


def test_the_highlighter_text_mirrors_the_indexed_text():
    assert highlight.index_text('{"kind":"note","text":"hi"}') == "hi"
    assert "lookup" in highlight.index_text(
        '{"kind":"assistant","tool_calls":[{"id":"1","name":"lookup","arguments":{"q":"x"}}]}')
    assert highlight.index_text("not json") == "not json"


def indexed_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_message_fts_docsize" if connection.vendor == "sqlite"
                       else "SELECT count(*) FROM conversations_message")
        return cursor.fetchone()[0]


def test_the_64th_waiting_row_takes_them_all_into_the_index_in_its_own_transaction():
    c = store.create_conversation(title="steps")
    for i in range(63):
        store.append_message(conversation_id=c.pk, message={"kind": "note", "text": f"refund step {i}"})
    if connection.vendor == "sqlite":
        assert (waiting_rows(), indexed_rows()) == (63, 0)
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "refund step 63"})
    assert (waiting_rows(), indexed_rows()) == (0, 64)
    # A batch append that crosses 64 leaves the rest waiting.
    store.append_messages(conversation_id=c.pk, messages=[{"kind": "note", "text": f"late {i}"} for i in range(70)])
    if connection.vendor == "sqlite":
        assert (waiting_rows(), indexed_rows()) == (6, 128)
    assert [h.position for h in search_messages("late", limit=100).hits] == list(range(133, 63, -1))
    assert [h.position for h in search_messages("refund", limit=100).hits] == list(range(63, -1, -1))


def test_a_search_merges_indexed_and_waiting_rows_in_order_once_each_page():
    a = store.create_conversation(title="a")
    b = store.create_conversation(title="b")
    for i in range(50):  # 100 rows, interleaved: 64 indexed, 36 waiting, both conversations in each
        store.append_message(conversation_id=a.pk, message={"kind": "user", "content": f"refund {i}"})
        store.append_message(conversation_id=b.pk, message={"kind": "user", "content": f"refund {i}"})
    assert waiting_rows() in (0, 36)
    expected = [(str(b.pk), p) for p in range(49, -1, -1)] + [(str(a.pk), p) for p in range(49, -1, -1)]
    seen, cursor = [], None
    while True:
        page = search_messages("refund", cursor=cursor, limit=7)
        seen += [(str(h.conversation_id), h.position) for h in page.hits]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert seen == expected
    assert hits("refund", conversation_id=a.pk) == expected[50:70]  # one page of 20
    assert hits('"refund 49"') == [(str(b.pk), 49), (str(a.pk), 49)]
    assert hits("refund", kinds=("note",)) == []


def test_deleting_a_waiting_row_never_touches_the_index(where):
    keep = store.create_conversation(title="keep")
    store.append_message(conversation_id=keep.pk, message={"kind": "note", "text": "kept refund"})
    gone = store.create_conversation(title="gone")
    store.append_message(conversation_id=gone.pk, message={"kind": "note", "text": "erased refund"})
    if where == "indexed":
        into_the_index()
    before = (waiting_rows(), indexed_rows())
    delete_conversation(gone.pk)
    if connection.vendor == "sqlite":
        # Off the list if it was waiting, out of the index if it was in: never both.
        assert (waiting_rows(), indexed_rows()) == ((1, 0) if where == "waiting" else (0, 1))
        assert before == ((2, 0) if where == "waiting" else (0, 2))
    assert hits("refund") == [(str(keep.pk), 0)]
    assert hits("erased") == []


@pytest.mark.django_db(transaction=True)  # the merge runs in transactions of its own
def test_pruning_leaves_no_entry_of_a_pruned_row_in_the_index_storage(where):
    keep = store.create_conversation(title="keep")
    old = store.create_conversation(title="old")
    for i in range(70):  # more than one batch of the index: the rows are in FTS5's own segments
        store.append_message(conversation_id=keep.pk, message={"kind": "note", "text": f"kept refund {i}"})
        store.append_message(conversation_id=old.pk, message={"kind": "note", "text": f"zzyprunedword {i}"})
    if where == "indexed":
        into_the_index()
    Conversation.objects.filter(pk=old.pk).update(last_activity_at=timezone.now() - timedelta(days=400),
                                                  received_at=timezone.now() - timedelta(days=400))
    if connection.vendor == "sqlite":
        assert b"zzyprunedword" in index_bytes()  # not vacuous: the index held the word
    result = pruning.prune_older_than(days=90, batch_size=25)
    assert result.messages == 70 and not any("search index" in n for n in result.notes)
    assert hits("zzyprunedword") == [] and len(search_messages("refund", limit=100).hits) == 70
    assert fts_rows() == 70
    if connection.vendor == "sqlite":
        assert b"zzyprunedword" not in index_bytes()  # merged away, not just marked deleted
        assert index_setting("secure-delete") == 1  # deletion requests delete securely again
