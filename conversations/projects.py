"""Projects: the fence every read and write stands behind.

Every conversation (and what hangs off it: rows, checkpoints, forks, ledger rows, import
sources, LangGraph threads), every fact, receipt and log row belongs to one project. A
request runs inside one *scope*, set once by `ProjectMiddleware` (conversations/project_http.py)
from its API key or its person and URL, and every read of a project's table is filtered by it:

- the models' default managers (`ProjectScopedManager`) filter by the scope, so a query
  that forgets to ask still sees only its project;
- raw SQL asks `sql_fence()` for the condition to add;
- on PostgreSQL the database holds the same line (row-level security, migration 0010):
  the backend (memoryui/postgresql/base.py) hands the scope to the server as two settings
  before any statement runs under it.

Outside a request (management commands, the test suite's own set-up, maintenance) the scope
is every project: the operator's own process. A request that needs every project (a data
controller's deletion request across projects) asks for it with `project_store.bypass()`,
which is audited.
"""

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import models

from .errors import Forbidden, NotFound

DEFAULT_SLUG = "default"
# The project that migration 0009 creates and puts everything that existed into.
DEFAULT_PROJECT_ID = 1


@dataclass(frozen=True)
class Scope:
    """What the current code may see: one project, every project, or nothing at all.
    `namespaces` narrows one project's conversations further (an importer's key)."""

    project_id: int | None = None
    every: bool = False
    namespaces: tuple[str, ...] | None = None

    @property
    def one(self) -> bool:
        return self.project_id is not None and not self.every

    def sees(self, project_id) -> bool:
        return self.every or (project_id is not None and project_id == self.project_id)

    def allows_namespace(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces


# "The current scope's project", as a default argument (None would mean "the server's own").
CURRENT = object()

EVERY = Scope(every=True)
NOTHING = Scope()

_scope: contextvars.ContextVar[Scope] = contextvars.ContextVar("memoryui_scope", default=EVERY)


def current() -> Scope:
    return _scope.get()


@contextmanager
def scoped(scope: Scope):
    """Run the block inside `scope` (a request's, a command's --project, a test's)."""
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def unfenced():
    """Every project, for the store's own bookkeeping inside a project's request: the audit
    log's one chain (its last event, whichever project wrote it), the commitments a deletion
    keeps before its receipt exists. On PostgreSQL the row-level security policies stop
    filtering for the block too (the backend sends the scope before the next statement), so
    nothing in it may be shown to the caller: it reads and writes what the store decided on."""
    return scoped(EVERY)


def one(project_id: int, namespaces=None) -> Scope:
    return Scope(project_id=int(project_id), namespaces=tuple(namespaces) if namespaces else None)


def fence(qs, field: str = "project_id", namespace_field: str | None = None):
    """`qs` filtered to what the current scope sees."""
    scope = current()
    if scope.every:
        return qs
    if scope.project_id is None:
        return qs.none()
    qs = qs.filter(**{field: scope.project_id})
    if namespace_field and scope.namespaces is not None:
        qs = qs.filter(**{f"{namespace_field}__in": scope.namespaces})
    return qs


def sql_fence(column: str = "project_id", namespace_column: str | None = None) -> tuple[str, list]:
    """The same filter for raw SQL: a condition (starting with AND, or empty) and its parameters."""
    scope = current()
    if scope.every:
        return "", []
    if scope.project_id is None:
        return " AND 1 = 0", []
    sql, params = f" AND {column} = %s", [scope.project_id]
    if namespace_column and scope.namespaces is not None:
        sql += f" AND {namespace_column} IN ({', '.join(['%s'] * len(scope.namespaces))})"
        params += list(scope.namespaces)
    return sql, params


def for_write(namespace: str | None = None) -> int:
    """The project a new row goes into: the scope's own, or `default` when the scope is
    every project (an operator's command, an all-projects key that named none)."""
    scope = current()
    if scope.every:
        return DEFAULT_PROJECT_ID
    if scope.project_id is None:
        raise NotFound("no project: sign in or send an API key", field="project")
    if namespace is not None and not scope.allows_namespace(namespace):
        raise Forbidden(f"this API key may write only in the namespaces {', '.join(scope.namespaces)}; "
                        f"not in {namespace!r}", field="namespace")
    return scope.project_id


class ProjectScopedManager(models.Manager):
    """A default manager that sees only the current scope's rows (module docstring)."""

    project_field = "project_id"
    namespace_field: str | None = None

    def get_queryset(self):
        return fence(super().get_queryset(), self.project_field, self.namespace_field)


def scoped_manager(queryset_class, *, namespace_field: str | None = None, project_field: str = "project_id"):
    """A `ProjectScopedManager` with a model's own QuerySet methods. The fields are the class's,
    not the instance's: a related manager (`fact.events`) is a new instance of the same class."""
    base = ProjectScopedManager.from_queryset(queryset_class)
    manager_class = type(base.__name__, (base,), {"namespace_field": namespace_field, "project_field": project_field})
    return manager_class()


def unscoped_manager(queryset_class=models.QuerySet):
    """Every project's rows: a model's `everywhere`, for the store's own look-ups (a chain's
    last row, a uniqueness check) that must see a row whatever the reader may."""
    return queryset_class.as_manager()


@contextmanager
def acting(*, all_projects: bool = False):
    """The scope a maintenance request (a prune, a deletion request, a subject export) acts in,
    and the project it records (None: every project). Filed for every project only where
    every project is seen (an operator's process, an all-projects key, `project_store.bypass`);
    otherwise for the current project, or for `default` where the caller named none."""
    scope = current()
    if all_projects:
        if not scope.every:
            raise Forbidden("only an operator acting for the whole server may file this for every project",
                            field="all_projects")
        with scoped(EVERY):
            yield None
        return
    project_id = scope.project_id if scope.one else DEFAULT_PROJECT_ID
    if scope.project_id is None and not scope.every:
        raise NotFound("no project: sign in or send an API key", field="project")
    with scoped(scope if scope.one else one(project_id)):
        yield project_id


def project_of_new_row():
    """The default of a project column that may also say "the whole server" (NULL): a new row
    is the current scope's project's, or `default`'s where every project is seen; a caller
    that means the whole server passes None itself."""
    scope = current()
    return DEFAULT_PROJECT_ID if scope.every else scope.project_id
