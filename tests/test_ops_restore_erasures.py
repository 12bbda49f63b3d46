"""Erasure survives every restore: the operator's walk. A backup is taken; three deletion requests
follow (a subject in one project, one conversation, a subject in every project), each receipt
verified; the backup is restored into a fresh database and a fresh data folder. What the
requests erased is not served (the conversations 404, search finds none of the markers, facts
recall none), their receipts are back in the list beside the receipts of their re-application,
and /readyz says ready only once that is done. A restore that cannot find the servers' erasure
journal, or finds one that does not verify, is refused unless told otherwise, and then audited."""

import http.client
import json
import os
import signal

import pytest
from django.conf import settings

from conversations import api_keys, project_store, projects, store
from conversations.facts import store as facts
from conversations.retention import erasure
from tests.backup_support import manage, need_pg_tools
from tests.retention_support import (
    conversation,
    database_url,
    delete_conversation,
    request_that_stops,
    run_python,
    subprocess_env,
)
from tests.server_support import free_port, start_gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ONE, THREE = "customer:restore-one@example.com", "customer:restore-three@example.com"
# Words found by search only where they were written (no other row shares their stems).
MARKERS = {"one": "quarzelbine", "one_later": "wobbleferrant", "two": "glimmerquoth", "three": "snorvelpike",
           "three_support": "brantlewhisk", "fact_one": "zephyrmandolin", "fact_three": "pibblestrauss"}
KEPT = "kettlemoorish"


def get(port, path, key):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    data = json.loads(response.read() or b"null")
    conn.close()
    return response.status, data


def readyz(url: str, data_dir, **env) -> dict:
    """/readyz of a process over that database (the test client in a subprocess: no server needed)."""
    out = run_python("import django, json\ndjango.setup()\nfrom django.test import Client\n"
                     "r = Client().get('/readyz')\nprint(json.dumps([r.status_code, r.json()]))",
                     env=subprocess_env(DATABASE_URL=url, MEMORYUI_DATA_DIR=str(data_dir), ALLOWED_HOSTS="testserver",
                                        SECRET_KEY=settings.SECRET_KEY, **env))
    code, body = json.loads(out.strip().splitlines()[-1])
    return {"code": code, **body}


def written(text: str, subject: str = "", title: str = "", project=None):
    with projects.scoped(projects.one(project.pk) if project else projects.EVERY):
        c = conversation(title=title or text, subject=subject, messages=0)
        store.append_message(conversation_id=c.pk, message={"kind": "user", "content": f"the code word is {text}"})
        return c


def fact(subject: str, text: str, project=None):
    with projects.scoped(projects.one(project.pk) if project else projects.EVERY):
        f = facts.propose_fact(subject=subject, text=f"remembers {text}", importance=4, created_by="key:agent")
        facts.approve_fact(fact_id=f.pk, actor="user:rev")
        facts.record_access(actor="user:rev", subject=subject)


@pytest.fixture
def backup_then_three_requests(tmp_path, journal_file):
    need_pg_tools()
    support = project_store.create_project(slug="support")
    _, key = api_keys.create_api_key(name="ops", scopes=["read", "facts:read", "admin"], all_projects=True)
    one = written(MARKERS["one"], ONE)
    fork = store.fork_conversation(conversation_id=one.pk, position=0)
    fact(ONE, MARKERS["fact_one"])
    two = written(MARKERS["two"])
    three = written(MARKERS["three"], THREE)
    three_support = written(MARKERS["three_support"], THREE, project=support)
    fact(THREE, MARKERS["fact_three"], project=support)
    kept = written(KEPT, "customer:kept@example.com")

    backup = tmp_path / "before.db"
    done = manage("backup", str(backup), url=database_url(), data_dir=tmp_path)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "before.db.manifest.json").read_text())
    assert manifest["erasure_journal"]["file"] == "before.db.erasure-journal"

    # After the backup: a conversation grows (rows the backup never had), then the three requests.
    store.append_message(conversation_id=one.pk, message={"kind": "user", "content": MARKERS["one_later"]})
    receipts = [erasure.execute_deletion(subject=ONE, actor="user:dpo"),
                delete_conversation(two.pk),
                erasure.execute_deletion(subject=THREE, actor="user:dpo", all_projects=True)]
    for receipt in receipts:
        assert receipt.verification["status"] == "verified", receipt.verification
    return {"backup": backup, "key": key, "receipts": [str(r.pk) for r in receipts], "kept": kept,
            "erased": [one, fork, two, three, three_support]}


def assert_serves_none_of_it(port, walk):
    key = walk["key"]
    for c in walk["erased"]:
        assert get(port, f"/api/v1/conversations/{c.pk}", key)[0] == 404
    for name, marker in MARKERS.items():
        status, page = get(port, f"/api/v1/search?q={marker}", key)
        assert status == 200 and page["items"] == [], (name, page["items"])
    for subject in (ONE, THREE):
        status, page = get(port, f"/api/v1/facts/recall?subject={subject}", key)
        assert status == 200 and page["items"] == [], page
    assert get(port, f"/api/v1/conversations/{walk['kept'].pk}", key)[0] == 200
    assert len(get(port, f"/api/v1/search?q={KEPT}", key)[1]["items"]) == 1


def receipts_listed(port, key) -> list[dict]:
    status, page = get(port, "/api/v1/receipts?limit=200", key)
    assert status == 200, page
    return page["items"]


def test_a_restore_re_applies_every_erasure_newer_than_the_backup(backup_then_three_requests, tmp_path,
                                                                   fresh_database, journal_file):
    walk = backup_then_three_requests
    target, fresh_folder = fresh_database(), tmp_path / "fresh-data"
    # A fresh data folder holds no journal: the servers' must be named (or be on shared storage).
    refused = manage("restore", str(walk["backup"]), url=target, data_dir=fresh_folder, MEMORYUI_ERASURE_JOURNAL="",
                     SECRET_KEY=settings.SECRET_KEY)
    assert refused.returncode != 0 and "servers' erasure journal is not at" in refused.stderr, refused.stderr
    assert "--without-erasure-journal" in refused.stderr

    done = manage("restore", str(walk["backup"]), "--erasure-journal", str(journal_file), url=target,
                  data_dir=fresh_folder, MEMORYUI_ERASURE_JOURNAL="", SECRET_KEY=settings.SECRET_KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Restored and verified" in done.stdout and "re-applied 3 erasures" in done.stdout, done.stdout
    assert (fresh_folder / "erasure-journal.jsonl").exists()  # the servers' journal, carried into the new folder

    port = free_port()
    server = start_gunicorn(port, tmp_path / "restored.log", workers=1, DATABASE_URL=target,
                            MEMORYUI_DATA_DIR=str(fresh_folder), MEMORYUI_ERASURE_JOURNAL="",
                            SECRET_KEY=settings.SECRET_KEY)
    try:
        status, ready = get(port, "/readyz", walk["key"])
        assert status == 200 and ready["checks"]["erasures"] == "ok", ready
        assert_serves_none_of_it(port, walk)
        listed = receipts_listed(port, walk["key"])
        by_id = {r["request_id"]: r for r in listed}
        assert set(walk["receipts"]) <= set(by_id)
        again = [r for r in listed if r["kind"] == "reapplied"]
        assert sorted(r["reapplied"]["request_id"] for r in again) == sorted(walk["receipts"])
        for r in again:
            assert r["reapplied"]["after_restore_of"] == "before.db" and r["reapplied"]["restored_at"]
            assert r["verification"]["status"] in ("verified", "verified_except_wal"), r["verification"]
        assert [r["all_projects"] for r in again if r["reapplied"]["request_id"] == walk["receipts"][2]] == [True]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_a_database_restored_by_other_means_is_not_ready_until_the_erasures_are_re_applied(
        backup_then_three_requests, tmp_path, fresh_database, journal_file):
    walk = backup_then_three_requests
    target = fresh_database()
    # The rows alone, as a provider's snapshot or a bare pg_restore would bring them back.
    run_python(f"import django\ndjango.setup()\nfrom conversations.backups import load\nload({str(walk['backup'])!r})",
               env=subprocess_env(DATABASE_URL=target, MEMORYUI_DATA_DIR=str(tmp_path)))
    before = readyz(target, tmp_path)
    assert before["code"] == 503 and before["checks"]["erasures"] == "not_reapplied", before
    check = manage("reapply_erasures", "--check", url=target, data_dir=tmp_path, SECRET_KEY=settings.SECRET_KEY)
    assert check.returncode != 0 and "3 erasures this database shows no sign of" in check.stdout, check.stdout

    done = manage("reapply_erasures", url=target, data_dir=tmp_path, SECRET_KEY=settings.SECRET_KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    after = readyz(target, tmp_path)
    assert after["code"] == 200 and after["checks"]["erasures"] == "ok", after

    port = free_port()
    server = start_gunicorn(port, tmp_path / "restored.log", workers=1, DATABASE_URL=target,
                            MEMORYUI_DATA_DIR=str(tmp_path), SECRET_KEY=settings.SECRET_KEY)
    try:
        assert_serves_none_of_it(port, walk)
        assert set(walk["receipts"]) <= {r["request_id"] for r in receipts_listed(port, walk["key"])}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_a_restore_without_a_journal_that_verifies_needs_the_flag_and_is_audited(
        backup_then_three_requests, tmp_path, fresh_database, journal_file):
    walk = backup_then_three_requests
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(journal_file.read_bytes().replace(b'"kind":"', b'"kind":"x', 1))
    env = {"SECRET_KEY": settings.SECRET_KEY, "MEMORYUI_ERASURE_JOURNAL": str(damaged)}
    target = fresh_database()
    refused = manage("restore", str(walk["backup"]), url=target, data_dir=tmp_path, **env)
    assert refused.returncode != 0 and "does not verify" in refused.stderr, refused.stderr

    done = manage("restore", str(walk["backup"]), "--without-erasure-journal", url=target, data_dir=tmp_path, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(audited)" in done.stdout, done.stdout
    # The damaged journal is kept aside, never deleted; the backup's copy takes its place.
    [aside] = tmp_path.glob("damaged.jsonl.set-aside-*")
    assert b'"kind":"x' in aside.read_bytes()
    assert damaged.read_bytes() == (tmp_path / "before.db.erasure-journal").read_bytes()
    audited = run_python(
        "import django\ndjango.setup()\nfrom conversations.models import AuditEvent\n"
        "print(AuditEvent.everywhere.filter(action='restore.without_erasure_journal').count())",
        env=subprocess_env(DATABASE_URL=target, MEMORYUI_DATA_DIR=str(tmp_path)))
    assert audited.strip().endswith("1")
    # The backup's copy (what it knew at the backup) was used; a server over it is ready on the new journal.
    assert readyz(target, tmp_path, MEMORYUI_ERASURE_JOURNAL=str(damaged))["code"] == 200


def test_a_request_that_stopped_before_its_receipt_is_carried_out_again_by_a_restore(
        tmp_path, fresh_database, journal_file, monkeypatch):
    need_pg_tools()
    _, key = api_keys.create_api_key(name="ops", scopes=["read", "facts:read", "admin"], all_projects=True)
    doomed = written(MARKERS["one"], ONE)
    fact(ONE, MARKERS["fact_one"])
    kept = written(KEPT, "customer:kept@example.com")
    backup = tmp_path / "before.db"
    done = manage("backup", str(backup), url=database_url(), data_dir=tmp_path)
    assert done.returncode == 0, done.stderr

    # Its deletion commits, then its process dies before the receipt: the journal holds only its intent.
    request_that_stops(monkeypatch, erasure, "_store_receipt", subject=ONE, actor="user:dpo")

    target, fresh_folder = fresh_database(), tmp_path / "fresh-data"
    done = manage("restore", str(backup), "--erasure-journal", str(journal_file), url=target, data_dir=fresh_folder,
                  MEMORYUI_ERASURE_JOURNAL="", SECRET_KEY=settings.SECRET_KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "re-applied 1 erasure " in done.stdout and "0 receipts back" in done.stdout, done.stdout

    port = free_port()
    server = start_gunicorn(port, tmp_path / "restored.log", workers=1, DATABASE_URL=target,
                            MEMORYUI_DATA_DIR=str(fresh_folder), MEMORYUI_ERASURE_JOURNAL="",
                            SECRET_KEY=settings.SECRET_KEY)
    try:
        status, ready = get(port, "/readyz", key)
        assert status == 200 and ready["checks"]["erasures"] == "ok", ready
        assert get(port, f"/api/v1/conversations/{doomed.pk}", key)[0] == 404
        assert get(port, f"/api/v1/conversations/{kept.pk}", key)[0] == 200
        for marker in (MARKERS["one"], MARKERS["fact_one"]):
            assert get(port, f"/api/v1/search?q={marker}", key)[1]["items"] == []
        assert get(port, f"/api/v1/facts/recall?subject={ONE}", key)[1]["items"] == []
        [again] = [r for r in receipts_listed(port, key) if r["kind"] == "reapplied"]
        assert again["reapplied"]["unfinished"] is True and again["reapplied"]["after_restore_of"] == "before.db"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
