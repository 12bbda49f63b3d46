"""A real gunicorn server (memoryui/gunicorn_conf.py, several worker processes) over
the test database, for the tests that must cross processes the way production does.

Starting one costs a few seconds of CPU, so a test file starts its server once
(`gunicorn`, in a module-scoped fixture that depends on pytest-django's session-scoped
`django_db_setup`, so the test database exists) and each test checks, with
`nothing_failed_in`, only what the server logged while that test ran. Sharing is safe
because the server keeps nothing between requests but open database connections, which
hold no lock between requests: a transactional test's purge (tests/isolation.py) deletes
the rows of the SQLite file they share, or TRUNCATEs the PostgreSQL tables, and the next
request reads the emptied tables.
"""

import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.db import connection

from tests.helpers import wait_until
from tests.retention_support import ROOT, database_url, subprocess_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(port: int, log: Path, *, workers: int, threads: int = 2, **env) -> subprocess.Popen:
    """Started in its own session (stop it with os.killpg(proc.pid, SIGTERM)); returns once it answers."""
    # The test database unless the caller names another (DATABASE_URL=…).
    env = subprocess_env(**{"DATABASE_URL": database_url(), "MEMORYUI_WORKERS": str(workers),
                            "MEMORYUI_THREADS": str(threads), **env})
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "memoryui.wsgi", "-c", "memoryui/gunicorn_conf.py",
         "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--timeout", "120"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/login/")
            conn.getresponse().read()
            return proc
        except OSError:
            time.sleep(0.2)
    raise AssertionError("gunicorn did not answer within 60 s")


# What a server writes when a request failed or a worker died.
FAILURES = ("Traceback", "Worker exited")


@dataclass
class LogTail:
    """A server's log from `start` (bytes) on: what a test on a shared server made it write."""
    path: Path
    start: int

    def read_bytes(self) -> bytes:
        with self.path.open("rb") as f:
            f.seek(self.start)
            return f.read()

    def read_text(self) -> str:
        return self.read_bytes().decode("utf-8", "replace")


@dataclass
class Gunicorn:
    port: int
    log: Path
    checked: int = 0  # bytes of the log already checked

    def tail(self) -> LogTail:
        """Its log from now on."""
        return LogTail(self.log, self.log.stat().st_size)

    def unchecked_failures(self) -> str:
        """What it logged since the last call, if that holds a failure; else ""."""
        new = LogTail(self.log, self.checked).read_bytes()
        self.checked += len(new)
        text = new.decode("utf-8", "replace")
        return f"{self.log.name}:\n{text[-3000:]}" if any(f in text for f in FAILURES) else ""


def assert_logs_clean(servers, when: str) -> None:
    failed = [text for text in [server.unchecked_failures() for server in servers] if text]
    assert not failed, f"a server logged a failure {when}:\n" + "\n".join(failed)


def _close_the_database_last() -> None:
    """SQLite: the workers exit without closing their connections, and the test process has
    closed its own after the last test, so the -wal and -shm files would outlive the test
    database and pile up in data/ (harmless: SQLite deletes a -wal it finds beside a new,
    empty database file, so a later test database of the same name does not read it). A
    connection opened and closed now is the last one: SQLite folds the -wal into the file
    and removes both, as when the test process outlived each server."""
    if connection.vendor == "sqlite":
        raw = connection.Database.connect(connection.settings_dict["NAME"])
        try:
            raw.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            raw.close()


@contextlib.contextmanager
def gunicorn(log: Path, *, check_shutdown: bool = True, **options) -> Iterator[Gunicorn]:
    """start_gunicorn(…, **options) on a free port, stopped on leaving. With check_shutdown,
    what it logged after the last check (its stopping included) must hold no failure either."""
    server = Gunicorn(free_port(), log)
    proc = start_gunicorn(server.port, log, **options)
    try:
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        _close_the_database_last()
    if check_shutdown:
        assert_logs_clean([server], "after the last test's check (or while it stopped)")


def _others_in_a_transaction() -> list[tuple]:
    """The other client connections to the test database (PostgreSQL) inside a transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, state, left(query, 300) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND xact_start IS NOT NULL")
        return cursor.fetchall()


@contextlib.contextmanager
def nothing_failed_in(*servers: Gunicorn) -> Iterator[None]:
    """Around one test on shared servers: what they logged since the previous test's check
    (so during this test) holds no traceback and no dead worker, and the failure is
    reported at the test that caused it. On PostgreSQL the servers' connections must also
    be out of any transaction by then: the purge after the test (tests/isolation.py)
    TRUNCATEs, which would wait behind one for ever."""
    yield
    try:
        if connection.vendor == "postgresql":
            wait_until(lambda: not _others_in_a_transaction(), timeout=30, message=lambda: (
                f"server connections still in a transaction after the test: {_others_in_a_transaction()}"))
    finally:
        assert_logs_clean(servers, "during this test")
