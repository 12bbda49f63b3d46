"""Sixty query/filter combinations through the search API and the search page, on both
databases; on PostgreSQL with the planner pushed to run every search in parallel workers.

Once `?q="cart total"&from=2020-01-01&to=2020-01-02` answered 500 on PostgreSQL
(`cannot start subtransactions during a parallel operation`): the indexed text
came from a plpgsql function with an EXCEPTION block declared PARALLEL SAFE, and
the planner, free to run it in a worker, did so on a big enough table. The
settings below make it do the same on a table of seven rows.

What each combination should answer is worked out here, apart from the code under
test: which rows each query matches is written down by hand, and the filters are
applied to the rows' known kind, time, conversation, subject and namespace.
"""

import re
from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection, transaction

from conversations import store, store_recorded
from conversations.formats.base import make_row
from conversations.imports.store import append_imported
from conversations.message_schema import encode_message
from conversations.search import reads
from conversations.search.params import parse_search
from conversations.search.reads import search_messages
from tests.api_support import Api, error_of, login_as, make_key
from tests.search_support import migrate_everything_forward

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]

ON_POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")

# Every plan the planner can make parallel is made parallel, and even a plan with no
# parallel part runs under a Gather in a worker (PostgreSQL 15's name; 16 renamed it).
PARALLEL = {
    "parallel_setup_cost": "0",
    "parallel_tuple_cost": "0",
    "min_parallel_table_scan_size": "0",
    "min_parallel_index_scan_size": "0",
    "max_parallel_workers_per_gather": "2",
}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# label: (conversation, kind, written at, message)
ROWS = {
    "A0": ("A", "user", at("2020-01-01T09:00:00"),
           {"kind": "user", "content": "My cart total is wrong and I want a refund"}),
    "A1": ("A", "assistant", at("2020-01-01T09:05:00"),
           {"kind": "assistant", "content": "The total in your cart is 40 EUR"}),
    "A2": ("A", "tool", at("2020-01-02T10:00:00"),
           {"kind": "tool", "tool_call_id": "c1", "name": "lookup", "content": "cart total: 40; shipping: free"}),
    "A3": ("A", "note", at("2020-01-03T08:00:00"), {"kind": "note", "text": "Refunded the cart total"}),
    "B0": ("B", "user", at("2020-01-01T12:00:00"), {"kind": "user", "content": "Where is my shipping label?"}),
    "B1": ("B", "assistant", at("2020-01-02T12:00:00"),
           {"kind": "assistant", "content": "Your cart total was refunded"}),
    "B2": ("B", "user", at("2020-01-02T23:59:59"), {"kind": "user", "content": "total cart confusion"}),
}
CONVERSATIONS = {"A": {"title": "Order 7", "subject": "Customer:7", "namespace": "shop"},
                 "B": {"title": "Parcel", "subject": "customer:9", "namespace": ""}}

# query: the rows it matches with no filter, or the field a 400 names.
QUERIES = {
    "refund": {"A0", "A3", "B1"},  # stems: refunded
    "cart total": {"A0", "A1", "A2", "A3", "B1", "B2"},
    '"cart total"': {"A0", "A2", "A3", "B1"},  # not "total in your cart", not "total cart"
    "refu*": {"A0", "A3", "B1"},
    "shipping OR refund": {"A0", "A2", "A3", "B0", "B1"},
    "cart -refund": {"A1", "A2", "B2"},
    '"cart total" NOT shipping': {"A0", "A3", "B1"},
    # Hostile: an unclosed quote, SQL, the index's own syntax.
    '"cart total': "q",
    "'; DROP TABLE conversations_message; --": "q",
    "NEAR(cart total) AND x:*": "q",
}

# name: (API and page parameters, which rows pass)
FILTERS = {
    "none": ({}, lambda r, c: True),
    # The request of the issue.
    "from and to, two days": ({"from": "2020-01-01", "to": "2020-01-02"},
                              lambda r, c: at("2020-01-01T00:00:00") <= r[2] < at("2020-01-03T00:00:00")),
    "from an instant": ({"from": "2020-01-02T12:00:00Z"}, lambda r, c: r[2] >= at("2020-01-02T12:00:00")),
    "one conversation": ({"conversation": "A"}, lambda r, c: r[0] == "A"),
    "kinds and a namespace": ({"kind": ["user", "tool"], "namespace": "shop"},
                              lambda r, c: r[1] in ("user", "tool") and c["namespace"] == "shop"),
    "a subject and to": ({"subject": "CUSTOMER:9", "to": "2020-01-02"},
                         lambda r, c: c["subject"].lower() == "customer:9" and r[2] < at("2020-01-03T00:00:00")),
}

COMBINATIONS = [(q, f) for q in QUERIES for f in FILTERS]
assert len(COMBINATIONS) == 60


@pytest.fixture
def corpus():
    """The two conversations, their rows written with their own times (as an import does)."""
    ids = {}
    for name, fields in CONVERSATIONS.items():
        ids[name] = store.create_conversation(**fields).pk
        rows = [make_row(m, when, None, [], None) for (c, _, when, m) in ROWS.values() if c == name]
        append_imported(conversation_id=ids[name], rows=rows, expected_position=0)
    return ids


def go_parallel():
    """Settings of this connection until the test's transaction ends."""
    with connection.cursor() as cursor:
        for name, value in PARALLEL.items():
            cursor.execute(f"SET LOCAL {name} = {value}")
        cursor.execute("SELECT current_setting('server_version_num')::int")
        forced = "debug_parallel_query" if cursor.fetchone()[0] >= 160000 else "force_parallel_mode"
        cursor.execute(f"SET LOCAL {forced} = on")


# A date filter is searched from the rows in its range when it holds few, as on this
# small store, and from the full-text index's hits when it holds many ("index first",
# the statement that once failed): both ways on both databases, and on
# PostgreSQL both again with the planner made to go parallel. SQLite never runs a
# query in parallel workers.
@pytest.fixture(params=["as planned", "index first"] + (["parallel", "parallel, index first"] if ON_POSTGRES else []))
def planner(request, monkeypatch):
    if request.param.startswith("parallel"):
        go_parallel()
    if request.param.endswith("index first"):
        monkeypatch.setattr(reads, "DATES_FIRST_BELOW", 0)
    return request.param


def expected(query: str, filter_name: str, ids) -> list[tuple[str, int]]:
    """(conversation id, position) of the hits, newest conversation first, latest row first."""
    matched = QUERIES[query]
    keep = FILTERS[filter_name][1]
    order = list(CONVERSATIONS)
    positions = {}
    for label, row in ROWS.items():
        positions[label] = sum(1 for other, r in ROWS.items() if r[0] == row[0] and other < label)
    hits = [label for label in matched if keep(ROWS[label], CONVERSATIONS[ROWS[label][0]])]
    hits.sort(key=lambda label: (order.index(ROWS[label][0]), positions[label]), reverse=True)
    return [(str(ids[ROWS[label][0]]), positions[label]) for label in hits]


def params_for(query: str, filter_name: str, ids) -> dict:
    params = {"q": query, **FILTERS[filter_name][0]}
    if params.get("conversation") in ids:
        params["conversation"] = str(ids[params["conversation"]])
    return params


@pytest.mark.parametrize("query, filter_name", COMBINATIONS)
def test_it_answers_every_combination_through_the_api(client, corpus, planner, query, filter_name):
    reader = Api(client, make_key(["read"], name="reader"))
    r = reader.get("/search", params_for(query, filter_name, corpus))
    assert r.status_code < 500, r.content
    if isinstance(QUERIES[query], str):
        assert r.status_code == 400 and error_of(r)["field"] == QUERIES[query]
        return
    assert r.status_code == 200, r.content
    found = [(i["conversation_id"], i["position"]) for i in r.json()["items"]]
    assert found == expected(query, filter_name, corpus)


def test_it_pages_a_date_filtered_search_with_its_cursor(client, corpus, planner):
    c = store.create_conversation(title="pages")
    rows = [make_row({"kind": "note", "text": f"cart total page {i}"}, at(f"2020-01-05T10:0{i}:00"), None, [], None)
            for i in range(7)]
    append_imported(conversation_id=c.pk, rows=rows, expected_position=0)
    reader = Api(client, make_key(["read"], name="reader"))
    body = reader.get("/search", {"q": '"cart total"', "from": "2020-01-05", "to": "2020-01-05", "limit": 3}).json()
    seen = [i["position"] for i in body["items"]]
    while body["next_url"]:
        body = client.get(body["next_url"], headers={"Authorization": f"Bearer {reader.key}"}).json()
        seen += [i["position"] for i in body["items"]]
    assert seen == [6, 5, 4, 3, 2, 1, 0]


HIT = re.compile(r'<li class="hit kind-\w+">\s*<div class="hit-head">\s*<a class="pos" '
                 r'href="/conversations/([0-9a-f-]+)/\?at=(\d+)(?:&amp;q=[^"#]*)?#p\d+"')


@pytest.mark.parametrize("query, filter_name", COMBINATIONS)
def test_it_answers_every_combination_on_the_page(client, corpus, planner, query, filter_name):
    login_as(client, "auditor")
    # Newest first: the page's row list (the default, best match first, groups them).
    r = client.get("/search/", {**params_for(query, filter_name, corpus), "order": "newest"})
    assert r.status_code < 500
    body = r.content.decode()
    if isinstance(QUERIES[query], str):
        assert r.status_code == 400 and 'aria-invalid="true"' in body
        return
    assert r.status_code == 200
    assert [(cid, int(p)) for cid, p in HIT.findall(body)] == expected(query, filter_name, corpus)


def test_the_parallel_settings_put_the_issues_search_under_a_gather(corpus, monkeypatch):
    """The settings are not vacuous: on PostgreSQL the statement of the issue's search
    (from the full-text index's hits) is planned under a Gather, run in a worker, and
    answers."""
    monkeypatch.setattr(reads, "DATES_FIRST_BELOW", 0)
    if ON_POSTGRES:
        go_parallel()
    parsed = parse_search({"q": '"cart total"', "from": "2020-01-01", "to": "2020-01-02"})
    sent = []

    def catch(execute, sql, params, many, context):
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(catch):
        page = search_messages(parsed.query, filters=parsed.filters)
    assert [(str(h.conversation_id), h.position) for h in page.hits] == expected(
        '"cart total"', "from and to, two days", corpus)
    if not ON_POSTGRES:
        return
    sql, params = sent[-1]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "Gather" in plan, plan


@pytest.mark.django_db(transaction=True)
def test_the_migration_goes_back_and_forward_again():
    """Migration 0003 undone restores 0002's function index and labels; done again, the
    functions are PARALLEL RESTRICTED, the words stored, and search finds rows written
    while it was undone."""
    from django.db.migrations.executor import MigrationExecutor

    def migrate(target):
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([target])

    def labels():
        if not ON_POSTGRES:
            return None
        with connection.cursor() as cursor:
            cursor.execute("SELECT proname, proparallel FROM pg_proc WHERE proname LIKE 'search_message_t%%' "
                           "ORDER BY proname")
            functions = dict(cursor.fetchall())
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'search_message_tsv_idx'")
            return functions, cursor.fetchone()[0]

    c = store.create_conversation(title="round trip")
    store.append_message(conversation_id=c.pk, message={"kind": "user", "content": "before the round trip"})
    after = labels()
    try:
        migrate(("search", "0002_pending_rows"))
        if ON_POSTGRES:
            functions, index = labels()
            assert functions == {"search_message_text": "s", "search_message_tsvector": "s"}
            assert "search_message_tsvector(content)" in index
        # Through the import's staged path, which reads no column of the conversation table newer
        # than its migration 0010: undoing search 0003 undoes conversations 0011 and later (0011
        # depends on search 0006), and the store's append reads `staged`, which 0015 adds.
        kind, text = encode_message({"kind": "user", "content": "during the round trip"})
        with transaction.atomic():
            store_recorded.append_rows(conversation_id=c.pk, rows=[(kind, text, None)], expected_position=1,
                                       staged=True)
    finally:
        migrate(("search", "0003_stored_words_date_index"))
        migrate_everything_forward()  # where every later test expects the schema
    assert labels() == after
    if ON_POSTGRES:
        functions, index = after
        assert functions == {"search_message_text": "r", "search_message_tsvector": "r"}
        assert "search_tsv" in index and "WHERE (search_tsv IS NOT NULL)" in index  # migration 0004
    assert [h.position for h in search_messages("round trip").hits] == [1, 0]
