"""Deletion requests and subject exports for one project or for every project.

A subject held in projects A and B, erased in A only: B keeps every row of every table of
project data byte for byte; then erased everywhere: gone from both, one receipt saying every
project. Filing for every project is for an all-projects key or a superuser, recorded in the
audit log as a bypass; the receipt, its page and the list say which (conversations/
retention/erasure.py, conversations/proofs/bundle.py)."""

import io
import json
import zipfile

import pytest
from django.core.management import call_command

from conversations import api_keys, projects
from conversations.facts import store as facts_store
from conversations.facts.models import Fact, FactAccess
from conversations.migration_sql import OUTSIDE_ROW_LEVEL_SECURITY
from conversations.models import AuditEvent, Conversation, IdempotencyKey
from conversations.project_store import create_project
from conversations.retention.models import DeletionReceipt
from conversations.roles import assign_role
from conversations.subjects import normalize_subject
from tests.api_support import Api
from tests.helpers import make_user
from tests.project_rows import fill, project_tables, rows_by_project

SUBJECT = "customer:both@example.com"
NORM = normalize_subject(SUBJECT)


def operator(client) -> Api:
    _, secret = api_keys.create_api_key(name="controller", scopes=["admin"], all_projects=True)
    return Api(client, secret)


def rows_of(project) -> dict:
    """Every row of every table of project data that belongs to `project`, every column's value."""
    cache = {}
    return {t.table: rows_by_project(t, cache).get(project.pk, {}) for t in project_tables()}


def held_about_subject(project) -> dict:
    return {
        "conversations": Conversation.everywhere.filter(project=project, subject_norm=NORM).count(),
        "facts": Fact.everywhere.filter(project=project, subject_norm=NORM).count(),
        "fact_access": FactAccess.everywhere.filter(project=project, subject_norm=NORM).count(),
        "idempotency_keys": IdempotencyKey.objects.filter(project=project, subject_norm=NORM).count(),
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_erased_in_one_project_the_other_keeps_its_rows_byte_for_byte_then_everywhere_both_go(client):
    a, b = create_project(slug="erase-a"), create_project(slug="erase-b")
    ours = fill(client, a, "alpha-erase", subject=SUBJECT)
    fill(client, b, "beta-erase", subject=SUBJECT)
    assert held_about_subject(b)["conversations"] and held_about_subject(b)["facts"]
    before = rows_of(b)
    assert not [t for t, rows in before.items() if not rows and t not in OUTSIDE_ROW_LEVEL_SECURITY]

    erased = ours["api"].post("/deletion-requests", {"subject": SUBJECT})
    assert erased.status_code == 201, erased.content
    receipt = erased.json()
    assert receipt["project"] == "erase-a" and receipt["all_projects"] is False
    assert receipt["counts"]["conversations"] >= 2 and receipt["counts"]["facts"] == 1
    assert held_about_subject(a) == {"conversations": 0, "facts": 0, "fact_access": 0, "idempotency_keys": 0}
    after = rows_of(b)
    for table, rows in before.items():
        assert after[table] == rows, f"{table}: B's rows changed when A erased the subject"

    everywhere = operator(client).post("/deletion-requests", {"subject": SUBJECT, "all_projects": True})
    assert everywhere.status_code == 201, everywhere.content
    receipt = everywhere.json()
    assert receipt["project"] is None and receipt["all_projects"] is True
    assert receipt["counts"]["conversations"] >= 2 and receipt["counts"]["facts"] == 1
    for project in (a, b):
        assert held_about_subject(project) == {"conversations": 0, "facts": 0, "fact_access": 0,
                                               "idempotency_keys": 0}
    assert DeletionReceipt.everywhere.filter(project__isnull=True).count() == 1
    assert AuditEvent.everywhere.filter(action="scope.bypass",
                                        detail={"reason": "deletion request for every project"}).count() == 1


@pytest.mark.django_db
def test_a_project_key_files_for_its_project_only(client):
    a = create_project(slug="only-a")
    _, secret = api_keys.create_api_key(name="a-admin", scopes=["admin"], project=a)
    with projects.scoped(projects.one(a.pk)):
        Conversation.objects.create(title="a", subject=SUBJECT)
    refused = Api(client, secret).post("/deletion-requests", {"subject": SUBJECT, "all_projects": True})
    assert refused.status_code == 403 and refused.json()["error"]["field"] == "all_projects"
    assert Conversation.everywhere.filter(subject_norm=NORM).count() == 1


@pytest.mark.django_db
def test_a_superuser_files_for_every_project_from_the_page_and_the_receipt_says_so(client):
    a, b = create_project(slug="page-a"), create_project(slug="page-b")
    for project in (a, b):
        with projects.scoped(projects.one(project.pk)):
            Conversation.objects.create(title=f"{project.slug} talk", subject=SUBJECT)
    admin = make_user(None, "a-admin")
    assign_role(admin, "admin", a)
    client.force_login(admin)
    assert "in every project" not in client.get("/p/page-a/admin/deletion-requests/").content.decode()
    refused = client.post("/p/page-a/admin/deletion-requests/execute/",
                          {"subject": SUBJECT, "all_projects": "yes", "confirm": "yes"})
    assert refused.status_code == 403
    done = client.post("/p/page-a/admin/deletion-requests/execute/", {"subject": SUBJECT, "confirm": "yes"})
    assert done.status_code == 302
    page = client.get(done["Location"]).content.decode()
    assert "the project page-a" in page
    assert Conversation.everywhere.filter(subject_norm=NORM).count() == 1

    root = make_user(None, "root")
    root.is_superuser = True
    root.save()
    client.force_login(root)
    form = client.get("/p/page-a/admin/deletion-requests/").content.decode()
    assert "in every project, not only page-a" in form
    preview = client.post("/p/page-a/admin/deletion-requests/preview/", {"subject": SUBJECT, "all_projects": "yes"})
    assert '<strong>every project</strong>' in preview.content.decode()
    assert 'id="count-conversations">1<' in preview.content.decode()
    done = client.post("/p/page-a/admin/deletion-requests/execute/",
                       {"subject": SUBJECT, "all_projects": "yes", "confirm": "yes"})
    assert done.status_code == 302
    assert Conversation.everywhere.filter(subject_norm=NORM).count() == 0
    receipt = DeletionReceipt.everywhere.get(project__isnull=True)
    page = client.get(done["Location"]).content.decode()
    assert "<strong>every project</strong> (filed for the whole server)" in page
    assert json.loads(client.get(f"/p/page-a/admin/receipts/{receipt.pk}.json").content)["all_projects"] is True
    listed = client.get("/p/page-a/admin/receipts/").content.decode()
    assert str(receipt.pk) in listed and "<strong>every project</strong>" in listed and ">page-a<" in listed
    # A project admin does not see the server's receipt; B's list does not show A's.
    client.force_login(admin)
    assert client.get(f"/p/page-a/admin/receipts/{receipt.pk}/").status_code == 404
    assert str(receipt.pk) not in client.get("/p/page-a/admin/receipts/").content.decode()


def _zip_text(body: bytes) -> tuple[str, dict]:
    with zipfile.ZipFile(io.BytesIO(body)) as zipped:
        text = " ".join(zipped.read(name).decode() for name in zipped.namelist())
        return text, json.loads(zipped.read("manifest.json"))


@pytest.fixture
def held_in_two():
    a, b = create_project(slug="export-a"), create_project(slug="export-b")
    for project, marker in ((a, "alpha-exported"), (b, "beta-exported")):
        with projects.scoped(projects.one(project.pk)):
            Conversation.objects.create(title=f"{marker} talk", subject=SUBJECT)
            facts_store.propose_fact(subject=SUBJECT, text=f"{marker} fact", importance=2, created_by="test")
    return a, b


@pytest.mark.django_db
def test_a_subject_export_holds_one_project_or_every_project(client, held_in_two):
    a, _ = held_in_two
    _, secret = api_keys.create_api_key(name="a-admin", scopes=["admin"], project=a)
    mine = Api(client, secret)
    text, manifest = _zip_text(b"".join(mine.get("/subject-export", {"subject": SUBJECT}).streaming_content))
    assert "alpha-exported" in text and "beta-exported" not in text
    assert manifest["project"] == "export-a" and manifest["all_projects"] is False
    assert mine.get("/subject-export", {"subject": SUBJECT, "all_projects": "true"}).status_code == 403

    answer = operator(client).get("/subject-export", {"subject": SUBJECT, "all_projects": "true"})
    text, manifest = _zip_text(b"".join(answer.streaming_content))
    assert "alpha-exported" in text and "beta-exported" in text
    assert manifest["project"] is None and manifest["all_projects"] is True and "Held in: every project" in text
    # Each project's access logs record the read of its own rows.
    assert {row.project_id for row in FactAccess.everywhere.filter(view="subject access export")} == {
        a.pk, held_in_two[1].pk}


@pytest.mark.django_db
def test_the_export_command_takes_every_project_or_one(tmp_path, held_in_two):
    everything, one = tmp_path / "all.zip", tmp_path / "one.zip"
    call_command("export_subject", SUBJECT, "-o", str(everything), stderr=io.StringIO())
    call_command("export_subject", SUBJECT, "--project", "export-b", "-o", str(one), stderr=io.StringIO())
    text, manifest = _zip_text(everything.read_bytes())
    assert "alpha-exported" in text and "beta-exported" in text and manifest["all_projects"] is True
    text, manifest = _zip_text(one.read_bytes())
    assert "alpha-exported" not in text and "beta-exported" in text and manifest["project"] == "export-b"


@pytest.mark.django_db
def test_a_superuser_exports_every_project_from_the_page(client, held_in_two):
    root = make_user(None, "root")
    root.is_superuser = True
    root.save()
    client.force_login(root)
    asked = client.post("/p/export-a/admin/proofs/subject-export/request/", {"subject": SUBJECT, "all_projects": "yes"})
    assert '<span id="export-scope">every project</span>' in asked.content.decode()
    got = client.post("/p/export-a/admin/proofs/subject-export/download/", {"subject": SUBJECT, "all_projects": "yes"})
    text, manifest = _zip_text(b"".join(got.streaming_content))
    assert "alpha-exported" in text and "beta-exported" in text and manifest["all_projects"] is True
    one = client.post("/p/export-a/admin/proofs/subject-export/download/", {"subject": SUBJECT})
    text, _ = _zip_text(b"".join(one.streaming_content))
    assert "alpha-exported" in text and "beta-exported" not in text


@pytest.mark.django_db(transaction=True)  # the window cleans the files, outside any transaction
def test_the_window_tells_a_project_of_its_own_requests_only(client, settings):
    settings.MEMORYUI_ERASURE_VERIFY = "window"
    apis, filed = {}, {}
    for slug in ("window-a", "window-b"):
        project = create_project(slug=slug)
        _, secret = api_keys.create_api_key(name=f"{slug}-admin", scopes=["admin"], project=project)
        apis[slug] = Api(client, secret)
        with projects.scoped(projects.one(project.pk)):
            Conversation.objects.create(title=f"{slug} talk", subject=SUBJECT)
        answer = apis[slug].post("/deletion-requests", {"subject": SUBJECT})
        assert answer.status_code == 201, answer.content
        filed[slug] = answer.json()["request_id"]
    ran = apis["window-a"].post("/deletion-requests/window")
    assert ran.status_code == 200, ran.content
    assert ran.json()["checked"] == 1 and [r["request_id"] for r in ran.json()["receipts"]] == [filed["window-a"]]
    assert filed["window-b"] not in ran.content.decode()
