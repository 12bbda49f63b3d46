"""Signed heads, the signing key and its rotation, and the subject access export."""

import base64
import hashlib
import io
import json
import os
import stat
import zipfile

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command
from django.db import connection

from conversations import store
from conversations.access.models import ConversationAccess
from conversations.facts import store as facts_store
from conversations.facts.models import FactAccess
from conversations.models import AuditEvent
from conversations.proofs import heads, keys
from conversations.proofs.encoding import head_message, manifest_message
from conversations.proofs.models import SignedHead, SigningKey
from conversations.retention.models import DeletionReceipt
from tests.api_support import Api, error_of, login_as, make_key

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("answer_shapes")]


@pytest.fixture(autouse=True)
def own_key_dir(settings, tmp_path):
    """Each test signs with a key of its own folder, made as on first start."""
    settings.DATA_DIR = tmp_path
    settings.MEMORYUI_SIGNING_KEY_FILE = ""
    return tmp_path


def _public(key_id: str) -> str:
    return SigningKey.objects.get(pk=key_id).public_key


def _zip(response) -> zipfile.ZipFile:
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


# -- the key ---------------------------------------------------------------------------------------


def test_the_key_is_made_on_first_start_owner_only(own_key_dir):
    keys.ensure_default_key()
    path = own_key_dir / "signing" / "current.pem"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    first = keys.load_active()
    keys.ensure_default_key()  # a second start keeps it
    assert keys.load_active().key_id == first.key_id
    raw = base64.b64decode(first.public_b64)
    assert first.key_id == hashlib.sha256(raw).hexdigest()[:16]


def test_a_key_given_by_the_setting_signs(settings, tmp_path, convo):
    private = Ed25519PrivateKey.generate()
    path = tmp_path / "given.pem"
    path.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    settings.MEMORYUI_SIGNING_KEY_FILE = str(path)
    head = heads.sign(convo, reason="request")
    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert head.key_id == keys.key_id_of(raw)
    assert keys.verify(base64.b64encode(raw).decode(), head_message(heads.head_dict(head)), head.signature)
    assert not (tmp_path / "signing").exists()  # no second key was made


def test_a_key_file_others_can_read_is_warned_about(settings, tmp_path, caplog):
    path = tmp_path / "loose.pem"
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    path.chmod(0o644)
    settings.MEMORYUI_SIGNING_KEY_FILE = str(path)
    with caplog.at_level("WARNING", logger="memoryui.proofs"):
        keys.load_active()
    assert "others on this machine can read it" in caplog.text


def test_a_bad_key_setting_is_a_clear_error(settings, tmp_path):
    path = tmp_path / "not-a-key.pem"
    path.write_text("hello")
    settings.MEMORYUI_SIGNING_KEY_FILE = str(path)
    with pytest.raises(keys.SigningUnavailable, match="not an unencrypted PEM private key"):
        keys.load_active()
    settings.MEMORYUI_SIGNING_KEY_FILE = str(tmp_path / "missing.pem")
    with pytest.raises(keys.SigningUnavailable, match="cannot be read"):
        keys.load_active()


def test_rotation_keeps_old_heads_verifiable_with_the_old_key(convo, anonymous):
    before = heads.sign(convo, reason="request")
    old_id, new_id = keys.rotate()
    assert old_id == before.key_id != new_id
    after = heads.sign(convo, reason="request")
    assert after.key_id == new_id
    listed = anonymous.get("/signing-keys").json()
    public = {k["key_id"]: k["public_key"] for k in listed["keys"]}
    assert listed["current_key_id"] == new_id
    assert {k["key_id"]: bool(k["retired_at"]) for k in listed["keys"]} == {old_id: True, new_id: False}
    for head in (before, after):
        assert heads.verify_head(heads.head_dict(head), public)
    # The old head does not pass as the new key's, nor a head with its signature moved onto another.
    assert not heads.verify_head(heads.head_dict(before) | {"key_id": new_id}, public)
    assert not heads.verify_head(heads.head_dict(after) | {"position": after.position - 1}, public)


# -- heads -----------------------------------------------------------------------------------------


def test_a_head_names_the_last_row_and_its_chain_hash(convo, reader):
    response = reader.post(f"/conversations/{convo.pk}/signed-heads")
    assert response.status_code == 201
    head = response.json()
    assert head["position"] == 3 and head["conversation_id"] == str(convo.pk)
    with connection.cursor() as cursor:  # the chain hash as the database holds it
        cursor.execute("SELECT chain_hash FROM conversations_message WHERE conversation_id = %s AND position = 3",
                       [convo._meta.pk.get_db_prep_value(convo.pk, connection)])
        assert bytes(cursor.fetchone()[0]).hex() == head["chain_hash"]
    assert keys.verify(head["public_key"], head_message(head), head["signature"])
    listed = reader.get(f"/conversations/{convo.pk}/signed-heads").json()["items"]
    assert listed[0]["signature"] == head["signature"]


def test_signing_a_head_needs_a_known_conversation_and_a_key(convo, client):
    reader = Api(client, make_key(["read"]))
    assert reader.post("/conversations/00000000-0000-0000-0000-000000000000/signed-heads").status_code == 404
    assert error_of(reader.post("/conversations/nope/signed-heads"))["code"] == "not_found"
    assert Api(client, None).post(f"/conversations/{convo.pk}/signed-heads").status_code == 401


def test_sign_heads_signs_what_changed_since_the_last_run(convo, capsys):
    other = store.create_conversation(title="other")
    call_command("sign_heads", "--json")
    assert json.loads(capsys.readouterr().out)["signed"] == 2
    call_command("sign_heads", "--json")
    assert json.loads(capsys.readouterr().out)["signed"] == 0
    store.append_message(conversation_id=other.pk, message={"kind": "note", "text": "later"})
    call_command("sign_heads", "--json")
    assert json.loads(capsys.readouterr().out)["signed"] == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT position, reason FROM proofs_signedhead WHERE conversation_id = %s ORDER BY id",
                       [str(other.pk)])
        assert cursor.fetchall() == [(-1, "cron"), (0, "cron")]


# -- the subject access export ---------------------------------------------------------------------


@pytest.fixture
def subject_data(convo):
    """customer:42 typed three ways, one fact reviewed, a fact read, a receipt; and someone else's data."""
    nfd = store.create_conversation(title="Second", subject="CUSTOMER:42")
    store.append_message(conversation_id=nfd.pk, message={"kind": "user", "content": "Hello again"})
    store.checkpoint_at(conversation_id=nfd.pk, position=0, summary="Greeted.")
    other = store.create_conversation(title="Not them", subject="customer:43")
    store.append_message(conversation_id=other.pk, message={"kind": "user", "content": "SECRET-OF-43"})
    fact = facts_store.propose_fact(subject="Customer:42", text="Prefers email.", importance=5, created_by="key:bot")
    facts_store.approve_fact(fact_id=fact.pk, actor="user:rev")
    facts_store.propose_fact(subject="customer:43", text="FACT-OF-43", importance=5, created_by="key:bot")
    facts_store.record_access(actor="user:rev", subject="customer:42")
    return {"ids": {str(convo.pk), str(nfd.pk)}, "other": other, "fact": fact}


def test_the_subject_export_holds_everything_about_them_and_nothing_else(subject_data, admin_key):
    response = admin_key.get("/subject-export", {"subject": "Customer:42"})
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    zf = _zip(response)
    names = set(zf.namelist())
    for cid in subject_data["ids"]:
        assert {f"conversations/{cid}.jsonl", f"conversations/{cid}.md"} <= names
    assert not any(str(subject_data["other"].pk) in n for n in names)
    whole = b"".join(zf.read(n) for n in names)
    assert b"SECRET-OF-43" not in whole and b"FACT-OF-43" not in whole
    facts = [json.loads(line) for line in zf.read("facts.jsonl").splitlines()]
    assert [f["text"] for f in facts] == ["Prefers email."]
    assert facts[0]["reviewed_by"] == "user:rev" and [e["kind"] for e in facts[0]["history"]] == ["proposed",
                                                                                                  "approved"]
    access = [json.loads(line) for line in zf.read("access_log.jsonl").splitlines()]
    assert any(a["log"] == "facts" and a["actor"] == "user:rev" and a["subject"] == "customer:42" for a in access)
    lines = [json.loads(line) for line in zf.read("conversations.jsonl").splitlines()]
    assert {line["id"] for line in lines} == subject_data["ids"]


def test_the_manifest_names_every_file_and_is_signed(subject_data, admin_key):
    zf = _zip(admin_key.get("/subject-export", {"subject": "customer:42"}))
    manifest_bytes = zf.read("manifest.json")
    manifest = json.loads(manifest_bytes)
    signature = json.loads(zf.read("manifest.sig.json"))
    assert keys.verify(_public(signature["key_id"]), manifest_message(manifest_bytes), signature["signature"])
    listed = {f["path"]: f["sha256"] for f in manifest["files"]}
    assert set(listed) == set(zf.namelist()) - {"manifest.json", "manifest.sig.json"}
    for path, digest in listed.items():
        assert hashlib.sha256(zf.read(path)).hexdigest() == digest
    assert {h["conversation_id"] for h in manifest["heads"]} == subject_data["ids"]
    public = {k["key_id"]: k["public_key"] for k in manifest["keys"]}
    assert all(heads.verify_head(h, public) for h in manifest["heads"])


def test_the_receipts_of_deletion_requests_for_the_subject_come_with_it(subject_data, admin_key):
    mine = DeletionReceipt.objects.create(actor="user:a", kind="subject", subject_sha256=hashlib.sha256(
        b"customer:42").hexdigest(), conversation_ids=[], counts={}, filed_verification={"status": "verified"})
    DeletionReceipt.objects.create(actor="user:a", kind="subject", subject_sha256=hashlib.sha256(
        b"customer:43").hexdigest(), conversation_ids=[], counts={}, filed_verification={})
    zf = _zip(admin_key.get("/subject-export", {"subject": "Customer:42"}))
    receipts = [json.loads(line) for line in zf.read("deletion_receipts.jsonl").splitlines()]
    assert [r["request_id"] for r in receipts] == [str(mine.pk)]


def test_the_subject_export_is_for_admins_and_checks_its_subject(convo, reader, admin_key):
    assert reader.get("/subject-export", {"subject": "customer:42"}).status_code == 403
    for bad, status in [({}, 422), ({"subject": " "}, 422), ({"subject": "x" * 301}, 422),
                        ({"subject": "a\x01b"}, 422)]:
        response = admin_key.get("/subject-export", bad)
        assert response.status_code == status, bad
        assert error_of(response)["field"] == "subject"


def test_the_download_is_audited_and_in_the_access_logs(subject_data, admin_key):
    b"".join(admin_key.get("/subject-export", {"subject": "customer:42"}).streaming_content)
    event = AuditEvent.objects.get(action="subject.exported")
    assert event.detail["subject_sha256"] == hashlib.sha256(b"customer:42").hexdigest()
    assert event.detail["conversations"] == 2 and "customer:42" not in json.dumps(event.detail)
    assert {str(a.conversation_id) for a in ConversationAccess.objects.filter(via="export")} == subject_data["ids"]
    assert FactAccess.objects.filter(view="subject access export").count() == 1


def test_the_admin_page_requests_then_downloads_both_audited(client, subject_data):
    login_as(client, "admin")
    assert client.get("/admin/proofs/subject-export/").status_code == 200
    page = client.post("/admin/proofs/subject-export/request/", {"subject": "CUSTOMER:42"})
    assert page.status_code == 200 and b"2 conversations" in page.content
    assert AuditEvent.objects.filter(action="subject.export_requested").count() == 1
    download = client.post("/admin/proofs/subject-export/download/", {"subject": "CUSTOMER:42"})
    assert download["Content-Disposition"].startswith('attachment; filename="subject-export-')
    assert "manifest.json" in _zip(download).namelist()
    assert AuditEvent.objects.filter(action="subject.exported", detail__via="page").count() == 1
    assert client.post("/admin/proofs/subject-export/request/", {"subject": ""}).status_code == 422


def test_only_admins_see_the_proof_pages(client, convo):
    login_as(client, "auditor")
    assert client.get("/admin/proofs/signing-keys/").status_code == 403
    assert client.post("/admin/proofs/subject-export/download/", {"subject": "customer:42"}).status_code == 403


def test_the_keys_page_shows_the_current_public_key(client):
    login_as(client, "admin")
    key = keys.active_key()
    page = client.get("/admin/proofs/signing-keys/").content.decode()
    assert key.public_b64 in page and key.key_id in page and "sign_heads" in page


def test_export_subject_writes_an_owner_only_zip(subject_data, tmp_path):
    out = tmp_path / "export.zip"
    call_command("export_subject", "customer:42", "-o", str(out))
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert "manifest.json" in zipfile.ZipFile(out).namelist()
    assert AuditEvent.objects.filter(action="subject.exported", detail__via="command").count() == 1
    assert not SignedHead.objects.filter(reason="cron").exists()


# -- the database keeps the proofs ------------------------------------------------------------------


@pytest.mark.parametrize("sql", [
    "UPDATE proofs_signedhead SET chain_hash = 'forged'",
    "DELETE FROM proofs_signedhead",
    "UPDATE proofs_signingkey SET public_key = 'forged'",
    "DELETE FROM proofs_signingkey",
])
def test_the_database_refuses_to_rewrite_heads_or_public_keys(convo, sql):
    from django.db import DatabaseError, transaction

    heads.sign(convo, reason="request")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM proofs_signedhead WHERE chain_hash <> 'forged'")
        assert cursor.fetchone()[0] == 1
    # Retiring a key is the one change allowed.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE proofs_signingkey SET retired_at = %s", [convo.created_at])


def test_the_commands_refuse_clearly(settings, tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="subject is required"):
        call_command("export_subject", " ", "-o", str(tmp_path / "x.zip"))
    (tmp_path / "taken.zip").write_bytes(b"mine")
    with pytest.raises(CommandError, match="exists"):
        call_command("export_subject", "customer:42", "-o", str(tmp_path / "taken.zip"))
    assert (tmp_path / "taken.zip").read_bytes() == b"mine"
    settings.MEMORYUI_SIGNING_KEY_FILE = str(tmp_path / "given.pem")
    with pytest.raises(CommandError, match="pointing the setting at a new key file"):
        call_command("rotate_signing_key")


def test_rotate_signing_key_says_which_keys(capsys):
    old = keys.active_key().key_id
    call_command("rotate_signing_key")
    out = capsys.readouterr().out
    assert f"Retired signing key {old}" in out and keys.load_active().key_id in out


def test_with_the_key_unusable_exports_still_download_and_signing_says_why(settings, tmp_path, convo, admin_key,
                                                                           reader, caplog):
    settings.MEMORYUI_SIGNING_KEY_FILE = str(tmp_path / "missing.pem")
    with caplog.at_level("ERROR", logger="memoryui.proofs"):
        response = reader.get(f"/conversations/{convo.pk}/export", {"format": "jsonl"})
        lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert response.status_code == 200 and len(lines) == 4 and "without a signed head" in caplog.text
    for response in (reader.post(f"/conversations/{convo.pk}/signed-heads"),
                     admin_key.get("/subject-export", {"subject": "customer:42"})):
        assert response.status_code == 503
        assert error_of(response)["code"] == "signing_unavailable" and "cannot be read" in error_of(response)["message"]
