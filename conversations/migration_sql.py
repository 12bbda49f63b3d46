"""Operations the apps' migrations share for the project column (conversations/projects.py).

A project column is added with plain ALTER TABLE … ADD COLUMN on both databases: on SQLite
Django would rebuild a table to add a NOT NULL column, and a rebuild drops the table's
triggers (the append-only guards). The column's default puts every existing row into the
`default` project (id 1) in the same statement, with no UPDATE (the guards refuse updates of
several of these tables, and none is needed). PostgreSQL then drops the default, so a row
inserted without its project fails instead of landing in `default`; SQLite cannot drop a
default without a rebuild, and the models always write the column.
"""

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
    """Operations that make the unique constraint `name` cover `fields` (project first, say),
    without the table rebuild Django's SQLite editor would make (and its triggers lost)."""
    columns = ", ".join(f"{f}_id" if f == "project" else f for f in fields)

    def forward(vendor):
        if vendor == "postgresql":
            yield f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}"
            yield f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE ({columns})"
        else:
            yield f"DROP INDEX IF EXISTS {name}"
            yield f"CREATE UNIQUE INDEX {name} ON {table} ({columns})"

    return migrations.SeparateDatabaseAndState(
        database_operations=[migrations.RunPython(_run(forward), migrations.RunPython.noop)],
        state_operations=[
            migrations.RemoveConstraint(model_name=model_name, name=name),
            migrations.AddConstraint(model_name=model_name,
                                     constraint=models.UniqueConstraint(fields=fields, name=name)),
        ],
    )


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
    """The row is seen when its parent row (`parent`.`parent_column` = `column`) is."""
    return _policy(table, f"memoryui_sees_all() OR EXISTS (SELECT 1 FROM {parent} p "
                          f"WHERE p.{parent_column}{cast} = {table}.{column})")


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
