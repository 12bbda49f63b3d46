"""Erasure that never stops the writers, and receipts that say exactly what was searched.

On PostgreSQL a deletion request once rewrote its tables with VACUUM FULL and
every append, to any conversation, waited for the rewrite (374–380 s on 1,000,000
messages). Tables are now rewritten online by pg_repack; the receipt says how each
table was rewritten, which files of which kind were searched (the WAL's segments or
SQLite's -wal among them), and never says `verified` while the WAL still holds erased
text. How long an append waits at scale is measured in bench/ (workloads 13 and 15).
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import psycopg
import pytest
from django.db import connection

from conversations import store
from conversations.models import Message
from conversations.retention import erasure, erasure_receipt, erasure_verify, pgfiles
from tests.api_support import login_as
from tests.helpers import wait_until
from tests.retention_support import ROOT, conversation, database_url, require_repack, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)

APPENDER = r"""
import json, os, sys, time
import django
django.setup()
from conversations import store
cid, stop = sys.argv[1], sys.argv[2]
marks, i = [], 0
print("ready", flush=True)
while not os.path.exists(stop):
    started = time.time()
    try:
        store.append_message(conversation_id=cid, message={"kind": "note", "text": f"still writing {i}"})
        marks.append([started, time.time() - started, None])
    except Exception as exc:
        marks.append([started, time.time() - started, f"{type(exc).__name__}: {exc}"[:200]])
    i += 1
print(json.dumps(marks))
"""


def subject_data(subject: str, n: int = 30):
    for k in range(2):
        conversation(title=f"about {subject} {k}", subject=subject, messages=n,
                     text=f"{subject} said private thing {{i}} in talk {k} about the Quillfeather account")


def test_it_lets_appends_to_other_conversations_through_while_a_deletion_request_rewrites_the_tables(tmp_path):
    require_repack()
    subject_data("cust:online-1")
    busy = store.create_conversation(title="the agent that keeps writing")
    stop = tmp_path / "stop"
    appender = subprocess.Popen([sys.executable, "-c", APPENDER, str(busy.pk), str(stop)], cwd=ROOT,
                                env=subprocess_env(DATABASE_URL=database_url()), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        assert appender.stdout.readline().strip() == "ready", appender.stderr.read()
        # The appender is really writing.
        wait_until(lambda: Message.objects.of(busy.pk).count() >= 5, timeout=30, message="the appender never wrote")
        began = time.time()
        receipt = erasure.execute_deletion(subject="cust:online-1", actor="user:boss")
        ended = time.time()
    finally:
        stop.write_text("stop")
        try:
            out, err = appender.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(appender.pid, signal.SIGKILL)
            raise
    marks = json.loads(out.strip().splitlines()[-1])
    during = [m for m in marks if m[0] < ended and m[0] + m[1] > began]
    v = receipt.verification
    assert v["status"] == "verified", v
    assert receipt.counts["messages"] == 60
    assert [m for m in marks if m[2]] == [], "an append failed"
    # The writer went on: one after another, ten appends were answered while the deletion ran,
    # so none waited for all of it (how long one waits is measured in bench/, workloads 13 and 15).
    assert len(during) >= 10, f"only {len(during)} appends overlapped the deletion request"
    stored = Message.objects.of(busy.pk).count()
    assert stored == len(marks), "every acknowledged append is stored"
    if connection.vendor == "postgresql":
        assert v["rewrite"]["method"] == "pg_repack" and not v["rewrite"].get("writers_waited"), v["rewrite"]
        assert set(v["rewrite"]["tables"].values()) == {"pg_repack"}
        # The message table's partitions that held the subject's rows (conversations/partitions.py).
        assert any(name.startswith(f"{Message._meta.db_table}_p") for name in v["rewrite"]["tables"])


def test_the_receipt_lists_every_kind_of_file_searched_the_wal_included():
    require_repack()
    subject_data("cust:kinds-2", n=12)
    receipt = erasure.execute_deletion(subject="cust:kinds-2", actor="user:boss")
    v = receipt.verification
    assert v["status"] == "verified", v
    assert v["wal"]["status"] == "gone", v["wal"]
    if connection.vendor == "postgresql":
        kinds = v["searched"]
        for kind in ("table files", "toast", "indexes", "statistics", "wal segments"):
            assert kinds[kind] >= 1, (kind, kinds)
        assert v["wal"]["segments_searched"] == kinds["wal segments"]
        assert sum(kinds.values()) == v["files_searched"]
        assert "pg_wal" in v["scope"] and "not covered" in v["scope"]
        assert any(f["file"].startswith("pg_wal/") for f in v["files"])
    else:
        assert v["searched"]["main file"] == 1 and v["searched"]["wal"] == 1, v["searched"]
        assert v["wal"]["files_searched"] == 1
        assert "-wal" in v["scope"]


def test_a_finding_only_in_the_wal_is_not_called_verified():
    """The status is decided from what was found where: only WAL segments on PostgreSQL
    is `verified_except_wal`; on SQLite the -wal is part of the database and a finding
    there is `found`; a finding in a table file is `found` everywhere."""
    def search(*where):
        return erasure_verify.FileSearch(status="searched", files=[], found=bool(where), found_in=list(where),
                                         found_count=len(where))

    wal = "pg_wal/000000010000000000000042" if connection.vendor == "postgresql" else "db.sqlite3-wal"
    expected = "verified_except_wal" if connection.vendor == "postgresql" else "found"
    assert erasure_receipt.receipt_status(search(wal)) == expected
    assert erasure_receipt.receipt_status(search(wal, "base/5/16401 (conversations_message)")) == "found"
    assert erasure_receipt.receipt_status(search()) == "verified"


# PostgreSQL's WAL; SQLite's -wal is truncated and searched (the test above).
@pytest.mark.postgresql_only
def test_it_says_plainly_when_the_wal_still_holds_erased_text_and_until_when():
    """A replication slot keeps every WAL segment from where it was created: the erased
    text written after it cannot be switched away. The receipt says so, names the slot,
    and its status is not `verified`."""
    require_repack()
    slot = f"memoryui_test_{uuid.uuid4().hex[:10]}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_create_physical_replication_slot(%s, true)", [slot])
    try:
        subject_data("cust:slot-3", n=12)
        receipt = erasure.execute_deletion(subject="cust:slot-3", actor="user:boss")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_drop_replication_slot(%s)", [slot])
    v = receipt.verification
    assert v["status"] == "verified_except_wal", v
    assert not receipt.verified
    assert v["wal"]["status"] == "still_there"
    assert v["found_in"] and all(name.startswith("pg_wal/") for name in v["found_in"])
    assert {s["file"] for s in v["wal"]["still_in"]} == set(v["found_in"])
    assert all(slot in s["why"] and s["until"] for s in v["wal"]["still_in"]), v["wal"]["still_in"]


def test_the_receipt_page_shows_the_wal_and_the_kinds_of_files(client):
    require_repack()
    login_as(client, "admin")
    subject_data("cust:page-4", n=6)
    receipt = erasure.execute_deletion(subject="cust:page-4", actor="user:boss")
    page = client.get(f"/admin/receipts/{receipt.pk}/").content.decode()
    assert 'id="wal"' in page and "holds none of it" in page
    assert 'id="searched-kinds"' in page
    if connection.vendor == "postgresql":
        assert "wal segments:" in page and "online, with pg_repack" in page
    else:
        assert "wal: 1" in page


@pytest.mark.postgresql_only
def test_a_table_pg_repack_could_not_lock_is_rewritten_by_vacuum_full_and_the_receipt_says_so(monkeypatch):
    """One pg_repack run rewrites every table; a table it gave up on (its lock wait ran out
    while a reader held it) is rewritten by VACUUM FULL once the reader is gone, alone, and
    the receipt names it. The text is gone all the same."""
    require_repack()
    subject_data("cust:locked-5", n=8)
    monkeypatch.setattr(pgfiles, "REPACK_WAIT_SECONDS", 1)
    table = Message._meta.db_table
    # At each table pg_repack also waits for every older transaction to end, except its own
    # sessions'. The reader says it is one (its application name), so that only its lock on
    # the message table stands in pg_repack's way, whatever order pg_repack takes the tables in.
    reader = psycopg.connect(**connection.get_connection_params(), application_name="pg_repack",
                             autocommit=False)
    reader.execute(f'LOCK TABLE "{table}" IN ACCESS SHARE MODE')

    def reader_ends_after_pg_repack(tables, lease, repack=pgfiles.repack_tables):
        try:
            return repack(tables, lease)
        finally:
            reader.rollback()

    monkeypatch.setattr(pgfiles, "repack_tables", reader_ends_after_pg_repack)
    try:
        receipt = erasure.execute_deletion(subject="cust:locked-5", actor="user:boss")
    finally:
        reader.close()
    v = receipt.verification
    assert v["status"] == "verified", v
    assert receipt.counts["messages"] == 16
    tables = v["rewrite"]["tables"]
    # The message table's partitions that held the subject's rows were locked by the reader.
    locked = {name for name in tables if name.startswith(f"{table}_p")}
    assert locked and {tables[name] for name in locked} == {"vacuum_full"}, tables
    assert {method for name, method in tables.items() if name not in locked} == {"pg_repack"}, tables
    assert v["rewrite"]["writers_waited"] is True
    assert any(table in note and "Skipping repack" in note and "VACUUM FULL" in note for note in v["notes"]), \
        v["notes"]


@pytest.mark.database_independent
def test_what_one_pg_repack_run_rewrote_is_read_table_by_table_from_what_it_printed():
    """pg_repack's own words (as version 1.5 prints them): a skipped table, a run that ended in
    an error part-way, and an error before any table each fail exactly the tables they touch."""
    tables = ["conversations_message", "facts_fact", "ledger_action"]
    skipped = ('INFO: repacking table "public.conversations_message"\n'
               "WARNING: timed out, do not cancel conflicting backends\n"
               "INFO: Skipping repack public.conversations_message due to timeout\n"
               'INFO: repacking table "public.facts_fact"\n'
               "NOTICE: Waiting for 1 transactions to finish. First PID: 14401\n"
               'INFO: repacking table "public.ledger_action"\n')
    outcomes = pgfiles.repack_outcomes(tables, 0, skipped)
    assert outcomes["facts_fact"] is None and outcomes["ledger_action"] is None
    assert "Skipping repack" in outcomes["conversations_message"]

    stopped = ('INFO: repacking table "public.conversations_message"\n'
               'INFO: repacking table "public.facts_fact"\n'
               "ERROR: query failed: SSL connection has been closed unexpectedly\n")
    outcomes = pgfiles.repack_outcomes(tables, 1, stopped)
    assert outcomes["conversations_message"] is None
    assert "query failed" in outcomes["facts_fact"]
    assert "did not reach ledger_action" in outcomes["ledger_action"]

    before = 'ERROR: pg_repack failed with error: ERROR:  relation "x" does not exist\n'
    outcomes = pgfiles.repack_outcomes(tables, 21, before)
    assert all("does not exist" in why for why in outcomes.values()), outcomes
    assert all(why is None for why in pgfiles.repack_outcomes(tables, 0, skipped.replace(
        "WARNING: timed out, do not cancel conflicting backends\n", "").replace(
        "INFO: Skipping repack public.conversations_message due to timeout\n", "")).values())
