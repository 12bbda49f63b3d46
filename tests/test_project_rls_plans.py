"""PostgreSQL: what the fence's policies leave to the planner (conversations migration 0016).

A message row carries its conversation's project, written by the database whatever a writer
sends, so its policy compares a column instead of reading the conversation; and the policies'
project comparison does not make the planner count the project twice, so a project's reads
are planned as the same reads without the policies are."""

import pytest
from django.db import connection

from conversations import projects, store
from conversations.facts import store as facts
from conversations.project_store import create_project
from tests.project_rows import fill
from tests.rls_support import django_connection_as_app_role

pytestmark = pytest.mark.postgresql_only

# (child table, parent table, the column that names the parent)
CARRIERS = [("conversations_message", "conversations_conversation", "conversation_id"),
            ("facts_factevent", "facts_fact", "fact_id"), ("facts_factvector", "facts_fact", "fact_id")]


def mismatched(cursor, child: str, parent: str, column: str) -> tuple[int, int, int]:
    """Rows of `child` whose project is not their parent's; all its rows; its projects."""
    cursor.execute(f"SELECT count(*) FILTER (WHERE c.project_id IS DISTINCT FROM p.project_id), count(*), "
                   f"count(DISTINCT c.project_id) FROM {child} c JOIN {parent} p ON p.id = c.{column}")
    return cursor.fetchone()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_every_row_holds_its_parents_project(client):
    # Appends, forks, checkpoints, imports, OTLP, LangGraph, facts and their recall: every way
    # fill() writes rows.
    fill(client, create_project(slug="plan-a"), "alpha-mark", subject="customer:plans")
    fill(client, create_project(slug="plan-b"), "beta-mark", subject="customer:plans")
    with connection.cursor() as cursor:
        for child, parent, column in CARRIERS:
            wrong, rows, kinds = mismatched(cursor, child, parent, column)
            assert rows >= 2 and kinds == 2, (child, rows, kinds)
            assert wrong == 0, child


@pytest.mark.django_db
def test_a_writer_cannot_give_a_message_another_project():
    a, b = create_project(slug="plan-a"), create_project(slug="plan-b")
    with projects.scoped(projects.one(a.pk)):
        conversation = store.create_conversation(title="ours")
        store.append_message(conversation_id=conversation.id, message={"kind": "user", "content": "first"})
    with connection.cursor() as cursor:
        # A position handed out and not yet written, as an append holds one between its statements.
        cursor.execute("UPDATE conversations_conversation SET next_position = 2 WHERE id = %s", [conversation.id])
        cursor.execute("INSERT INTO conversations_message (conversation_id, position, kind, content, created_at, "
                       "project_id) VALUES (%s, 1, 'user', '\"claimed\"', now(), %s)", [conversation.id, b.pk])
        cursor.execute("SELECT position, project_id FROM conversations_message WHERE conversation_id = %s "
                       "ORDER BY position", [conversation.id])
        assert cursor.fetchall() == [(0, a.pk), (1, a.pk)]


@pytest.mark.django_db
def test_a_writer_cannot_give_a_fact_event_another_project():
    a, b = create_project(slug="plan-a"), create_project(slug="plan-b")
    with projects.scoped(projects.one(a.pk)):
        fact = facts.propose_fact(subject="customer:plans", text="likes tea", importance=3, created_by="key:agent")
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO facts_factevent (fact_id, kind, at, actor, reason, detail, project_id) "
                       "VALUES (%s, 'recalled', now(), 'key:agent', '', '{}', %s) RETURNING project_id",
                       [fact.pk, b.pk])
        assert cursor.fetchone() == (a.pk,)
        cursor.execute("SELECT DISTINCT project_id FROM facts_factevent WHERE fact_id = %s", [fact.pk])
        assert cursor.fetchall() == [(a.pk,)]


def _estimate(cursor, sql: str, params) -> float:
    cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
    return cursor.fetchone()[0][0]["Plan"]["Plan Rows"]


@pytest.mark.django_db
def test_the_policies_leave_a_projects_estimates_as_they_were():
    made = [create_project(slug=f"plan-{p}") for p in range(4)]
    for project in made:
        with projects.scoped(projects.one(project.pk)):
            for n in range(30):
                conversation = store.create_conversation(title=f"{project.slug} {n}")
                store.append_messages(conversation_id=conversation.id,
                                      messages=[{"kind": "user", "content": f"row {i}"} for i in range(5)])
    ours = made[1].pk
    reads = [
        ("SELECT id FROM conversations_conversation WHERE project_id = %s ORDER BY last_activity_at DESC", [ours]),
        ("SELECT position FROM conversations_message m JOIN conversations_conversation c "
         "ON c.id = m.conversation_id WHERE c.project_id = %s", [ours]),
    ]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE conversations_conversation")
        cursor.execute("ANALYZE conversations_message")
        unfenced = [_estimate(cursor, sql, params) for sql, params in reads]
    with projects.scoped(projects.one(ours)), django_connection_as_app_role(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM conversations_conversation")
        assert cursor.fetchone() == (30,), "the policies apply to this role"
        fenced = [_estimate(cursor, sql, params) for sql, params in reads]
    # Counted twice, the project's 1/4 of the rows became 1/16: a quarter of the estimate.
    assert unfenced[0] >= 25
    for before, after in zip(unfenced, fenced, strict=True):
        assert after >= 0.8 * before, (unfenced, fenced)
