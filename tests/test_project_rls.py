"""Row-level security on PostgreSQL: the database holds the project fence when a query forgets it.

Every table of project data (found from the models: tests/project_rows.py) has a policy, and,
read with raw SQL as a role the policies apply to (tests/rls_support.py): with project A set,
no row of B is returned, and no row of B is updated, deleted or written; with no project set,
no row at all; with `memoryui.all_projects` on, every row. Then the application itself runs
as that role, and a project's requests work as they do for the superuser the tests connect as
(memoryui/postgresql/base.py sends the scope on every path)."""

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.db import connection
from psycopg import errors, sql

from conversations import chain_verify
from conversations.migration_sql import OUTSIDE_ROW_LEVEL_SECURITY
from conversations.project_store import create_project
from conversations.roles import assign_role
from tests.helpers import make_user
from tests.project_rows import fill, project_tables, row_key, rows_by_project
from tests.retention_support import ROOT, subprocess_env
from tests.rls_support import django_connection_as_app_role, grants, role_name

pytestmark = pytest.mark.postgresql_only


def fenced_tables():
    return [t for t in project_tables() if t.table not in OUTSIDE_ROW_LEVEL_SECURITY]


# Partitions (the message table's: conversations/partitions.py), every level down.
PARTITIONS = ("WITH RECURSIVE leaf(oid) AS (SELECT %s::regclass::oid UNION ALL SELECT i.inhrelid "
              "FROM pg_inherits i JOIN leaf ON i.inhparent = leaf.oid) "
              "SELECT c.relname FROM leaf JOIN pg_class c ON c.oid = leaf.oid WHERE c.relkind = 'r' "
              "AND c.relispartition")


def partitions_of(cursor, table: str) -> list[str]:
    return [name for (name,) in cursor.execute(PARTITIONS, [table]).fetchall()]


@pytest.mark.django_db
def test_every_table_of_project_data_has_a_forced_policy():
    tables = [t.table for t in fenced_tables()]
    assert {"conversations_message", "facts_factevent", "retention_erasedrow", "imports_sourceentry",
            "conversations_idempotencykey"} <= set(tables)
    with connection.cursor() as cursor:
        # A query that names a partition meets the partition's own policies, not its table's.
        tables += [leaf for table in tables for leaf in partitions_of(cursor, table)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
                       "(SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) "
                       "FROM pg_class c WHERE c.relname = ANY(%s)", [tables])
        found = {name: (on, forced, policies) for name, on, forced, policies in cursor.fetchall()}
    missing = [t for t in tables if found.get(t) != (True, True, 1)]
    assert not missing, f"tables of project data without a forced row-level security policy: {missing}"


@pytest.mark.django_db
def test_every_table_is_a_model_whose_project_data_is_found():
    # A table a migration makes with raw SQL is seen by no model: it would escape the check above.
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')")
        present = {name for (name,) in cursor.fetchall()}
        known = set(connection.introspection.django_table_names(include_views=False)) | {"django_migrations"}
        # The meaning queue holds numbers only (the index ids of rows waiting for a vector): it is
        # read joined to the message table, whose policy fences it (conversations/search/meaning.py).
        known |= {"search_meaning_pending"}
        known |= {leaf for table in known for leaf in partitions_of(cursor, table)}
    assert present <= known, f"tables no model describes (do they hold a project's rows?): {present - known}"


@pytest.fixture
def raw():
    """A connection of its own to the test database, in one transaction rolled back at the end."""
    with psycopg.connect(**{k: v for k, v in connection.get_connection_params().items()
                            if k not in ("cursor_factory", "context")}) as conn:
        yield conn
        conn.rollback()


def _set(conn, project="", all_projects="off"):
    conn.execute("SELECT set_config('memoryui.project', %s, false), set_config('memoryui.all_projects', %s, false)",
                 [str(project), all_projects])


def _keys(conn, table, relation: str | None = None) -> set:
    """The keys of the rows of `table` the connection reads (through `relation`: one of its partitions)."""
    columns = sql.SQL(", ").join(map(sql.Identifier, table.key_columns))
    relation = sql.Identifier(relation or table.table)
    return {row_key(r) for r in conn.execute(sql.SQL("SELECT {} FROM {}").format(columns, relation))}


def _where_key(table, keys) -> sql.Composed:
    columns = sql.SQL(", ").join(map(sql.Identifier, table.key_columns))
    rows = sql.SQL(", ").join(sql.SQL("({})").format(sql.SQL(", ").join(map(sql.Literal, key))) for key in keys)
    return sql.SQL("({}) IN ({})").format(columns, rows)


def _one_row(conn, table, key) -> dict:
    cursor = conn.execute(sql.SQL("SELECT * FROM {} WHERE ").format(sql.Identifier(table.table))
                          + _where_key(table, [key]))
    return dict(zip([d.name for d in cursor.description], cursor.fetchone(), strict=True))


def _refused_by_the_fence(error) -> bool:
    """A policy refused the row, or an append-only guard did, which reads the parent through
    its policy too (a message's guard finds no position handed out in a conversation it cannot see)."""
    if isinstance(error, errors.InsufficientPrivilege):
        return "row-level security" in str(error)
    return "PL/pgSQL function memoryui_guard" in (error.diag.context or "")


def _auto_key(table) -> set:
    pk = table.model._meta.pk
    return {pk.column} if pk.get_internal_type() in ("AutoField", "BigAutoField") else set()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_raw_sql_as_the_application_role_sees_only_the_project_it_set(client, raw):
    a, b = create_project(slug="rls-a"), create_project(slug="rls-b")
    fill(client, a, "alpha-mark", subject="customer:rls")
    fill(client, b, "beta-mark", subject="customer:rls")
    cache, tables = {}, fenced_tables()
    owned = {t.table: rows_by_project(t, cache) for t in tables}
    empty = [name for name, rows in owned.items() if not rows.get(a.pk) or not rows.get(b.pk)]
    assert not empty, f"tests/project_rows.py fill() writes no row of these tables in both projects: {empty}"
    totals = {name: sum(len(keyed) for keyed in rows.values()) for name, rows in owned.items()}
    # B's rows as the superuser reads them, for the INSERT below.
    copies = {t.table: _one_row(raw, t, next(iter(owned[t.table][b.pk]))) for t in tables}

    generated = {name for (name,) in raw.execute("SELECT attname FROM pg_attribute WHERE attgenerated <> ''")}
    leaves = {t.table: partitions_of(raw, t.table) for t in tables}
    assert leaves["conversations_message"], "the message table is partitioned on PostgreSQL"
    role = role_name()
    for statement in grants(role):
        raw.execute(statement)
    raw.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))

    _set(raw, project=a.pk)
    for table in tables:
        ours, theirs = set(owned[table.table][a.pk]), set(owned[table.table][b.pk])
        seen = _keys(raw, table)
        assert not seen & theirs, f"{table.table}: project A reads B's rows"
        assert ours <= seen, f"{table.table}: project A does not read its own rows"
        through = set().union(*(_keys(raw, table, leaf) for leaf in leaves[table.table])) if leaves[table.table] \
            else seen
        assert through == seen, f"{table.table}: its partitions answer project A otherwise than the table"
        first = table.key_columns[0]
        changed = raw.execute(sql.SQL("UPDATE {} SET {} = {} WHERE ").format(
            sql.Identifier(table.table), sql.Identifier(first), sql.Identifier(first)) + _where_key(table, theirs))
        assert changed.rowcount == 0, f"{table.table}: project A updated B's rows"
        deleted = raw.execute(sql.SQL("DELETE FROM {} WHERE ").format(sql.Identifier(table.table))
                              + _where_key(table, theirs))
        assert deleted.rowcount == 0, f"{table.table}: project A deleted B's rows"
        row = {k: v for k, v in copies[table.table].items() if k not in _auto_key(table) | generated}
        insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            sql.Identifier(table.table), sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(sql.Placeholder() * len(row)))
        with pytest.raises(psycopg.Error) as refused, raw.transaction():
            raw.execute(insert, [psycopg.types.json.Jsonb(v) if isinstance(v, (dict, list)) else v
                                 for v in row.values()])
        assert _refused_by_the_fence(refused.value), f"{table.table}: {refused.value}"

    _set(raw)
    for table in tables:
        for relation in [table.table, *leaves[table.table]]:
            assert _keys(raw, table, relation) == set(), f"{relation}: rows are read with no project set"

    _set(raw, all_projects="on")
    for table in tables:
        assert len(_keys(raw, table)) == totals[table.table], f"{table.table}: all_projects does not read every row"
        if leaves[table.table]:
            assert sum(len(_keys(raw, table, leaf)) for leaf in leaves[table.table]) == totals[table.table]


@pytest.mark.slow
@pytest.mark.django_db
def test_the_application_works_as_a_role_the_policies_apply_to(client):
    a, b = create_project(slug="under-a"), create_project(slug="under-b")
    admin = make_user(None, "rls-admin")
    assign_role(admin, "admin", a)
    with django_connection_as_app_role():
        ours = fill(client, a, "alpha-under", subject="customer:under")
        fill(client, b, "beta-under", subject="customer:under")
        api, cid = ours["api"], ours["conversation"].pk

        # Reads of what the project wrote, every one through the policies.
        assert api.get(f"/conversations/{cid}").json()["message_count"] == 3
        assert [m["position"] for m in api.get(f"/conversations/{ours['fork_id']}/messages").json()["items"]] \
            == [0, 1, 2]
        assert api.get(f"/conversations/{cid}/active").status_code == 200
        found = api.get("/search", {"q": "alpha-under"}).json()
        assert found["items"] and all("beta-under" not in json.dumps(hit) for hit in found["items"])
        assert api.get("/search", {"q": "beta-under"}).json()["items"] == []
        assert api.get("/facts/recall", {"subject": "customer:under"}).status_code == 200
        assert api.get(f"/conversations/{cid}/state").json()["state"] == {"marker": "alpha-under"}
        assert api.get("/actions", {"idempotency_key": "alpha-under:refund", "namespace": "agents"}).json()["performed"]
        assert api.get("/imports/sources", {"namespace": "proj"}).json()["items"]
        assert api.get("/receipts").json()["items"]
        # A retry replays the stored answer, which the policies let the project read.
        again = api.post(f"/conversations/{cid}/messages",
                         {"kind": "user", "content": "alpha-under hello from customer:under"},
                         headers={"Idempotency-Key": "alpha-under-append"})
        assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"

        imported = api.post("/imports", {"format": "journal", "namespace": "files",
                                         "content": '{"kind": "note", "text": "alpha-under imported file"}\n'})
        assert imported.status_code in (200, 201), imported.content

        span = {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7", "name": "chat m",
                "startTimeUnixNano": "1767225600000000000", "endTimeUnixNano": "1767225601500000000",
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (
                    ("gen_ai.operation.name", "chat"), ("gen_ai.conversation.id", "alpha-under-otel"),
                    ("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [
                        {"type": "text", "content": "alpha-under traced"}]}])))]}
        traced = client.post("/v1/traces", data=json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}),
                             content_type="application/json", headers={"Authorization": f"Bearer {api.key}"})
        assert traced.status_code == 200 and traced.json() == {}, traced.content
        assert api.get("/search", {"q": "traced"}).json()["items"]

        copied = api.post("/langgraph/threads/copy", {"source_thread_id": "alpha-under-thread",
                                                      "target_thread_id": "alpha-under-copy"})
        assert copied.status_code == 200, copied.content
        assert api.post("/langgraph/threads/delete", {"thread_id": "alpha-under-copy"}).status_code == 200
        gone = api.post("/conversations", {"title": "alpha-under deleted by DELETE"}).json()["id"]
        assert api.delete(f"/conversations/{gone}").status_code in (200, 204)
        assert api.get(f"/conversations/{gone}").status_code == 404

        client.force_login(admin)
        page = f"/p/under-a/conversations/{cid}"
        assert client.post(f"{page}/pin/", {"pinned": "1"}).status_code in (200, 302)
        assert client.post(f"{page}/fork/1/", {"title": "alpha-under page fork"}).status_code == 302
        assert client.post(f"{page}/checkpoint/2/", {"summary": "alpha-under page fold"}).status_code == 302
        assert client.post(f"/p/under-a/facts/{ours['fact_id']}/approve").status_code in (200, 302)
        recalled = api.get("/facts/recall", {"subject": "customer:under"}).json()["items"]
        assert [r["fact"]["text"] for r in recalled] == ["alpha-under prefers letters"]
        for page in ("/p/under-a/", f"/p/under-a/conversations/{cid}/", "/p/under-a/search/?q=alpha-under",
                     "/p/under-a/facts/", "/p/under-a/facts/subject/?s=customer:under", "/p/under-a/admin/",
                     "/p/under-a/admin/prune/?older_than_days=1", "/p/under-a/admin/receipts/",
                     "/p/under-a/admin/audit/", "/p/under-a/admin/verification/", "/p/under-a/admin/access/",
                     "/p/under-a/admin/proofs/subject-export/"):
            response = client.get(page)
            assert response.status_code == 200, (page, response.status_code)
            assert "beta-under" not in response.content.decode(), page
        assert "alpha-under" in client.get(f"/p/under-a/conversations/{cid}/").content.decode()
        verification = client.get("/p/under-a/admin/verification/").content.decode()
        assert "status-failed" not in verification
        assert 'audit log: <span class="status status-verified">' in verification

    # Every chain the application wrote under the policies verifies, the audit log's included.
    report = chain_verify.verify_all()
    assert report.ok, (report.audit.reason, [s.describe() for s in report.tampered])


# -- maintenance as the application's role ------------------------------------------------

DATA = """
from conversations import projects, store
from conversations.project_store import create_project
other = create_project(slug="ops-b")
for pid in (1, other.pk):
    with projects.scoped(projects.one(pid)):
        c = store.create_conversation(title=f"ops {pid}", subject="customer:ops")
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"ops text of {pid}"})
"""
ERASE = """
from conversations.retention.erasure import execute_deletion
receipt = execute_deletion(subject="customer:ops", all_projects=True, actor="ops")
print(receipt.counts["conversations"], receipt.project_id, receipt.verification["status"])
"""


@pytest.fixture
def app_databases(tmp_path):
    """A login role the policies apply to, owning two new databases (as an operator sets up
    the application's role: docs/OPERATIONS.md); their URLs. All dropped afterwards."""
    role, password = f"{role_name()}_login", uuid.uuid4().hex
    names = [f"memoryui_rls_{os.getpid()}_{n}" for n in ("src", "dst")]
    settings = connection.settings_dict
    admin = psycopg.connect(dbname="postgres", autocommit=True)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS PASSWORD {}").format(
        sql.Identifier(role), sql.Literal(password)))
    try:
        for name in names:
            admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(role)))
        port = settings.get("PORT") or os.environ.get("PGPORT") or "5432"
        yield [f"postgres://{role}:{password}@127.0.0.1:{port}/{name}" for name in names]
    finally:
        for name in names:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
        admin.close()


def test_migrations_backups_prune_verification_and_erasure_run_as_the_application_role(tmp_path, app_databases):
    source, target = app_databases

    def manage(*args, url=source):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=600, env=subprocess_env(DATABASE_URL=url, MEMORYUI_DATA_DIR=str(tmp_path)))
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done.stdout + done.stderr

    manage("migrate", "-v0")
    manage("shell", "-v0", "-c", DATA)
    backup = tmp_path / "ops.dump"
    manage("backup", str(backup))
    assert "Restored and verified" in manage("restore", str(backup), url=target)
    assert "ops text" not in manage("prune", "--older-than-days", "1")
    assert "verified" in manage("verify_log")
    erased = manage("shell", "-v0", "-c", ERASE).split()
    # Filed for every project; the files could not be searched as this role (docs/OPERATIONS.md).
    assert erased[:3] == ["2", "None", "not_possible"], erased
