"""The erasure journal (conversations/retention/journal.py, erasure_journal.py, reapply.py): each
receipt journalled before it commits and naming no subject; damage to the file found; /readyz
not ready while the database shows no sign of an erasure the journal holds; and the
re-application that a restore runs, in this process, on the database under test: what it
deletes (by conversation id, by the subject's keyed hash, within the request's project), the
receipts it brings back and the receipt it files."""

import hashlib
import uuid

import pytest
from django.test import override_settings
from django.utils import timezone

from conversations import api_keys, project_store, projects, store
from conversations.facts import store as facts
from conversations.facts.models import Fact, FactAccess
from conversations.models import AuditEvent, Conversation, Message
from conversations.retention import erasure, erasure_journal, journal, reapply
from conversations.retention.models import DeletionReceipt, ErasedRow
from tests.retention_support import conversation, delete_conversation, request_that_stops

pytestmark = pytest.mark.django_db(transaction=True)

SUBJECT = "Cust:Journal-42"
WHY = {"after_restore_of": "nightly.db", "backup_created_at": "2026-12-01T02:00:00+00:00",
       "restored_at": "2026-12-03T09:00:00+00:00"}


def about(subject=SUBJECT, *, title="about", messages=2):
    c = conversation(title=title, subject=subject, messages=messages, text="private text {i} of " + title)
    fact = facts.propose_fact(subject=subject, text=f"{title} likes quiet mornings", importance=3,
                              created_by="key:agent")
    facts.approve_fact(fact_id=fact.pk, actor="user:rev")
    facts.record_access(actor="user:rev", subject=subject)
    return c


def newer_erasure(*, subject="", conversations=(), project_id=projects.DEFAULT_PROJECT_ID, kind="subject"):
    """An erasure this database has not seen, as after restoring a backup older than it: its
    journal entry (what the servers wrote when they carried it out) and no receipt here."""
    receipt = DeletionReceipt(id=uuid.uuid4(), project_id=project_id, actor="user:boss", kind=kind,
                              created_at=timezone.now(), subject_sha256=erasure.subject_sha256(subject),
                              conversation_ids=[str(c.pk) for c in conversations],
                              counts={"conversations": len(conversations)}, filed_verification={"status": "verified"})
    erasure_journal.record_erasure(receipt, subject=subject)
    return receipt


def lines_of(path):
    return path.read_bytes().splitlines(keepends=True)


# -- what is written ------------------------------------------------------------------------------


def test_a_deletion_request_journals_its_receipt_and_names_no_subject(journal_file):
    c = about()
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")

    current = journal.read(journal_file)
    assert current.ok and list(current.erasures) == [str(receipt.pk)]
    entry = current.erasures[str(receipt.pk)]
    assert entry.receipt == DeletionReceipt.everywhere.get(pk=receipt.pk).as_document()
    assert entry.project_id == projects.DEFAULT_PROJECT_ID and not entry.all_projects
    # Keyed by the server's secret, in normal form: not a hash anyone can compute from a guess.
    assert entry.subject_key == journal.subject_key("cust:journal-42") == journal.subject_key(SUBJECT)
    assert entry.subject_key != hashlib.sha256(SUBJECT.lower().encode()).hexdigest()
    with override_settings(SECRET_KEY="another server's secret"):
        assert journal.subject_key(SUBJECT) != entry.subject_key
    # Every erased row's commitment, as the database kept it (ErasedRow).
    kept = ErasedRow.objects.filter(receipt_id=receipt.pk).count()
    assert kept == 2 and len(entry.rows) == kept and {r[0] for r in entry.rows} == {str(c.pk)}
    data = journal_file.read_bytes()
    for personal in (SUBJECT, "cust:journal-42", "private text 0 of about", "quiet mornings"):
        assert personal.encode() not in data
    # The receipt's audit event holds the journal's head as of it.
    event = AuditEvent.everywhere.get(action="deletion.receipt", target_id=str(receipt.pk))
    assert event.detail["journal"] == {"journal": current.journal_id, "seq": current.seq, "hash": current.head}
    assert erasure_journal.readiness() == "ok"


def test_a_request_the_journal_cannot_hold_is_refused_with_nothing_deleted(journal_file, tmp_path, client):
    c = conversation(title="kept", messages=1)
    _, key = api_keys.create_api_key(name="ops", scopes=["read", "write", "admin"])
    (tmp_path / "not-a-folder").write_text("")
    with override_settings(MEMORYUI_ERASURE_JOURNAL=tmp_path / "not-a-folder" / "journal.jsonl"):
        with pytest.raises(erasure.JournalUnwritable, match="Nothing was deleted"):
            delete_conversation(c.pk)
        response = client.delete(f"/api/v1/conversations/{c.pk}", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503 and response.json()["error"]["code"] == "erasure_journal_unwritable"
    assert not DeletionReceipt.everywhere.exists()
    assert Conversation.everywhere.filter(pk=c.pk, deleting=False).exists() and Message.objects.count() == 1


def test_a_receipt_is_never_stored_when_its_journal_entry_cannot_be_written(journal_file, monkeypatch):
    c = conversation(title="doomed", messages=1)

    def unwritable(*args, **kwargs):
        raise journal.JournalError("the disk filled up")

    monkeypatch.setattr(erasure_journal, "record_erasure", unwritable)
    with pytest.raises(erasure.JournalUnwritable, match="rows are deleted"):
        delete_conversation(c.pk)
    assert not DeletionReceipt.everywhere.exists()
    assert not Conversation.everywhere.filter(pk=c.pk).exists()  # the deletion itself had committed
    # Its intent is in the journal: a restore of an older backup carries it out again.
    [unfinished] = journal.read(journal_file).intents.values()
    assert unfinished.receipt["conversation_ids"] == [str(c.pk)]


# -- what a damaged file looks like ------------------------------------------------------------------


def _four_entries(path):
    for i in range(4):
        journal.append([{"type": "erasure", "request_id": f"r{i}", "receipt": {}, "project_id": 1}], path=path)
    return lines_of(path)


def test_an_altered_removed_or_reordered_line_and_a_cut_end_are_found(tmp_path):
    path = tmp_path / "j.jsonl"
    lines = _four_entries(path)
    assert journal.read(path).ok and journal.read(path).entries == 5 and list(journal.read(path).erasures) == [
        "r0", "r1", "r2", "r3"]
    variants = {
        "altered": lines[:2] + [lines[2].replace(b'"r1"', b'"r7"')] + lines[3:],
        "removed": lines[:2] + lines[3:],
        "reordered": lines[:2] + [lines[3], lines[2]] + lines[4:],
        "last line removed": lines[:-1],  # not a chain's to see: the anchors are (below)
        "cut inside a line": [b"".join(lines)[:-20]],
        "not a journal": [b'{"hello": 1}\n'],
    }
    found = {}
    for name, content in variants.items():
        path.write_bytes(b"".join(content))
        found[name] = journal.read(path).problems
    assert found.pop("last line removed") == []
    assert all(found.values()), found
    assert "incomplete" in found["cut inside a line"][0]


def test_a_write_cut_short_by_a_crash_is_closed_and_the_chain_goes_on(tmp_path):
    path = tmp_path / "j.jsonl"
    _four_entries(path)
    with open(path, "ab") as f:
        f.write(b'{"type":"erasure","request_id":"half-writ')
    assert "incomplete" in journal.read(path).problems[0]

    journal.append([{"type": "erasure", "request_id": "after", "receipt": {}, "project_id": 1}], path=path)
    after = journal.read(path)
    assert after.ok and after.torn == 1 and list(after.erasures)[-1] == "after"
    assert b"half-writ" in path.read_bytes()  # never rewritten: append-only

    # A line complete but for its newline is a line: closed, not torn.
    whole = lines_of(path)[-1]
    path.write_bytes(b"".join(lines_of(path)[:-1]) + whole.rstrip(b"\n"))
    journal.append([{"type": "erasure", "request_id": "next", "receipt": {}, "project_id": 1}], path=path)
    assert journal.read(path).ok and journal.read(path).torn == 1


# -- what /readyz says -----------------------------------------------------------------------------------


def test_ready_is_not_ready_while_the_database_shows_no_sign_of_a_journalled_erasure(journal_file):
    assert journal_file.exists() is False and erasure_journal.readiness() == "ok"
    c = about()
    newer_erasure(subject=SUBJECT, conversations=[c])
    assert erasure_journal.readiness() == "not_reapplied"

    outcome = reapply.reapply(journal.read(journal_file), why=WHY)
    assert len(outcome.reapplied) == 1 and outcome.receipts_back == 1 and not outcome.problems
    assert erasure_journal.readiness() == "ok"


def test_ready_says_when_the_journal_is_missing_another_cut_back_or_damaged(journal_file, tmp_path):
    delete_conversation(conversation(title="one", messages=1).pk)
    delete_conversation(conversation(title="two", messages=1).pk)
    assert erasure_journal.readiness() == "ok"
    whole = journal_file.read_bytes()
    lines = lines_of(journal_file)

    journal_file.unlink()
    assert erasure_journal.readiness() == "journal_missing"
    journal_file.write_bytes(b"".join(lines[:-2]))  # cut back before the last receipt's entry
    assert erasure_journal.readiness() == "journal_mismatch"
    journal_file.unlink()
    journal.start(journal_file)  # another journal
    assert erasure_journal.readiness() == "journal_mismatch"
    journal_file.unlink()
    journal_file.write_bytes(whole.replace(b'"status":"', b'"status":"x', 1))
    assert erasure_journal.readiness() == "journal_damaged"

    # A new journal where the old one is damaged: kept aside, every receipt in the new one, audited.
    done = erasure_journal.replace(actor="user:ops", reason="damaged")
    assert erasure_journal.readiness() == "ok"
    assert done["receipts_backfilled"] == 2 and (journal_file.parent / done["set_aside"]).read_bytes() != whole
    assert set(journal.read(journal_file).erasures) == {str(r) for r in DeletionReceipt.everywhere.values_list(
        "pk", flat=True)}
    assert AuditEvent.everywhere.filter(action="erasure_journal.replaced").count() == 1


def test_a_crash_between_the_journal_and_the_receipt_leaves_the_erasure_shown_and_the_receipt_comes_back(
        journal_file, monkeypatch):
    c = about()

    request_that_stops(monkeypatch, DeletionReceipt, "save", subject=SUBJECT, actor="user:boss")
    current = journal.read(journal_file)
    [request_id] = current.erasures
    assert not DeletionReceipt.everywhere.exists() and not Conversation.everywhere.filter(pk=c.pk).exists()
    # The deletion's own audit event shows it happened here: nothing of it is served.
    assert erasure_journal.readiness() == "ok"

    outcome = reapply.reapply(current, why=WHY)
    assert outcome.reapplied == [] and outcome.receipts_back == 1
    assert DeletionReceipt.everywhere.get(pk=request_id).as_document() == current.erasures[request_id].receipt


def test_a_request_is_journalled_before_anything_is_deleted(journal_file, monkeypatch):
    c = about()
    seen = {}
    deleting = erasure.delete_conversations_in_batches

    def first_batch(ids, **kwargs):
        current = journal.read(journal_file)
        seen.update(intents=dict(current.intents), erasures=list(current.erasures), ready=erasure_journal.readiness())
        return deleting(ids, **kwargs)

    monkeypatch.setattr(erasure, "delete_conversations_in_batches", first_batch)
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")

    [intent] = seen["intents"].values()
    assert intent.request_id == str(receipt.pk) and seen["erasures"] == []
    assert intent.receipt["conversation_ids"] == [str(c.pk)] and intent.receipt["project"] == "default"
    assert intent.subject_key == journal.subject_key(SUBJECT) and intent.project_id == projects.DEFAULT_PROJECT_ID
    # Under way, it is no sign of a restore: the server stays ready.
    assert seen["ready"] == "ok"
    after = journal.read(journal_file)
    assert after.intents == {} and list(after.erasures) == [str(receipt.pk)]
    for personal in (SUBJECT, "cust:journal-42", "private text 0 of about"):
        assert personal.encode() not in journal_file.read_bytes()


def test_a_request_that_stopped_before_its_deletion_committed_is_carried_out_again(journal_file, monkeypatch):
    c = about()
    kept = about("cust:someone-else", title="kept")
    request_that_stops(monkeypatch, erasure, "delete_conversations_in_batches", subject=SUBJECT, actor="user:boss")
    # Its conversations are hidden, but its subject's facts are still served: not ready.
    assert Fact.everywhere.filter(subject_norm="cust:journal-42").exists()
    assert erasure_journal.readiness() == "not_reapplied"
    [request_id] = journal.read(journal_file).intents

    outcome = reapply.reapply(journal.read(journal_file), why=WHY)

    assert [r["request_id"] for r in outcome.reapplied] == [request_id] and outcome.receipts_back == 0
    assert not Conversation.everywhere.filter(pk=c.pk).exists()
    assert not Fact.everywhere.filter(subject_norm="cust:journal-42").exists()
    assert Conversation.everywhere.filter(pk=kept.pk).exists()
    new = DeletionReceipt.everywhere.get(pk=outcome.reapplied[0]["receipt_id"])
    assert new.as_document()["reapplied"]["unfinished"] is True
    assert new.as_document()["reapplied"]["request_id"] == request_id and new.counts["facts"] == 1
    assert not DeletionReceipt.everywhere.filter(pk=request_id).exists()  # it never had one
    event = AuditEvent.everywhere.get(action="deletion.reapplied", target_id=request_id)
    assert event.detail["unfinished"] is True and event.detail["receipt_id"] == str(new.pk)
    assert erasure_journal.readiness() == "ok"
    again = reapply.reapply(journal.read(journal_file), why=WHY)
    assert again.reapplied == [] and again.held_nothing == 0


def test_a_request_that_stopped_after_its_deletion_committed_is_redone_by_a_restore(journal_file, monkeypatch):
    c = about()
    request_that_stops(monkeypatch, erasure, "_store_receipt", subject=SUBJECT, actor="user:boss")
    current = journal.read(journal_file)
    [request_id] = current.intents
    assert current.erasures == {} and not Conversation.everywhere.filter(pk=c.pk).exists()
    # The deletion's own audit event shows it happened here: nothing of it is served.
    assert erasure_journal.readiness() == "ok"
    assert reapply.reapply(current, why=WHY).reapplied == []

    # As after a restore of a backup from before such a request: its rows, and no sign of it.
    back = about()
    restored_id = uuid.uuid4()
    erasure_journal.record_intent(erasure._receipt_of(restored_id, SUBJECT, [back.pk], actor="user:boss",
                                                      kind="subject", project_id=projects.DEFAULT_PROJECT_ID,
                                                      counts={}, verification={}), subject=SUBJECT)
    assert erasure_journal.readiness() == "not_reapplied"
    outcome = reapply.reapply(journal.read(journal_file), why=WHY)
    assert [r["request_id"] for r in outcome.reapplied] == [str(restored_id)]
    assert not Conversation.everywhere.filter(pk=back.pk).exists()
    assert not Fact.everywhere.filter(subject_norm="cust:journal-42").exists()
    assert erasure_journal.readiness() == "ok"


# -- re-applying ------------------------------------------------------------------------------------------


def test_it_deletes_what_the_database_still_holds_and_files_a_receipt_saying_so(journal_file):
    c = about()
    fork = store.fork_conversation(conversation_id=c.pk, position=0)
    by_id = conversation(title="named by id", messages=2)
    kept = about("cust:someone-else", title="kept")
    first = newer_erasure(subject="cust:journal-42", conversations=[c, fork])  # typed otherwise: one subject
    second = newer_erasure(conversations=[by_id], kind="conversation")

    outcome = reapply.reapply(journal.read(journal_file), why=WHY)

    assert [r["request_id"] for r in outcome.reapplied] == [str(first.pk), str(second.pk)]
    assert not Conversation.everywhere.filter(pk__in=[c.pk, fork.pk, by_id.pk]).exists()
    assert not Fact.everywhere.filter(subject_norm="cust:journal-42").exists()
    assert not FactAccess.everywhere.filter(subject_norm="cust:journal-42").exists()
    assert Conversation.everywhere.filter(pk=kept.pk).exists() and Fact.everywhere.filter(
        subject_norm="cust:someone-else").exists()
    assert Message.objects.count() == 2
    # The receipts are back as they were, and each re-application has its own.
    for earlier, done in zip((first, second), outcome.reapplied, strict=True):
        assert DeletionReceipt.everywhere.get(pk=earlier.pk).as_document() == \
            journal.read(journal_file).erasures[str(earlier.pk)].receipt
        new = DeletionReceipt.everywhere.get(pk=done["receipt_id"])
        assert new.kind == "reapplied" and new.as_document()["reapplied"] == {
            **WHY, "request_id": str(earlier.pk), "request_created_at": earlier.created_at.isoformat()}
        assert new.verification["status"] in ("verified", "verified_except_wal")
        assert AuditEvent.everywhere.filter(action="deletion.reapplied", target_id=str(earlier.pk)).exists()
    assert DeletionReceipt.everywhere.get(pk=outcome.reapplied[0]["receipt_id"]).counts["facts"] == 1
    # Running it again finds nothing to do.
    again = reapply.reapply(journal.read(journal_file), why=WHY)
    assert again.reapplied == [] and again.receipts_back == 0


def test_the_receipt_page_says_which_request_was_re_applied_after_which_restore(client, user, journal_file):
    c = about()
    earlier = newer_erasure(subject=SUBJECT, conversations=[c])
    [done] = reapply.reapply(journal.read(journal_file), why=WHY).reapplied
    client.force_login(user("admin"))
    page = client.get(f"/admin/receipts/{done['receipt_id']}/").content.decode()
    assert "an earlier request carried out again after a restore" in page
    assert f"/admin/receipts/{earlier.pk}/" in page and "<code>nightly.db</code>" in page
    assert "taken 2026-12-01T02:00:00 UTC" in page and "on 2026-12-03T09:00:00 UTC" in page
    assert client.get(f"/admin/receipts/{earlier.pk}/").status_code == 200  # the earlier one is back


def test_it_brings_back_the_commitments_of_rows_the_backup_never_had(journal_file):
    c = conversation(title="grew", subject=SUBJECT, messages=3)
    receipt = DeletionReceipt(id=uuid.uuid4(), project_id=1, actor="user:boss", kind="subject",
                              created_at=timezone.now(), subject_sha256=erasure.subject_sha256(SUBJECT),
                              conversation_ids=[str(c.pk)], counts={}, filed_verification={"status": "verified"})
    rows = [[str(c.pk), "message", p, "ab" * 32, "cd" * 32] for p in range(5)]  # 5 rows when it was erased
    journal.append([{"type": "erased_rows", "request_id": str(receipt.pk), "rows": rows},
                    *erasure_journal.erasure_entries(receipt, subject=SUBJECT)[-1:]])

    reapply.reapply(journal.read(journal_file), why=WHY)

    assert ErasedRow.objects.filter(receipt_id=receipt.pk).count() == 5


def test_a_request_of_one_project_is_re_applied_in_that_project_only_and_one_of_all_in_all(journal_file):
    support = project_store.create_project(slug="support")
    in_default = about(title="default's")
    with projects.scoped(projects.one(support.pk)):
        in_support = about(title="support's")
    newer_erasure(subject=SUBJECT, project_id=support.pk)

    reapply.reapply(journal.read(journal_file), why=WHY)
    assert not Conversation.everywhere.filter(pk=in_support.pk).exists()
    assert Conversation.everywhere.filter(pk=in_default.pk).exists()
    assert list(Fact.everywhere.filter(subject_norm="cust:journal-42").values_list("project_id", flat=True)) == [1]

    newer_erasure(subject=SUBJECT, project_id=None)  # a data controller's request, for every project
    outcome = reapply.reapply(journal.read(journal_file), why=WHY)
    assert not Conversation.everywhere.filter(subject_norm="cust:journal-42").exists()
    assert not Fact.everywhere.filter(subject_norm="cust:journal-42").exists()
    new = DeletionReceipt.everywhere.get(pk=outcome.reapplied[0]["receipt_id"])
    assert new.project_id is None and new.as_document()["all_projects"] is True


def test_a_subject_keyed_with_another_secret_is_not_guessed_at(journal_file):
    c = about()
    with override_settings(SECRET_KEY="the old servers' secret"):
        newer_erasure(subject=SUBJECT)
    outcome = reapply.reapply(journal.read(journal_file), why=WHY)
    assert "another SECRET_KEY" in outcome.problems[0] and outcome.reapplied == []
    assert Conversation.everywhere.filter(pk=c.pk).exists() and erasure_journal.readiness() == "not_reapplied"

    with override_settings(SECRET_KEY_FALLBACKS=["the old servers' secret"]):
        outcome = reapply.reapply(journal.read(journal_file), why=WHY)
    assert not outcome.problems and not Conversation.everywhere.filter(pk=c.pk).exists()


def test_a_receipt_from_before_the_journal_is_journalled_by_the_next_backup(journal_file, tmp_path):
    old = DeletionReceipt.everywhere.create(actor="user:boss", kind="subject", conversation_ids=[],
                                            subject_sha256=erasure.subject_sha256(SUBJECT), counts={},
                                            filed_verification={"status": "verified"})
    extras = erasure_journal.for_backup(tmp_path / "b.db")["erasure_journal"]

    copy = journal.read(tmp_path / "b.db.erasure-journal")
    assert copy.ok and copy.head == extras["head"] and extras["file"] == "b.db.erasure-journal"
    entry = copy.erasures[str(old.pk)]
    assert entry.backfilled and entry.subject_key is None
    # Matched by the receipt's plain SHA-256 of the subject as typed, the only thing it kept.
    conversation(title="typed the same", subject=SUBJECT, messages=1)
    conversation(title="typed otherwise", subject=SUBJECT.lower(), messages=1)
    assert reapply.subject_of(entry) == (SUBJECT, None)


def test_gathering_refuses_journals_that_are_missing_damaged_or_two(journal_file, tmp_path):
    backup = tmp_path / "b.db"
    assert "there is no erasure journal" in reapply.gather(backup_path=backup).problems[0]
    delete_conversation(conversation(title="one", messages=1).pk)
    erasure_journal.for_backup(backup)  # the copy beside the backup: a prefix of the live journal
    delete_conversation(conversation(title="two", messages=1).pk)
    found = reapply.gather(backup_path=backup, manifest={"erasure_journal": {}})
    assert not found.problems and found.chosen.path == journal_file

    # The servers' journal not found (a fresh data folder): the backup's copy knows only what was
    # erased before the backup, so that is refused but for the flag, which uses the copy.
    saved = journal_file.read_bytes()
    journal_file.unlink()
    found = reapply.gather(backup_path=backup)
    assert "servers' erasure journal is not at" in found.problems[0] and found.chosen.label == "backup's copy"
    assert reapply.adopt(found.chosen).head == journal.read(backup.with_name("b.db.erasure-journal")).head
    journal_file.unlink()

    # A longer copy brings the live one up to date, line for line.
    given = tmp_path / "servers.jsonl"
    given.write_bytes(saved)
    journal_file.write_bytes(b"".join(saved.splitlines(keepends=True)[:2]))
    found = reapply.gather(given=given)
    assert not found.problems and reapply.adopt(found.chosen).head == journal.read(given).head
    assert journal_file.read_bytes() == saved

    # Two journals that are not one: refused, and so is a damaged one.
    other = tmp_path / "other.jsonl"
    journal.start(other)
    assert "are not one journal" in reapply.gather(given=other).problems[0]
    journal_file.write_bytes(saved.replace(b'"kind":"', b'"kind":"x', 1))
    found = reapply.gather()
    assert found.configured_damaged and "does not verify" in found.problems[0]



# -- two phases: the window's verdict is journalled too ------------------------------------------


def test_a_windows_verdict_is_journalled_and_a_restore_brings_it_back_verified(journal_file, settings, tmp_path):
    settings.MEMORYUI_ERASURE_VERIFY = "window"
    settings.MEMORYUI_ERASURE_PENDING_DIR = tmp_path / "pending"
    from conversations.retention import window

    about()
    receipt = erasure.execute_deletion(subject=SUBJECT, actor="user:boss")
    assert receipt.verification["status"] == "erased"
    filed = journal.read(journal_file).erasures[str(receipt.pk)]
    assert filed.receipt["verification"]["status"] == "erased" and filed.rows and filed.subject_key
    window.run_window(actor="user:boss")
    checked = journal.read(journal_file).erasures[str(receipt.pk)]
    # The latest document carries the verdict; the subject's key and the rows stay the first entry's.
    assert checked.receipt["verification"]["status"] == "verified"
    assert checked.receipt["verification"]["window"]["requests"] == 1
    assert checked.subject_key == filed.subject_key and checked.rows == filed.rows

    # Brought back into a database without it, it is verified and waits for no window.
    for status in ("verified", "erased"):
        doc = {**checked.receipt, "request_id": str(uuid.uuid4()),
               "verification": {**checked.receipt["verification"], "status": status}}
        record = journal.Erasure(request_id=doc["request_id"], receipt=doc, project_id=checked.project_id,
                                 subject_key=None, key_id=None, seq=0)
        assert reapply._receipt_back(record, None, WHY, "system:restore")
        back = DeletionReceipt.everywhere.get(pk=doc["request_id"])
        assert back.verification["status"] == status
        assert (back.verify_by is not None) == (status == "verified")
    assert not window.waiting_receipts().exists() and window.overdue_count() == 0
