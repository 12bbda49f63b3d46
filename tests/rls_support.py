"""A PostgreSQL role that row-level security applies to, as the application's role would be.

The test database's own role is a superuser, which bypasses every policy; these helpers make
a role without SUPERUSER or BYPASSRLS, grant it what the application needs (the same as an
operator grants the application's role: docs/OPERATIONS.md) and `SET ROLE` to it. Made inside
the caller's transaction, the role goes with its rollback.
"""

import os
from contextlib import contextmanager

from django.db import connection


def role_name() -> str:
    return f"memoryui_rls_{os.getpid()}"


def grants(role: str) -> list[str]:
    return [
        f"CREATE ROLE {role} NOSUPERUSER NOBYPASSRLS NOLOGIN",
        f"GRANT USAGE ON SCHEMA public TO {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
        f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}",
    ]


@contextmanager
def django_connection_as_app_role():
    """The test's Django connection acting as a role row-level security applies to, inside the
    test's transaction (a `django_db` test without transaction=True): every request the test
    client sends runs under the policies, reading the scope memoryui/postgresql/base.py sends."""
    assert connection.in_atomic_block, "the role is made inside the test's transaction, which takes it away"
    role = role_name()
    with connection.cursor() as cursor:
        for statement in grants(role):
            cursor.execute(statement)
        cursor.execute(f"SET ROLE {role}")
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (False,)
    try:
        yield role
    finally:
        if not connection.needs_rollback:
            with connection.cursor() as cursor:
                cursor.execute("RESET ROLE")
