"""Shared helpers for the retention, erasure and audit tests."""

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from conversations import store
from conversations.models import Conversation
from conversations.retention import erasure, pgfiles
from tests import helpers
from tests.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent


def make_user(username: str, role: str | None, *, password: str | None = None):
    """A user with a role, named first (the shared factory is tests.helpers.make_user)."""
    return helpers.make_user(role, username, password=password)


def conversation(*, title="c", subject="", messages=3, text="message {i} of {title}", age_days=0, pinned=False):
    c = store.create_conversation(title=title, subject=subject)
    for i in range(messages):
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": text.format(i=i, title=title)})
    if pinned:
        store.set_pinned(conversation_id=c.pk, pinned=True)
    if age_days:
        age(c, age_days)
    c.refresh_from_db()
    return c


def age(c, days: int):
    """Make a conversation look received and last active `days` days ago. The store has no
    door to set a receipt time in the past (it is its own clock), so tests set it here."""
    then = timezone.now() - timedelta(days=days)
    Conversation.objects.filter(pk=c.pk).update(last_activity_at=then, received_at=then)


def database_url() -> str:
    """A DATABASE_URL for a subprocess that must use the test database itself."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    host = settings.get("HOST") or ""
    return f"postgres://{settings.get('USER') or ''}@{host}/{settings['NAME']}" if host else f"postgres:///{settings['NAME']}"


def subprocess_env(**extra) -> dict:
    env = dict(os.environ)
    env.update({"DJANGO_SETTINGS_MODULE": "memoryui.settings", "PYTHONPATH": str(ROOT)})
    env.update(extra)
    return env


def run_python(code: str, *, env: dict, timeout: int = 120) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def sqlite_file_bytes() -> int:
    main = Path(connection.settings_dict["NAME"])
    return sum(p.stat().st_size for p in (main, Path(f"{main}-wal")) if p.exists())


def raw_bytes_of_database() -> bytes:
    """Every database file's bytes, read here independently of the code under test."""
    from conversations.retention import disk

    if connection.vendor == "sqlite":
        paths = disk.sqlite_files()
    else:
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
        paths, problem = disk.postgres_relation_files()
        assert problem is None, problem
    # Read by another process: closing a descriptor of the live SQLite file here would
    # drop this process's locks on it (see conversations/retention/rawfiles.py).
    code = ("import sys\nfor p in sys.argv[1:]:\n    try: sys.stdout.buffer.write(open(p, 'rb').read())\n"
            "    except FileNotFoundError: pass\n")
    done = subprocess.run([sys.executable, "-c", code, *map(str, paths)], capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dumps(obj) -> str:
    return json.dumps(obj, default=str)


def sqlite_integrity_check(path=None) -> list[str]:
    """PRAGMA integrity_check of the SQLite database, by a current SQLite in another process
    (see conversations/retention/rawfiles.py: the system's 3.40 misreports the message table)."""
    request = {"op": "integrity_check", "database": str(path or connection.settings_dict["NAME"])}
    done = subprocess.run([sys.executable, "-m", "conversations.retention.rawfiles"], input=json.dumps(request),
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)["result"]


def delete_conversation(conversation_id, *, actor: str = "user:admin"):
    """Delete a conversation the way people do, from its page's Delete button or with
    DELETE /api/v1/conversations/{id}: retention/erasure.py, with its receipt (returned)
    and its search of the database files. The one deletion path; the store has no other."""
    return erasure.delete_one_conversation(conversation_id=conversation_id, actor=actor)


def request_that_stops(monkeypatch, where, name: str, **request) -> None:
    """File a deletion request (erasure.execute_deletion(**request)) whose process stops, as a
    crash or an error would stop it, when it reaches `where.name`."""
    def stop(*args, **kwargs):
        raise RuntimeError("the process died here")

    monkeypatch.setattr(where, name, stop)
    with pytest.raises(RuntimeError):
        erasure.execute_deletion(**request)
    monkeypatch.undo()


def delete_conversations(*conversation_ids, actor: str = "user:admin"):
    """Delete several conversations in one deletion request naming them (the deletion-requests
    page and POST /api/v1/deletion-requests with conversation ids): the same path as above,
    one search of the database files for all of them."""
    return erasure.execute_deletion(conversation_ids=list(conversation_ids), actor=actor, kind="conversation")


def require_repack():
    """PostgreSQL erasure rewrites tables online with pg_repack: a test of that needs it (a
    missing pg_repack skips it, and fails it under CI=true)."""
    if connection.vendor == "postgresql":
        problem = pgfiles.repack_problem()
        if problem:
            skip_or_fail(problem)


def in_two_phases(settings, tmp_path) -> None:
    """Deletion requests filed in two phases (the default, said explicitly), their needles
    waiting in this test's own folder; PostgreSQL's windows need pg_repack."""
    settings.MEMORYUI_ERASURE_VERIFY = "window"
    settings.MEMORYUI_ERASURE_PENDING_DIR = tmp_path / "pending"
    if connection.vendor == "postgresql":
        require_repack()
