"""An import page upload lives until it is confirmed or expires, is private, and goes with its subject.

The data folder is a temporary one per test (uploads.py reads settings.DATA_DIR at call
time), so counts of removed uploads are exact while other test processes run.
"""

import json
import os
import stat
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from conversations import api_keys
from conversations.models import Conversation
from conversations.project_store import create_project
from conversations.retention.models import PruneRun
from conversations.retention.pruning import prune_older_than
from tests.api_support import Api, login_as, make_key
from tests.helpers import make_person

pytestmark = pytest.mark.django_db(transaction=True)

SUBJECT = "cust:uploads-9d41e7"
TEXTS = [
    "Ottilie Fennimore-Baptiste keeps her spare key under the blue heron planter",
    "she asked us to ship the replacement kettle to 17 Marrowbone Row, Dunmere",
]
OTHER_TEXT = "Leopold from Ashcombe wants his invoice resent in Portuguese"


def _journal(*texts) -> bytes:
    return "".join(json.dumps({"kind": "note", "text": t, "at": "2025-03-01T10:00:00Z"}) + "\n"
                   for t in texts).encode()


@pytest.fixture
def data_dirs(settings, tmp_path):
    """(the test's data folder, the folder the test database lives in)."""
    database_folder = Path(settings.DATA_DIR)
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir(mode=0o700)
    return settings.DATA_DIR, database_folder


@pytest.fixture
def admin(client):
    login_as(client, "admin")
    return client


def _preview(client, content: bytes, *, subject="", name="notes.jsonl", prefix="") -> str:
    response = client.post(f"{prefix}/admin/import/", {"file": SimpleUploadedFile(name, content), "format": "journal",
                                              "namespace": "support", "subject": subject})
    assert response.status_code == 200, response.content.decode()[-2000:]
    return response.content.decode().split('name="token" value="')[1].split('"')[0]


def _confirm(client, token: str, *, subject="", prefix=""):
    return client.post(f"{prefix}/admin/import/", {"token": token, "confirm": "1", "format": "journal",
                                          "namespace": "support", "subject": subject, "name": "notes.jsonl"})


def _upload(folder: Path, token: str) -> Path:
    return folder / "uploads" / f"{token}.upload"


def _backdate(path: Path, minutes: float) -> None:
    then = time.time() - minutes * 60
    os.utime(path, (then, then))


def _files_holding(needle: bytes, *roots: Path) -> list[str]:
    """Every file under the roots whose bytes hold the needle, except the live SQLite
    files: erasure verifies those itself, and opening one here and closing it would
    drop this process's database locks (conversations/retention/rawfiles.py)."""
    hits = []
    for root in roots:
        for path in root.rglob("*"):
            if ".sqlite3" in path.name or not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except (FileNotFoundError, PermissionError):
                continue  # another test process's file, gone or not ours
            if needle in data:
                hits.append(str(path))
    return hits


# ---- lifetime and mode ----------------------------------------------------------------------


def test_it_keeps_the_upload_0600_in_a_0700_folder(admin, data_dirs):
    data, _ = data_dirs
    (data / "uploads").mkdir(mode=0o755)  # as an older version left it
    os.chmod(data / "uploads", 0o755)
    token = _preview(admin, _journal(*TEXTS), subject=SUBJECT)
    path = _upload(data, token)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.with_suffix(".json").stat().st_mode) == 0o600
    assert stat.S_IMODE((data / "uploads").stat().st_mode) == 0o700
    assert SUBJECT.encode() not in path.with_suffix(".json").read_bytes()  # the record names no subject


def test_a_preview_with_nothing_to_confirm_keeps_no_upload(admin, data_dirs):
    data, _ = data_dirs
    assert _confirm(admin, _preview(admin, _journal(*TEXTS)), subject=SUBJECT).status_code == 200
    response = admin.post("/admin/import/", {"file": SimpleUploadedFile("notes.jsonl", _journal(*TEXTS)),
                                             "format": "journal", "namespace": "support"})
    assert response.status_code == 200 and 'name="token"' not in response.content.decode()
    assert list((data / "uploads").iterdir()) == []


def test_it_removes_the_upload_once_the_import_is_confirmed(admin, data_dirs):
    data, _ = data_dirs
    token = _preview(admin, _journal(*TEXTS), subject=SUBJECT)
    assert _upload(data, token).exists()
    response = _confirm(admin, token, subject=SUBJECT)
    assert response.status_code == 200 and "Imported" in response.content.decode()
    assert Conversation.objects.filter(subject=SUBJECT).count() == 1
    assert list((data / "uploads").iterdir()) == []


def test_it_refuses_an_expired_upload_on_confirm_and_removes_it(admin, data_dirs):
    data, _ = data_dirs
    token = _preview(admin, _journal(*TEXTS), subject=SUBJECT)
    _backdate(_upload(data, token), 61)
    response = _confirm(admin, token, subject=SUBJECT)
    assert response.status_code == 422 and "expired" in response.content.decode()
    assert not Conversation.objects.exists()
    assert list((data / "uploads").iterdir()) == []


def test_a_new_preview_removes_the_uploads_nobody_confirmed_in_time(admin, data_dirs, settings):
    data, _ = data_dirs
    settings.MEMORYUI_UPLOAD_TTL_MINUTES = 5
    old = _preview(admin, _journal(TEXTS[0]))
    recent = _preview(admin, _journal(TEXTS[1]))
    _backdate(_upload(data, old), 6)
    _backdate(_upload(data, recent), 4)
    newest = _preview(admin, _journal(OTHER_TEXT))
    assert not _upload(data, old).exists() and not _upload(data, old).with_suffix(".json").exists()
    assert _upload(data, recent).exists() and _upload(data, newest).exists()


def test_prune_removes_an_expired_upload_keeps_a_fresh_one_and_says_how_many(admin, data_dirs):
    data, _ = data_dirs
    expired, fresh = _preview(admin, _journal(TEXTS[0])), _preview(admin, _journal(TEXTS[1]))
    _backdate(_upload(data, expired), 61)
    result = prune_older_than(days=30)
    assert result.uploads_removed == 1
    assert not _upload(data, expired).exists() and _upload(data, fresh).exists()
    assert "removed 1 expired upload that nobody confirmed" in PruneRun.objects.get(pk=result.run_id).notes

    _backdate(_upload(data, fresh), 61)
    out = StringIO()
    call_command("prune", stdout=out, stderr=StringIO())
    assert "removed 1 expired uploads" in out.getvalue()
    assert list((data / "uploads").iterdir()) == []


# ---- deletion requests ----------------------------------------------------------------------


def test_a_deletion_request_removes_previews_nobody_confirmed_and_no_file_keeps_the_text(admin, data_dirs, client):
    data, database_folder = data_dirs
    # Imported once, then previewed twice with more notes and never confirmed (the audit's case).
    assert _confirm(admin, _preview(admin, _journal(*TEXTS), subject=SUBJECT), subject=SUBJECT).status_code == 200
    content = _journal(*TEXTS, "and she called again about the kettle on Tuesday")
    left = [_preview(admin, content, subject=SUBJECT), _preview(admin, content, subject=SUBJECT)]
    unrelated = _preview(admin, _journal(OTHER_TEXT), subject="cust:someone-else")
    needles = [SUBJECT.encode(), *(t.encode() for t in TEXTS)]
    assert all(_files_holding(TEXTS[0].encode(), data) for _ in left)  # the check below can fail

    janitor = Api(client, make_key(["admin"], name="janitor"))
    response = janitor.post("/deletion-requests", {"subject": SUBJECT})

    assert response.status_code == 201, response.content
    receipt = response.json()
    assert receipt["verification"]["status"] == "verified", json.dumps(receipt["verification"])
    assert "upload folder" in receipt["verification"]["scope"]
    removed = receipt["verification"]["uploads"]["removed"]
    assert sorted(r["file"] for r in removed) == sorted(f"uploads/{t}.upload" for t in left)
    assert all(r["removed"] and r["bytes"] == len(content) for r in removed)
    assert receipt["counts"]["uploads"] == 2
    assert receipt["verification"]["uploads"]["found_in"] == []
    for needle in needles:
        assert _files_holding(needle, data, database_folder) == [], needle
    assert _upload(data, unrelated).exists()  # another subject's preview waits on
    assert SUBJECT not in json.dumps(receipt)


def test_a_preview_that_was_never_imported_goes_by_its_subject(admin, data_dirs, client):
    data, _ = data_dirs
    token = _preview(admin, _journal(*TEXTS), subject=SUBJECT.upper())  # subjects compare in normal form
    receipt = Api(client, make_key(["admin"])).post("/deletion-requests", {"subject": SUBJECT}).json()
    assert receipt["verification"]["uploads"]["removed"] == [
        {"file": f"uploads/{token}.upload", "bytes": len(_journal(*TEXTS)), "why": ["record"], "removed": True}]
    assert not _upload(data, token).exists()
    assert receipt["verification"]["status"] in ("verified", "nothing_to_check")


def test_a_preview_without_a_subject_goes_when_it_holds_a_deleted_text(admin, data_dirs, client):
    data, _ = data_dirs
    assert _confirm(admin, _preview(admin, _journal(*TEXTS), subject=SUBJECT), subject=SUBJECT).status_code == 200
    copied = _preview(admin, _journal(OTHER_TEXT, TEXTS[1]), name="pasted.jsonl")
    kept = _preview(admin, _journal(OTHER_TEXT), name="other.jsonl")
    receipt = Api(client, make_key(["admin"])).post("/deletion-requests", {"subject": SUBJECT}).json()
    assert receipt["verification"]["status"] == "verified", receipt["verification"]
    assert [(r["file"], r["why"]) for r in receipt["verification"]["uploads"]["removed"]] == [
        (f"uploads/{copied}.upload", ["text"])]
    assert _upload(data, kept).exists() and not _upload(data, copied).exists()


def test_the_receipt_page_lists_the_removed_upload(admin, data_dirs, client):
    token = _preview(admin, _journal(*TEXTS), subject=SUBJECT)
    receipt = Api(client, make_key(["admin"])).post("/deletion-requests", {"subject": SUBJECT}).json()
    page = admin.get(f"/admin/receipts/{receipt['request_id']}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"uploads/{token}.upload" in html and "previewed for this subject" in html


# ---- projects -------------------------------------------------------------------------------


def _held(folder: Path, token: str) -> tuple[bytes, bytes]:
    """An upload's bytes and its record's."""
    upload = _upload(folder, token)
    return upload.read_bytes(), upload.with_suffix(".json").read_bytes()


def test_a_deletion_request_takes_its_own_projects_uploads_and_every_projects_takes_all(data_dirs, client):
    data, _ = data_dirs
    a, b = create_project(slug="uploads-a"), create_project(slug="uploads-b")
    client.force_login(make_person("uploads-admin", {a: "admin", b: "admin"}))
    more = _journal(*TEXTS, "and she called again about the kettle")
    for prefix in ("/p/uploads-a", "/p/uploads-b"):
        assert _confirm(client, _preview(client, _journal(*TEXTS), subject=SUBJECT, prefix=prefix),
                        subject=SUBJECT, prefix=prefix).status_code == 200
    ours = _preview(client, more, subject=SUBJECT, prefix="/p/uploads-a")
    kept = _preview(client, _journal(OTHER_TEXT), name="other.jsonl", prefix="/p/uploads-a")
    # B holds the same subject's preview, and one without a subject holding a text A deletes.
    theirs = [_preview(client, more, subject=SUBJECT, prefix="/p/uploads-b"),
              _preview(client, _journal(OTHER_TEXT, TEXTS[1]), name="pasted.jsonl", prefix="/p/uploads-b")]
    before = {token: _held(data, token) for token in theirs}

    _, secret = api_keys.create_api_key(name="a-admin", scopes=["admin"], project=a)
    receipt = Api(client, secret).post("/deletion-requests", {"subject": SUBJECT}).json()

    uploads = receipt["verification"]["uploads"]
    assert receipt["project"] == "uploads-a" and receipt["verification"]["status"] == "verified", uploads
    assert [r["file"] for r in uploads["removed"]] == [f"uploads/{ours}.upload"]
    assert uploads["files_searched"] == 1 and uploads["found_in"] == []  # A's kept preview, and only it
    assert {token: _held(data, token) for token in theirs} == before
    assert not any(token in json.dumps(receipt) for token in theirs)
    assert not _upload(data, ours).exists() and _upload(data, kept).exists()

    again = _preview(client, _journal(*TEXTS), subject=SUBJECT, prefix="/p/uploads-a")
    _, everywhere = api_keys.create_api_key(name="controller", scopes=["admin"], all_projects=True)
    receipt = Api(client, everywhere).post("/deletion-requests", {"subject": SUBJECT, "all_projects": True}).json()

    assert receipt["all_projects"] is True and receipt["verification"]["status"] == "verified", receipt
    assert sorted(r["file"] for r in receipt["verification"]["uploads"]["removed"]) == sorted(
        f"uploads/{token}.upload" for token in [again, *theirs])
    assert not any(_upload(data, token).exists() for token in [again, *theirs])
    assert _upload(data, kept).exists()


def test_a_projects_prune_removes_only_its_own_expired_uploads(data_dirs, client):
    data, _ = data_dirs
    a, b = create_project(slug="expire-a"), create_project(slug="expire-b")
    client.force_login(make_person("expire-admin", {a: "admin", b: "admin"}))
    ours = _preview(client, _journal(OTHER_TEXT), prefix="/p/expire-a")
    theirs = _preview(client, _journal(OTHER_TEXT), prefix="/p/expire-b")
    for token in (ours, theirs):
        _backdate(_upload(data, token), 120)

    out = StringIO()
    call_command("prune", "--older-than-days", "30", "--project", "expire-a", stdout=out)

    assert "removed 1 expired uploads" in out.getvalue()
    assert not _upload(data, ours).exists() and _upload(data, theirs).exists()
