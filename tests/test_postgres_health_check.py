"""The PostgreSQL connection's health check (memoryui/postgresql/base.py): no round trip while the
server is there, and a connection the server closed is found unusable, so the next request
reconnects instead of failing."""

import time

import psycopg
import pytest
from django.db import close_old_connections, connection

pytestmark = [pytest.mark.postgresql_only, pytest.mark.django_db(transaction=True)]


def _statements_sent(monkeypatch) -> list[str]:
    """Every statement the driver sends on any cursor, Django's own health check included."""
    sent = []
    for cursor_class in (psycopg.Cursor, psycopg.ClientCursor):
        original = cursor_class.execute

        def execute(self, query, params=None, *args, _original=original, **kwargs):
            sent.append(str(query))
            return _original(self, query, params, *args, **kwargs)

        monkeypatch.setattr(cursor_class, "execute", execute)
    return sent


def test_an_open_connection_passes_the_check_without_a_statement(monkeypatch):
    connection.ensure_connection()
    sent = _statements_sent(monkeypatch)

    assert connection.is_usable()
    assert sent == []


def test_a_connection_the_server_closed_is_unusable_and_the_next_request_reconnects():
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        old_pid = cursor.fetchone()[0]
    other = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        other.execute("SELECT pg_terminate_backend(%s)", [old_pid])
        # The server closes the socket as the backend exits: wait for that, not a fixed time.
        deadline = time.monotonic() + 10
        while connection.is_usable() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        other.close()
    assert not connection.is_usable()

    # As at the start of a request: the health check replaces the connection before it is used.
    connection.health_check_done = False
    close_old_connections()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != old_pid
