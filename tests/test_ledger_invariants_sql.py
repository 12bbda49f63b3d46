"""The ledger's append-only rules, attacked with raw SQL: the database itself must refuse."""

import importlib
from types import SimpleNamespace

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from conversations import projects, store
from conversations.ledger import store as ledger
from conversations.ledger.models import Action, TaskStateEvent, WorkspaceSnapshot
from conversations.project_store import create_project

pytestmark = pytest.mark.django_db

KEY = "refund:T-40219:SU-88421:11800"


def db_id(conversation):
    return store._db_uuid(conversation.pk)


def run_sql(sql, params=()):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return cursor.rowcount


def now():
    return connection.ops.adapt_datetimefield_value(timezone.now())


@pytest.fixture
def ticket():
    c = store.create_conversation(title="guarded ledger")
    store.append_message(conversation_id=c.pk, message={"kind": "note", "text": "refund asked"})
    ledger.set_state(conversation_id=c.pk, state={"decision": "refund"}, expected_version=0)
    ledger.record_action(conversation_id=c.pk, idempotency_key=KEY, name="issue_refund", result={"id": "RF-1"})
    ledger.record_action(conversation_id=c.pk, idempotency_key=KEY, name="issue_refund", result={"id": "RF-1"})
    ledger.record_snapshot(conversation_id=c.pk, position=0, repo="/src/shop", commit="a" * 40,
                           files_changed=1, insertions=3, deletions=0)
    return c


def ledger_rows(conversation):
    return (
        list(TaskStateEvent.objects.of(conversation.pk).values_list("version", "state")),
        list(Action.objects.of(conversation.pk).order_by("id").values_list("status", "result")),
        list(WorkspaceSnapshot.objects.of(conversation.pk).values_list("commit_sha", "insertions")),
    )


@pytest.mark.parametrize("sql", [
    "UPDATE ledger_taskstateevent SET state = '{\"decision\":\"replace\"}' WHERE conversation_id = %s",
    "UPDATE ledger_taskstateevent SET version = version + 1 WHERE conversation_id = %s",
    "UPDATE ledger_action SET status = 'failed' WHERE conversation_id = %s",
    "UPDATE ledger_action SET result = '{\"id\":\"RF-2\"}' WHERE conversation_id = %s",
    "UPDATE ledger_action SET idempotency_key = 'other' WHERE conversation_id = %s",
    "UPDATE ledger_workspacesnapshot SET commit_sha = 'bbbb' WHERE conversation_id = %s",
    "UPDATE ledger_workspacesnapshot SET insertions = 0 WHERE conversation_id = %s",
])
def test_a_ledger_row_cannot_be_updated(ticket, sql):
    before = ledger_rows(ticket)
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(sql, [db_id(ticket)])
    assert ledger_rows(ticket) == before


@pytest.mark.parametrize("table", ["ledger_taskstateevent", "ledger_action", "ledger_workspacesnapshot"])
def test_a_ledger_row_cannot_be_deleted_outside_the_deletion_path(ticket, table):
    before = ledger_rows(ticket)
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(f"DELETE FROM {table} WHERE conversation_id = %s", [db_id(ticket)])
    with pytest.raises(DatabaseError, match="append-only"):
        run_sql(f"DELETE FROM {table}")
    assert ledger_rows(ticket) == before


def test_the_mark_of_one_conversation_does_not_open_anothers(ticket):
    bystander = store.create_conversation(title="bystander")
    ledger.record_action(conversation_id=bystander.pk, idempotency_key="keep", name="n")
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("UPDATE conversations_conversation SET deleting = %s WHERE id = %s", [True, db_id(ticket)])
            cursor.execute("DELETE FROM ledger_action")
    assert Action.objects.of(bystander.pk).count() == 1 and Action.objects.of(ticket.pk).count() == 2


def test_rows_are_deleted_with_their_conversation_on_the_deletion_path(ticket):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE conversations_conversation SET deleting = %s WHERE id = %s", [True, db_id(ticket)])
        for table in ("ledger_taskstateevent", "ledger_action", "ledger_workspacesnapshot"):
            cursor.execute(f"DELETE FROM {table} WHERE conversation_id = %s", [db_id(ticket)])
            assert cursor.rowcount >= 1
    assert ledger_rows(ticket) == ([], [], [])


def test_a_second_performed_entry_for_a_key_is_refused(ticket):
    with pytest.raises(IntegrityError):
        run_sql(
            "INSERT INTO ledger_action (project_id, conversation_id, position, namespace, idempotency_key, name, "
            "arguments, result, status, actor, created_at) VALUES (1, %s, 0, '', %s, 'issue_refund', '{}', 'null', "
            "'performed', 'mallory', %s)",
            [db_id(ticket), KEY, now()],
        )
    # Also from another conversation: the key is unique across the namespace.
    other = store.create_conversation(title="elsewhere")
    with pytest.raises(IntegrityError):
        run_sql(
            "INSERT INTO ledger_action (project_id, conversation_id, position, namespace, idempotency_key, name, "
            "arguments, result, status, actor, created_at) VALUES (1, %s, -1, '', %s, 'issue_refund', '{}', 'null', "
            "'performed', 'mallory', %s)",
            [db_id(other), KEY, now()],
        )
    assert Action.objects.filter(status="performed").count() == 1


def test_the_same_key_is_performed_once_in_each_project(ticket):
    project = create_project(slug="elsewhere")
    with projects.scoped(projects.one(project.pk)):
        theirs = store.create_conversation(title="another project's")
    run_sql(
        "INSERT INTO ledger_action (project_id, conversation_id, position, namespace, idempotency_key, name, "
        "arguments, result, status, actor, created_at) VALUES (%s, %s, -1, '', %s, 'issue_refund', '{}', 'null', "
        "'performed', 'their agent', %s)",
        [project.pk, db_id(theirs), KEY, now()],
    )
    assert Action.everywhere.filter(status="performed", idempotency_key=KEY).count() == 2


def test_the_migration_gives_each_action_its_conversations_project(ticket):
    """Ledger migration 0005 added the column with every row in `default`; rows of another
    project's conversations take that project, and the guard against updates is back after."""
    project = create_project(slug="elsewhere")
    with projects.scoped(projects.one(project.pk)):
        theirs = store.create_conversation(title="another project's")
    run_sql(
        "INSERT INTO ledger_action (project_id, conversation_id, position, namespace, idempotency_key, name, "
        "arguments, result, status, actor, created_at) VALUES (1, %s, -1, '', 'k', 'n', '{}', 'null', 'failed', "
        "'x', %s)",
        [db_id(theirs), now()],
    )
    migration = importlib.import_module("conversations.ledger.migrations.0005_action_project")
    with transaction.atomic(), connection.cursor() as cursor:
        # What the migration's statements need of a schema editor: its connection and execute().
        editor = SimpleNamespace(connection=connection, execute=lambda sql, params=None: cursor.execute(sql))
        if connection.vendor == "postgresql":
            # The test's own inserts are still to be checked (deferred foreign keys): a migration has none.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        migration.take_conversation_projects(None, editor)
    assert Action.everywhere.get(conversation_id=theirs.pk).project_id == project.pk
    assert {a.project_id for a in Action.everywhere.filter(conversation_id=ticket.pk)} == {1}
    with pytest.raises(DatabaseError):
        run_sql("UPDATE ledger_action SET project_id = 1 WHERE conversation_id = %s", [db_id(theirs)])


@pytest.mark.parametrize("status, original", [("already_performed", None), ("refunded", 1)])
def test_an_action_needs_a_known_status_and_a_retry_its_original(ticket, status, original):
    with pytest.raises(IntegrityError):
        run_sql(
            "INSERT INTO ledger_action (project_id, conversation_id, position, namespace, idempotency_key, name, "
            "arguments, result, status, original_id, actor, created_at) VALUES (1, %s, 0, '', 'k2', 'n', '{}', "
            "'null', %s, %s, 'x', %s)",
            [db_id(ticket), status, original, now()],
        )


@pytest.mark.parametrize("version", [1, 3, 0])
def test_a_task_state_version_must_be_the_next_one(ticket, version):
    with pytest.raises(DatabaseError):
        run_sql(
            "INSERT INTO ledger_taskstateevent (conversation_id, version, position, state, changes, actor, created_at) "
            "VALUES (%s, %s, 0, '{}', '[]', 'mallory', %s)",
            [db_id(ticket), version, now()],
        )
    assert TaskStateEvent.objects.of(ticket.pk).count() == 1
    # The next version is accepted, as the store would write it.
    run_sql(
        "INSERT INTO ledger_taskstateevent (conversation_id, version, position, state, changes, actor, created_at) "
        "VALUES (%s, 2, 0, '{}', '[]', 'store', %s)",
        [db_id(ticket), now()],
    )
