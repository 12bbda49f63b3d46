"""Operations and SQL the apps' migrations share: the project column (conversations/projects.py),
row-level security, and the guard triggers (at the end) that every append-only table is built with.

A project column is added with plain ALTER TABLE … ADD COLUMN on both databases: on SQLite
Django would rebuild a table to add a NOT NULL column, and a rebuild drops the table's
triggers (the append-only guards). The column's default puts every existing row into the
`default` project (id 1) in the same statement, with no UPDATE (the guards refuse updates of
several of these tables, and none is needed). PostgreSQL then drops the default, so a row
inserted without its project fails instead of landing in `default`; SQLite cannot drop a
default without a rebuild, and the models always write the column.
"""

import re

from django.db import migrations, models

from . import projects

PROJECT_TABLE = "conversations_project"


def _run(statements):
    def run(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        if vendor not in ("sqlite", "postgresql"):
            raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {vendor}")
        for sql in statements(vendor):
            schema_editor.execute(sql, params=None)

    return run


def add_project_column(*, model_name: str, table: str, null: bool = False, indexes=(), state_field=None):
    """Operations that add `project_id` to `table` (model `model_name`): every existing row in
    `default`; `indexes`: (name, columns) pairs created after it. `null`: the column may say
    "the whole server" (NULL) for new rows."""

    def forward(vendor):
        kind = "bigint" if vendor == "postgresql" else "integer"
        nullity = "NULL" if null else "NOT NULL"
        yield (f"ALTER TABLE {table} ADD COLUMN project_id {kind} {nullity} DEFAULT 1 "
               f"REFERENCES {PROJECT_TABLE}(id) DEFERRABLE INITIALLY DEFERRED")
        if vendor == "postgresql":
            yield f"ALTER TABLE {table} ALTER COLUMN project_id DROP DEFAULT"
        for name, columns in indexes:
            yield f"CREATE INDEX {name} ON {table} ({columns})"

    def backward(vendor):
        for name, _ in indexes:
            yield f"DROP INDEX IF EXISTS {name}"
        yield f"ALTER TABLE {table} DROP COLUMN project_id"

    extra = {"default": projects.project_of_new_row} if null else {}
    field = state_field or models.ForeignKey(
        null=null, blank=null, on_delete=models.PROTECT, related_name="+", to="conversations.project",
        db_index=False, **extra)
    return migrations.SeparateDatabaseAndState(
        database_operations=[migrations.RunPython(_run(forward), _run(backward))],
        state_operations=[migrations.AddField(model_name=model_name, name="project", field=field)],
    )


def run_sql_by_vendor(sqlite: list[str], postgresql: list[str]):
    """A RunPython that runs each database's own statements (triggers, indexes)."""
    by_vendor = {"sqlite": sqlite, "postgresql": postgresql}
    return _run(lambda vendor: by_vendor[vendor])


def replace_unique(*, model_name: str, table: str, name: str, fields: list[str]):
    """Operations that make the unique constraint `name` cover `fields` (project first, say).
    On SQLite a constraint Django created with its table lives inside CREATE TABLE, where no
    statement can drop it: the table is rebuilt without it (`_sqlite_rebuild_without`), its
    indexes and triggers (the append-only guards) made again, unlike Django's own rebuild."""
    columns = ", ".join(f"{f}_id" if f == "project" else f for f in fields)

    def forward(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}", params=None)
            schema_editor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE ({columns})", params=None)
        elif vendor == "sqlite":
            _sqlite_rebuild_without(schema_editor, table, name)
            schema_editor.execute(f"DROP INDEX IF EXISTS {name}", params=None)
            schema_editor.execute(f"CREATE UNIQUE INDEX {name} ON {table} ({columns})", params=None)
        else:
            raise RuntimeError(f"memoryui supports SQLite and PostgreSQL, not {vendor}")

    return migrations.SeparateDatabaseAndState(
        database_operations=[migrations.RunPython(forward, migrations.RunPython.noop)],
        state_operations=[
            migrations.RemoveConstraint(model_name=model_name, name=name),
            migrations.AddConstraint(model_name=model_name,
                                     constraint=models.UniqueConstraint(fields=fields, name=name)),
        ],
    )


def _sqlite_rebuild_without(schema_editor, table: str, constraint: str) -> None:
    """Rebuild SQLite `table` without the constraint `constraint` written inside its CREATE
    TABLE (nothing to do when it is not there): SQLite's own procedure for a change ALTER
    TABLE cannot make (a new table, the rows copied, the old one dropped, the new one
    renamed), then every index and trigger of the table made again from its own SQL. The
    migration runs with foreign keys off (Django's SQLite schema editor), so references to
    the table from others hold through the swap."""
    clause = re.compile(rf',\s*CONSTRAINT "?{re.escape(constraint)}"? UNIQUE \([^)]*\)')
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table])
        found = cursor.fetchone()
        if found is None or not clause.search(found[0]):
            return
        cursor.execute("SELECT sql FROM sqlite_master WHERE tbl_name = %s AND type IN ('index', 'trigger') "
                       "AND sql IS NOT NULL ORDER BY type, name", [table])
        kept = [sql for (sql,) in cursor.fetchall()]
    created = re.compile(rf'^CREATE TABLE "?{re.escape(table)}"?')
    rebuilt = f"{table}__rebuilt"
    schema_editor.execute(created.sub(f'CREATE TABLE "{rebuilt}"', clause.sub("", found[0]), count=1), params=None)
    schema_editor.execute(f'INSERT INTO "{rebuilt}" SELECT * FROM "{table}"', params=None)
    schema_editor.execute(f'DROP TABLE "{table}"', params=None)
    schema_editor.execute(f'ALTER TABLE "{rebuilt}" RENAME TO "{table}"', params=None)
    for sql in kept:
        schema_editor.execute(sql, params=None)


def replace_index(*, model_name: str, table: str, index, columns: str, where: str = ""):
    """Operations that build index `index` (a models.Index of the same name as the one it
    replaces) again over `columns` (SQL, project first), with `where` for a partial index."""
    name = index.name

    def forward(vendor):
        yield f"DROP INDEX IF EXISTS {name}"
        yield f"CREATE INDEX {name} ON {table} ({columns}){' WHERE ' + where if where else ''}"

    return migrations.SeparateDatabaseAndState(
        database_operations=[migrations.RunPython(_run(forward), migrations.RunPython.noop)],
        state_operations=[migrations.RemoveIndex(model_name=model_name, name=name),
                          migrations.AddIndex(model_name=model_name, index=index)],
    )


def add_index(*, model_name: str, table: str, index, columns: str):
    def forward(vendor):
        yield f"CREATE INDEX {index.name} ON {table} ({columns})"

    return migrations.SeparateDatabaseAndState(
        database_operations=[migrations.RunPython(_run(forward), migrations.RunPython.noop)],
        state_operations=[migrations.AddIndex(model_name=model_name, index=index)],
    )


def scoped_managers(model_name: str, **options):
    """The model's `base_manager_name` option: its unscoped manager (conversations/projects.py).
    `options`: the model's other Meta options that AlterModelOptions would otherwise drop (ordering)."""
    return [
        migrations.AlterModelOptions(name=model_name, options={"base_manager_name": "everywhere", **options}),
        migrations.AlterModelManagers(name=model_name, managers=[("objects", models.Manager()),
                                                                 ("everywhere", models.Manager())]),
    ]


# -- row-level security (PostgreSQL) ----------------------------------------------------
#
# Every table that holds a project's data answers, for the application's own role, only the
# rows of the project the connection's `memoryui.project` setting names, or every row while
# `memoryui.all_projects` is on (memoryui/postgresql/base.py sets both from the request's
# scope). FORCE applies the policies to the tables' owner too, which is the role the
# application connects as; a superuser bypasses them (docs/OPERATIONS.md: do not run as one).
# A table whose rows hang off another (messages off their conversation) sees what its parent
# sees: a policy's subquery is itself under the parent's policy.

# Tables with a project column that stay outside row-level security, and why; every other
# table of project data has a policy (tests/test_project_rls.py finds them from the models).
OUTSIDE_ROW_LEVEL_SECURITY = {
    "conversations_apikey": "a key is looked up by its hash before its project is known",
    "conversations_membership": "memberships decide which project a person acts in: read before the fence is set",
}


def _policy(table: str, condition: str) -> list[str]:
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"DROP POLICY IF EXISTS memoryui_project ON {table}",
        f"CREATE POLICY memoryui_project ON {table} USING ({condition}) WITH CHECK ({condition})",
    ]


def own_project(table: str) -> list[str]:
    """The table's own project_id decides (NULL, the whole server's: only when every project is seen)."""
    return _policy(table, f"memoryui_sees({table}.project_id)")


def via_parent(table: str, column: str, parent: str, parent_column: str = "id", cast: str = "") -> list[str]:
    """The row is seen when its parent row (`parent`.`parent_column` = `column`) is.

    The subquery names the parent's project itself, though the parent's own policy holds
    inside it too: PostgreSQL runs such a check once per query as a hashed set of the
    parent's visible ids when that is cheaper than a look-up per row, and with the project
    in the condition that set comes from the index that leads with it (the project's rows);
    left to the parent's policy alone, whose OR no index serves, it read every parent row of
    every project for each statement (2 ms a page of messages at 4,000 conversations, and
    growing with them; bench/w20_project_fence.py)."""
    return _policy(table, f"memoryui_sees_all() OR EXISTS (SELECT 1 FROM {parent} p "
                          f"WHERE p.{parent_column}{cast} = {table}.{column} "
                          f"AND p.project_id = memoryui_project_id())")


def parents_project(table: str, column: str, parent: str, *, guard: str | None = None) -> list[str]:
    """PostgreSQL: `table` gets a `project_id` the models never name, each existing row its
    parent's (`parent`.id = `column`), with the no-update trigger `guard` off for that one
    statement; a trigger on insert writes it from then on (conversations migration 0016)."""
    fill = f"UPDATE {table} t SET project_id = p.project_id FROM {parent} p WHERE p.id = t.{column}"
    return [
        f"ALTER TABLE {table} ADD COLUMN project_id bigint",
        *([f"ALTER TABLE {table} DISABLE TRIGGER {guard}", fill, f"ALTER TABLE {table} ENABLE TRIGGER {guard}"]
          if guard else [fill]),
        f"ALTER TABLE {table} ALTER COLUMN project_id SET NOT NULL",
    ]


def without_row_level_security(table: str) -> list[str]:
    return [f"DROP POLICY IF EXISTS memoryui_project ON {table}",
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY"]


def postgresql_only(forward: list[str], backward: list[str]):
    """A RunPython that runs these statements on PostgreSQL and nothing on SQLite (which has no
    row-level security: the application's own filters are the fence there)."""

    def run(statements):
        def apply(apps, schema_editor):
            if schema_editor.connection.vendor == "postgresql":
                for sql in statements:
                    schema_editor.execute(sql, params=None)

        return apply

    return migrations.RunPython(run(forward), run(backward))


# -- guard triggers -------------------------------------------------------------------------
#
# The append-only guards and their kin: triggers that refuse a write, on both databases. The
# migrations build them with these functions, so what these render is history: a fresh
# database gets the schema every older one got. SQLite keeps a trigger's text as it was
# written (sqlite_master.sql), down to its indent, which is why a migration passes the indent
# it first used; PostgreSQL keeps a trigger parsed (pg_get_triggerdef), so there only its
# parts matter. Never change what a function renders: add another one.

CONVERSATION_TABLE = "conversations_conversation"
# WHEN conditions of a guard on deleting a conversation's rows: refuse unless the
# conversation is marked `deleting` (so also once it is gone) …
UNLESS_CONVERSATION_DELETING = (f"NOT EXISTS (SELECT 1 FROM {CONVERSATION_TABLE} "
                                "WHERE id = OLD.conversation_id AND deleting)")
# … or refuse only while it is there and not marked (its rows may still go after it).
WHILE_CONVERSATION_LIVE = (f"EXISTS (SELECT 1 FROM {CONVERSATION_TABLE} "
                           "WHERE id = OLD.conversation_id AND NOT deleting)")
# … or refuse only while it is there, neither marked nor staged by an import (imports 0007).
WHILE_CONVERSATION_SHOWN = (f"EXISTS (SELECT 1 FROM {CONVERSATION_TABLE} "
                            "WHERE id = OLD.conversation_id AND NOT deleting AND NOT staged)")


def sqlite_refusal(name: str, table: str, event: str, message: str, *, when: str = "", indent: int = 4) -> str:
    """A SQLite trigger that aborts `event` ("UPDATE", "DELETE", "INSERT", "UPDATE OF a, b") on
    `table` with `message`, or only when `when` holds; its continuation lines indented by
    `indent` spaces."""
    pad = "\n" + " " * indent
    condition = f"{pad}WHEN {when}" if when else ""
    return f"CREATE TRIGGER {name} BEFORE {event} ON {table}{condition}{pad}BEGIN SELECT RAISE(ABORT, '{message}'); END"


def postgres_trigger(name: str, table: str, event: str, function: str = "memoryui_refuse", *, when: str = "",
                   timing: str = "BEFORE") -> str:
    """A PostgreSQL row trigger running `function()` on `event` of `table`, or only when `when`
    holds: a guard (memoryui_refuse(), from the core's migration 0002, refuses any write and
    names the table) or, with timing AFTER, the work a write sets off (search's indexing)."""
    condition = f" WHEN ({when})" if when else ""
    return f"CREATE TRIGGER {name} {timing} {event} ON {table} FOR EACH ROW{condition} EXECUTE FUNCTION {function}()"


def sqlite_no_update(name: str, table: str, what: str, *, indent: int = 4) -> str:
    """The append-only guard that refuses every UPDATE: "append-only: `what` is never updated"."""
    return sqlite_refusal(name, table, "UPDATE", f"append-only: {what} is never updated", indent=indent)


def sqlite_no_delete(name: str, table: str, what: str, *, indent: int = 4) -> str:
    """The append-only guard that refuses every DELETE: "append-only: `what` is never deleted"."""
    return sqlite_refusal(name, table, "DELETE", f"append-only: {what} is never deleted", indent=indent)
