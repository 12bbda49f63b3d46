"""Pruning gives the disk back.

SQLite (file level): prune the older half of a database and compare the main
file plus WAL with a fresh database, built in a subprocess through the store,
that holds only the survivors. PostgreSQL cannot shrink files under a running
workload (VACUUM FULL locks the tables), so its equivalent checks that VACUUM
made the freed space reusable: writing the same amount again does not grow
the tables.
"""

import json
import random

import pytest
from django.db import connection

from conversations import partitions
from conversations.partitions import relation_bytes
from conversations.retention.pruning import prune_older_than
from tests.conftest import purge_sqlite_guarded_tables
from tests.retention_support import age, run_python, subprocess_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CONVERSATIONS_PER_HALF = 20
MESSAGES_PER_CONVERSATION = 30
WORDS = "order refund parcel invoice address delivery courier tracking warehouse replacement".split()


def spec(half: str) -> list[dict]:
    rng = random.Random(half)
    return [
        {"title": f"{half} {i}", "subject": f"cust:{half}-{i}",
         "texts": [" ".join(rng.choice(WORDS) for _ in range(180)) + f" #{j}"
                   for j in range(MESSAGES_PER_CONVERSATION)]}
        for i in range(CONVERSATIONS_PER_HALF)
    ]


BUILD = """
def build(conversations):
    from django.db import transaction
    from conversations import store
    with transaction.atomic():
        made = [store.create_conversation(title=c["title"], subject=c["subject"]) for c in conversations]
        # Round-robin, as concurrent agents would write.
        for j in range(max(len(c["texts"]) for c in conversations)):
            for c, row in zip(conversations, made):
                store.append_message(conversation_id=row.pk, message={"kind": "user", "content": c["texts"][j]})
    return made
"""
namespace: dict = {}
exec(BUILD, namespace)
build = namespace["build"]


def test_pruning_half_gives_the_disk_back(tmp_path):
    if connection.vendor == "sqlite":
        # The file is compared with a fresh one: start from an empty, compact file, whatever
        # rows or free pages the tests before this one left in the shared test database.
        purge_sqlite_guarded_tables()
        connection.ensure_connection()
        connection.connection.executescript("PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE);")
    old, new = spec("old"), spec("new")
    old_rows = build(old)
    for row in old_rows:
        age(row, 200)
    if connection.vendor == "sqlite":
        _sqlite_reclaim(tmp_path, new)
    else:
        _postgres_reuse(new)


def _sqlite_reclaim(tmp_path, survivors):
    with connection.cursor() as cursor:
        assert cursor.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL, from settings
    build(survivors)
    before = _files_bytes()

    result = prune_older_than(days=90, batch_size=200)

    assert result.conversations == CONVERSATIONS_PER_HALF and result.notes == []
    after = _files_bytes()
    assert result.bytes_before == before and after <= result.bytes_after + 16 * 1024
    assert after < before * 0.7

    (tmp_path / "survivors.json").write_text(json.dumps(survivors))
    fresh = tmp_path / "fresh.sqlite3"
    code = BUILD + f"""
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
build(json.load(open({str(tmp_path / 'survivors.json')!r})))
"""
    run_python(code, env=subprocess_env(DATABASE_URL=f"sqlite:///{fresh}", MEMORYUI_DATA_DIR=str(tmp_path)))
    fresh_bytes = sum(p.stat().st_size for p in (fresh, tmp_path / "fresh.sqlite3-wal") if p.exists())
    print(f"pruned: {after} bytes, fresh with the survivors: {fresh_bytes} bytes")
    assert after <= 1.1 * fresh_bytes, f"pruned {after} bytes vs fresh {fresh_bytes} bytes"


def _files_bytes():
    from tests.retention_support import sqlite_file_bytes

    return sqlite_file_bytes()


def _table_bytes() -> int:
    # The message table's partitions hold its rows (conversations/partitions.py).
    return relation_bytes("conversations_message") + relation_bytes("conversations_conversation")


def _postgres_reuse(survivors):
    build(survivors)
    before = _table_bytes()

    result = prune_older_than(days=90, batch_size=200)

    assert result.conversations == CONVERSATIONS_PER_HALF
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        assert result.bytes_after == int(cursor.fetchone()[0])
    # As much new data as was pruned goes into the space VACUUM freed. Each partition of the
    # message table reuses its own free space: new conversations hash to other partitions than
    # the pruned ones, so each may need a new page of its table and of each of its indexes.
    build(spec("refill"))
    per_partition = partitions.count() * 6 * 8192
    assert _table_bytes() <= 1.1 * before + per_partition, (_table_bytes(), before, per_partition)
