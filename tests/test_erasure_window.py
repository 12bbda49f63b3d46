"""Deletion requests in two phases (conversations/retention/window.py): the rows go when the
request is filed, the files are cleaned and searched in a maintenance window, once for every
request waiting; each receipt gets its verdict, and a missed deadline is an alert."""

import os
import stat
from datetime import UTC, timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from conversations import partitions, store
from conversations.models import Conversation, Message
from conversations.retention import disk, erasure, pgfiles, window
from conversations.retention.models import DeletionReceipt, ReceiptCheck
from tests.api_support import Api, login_as, make_key
from tests.retention_support import in_two_phases

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def two_phases(settings, tmp_path):
    in_two_phases(settings, tmp_path)


def about(subject: str, *, n: int = 3, words: str = "") -> Conversation:
    c = store.create_conversation(title=f"case {subject}", subject=subject)
    for i in range(n):
        store.append_message(conversation_id=c.pk, message={"kind": "user",
                                                            "content": f"{words or subject} wrote line {i} " * 4})
    return c


def test_a_request_deletes_at_once_and_files_an_erased_receipt_with_its_deadline(client):
    c = about("cust:wren", words="Wren Alcott ordered the blue kettle")
    before = timezone.now()
    receipt = erasure.execute_deletion(subject="cust:wren", actor="user:boss")
    assert receipt.verification["status"] == "erased" and receipt.phase == "erased"
    assert before + timedelta(hours=23) < receipt.verify_by <= timezone.now() + timedelta(hours=24)
    assert not Conversation.objects.filter(pk=c.pk).exists() and not Message.objects.of(c.pk).exists()
    login_as(client, "admin", "boss")
    assert client.get(f"/conversations/{c.pk}/").status_code == 404
    page = client.get(f"/admin/receipts/{receipt.pk}/").content.decode()
    assert 'id="verdict"' in page and "Erased" in page and 'id="run-window"' in page
    # Nothing of the files is searched yet, and the receipt says so rather than "0 files".
    searched = page.split('id="searched">', 1)[1].split("</dd>", 1)[0]
    assert searched.startswith("not yet: the database files are searched in the next maintenance window")
    assert "not searched yet" in page.split('id="wal">', 1)[1].split("</dd>", 1)[0]
    deadline = receipt.verify_by.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    assert receipt.verification["notes"][0].endswith(f"searches the files, by {deadline}")
    # What the window will look for waits outside the database, for the owner alone.
    waiting = list(window.pending_dir().glob("*.json"))
    assert [p.stem for p in waiting] == [str(receipt.pk)]
    assert stat.S_IMODE(os.stat(waiting[0]).st_mode) == 0o600


def test_one_window_verifies_every_waiting_request_and_forgets_their_needles():
    subjects = ["cust:ivo", "cust:mae", "cust:lorn"]
    for s in subjects:
        about(s, words=f"{s} paid with the card ending 4242 for {s}")
    receipts = [erasure.execute_deletion(subject=s, actor="user:boss") for s in subjects]
    result = window.run_window(actor="system:test")
    assert sorted(result.receipts) == sorted(str(r.pk) for r in receipts)
    for receipt in receipts:
        fresh = DeletionReceipt.objects.get(pk=receipt.pk)
        v = fresh.verification
        assert v["status"] == "verified", v
        assert v["strings_checked"] >= 1 and v["window"]["requests"] == 3
        assert fresh.phase == "checked" and not fresh.overdue
        assert fresh.filed_verification["status"] == "erased"  # what was filed stays as it was
    assert list(window.pending_dir().glob("*.json")) == []
    assert ReceiptCheck.objects.count() == 3
    assert window.run_window(actor="system:test").receipts == []  # nothing waits any more


def test_a_request_past_its_deadline_is_an_alert_on_the_pages_and_in_metrics(client, settings):
    settings.MEMORYUI_METRICS_TOKEN = "scrape-me"
    about("cust:oda")
    with override_settings(MEMORYUI_ERASURE_DEADLINE_HOURS=0):
        receipt = erasure.execute_deletion(subject="cust:oda", actor="user:boss")
    assert receipt.overdue
    assert window.overdue_count() == 1
    scrape = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).content.decode()
    assert "memoryui_erasure_overdue 1.0" in scrape and "memoryui_erasure_waiting 1.0" in scrape
    login_as(client, "admin", "boss")
    page = client.get("/admin/").content.decode()
    assert 'id="erasure-window"' in page and 'role="alert"' in page and "past" in page
    # The button runs the window; the alert is gone and the receipt verified.
    response = client.post("/admin/receipts/window/")
    assert response.status_code == 302
    assert DeletionReceipt.objects.get(pk=receipt.pk).verification["status"] == "verified"
    assert window.overdue_count() == 0
    assert 'id="erasure-window"' not in client.get("/admin/").content.decode()


def test_the_api_files_erased_receipts_and_runs_the_window(client):
    about("cust:pim")
    api = Api(client, make_key(["admin"]))
    filed = api.post("/deletion-requests", {"subject": "cust:pim"})
    assert filed.status_code == 201
    body = filed.json()
    assert body["verification"]["status"] == "erased" and body["verify_by"]
    ran = api.post("/deletion-requests/window", {})
    assert ran.status_code == 200, ran.content
    assert ran.json()["checked"] == 1 and ran.json()["receipts"][0]["status"] == "verified"
    again = api.get(f"/receipts/{body['request_id']}").json()
    assert again["verification"]["status"] == "verified"


def test_the_command_runs_the_window(capsys):
    about("cust:quin")
    erasure.execute_deletion(subject="cust:quin", actor="user:boss")
    call_command("erasure_window")
    assert "1 deletion requests checked" in capsys.readouterr().out
    call_command("erasure_window")
    assert "No deletion request is waiting" in capsys.readouterr().out


def test_needles_whose_request_never_filed_its_receipt_are_dropped():
    stray = window.Pending(receipt_id="00000000-0000-4000-8000-000000000001", filed_at=timezone.now().isoformat(),
                           verify_by=timezone.now().isoformat(), subject_given=True, candidates=["a stray needle"],
                           id_needles=[], touched=[], files_left={"status": "verified", "found_in": []})
    window.save(stray)
    result = window.run_window(actor="system:test")
    assert result.dropped == 1 and result.receipts == []
    assert not stray.path.exists()


def test_a_request_whose_pending_file_is_lost_is_checked_without_it_and_says_so(capsys):
    c = about("cust:sal", words="Sal Moreno keeps bees")
    held = partitions.partitions_holding([c.pk])
    for i in range(6):
        about(f"cust:stay-{i}")
    receipt = erasure.execute_deletion(subject="cust:sal", actor="user:boss")
    assert receipt.filed_verification["pending_folder"] == window.pending_dir_id()
    for path in window.pending_dir().glob("*.json"):
        path.unlink()  # a data folder replaced, say

    call_command("erasure_window")
    assert "1 of them had lost their pending file" in capsys.readouterr().out
    v = DeletionReceipt.objects.get(pk=receipt.pk).verification
    assert v["status"] == "not_possible" and v["pending_lost"] is True
    assert "not searched for its texts" in v["notes"][-1] and v["strings_checked"] == 0
    assert v["uploads"] == receipt.filed_verification["uploads"]  # what phase one did outside the database
    assert window.overdue_count() == 0 and window.waiting_count() == 0
    if connection.vendor == "postgresql":
        # The partition its rows were in is found by the hash of its id, the rows being gone.
        rewritten = [name for name in v["rewrite"]["tables"] if name.startswith(f"{partitions.MESSAGE_TABLE}_p")]
        assert rewritten == held and len(held) == 1
    else:
        assert v["conversation_ids_checked"] == 1 and "searched for its conversations' ids" in v["notes"][-1]


def test_a_pending_file_in_another_servers_folder_is_left_for_its_window(settings, tmp_path, capsys):
    about("cust:tam")
    receipt = erasure.execute_deletion(subject="cust:tam", actor="user:boss")
    settings.MEMORYUI_ERASURE_PENDING_DIR = tmp_path / "another-servers-folder"

    call_command("erasure_window")
    out = capsys.readouterr()
    assert "1 deletion requests wait for pending files in another folder" in out.err
    assert "No deletion request is waiting" in out.out
    assert DeletionReceipt.objects.get(pk=receipt.pk).verification["status"] == "erased"

    # Restored since it was filed: the file it names is of a folder the database no longer goes with.
    store.record_audit(actor="system:manage.py restore", action="restore.erasures_reapplied", target_type="backup",
                       target_id="nightly.db", project_id=None, detail={})
    result = window.run_window(actor="system:test")
    assert result.receipts == [str(receipt.pk)] and result.lost == 1 and result.elsewhere == 0
    assert DeletionReceipt.objects.get(pk=receipt.pk).verification["status"] == "not_possible"


@pytest.mark.postgresql_only
def test_postgresql_rewrites_and_searches_only_the_partitions_its_conversations_were_in():
    assert partitions.count() >= 2
    c = about("cust:rho", words="Rho Vance lives at 9 Elm Street")
    held = partitions.partitions_holding([c.pk])
    assert len(held) == 1
    for i in range(12):  # other subjects' rows, in other partitions too
        about(f"cust:keep-{i}")
    receipt = erasure.execute_deletion(subject="cust:rho", actor="user:boss")
    window.run_window(actor="system:test")
    v = DeletionReceipt.objects.get(pk=receipt.pk).verification
    assert v["status"] == "verified", v
    rewritten = [name for name in v["rewrite"]["tables"] if name.startswith(f"{partitions.MESSAGE_TABLE}_p")]
    assert rewritten == held
    # The untouched partitions' files were not searched: fewer table files than the whole database has.
    files, _ = disk.postgres_relation_files()
    segments, _ = pgfiles.wal_segment_files()
    assert v["files_searched"] < len(files) + len(segments)
