"""SQLite: connections stay open across requests, and one process's writers queue on a
lock rather than in SQLite's busy handler (memoryui/sqlite/base.py)."""

import subprocess
import sys
import threading

import pytest
from django.db import connections, transaction

from conversations import store
from conversations.models import Message
from tests.test_database_settings import sqlite_env

THREADS = 8
EACH = 15


def test_sqlite_connections_stay_open_across_requests(tmp_path):
    code = ("import django; django.setup(); from django.conf import settings; d = settings.DATABASES['default']; "
            "print(d['ENGINE'], d['CONN_MAX_AGE'])")
    out = subprocess.run([sys.executable, "-c", code], env=sqlite_env(tmp_path), capture_output=True, text=True,
                         check=True).stdout
    engine, max_age = out.split()
    assert engine == "memoryui.sqlite" and int(max_age) >= 60


@pytest.mark.django_db(transaction=True)
def test_writers_of_one_process_never_meet_in_the_busy_handler():
    """With SQLite's busy timeout at zero, a writer that found the database locked would
    fail at once; queued on the process's lock, every one of them gets through. (On
    PostgreSQL the same writers queue on the conversation's row lock.)"""
    conversation = store.create_conversation(title="queue")
    errors, start = [], threading.Barrier(THREADS)

    def writer(n):
        try:
            db = connections["default"]
            db.ensure_connection()
            if db.vendor == "sqlite":
                db.connection.execute("PRAGMA busy_timeout = 0")
            start.wait(30)
            for i in range(EACH):
                if i % 3 == 0:  # Django's own transactions …
                    with transaction.atomic():
                        store.append_message(conversation_id=conversation.pk,
                                             message={"kind": "did", "text": f"{n}.{i}"})
                elif i % 3 == 1:  # … the append hot path …
                    store.append_message(conversation_id=conversation.pk, message={"kind": "did", "text": f"{n}.{i}"})
                else:  # … and a batch
                    store.append_messages(conversation_id=conversation.pk,
                                          messages=[{"kind": "did", "text": f"{n}.{i}.{p}"} for p in range(2)])
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    total = THREADS * (EACH // 3) * (1 + 1 + 2)
    positions = list(Message.objects.of(conversation.pk).order_by("position").values_list("position", flat=True))
    assert positions == list(range(total))


@pytest.mark.django_db(transaction=True)
def test_a_failed_transaction_gives_the_queue_back():
    with pytest.raises(ZeroDivisionError):
        with transaction.atomic():
            store.create_conversation(title="rolled back")
            raise ZeroDivisionError
    done = []
    t = threading.Thread(target=lambda: (store.create_conversation(title="next"), done.append(1),
                                         connections.close_all()))
    t.start()
    t.join(10)
    assert done == [1]
