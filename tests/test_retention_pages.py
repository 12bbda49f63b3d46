"""The admin pages under /admin/: roles, prune preview and run, deletion requests, receipts."""

import json

import pytest

from conversations.models import Conversation
from conversations.retention.models import DeletionReceipt, PruneRun
from tests.retention_support import conversation, make_user

pytestmark = pytest.mark.django_db

PAGES = ["/admin/", "/admin/prune/", "/admin/prune/?older_than_days=90", "/admin/prune/runs/",
         "/admin/prune/progress/", "/admin/deletion-requests/", "/admin/receipts/", "/admin/audit/",
         "/admin/audit/export.jsonl"]


@pytest.fixture
def admin(client):
    user = make_user("boss", "admin")
    client.force_login(user)
    return user


@pytest.mark.parametrize("role", ["auditor", "reviewer", None])
def test_everyone_but_admins_gets_403(client, role):
    c = conversation(title="keep me", messages=1, age_days=100)
    client.force_login(make_user("someone", role))
    for url in PAGES + [f"/admin/conversations/{c.pk}/delete/"]:
        assert client.get(url).status_code == 403, url
    for url, data in [("/admin/prune/run/", {"older_than_days": "90"}),
                      ("/admin/deletion-requests/preview/", {"subject": "cust:1"}),
                      ("/admin/deletion-requests/execute/", {"conversation_ids": str(c.pk), "confirm": "yes"}),
                      (f"/admin/conversations/{c.pk}/delete/", {"confirm": "yes"})]:
        assert client.post(url, data).status_code == 403, url
    assert Conversation.objects.filter(pk=c.pk).exists()


def test_strangers_are_sent_to_log_in(client):
    for url in PAGES:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), url


def test_admins_see_every_page(client, admin):
    for url in PAGES:
        assert client.get(url).status_code == 200, url
    index = client.get("/admin/").content.decode()
    for link in ("/admin/prune/", "/admin/deletion-requests/", "/admin/receipts/", "/admin/audit/", "/keys/"):
        assert f'href="{link}"' in index


def test_the_prune_page_previews_then_runs(client, admin):
    old = conversation(title="Old <b>thing</b>", messages=3, age_days=100)
    conversation(title="fresh", messages=1)
    preview = client.get("/admin/prune/?older_than_days=90")
    html = preview.content.decode()
    assert "Old &lt;b&gt;thing&lt;/b&gt;" in html and "fresh" not in html
    assert 'id="preview-conversations">1<' in html and "Prune 1 conversation now" in html
    assert Conversation.objects.filter(pk=old.pk).exists()

    response = client.post("/admin/prune/run/", {"older_than_days": "90", "confirm": "yes",
                                                 "conversations": "1", "messages": "3"})
    run = PruneRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/admin/prune/runs/{run.pk}/"
    assert not Conversation.objects.filter(pk=old.pk).exists()
    result = client.get(response["Location"]).content.decode()
    assert 'id="result-conversations">1<' in result and "finished" in result


def test_the_preview_asks_to_confirm_its_counts(client, admin):
    conversation(messages=3, age_days=100)
    conversation(messages=2, age_days=100)
    html = client.get("/admin/prune/?older_than_days=90").content.decode()
    form = html[html.index('id="prune-form"'):html.index("</form>", html.index('id="prune-form"'))]
    assert '<input type="checkbox" name="confirm" value="yes" required>' in form
    assert 'id="confirm-conversations">2<' in form and 'id="confirm-messages">5<' in form
    assert 'id="confirm-bytes">' in form
    assert 'name="conversations" value="2"' in form and 'name="messages" value="5"' in form


@pytest.mark.parametrize("data", [
    {"older_than_days": "90"},
    {"older_than_days": "90", "confirm": "no", "conversations": "1", "messages": "3"},
    {"older_than_days": "90", "confirm": "yes"},
    {"older_than_days": "90", "confirm": "yes", "conversations": "one", "messages": "3"},
])
def test_a_prune_without_confirmation_deletes_nothing(client, admin, data):
    old = conversation(messages=3, age_days=100)
    response = client.post("/admin/prune/run/", data)
    assert response.status_code == 422
    html = response.content.decode()
    assert "Tick the box to confirm the counts" in html and 'id="confirm-conversations">1<' in html
    assert Conversation.objects.filter(pk=old.pk).exists() and not PruneRun.objects.exists()


def test_a_prune_whose_counts_changed_since_the_preview_asks_again(client, admin):
    first = conversation(messages=3, age_days=100)
    confirmed = {"older_than_days": "90", "confirm": "yes", "conversations": "1", "messages": "3"}
    second = conversation(messages=2, age_days=100)  # aged in after the admin looked
    response = client.post("/admin/prune/run/", confirmed)
    assert response.status_code == 409
    html = response.content.decode()
    assert "The preview changed since you confirmed it (1 conversations, 3 messages)" in html
    assert 'id="confirm-conversations">2<' in html and 'id="confirm-messages">5<' in html
    assert Conversation.objects.filter(pk__in=[first.pk, second.pk]).count() == 2
    assert not PruneRun.objects.exists()


def test_an_htmx_prune_run_redirects_the_whole_page(client, admin):
    conversation(messages=1, age_days=100)
    response = client.post("/admin/prune/run/", {"older_than_days": "90", "confirm": "yes", "conversations": "1",
                                                 "messages": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204 and response["HX-Redirect"].startswith("/admin/prune/runs/")


@pytest.mark.parametrize("days", ["0", "abc", "", "999999"])
def test_the_prune_page_rejects_a_bad_period(client, admin, days):
    conversation(messages=1, age_days=100)
    if days:
        assert client.get(f"/admin/prune/?older_than_days={days}").status_code == 422
    response = client.post("/admin/prune/run/", {"older_than_days": days})
    assert response.status_code == 422 and b"older_than_days must be" in response.content
    assert Conversation.objects.count() == 1


def test_the_progress_fragment_shows_a_running_prune(client, admin):
    from django.utils import timezone
    run = PruneRun.objects.create(actor="system", older_than_days=90, cutoff=timezone.now(), batch_size=10,
                                  total_rows=200, done_rows=50)
    html = client.get("/admin/prune/progress/").content.decode()
    assert 'id="prune-progress"' in html and "50 of 200 rows" in html and 'value="25"' in html
    assert f"/admin/prune/runs/{run.pk}/" in html


@pytest.mark.django_db(transaction=True)
def test_a_deletion_request_goes_through_preview_and_confirmation_to_a_receipt(client, admin):
    c = conversation(title="Case of Ottilie", subject="cust:ottilie", messages=2, text="Ottilie Vance wrote {i} lines")
    preview = client.post("/admin/deletion-requests/preview/", {"subject": "cust:ottilie", "conversation_ids": ""})
    html = preview.content.decode()
    assert preview.status_code == 200 and "Case of Ottilie" in html and 'id="count-messages">2<' in html
    assert Conversation.objects.filter(pk=c.pk).exists()

    unconfirmed = client.post("/admin/deletion-requests/execute/", {"subject": "cust:ottilie"})
    assert unconfirmed.status_code == 422 and Conversation.objects.filter(pk=c.pk).exists()

    response = client.post("/admin/deletion-requests/execute/", {"subject": "cust:ottilie", "confirm": "yes"})
    receipt = DeletionReceipt.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/admin/receipts/{receipt.pk}/"
    assert not Conversation.objects.filter(pk=c.pk).exists()
    page = client.get(response["Location"]).content.decode()
    assert "Verified" in page and receipt.subject_sha256 in page and "ottilie" not in page.lower()
    listing = client.get("/admin/receipts/").content.decode()
    assert str(receipt.pk) in listing

    download = client.get(f"/admin/receipts/{receipt.pk}.json")
    assert download["Content-Disposition"].startswith("attachment;")
    document = json.loads(download.content)
    assert document["request_id"] == str(receipt.pk) and document["verification"]["found"] is False
    assert "ottilie" not in download.content.decode().lower()


def test_a_bad_deletion_request_is_shown_again_with_the_reason(client, admin):
    response = client.post("/admin/deletion-requests/preview/", {"subject": "", "conversation_ids": "zzz"})
    assert response.status_code == 422 and b"is not a conversation id" in response.content
    response = client.post("/admin/deletion-requests/preview/", {"subject": "  "})
    assert response.status_code == 422 and b"enter a subject" in response.content


@pytest.mark.django_db(transaction=True)
def test_deleting_one_conversation_from_its_page(client, admin):
    c = conversation(title="Delete me", subject="cust:d", messages=3)
    confirm = client.get(f"/admin/conversations/{c.pk}/delete/")
    assert confirm.status_code == 200 and b"Delete me" in confirm.content and b">3<" in confirm.content
    assert b'name="confirm" value="yes" required' in confirm.content and b"Nothing undoes this" in confirm.content
    for unconfirmed in ({}, {"confirm": "on"}):  # straight at the URL, without the tick: nothing is deleted
        response = client.post(f"/admin/conversations/{c.pk}/delete/", unconfirmed)
        assert response.status_code == 422 and b"nothing was deleted" in response.content
    assert Conversation.objects.filter(pk=c.pk).exists() and not DeletionReceipt.objects.exists()
    response = client.post(f"/admin/conversations/{c.pk}/delete/", {"confirm": "yes"})
    receipt = DeletionReceipt.objects.get()
    assert response["Location"] == f"/admin/receipts/{receipt.pk}/"
    assert receipt.kind == "conversation" and not Conversation.objects.filter(pk=c.pk).exists()
    assert client.get(f"/admin/conversations/{c.pk}/delete/").status_code == 404
    assert client.get("/admin/conversations/not-a-uuid/delete/").status_code == 404


@pytest.mark.parametrize("mode", ["window", "at-once"])
def test_the_confirmations_say_when_the_files_are_cleaned(client, admin, settings, mode):
    # In two phases the files wait for the window: a confirmation that promised a search at once
    # would tell the admin something the receipt then contradicts ("erased", not "verified").
    settings.MEMORYUI_ERASURE_VERIFY = mode
    settings.MEMORYUI_ERASURE_DEADLINE_HOURS = 36
    c = conversation(title="Case of Ines", subject="cust:ines", messages=2)
    pages = [client.post("/admin/deletion-requests/preview/", {"subject": "cust:ines"}),
             client.get(f"/admin/conversations/{c.pk}/delete/")]
    for page in pages:
        html = page.content.decode()
        assert page.status_code == 200 and "Nothing undoes this" in html
        if mode == "window":
            assert "next maintenance window, within 36 hours" in html and "“erased”" in html
            assert "then searched to prove it" not in html
        else:
            assert "then searched to prove it" in html and "maintenance window" not in html


def test_unknown_receipts_and_runs_are_404(client, admin):
    for url in ("/admin/receipts/nope/", "/admin/receipts/00000000-0000-0000-0000-000000000000/",
                "/admin/receipts/nope.json", "/admin/prune/runs/999/", "/admin/receipts/?before=zzz"):
        assert client.get(url).status_code == 404, url
