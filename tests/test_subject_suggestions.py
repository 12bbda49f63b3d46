"""Subjects people can find: a deletion request for a subject with nothing
stored says so, suggests the stored subjects close to it with their counts, and files a
receipt for nothing only when asked to explicitly, on the page and in the API."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conversations import api_keys, store
from conversations.demo import SUPPORT_SUBJECT, load_demo
from conversations.facts import store as facts
from conversations.facts.models import Fact
from conversations.models import Conversation
from conversations.retention import suggestions
from conversations.retention.models import DeletionReceipt
from conversations.retention.suggestions import suggest_subjects
from tests.retention_support import conversation, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("answer_shapes")]


@pytest.fixture
def admin(client):
    client.force_login(make_user("boss", "admin"))
    return client


@pytest.fixture
def admin_key():
    _, secret = api_keys.create_api_key(name="janitor", scopes=["admin"])
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def _post(client, body, headers):
    return client.post("/api/v1/deletion-requests", json.dumps(body), content_type="application/json", **headers)


def _fact(subject, text="Prefers email"):
    return facts.propose_fact(subject=subject, text=text, importance=5, created_by="agent:test")


def _subjects(found):
    return [(s.subject, s.conversations, s.facts, s.why) for s in found]


def test_the_demo_customer_typed_without_her_domain_is_suggested_with_her_counts():
    load_demo(coding_turns=12)
    assert SUPPORT_SUBJECT == "customer:maria.keller@example.com"
    held = Fact.objects.filter(subject=SUPPORT_SUBJECT).count()
    assert held == 6  # every state the review pages show (demo.py); the ticket and its fork are the 2 conversations
    found = suggest_subjects("customer:maria.keller")
    assert _subjects(found)[0] == (SUPPORT_SUBJECT, 2, held, "local_part")
    assert [s.subject for s in suggest_subjects("Maria.Keller@example.com")] == [SUPPORT_SUBJECT]
    assert [s.subject for s in suggest_subjects("customer:maria.keller@example.co")] == [SUPPORT_SUBJECT]


@pytest.mark.parametrize("typed, stored, why", [
    ("cust:48123", "cust:48213", "edit_distance"),  # two letters swapped: distance 2
    ("CUST:4821", "cust:48213", "edit_distance"),  # case folding, then one letter
    ("cust:jose\u0301-9", "cust:josé-93", "edit_distance"),  # decomposed é: NFC first
    ("maria.keller", "customer:maria.keller@example.com", "local_part"),
    ("user:maria.keller@other.org", "customer:maria.keller@example.com", "local_part"),
    ("team:payments-eu-west", "team:payments-eu-west-2-archive", "prefix"),
    ("team:payments-eu-west-2-archive-old", "team:payments-eu-west-2-archive", "prefix"),
])
def test_a_close_stored_subject_is_suggested(typed, stored, why):
    conversation(subject=stored, messages=1)
    conversation(subject="cust:unrelated-77", messages=1)
    assert _subjects(suggest_subjects(typed)) == [(stored, 1, 0, why)]


@pytest.mark.parametrize("typed", ["customer:", "cust:1", "x", "completely-other", "team:pa", "maria"])
def test_a_far_subject_suggests_nothing(typed):
    conversation(subject="customer:maria.keller@example.com", messages=1)
    conversation(subject="team:payments-eu-west-2", messages=1)
    assert suggest_subjects(typed) == []


def test_suggestions_are_ranked_counted_and_capped():
    for n in range(8):
        conversation(subject=f"cust:4821{n}", messages=1)
    _fact("cust:48210")
    _fact("cust:48210", "Lives in Graz")
    found = suggest_subjects("cust:4821")
    assert len(found) == suggestions.MAX_SUGGESTIONS
    assert all(s.why == "edit_distance" for s in found)
    assert found[0] == suggestions.Suggestion(subject="cust:48210", conversations=1, facts=2, why="edit_distance")


def test_a_subject_held_only_by_facts_is_suggested():
    _fact("Customer:Ana-Lopes")
    assert _subjects(suggest_subjects("customer:ana-lope")) == [("Customer:Ana-Lopes", 0, 1, "edit_distance")]


def test_the_lookup_reads_a_bounded_number_of_subjects_not_every_row():
    # 40 conversations share each subject: the loose index scan reads each subject once.
    for n in range(5):
        for _ in range(40):
            store.create_conversation(title="t", subject=f"cust:bulk-{n}")
    with CaptureQueriesContext(connection) as queries:
        found = suggest_subjects("cust:bulk-9")
    assert [s.subject for s in found] == [f"cust:bulk-{n}" for n in range(5)]
    assert len(queries) < 40
    assert any("WITH RECURSIVE" in q["sql"] for q in queries)


# ---- the API -------------------------------------------------------------------------------


def test_the_api_refuses_a_receipt_for_nothing_with_suggestions(client, admin_key):
    conversation(subject="customer:maria.keller@example.com", messages=2)
    _fact("customer:maria.keller@example.com")
    response = _post(client, {"subject": "customer:maria.keller"}, admin_key)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "nothing_stored" and error["field"] == "subject" and "allow_empty" in error["message"]
    assert error["suggestions"] == [{"subject": "customer:maria.keller@example.com", "conversations": 1,
                                     "facts": 1, "why": "local_part"}]
    assert DeletionReceipt.objects.count() == 0


def test_the_api_preview_says_nothing_is_stored_and_suggests(client, admin_key):
    conversation(subject="cust:48213", messages=1)
    body = _post(client, {"subject": "cust:48123", "dry_run": True}, admin_key).json()
    assert body["nothing_stored"] is True
    assert body["suggestions"] == [{"subject": "cust:48213", "conversations": 1, "facts": 0, "why": "edit_distance"}]
    found = _post(client, {"subject": "cust:48213", "dry_run": True}, admin_key).json()
    assert found["nothing_stored"] is False and found["suggestions"] == []


def test_the_api_files_a_receipt_for_nothing_when_asked_explicitly(client, admin_key):
    response = _post(client, {"subject": "cust:never-here", "allow_empty": True}, admin_key)
    assert response.status_code == 201
    receipt = response.json()
    assert receipt["counts"]["conversations"] == 0 and receipt["counts"]["facts"] == 0
    assert DeletionReceipt.objects.count() == 1


def test_unknown_conversation_ids_alone_need_allow_empty_too(client, admin_key):
    body = {"conversation_ids": ["00000000-0000-4000-8000-000000000000"]}
    response = _post(client, body, admin_key)
    assert response.status_code == 404 and response.json()["error"]["field"] == "conversation_ids"
    assert _post(client, {**body, "allow_empty": True}, admin_key).status_code == 201


def test_allow_empty_must_be_a_boolean(client, admin_key):
    response = _post(client, {"subject": "cust:x", "allow_empty": "yes"}, admin_key)
    assert response.status_code == 422 and response.json()["error"]["field"] == "allow_empty"
    assert DeletionReceipt.objects.count() == 0


def test_a_subject_with_data_needs_no_allow_empty(client, admin_key):
    c = conversation(subject="cust:held", messages=1)
    assert _post(client, {"subject": "CUST:held"}, admin_key).status_code == 201
    assert not Conversation.objects.filter(pk=c.pk).exists()


# ---- the pages -----------------------------------------------------------------------------


def test_the_preview_says_nothing_is_stored_and_offers_the_close_subjects(admin):
    load_demo(coding_turns=12)
    html = admin.post("/admin/deletion-requests/preview/", {"subject": "customer:maria.keller"}).content.decode()
    assert "Nothing is stored about this" in html
    suggestions_html = html.split('id="subject-suggestions"', 1)[1].split("</ul>", 1)[0]
    assert SUPPORT_SUBJECT in suggestions_html and "2 conversations, 6 facts" in suggestions_html
    assert "Delete and verify" not in html
    assert "File a receipt that nothing is stored" in html and 'name="allow_empty" value="yes"' in html


def test_a_receipt_for_nothing_is_filed_only_with_the_explicit_choice(admin):
    form = {"subject": "cust:nobody", "conversation_ids": "", "confirm": "yes"}
    response = admin.post("/admin/deletion-requests/execute/", form)
    assert response.status_code == 422 and b"no receipt was filed" in response.content
    assert DeletionReceipt.objects.count() == 0
    response = admin.post("/admin/deletion-requests/execute/", {**form, "allow_empty": "yes"})
    assert response.status_code == 302 and DeletionReceipt.objects.count() == 1
