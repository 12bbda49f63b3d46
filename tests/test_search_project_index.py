"""A project's search through the full-text index that carries each row's project (SQLite,
search migration 0011), and the same answers on PostgreSQL, whose search reads the rows."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import projects, store
from conversations.models import Message
from conversations.project_store import create_project
from conversations.search import reads
from conversations.search.models import project_token
from conversations.search.reads import Filters, search_messages
from tests.search_support import (
    assert_index_sound,
    index_setting,
    into_the_index,
    migrate_everything_forward,
    rows_by_project,
    rows_by_project_token,
)

pytestmark = pytest.mark.django_db(transaction=True)

SQLITE = connection.vendor == "sqlite"


@pytest.fixture
def two():
    return create_project(slug="alpha"), create_project(slug="beta")


def inside(project):
    return projects.scoped(projects.one(project.pk))


def write(project, title, texts):
    with inside(project):
        c = store.create_conversation(title=title)
        for text in texts:
            store.append_message(conversation_id=c.pk, message={"kind": "user", "content": text})
    return c


def interleaved(two, rows=40, conversations=6):
    """Both projects' conversations created in turn, every row holding "parcel": each project's
    rows spread through the index among the other's, more than FEW_HITS of them in all."""
    made = {two[0].pk: [], two[1].pk: []}
    for n in range(conversations):
        project = two[n % 2]
        made[project.pk].append(write(project, f"{project.slug} {n}", [f"parcel {project.slug} row {i}"
                                                                        for i in range(rows)]))
    into_the_index()
    return made


def expected(conversations, limit):
    """The newest `limit` rows of these conversations, newest conversation first."""
    rows = [(c.pk, m.position) for c in sorted(conversations, key=lambda c: c.created_at, reverse=True)
            for m in Message.objects.filter(conversation_id=c.pk).order_by("-position")]
    return rows[:limit]


def found(q, limit, cursor=None):
    page = search_messages(q, limit=limit, cursor=cursor)
    return [(h.conversation_id, h.position) for h in page.hits], page.next_cursor


@pytest.mark.parametrize("common", [True, False], ids=["common", "rare"])
def test_both_ways_through_the_index_find_the_projects_own_rows_newest_first(two, monkeypatch, common):
    made = interleaved(two)
    # Whichever way the words are read (SQLite: the index with the project's token, or every
    # hit checked at its key; PostgreSQL: the project's conversations walked newest first, or
    # the GIN index), the answer is the same: the project's rows only, newest first, paged
    # without a gap, filtered alike.
    monkeypatch.setattr(reads, "_many_hits", lambda match: common)
    monkeypatch.setattr(reads, "_postgres_common", lambda tsquery, params: common)
    for project in two:
        with inside(project):
            want = expected(made[project.pk], 200)
            first, cursor = found("parcel", 50)
            second, _ = found("parcel", 50, cursor)
        assert first + second == want[:100]
        assert {cid for cid, _ in first + second} <= {c.pk for c in made[project.pk]}
        with inside(project):
            newest = made[project.pk][-1]
            assert [h.position for h in search_messages("parcel", filters=Filters(subject="none")).hits] == []
            assert [(h.conversation_id, h.position) for h in search_messages(
                '"row 3"', limit=10, filters=Filters(namespace="", kinds=("user",))).hits][:1] == [(newest.pk, 3)]


def test_a_word_that_spells_a_projects_token_finds_only_rows_that_hold_it(two):
    alpha, beta = two
    write(alpha, "plain", ["nothing special here"] * 70)
    token = project_token(alpha.pk)
    holder = write(beta, "spelled", [f"the code {token} came up"])
    into_the_index()
    with inside(alpha):
        assert found(token, 20)[0] == []
        assert found(f'"{token}"', 20)[0] == []
    with inside(beta):
        assert found(token, 20)[0] == [(holder.pk, 0)]
    with projects.scoped(projects.EVERY):
        assert found(token, 20)[0] == [(holder.pk, 0)]


@pytest.mark.sqlite_only
def test_whether_words_are_common_is_asked_once_and_remembered(two):
    interleaved(two)
    reads._many_hits_known.clear()
    with inside(two[0]), CaptureQueriesContext(connection) as statements:
        for q in ("parcel", "parcel", "nowhere", "parcel"):
            found(q, 20)
    probes = [s["sql"] for s in statements.captured_queries if "SELECT count(*) FROM (SELECT 1 FROM" in s["sql"]]
    assert len(probes) == 2
    assert {match: many for match, (many, _) in reads._many_hits_known.items()} == {
        'body : ("parcel")': True, 'body : ("nowhere")': False}
    # The token is asked for where the words are common, and only there.
    token = f'project : "{project_token(two[0].pk)}"'
    searches = [s["sql"] for s in statements.captured_queries
                if "search_message_fts MATCH" in s["sql"] and "SELECT count(*)" not in s["sql"]]
    assert [token in sql for sql in searches] == [True, True, False, True]


@pytest.mark.sqlite_only
def test_every_index_entry_carries_its_projects_token(two):
    interleaved(two, rows=30, conversations=4)
    assert rows_by_project_token() == rows_by_project() == {two[0].pk: 60, two[1].pk: 60}
    assert_index_sound()


@pytest.mark.sqlite_only
def test_the_index_merges_its_segments_when_two_lie_at_one_level():
    """A fenced search reads backwards through every segment (migration 0013): FTS5 merges
    at four a level unless told, which left six segments a day's writes after a prune."""
    from django.db.migrations.executor import MigrationExecutor

    assert index_setting("automerge") == 2
    try:
        MigrationExecutor(connection).migrate([("search", "0012_key_project_index")])
        assert index_setting("automerge") == 4
    finally:
        migrate_everything_forward()
    assert index_setting("automerge") == 2


@pytest.mark.sqlite_only
def test_the_migration_undone_and_done_again_builds_the_index_with_every_token(two):
    from django.db.migrations.executor import MigrationExecutor

    made = interleaved(two, rows=30, conversations=4)
    waiting = write(two[1], "waiting", ["parcel waits"])  # stays in the pending table
    try:
        MigrationExecutor(connection).migrate([("search", "0010_unindex_in_window")])
        with connection.cursor() as cursor:
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'search_message_fts'")
            assert "project" not in cursor.fetchone()[0]
    finally:
        migrate_everything_forward()
    assert rows_by_project_token() == rows_by_project()
    assert_index_sound()
    assert index_setting("automerge") == 2  # migration 0013 again, on the index 0011 built anew
    with inside(two[1]):
        hits, _ = found("parcel", 100)
    assert hits[0] == (waiting.pk, 0)
    assert sorted(hits[1:]) == sorted(expected(made[two[1].pk], 100))


@pytest.mark.postgresql_only
def test_postgresql_asks_the_planner_whether_words_are_common_once(two):
    interleaved(two)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_message")
    reads._postgres_common_known.clear()
    with inside(two[0]), CaptureQueriesContext(connection) as statements:
        for q in ("parcel", "parcel", "quorblet", "parcel"):
            found(q, 20)
    asked = [s["sql"] for s in statements.captured_queries if s["sql"].startswith("EXPLAIN")]
    assert len(asked) == 2
    assert sorted(common for common, _ in reads._postgres_common_known.values()) == [False, True]
    walks = [s["sql"] for s in statements.captured_queries if "CROSS JOIN LATERAL" in s["sql"]]
    assert len(walks) == 3
